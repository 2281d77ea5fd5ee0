"""NumPy forms (Op.host) of common float ops, which `apply` runs instead of a kernel on the CPU backend: a new shape
compiles nothing. Only for float32/float64 results of small operands (large ones run as kernels, as before)."""
import numpy as np

HOST_ELEMENTS = 1 << 16  # operands larger than this run as kernels
_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def small_floats(f):
    """The host form of the NumPy function `f`: operands cast to the op's `dtype` param (or all of one float dtype
    where it has none), as its kernel casts them; None (a kernel) for other dtypes or large operands."""

    def host(*arrays, **static):
        dtype = static.get("dtype", arrays[0].dtype)
        if np.dtype(dtype) not in _FLOATS:
            return None
        for a in arrays:
            if a.size > HOST_ELEMENTS or ("dtype" not in static and a.dtype != dtype):
                return None
        with np.errstate(all="ignore"):  # inf and nan as the kernel gives them, without NumPy's warnings
            return f(*[a.astype(dtype, copy=False) for a in arrays])

    return host
