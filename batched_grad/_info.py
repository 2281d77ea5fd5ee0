"""finfo and iinfo: the numerical limits of floating point and integer dtypes, with torch's fields and repr."""

import ml_dtypes

from . import _dtypes

_MISSING = object()
_PYTHON_TYPES = {float: _dtypes.float64, int: _dtypes.int64, bool: _dtypes.bool, complex: _dtypes.complex128}


def _check_dtype(name, type):
    """The dtype `type` names: a dtype, or a Python scalar type as torch reads one (float is float64)."""
    if isinstance(type, _dtypes.dtype):
        return type
    if type in _PYTHON_TYPES:
        return _PYTHON_TYPES[type]
    raise TypeError(f"{name}(): argument 'type' (position 1) must be torch.dtype, not {type.__class__.__name__}")


class _Limits:
    """Read-only fields, compared by value, printed as torch prints them (6 significant digits)."""

    __slots__ = ()
    _SHOWN = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"attribute '{name}' of 'torch.{type(self).__name__}' objects is not writable")

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self.__slots__)

    __hash__ = None  # as torch's: equal by value, not hashable

    def __repr__(self):
        shown = ", ".join(f"{f}={getattr(self, f):g}" for f in self._SHOWN)
        return f"{type(self).__name__}({shown}, dtype={self.dtype})"


class finfo(_Limits):
    """The limits of a floating point dtype (the default dtype if none is given; a complex dtype gives its real
    part's): bits, eps, max, min, tiny (= smallest_normal), resolution, and dtype (its name)."""

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")
    _SHOWN = ("resolution", "min", "max", "eps", "smallest_normal", "tiny")

    def __init__(self, type=_MISSING):
        type = _dtypes.get_default_dtype() if type is _MISSING else type
        type = _check_dtype("finfo", type)
        if type.is_complex:
            type = _dtypes.float64 if type is _dtypes.complex128 else _dtypes.float32
        if not type.is_floating_point:
            raise TypeError(
                "torch.finfo() requires a floating point input type. Use torch.iinfo to handle 'torch.finfo'"
            )
        info = ml_dtypes.finfo(type.np)
        fields = dict(
            bits=int(info.bits),
            eps=float(info.eps),
            max=float(info.max),
            min=float(info.min),
            tiny=float(info.smallest_normal),
            smallest_normal=float(info.smallest_normal),
            resolution=10.0 ** -int(info.precision),
            dtype=type.name,
        )
        for name, value in fields.items():
            object.__setattr__(self, name, value)


class iinfo(_Limits):
    """The limits of an integer dtype: bits, min, max, and dtype (its name)."""

    __slots__ = ("bits", "min", "max", "dtype")
    _SHOWN = ("min", "max")

    def __init__(self, type=_MISSING):
        if type is _MISSING:
            raise TypeError('iinfo() missing 1 required positional arguments: "type"')
        type = _check_dtype("iinfo", type)
        if type is _dtypes.bool:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if type.is_floating_point or type.is_complex:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'")
        info = ml_dtypes.iinfo(type.np)
        for name, value in dict(bits=int(info.bits), min=int(info.min), max=int(info.max), dtype=type.name).items():
            object.__setattr__(self, name, value)
