"""dtypes with torch's names and torch's type-promotion rules, mapped onto NumPy/JAX dtypes."""

import builtins
import functools

import jax
import ml_dtypes  # bfloat16's NumPy dtype, shipped with JAX
import numpy as np

from ._foreign import TORCH_TENSOR_PASSED, is_torch_tensor
from ._x64 import scoped

_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


class dtype:
    """A tensor element type; `np` is the NumPy/JAX dtype behind it; `type_name` and `cpp_name` are torch's names
    of it in messages (Float, float)."""

    __slots__ = ("name", "np", "kind", "type_name", "cpp_name")

    def __init__(self, name, np_dtype, type_name, cpp_name):
        self.name, self.np = name, np.dtype(np_dtype)
        self.type_name, self.cpp_name = type_name, cpp_name
        self.kind = "f" if name == "bfloat16" else self.np.kind  # NumPy files bfloat16 under "V"

    def __repr__(self):
        return f"torch.{self.name}"

    def __reduce__(self):
        return (from_numpy_dtype, (self.np,))

    @property
    def is_floating_point(self):
        """Whether this is a (real) floating point type."""
        return self.kind == "f"

    @property
    def is_complex(self):
        """Whether this is a complex type."""
        return self.kind == "c"

    @property
    def is_signed(self):
        """Whether this type can represent negative values."""
        return self.kind not in "bu"

    @property
    def itemsize(self):
        """The size of one element in bytes."""
        return self.np.itemsize


float16 = dtype("float16", np.float16, "Half", "c10::Half")
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, "BFloat16", "c10::BFloat16")
float32 = dtype("float32", np.float32, "Float", "float")
float64 = dtype("float64", np.float64, "Double", "double")
uint8 = dtype("uint8", np.uint8, "Byte", "unsigned char")
int8 = dtype("int8", np.int8, "Char", "signed char")
int16 = dtype("int16", np.int16, "Short", "short int")
int32 = dtype("int32", np.int32, "Int", "int")
int64 = dtype("int64", np.int64, "Long", "long int")
bool = dtype("bool", np.bool_, "Bool", "bool")  # noqa: A001  (torch's name)
complex64 = dtype("complex64", np.complex64, "ComplexFloat", "c10::complex<float>")
complex128 = dtype("complex128", np.complex128, "ComplexDouble", "c10::complex<double>")
half, double, long, cfloat, cdouble = float16, float64, int64, complex64, complex128

ALL = (float16, bfloat16, float32, float64, uint8, int8, int16, int32, int64, bool, complex64, complex128)
_BY_NP = {d.np: d for d in ALL}


@functools.cache
def differentiable(np_dtype):
    """Whether values of this NumPy dtype have gradients (floating point and complex)."""
    return np_dtype.kind in "fc" or np_dtype == ml_dtypes.bfloat16


def from_numpy_dtype(np_dtype):
    d = _BY_NP.get(np_dtype)  # an array's dtype, the common case: no np.dtype() conversion
    if d is not None:
        return d
    try:
        return _BY_NP[np.dtype(np_dtype)]
    except KeyError:
        raise TypeError(f"unsupported element type {np.dtype(np_dtype)}") from None


def to_dtype(d, argument="dtype"):
    """Accept a bg dtype, a NumPy/JAX dtype or its name; raise naming `argument` otherwise."""
    if isinstance(d, dtype):
        return d
    try:
        return from_numpy_dtype(d)
    except TypeError:
        raise TypeError(f"{argument} must be a dtype such as batched_grad.float32, but got {d!r}") from None


_default_float = [float32]


def get_default_dtype():
    """The dtype of float tensors made from Python floats (float32 unless set_default_dtype changed it)."""
    return _default_float[0]


def set_default_dtype(d):
    """Set the dtype of Python floats (and of float factories); float16, bfloat16, float32 or float64."""
    if not isinstance(d, dtype):
        raise TypeError("invalid dtype object: only floating-point types are supported as the default type")
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _default_float[0] = d


def category(d):
    return _CATEGORY[d.kind]


def promote_types(a, b):
    if a is None or b is None or a is b:
        return a or b
    return _promote_pair(a, b)


@functools.cache
@scoped
def _promote_pair(a, b):
    return from_numpy_dtype(jax.numpy.promote_types(a.np, b.np))


def _to_complex(d):
    return complex128 if d is float64 else complex64


def _combine(higher, lower):
    """torch's combine_categories: `higher` outranks `lower` by dimensionality class."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_complex:
        return higher
    if lower.is_complex:
        return _to_complex(higher) if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher is bool or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def scalar_dtype(x):
    """The dtype torch gives a Python number taking part in an op (a 'wrapped number')."""
    if isinstance(x, (builtins.bool, np.bool_)):
        return bool
    if isinstance(x, (int, np.integer)):
        return int64
    if isinstance(x, (float, np.floating)):
        return get_default_dtype()
    if isinstance(x, (complex, np.complexfloating)):
        return _to_complex(get_default_dtype())
    raise TypeError(f"expected a Tensor or a Python number, but got {type(x).__name__}")


_PYTHON_NUMBERS = frozenset({builtins.bool, int, float, complex})
_RESULT_TYPES = {}  # {(the default float dtype, per operand its kind): the result dtype}


def result_type(*operands):
    """torch.result_type over Tensors and Python numbers (dimension-aware promotion). Where every operand is a
    Python number or a Tensor, the result is looked up by what it depends on: the type of each number, the NumPy
    dtype of each Tensor's value and whether it is 0-d, and the default float dtype."""
    key = [_default_float[0]]
    for x in operands:
        kind = type(x)
        if kind in _PYTHON_NUMBERS:
            key.append(kind)
            continue
        value = getattr(x, "_v", None)  # a Tensor's value (an array, or what stands for one)
        if value is None:
            return _result_type(operands)
        key.append((value.dtype, not value.shape))
    key = tuple(key)
    found = _RESULT_TYPES.get(key)
    if found is None:
        found = _RESULT_TYPES[key] = _result_type(operands)
    return found


def _result_type(operands):
    dim = zero = wrapped = None
    for x in operands:
        d = None if isinstance(x, np.generic) else getattr(x, "dtype", None)  # NumPy scalars act as numbers
        if d is None:
            wrapped = promote_types(wrapped, scalar_dtype(x))
            continue
        d = d if isinstance(d, dtype) else _array_dtype(x)  # NumPy and JAX arrays act as tensors
        if x.ndim == 0:
            zero = promote_types(zero, d)
        else:
            dim = promote_types(dim, d)
    return _combine(dim, _combine(zero, wrapped))


def _array_dtype(x):
    try:
        return from_numpy_dtype(x.dtype)
    except TypeError:
        if is_torch_tensor(x):
            raise TypeError(TORCH_TENSOR_PASSED) from None
        raise


def float_result(d):
    """The dtype of an op that always produces floats (sqrt, mean, true division, ...)."""
    return d if d.is_floating_point or d.is_complex else get_default_dtype()


def not_implemented(kernel, dtype):
    """torch's error for a kernel without a version for `dtype`."""
    return NotImplementedError(f"\"{kernel}\" not implemented for '{dtype.type_name}'")


def cast(a, dtype):
    """The JAX array `a` as `dtype`, as torch casts: a complex array to a real dtype keeps its real part."""
    if jax.numpy.iscomplexobj(a) and not jax.numpy.issubdtype(dtype, jax.numpy.complexfloating):
        a = jax.numpy.real(a)
    return a.astype(dtype)
