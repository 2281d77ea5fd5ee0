"""The module functions' face: the out= keyword of torch's functions (with the dtype rules of _out_rules.py and of
the exposure table), and torch's errors for it; a function that fails on a torch.Tensor argument says that it got
one."""

import collections
import functools
import warnings

import numpy as np

from .. import _dtypes, _dual
from .._foreign import TORCH_TENSOR_PASSED, has_torch_tensor, not_a_tensor
from .._grad_mode import is_recording, no_grad
from .._subclass import DISPATCHING, dispatch, dispatching_later, overloaded
from .._tensor import Tensor
from .._vmap_levels import is_batched
from .numpy_keywords import function_renaming
from .random_draws import refuse_random_out

RESIZED = (
    "An output with one or more elements was resized since it had shape {}, which does not match the required "
    "output shape {}. This behavior is deprecated, and in a future PyTorch release outputs will not be resized "
    "unless they have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
    "elements with t.resize_(0)."
)


def public(fn, out=None, name=None, namespace="torch"):
    """`fn` as batched_grad exports it (under `name`, by default its own), taking torch's NumPy spellings of its
    keywords (numpy_keywords); with the keyword `out` if `out` is given
    (how the result's dtype may differ from out's: "cast", "exact" or "where", torch's rules for the op, or a function
    of the op's arguments giving one); a failure on a torch.Tensor argument raises
    TypeError(TORCH_TENSOR_PASSED) instead (checked only once `fn` has raised)."""
    name = fn.__name__ if name is None else name
    label = f"{namespace}.{name}"  # torch's name of the function, in its errors of the Tensor subclass protocol
    rule = out
    renamed = function_renaming(fn, name, namespace) or (lambda args, kwargs: kwargs)
    if not out:

        @functools.wraps(fn)
        def function(*args, **kwargs):
            if DISPATCHING and overloaded(args, kwargs):  # an instance of a Tensor subclass (_subclass.py)
                return dispatch(function, args, kwargs, label)
            try:
                return fn(*args, **renamed(args, kwargs))
            except Exception:
                _say_if_torch(args, kwargs)
                if overloaded(args, kwargs):  # a tensor-like of another class (checked only once fn has failed)
                    return dispatch(function, args, kwargs, label)
                raise
    else:

        @functools.wraps(fn)
        def function(*args, out=None, **kwargs):
            given = kwargs if out is None else {**kwargs, "out": out}
            if DISPATCHING and overloaded(args, given):
                return dispatch(function, args, given, label)
            try:
                kwargs = renamed(args, kwargs)
                return fn(*args, **kwargs) if out is None else write_out(name, out, fn, args, kwargs, rule)
            except Exception:
                _say_if_torch(args + (out,), kwargs)
                if overloaded(args, given):
                    return dispatch(function, args, given, label)
                raise

    return sparse_aware(function, name) if name in SPARSE_DISPATCHED else function


# the elementwise functions that keep zeros zero: on a sparse COO tensor they apply to its values
SPARSE_VALUEWISE = (
    "abs absolute sqrt sin tan tanh relu sign sgn floor ceil round trunc fix frac expm1 log1p asin arcsin atan "
    "arctan sinh asinh arcsinh atanh arctanh erf erfinv square rad2deg deg2rad neg negative isnan isinf signbit "
    "isposinf isneginf nan_to_num conj"
).split()
# the functions that take a sparse COO operand (first or second): a sparse operand runs their sparse form
SPARSE_DISPATCHED = frozenset(
    {"mm", "matmul", "addmm", "add", "sub", "mul", "div", "pow", "t", "transpose", "sum", "clone", *SPARSE_VALUEWISE}
)


def sparse_aware(function, name):
    @functools.wraps(function)
    def dispatch(*args, **kwargs):
        for a in args[:2]:
            forms = getattr(a, "_sparse_forms", None)
            if forms is not None:
                return forms[name](*args, **kwargs)
        return function(*args, **kwargs)

    return dispatch


