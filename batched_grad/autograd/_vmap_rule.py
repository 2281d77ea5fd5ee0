"""A Function's `vmap(info, in_dims, *args)` staticmethod as the batching rule of its `apply` (torch.func's
contract), through jax.custom_batching.custom_vmap: wherever `apply` runs on batched values (inside
`vmap.vmap`, or inside a backward that the vmap layer vectorizes), the rule computes the whole batch at once,
so a forward that leaves JAX (NumPy, `.item()`) still runs vectorized."""

import collections

import jax
import numpy as np
from jax.custom_batching import custom_vmap

from vmap import _pytree
from vmap._fallback import UNVECTORIZABLE

from .._tensor import Tensor
from .._vmap_levels import in_vmap_randomness

VmapInfo = collections.namedtuple("VmapInfo", ["batch_size", "randomness"])


def is_traced(args):
    return any(isinstance(a, Tensor) and isinstance(a._value, jax.core.Tracer) for a in args)


def apply_rule(cls, args, kwargs):
    """`cls.forward(*args)` on traced Tensors, batched by `cls.vmap` wherever a vmap is active."""
    if cls.setup_context is None:
        raise RuntimeError(
            f"In order to use an autograd.Function ({cls.__name__}) with a vmap staticmethod, it "
            "must override the setup_context staticmethod and define forward(*args) without ctx."
        )
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
        out, out_dims = cls.vmap(
            VmapInfo(axis_size, in_vmap_randomness() or "error"), in_dims, *with_arrays(arrays), **kwargs
        )
        outs = flatten(out)
        dims = out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,) * len(outs)
        if len(dims) != len(outs):
            raise ValueError(
                f"{cls.__name__}.vmap returned {len(outs)} outputs but {len(dims)} out_dims; "
                "return one out_dim (an int or None) per output."
            )
        return (
            [o if d is None else jax.numpy.moveaxis(o, d, 0) for o, d in zip(outs, dims)],
            [d is not None for d in dims],
        )

    batched_forward = custom_vmap(unbatched)
    batched_forward.def_vmap(rule)
    outs = batched_forward(*[args[i]._value for i in positions])
    return structure[0].unflatten([Tensor._wrap(o) for o in outs])
