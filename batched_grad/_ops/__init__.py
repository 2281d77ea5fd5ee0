"""The op table's public face: module functions with torch's names, and the Tensor methods and operators
generated from them."""

import jax.numpy as jnp

from .. import _dtypes, _factories, _layout
from .._compiled import set_background_compile, wait_for_compiles
from .._grad_mode import is_grad_enabled
from .._lazy import compile_count
from .._meta import device_for
from .._tensor import VIEW_OF_LEAF_INPLACE, Tensor, warn_once
from . import (
    activations,
    arrange,
    complex_parts,
    conv_transpose,
    conveniences,
    creation,
    decompositions,
    distances,
    dropouts,
    inplace,
    layers,
    legacy,
    norms,
    placement,
    pooling,
    products,
    sampling,
    scatters,
    searching,
    special,
    statistics,
)
from ._core import Op, apply
from ._public import public
from .closeness import allclose, equal, is_complex, is_floating_point, is_tensor, isclose, numel
from .complex_parts import conj, imag, real
from .compound import addcdiv, addcmul
from .diagonals import diag_embed, diagflat
from .elementwise import (
    COMPARISONS,
    PREDICATES,
    UNARY,
    add,
    atan2,
    clamp,
    clamp_max,
    clamp_min,
    clip,
    div,
    floor_divide,
    fmod,
    hypot,
    lerp,
    maximum,
    minimum,
    mul,
    pow,
    remainder,
    round,
    rsub,
    sub,
    true_divide,
    where,
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
from .linalg import bmm, diag, diagonal, dot, einsum, matmul, mm, mv, outer, tensordot, trace, tril, triu
from .linalg import inv as inverse
from .nn import conv1d, conv2d, conv3d, layer_norm, log_softmax, softmax
from .placement import to
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
from .shape import (
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
from .unique import unique

globals().update(UNARY)
globals().update(COMPARISONS)
globals().update(PREDICATES)
globals().update(special.FUNCTIONS)
globals().update(activations.TORCH)
globals().update(distances.TORCH)
globals().update(pooling.TORCH)
_TORCH_NN = {**norms.TORCH, **layers.TORCH, **dropouts.TORCH, **conv_transpose.FUNCTIONAL}
globals().update(_TORCH_NN)
_TORCH_MORE = {
    **arrange.FUNCTIONS,
    **scatters.FUNCTIONS,
    **searching.FUNCTIONS,
    **statistics.FUNCTIONS,
    **products.FUNCTIONS,
    **decompositions.FUNCTIONS,
    **conveniences.FUNCTIONS,
    **creation.FUNCTIONS,
    **sampling.FUNCTIONS,
    **legacy.FUNCTIONS,
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
_COPY = Op(
    "copy",
    lambda a, src: jnp.broadcast_to(src.astype(a.dtype), a.shape),
    linear=True,
    backward_name="torch::autograd::CopyBackwards",
)


def clone(input):
    """A copy that stays in the graph."""
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
    """The in-place method `name`: fn(self, ...) written into self (its version, views and graph updated)."""

    def method(self, *args, **kwargs):
        return self._assign(fn(self, *args, **kwargs))

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


_ZERO = Op("zero", lambda a: jnp.zeros_like(a), linear=True)
# the number is an operand (a 0-d array): a new value compiles nothing
_FILL_NUMBER = Op("fill", lambda a, v: jnp.full_like(a, v), linear=True, backward_name="FillBackward2", inputs=1)
_FILL_TENSOR = Op(
    "fill", lambda a, v: jnp.broadcast_to(v.astype(a.dtype), a.shape), linear=True, backward_name="FillBackward3"
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


def fill(input, value):
    """A tensor like input filled with `value` (a number or a 0-dim tensor, whose derivative it takes)."""
    return _fill(input, value)


def _copy(self, src):
    return apply(_COPY, [self, src])


def _reversed(fn):
    return lambda self, other: fn(other, self)


def _rtruediv(self, other):  # number / tensor: torch computes reciprocal(tensor) * number (its values and nodes)
    return mul(UNARY["reciprocal"](self), other)


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
    if is_grad_enabled() and self.is_leaf and self.requires_grad and _setitem_is_view(self.shape, index):
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
    def method(self, *args, size=None, dtype=None, requires_grad=False, device=None):

        if size is not None:
            if args:
                raise TypeError(f"new_{kind}() got multiple values for argument 'size'")
            args = (size,)
        return getattr(_factories, kind)(
            *args, dtype=dtype or self.dtype, requires_grad=requires_grad, device=device_for(device, self)
        )

    method.__name__ = method.__qualname__ = f"new_{kind}"
    method.__doc__ = (
        f"A tensor of {kind} of the given size, with this tensor's dtype and device unless `dtype` or "
        "`device` is given."
    )
    return method


_METHOD_NAMES = """add sub mul div true_divide floor_divide remainder fmod pow atan2 maximum minimum hypot clamp
    clip lerp round clamp_min clamp_max sum mean prod amax amin max min argmax argmin var std norm logsumexp
    cumsum cumprod all any matmul mm bmm mv dot outer trace diag diagonal tril triu reshape view view_as flatten
    unflatten squeeze unsqueeze expand expand_as broadcast_to permute transpose swapaxes t movedim split chunk
    unbind flip roll repeat tile narrow select index_select gather scatter scatter_add take_along_dim
    masked_fill masked_select nonzero sort argsort topk clone to tensordot softmax log_softmax allclose isclose
    equal addcmul addcdiv inverse diag_embed diagflat unique""".split()
_CONVERSIONS = {
    "float": _dtypes.float32,
    "double": _dtypes.float64,
    "half": _dtypes.float16,
    "long": _dtypes.int64,
    "int": _dtypes.int32,
    "bool": _dtypes.bool,
}
_METHODS = dict(UNARY, **COMPARISONS, **PREDICATES)
_METHODS.update({name: globals()[name] for name in _METHOD_NAMES})
_METHODS.update(special.METHODS)
_METHODS.update(activations.METHODS)
for _module in (arrange, scatters, searching, statistics, products, decompositions, conveniences, sampling, legacy):
    _METHODS.update(_module.METHODS)
_METHODS.update({alias: _METHODS[name] for alias, name in ALIASES.items()})
_METHODS.update(
    where=_where,
    type_as=_type_as,
    new_zeros=_new_factory("zeros"),
    new_ones=_new_factory("ones"),
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
    T=property(_T),
    mT=property(_mT),
    mH=property(_mH),
    H=property(_H),
    adjoint=_adjoint,
    **_layout.METHODS,
    **placement.METHODS,
    **complex_parts.METHODS,
)
_INPLACE = [
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "clamp",
    "clip",
    "neg",
    "abs",
    "exp",
    "log",
    "sqrt",
    "sigmoid",
    "tanh",
    "floor",
    "ceil",
    "round",
    "trunc",
    "masked_fill",
    "scatter",
    "scatter_add",
    "lerp",
    "sin",
    "cos",
    "relu",
    "square",
    "reciprocal",
    "fmod",
    "remainder",
    "tril",
    "triu",
    "absolute",
    "acos",
    "arctan2",
    "asin",
    "atan",
    "atan2",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "cosh",
    "cumprod",
    "cumsum",
    "divide",
    "erf",
    "erfc",
    "expm1",
    "frac",
    "hypot",
    "log10",
    "log1p",
    "log2",
    "multiply",
    "negative",
    "rsqrt",
    "sign",
    "sinh",
    "subtract",
    "tan",
    "true_divide",
    "addcmul",
    "addcdiv",
    "clamp_min",
    "clamp_max",
    "copysign",
    "deg2rad",
    "rad2deg",
    "digamma",
    "erfinv",
    "exp2",
    "gcd",
    "lcm",
    "heaviside",
    "i0",
    "igamma",
    "igammac",
    "ldexp",
    "lgamma",
    "logit",
    "mvlgamma",
    "nan_to_num",
    "nextafter",
    "polygamma",
    "sgn",
    "sinc",
    "xlogy",
    "bitwise_not",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "index_add",
    "index_copy",
    "index_fill",
    "index_put",
    "masked_scatter",
    "put",
    "scatter_reduce",
    "renorm",
    "addmm",
    "addmv",
    "addbmm",
    "baddbmm",
    "addr",
    "index_reduce",
]
_METHODS.update({f"{name}_": _in_place_version(name, _METHODS[name]) for name in _INPLACE})
_METHODS.update({name: _inplace_method(name, fn) for name, fn in inplace.METHODS.items()})
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
            ("pow", "pow"),
            ("mod", "remainder"),
        ]
    }
)


for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)

