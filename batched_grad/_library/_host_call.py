"""An operator's kernel called from inside a JAX trace (bg.compile's, or a vectorized backward's): the kernel is
opaque to the trace, as torch.compile keeps a custom operator, and runs on the host through jax.pure_callback when
the compiled program runs. Its output shapes and dtypes come from the fake kernel, as torch.compile's do."""

import jax
import numpy as np

from .._factories import from_numpy
from .._grad_mode import no_grad
from .._tensor import Tensor
from ._calls import leaves, map_tensors, tensors_of, value_of


def tensor_leaves(value):
    """The Tensors in `value` (a result, or an argument that may be a list)."""
    return [x for x in leaves(value) if isinstance(x, Tensor)]


def host_call(op, kernel, args, kwargs):
    """`kernel`'s result on traced arguments: the arguments it writes take the values it wrote (a version bump
    each)."""
    to_meta = lambda t: t.detach().to("meta")  # noqa: E731
    described = op.kernel_for("meta")(*map_tensors(to_meta, args), **map_tensors(to_meta, kwargs))
    written = [t for a in op._schema.mutated for t in tensor_leaves(value_of(op._schema, a, args, kwargs))]
    inputs = tensors_of(args, kwargs)
    shapes = [jax.ShapeDtypeStruct(tuple(t.shape), t.dtype.np) for t in (*tensor_leaves(described), *written)]

    def on_host(*arrays):
        hosted = iter([from_numpy(np.array(a)) for a in arrays])
        by_id = {id(t): next(hosted) for t in inputs}
        host_args, host_kwargs = map_tensors(lambda t: by_id[id(t)], (args, kwargs))
        with no_grad():
            result = kernel(*host_args, **host_kwargs)
        results = [*tensor_leaves(result), *(by_id[id(t)] for t in written)]
        return [np.asarray(t.numpy(), dtype=s.dtype) for t, s in zip(results, shapes)]

    # forward-mode AD does not see through an operator (torch's tangents of its outputs are zeros)
    arrays = [jax.lax.stop_gradient(t._value) for t in inputs]
    outs = iter(jax.pure_callback(on_host, shapes, *arrays, vmap_method="sequential"))
    result = map_tensors(lambda t: Tensor._wrap(next(outs)), described)
    with no_grad():
        for t in written:
            t.copy_(Tensor._wrap(next(outs)))
    return result
