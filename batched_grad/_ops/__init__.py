"""The op table's public face: module functions with torch's names, and the Tensor methods and operators
generated from them."""

import functools
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from .. import _dtypes, _factories, _layout, _layout_types, _legacy_constructors, _transform_levels
from .._compiled import set_background_compile, wait_for_compiles
from .._grad_mode import is_recording
from .._lazy import compile_count
from .._meta import device_for
from .._tensor import VIEW_OF_LEAF_INPLACE, Tensor, warn_once
from .._transform_levels import GUARDING
from . import (
    activations,
    arrange,
    complex_parts,
    conv_transpose,
    conveniences,
    creation,
    decompositions,
    deprecated_signatures,
    distances,
    dropouts,
    embeddings,
    fake_quantize,
    inplace,
    inplace_views,
    layers,
    lean,
    legacy,
    norms,
    placement,
    pooling,
    products,
    sampling,
    scatters,
    searching,
    short_time_fft,
    spatial,
    special,
    statistics,
    strided,
)
from ._core import Op, apply, apply_in_place
from ._out_rules import OUT_RULES
from ._public import SPARSE_DISPATCHED, public, sparse_aware
from .closeness import allclose, equal, is_complex, is_floating_point, is_tensor, isclose, numel
from .complex_parts import conj, imag, real
from .compound import addcdiv, addcmul
from .diagonals import diag_embed, diagflat
from .einsum import einsum, tensordot
from .elementwise import (
    COMPARISONS,
    PREDICATES,
    UNARY,
    add,
    atan2,
    div,
    floor_divide,
    fmod,
    hypot,
    maximum,
    minimum,
    mul,
    pow,
    remainder,
    round,
    rsub,
    sub,
    true_divide,
)
from .grids import meshgrid
from .indexing import (
    argsort,
    gather,
    getitem,
    index_select,
    masked_fill,
    masked_select,
    nonzero,
    scatter,
    scatter_add,
    select,
    setitem,
    sort,
    take_along_dim,
    topk,
)
from .linalg import bmm, diag, diagonal, dot, matmul, mm, mv, outer, trace, tril, triu
from .linalg import inv as inverse
from .nn import conv1d, conv2d, conv3d, layer_norm, log_softmax, softmax
from .numpy_keywords import with_method_aliases
from .numpy_operands import DEFERRING, deferring_to_numpy
from .operators import BINARY_OPERATORS, operator_method
from .placement import DISCARDS_IMAGINARY, to
from .reduction import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    cumprod,
    cumsum,
    logsumexp,
    max,
    mean,
    min,
    norm,
    prod,
    std,
    std_mean,
    sum,
    var,
    var_mean,
)
from .rows_like import rows_like, rows_of
from .shape import (
    broadcast_shapes,
    broadcast_to,
    cat,
    chunk,
    concat,
    concatenate,
    expand,
    expand_as,
    flatten,
    flip,
    hstack,
    movedim,
    narrow,
    permute,
    repeat,
    reshape,
    roll,
    split,
    split_method,
    squeeze,
    stack,
    swapaxes,
    t,
    tile,
    transpose,
    unbind,
    unflatten,
    unsqueeze,
    view,
    view_as,
    vstack,
)
from .ternary import clamp, clamp_max, clamp_min, clip, lerp, where
from .unique import unique

globals().update(UNARY)
globals().update(COMPARISONS)
globals().update(PREDICATES)
globals().update(special.FUNCTIONS)
globals().update(activations.TORCH)
globals().update(distances.TORCH)
globals().update(pooling.TORCH)
_TORCH_NN = {
    **norms.TORCH,
    **layers.TORCH,
    **embeddings.TORCH,
    **dropouts.TORCH,
    **conv_transpose.FUNCTIONAL,
    **spatial.TORCH,
}
globals().update(_TORCH_NN)
_TORCH_MORE = {
    **arrange.FUNCTIONS,
    **scatters.FUNCTIONS,
    **searching.FUNCTIONS,
    **statistics.FUNCTIONS,
    **products.FUNCTIONS,
    **decompositions.FUNCTIONS,
    **fake_quantize.FUNCTIONS,
    **conveniences.FUNCTIONS,
    **creation.FUNCTIONS,
    **sampling.FUNCTIONS,
    **short_time_fft.FUNCTIONS,
    **legacy.FUNCTIONS,
    **inplace_views.FUNCTIONS,
    **strided.FUNCTIONS,
}
globals().update(_TORCH_MORE)
# torch's other names for the same functions
ALIASES = {
    "absolute": "abs",
    "arccos": "acos",
    "arccosh": "acosh",
    "arcsin": "asin",
    "arcsinh": "asinh",
    "arctan": "atan",
    "arctan2": "atan2",
    "arctanh": "atanh",
    "divide": "div",
    "multiply": "mul",
    "negative": "neg",
    "subtract": "sub",
    "greater": "gt",
    "greater_equal": "ge",
    "less": "lt",
    "less_equal": "le",
    "not_equal": "ne",
    "fix": "trunc",
    "swapdims": "transpose",
    "moveaxis": "movedim",
}
globals().update({alias: globals()[name] for alias, name in ALIASES.items()})