# torch's module-level in-place functions (torch.relu_(x) is x.relu_())
_FUNCTION_INPLACE = """abs acos acosh arccos arccosh arcsin arcsinh arctan arctanh asin asinh atan atanh ceil clamp
    clamp_max clamp_min clip cos cosh deg2rad erf erfc exp exp2 expm1 fix floor frac gcd i0 lcm ldexp log10 log1p log2
    log logit nan_to_num neg negative rad2deg reciprocal relu round rsqrt sigmoid sin sinc sinh sqrt square tan tanh
    trunc xlogy zero fill index_put addmv""".split()
globals().update({f"{name}_": _METHODS[f"{name}_"] for name in _FUNCTION_INPLACE})

# the public op functions, re-exported by batched_grad (modules such as .linalg stay out of the star-import)
__all__ = sorted(
    {
        *UNARY,
        *COMPARISONS,
        *PREDICATES,
        "add",
        "atan2",
        "clamp",
        "clip",
        "div",
        "floor_divide",
        "fmod",
        "hypot",
        "lerp",
        "maximum",
        "minimum",
        "mul",
        "pow",
        "remainder",
        "round",
        "rsub",
        "sub",
        "true_divide",
        "where",
        "argsort",
        "gather",
        "index_select",
        "masked_fill",
        "masked_select",
        "nonzero",
        "scatter",
        "scatter_add",
        "sort",
        "take_along_dim",
        "topk",
        "bmm",
        "diag",
        "diagonal",
        "dot",
        "einsum",
        "matmul",
        "mm",
        "mv",
        "outer",
        "tensordot",
        "trace",
        "tril",
        "triu",
        "all",
        "amax",
        "amin",
        "any",
        "argmax",
        "argmin",
        "cumprod",
        "cumsum",
        "logsumexp",
        "max",
        "mean",
        "min",
        "norm",
        "prod",
        "std",
        "sum",
        "var",
        "broadcast_to",
        "cat",
        "chunk",
        "concat",
        "concatenate",
        "expand",
        "expand_as",
        "flatten",
        "flip",
        "hstack",
        "movedim",
        "narrow",
        "permute",
        "repeat",
        "reshape",
        "roll",
        "select",
        "split",
        "squeeze",
        "stack",
        "swapaxes",
        "t",
        "tile",
        "transpose",
        "unbind",
        "unflatten",
        "unsqueeze",
        "view",
        "view_as",
        "vstack",
        "clone",
        "to",
        "jax_function",
        "conv1d",
        "conv2d",
        "layer_norm",
        "log_softmax",
        "softmax",
        "allclose",
        "isclose",
        "equal",
        "is_tensor",
        "is_floating_point",
        "is_complex",
        "numel",
        "addcmul",
        "addcdiv",
        "inverse",
        "diag_embed",
        "diagflat",
        "meshgrid",
        "unique",
        "var_mean",
        "std_mean",
        "real",
        "imag",
        "conj",
        "clamp_min",
        "clamp_max",
        *special.FUNCTIONS,
        *activations.TORCH,
        *distances.TORCH,
        *pooling.TORCH,
        *_TORCH_NN,
        *_TORCH_MORE,
        "conv3d",
        "fill",
        *ALIASES,
        *[f"{name}_" for name in _FUNCTION_INPLACE],
    }
)

# torch's elementwise functions that take out=, by how out's dtype may differ from the result's (_public.py)
_OUT_RULES = {
    name: "cast"
    for name in [
        *UNARY,
        *COMPARISONS,
        "logical_not",
        "add",
        "atan2",
        "div",
        "floor_divide",
        "fmod",
        "hypot",
        "maximum",
        "minimum",
        "mul",
        "pow",
        "remainder",
        "sub",
        "true_divide",
        "addcmul",
        "addcdiv",
    ]
    if name != "relu"
}
_OUT_RULES.update(
    {name: "exact" for name in ("neg", "abs", "sign", "floor", "ceil", "trunc", "frac", "round", "clamp", "clip")},
    where="where",
    lerp=lambda input, end, weight: "exact" if isinstance(weight, Tensor) else "cast",
)
globals().update({_name: public(globals()[_name], _OUT_RULES.get(_name)) for _name in __all__})
