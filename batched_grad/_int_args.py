"""Integer arguments as torch's argument parser reads them: a Python or NumPy integer, or an integer tensor of one
element (a size or count computed with tensors, as in torch.randint(0, n, (3,)) with n a 0-d int64 tensor)."""

import operator

import numpy as np

from . import _dtypes
from ._tensor import Tensor


def is_int_arg(x):
    """Whether `x` is taken where torch expects an int (a bool is not)."""
    if isinstance(x, Tensor):
        d = x.dtype
        return not (d.is_floating_point or d.is_complex or d is _dtypes.bool) and x.numel() == 1
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def int_or_ints(value, repeat=1):
    """An int[] argument as a tuple: a sequence as it is, or one integer standing for `repeat` copies of itself (a
    bool is read as an int here, as before)."""
    if isinstance(value, bool) or is_int_arg(value):
        return (operator.index(value),) * repeat
    return tuple(value)
