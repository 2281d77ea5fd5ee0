"""Tensor repr: torch's _tensor_str algorithm applied to NumPy arrays."""

import math
from dataclasses import dataclass

import jax
import numpy as np

from . import _dtypes, _nesting
from ._dual import tangent_of
from ._meta import MetaValue
from ._view_meta import grad_fn_unavailable


@dataclass
class PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool = None  # None: chosen from the values, as torch does


PRINT_OPTS = PrintOptions()
_PROFILES = {
    "default": PrintOptions(),
    "short": PrintOptions(precision=2, edgeitems=2),
    "full": PrintOptions(threshold=math.inf),
}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """torch.set_printoptions: how tensors print. `profile` ("default", "short", "full") sets the first four, then
    each one given overrides it; `sci_mode` True or False forces scientific notation on or off, None (the default at
    every call, as in torch) lets the values choose."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions(): profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        preset = _PROFILES[profile]
        PRINT_OPTS.precision, PRINT_OPTS.threshold = preset.precision, preset.threshold
        PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = preset.edgeitems, preset.linewidth
    given = {"precision": precision, "threshold": threshold, "edgeitems": edgeitems, "linewidth": linewidth}
    for name, value in given.items():
        if value is not None:
            setattr(PRINT_OPTS, name, value)
    PRINT_OPTS.sci_mode = sci_mode


class _Formatter:
    """Chooses one width and style (integer-valued, fixed or scientific) for all elements, like torch."""

    def __init__(self, a):
        self.floating = a.dtype.kind == "f"
        self.int_mode, self.sci_mode, self.width = True, False, 1
        if not self.floating:
            self.width = max([len(str(v)) for v in a.ravel().tolist()] + [1])
            return
        vals = a[np.isfinite(a) & (a != 0)]
        if vals.size == 0:
            return
        lo, hi = np.abs(vals).min(), np.abs(vals).max()
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        chosen = bool(hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4)
        self.sci_mode = chosen if PRINT_OPTS.sci_mode is None else PRINT_OPTS.sci_mode
        extra = 1 if self.int_mode and not self.sci_mode else 0  # the "." after integer-valued floats
        self.width = max(len(self._raw(v)) + extra for v in vals.tolist())

    def _raw(self, v):
        if self.sci_mode:
            return f"{v:.{PRINT_OPTS.precision}e}"
        return f"{v:.0f}" if self.int_mode else f"{v:.{PRINT_OPTS.precision}f}"

    def format(self, v):
        if not self.floating:
            s = str(v)
        elif self.sci_mode:
            s = f"{v:{self.width}.{PRINT_OPTS.precision}e}"
        else:
            s = self._raw(v) + ("." if self.int_mode and math.isfinite(v) else "")
        return s.rjust(self.width)


def _element(v, fmts):
    if len(fmts) == 1:
        return fmts[0].format(v)
    real, imag = fmts[0].format(v.real), (fmts[1].format(v.imag) + "j").lstrip()
    return real + imag if imag[0] in "+-" else real + "+" + imag


def _summarized(a):
    """The elements a summarized print shows (torch's get_summarized_data)."""
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * PRINT_OPTS.edgeitems:
        a = np.concatenate([a[: PRINT_OPTS.edgeitems], a[-PRINT_OPTS.edgeitems :]])
    return a if a.ndim == 1 else np.stack([_summarized(x) for x in a])


def _body(a, indent, summarize, fmts):
    if a.ndim == 0:
        return _element(a.item(), fmts)
    if a.ndim == 1:
        width = fmts[0].width + 2 + (fmts[1].width + 1 if len(fmts) > 1 else 0)
        per_line = max(1, (PRINT_OPTS.linewidth - indent) // width)
        if summarize and a.shape[0] > 2 * PRINT_OPTS.edgeitems:
            data = (
                [_element(v, fmts) for v in a[: PRINT_OPTS.edgeitems].tolist()]
                + [" ..."]
                + [_element(v, fmts) for v in a[-PRINT_OPTS.edgeitems :].tolist()]
            )
        else:
            data = [_element(v, fmts) for v in a.tolist()]
        lines = [", ".join(data[i : i + per_line]) for i in range(0, len(data), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = range(a.shape[0])
    if summarize and a.shape[0] > 2 * PRINT_OPTS.edgeitems:
        rows = list(range(PRINT_OPTS.edgeitems)) + [None] + list(range(a.shape[0] - PRINT_OPTS.edgeitems, a.shape[0]))
    slices = ["..." if i is None else _body(a[i], indent + 1, summarize, fmts) for i in rows]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _values_str(a, indent):
    if a.size == 0:
        return "[]"
    summarize = a.size > PRINT_OPTS.threshold
    if a.dtype.kind == "V" or a.dtype.kind == "f":  # bfloat16's NumPy kind is "V"
        a = a.astype(np.float64)
    shown = _summarized(a) if summarize else a
    parts = (shown.real, shown.imag) if a.dtype.kind == "c" else (shown,)
    return _body(a, indent, summarize, [_Formatter(p) for p in parts])


def _values_body(value, dtype, indent):
    """The values as torch prints them (a traced value's shape and dtype)."""
    if isinstance(value, jax.core.Tracer):
        return f"<traced {dtype.name}{list(value.shape)}>"
    return _values_str(np.asarray(value), indent)


def _value_suffixes(shape, dtype, default):
    """The size and dtype suffixes of a tensor with values: shown where the values do not tell them."""
    if math.prod(shape) == 0:
        size = [f"size={tuple(shape)}"] if len(shape) != 1 else []
        return size + ([f"dtype={dtype!r}"] if dtype is not default else [])
    if dtype not in (default, _dtypes._to_complex(default), _dtypes.int64, _dtypes.bool):
        return [f"dtype={dtype!r}"]
    return []


def autograd_suffixes(t):
    """What repr says of a tensor's place in the graph: its grad_fn, or requires_grad for a leaf."""
    if grad_fn_unavailable(t):  # torch's grad_fn raises for it
        return ["grad_fn=<Invalid>"]
    if t.grad_fn is not None:
        return [f"grad_fn=<{t.grad_fn.name().rsplit('::', 1)[-1]}>"]
    return ["requires_grad=True"] if t.requires_grad else []


def format_tensor(t):
    """repr(t) as torch prints it: inside running function transforms, with the wrappers of the levels that wrap it
    (_wrappers.py)."""
    if _nesting.levels():
        from ._wrappers import wrapped_repr

        text = wrapped_repr(t)
        if text is not None:
            return text
    value = t._v if type(t._v) is MetaValue else t._value
    tangent = tangent_of(t)
    tangent_suffix = [] if tangent is None else [f"tangent={tangent!r}"]
    return format_value(value, t.dtype, autograd_suffixes(t) + tangent_suffix, _prefix(type(t)))


def _prefix(cls):
    """torch's: "tensor(" for a Tensor or a Parameter, the class's name for an instance of another subclass."""
    from ._tensor import Tensor
    from .nn.parameter import Parameter

    return "tensor(" if cls is Tensor or cls is Parameter else f"{cls.__name__}("


def format_value(value, dtype, extra, prefix="tensor("):
    """The repr torch gives a tensor of `value` (an array, or a MetaValue) and `dtype`, with the suffixes `extra`."""
    indent = len(prefix)
    default = _dtypes.get_default_dtype()
    shape = tuple(value.shape)
    if type(value) is MetaValue:  # a meta tensor: no values
        body, suffixes = "...", ["device='meta'", f"size={shape}"]
        if dtype is not default:
            suffixes.append(f"dtype={dtype!r}")
    else:
        body, suffixes = _values_body(value, dtype, indent), _value_suffixes(shape, dtype, default)
    suffixes += extra
    out = prefix + body
    last_line = len(out) - out.rfind("\n") + 1
    for s in suffixes:
        if last_line + len(s) + 2 > PRINT_OPTS.linewidth:
            out += ",\n" + " " * indent + s
            last_line = indent + len(s)
        else:
            out += ", " + s
            last_line += len(s) + 2
    return out + ")"
