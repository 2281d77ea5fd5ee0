"""A Function's `vmap(info, in_dims, *args)` staticmethod as the batching rule of its `apply` (torch.func's
contract). Inside `vmap.vmap`, where some argument varies across the rows, the rule is called directly with the
batched arrays (each where its rows are, its axis in `in_dims`), as torch.func calls it: the Function's forward does
not run there. Where a JAX trace that is no vmap.vmap batches `apply` (inside a backward that the vmap layer
vectorizes, a forward-mode transform, a compiled step), the rule reaches JAX through
jax.custom_batching.custom_vmap, whose per-row meaning is the forward (a forward that leaves JAX then still runs
vectorized).

A Function with `generate_vmap_rule = True` has no rule to apply: its forward (and its backward, under a grad
transform) runs on the batched values as any Tensor code does, so jax.vmap batches it. Inside `vmap.vmap`, a
Function must say which of the two it uses, as torch.func requires (`check_vmappable`)."""

import collections

import jax
import numpy as np
from jax.custom_batching import custom_vmap

from vmap import _pytree
from vmap._fallback import UNVECTORIZABLE

from .._tensor import Tensor
from .._tracing import TRACING
from .._vmap_levels import batch_size, batched, batching_level, below, in_vmap_randomness, unbatched

VmapInfo = collections.namedtuple("VmapInfo", ["batch_size", "randomness"])

_DETAILS = "For more details, please see https://pytorch.org/docs/main/notes/extending.func.html"
NO_SETUP_CONTEXT = (
    "In order to use an autograd.Function with functorch transforms (vmap, grad, jvp, jacrev, ...), it must "
    f"override the setup_context staticmethod. {_DETAILS}"
)
NO_VMAP_SUPPORT = (
    "You tried to vmap over {name}, but it does not have vmap support. Please override and implement the vmap "
    f"staticmethod or set generate_vmap_rule=True. {_DETAILS}"
)
TWO_VMAP_RULES = (
    "You tried to vmap over {name}, but it has both generate_vmap_rule=True and an overridden vmap staticmethod. "
    "Please set generate_vmap_rule=False or delete the overridden vmap staticmethod to avoid ambiguity. "
    f"{_DETAILS}"
)
KWARG_TENSORS = (
    "Run vmap on autograd.Function with kwarg-only Tensor args. Please do not pass kwarg-only Tensors to "
    "autograd.Function. Got: {kwargs}"
)


def check_vmappable(cls, has_rule, kwargs):
    """torch.func's checks on a Function applied inside vmap.vmap (whether or not its arguments are batched): it
    has setup_context, no Tensor among the keyword-only arguments, and exactly one way to be batched: a vmap
    staticmethod (`has_rule`) or generate_vmap_rule=True."""
    if cls.setup_context is None:
        raise RuntimeError(NO_SETUP_CONTEXT)
    if any(isinstance(x, Tensor) for x in _pytree.flatten(kwargs)[0]):
        raise NotImplementedError(KWARG_TENSORS.format(kwargs=kwargs))
    if cls.generate_vmap_rule and has_rule:
        raise RuntimeError(TWO_VMAP_RULES.format(name=cls.__name__))
    if not cls.generate_vmap_rule and not has_rule:
        raise RuntimeError(NO_VMAP_SUPPORT.format(name=cls.__name__))


def is_traced(args):
    """Whether a Tensor among `args` (pytrees, as torch flattens them) holds a JAX tracer."""
    return any(isinstance(a, Tensor) and isinstance(a._value, jax.core.Tracer) for a in _pytree.flatten(args)[0])


def _check_two_returns(returned):
    """torch's check that a vmap staticmethod returned (output, out_dims)."""
    expected = (
        "Expected the vmap staticmethod to have two returns, an output and out_dims with pytree structure "
        "compatible with the output. "
    )
    if not isinstance(returned, tuple):
        raise RuntimeError(expected + f"Got a {type(returned)} instead")
    if len(returned) != 2:
        raise RuntimeError(expected + f"Got {len(returned)} returns instead")
    return returned


def _flat_out_dims(out_dims, structure):
    """The out_dim of each leaf of the rule's output, as torch broadcasts them over its structure."""
    dims = _pytree.broadcast_prefix(out_dims, structure)
    if dims is None:
        raise RuntimeError(
            "The autograd.Function's vmap staticmethod returned an incompatible (output, out_dims) tuple. "
            f"Expected out_dims={out_dims} to be compatible with the structure of `output`. out_dims has "
            f"structure {_pytree.flatten(out_dims)[1]} but output has structure {structure}. {_DETAILS}"
        )
    return dims


def _out_dim(d, ndim):
    if not isinstance(d, int) or isinstance(d, bool):
        raise ValueError(f"vmap staticmethod: an out_dim must be an int or None; got {d!r}")
    if not -ndim <= d < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {d})")
    return d % ndim


