"""The JAX primitives that _numpy_eval.py computes on the host: one row per primitive, each computing what XLA's
CPU code computes, on float32, float64, integer and bool arrays.

Exact operations (arithmetic, comparisons, selects, conversions, moves of elements, sqrt, integer powers) run with
NumPy and give XLA's bits, including its answers where C and NumPy differ: integer division by zero, float-to-integer
conversion of nan and of values out of range, signed zeros in max, min and sign, integer powers as XLA's sequence of
multiplications. Sums and products (reduce_sum, dot_general, cumsum) give the same values up to the order of
summation, a few ulp of the sum's scale, as torch's own paths differ.

Transcendental functions (exp, log, sin, tanh, pow, erf, lgamma, ...) have no row: they run as XLA's own kernels
(_numpy_program.py), with XLA's values. NumPy's are not close enough: computed in float64 and rounded they
are within 1-2 ulp of XLA's float32 values (and 1-2 ulp in float64 for exp, log, sin, cos, tan, asin, acos, atan,
atan2, asinh, pow; measured on 200k points each), but XLA's own forms are up to 5 ulp off for float32 exp just below
overflow and several ulp to 129 ulp off elsewhere (float32 / float64: exp2 68 / 90, expm1 5 / 4, tanh 4 / 7, sinh
and cosh 24 / 17, atanh 3 / 129, log1p 2 / 124), and a 1 ulp difference in a value becomes thousands of ulp in a
derivative that cancels (sigmoid's y (1 - y) near saturation: 8191 ulp; sinc's: 49), across the tiers that
tests/test_tier_agreement.py compares. In float64 they do have rows (WIDENED), used only where the float64 values are
rounded to float32 before anything reads them (_numpy_program.py)."""

import numpy as np

from ._numpy_conv import conv_general_dilated
from ._numpy_windows import reduce_window
from ._simd_math import fused_multiply_add


def _float(a):
    return a.dtype.kind == "f"


# ---- arithmetic with XLA's special cases -----------------------------------------------------------------------
def _div(a, b):
    if _float(a):
        return np.true_divide(a, b)
    # C division (towards zero); XLA gives -1 (all ones) for a division by zero
    zero = b == 0
    safe = np.where(zero, np.ones_like(b), b)
    q = np.floor_divide(a, safe)
    q = q + ((q * safe != a) & ((a < 0) != (safe < 0))).astype(q.dtype)
    return np.where(zero, np.array(-1).astype(a.dtype), q)


def _rem(a, b):
    if _float(a):
        return np.fmod(a, b)
    # the remainder of C division (the sign of the dividend); XLA gives the dividend for a division by zero
    zero = b == 0
    safe = np.where(zero, np.ones_like(b), b)
    return np.where(zero, a, a - safe * _div(a, safe))


def _max(a, b):
    r = np.maximum(a, b)
    if _float(r):  # max(-0., 0.) is 0. either way round (NumPy gives its second operand)
        r = np.where(a == b, np.where(np.signbit(a), b, a), r)
    return r


def _min(a, b):
    r = np.minimum(a, b)
    if _float(r):
        r = np.where(a == b, np.where(np.signbit(a), a, b), r)
    return r


def _sign(a):
    if a.dtype.kind == "b":
        return a
    s = np.sign(a)
    return np.where(a == 0, a, s) if _float(a) else s  # sign(-0.) is -0.


def _round(a, rounding_method):
    if int(rounding_method) == 1:  # to nearest even
        return np.rint(a)
    t = np.trunc(a)  # away from zero; a - t is exact
    return np.where(np.abs(a - t) >= 0.5, t + np.sign(a), t)


def _integer_pow(x, y):
    # XLA's sequence of multiplications (square and multiply), each rounded as there
    if y == 0:
        return np.ones_like(x)
    n, acc = abs(y), None
    while n:
        if n & 1:
            acc = x if acc is None else acc * x
        n >>= 1
        if n:
            x = x * x
    return np.ones_like(acc) / acc if y < 0 else acc


def _convert(a, new_dtype, **_):
    new = np.dtype(new_dtype)
    if _float(a) and new.kind in "iu":  # truncated, saturated at the type's bounds, nan to 0
        info = np.iinfo(new)
        t = np.trunc(np.where(np.isnan(a), 0, a))
        below, above = t <= info.min, t >= info.max
        safe = np.where(below | above, 0, t).astype(new)
        return np.where(below, new.type(info.min), np.where(above, new.type(info.max), safe))
    if new.kind == "b":
        return a != 0
    return a.astype(new)


