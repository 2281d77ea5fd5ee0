"""The padding layers: zero, constant, reflection, replication and circular padding of 1, 2 or 3 trailing dims,
each F.pad with its mode, printed as torch's."""

from .._int_args import int_or_ints
from . import functional as F
from .module import Module


class _Pad(Module):
    n, mode = 1, "constant"

    def __init__(self, padding):
        super().__init__()
        n = type(self).n
        self.padding = int_or_ints(padding, 2 * n)
        if len(self.padding) != 2 * n:
            raise ValueError(f"{type(self).__name__} expects padding of length {2 * n}, but got {len(self.padding)}")

    def forward(self, input):
        return F.pad(input, self.padding, type(self).mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPad(_Pad):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ZeroPad(_ConstantPad):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


def _pads(n, mode, kind, doc):
    # as torch's, ZeroPad{n}d is a ConstantPad{n}d (made before it) with the value 0
    bases = {"ConstantPad": (_ConstantPad,), "ZeroPad": (_ZeroPad, globals().get(f"ConstantPad{n}d"))}
    return type(
        f"{kind}{n}d",
        bases.get(kind, (_Pad,)),
        {"n": n, "mode": mode, "__doc__": doc.format(n=n), "__module__": __name__},
    )


_KINDS = {
    "ConstantPad": ("constant", "Pads the last {n} dims with `value`."),
    "ZeroPad": ("constant", "Pads the last {n} dims with zeros."),
    "ReflectionPad": ("reflect", "Pads the last {n} dims with their reflection (the edge not repeated)."),
    "ReplicationPad": ("replicate", "Pads the last {n} dims by repeating their edge values."),
    "CircularPad": ("circular", "Pads the last {n} dims by wrapping around."),
}
for _kind, (_mode, _doc) in _KINDS.items():
    for _n in (1, 2, 3):
        globals()[f"{_kind}{_n}d"] = _pads(_n, _mode, _kind, _doc)