_CLONE = Op("clone", lambda a: a + jnp.zeros((), a.dtype), linear=True, diagonal=True)


def _exact_cast(values, dtype):
    """Whether NumPy casts `values` to `dtype` as the kernel does: not complex to real (the kernel warns), nor nan or
    inf to an integer (NumPy's result differs)."""
    if np.iscomplexobj(values):
        return np.iscomplexobj(np.empty((), dtype))
    return values.dtype.kind != "f" or dtype.kind in "fc" or bool(np.isfinite(values).all())


def _copy_on_host(a, src):
    if src.dtype != a.dtype:
        if not _exact_cast(src, a.dtype):
            return None
        src = src.astype(a.dtype)
    return src if src.shape == a.shape else np.broadcast_to(src, a.shape)  # host data is never written into


_COPY = Op(
    "copy",
    lambda a, src: jnp.broadcast_to(_dtypes.cast(src, a.dtype), a.shape),
    linear=True,
    backward_name="torch::autograd::CopyBackwards",
    host=_copy_on_host,
)


def fresh_copy(tensor):
    """A new tensor of `tensor`'s values, recorded as torch's copy into a new empty tensor (CopyBackwards, whose first
    edge, the empty tensor's, is None): a leaf's first .grad under create_graph, as torch's AccumulateGrad makes it."""
    blank = Tensor._wrap(np.broadcast_to(np.zeros((), tensor._v.dtype), tuple(tensor.shape)))
    return apply(_COPY, [blank, tensor])


def clone(input, *, memory_format=None):
    """A copy that stays in the graph (contiguous, whatever `memory_format`)."""
    from .. import _memory_format

    _layout.refuse_clone_format_of_rows(input, memory_format)
    _memory_format.check(memory_format, "clone", input.dim())
    return apply(_CLONE, [input])


def jax_function(fn):
    """Wrap a JAX-traceable function of arrays into a differentiable op of Tensors.

    `jax_function(jnp.sinc)(x)` records one node whose VJP JAX derives; keyword arguments are static
    (hashable) parameters; a tuple result gives a tuple of Tensors.
    """
    name = getattr(fn, "__name__", "jax_function")
    returns_tuple = [False]

    def traced(*arrays, **static):
        out = fn(*arrays, **static)
        returns_tuple[0] = isinstance(out, (tuple, list))  # recorded while tracing, before apply returns
        return tuple(out) if returns_tuple[0] else (out,)

    op = Op(name, traced, multi=True, backward_name=f"JaxFunction_{name}Backward")

    def wrapped(*args, **static):
        outs = apply(op, list(args), **static)
        return outs if returns_tuple[0] else outs[0]

    wrapped.__name__ = name
    wrapped.__doc__ = fn.__doc__
    return wrapped


