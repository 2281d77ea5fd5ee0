"""Integer arguments as torch's argument parser reads them: a Python or NumPy integer, or an integer tensor of one
element (a size or count computed with tensors, as in torch.randint(0, n, (3,)) with n a 0-d int64 tensor)."""

import functools
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


def sizes_also_by_keyword(keyword):
    """For a method `fn(input, *sizes, ...)`: the sizes may also be given as one sequence by `keyword`, as torch's
    parser takes them (x.reshape(shape=(2, 3)), x.permute(dims=[1, 0])), never both ways at once."""

    def wrap(fn):
        @functools.wraps(fn)
        def taking_sizes(input, *sizes, **kwargs):
            if keyword in kwargs:
                if sizes:
                    raise TypeError(f"{fn.__name__}() got multiple values for argument '{keyword}'")
                value = kwargs.pop(keyword)
                if not isinstance(value, (tuple, list)):
                    raise TypeError(
                        f"{fn.__name__}(): argument '{keyword}' must be tuple of ints, not {type(value).__name__}"
                    )
                sizes = (value,)
            return fn(input, *sizes, **kwargs)

        return taking_sizes

    return wrap
