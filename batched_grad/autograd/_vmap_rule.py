"""A Function's `vmap(info, in_dims, *args)` staticmethod as the batching rule of its `apply` (torch.func's
contract), through jax.custom_batching.custom_vmap: wherever `apply` runs on batched values (inside
`vmap.vmap`, or inside a backward that the vmap layer vectorizes), the rule computes the whole batch at once,
so a forward that leaves JAX (NumPy, `.item()`) still runs vectorized.

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
from .._vmap_levels import in_vmap_randomness

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
    return any(isinstance(a, Tensor) and isinstance(a._value, jax.core.Tracer) for a in args)


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


def apply_rule(cls, args, kwargs):
    """`cls.forward(*args)` on traced Tensors, batched by `cls.vmap` wherever a vmap is active."""
    if cls.setup_context is None:
        raise RuntimeError(NO_SETUP_CONTEXT)
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    structure = []

    def with_arrays(arrays):
        call = list(args)
        for i, a in zip(positions, arrays):
            call[i] = Tensor._wrap(a)
        return call

    def flatten(out):
        leaves, tree = _pytree.flatten(out)  # dicts keep their order, as torch's pytrees do
        if not all(isinstance(x, Tensor) for x in leaves):
            raise TypeError(
                f"{cls.__name__}: a Function batched by its vmap staticmethod must return Tensors "
                f"(or tuples of them); got {[type(x).__name__ for x in leaves]}"
            )
        structure[:] = [tree]
        return [x._value for x in leaves]

    def unbatched(*arrays):  # the per-row meaning, which JAX traces for shapes (and runs where no vmap is)
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
        batched = dict(zip(positions, in_batched))
        in_dims = tuple(0 if batched.get(i) else None for i in range(len(args)))
        returned = cls.vmap(
            VmapInfo(axis_size, in_vmap_randomness() or "error"), in_dims, *with_arrays(arrays), **kwargs
        )
        _check_two_returns(returned)
        out, out_dims = returned
        outs = flatten(out)
        dims = _pytree.broadcast_prefix(out_dims, structure[0])
        if dims is None:
            raise RuntimeError(
                "The autograd.Function's vmap staticmethod returned an incompatible (output, out_dims) tuple. "
                f"Expected out_dims={out_dims} to be compatible with the structure of `output`. out_dims has "
                f"structure {_pytree.flatten(out_dims)[1]} but output has structure {structure[0]}. {_DETAILS}"
            )
        return (
            [o if d is None else jax.numpy.moveaxis(o, d, 0) for o, d in zip(outs, dims)],
            [d is not None for d in dims],
        )

    batched_forward = custom_vmap(unbatched)
    batched_forward.def_vmap(rule)
    outs = batched_forward(*[args[i]._value for i in positions])
    return structure[0].unflatten([Tensor._wrap(o) for o in outs])