def _shift(kind):
    def shift(a, b):
        bits = a.dtype.itemsize * 8
        out = b.astype(np.int64)
        valid = (out >= 0) & (out < bits)
        count = np.where(valid, out, 0).astype(a.dtype)
        if kind == "left":
            return np.where(valid, np.left_shift(a, count), np.zeros_like(a))
        if kind == "arithmetic":
            return np.where(valid, np.right_shift(a, count), np.where(a < 0, -np.ones_like(a), np.zeros_like(a)))
        unsigned = a.view(np.dtype(f"u{a.dtype.itemsize}"))
        return np.where(valid, np.right_shift(unsigned, count.view(unsigned.dtype)).view(a.dtype), np.zeros_like(a))

    return shift


def _select_n(which, *cases):
    if len(cases) == 1:
        return cases[0]
    if which.dtype.kind == "b":
        return np.where(which, cases[1], cases[0])
    return np.choose(which, cases)


def _clamp(low, x, high):
    return _min(_max(x, low), high)


def _bitcast(a, new_dtype):
    new = np.dtype(new_dtype)
    if new.itemsize != a.dtype.itemsize:
        raise NotImplementedError("a bitcast that changes the item size")
    return np.require(a, requirements="C").view(new)  # ascontiguousarray would make a 0-d array 1-d


# ---- moves of elements -----------------------------------------------------------------------------------------
def _broadcast_in_dim(a, shape, broadcast_dimensions, **_):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = a.shape[i]
    return np.broadcast_to(a.reshape(expanded), shape)


def _reshape(a, new_sizes, dimensions=None, **_):
    if dimensions is not None:
        a = np.transpose(a, dimensions)
    return a.reshape(new_sizes)


def _slice(a, start_indices, limit_indices, strides=None):
    steps = strides or (1,) * a.ndim
    return a[tuple([slice(s, e, k) for s, e, k in zip(start_indices, limit_indices, steps)])]


def _pad(a, value, padding_config):
    if any(i for _, _, i in padding_config):  # interior padding: the elements spread out
        shape = [n + max(n - 1, 0) * i for n, (_, _, i) in zip(a.shape, padding_config)]
        spread = np.full(shape, value, a.dtype)
        spread[tuple([slice(None, None, i + 1) for _, _, i in padding_config])] = a
        a = spread
    # negative edges crop
    a = a[tuple([slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi, _) in zip(a.shape, padding_config)])]
    out = np.full([n + max(lo, 0) + max(hi, 0) for n, (lo, hi, _) in zip(a.shape, padding_config)], value, a.dtype)
    out[tuple([slice(max(lo, 0), max(lo, 0) + n) for n, (lo, _, _) in zip(a.shape, padding_config)])] = a
    return out


def _iota(dtype, shape, dimension, **_):
    line = np.arange(shape[dimension], dtype=dtype)
    return np.broadcast_to(line.reshape([-1 if d == dimension else 1 for d in range(len(shape))]), shape)


def _dynamic_slice(a, *starts, slice_sizes):
    # start indices clamped so that the slice fits, as XLA does
    at = [int(min(max(int(s), 0), n - k)) for s, n, k in zip(starts, a.shape, slice_sizes)]
    return a[tuple([slice(s, s + k) for s, k in zip(at, slice_sizes)])]