def _inplace(name, fn, doc):
    """The in-place method `name`: fn(self, ...) written into self (its version, views and graph updated). Where
    `fn` has an in-place lane (`fn.in_place`, _core.apply_in_place), the method tries it first."""
    lane = getattr(fn, "in_place", None)

    def method(self, *args, **kwargs):
        if GUARDING.count and _transform_levels.guards_captures():  # before the op's own checks, as torch's
            _transform_levels.check_not_captured(self, name, args, kwargs)
        elif lane is not None:
            done = lane(self, *args, **kwargs)
            if done is not None:
                return done
        return self._assign(fn(self, *args, **kwargs), name, args, kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc
    return method


def _inplace_method(name, method):
    """A method of inplace.py, named and documented as the in-place version of its op."""
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place version of {name[:-1]}."
    return method


def _in_place_version(name, fn):
    return _inplace(f"{name}_", fn, f"In-place version of {name}.\n\n{fn.__doc__}")


_ZERO = Op("zero", lambda a: rows_of(jnp.zeros_like(a), a), linear=True, host=lambda a: np.zeros(a.shape, a.dtype))
# the number is an operand (a 0-d array): a new value compiles nothing
_FILL_NUMBER = Op(
    "fill",
    lambda a, v: rows_of(jnp.full_like(a, v), a),
    linear=True,
    backward_name="FillBackward2",
    inputs=1,
    host=lambda a, v: np.full_like(a, v) if _exact_cast(v, a.dtype) else None,
)
_FILL_TENSOR = Op(
    "fill",
    lambda a, v: rows_of(jnp.broadcast_to(v.astype(a.dtype), a.shape), a),
    linear=True,
    backward_name="FillBackward3",
)


def _fill(self, value):
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(
                f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
            )
        return apply(_FILL_TENSOR, [self, value])
    return apply(_FILL_NUMBER, [self, value])


def _zero(self):
    return apply(_ZERO, [self])


def _fill_in_place(self, value):
    return None if isinstance(value, Tensor) else apply_in_place(_FILL_NUMBER, self, value)


_zero.in_place = functools.partial(apply_in_place, _ZERO)
_fill.in_place = _fill_in_place


def fill(input, value):
    """A tensor like input filled with `value` (a number or a 0-dim tensor, whose derivative it takes)."""
    return _fill(input, value)


def _copy(self, src, non_blocking=False):  # noqa: ARG001  (a copy on the CPU is synchronous either way, as torch's)
    if isinstance(src, Tensor):  # torch's errors for a source that does not broadcast to this tensor's shape
        shape = broadcast_shapes(tuple(self.shape), tuple(src.shape))
        if shape != tuple(self.shape):
            raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape {list(shape)}")
    _warn_if_discarding_imaginary(self, src)
    return apply(_COPY, [self, src])


def _copy_in_place(self, src, non_blocking=False):  # noqa: ARG001  (as _copy)
    _warn_if_discarding_imaginary(self, src)
    return apply_in_place(_COPY, self, src)


def _warn_if_discarding_imaginary(self, src):
    if isinstance(src, Tensor) and src.dtype.is_complex and not self.dtype.is_complex:
        warn_once(DISCARDS_IMAGINARY, stacklevel=4)


_copy.in_place = _copy_in_place


def _reversed(fn):
    return lambda self, other: fn(other, self)


def _rtruediv(self, other):  # number / tensor: torch computes reciprocal(tensor) * number (its values and nodes)
    return UNARY["reciprocal"](self) * other  # the operator, so that an ndarray `other` computes it (numpy_operands)


def _invert(self):
    return PREDICATES["logical_not"](self) if self.dtype is _dtypes.bool else apply(_BITWISE_NOT, [self])


_BITWISE_NOT = Op("bitwise_not", jnp.invert)
_T_DEPRECATED = (
    "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is deprecated and it will throw "
    "an error in a future release. Consider `x.mT` to transpose batches of matrices or "
    "`x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor."
)
_IDENTITY_0D = "Tensor.{} is deprecated on 0-D tensors. This function is the identity in these cases."


def _T(self):
    """All dimensions reversed (torch deprecates it on tensors that are not 2-D)."""
    if self.ndim != 2:
        warn_once(_IDENTITY_0D.format("T") if self.ndim == 0 else _T_DEPRECATED)
    return permute(self, *reversed(range(self.ndim)))


def _mT(self):
    """The last two dimensions swapped: the transpose of a (batch of) matrices."""
    if self.ndim == 0:
        warn_once(_IDENTITY_0D.format("mT"))
        return view(self, ())
    if self.ndim == 1:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return transpose(self, -2, -1)


def _mH(self):
    """The conjugate transpose of the last two dimensions (of a batch of matrices)."""
    if self.ndim == 0:
        warn_once("Tensor.mH is deprecated on 0-D tensors. Consider using x.conj().")
        return complex_parts.conj(self)
    if self.ndim == 1:
        raise RuntimeError("tensor.mH is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return complex_parts.conj(transpose(self, -2, -1))


def _H(self):
    """The conjugate transpose of a matrix."""
    if self.ndim == 0:
        warn_once("Tensor.H is deprecated on 0-D tensors. Consider using x.conj().")
        return complex_parts.conj(self)
    if self.ndim != 2:
        hint = " For batches of matrices, consider using tensor.mH" if self.ndim > 2 else ""
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.{hint}")
    return complex_parts.conj(transpose(self, 0, 1))


def _adjoint(self):
    """The conjugate transpose of the last two dimensions (Tensor.mH)."""
    return _mH(self)


def _setitem_is_view(shape, index):
    """Whether torch writes `input[index] = v` through a view (its leaf error names "a view of a leaf")."""
    index = index if isinstance(index, tuple) else (index,)
    consumed = len([i for i in index if i is not None and i is not Ellipsis and not isinstance(i, bool)])
    dim = 0
    for i in index:
        if i is Ellipsis:
            dim = len(shape) - consumed
            continue
        if i is None or isinstance(i, int):
            return True
        if isinstance(i, slice) and dim < len(shape) and i.indices(shape[dim]) != (0, shape[dim], 1):
            return True
        consumed -= 1
        dim += 1
    return False


def _setitem(self, index, value):
    if is_recording() and self.is_leaf and self.requires_grad and _setitem_is_view(self.shape, index):
        raise RuntimeError(VIEW_OF_LEAF_INPLACE)
    setitem(self, index, value)


def _where(self, condition, other):
    """Elements of this tensor where `condition`, else of `other` (where(condition, self, other))."""
    return where(condition, self, other)


def _type_as(self, other):
    """This tensor cast to the dtype of the tensor `other`."""
    return to(self, other.dtype)


def _conversion(name, dtype):
    def method(self):
        return to(self, dtype)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"This tensor as {dtype} (self.to({dtype}))."
    return method


def _new_factory(kind):
    @_layout_types.takes_layout
    def method(self, *args, size=None, dtype=None, requires_grad=False, device=None):

        if size is not None:
            if args:
                raise TypeError(f"new_{kind}() got multiple values for argument 'size'")
            args = (size,)
        shape = _factories._varargs_size(f"new_{kind}", args)  # torch's size errors name new_zeros(), new_ones()
        made = getattr(_factories, kind)(shape, dtype=dtype or self.dtype, device=device_for(device, self))
        return rows_like(made, self, requires_grad)

    method.__name__ = method.__qualname__ = f"new_{kind}"
    method.__doc__ = (
        f"A tensor of {kind} of the given size, with this tensor's dtype and device unless `dtype` or "
        "`device` is given."
    )
    return method


class Exposed(NamedTuple):
    """How an op this module names is exposed, besides what its family's own table gives (UNARY, COMPARISONS,
    PREDICATES and the modules' FUNCTIONS and METHODS): `function` as torch.<name>, `method` as Tensor.<name>,
    `inplace` as Tensor.<name>_ (its method's result written into the tensor), `function_inplace` as torch.<name>_
    too, and `out`: the rule for the dtype of its out= argument (_public.py), or None where it takes none."""

    function: bool = False
    method: bool = False
    inplace: bool = False
    function_inplace: bool = False
    out: object = None


def _lerp_out(input, end, weight):
    return "exact" if isinstance(weight, Tensor) else "cast"


# one row per op name
_EXPOSED = {
    "add": Exposed(function=True, method=True, inplace=True, out="cast"),
    "atan2": Exposed(function=True, method=True, inplace=True, out="cast"),
    "clamp": Exposed(function=True, method=True, inplace=True, function_inplace=True, out="exact"),
    "clip": Exposed(function=True, method=True, inplace=True, function_inplace=True, out="exact"),
    "div": Exposed(function=True, method=True, inplace=True, out="cast"),
    "floor_divide": Exposed(function=True, method=True, out="cast"),
    "fmod": Exposed(function=True, method=True, inplace=True, out="cast"),
    "hypot": Exposed(function=True, method=True, inplace=True, out="cast"),
    "lerp": Exposed(function=True, method=True, inplace=True, out=_lerp_out),
    "maximum": Exposed(function=True, method=True, out="cast"),
    "minimum": Exposed(function=True, method=True, out="cast"),
    "mul": Exposed(function=True, method=True, inplace=True, out="cast"),
    "pow": Exposed(function=True, method=True, inplace=True, out="cast"),
    "remainder": Exposed(function=True, method=True, inplace=True, out="cast"),
    "round": Exposed(function=True, method=True, inplace=True, function_inplace=True, out="exact"),
    "rsub": Exposed(function=True),
    "sub": Exposed(function=True, method=True, inplace=True, out="cast"),
    "true_divide": Exposed(function=True, method=True, inplace=True, out="cast"),
    "where": Exposed(function=True, out="where"),
    "argsort": Exposed(function=True, method=True),
    "gather": Exposed(function=True, method=True),
    "index_select": Exposed(function=True, method=True),
    "masked_fill": Exposed(function=True, method=True, inplace=True),
    "masked_select": Exposed(function=True, method=True),
    "nonzero": Exposed(function=True, method=True),
    "scatter": Exposed(function=True, method=True, inplace=True),
    "scatter_add": Exposed(function=True, method=True, inplace=True),
    "sort": Exposed(function=True, method=True),
    "take_along_dim": Exposed(function=True, method=True),
    "topk": Exposed(function=True, method=True),
    "bmm": Exposed(function=True, method=True),
    "diag": Exposed(function=True, method=True),
    "diagonal": Exposed(function=True, method=True),
    "dot": Exposed(function=True, method=True),
    "einsum": Exposed(function=True),
    "matmul": Exposed(function=True, method=True),
    "mm": Exposed(function=True, method=True),
    "mv": Exposed(function=True, method=True),
    "outer": Exposed(function=True, method=True),
    "tensordot": Exposed(function=True, method=True),
    "trace": Exposed(function=True, method=True),
    "tril": Exposed(function=True, method=True, inplace=True),
    "triu": Exposed(function=True, method=True, inplace=True),
    "all": Exposed(function=True, method=True),
    "amax": Exposed(function=True, method=True),
    "amin": Exposed(function=True, method=True),
    "any": Exposed(function=True, method=True),
    "argmax": Exposed(function=True, method=True),
    "argmin": Exposed(function=True, method=True),
    "cumprod": Exposed(function=True, method=True, inplace=True),
    "cumsum": Exposed(function=True, method=True, inplace=True),
    "logsumexp": Exposed(function=True, method=True),
    "max": Exposed(function=True, method=True),
    "mean": Exposed(function=True, method=True),
    "min": Exposed(function=True, method=True),
    "norm": Exposed(function=True, method=True, out="same"),
    "prod": Exposed(function=True, method=True),
    "std": Exposed(function=True, method=True),
    "sum": Exposed(function=True, method=True),
    "var": Exposed(function=True, method=True),
    "broadcast_to": Exposed(function=True, method=True),
    "cat": Exposed(function=True),
    "chunk": Exposed(function=True, method=True),
    "concat": Exposed(function=True),
    "concatenate": Exposed(function=True),
    "expand": Exposed(function=True, method=True),
    "expand_as": Exposed(function=True, method=True),
    "flatten": Exposed(function=True, method=True),
    "flip": Exposed(function=True, method=True),
    "hstack": Exposed(function=True),
    "movedim": Exposed(function=True, method=True),
    "narrow": Exposed(function=True, method=True),
    "permute": Exposed(function=True, method=True),
    "repeat": Exposed(function=True, method=True),
    "reshape": Exposed(function=True, method=True),
    "roll": Exposed(function=True, method=True),
    "select": Exposed(function=True, method=True),
    "split": Exposed(function=True),
    "squeeze": Exposed(function=True, method=True),
    "stack": Exposed(function=True),
    "swapaxes": Exposed(function=True, method=True),
    "t": Exposed(function=True, method=True),
    "tile": Exposed(function=True, method=True),
    "transpose": Exposed(function=True, method=True),
    "unbind": Exposed(function=True, method=True),
    "unflatten": Exposed(function=True, method=True),
    "unsqueeze": Exposed(function=True, method=True),
    "view": Exposed(function=True, method=True),
    "view_as": Exposed(function=True, method=True),
    "vstack": Exposed(function=True),
    "clone": Exposed(function=True, method=True),
    "to": Exposed(function=True, method=True),
    "jax_function": Exposed(function=True),
    "conv1d": Exposed(function=True),
    "conv2d": Exposed(function=True),
    "layer_norm": Exposed(function=True),
    "log_softmax": Exposed(function=True, method=True),
    "softmax": Exposed(function=True, method=True),
    "allclose": Exposed(function=True, method=True),
    "isclose": Exposed(function=True, method=True),
    "equal": Exposed(function=True, method=True),
    "is_tensor": Exposed(function=True),
    "is_floating_point": Exposed(function=True),
    "is_complex": Exposed(function=True),
    "numel": Exposed(function=True),
    "addcmul": Exposed(function=True, method=True, inplace=True, out="cast"),
    "addcdiv": Exposed(function=True, method=True, inplace=True, out="cast"),
    "inverse": Exposed(function=True, method=True),
    "diag_embed": Exposed(function=True, method=True),
    "diagflat": Exposed(function=True, method=True),
    "meshgrid": Exposed(function=True),
    "unique": Exposed(function=True, method=True),
    "var_mean": Exposed(function=True),
    "std_mean": Exposed(function=True),
    "real": Exposed(function=True),
    "imag": Exposed(function=True),
    "conj": Exposed(function=True),
    "clamp_min": Exposed(function=True, method=True, inplace=True, function_inplace=True),
    "clamp_max": Exposed(function=True, method=True, inplace=True, function_inplace=True),
    "conv3d": Exposed(function=True),
    "fill": Exposed(function=True, function_inplace=True),
    "neg": Exposed(inplace=True, function_inplace=True, out="exact"),
    "abs": Exposed(inplace=True, function_inplace=True, out="exact"),
    "exp": Exposed(inplace=True, function_inplace=True, out="cast"),
    "log": Exposed(inplace=True, function_inplace=True, out="cast"),
    "sqrt": Exposed(inplace=True, function_inplace=True, out="cast"),
    "sigmoid": Exposed(inplace=True, function_inplace=True, out="cast"),
    "tanh": Exposed(inplace=True, function_inplace=True, out="cast"),
    "floor": Exposed(inplace=True, function_inplace=True, out="exact"),
    "ceil": Exposed(inplace=True, function_inplace=True, out="exact"),
    "trunc": Exposed(inplace=True, function_inplace=True, out="exact"),
    "sin": Exposed(inplace=True, function_inplace=True, out="cast"),
    "cos": Exposed(inplace=True, function_inplace=True, out="cast"),
    "relu": Exposed(inplace=True, function_inplace=True),
    "square": Exposed(inplace=True, function_inplace=True, out="cast"),
    "reciprocal": Exposed(inplace=True, function_inplace=True, out="cast"),
    "absolute": Exposed(inplace=True),
    "acos": Exposed(inplace=True, function_inplace=True, out="cast"),
    "arctan2": Exposed(inplace=True),
    "asin": Exposed(inplace=True, function_inplace=True, out="cast"),
    "atan": Exposed(inplace=True, function_inplace=True, out="cast"),
    "bitwise_and": Exposed(inplace=True, out="cast"),
    "bitwise_or": Exposed(inplace=True, out="cast"),
    "bitwise_xor": Exposed(inplace=True, out="cast"),
    "cosh": Exposed(inplace=True, function_inplace=True, out="cast"),
    "divide": Exposed(inplace=True),
    "erf": Exposed(inplace=True, function_inplace=True, out="cast"),
    "erfc": Exposed(inplace=True, function_inplace=True, out="cast"),
    "expm1": Exposed(inplace=True, function_inplace=True, out="cast"),
    "frac": Exposed(inplace=True, function_inplace=True, out="exact"),
    "log10": Exposed(inplace=True, function_inplace=True, out="cast"),
    "log1p": Exposed(inplace=True, function_inplace=True, out="cast"),
    "log2": Exposed(inplace=True, function_inplace=True, out="cast"),
    "multiply": Exposed(inplace=True),
    "negative": Exposed(inplace=True, function_inplace=True),
    "rsqrt": Exposed(inplace=True, function_inplace=True, out="cast"),
    "sign": Exposed(inplace=True, out="exact"),
    "sinh": Exposed(inplace=True, function_inplace=True, out="cast"),
    "subtract": Exposed(inplace=True),
    "tan": Exposed(inplace=True, function_inplace=True, out="cast"),
    "copysign": Exposed(inplace=True),
    "deg2rad": Exposed(inplace=True, function_inplace=True, out="cast"),
    "rad2deg": Exposed(inplace=True, function_inplace=True, out="cast"),
    "digamma": Exposed(inplace=True, out="cast"),
    "erfinv": Exposed(inplace=True, out="cast"),
    "exp2": Exposed(inplace=True, function_inplace=True, out="cast"),
    "gcd": Exposed(inplace=True, function_inplace=True),
    "lcm": Exposed(inplace=True, function_inplace=True),
    "heaviside": Exposed(inplace=True),
    "i0": Exposed(inplace=True, function_inplace=True, out="cast"),
    "igamma": Exposed(inplace=True),
    "igammac": Exposed(inplace=True),
    "ldexp": Exposed(inplace=True, function_inplace=True),
    "lgamma": Exposed(inplace=True, out="cast"),
    "logit": Exposed(inplace=True, function_inplace=True),
    "mvlgamma": Exposed(inplace=True),
    "nan_to_num": Exposed(inplace=True, function_inplace=True),
    "nextafter": Exposed(inplace=True),
    "polygamma": Exposed(inplace=True),
    "sgn": Exposed(inplace=True, out="cast"),
    "sinc": Exposed(inplace=True, function_inplace=True, out="cast"),
    "xlogy": Exposed(inplace=True, function_inplace=True),
    "bitwise_not": Exposed(inplace=True),
    "bitwise_left_shift": Exposed(inplace=True),
    "bitwise_right_shift": Exposed(inplace=True),
    "index_add": Exposed(inplace=True),
    "index_copy": Exposed(inplace=True),
    "index_fill": Exposed(inplace=True),
    "index_put": Exposed(inplace=True, function_inplace=True),
    "masked_scatter": Exposed(inplace=True),
    "put": Exposed(inplace=True),
    "scatter_reduce": Exposed(inplace=True),
    "renorm": Exposed(inplace=True),
    "addmm": Exposed(inplace=True),
    "addmv": Exposed(inplace=True, function_inplace=True),
    "addbmm": Exposed(inplace=True),
    "baddbmm": Exposed(inplace=True),
    "addr": Exposed(inplace=True),
    "index_reduce": Exposed(inplace=True),
    "acosh": Exposed(function_inplace=True, out="cast"),
    "arccos": Exposed(function_inplace=True),
    "arccosh": Exposed(function_inplace=True),
    "arcsin": Exposed(function_inplace=True),
    "arcsinh": Exposed(function_inplace=True),
    "arctan": Exposed(function_inplace=True),
    "arctanh": Exposed(function_inplace=True),
    "asinh": Exposed(function_inplace=True, out="cast"),
    "atanh": Exposed(function_inplace=True, out="cast"),
    "fix": Exposed(function_inplace=True),
    "zero": Exposed(function_inplace=True),
    "eq": Exposed(out="cast"),
    "ne": Exposed(out="cast"),
    "lt": Exposed(out="cast"),
    "le": Exposed(out="cast"),
    "gt": Exposed(out="cast"),
    "ge": Exposed(out="cast"),
    "logical_and": Exposed(out="cast"),
    "logical_or": Exposed(out="cast"),
    "logical_xor": Exposed(out="cast"),
    "logical_not": Exposed(out="cast"),
}


def _exposed(flag):
    """The names whose row sets `flag`."""
    return [name for name, row in _EXPOSED.items() if getattr(row, flag)]


_CONVERSIONS = {
    "float": _dtypes.float32,
    "double": _dtypes.float64,
    "half": _dtypes.float16,
    "long": _dtypes.int64,
    "int": _dtypes.int32,
    "bool": _dtypes.bool,
}
_METHODS = dict(UNARY, **COMPARISONS, **PREDICATES)
_METHODS.update({name: globals()[name] for name in _exposed("method")})
_METHODS.update(special.METHODS)
_METHODS.update(activations.METHODS)
for _module in (
    arrange,
    scatters,
    searching,
    statistics,
    products,
    decompositions,
    conveniences,
    sampling,
    legacy,
    short_time_fft,
):
    _METHODS.update(_module.METHODS)
_METHODS.update({alias: _METHODS[name] for alias, name in ALIASES.items()})
_METHODS.update(
    where=_where,
    split=split_method,
    type_as=_type_as,
    new_zeros=_new_factory("zeros"),
    new_ones=_new_factory("ones"),
    new=_legacy_constructors.new,
    **{name: _conversion(name, dtype) for name, dtype in _CONVERSIONS.items()},
    __getitem__=getitem,
    __setitem__=_setitem,
    __add__=add,
    __radd__=add,
    __sub__=sub,
    __rsub__=_reversed(sub),
    __mul__=mul,
    __rmul__=mul,
    __truediv__=div,
    __rtruediv__=_rtruediv,
    __div__=div,
    __rdiv__=_rtruediv,
    __floordiv__=floor_divide,
    __rfloordiv__=_reversed(floor_divide),
    __mod__=remainder,
    __rmod__=_reversed(remainder),
    __pow__=pow,
    __rpow__=_reversed(pow),
    __matmul__=matmul,
    __rmatmul__=_reversed(matmul),
    __neg__=UNARY["neg"],
    __abs__=UNARY["abs"],
    __pos__=lambda self: self,
    __invert__=_invert,
    __eq__=COMPARISONS["eq"],
    __ne__=COMPARISONS["ne"],
    __lt__=COMPARISONS["lt"],
    __le__=COMPARISONS["le"],
    __gt__=COMPARISONS["gt"],
    __ge__=COMPARISONS["ge"],
    __and__=COMPARISONS["bitwise_and"],
    __or__=COMPARISONS["bitwise_or"],
    __xor__=COMPARISONS["bitwise_xor"],
    __rand__=COMPARISONS["bitwise_and"],
    __ror__=COMPARISONS["bitwise_or"],
    __rxor__=COMPARISONS["bitwise_xor"],
    __lshift__=special.bitwise_left_shift,
    __rshift__=special.bitwise_right_shift,
    __rlshift__=_reversed(special.bitwise_left_shift),
    __rrshift__=_reversed(special.bitwise_right_shift),
    T=property(_T),
    mT=property(_mT),
    mH=property(_mH),
    H=property(_H),
    adjoint=_adjoint,
    **_layout.METHODS,
    **placement.METHODS,
    **complex_parts.METHODS,
)
_METHODS.update({f"{name}_": _in_place_version(name, _METHODS[name]) for name in _exposed("inplace")})
_METHODS.update({name: _inplace_method(name, fn) for name, fn in inplace.METHODS.items()})
_METHODS.update(inplace_views.METHODS)
_METHODS.update(inplace_views.OUT_OF_PLACE)
_METHODS.update(strided.METHODS)
_METHODS.update(dist=distances.dist)
_METHODS.update(
    {
        name: _inplace(name, fn, doc)
        for name, (fn, doc) in {
            "fill_": (_fill, "Fill with `value` (a number or a 0-dim Tensor), in place."),
            "zero_": (_zero, "Fill with zeros, in place."),
            "copy_": (_copy, "Copy `src` into this tensor (broadcast to its shape, cast to its dtype), in place."),
        }.items()
    }
)
_METHODS.update(
    {
        f"{alias}_": _METHODS[f"{name}_"]
        for alias, name in ALIASES.items()
        if f"{name}_" in _METHODS and f"{alias}_" not in _METHODS
    }
)
_METHODS.update(
    {
        f"__i{op}__": _METHODS[f"{name}_"]
        for op, name in [
            ("add", "add"),
            ("sub", "sub"),
            ("mul", "mul"),
            ("truediv", "div"),
            ("div", "div"),
            ("floordiv", "floor_divide"),
            ("pow", "pow"),
            ("mod", "remainder"),
            ("and", "bitwise_and"),
            ("or", "bitwise_or"),
            ("xor", "bitwise_xor"),
            ("lshift", "bitwise_left_shift"),
            ("rshift", "bitwise_right_shift"),
        ]
    }
)

# torch's deprecated signatures (the scalar first) on the methods of the ops that have them; the functions below
_DEPRECATED = {n: _METHODS[n] for op in deprecated_signatures.NAMES for n in (op, f"{op}_") if n in _METHODS}
_METHODS.update({n: deprecated_signatures.accepting(n, fn, method=True) for n, fn in _DEPRECATED.items()})

_METHODS.update({name: operator_method(fn) for name, fn in _METHODS.items() if name in BINARY_OPERATORS})

for _name, _fn in _METHODS.items():
    # a dense tensor's method with a sparse COO operand (dense.mm(sparse)) runs the op's sparse form, as torch's
    _fn = sparse_aware(_fn, _name) if _name in SPARSE_DISPATCHED else _fn
    _fn = deferring_to_numpy(_fn) if _name in DEFERRING else _fn
    setattr(Tensor, _name, with_method_aliases(_fn, _name))

lean.install(Tensor, _METHODS)  # the lean fronts of the commonest eager calls, before all else

# torch's module-level in-place functions (torch.relu_(x) is x.relu_())
globals().update({f"{name}_": _METHODS[f"{name}_"] for name in _exposed("function_inplace")})
globals().update(
    {
        n: deprecated_signatures.accepting(n, _DEPRECATED[n] if n.endswith("_") else globals()[n], method=False)
        for n in _DEPRECATED
        if n in globals()
    }
)

# the public op functions, re-exported by batched_grad (modules such as .linalg stay out of the star-import)
__all__ = sorted(
    {
        *_exposed("function"),
        *UNARY,
        *COMPARISONS,
        *PREDICATES,
        *special.FUNCTIONS,
        *activations.TORCH,
        *distances.TORCH,
        *pooling.TORCH,
        *_TORCH_NN,
        *_TORCH_MORE,
        *ALIASES,
        *[f"{name}_" for name in _exposed("function_inplace")],
    }
)

_OUT_RULES = {name: row.out for name, row in _EXPOSED.items() if row.out is not None}
_OUT_RULES.update({alias: _OUT_RULES[name] for alias, name in ALIASES.items() if name in _OUT_RULES})
_OUT_RULES = {**OUT_RULES["torch"], **_OUT_RULES}
globals().update({_name: public(globals()[_name], _OUT_RULES.get(_name), _name) for _name in __all__})
