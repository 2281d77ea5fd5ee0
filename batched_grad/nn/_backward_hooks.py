"""A module's full backward hooks (torch.utils.hooks.BackwardHook): the module's Tensor inputs and outputs pass
through identity nodes. The outputs' node runs the backward pre-hooks on grad_output and keeps it; the inputs'
node then calls hook(module, grad_input, grad_output), whose returned tuple replaces grad_input.

In batched mode (is_grads_batched) the nodes keep the whole batch of grad_outputs, and the hooks see one row at a
time, vectorized where they can be, else row by row."""

from .. import _graph
from .._rowwise import run_batched
from .._tensor import Tensor, warn_at_caller
from .._view_meta import note_custom_function_output

NO_INPUT_REQUIRES_GRAD = (
    "Full backward hook is firing when gradients are computed with respect to module outputs since no inputs "
    "require gradients. See https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
    "#torch.nn.Module.register_full_backward_hook for more details."
)


def _pack_with_none(indices, values, size):
    """A tuple of `size` entries: values[k] at indices[k], None elsewhere (non-Tensor arguments)."""
    packed = [None] * size
    for i, v in zip(indices, values):
        packed[i] = v
    return tuple(packed)


def _checked_count(result, expected, what):
    if len(result) != expected:
        raise RuntimeError(
            f"Backward {what} returned an invalid number of {_GRAD_NAME[what]}, got {len(result)}, "
            f"but expected {expected}"
        )
    return result


_GRAD_NAME = {"hook": "grad_input", "pre hook": "grad_output"}


class BackwardHook:
    """The backward hooks of one call of a module: set up on its inputs before forward and on its outputs after."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module, self.user_hooks, self.user_pre_hooks = module, user_hooks, user_pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = 0
        self.input_tensors_index = self.output_tensors_index = None

    def setup_input_hook(self, args):
        """`args` with its Tensors passed through the node that calls the backward hooks."""
        self.n_inputs = len(args)
        wrapped, self.input_tensors_index = _through_node(args, lambda *meta: _InputHookNode(self, *meta))
        return wrapped

    def setup_output_hook(self, result):
        """The module's result with its Tensors passed through the node that keeps grad_output."""
        is_tuple = isinstance(result, tuple)
        outputs = result if is_tuple else (result,)
        self.n_outputs = len(outputs)
        wrapped, self.output_tensors_index = _through_node(outputs, lambda *meta: _OutputHookNode(self, *meta))
        return wrapped if is_tuple else wrapped[0]

    def call_pre_hooks(self, grad_outputs):
        """Run the backward pre-hooks on one row's packed grad_output; returns it, possibly replaced."""
        for hook in self.user_pre_hooks:
            result = hook(self.module, grad_outputs)
            if result is not None:
                grad_outputs = _checked_count(tuple(result), len(grad_outputs), "pre hook")
        return grad_outputs

    def call_hooks(self, grad_inputs, grad_outputs):
        """Run the backward hooks on one row's packed grad_input and grad_output; returns grad_input."""
        for hook in self.user_hooks:
            result = hook(self.module, grad_inputs, grad_outputs)
            if result is not None:
                grad_inputs = _checked_count(tuple(result), len(grad_inputs), "hook")
        return grad_inputs

    def call_hooks_without_inputs(self, grad_outputs):
        """The hooks of a module none of whose inputs requires grad: they get Nones and may not replace them."""
        warn_at_caller(NO_INPUT_REQUIRES_GRAD)  # torch warns (pre-hooks only too) from its engine: the backward line
        nones = (None,) * self.n_inputs
        for hook in self.user_hooks:
            result = hook(self.module, nones, grad_outputs)
            if result is not None and not (isinstance(result, tuple) and all(r is None for r in result)):
                raise RuntimeError(
                    "Backward hook for Modules where no input requires gradient should always return None or None "
                    "for all gradients."
                )


def _through_node(values, make_node):
    """`values` (a tuple) with its Tensors replaced by outputs of a new identity node, if one requires grad (else
    unchanged); and the indices of the Tensors (None when nothing was wrapped)."""
    from .._grad_mode import is_recording

    indices = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
    tensors = [values[i] for i in indices]
    if not (is_recording() and any(t.requires_grad for t in tensors)):
        return values, None
    node = make_node(tuple(_graph.edge_of(t) for t in tensors), tuple((t._v.shape, t._v.dtype) for t in tensors))
    wrapped = list(values)
    for k, (i, t) in enumerate(zip(indices, tensors)):
        if t.requires_grad:
            wrapped[i] = _hook_view(t, node, k, len(tensors) > 1)
    return tuple(wrapped), indices


def _hook_view(tensor, node, k, multi):
    """Output k of the hook's identity node: as torch's BackwardHookFunction returns its inputs as-is, a view of
    `tensor` made inside a custom Function, which may not be modified in place while recording (torch's error for a
    hooked module followed by an in-place ReLU)."""
    from .. import _dual
    from .._grad_mode import no_grad

    with no_grad(), _dual.suspended():
        view = tensor.view_as(tensor)
    view._node, view._output_nr = node, k
    note_custom_function_output(view, multi)
    return view


class _HookNode(_graph.Node):
    __slots__ = ("state",)

    def __init__(self, state, edges, out_meta):
        super().__init__(edges, out_meta)
        self.state = state

    def name(self):
        return "BackwardHookFunctionBackward"

    def __call__(self, *grad_outputs):
        raise TypeError(f"'{self.name()}' object is not callable")


class _OutputHookNode(_HookNode):
    """Passes grad_output through the pre-hooks and keeps it for the hooks that the inputs' node calls."""

    __slots__ = ()

    def backward(self, cotangents, create_graph, batch=None):
        state = self.state
        if batch is None:
            grads = self.on_row(list(cotangents))
        else:
            grads = run_batched(self.name(), self.on_row, list(cotangents), batch, vectorize=not create_graph)
        state.grad_outputs = _pack_with_none(state.output_tensors_index, grads, state.n_outputs)
        return grads

    def on_row(self, cotangents):
        state = self.state
        grad_outputs = _pack_with_none(state.output_tensors_index, cotangents, state.n_outputs)
        grad_outputs = state.call_pre_hooks(grad_outputs)
        if state.input_tensors_index is None:
            state.call_hooks_without_inputs(grad_outputs)
        return [grad_outputs[i] for i in state.output_tensors_index]


class _InputHookNode(_HookNode):
    """Calls the backward hooks with the module's grad_input and the grad_output kept by the outputs' node."""

    __slots__ = ()

    def backward(self, cotangents, create_graph, batch=None):
        state = self.state
        if state.grad_outputs is None:  # the gradient reached the inputs without passing through the module's
            return list(cotangents)  # outputs (a double backward through what the module saved): no hook runs
        kept = list(state.grad_outputs)
        state.grad_outputs = None
        n = len(cotangents)
        if batch is None:
            return self.on_row(list(cotangents), kept)
        return run_batched(
            self.name(),
            lambda row: self.on_row(row[:n], row[n:]),
            list(cotangents) + kept,
            batch,
            vectorize=not create_graph,
        )

    def on_row(self, grad_inputs, grad_outputs):
        state = self.state
        packed = _pack_with_none(state.input_tensors_index, grad_inputs, state.n_inputs)
        packed = state.call_hooks(packed, tuple(grad_outputs))
        return [packed[i] for i in state.input_tensors_index]
