"""The padding layers: zero, constant, reflection, replication and circular padding of 1, 2 or 3 trailing dims,
each F.pad with its mode, printed as torch's."""

from . import functional as F
from .module import Module


class _Pad(Module):
    n, mode = 1, "constant"

    def __init__(self, padding):
        super().__init__()
        n = type(self).n
        self.padding = (padding,) * (2 * n) if isinstance(padding, int) else tuple(padding)
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
    return type(
        f"{kind}{n}d",
        (_Pad if kind != "ConstantPad" else _ConstantPad,) if kind != "ZeroPad" else (_ZeroPad,),
        {"n": n, "mode": mode, "__doc__": doc.format(n=n), "__module__": __name__},
    )


_KINDS = {
    "ZeroPad": ("constant", "Pads the last {n} dims with zeros."),
    "ConstantPad": ("constant", "Pads the last {n} dims with `value`."),
    "ReflectionPad": ("reflect", "Pads the last {n} dims with their reflection (the edge not repeated)."),
    "ReplicationPad": ("replicate", "Pads the last {n} dims by repeating their edge values."),
    "CircularPad": ("circular", "Pads the last {n} dims by wrapping around."),
}
globals().update({f"{kind}{n}d": _pads(n, mode, kind, doc) for kind, (mode, doc) in _KINDS.items() for n in (1, 2, 3)})