def with_out(functions, rules, namespace="torch"):
    """`functions` (name -> function) as exported, with out= where `rules` (name -> dtype rule) lists the name (which
    then takes part in the protocol of Tensor subclasses: see `functions_taking_part` for the others)."""
    return {name: public(fn, rules[name], name, namespace) if name in rules else fn for name, fn in functions.items()}


def _say_if_torch(args, kwargs):
    if has_torch_tensor(args, kwargs):
        raise TypeError(TORCH_TENSOR_PASSED) from None


def write_out(name, out, fn, args, kwargs, rule="cast"):
    """fn(*args, **kwargs) written into `out` (resized if its shape differs, cast to its dtype where `rule` lets
    torch cast), as torch's out= does; `out` is returned. A function of several results takes a tuple of as many
    tensors, each written with its result's exact dtype, and returns them as its result's (named) tuple. A factory
    (rule "factory") makes its result in out's dtype unless given one."""
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if not isinstance(o, Tensor):
            raise not_a_tensor(name, "out", out)
    refuse_random_out(name)
    operands = [x for x in (*args, *kwargs.values(), *outs) if isinstance(x, Tensor)]
    if is_recording() and any(x.requires_grad for x in operands):
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic differentiation, but "
            "one of the arguments requires grad."
        )
    if _dual.LEVELS.tangents is not None and _any_tangent((*args, *kwargs.values(), *outs)):
        raise NotImplementedError(_forward_ad_refused(name, args, kwargs, rule))
    made_requiring_grad = False
    if rule == "factory":
        kwargs, made_requiring_grad = _factory_arguments(kwargs, outs[0])
    result = fn(*args, **kwargs)
    if any([is_batched(x._v) for x in operands]):  # torch.func.vmap has no rule for an op with out=
        raise RuntimeError(
            f"Batching rule not implemented for aten::{out_overload(name, args, kwargs)}; the fallback path doesn't "
            "work on out= or view ops."
        )
    if isinstance(result, tuple):
        _check_out_tuple(name, out, len(result))
        written = [_write_one(o, r, "same") for o, r in zip(outs, result)]
        return _out_result(type(result))(*written) if hasattr(result, "_fields") else tuple(written)
    if isinstance(out, (tuple, list)):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    written = _write_one(out, result, rule(*args, **kwargs) if callable(rule) else rule)
    return written.requires_grad_() if made_requiring_grad else written


def _any_tangent(values):
    """Whether a tensor of `values`, or of a sequence among them (cat's tensors), has a forward-mode tangent."""
    for x in values:
        if isinstance(x, (tuple, list)):
            if _any_tangent(x):
                return True
        elif isinstance(x, Tensor) and _dual.tangent_of(x) is not None:
            return True
    return False


def _forward_ad_refused(name, args, kwargs, rule):
    """torch's refusal of an out= call where an operand or `out` has a forward-mode tangent."""
    if rule == "factory":
        return f"Trying to use forward AD with aten::{name} that does not support it."
    base = out_overload(name, args, kwargs).split(".")[0]
    return f"Trying to use forward AD with {base}_out that does not support it because it is an out= function"


def _factory_arguments(kwargs, out):
    """A factory's keywords for writing into `out`: out's dtype (a dtype given must be it), and requires_grad taken
    out (out itself is made to require grad, as torch does)."""
    kwargs = dict(kwargs)
    dtype = kwargs.get("dtype")
    if dtype is not None and _dtypes.to_dtype(dtype) is not out.dtype:
        raise RuntimeError(
            f"dtype {_dtypes.to_dtype(dtype).type_name} does not match dtype of out parameter ({out.dtype.type_name})"
        )
    kwargs["dtype"] = out.dtype
    return kwargs, bool(kwargs.pop("requires_grad", False))


