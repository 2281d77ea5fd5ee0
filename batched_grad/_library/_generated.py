"""The autograd.Function an operator's recorded calls go through (torch's GeneratedBackwardFor_<ns>_<name>_<overload>):
its forward runs the kernel, its setup_context and backward are the ones registered with register_autograd, and
its vmap rule is the one registered with register_vmap, else a loop over the batch's rows."""

from .._factories import zeros_like
from .._ops import stack
from .._tensor import Tensor
from ..autograd.function import Function
from ._calls import with_defaults


def generated_function(op, batched):
    """The Function of `op`'s calls: apply(*flat arguments, call), `call` the Call that unflattens them; with a
    vmap staticmethod where `batched`."""

    def forward(*flat):
        call = flat[-1]
        return call.flat_output(op.run_kernel(call.args_of(flat[:-1]), call.kwargs))

    def setup_context(ctx, inputs, output):
        call = ctx._custom_op_call = inputs[-1]
        if op.setup_context is None:
            return
        args, kwargs = with_defaults(op._schema, call.args_of(inputs[:-1]), call.kwargs)
        output = call.output_of(output) if isinstance(output, tuple) and call.list_output else output
        if any(a.kwarg_only for a in op._schema.arguments):
            op.setup_context(ctx=ctx, inputs=tuple(args), keyword_only_inputs=kwargs, output=output)
        else:
            op.setup_context(ctx=ctx, inputs=tuple(args), output=output)

    def backward(ctx, *grads):
        if op.backward is None:
            raise RuntimeError(
                f"Trying to backward through {op} but no autograd formula was registered. "
                "Please use register_autograd to add one."
            )
        call, needs = ctx._custom_op_call, ctx.needs_input_grad
        ctx.needs_input_grad = tuple(call.args_of(needs[:-1]))
        try:
            result = op.backward(ctx, *call.grads_of(grads))
        finally:
            ctx.needs_input_grad = needs
        return (*call.flat_grads(result, name), None)

    def jvp(ctx, *tangents):
        # as torch.func.jvp's: forward-mode AD does not see through an operator, its outputs' tangents are zeros
        outputs = ctx._custom_op_call.outputs
        zeros = tuple(zeros_like(o) if isinstance(o, Tensor) else None for o in outputs)
        return zeros if len(zeros) > 1 or ctx._custom_op_call.list_output else zeros[0]

    def vmap(info, in_dims, *flat):
        call = flat[-1]
        args, dims = call.args_of(flat[:-1]), call.args_of(in_dims[:-1])
        if op.vmap_rule is not None:
            output, out_dims = op.vmap_rule(info, tuple(dims), *args, **call.kwargs)
            if isinstance(output, list):
                call.list_output = True
                return tuple(output), tuple(out_dims) if isinstance(out_dims, list) else out_dims
            return output, out_dims
        return _rows_loop(op, call, info.batch_size, flat[:-1], in_dims[:-1])

    name = f"GeneratedBackwardFor_{op.namespace}_{op._opname}_{op._overloadname}"
    methods = {"forward": forward, "setup_context": setup_context, "backward": backward, "jvp": jvp}
    if batched:
        methods["vmap"] = vmap
    return type(name, (Function,), {k: staticmethod(f) for k, f in methods.items()})


def _rows_loop(op, call, batch_size, flat, in_dims):
    """torch's fallback for an operator without a batching rule: the operator on each row, the rows stacked."""
    if op._schema.mutated:
        raise RuntimeError(
            f"vmap: {op.name()} writes its arguments in place and has no batching rule; register one with "
            "register_vmap, or call it outside vmap"
        )
    rows = []
    for b in range(batch_size):
        row = [a.select(d, b) if d is not None else a for a, d in zip(flat, in_dims)]
        rows.append(call.flat_output(op._dispatch(call.args_of(row), call.kwargs)))
    if isinstance(rows[0], tuple):
        stacked = [_stacked([r[k] for r in rows]) for k in range(len(rows[0]))]
        return tuple(s for s, _ in stacked), tuple(d for _, d in stacked)
    return _stacked(rows)


def _stacked(rows):
    """(the rows stacked on a new axis 0, 0) for Tensors; (the first row's value, None) for anything else."""
    return (stack(rows), 0) if isinstance(rows[0], Tensor) else (rows[0], None)