def apply_rule(cls, args, kwargs):
    """`cls.apply(*args)` on batched Tensors (some hold JAX tracers): the rule's output, each Tensor a row value of
    the batch it varies across."""
    if cls.setup_context is None:
        raise RuntimeError(NO_SETUP_CONTEXT)
    flat, spec = _pytree.flatten(args)
    level = batching_level([a._value for a in flat if isinstance(a, Tensor)])
    if level is not None:
        return _rule_of_level(cls, level, flat, spec, kwargs)
    return _custom_vmap(cls, flat, spec, kwargs)


def _rule_of_level(cls, level, flat, spec, kwargs):
    """The rule called on the batched arrays of vmap.vmap's `level` (the innermost one the arguments vary across),
    as torch.func calls it: with that level and those inside it set aside, in_dims None for what does not vary
    across its rows (other Tensors, non-Tensors)."""
    unwrapped, in_dims = [], []
    for a in flat:
        array, dim = unbatched(a._value, level) if isinstance(a, Tensor) else (a, None)
        unwrapped.append(a if dim is None else Tensor._wrap(array))
        in_dims.append(dim)
    info = VmapInfo(batch_size(level), level.randomness)
    with below(level):
        returned = cls.vmap(info, spec.unflatten(in_dims), *spec.unflatten(unwrapped), **kwargs)
        out, out_dims = _check_two_returns(returned)
        leaves, structure = _pytree.flatten(out)
        rows = []
        for x, d in zip(leaves, _flat_out_dims(out_dims, structure)):
            if isinstance(x, Tensor) and d is not None:  # anything else is the same for every row, as torch's
                array = x._value
                x = Tensor._wrap(batched(array, _out_dim(d, array.ndim), level))
            rows.append(x)
    return structure.unflatten(rows)


def _custom_vmap(cls, flat, spec, kwargs):
    """`cls.forward` as a jax.custom_batching.custom_vmap whose batching rule is `cls.vmap`, for a JAX trace that
    batches it (its rows are found on axis 0)."""
    positions = [i for i, a in enumerate(flat) if isinstance(a, Tensor)]
    structure = []

    def with_arrays(arrays):
        call = list(flat)
        for i, a in zip(positions, arrays):
            call[i] = Tensor._wrap(a)
        return spec.unflatten(call)

    def flatten(out):
        leaves, tree = _pytree.flatten(out)  # dicts keep their order, as torch's pytrees do
        if not all(isinstance(x, Tensor) for x in leaves):
            raise TypeError(
                f"{cls.__name__}: a Function batched by its vmap staticmethod inside a JAX trace must return "
                f"Tensors (or pytrees of them); got {[type(x).__name__ for x in leaves]}"
            )
        structure[:] = [tree]
        return [x._value for x in leaves]

    def unbatched_forward(*arrays):  # the per-row meaning, which JAX traces for shapes (and runs where no vmap is)
        try:
            return flatten(cls.forward(*with_arrays(arrays), **kwargs))
        except UNVECTORIZABLE:  # a forward that leaves JAX runs on the host; its shapes come from one run on zeros
            host = lambda *xs: [np.asarray(o) for o in flatten(cls.forward(*with_arrays(xs), **kwargs))]
            with jax.ensure_compile_time_eval():  # run eagerly, not staged into the trace around us
                shapes = [
                    jax.ShapeDtypeStruct(o.shape, o.dtype) for o in host(*[np.zeros(a.shape, a.dtype) for a in arrays])
                ]
            return jax.pure_callback(host, shapes, *arrays, vmap_method="sequential")

    def rule(axis_size, in_batched, *arrays):
        batched_at = dict(zip(positions, in_batched))
        in_dims = spec.unflatten([0 if batched_at.get(i) else None for i in range(len(flat))])
        returned = cls.vmap(
            VmapInfo(axis_size, in_vmap_randomness() or "error"), in_dims, *with_arrays(arrays), **kwargs
        )
        out, out_dims = _check_two_returns(returned)
        outs = flatten(out)
        dims = _flat_out_dims(out_dims, structure[0])
        dims = [None if d is None else _out_dim(d, o.ndim) for o, d in zip(outs, dims)]
        return (
            [o if d is None else jax.numpy.moveaxis(o, d, 0) for o, d in zip(outs, dims)],
            [d is not None for d in dims],
        )

    batched_forward = custom_vmap(unbatched_forward)
    batched_forward.def_vmap(rule)
    arrays = [flat[i]._value for i in positions]
    if TRACING.depth:  # a forward-mode trace ties the outputs to the user's jvp: JAX must not differentiate the
        arrays = [jax.lax.stop_gradient(a) for a in arrays]  # forward, whose batched tangents would call the rule
    outs = batched_forward(*arrays)
    return structure[0].unflatten([Tensor._wrap(o) for o in outs])