@functools.cache
def _out_result(result_type):
    """The named tuple torch returns from out= (torch.return_types.sort_out) for the one of its plain form."""
    name, fields = f"{result_type.__name__}_out", result_type._fields
    cls = collections.namedtuple(name, fields)
    cls.__repr__ = lambda self: (
        f"torch.return_types.{name}(\n" + ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self)) + ")"
    )
    return cls


def _check_out_tuple(name, out, count):
    if not isinstance(out, (tuple, list)):
        raise TypeError(f"{name}(): argument 'out' must be tuple of Tensors, not {type(out).__name__}")
    if len(out) != count:
        raise TypeError(f"expected tuple of {count} elements but got {len(out)}")


def _write_one(out, result, rule):
    """`result` written into the tensor `out` under the dtype rule ("cast", "exact", "same", "where" or
    "factory")."""
    if result.dtype is not out.dtype:
        if rule == "same":
            raise RuntimeError(
                f"Expected out tensor to have dtype {result.dtype.cpp_name}, but got {out.dtype.cpp_name} instead"
            )
        got, expected = out.dtype.type_name, result.dtype.type_name
        if rule == "cast" and _dtypes.category(result.dtype) > _dtypes.category(out.dtype):  # torch's can_cast
            raise RuntimeError(f"result type {expected} can't be cast to the desired output type {got}")
        if rule not in ("cast", "factory"):
            raise RuntimeError(
                f"Found dtype {got} but expected {expected}"
                if rule == "exact"
                else f"Expected out type to be {expected} but got {got}"
            )
    if result.shape != out.shape:
        _resize(out, result.shape)
    with no_grad():
        out._assign(result)
    return out


def _resize(out, shape):
    if out._view is not None:
        raise RuntimeError(
            f"out= cannot resize a view (or detached alias) of shape {list(out.shape)} to the result's "
            f"shape {list(shape)}: pass a tensor of that shape"
        )
    if out.numel():
        warnings.warn(RESIZED.format(list(out.shape), list(shape)), UserWarning, stacklevel=4)
    out.data = Tensor._wrap(np.zeros(shape, out.dtype.np))


# the ops whose out= overload torch names by whether their second operand is a Tensor (Tensor_out) or a number
_BY_OTHER = {"fmod", "remainder", "bitwise_and", "bitwise_or", "bitwise_xor", "eq", "ne", "lt", "le", "gt", "ge"}


def out_overload(name, args, kwargs):
    """torch's name of the out= overload that `name`(*args, **kwargs, out=...) calls, e.g. pow.Tensor_Scalar_out."""

    def operand(position, keyword):
        return args[position] if position < len(args) else kwargs.get(keyword)

    def tensor(position, keyword):
        return isinstance(operand(position, keyword), Tensor)

    if name == "normalize":  # torch's normalize divides into out
        return "div.out"
    if name == "where":
        return "where.self_out"
    if name == "pow":
        if not tensor(0, "input"):
            return "pow.Scalar_out"
        return "pow.Tensor_Tensor_out" if tensor(1, "exponent") else "pow.Tensor_Scalar_out"
    if name in ("clamp", "clip"):
        return f"{name}.Tensor_out" if tensor(1, "min") or tensor(2, "max") else f"{name}.out"
    if name == "lerp":
        return "lerp.Tensor_out" if tensor(2, "weight") else "lerp.Scalar_out"
    if name == "round" and operand(1, "decimals") is not None:
        return "round.decimals_out"
    if name == "div" and operand(2, "rounding_mode") is not None:
        return "div.out_mode"
    if name in _BY_OTHER:
        return f"{name}.Tensor_out" if tensor(1, "other") else f"{name}.Scalar_out"
    return f"{name}.out"


def functions_taking_part(namespace, names, rules, module):
    """The functions `names` of a module's `namespace` (torch's `module`) that `with_out` did not wrap (no out=
    rule, not a class) take part in the protocol of Tensor subclasses once one does."""
    plain = [n for n in names if n not in rules and not isinstance(namespace[n], type)]
    dispatching_later(namespace, plain, module)
