"""A NumPy array as the other operand of a Tensor's binary operator, as torch handles it: torch's operator takes no
ndarray and returns NotImplemented, so Python asks the array, NumPy computes the result on the tensor's values
(Tensor.__array__, refused for a tensor that requires grad) in NumPy's dtypes, and hands it back as a Tensor
(Tensor.__array_wrap__). Where NumPy defers to the Tensor (the array on the left, ordering comparisons), Python raises
its TypeError, as with torch. NumPy scalars (np.float64(2.0)) are numbers and stay with the operator."""

import functools

import numpy as np

from .operators import ARITHMETIC, BITWISE

_REFLECTED = [f"__{form}{op}__" for op in ARITHMETIC + BITWISE for form in ("", "r", "i")]
# __eq__ takes an ndarray in torch (a bool tensor); __rtruediv__ is reciprocal(self) * other, which reaches the array
DEFERRING = frozenset(_REFLECTED + ["__ne__", "__lt__", "__le__", "__gt__", "__ge__"]) - {"__rdiv__", "__rtruediv__"}


def deferring_to_numpy(operator):
    """The Tensor operator `operator`, returning NotImplemented for an ndarray operand."""

    @functools.wraps(operator)
    def method(self, other, *rest):
        return NotImplemented if isinstance(other, np.ndarray) else operator(self, other, *rest)

    return method
