"""Tensor factories: tensor, as_tensor, from_numpy, zeros/ones/full/eye/arange/linspace, *_like, random."""

import builtins
import collections.abc
import functools
import math
import operator
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from . import _dtypes, _memory_format
from ._dtypes import not_implemented
from ._foreign import not_a_tensor, reject_torch_tensors
from ._generator import resolve
from ._host import share
from ._int_args import is_int_arg
from ._layout_types import takes_layout
from ._meta import MetaValue, device_for, meta_value, names_meta
from ._mt19937 import _fma64 as fma64
from ._ops.random_draws import sample, sample_like
from ._ops.rows_like import rows_like
from ._simd_math import fma
from ._tensor import REQUIRES_GRAD_DTYPE, Tensor, python_type_name, warn_once, warn_once_at_caller
from ._x64 import scoped

_ARRAYS = (np.ndarray, np.generic, jax.Array)
COPY_CONSTRUCT_WARNING = (
    "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
    "sourceTensor.detach().clone().requires_grad_(True), rather than torch.tensor(sourceTensor)."
)
READ_ONLY_ARRAY = (
    "The given NumPy array is not writable, and PyTorch does not support non-writable tensors. This means writing to "
    "this tensor will result in undefined behavior. You may want to copy the array to protect its data or make it "
    "writable before converting it to a tensor. This type of warning will be suppressed for the rest of this program."
)
_NEGATIVE_SIZE = {"zeros": "zeros: Dimension size must be non-negative."}  # torch's wording differs per factory


def _leaf(value, requires_grad):
    """A new leaf holding `value` (host data, a meta value, or a Tensor's)."""
    t = value if isinstance(value, Tensor) else Tensor._wrap(value)
    if requires_grad:
        t._set_requires_grad(True, REQUIRES_GRAD_DTYPE)
    return t


def _finish(value, requires_grad, device):
    """A new leaf holding `value`, or only its shape and dtype where `device` (None: the default) names the meta
    device."""
    if names_meta(device) and not isinstance(value, Tensor):
        value = meta_value(value.shape, value.dtype)
    return _leaf(value, requires_grad)


def _made(make, shape, d, requires_grad, device):
    """A new leaf of `shape` and dtype `d`: the host data `make()` makes, or on the meta device none (nothing is
    made, nor drawn from a generator)."""
    return _leaf(meta_value(shape, d.np) if names_meta(device) else make(), requires_grad)


# ---- tensor(data): torch's dtype inference and shape checks ---------------------------------------------
LIST_OF_ARRAYS_WARNING = (
    "Creating a tensor from a list of numpy.ndarrays is extremely slow. Please consider converting the list to a "
    "single numpy.ndarray with numpy.array() before converting to a tensor."
)


def _is_sequence(data):
    """Whether tensor() reads `data` as a sequence, as torch does any Python sequence (list, tuple, range, deque,
    array.array, ...) but a string."""
    return isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes, bytearray))