def _gather(operand, indices, *, dimension_numbers, slice_sizes, mode, fill_value=None, **_):
    """XLA's gather, the index vector the last dimension of `indices` (as JAX emits it): per batch position of the
    indices, the slice of `slice_sizes` starting there, its start clamped to fit (or, in FILL_OR_DROP mode, the
    slice filled with `fill_value` where it does not fit, as JAX lowers that mode); exact, any dtype."""
    dims = dimension_numbers
    batch_shape = indices.shape[:-1]
    rank = len(batch_shape) + len(dims.offset_dims)
    batch_at = [d for d in range(rank) if d not in dims.offset_dims]  # output dims of the batch positions
    shape = [1] * rank

    def batch_shaped(a):  # an array of the batch's shape, laid along the output's batch dims
        at = list(shape)
        for p, n in zip(batch_at, batch_shape):
            at[p] = n
        return np.broadcast_to(a, batch_shape).reshape(at)

    fill = str(mode) == "GatherScatterMode.FILL_OR_DROP"
    index, fits = [np.zeros((), np.int64)] * operand.ndim, np.ones(batch_shape, bool)
    for k, d in enumerate(dims.start_index_map):
        start, top = indices[..., k].astype(np.int64), operand.shape[d] - slice_sizes[d]
        if fill:
            fits &= (start >= 0) & (start <= top)
        index[d] = batch_shaped(np.clip(start, 0, top))
    for d, b in zip(dims.operand_batching_dims, dims.start_indices_batching_dims):
        along = [1] * len(batch_shape)
        along[b] = batch_shape[b]
        index[d] = batch_shaped(np.arange(batch_shape[b]).reshape(along))
    out_shape = list(shape)
    for p, n in zip(batch_at, batch_shape):
        out_shape[p] = n
    kept = [
        d for d in range(operand.ndim) if d not in dims.collapsed_slice_dims and d not in dims.operand_batching_dims
    ]
    for d, p in zip(kept, dims.offset_dims):
        along = list(shape)
        along[p] = out_shape[p] = slice_sizes[d]
        index[d] = index[d] + np.arange(slice_sizes[d]).reshape(along)
    out = np.broadcast_to(operand[tuple(index)] if operand.ndim else operand, out_shape)
    if not fill or fits.all():
        return np.array(out)
    return np.where(batch_shaped(fits), out, _fill_value(operand.dtype, fill_value))


def _fill_value(dtype, value):
    """What JAX's gather fills where a slice does not fit: `value`, or by default nan, the lowest signed integer, the
    highest unsigned one, True."""
    if value is not None:
        return np.asarray(value, dtype)
    if dtype.kind == "f":
        return np.asarray(np.nan, dtype)
    if dtype.kind == "b":
        return np.asarray(True)
    info = np.iinfo(dtype)
    return np.asarray(info.min if dtype.kind == "i" else info.max, dtype)


def _scatter(combine):
    """XLA's scatter whose updates are combined into the operand by the ufunc `combine` (None: written), the index
    vector the last dimension of `indices`: per batch position of the indices, the window of `updates` at the
    start it gives; a window that does not fit is dropped (XLA's CPU code, and JAX's FILL_OR_DROP mode), or its
    start clamped in CLIP mode. Where windows overlap, updates apply in order, as XLA's CPU loop applies them."""

    def scatter(operand, indices, updates, *, dimension_numbers, mode, **_):
        dims = dimension_numbers
        batch_shape = indices.shape[:-1]
        batch_at = [d for d in range(updates.ndim) if d not in dims.update_window_dims]
        shape = [1] * updates.ndim

        def batch_shaped(a):
            at = list(shape)
            for p, n in zip(batch_at, batch_shape):
                at[p] = n
            return np.broadcast_to(a, batch_shape).reshape(at)

        kept = [d for d in range(operand.ndim) if d not in dims.inserted_window_dims and d not in
                dims.operand_batching_dims]  # fmt: skip
        window = [1] * operand.ndim
        for d, p in zip(kept, dims.update_window_dims):
            window[d] = updates.shape[p]
        clip = str(mode) == "GatherScatterMode.CLIP"
        index, fits = [np.zeros((), np.int64)] * operand.ndim, np.ones(batch_shape, bool)
        for k, d in enumerate(dims.scatter_dims_to_operand_dims):
            start, top = indices[..., k].astype(np.int64), operand.shape[d] - window[d]
            if clip:
                start = np.clip(start, 0, top)
            fits &= (start >= 0) & (start <= top)
            index[d] = batch_shaped(start)
        for d, b in zip(dims.operand_batching_dims, dims.scatter_indices_batching_dims):
            along = [1] * len(batch_shape)
            along[b] = batch_shape[b]
            index[d] = batch_shaped(np.arange(batch_shape[b]).reshape(along))
        for d, p in zip(kept, dims.update_window_dims):
            along = list(shape)
            along[p] = window[d]
            index[d] = index[d] + np.arange(window[d]).reshape(along)
        where = np.broadcast_to(batch_shaped(fits), updates.shape)
        index = tuple([np.broadcast_to(i, updates.shape)[where] for i in index])
        out = operand.copy()
        if combine is None:
            out[index] = updates[where]
        else:
            combine.at(out, index, updates[where])
        return out

    return scatter


def _dynamic_update_slice(a, update, *starts):
    at = [int(min(max(int(s), 0), n - k)) for s, n, k in zip(starts, a.shape, update.shape)]
    out = a.copy()
    out[tuple([slice(s, s + k) for s, k in zip(at, update.shape)])] = update
    return out


