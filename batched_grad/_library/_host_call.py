"""An operator's kernel called from inside a JAX trace (bg.compile's, or a vectorized backward's): the kernel is
opaque to the trace, as torch.compile keeps a custom operator, and runs on the host through jax.pure_callback when
the compiled program runs. Its output shapes and dtypes come from the fake kernel, as torch.compile's do."""

import jax
import numpy as np

from .._factories import from_numpy
from .._grad_mode import no_grad
from .._tensor import Tensor
from ._calls import tensors_of, value_of


def _replaced(value, new):
    """`value` (an argument or a result) with each Tensor replaced by new(Tensor)."""
    if isinstance(value, Tensor):
        return new(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_replaced(v, new) for v in value)
    if isinstance(value, dict):
        return {k: _replaced(v, new) for k, v in value.items()}
    return value


def _leaves(value):
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _leaves(v)]
    return [value] if isinstance(value, Tensor) else []


def host_call(op, kernel, args, kwargs):
    """`kernel`'s result on traced arguments: the arguments it writes take the values it wrote (a version bump
    each)."""
    to_meta = lambda t: t.detach().to("meta")  # noqa: E731
    described = op.kernel_for("meta")(*_replaced(args, to_meta), **_replaced(kwargs, to_meta))
    written = [t for a in op._schema.mutated for t in _leaves(value_of(op._schema, a, args, kwargs))]
    inputs = tensors_of(args, kwargs)
    shapes = [jax.ShapeDtypeStruct(tuple(t.shape), t.dtype.np) for t in (*_leaves(described), *written)]

    def on_host(*arrays):
        hosted = iter([from_numpy(np.array(a)) for a in arrays])
        by_id = {id(t): next(hosted) for t in inputs}
        host_args, host_kwargs = _replaced(args, lambda t: by_id[id(t)]), _replaced(kwargs, lambda t: by_id[id(t)])
        with no_grad():
            result = kernel(*host_args, **host_kwargs)
        results = [*_leaves(result), *(by_id[id(t)] for t in written)]
        return [np.asarray(t.numpy(), dtype=s.dtype) for t, s in zip(results, shapes)]

    # forward-mode AD does not see through an operator (torch's tangents of its outputs are zeros)
    arrays = [jax.lax.stop_gradient(t._value) for t in inputs]
    outs = iter(jax.pure_callback(on_host, shapes, *arrays, vmap_method="sequential"))
    result = _replaced(described, lambda t: Tensor._wrap(next(outs)))
    with no_grad():
        for t in written:
            t.copy_(Tensor._wrap(next(outs)))
    return result