def _infer_dtype(data):
    """torch's infer_scalar_type: numbers get the defaults, arrays and Tensors keep theirs, lists promote."""
    if isinstance(data, Tensor):
        return data.dtype
    if isinstance(data, _ARRAYS):
        return _dtypes.from_numpy_dtype(data.dtype)
    if isinstance(data, (bool, int, float, complex)):
        return _dtypes.scalar_dtype(data)
    if _is_sequence(data):
        result = None
        for item in data:
            result = _dtypes.promote_types(result, _infer_dtype(item))
        return result or _dtypes.get_default_dtype()
    if isinstance(data, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    reject_torch_tensors(data)
    raise RuntimeError(f"Could not infer dtype of {type(data).__name__}")


def _sizes(data):
    """The shape torch reads from nested sequences: follow the first element down."""
    sizes = []
    while _is_sequence(data):
        sizes.append(len(data))
        if not data:
            break
        data = data[0]
    if sizes and isinstance(data, np.ndarray) and data.ndim == 0:  # torch takes it for a sequence, and asks its len
        raise TypeError("len() of unsized object")
    if isinstance(data, Tensor) and sizes:  # a Tensor in a list stands for its one number
        return sizes
    return sizes + list(np.shape(data))


def _check_nested(data, sizes, dim=0):
    if isinstance(data, Tensor) and 0 < dim < len(sizes):  # within the nesting torch reads a tensor as a sequence
        if data.ndim == 0:
            raise TypeError("not a sequence")
        data = list(data)
    if not _is_sequence(data):
        if isinstance(data, Tensor) and dim:
            if data.numel() != 1:
                raise ValueError("only one element tensors can be converted to Python scalars")
            return
        if dim < len(sizes) and not isinstance(data, (Tensor,) + _ARRAYS):
            raise TypeError(f"not a sequence: tensor() expected a sequence at dim {dim}, but got {type(data).__name__}")
        return
    if dim >= len(sizes):
        raise TypeError(f"tensor() expected a number at dim {dim}, but got {type(data).__name__}")
    if len(data) != sizes[dim]:
        raise ValueError(f"expected sequence of length {sizes[dim]} at dim {dim} (got {len(data)})")
    for item in data:
        _check_nested(item, sizes, dim + 1)


def _arrays_in(data):
    """How many NumPy arrays torch meets copying `data`'s nested sequences item by item (it warns at each): the
    arrays among the items, and the sub-arrays (rows, ...) of each it walks into."""
    if not _is_sequence(data):
        return 0
    return sum(_array_and_rows(item) if isinstance(item, np.ndarray) else _arrays_in(item) for item in data)


def _array_and_rows(array):
    return 1 + sum(math.prod(array.shape[:k]) for k in range(1, array.ndim))


def _numbers(data, levels):
    """Nested sequences with each Tensor in them replaced by its number (at the innermost of the `levels` levels of
    nesting) or its nested list (above it)."""
    if isinstance(data, Tensor):
        return data.tolist() if levels else data.item()
    return [_numbers(x, levels - 1) for x in data] if _is_sequence(data) else data


def _check_int_range(data):
    if _is_sequence(data):
        for item in data:
            _check_int_range(item)
    elif isinstance(data, int) and not -(2**63) <= data < 2**63:
        raise ValueError("Overflow when unpacking long long")


@scoped
def tensor(data, dtype=None, requires_grad=False, device=None):
    """A new leaf tensor holding a copy of `data` (number, nested list, NumPy/JAX array or Tensor)."""
    if isinstance(data, Tensor):
        warnings.warn(COPY_CONSTRUCT_WARNING, UserWarning, stacklevel=3)  # past _x64.scoped
    d = _dtypes.to_dtype(dtype) if dtype is not None else _infer_dtype(data)
    if isinstance(data, Tensor):
        value = data._value
    elif isinstance(data, _ARRAYS):
        value = data
    else:
        sizes = _sizes(data)
        _check_nested(data, sizes)
        for _ in range(_arrays_in(data) if math.prod(sizes) else 0):  # torch copies no elements of an empty one
            warn_once_at_caller(LIST_OF_ARRAYS_WARNING)
        if d.is_floating_point is False and d.is_complex is False:
            _check_int_range(data)
        with np.errstate(over="ignore"):  # like torch, out-of-range floats become inf
            value = np.array(_numbers(data, len(sizes)) if not isinstance(data, range) else list(data), dtype=d.np)
    if isinstance(value, MetaValue) or names_meta(device):  # no values to copy, or none kept
        return _leaf(meta_value(value.shape, d.np), requires_grad)
    if isinstance(value, jax.Array):
        return _leaf(jnp.asarray(value, dtype=d.np), requires_grad)
    return _leaf(np.array(value, dtype=d.np), requires_grad)  # a host copy, moved to the device when first used


def as_tensor(data, dtype=None, device=None):
    """`data` as a tensor, shared where torch shares it: a Tensor of the right dtype is returned as it is, and a
    NumPy array of it gives a tensor sharing its memory (see from_numpy); anything else is copied."""
    if isinstance(data, Tensor) and (dtype is None or _dtypes.to_dtype(dtype) is data.dtype):
        return data
    if isinstance(data, Tensor):
        return data.to(dtype)
    if isinstance(data, np.ndarray):
        shared = from_numpy(data)  # torch's checks of the array, then its dtype
        if dtype is None or _dtypes.to_dtype(dtype) is shared.dtype:
            return shared
    return tensor(data, dtype)


def from_numpy(ndarray):
    """A tensor that shares the array's memory, as torch's does: NumPy's writes reach the tensor and the tensor's
    in-place writes reach the array. It stays on the host: every op that reads it copies the array then."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {python_type_name(ndarray)})")
    if not ndarray.dtype.isnative:
        raise ValueError(
            "given numpy array has byte order different from the native byte order. Conversion between "
            "byte orders is currently not supported."
        )
    _dtypes.from_numpy_dtype(ndarray.dtype)
    if builtins.any(s < 0 for s in ndarray.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with negative "
            "strides are not currently supported. (You can probably work around this by making a copy "
            "of your array  with array.copy().) "
        )
    if not ndarray.flags.writeable:
        warn_once(READ_ONLY_ARRAY)
    return Tensor._wrap(share(ndarray))


def from_jax(array):
    """Wrap a JAX array (no copy)."""
    if not isinstance(array, jax.Array):
        raise TypeError(f"from_jax(): argument 'array' must be a jax.Array, but got {type(array).__name__}")
    return Tensor._wrap(array)


# ---- shapes and dtypes of the other factories -------------------------------------------------------------
def _size(size, fn="zeros"):
    """Accept f(2, 3), f((2, 3)) and f([2, 3]) like torch."""
    if len(size) == 1 and not is_int_arg(size[0]):
        if not isinstance(size[0], (tuple, list)):
            kind = python_type_name(size[0])
            raise TypeError(f"{fn}(): argument 'size' (position 1) must be tuple of ints, not {kind}")
        size = size[0]
    for i, s in enumerate(size):
        if not is_int_arg(s):
            raise TypeError(
                f"{fn}(): argument 'size' failed to unpack the object at pos {i + 1} with error "
                f'"type must be tuple of ints,but got {python_type_name(s)}"'
            )
    size = tuple(operator.index(s) for s in size)
    if builtins.any(s < 0 for s in size):
        raise RuntimeError(
            _NEGATIVE_SIZE.get(
                fn, f"Trying to create tensor with negative dimension {builtins.min(size)}: {list(size)}"
            )
        )
    return size


_NO_SIZE = object()  # size= not given (torch's message for size=None names NoneType)


def _varargs_size(fn, args, size=_NO_SIZE):
    """The size of f(2, 3), f((2, 3)), f([2, 3]) or f(size=(2, 3))."""
    if size is not _NO_SIZE:
        if args:
            raise TypeError(f"{fn}() got multiple values for argument 'size'")
        if not isinstance(size, (tuple, list)) or not builtins.all(is_int_arg(s) for s in size):
            raise TypeError(f"{fn}(): argument 'size' must be tuple of ints, not {python_type_name(size)}")
        return _size((size,), fn)
    if not args:
        raise TypeError(f'{fn}() missing 1 required positional arguments: "size"')
    return _size(args, fn)


def _tuple_size(fn, size):
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"{fn}(): argument 'size' (position 1) must be tuple of ints, not {python_type_name(size)}")
    return _size((size,), fn)


def _dtype_or_default(dtype):
    return _dtypes.to_dtype(dtype) if dtype is not None else _dtypes.get_default_dtype()


def _number(x):
    """A Python number from a number or a one-element Tensor (torch's Scalar arguments)."""
    return x.item() if isinstance(x, Tensor) else x


# Constant tensors are built in NumPy and kept on the host until first used, like bg.tensor's data: jnp.zeros,
# jnp.eye and even jnp.asarray compile a small program for every new shape.
@takes_layout
def zeros(*args, size=_NO_SIZE, dtype=None, requires_grad=False, device=None):
    """A tensor of zeros of the given size (ints, one sequence, or `size=`), of the default float dtype unless
    `dtype`."""
    shape, d = _varargs_size("zeros", args, size), _dtype_or_default(dtype)
    return _made(lambda: np.zeros(shape, d.np), shape, d, requires_grad, device)


@takes_layout
def ones(*args, size=_NO_SIZE, dtype=None, requires_grad=False, device=None):
    """A tensor of ones of the given size (ints, one sequence, or `size=`), of the default float dtype unless
    `dtype`."""
    shape, d = _varargs_size("ones", args, size), _dtype_or_default(dtype)
    return _made(lambda: np.ones(shape, d.np), shape, d, requires_grad, device)


@takes_layout
def empty(*args, size=_NO_SIZE, dtype=None, requires_grad=False, device=None):
    """Uninitialized in torch; zeros here."""
    shape, d = _varargs_size("empty", args, size), _dtype_or_default(dtype)
    return _made(lambda: np.zeros(shape, d.np), shape, d, requires_grad, device)


@takes_layout
def full(size, fill_value, *, dtype=None, requires_grad=False, device=None):
    """A tensor of `size` filled with `fill_value`; the dtype follows the value (bool, int64, default float)."""
    fill_value = _number(fill_value)
    d = _dtypes.to_dtype(dtype) if dtype is not None else _dtypes.scalar_dtype(fill_value)
    shape = _tuple_size("full", size)
    return _made(lambda: _filled(shape, fill_value, d), shape, d, requires_grad, device)


def _filled(shape, fill_value, d):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.full(shape, fill_value, d.np)


@takes_layout
def eye(n, m=None, *, dtype=None, requires_grad=False, device=None):
    """An n x m (n x n by default) matrix with ones on the diagonal and zeros elsewhere."""
    for position, name, v in ((1, "n", n), (2, "m", m)):
        if v is not None and not is_int_arg(v):
            raise TypeError(f"eye(): argument '{name}' (position {position}) must be int, not {type(v).__name__}")
    n, m = operator.index(n), None if m is None else operator.index(m)
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    return _finish(np.eye(n, n if m is None else m, dtype=_dtype_or_default(dtype).np), requires_grad, device)


@takes_layout
def arange(start, end=None, step=1, *, dtype=None, requires_grad=False, device=None):
    """Values from `start` to `end` (exclusive) by `step`; int64 when all are integers."""
    start, end, step = _number(start), _number(end), _number(step)
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = (
            _dtypes.int64 if builtins.all(is_int_arg(v) for v in (start, end, step)) else _dtypes.get_default_dtype()
        )
    d = _dtypes.to_dtype(dtype)
    if d is _dtypes.bool or d.is_complex:
        raise not_implemented("arange_cpu", d)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    n = builtins.max(math.ceil((end - start) / step), 0)
    if not d.is_floating_point:  # torch casts start and step to the integer type first
        start, step = int(start), int(step)
        if step == 0:
            raise RuntimeError("step must be nonzero")
    values = start + step * np.arange(n, dtype=np.float64 if d.is_floating_point else np.int64)
    return _finish(values.astype(d.np), requires_grad, device)


@takes_layout
def linspace(start, end, steps, *, dtype=None, requires_grad=False, device=None):
    """`steps` evenly spaced values from `start` to `end` (both included)."""
    if not is_int_arg(steps):
        raise TypeError(f"linspace(): argument 'steps' must be int, not {type(steps).__name__}")
    steps = operator.index(steps)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    d = _dtype_or_default(dtype)
    start, end = range_ends("linspace", start, end, d)
    if not d.is_floating_point:  # torch casts the ends to the integer type first
        start, end = int(start), int(end)
    work = d.np.type if d.is_floating_point else np.float64  # float16 and bfloat16 round each operation, as c10::Half
    return _finish(linspace_values(start, end, steps, work).astype(d.np), requires_grad, device)


_C_INTEGER_NAMES = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int", "int64": "int64_t"}


def range_ends(name, start, end, d):
    """linspace's and logspace's ends as numbers, refused as torch refuses them: for bool, or out of an integer
    dtype's range."""
    start, end = _number(start), _number(end)
    if d is _dtypes.bool:
        raise not_implemented(f"{name}_cpu", d)
    if d.np.kind in "iu":
        info = np.iinfo(d.np)
        for value in (start, end):
            if not info.min <= value.real <= info.max:
                raise RuntimeError(f"value cannot be converted to type {_C_INTEGER_NAMES[d.np.name]} without overflow")
    return start, end


def linspace_values(start, end, steps, work):
    """torch's linspace as a NumPy array computed in the NumPy float type `work`: each half filled from its own
    end. Its CPU kernel is a scalar loop whose multiply-add the compiler fuses: rounded once here too, bit for bit,
    at every length."""
    start, end, i = work(start), work(end), np.arange(steps)
    if steps == 1:
        return np.full(1, start)
    step = (end - start) / work(builtins.max(steps - 1, 1))
    first = i < steps // 2
    if work in (np.float32, np.float64):
        scale = np.where(first, step, -step).astype(work)
        count = np.where(first, i, steps - 1 - i).astype(work)
        origin = np.where(first, start, end).astype(work)
        return fma(scale, count, origin) if work is np.float32 else fma64(scale, count, origin)
    return np.where(first, start + step * i.astype(work), end - step * (steps - 1 - i).astype(work))


def _like(input, dtype, fn, memory_format=None):
    """The shape and dtype of a *_like result (the memory format checked, as torch checks it)."""
    if not isinstance(input, Tensor):
        raise not_a_tensor(fn, "input", input, 1)
    _memory_format.check(memory_format, fn, input.dim())
    return tuple(input.shape), (_dtypes.to_dtype(dtype) if dtype is not None else input.dtype)


def _sparse_like(factory):
    """`factory` (zeros_like, empty_like) that gives a sparse COO input's like a sparse COO tensor with no specified
    element, as torch's, unless a `layout` is given."""

    @functools.wraps(factory)
    def made(input, *, layout=None, dtype=None, requires_grad=False, device=None, memory_format=None):
        if layout is None and getattr(input, "_sparse_forms", None) is not None:
            from .sparse._grads import empty_like_sparse

            _, d = _like(input, dtype, made.__name__, memory_format)
            values = zeros((0, *input.shape[input.sparse_dim() :]), dtype=d, device=device_for(device, input))
            made_sparse = empty_like_sparse(input, values)
            return made_sparse.requires_grad_() if requires_grad else made_sparse
        return factory(
            input, layout=layout, dtype=dtype, requires_grad=requires_grad, device=device, memory_format=memory_format
        )

    return made


@_sparse_like
@takes_layout
def zeros_like(input, *, dtype=None, requires_grad=False, device=None, memory_format=None):
    """Zeros with `input`'s shape and dtype (unless `dtype`); for a sparse COO input, a sparse tensor of its size
    with no specified element."""
    shape, d = _like(input, dtype, "zeros_like", memory_format)
    return rows_like(zeros(shape, dtype=d, device=device_for(device, input)), input, requires_grad)


@takes_layout
def ones_like(input, *, dtype=None, requires_grad=False, device=None, memory_format=None):
    """Ones with `input`'s shape and dtype (unless `dtype`)."""
    shape, d = _like(input, dtype, "ones_like", memory_format)
    return rows_like(ones(shape, dtype=d, device=device_for(device, input)), input, requires_grad)


@_sparse_like
@takes_layout
def empty_like(input, *, dtype=None, requires_grad=False, device=None, memory_format=None):
    """An uninitialized tensor (zeros here) with `input`'s shape and dtype (unless `dtype`); for a sparse COO
    input, a sparse tensor of its size with no specified element."""
    shape, d = _like(input, dtype, "empty_like", memory_format)
    return rows_like(empty(shape, dtype=d, device=device_for(device, input)), input, requires_grad)


@takes_layout
def full_like(input, fill_value, *, dtype=None, requires_grad=False, device=None, memory_format=None):
    """`fill_value` with `input`'s shape and dtype (unless `dtype`)."""
    shape, d = _like(input, dtype, "full_like", memory_format)
    return rows_like(full(shape, fill_value, dtype=d, device=device_for(device, input)), input, requires_grad)


# ---- random ---------------------------------------------------------------------------------------------
def _float_dtype(dtype, kernel):
    d = _dtype_or_default(dtype)
    if not (d.is_floating_point or d.is_complex):
        raise not_implemented(kernel, d)
    return d


def _sample(draw, shape, d, complex_scale):
    """Real samples `draw(shape, real_dtype, scale)` (NumPy's float32 or float64); complex ones as torch's: the
    real and imaginary parts interleaved, one draw of twice the elements with its spread scaled."""
    real = np.float64 if d.np in (np.float64, np.complex128) else np.float32
    if not d.is_complex:
        return draw(shape, real, 1.0).astype(d.np)
    pairs = draw(tuple(shape) + (2,), real, complex_scale)
    return (pairs[..., 0] + 1j * pairs[..., 1]).astype(d.np)


_COMPLEX_STD = 1.0 / math.sqrt(2.0)  # torch: std / sqrt(2) for each part of a complex normal


def _uniform_draw(d):
    """rand's draw(bits, size) of dtype `d`."""
    return lambda bits, size: _sample(lambda s, real, _: bits.uniform(s, real), size, d, 1.0)


def _normal_draw(d, contiguous=True):
    """randn's draw(bits, size) of dtype `d`, into a `contiguous` storage or not (random_draws.sample_like)."""
    return lambda bits, size: _sample(
        lambda s, real, std: bits.normal(s, real, 0.0, std, contiguous), size, d, _COMPLEX_STD
    )


def _randint_draw(low, high, d):
    """randint's draw(bits, size) of [low, high) in dtype `d` (checked)."""
    _check_random_bounds(low, high, d)
    return lambda bits, size: bits.integers(size, low, high, d.np)


def _like_draws(input, memory_format, generator, fn, draw, strided_draw=None):
    """A *_like factory's draws: through `input`'s storage where the result keeps its layout (torch's
    preserve_format, the default), else row-major."""
    if memory_format is None or memory_format is _memory_format.preserve_format:
        return sample_like(generator, fn, input, draw, strided_draw)
    return sample(generator, fn, input.shape, draw)


@takes_layout
def rand(*args, size=_NO_SIZE, dtype=None, requires_grad=False, generator=None, device=None):
    """Uniform samples in [0, 1) of the given size (ints, one sequence, or `size=`), from `generator` (a
    bg.Generator; the default one if None)."""
    d = _float_dtype(dtype, "check_uniform_bounds")
    shape = _varargs_size("rand", args, size)
    return _made(
        lambda: sample(generator, "rand", shape, _uniform_draw(d)),
        shape,
        d,
        requires_grad,
        device,
    )


@takes_layout
def randn(*args, size=_NO_SIZE, dtype=None, requires_grad=False, generator=None, device=None):
    """Standard normal samples of the given size (ints, one sequence, or `size=`), from `generator` (a bg.Generator;
    the default one if None)."""
    d = _float_dtype(dtype, "normal_kernel_cpu")
    shape = _varargs_size("randn", args, size)
    return _made(
        lambda: sample(generator, "randn", shape, _normal_draw(d)),
        shape,
        d,
        requires_grad,
        device,
    )


@takes_layout
def randint(low=0, high=None, size=None, *, dtype=None, requires_grad=False, generator=None, device=None):
    """Integers in [low, high) (randint(high, size) also works), from `generator` (the default one if None)."""
    if size is None:
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    d = _dtypes.to_dtype(dtype) if dtype is not None else _dtypes.int64
    if high is None or not (is_int_arg(low) and is_int_arg(high)):
        raise TypeError(f"randint(): arguments 'low' and 'high' must be ints, but got {low!r} and {high!r}")
    low, high = operator.index(low), operator.index(high)
    draw = _randint_draw(low, high, d)
    shape = _tuple_size("randint", size)
    return _made(
        lambda: sample(generator, "randint", shape, draw),
        shape,
        d,
        requires_grad,
        device,
    )


def _check_random_bounds(low, high, d):
    """torch's checks of [low, high) for integers of dtype `d`."""
    if d.is_complex:
        raise RuntimeError("check_random_bounds handles only integral, floating-point and boolean types")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if d.is_floating_point or d is _dtypes.bool:
        return
    info = np.iinfo(d.np)
    if low < info.min:
        raise RuntimeError(f"from is out of bounds for {d.cpp_name}")
    if high - 1 > info.max:
        raise RuntimeError(f"to - 1 is out of bounds for {d.cpp_name}")


@takes_layout
def randint_like(
    input, low=None, high=None, *, dtype=None, requires_grad=False, generator=None, device=None, memory_format=None
):
    """Integers in [low, high) with `input`'s shape and dtype (unless `dtype`); randint_like(input, high) also
    works."""
    if high is None and low is None:
        raise TypeError("randint_like() missing required argument 'high'")
    if high is None:
        low, high = 0, low
    low = 0 if low is None else low
    if not (is_int_arg(low) and is_int_arg(high)):
        raise TypeError(f"randint_like(): arguments 'low' and 'high' must be ints, but got {low!r} and {high!r}")
    low, high = operator.index(low), operator.index(high)
    generator = resolve(generator, "randint_like")
    shape, d = _like(input, dtype, "randint_like", memory_format)
    draw = _randint_draw(low, high, d)
    return _made(
        lambda: _like_draws(input, memory_format, generator, "randint_like", draw),
        shape,
        d,
        requires_grad,
        device_for(device, input),
    )


@takes_layout
def rand_like(input, *, generator=None, dtype=None, requires_grad=False, device=None, memory_format=None):
    """Uniform samples in [0, 1) with `input`'s shape and dtype (unless `dtype`)."""
    generator = resolve(generator, "rand_like")
    shape, d = _like(input, dtype, "rand_like", memory_format)
    d = _float_dtype(d, "check_uniform_bounds")
    return _made(
        lambda: _like_draws(input, memory_format, generator, "rand_like", _uniform_draw(d)),
        shape,
        d,
        requires_grad,
        device_for(device, input),
    )


@takes_layout
def randn_like(input, *, generator=None, dtype=None, requires_grad=False, device=None, memory_format=None):
    """Standard normal samples with `input`'s shape and dtype (unless `dtype`)."""
    generator = resolve(generator, "randn_like")
    shape, d = _like(input, dtype, "randn_like", memory_format)
    d = _float_dtype(d, "normal_kernel_cpu")
    return _made(
        lambda: _like_draws(input, memory_format, generator, "randn_like", _normal_draw(d), _normal_draw(d, False)),
        shape,
        d,
        requires_grad,
        device_for(device, input),
    )