def _split(a, sizes, axis):
    return tuple(np.split(a, np.cumsum(sizes)[:-1], axis=axis))


def _dot_general(a, b, dimension_numbers, preferred_element_type=None, **_):
    (a_contract, b_contract), (a_batch, b_batch) = dimension_numbers
    if preferred_element_type is not None:
        a, b = a.astype(preferred_element_type, copy=False), b.astype(preferred_element_type, copy=False)
    a_free = [d for d in range(a.ndim) if d not in a_contract and d not in a_batch]
    b_free = [d for d in range(b.ndim) if d not in b_contract and d not in b_batch]
    batch = [a.shape[d] for d in a_batch]
    m = [a.shape[d] for d in a_free]
    n = [b.shape[d] for d in b_free]
    k = int(np.prod([a.shape[d] for d in a_contract], dtype=np.int64))
    lhs = np.transpose(a, [*a_batch, *a_free, *a_contract]).reshape(*batch, int(np.prod(m, dtype=np.int64)), k)
    rhs = np.transpose(b, [*b_batch, *b_contract, *b_free]).reshape(*batch, k, int(np.prod(n, dtype=np.int64)))
    return np.matmul(lhs, rhs).reshape(tuple(batch + m + n))


# ---- reductions ------------------------------------------------------------------------------------------------
def _reduce(ufunc, identity):
    def reduce(a, axes, **_):
        dtype, axes = a.dtype, tuple(axes)
        # ufunc.reduce(array, axis, dtype, out, keepdims, initial): over every axis into a 0-d array, not a scalar
        out = np.empty((), dtype) if len(axes) == a.ndim else None
        return ufunc.reduce(a, axes, dtype, out, False, identity(dtype))

    return reduce


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else (False if dtype.kind == "b" else np.iinfo(dtype).min)


def _highest(dtype):
    return np.inf if dtype.kind == "f" else (True if dtype.kind == "b" else np.iinfo(dtype).max)


def _all_ones(dtype):
    return True if dtype.kind == "b" else np.iinfo(dtype).max if dtype.kind == "u" else -1


def _arg(f):
    def arg(a, axes, index_dtype):
        (axis,) = axes
        return f(a, axis=axis).astype(index_dtype)  # nan: the first one, as XLA

    return arg


def _cumulative(ufunc):
    def cumulative(a, axis, reverse=False):
        if reverse:
            return np.flip(ufunc.accumulate(np.flip(a, axis), axis=axis, dtype=a.dtype), axis)
        return ufunc.accumulate(a, axis=axis, dtype=a.dtype)

    return cumulative


def _cumulative_extreme(pick):
    def cumulative(a, axis, reverse=False):
        f = lambda x: pick.accumulate(x, axis=axis)
        return np.flip(f(np.flip(a, axis)), axis) if reverse else f(a)

    return cumulative


def _same(a, **_):
    return a


def _barrier(*arrays):
    return arrays  # optimization_barrier: its operands, kept apart from the ops around them in a kernel


_NARROWER = {(8, 23): (np.float32, 2.0**-126)}  # XLA's reduce_precision formats with a row: float32's


def _reduce_precision(a, exponent_bits, mantissa_bits):
    """a rounded to a narrower format in its own dtype, as XLA's CPU code does (float32's flushes its subnormals)."""
    narrow, smallest_normal = _NARROWER[(exponent_bits, mantissa_bits)]
    rounded = a.astype(narrow).astype(a.dtype)
    return np.where(np.abs(rounded) < smallest_normal, np.copysign(np.zeros_like(rounded), rounded), rounded)


ROWS = {
    "add": np.add,
    "add_any": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": _div,
    "rem": _rem,
    "neg": np.negative,
    "abs": np.abs,
    "sign": _sign,
    "max": _max,
    "min": _min,
    "clamp": _clamp,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": _round,
    "is_finite": np.isfinite,
    "nextafter": np.nextafter,
    "square": np.square,
    "integer_pow": _integer_pow,
    "sqrt": np.sqrt,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "not": np.invert,
    "shift_left": _shift("left"),
    "shift_right_arithmetic": _shift("arithmetic"),
    "shift_right_logical": _shift("logical"),
    "select_n": _select_n,
    "convert_element_type": _convert,
    "bitcast_convert_type": _bitcast,
    "dim_as_value": lambda dim: np.asarray(dim),  # a symbolic size, bound when the program runs
    "stop_gradient": _same,
    "optimization_barrier": _barrier,
    "reduce_precision": _reduce_precision,
    "copy": _same,
    "copy_p": _same,
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "squeeze": lambda a, dimensions: np.squeeze(a, axis=tuple(dimensions)),
    "expand_dims": lambda a, dimensions: np.expand_dims(a, tuple(dimensions)),
    "transpose": lambda a, permutation: np.transpose(a, permutation),
    "rev": lambda a, dimensions: np.flip(a, tuple(dimensions)),
    "tile": lambda a, reps: np.tile(a, tuple(reps)),
    "slice": _slice,
    "pad": _pad,
    "concatenate": lambda *arrays, dimension: np.concatenate(arrays, axis=dimension),
    "stack": lambda *arrays, axis: np.stack(arrays, axis=axis),
    "unstack": lambda a, axis: tuple(np.moveaxis(a, axis, 0)),
    "split": _split,
    "iota": _iota,
    "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice,
    "gather": _gather,
    "scatter": _scatter(None),
    "scatter-add": _scatter(np.add),
    "scatter-mul": _scatter(np.multiply),
    "dot_general": _dot_general,
    "conv_general_dilated": conv_general_dilated,
    "reduce_sum": _reduce(np.add, lambda d: 0),
    "reduce_prod": _reduce(np.multiply, lambda d: 1),
    "reduce_max": _reduce(np.maximum, _lowest),
    "reduce_min": _reduce(np.minimum, _highest),
    "reduce_window_sum": reduce_window(np.add, lambda d: 0, _pad),
    "reduce_window_max": reduce_window(np.maximum, _lowest, _pad),
    "reduce_window_min": reduce_window(np.minimum, _highest, _pad),
    "reduce_and": _reduce(np.bitwise_and, _all_ones),
    "reduce_or": _reduce(np.bitwise_or, lambda d: 0),
    "reduce_xor": _reduce(np.bitwise_xor, lambda d: 0),
    "argmax": _arg(np.argmax),
    "argmin": _arg(np.argmin),
    "cumsum": _cumulative(np.add),
    "cumprod": _cumulative(np.multiply),
    "cummax": _cumulative_extreme(np.maximum),
    "cummin": _cumulative_extreme(np.minimum),
}

# calls of a jitted function (a jaxpr's jit equations, by the function's name) computed by one row rather than by the
# steps of its jaxpr: rounding's fused multiply-add, exact with NumPy where its kernel form takes 15 steps
CALLS = {"rounded_multiply_add": fused_multiply_add}

# primitives whose rows give several outputs (a tuple)
MULTIPLE = frozenset({"split", "unstack", "optimization_barrier"})

# the rows of elementwise primitives: a step of one of them whose operands have its result's shape or none joins
# the elementwise region of that shape (_numpy_program.py)
ELEMENTWISE = frozenset(
    {
        "add", "add_any", "sub", "mul", "div", "rem", "neg", "abs", "sign", "max", "min", "clamp", "floor", "ceil",
        "round", "is_finite", "nextafter", "square", "integer_pow", "sqrt", "eq", "ne", "lt", "le", "gt", "ge", "and",
        "or", "xor", "not", "shift_left", "shift_right_arithmetic", "shift_right_logical", "select_n",
        "convert_element_type", "stop_gradient", "copy", "copy_p",
    }
)  # fmt: skip

# elementwise float functions without a row: XLA's kernels compute them (_numpy_program.py)
TRANSCENDENTAL = frozenset(
    {
        "exp", "exp2", "expm1", "log", "log1p", "logistic", "tanh", "sin", "cos", "tan", "asin", "acos", "atan",
        "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "pow", "rsqrt", "cbrt", "erf", "erfc", "erf_inv",
        "lgamma", "digamma", "igamma", "igammac", "polygamma", "bessel_i0e", "bessel_i1e",
    }
)  # fmt: skip


def _logistic(x):
    e = np.exp(-np.abs(x))  # no overflow on either side
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


# float64 forms of transcendental functions, for a program whose float64 values are its own wider precision (made
# from narrower arguments and rounded back before they leave it, as an op computed in float64 for float32 operands):
# NumPy's and XLA's float64 functions differ by a few float64 ulp (XLA's log1p and atanh by up to 124-129), far below
# what the rounding to float32 keeps, so that both give the same float32 values, as the hand-written host forms of
# such ops (tanh and its VJP) do
WIDENED = {
    "exp": np.exp,
    "exp2": np.exp2,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "logistic": _logistic,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "atan2": np.arctan2,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "pow": np.power,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "cbrt": np.cbrt,
}
