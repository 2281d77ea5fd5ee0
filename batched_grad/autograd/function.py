"""User-defined differentiable functions: Function with forward/backward and a ctx, once_differentiable."""

import functools
import inspect
import warnings

from .. import _dual, _graph
from .._dtypes import to_dtype
from .._grad_mode import is_grad_enabled, no_grad, set_grad_enabled
from .._rowwise import run_batched
from .._tensor import DETACH, VIEW_OF_LEAF_INPLACE, Tensor, _ops_of, python_type_name
from .._transform_levels import NO_SETUP_CONTEXT, in_transform
from .._vmap_levels import in_vmap_randomness
from . import _function_jvp, _vmap_rule
from ._function_jvp import NO_JVP

DIRTY_LEAF = "a leaf Variable that requires grad has been used in an in-place operation."
DIRTY_NOT_INPUT = (
    "ctx.mark_dirty() received a tensor that was not an input. Only input Tensors that have been "
    "mutated should be passed to ctx.mark_dirty()."
)
DIRTY_VIEW_WITH_OUTPUTS = (
    "If your Function modifies inplace an input that is a view of another Tensor, your Function cannot return more "
    "than one Tensor. This is not supported by the current autograd engine. You should either make sure the input "
    "is not a view (using .clone() for example) or make your Function only return one Tensor (potentially splitting "
    "it into two Functions: one doing the inplace that returns a single Tensor and a second one that does the other "
    "operations). You can ask on the forum https://discuss.pytorch.org/ if you need help to do this change."
)
DIRTY_NOT_RETURNED = (
    "Some elements marked as dirty during the forward method were not returned as output. The "
    "inputs that are modified inplace must all be outputs of the Function."
)


class FunctionCtx:
    """The `ctx` a Function's forward fills and its backward reads."""

    def __init__(self):
        self.to_save = ()
        self._saved = None  # the SavedValues, made when forward has returned
        self.dirty_tensors = ()
        self.needs_input_grad = ()
        self.non_differentiable = set()
        self.materialize_grads = True
        self._saved_for_jvp = None  # while the jvp staticmethod runs: what save_for_forward saved

    def save_for_forward(self, *tensors):
        """Save tensors for the `jvp` staticmethod, which reads them as ctx.saved_tensors."""
        if not all(t is None or isinstance(t, Tensor) for t in tensors):
            raise AssertionError(
                "save_for_forward expects all arguments to be tensors; you should save non-tensors as attributes on "
                "ctx."
            )
        self.saved_for_forward = tensors

    def save_for_backward(self, *tensors):
        """Save tensors for backward; read them back as ctx.saved_tensors. As in torch, they are saved once forward
        has returned: a tensor changed in place in forward is saved with its new value, an output as an output."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save variables, but argument is of type {type(t).__name__}"
                )
        self.to_save = tensors

    def _save(self, received):
        """Save `to_save`, each of forward's new results replaced by the output the caller received for it
        (`received` maps the id of a result to that output); an input is saved as the input."""
        self._saved = tuple(
            _graph.SavedValue(received.get(id(t), t)) if isinstance(t, Tensor) else t for t in self.to_save
        )

    @property
    def saved_tensors(self):
        """The tensors given to save_for_backward (checked against in-place changes since); inside the jvp
        staticmethod, those given to save_for_forward."""
        if self._saved_for_jvp is not None:
            return self._saved_for_jvp
        if self._saved is None:
            return ()
        # as torch's, in any grad mode: a saved output or non-leaf keeps its grad_fn and output_nr
        return tuple(s.unpack(True) if s is not None else None for s in self._saved)

    def mark_non_differentiable(self, *tensors):
        """Mark outputs as not differentiable: they do not require grad, and their gradients are zero."""
        self.non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        """Mark the inputs that forward modified in place. Each must be returned: the caller receives the input
        itself, its version bumped and its history rebased onto this Function's node."""
        self.dirty_tensors = tensors

    def set_materialize_grads(self, value):
        """Whether undefined output gradients reach backward as zeros (True, the default) or as None."""
        self.materialize_grads = bool(value)


class FunctionNode(_graph.Node):
    """The node of a Function.apply; its backward calls the user's backward with Tensors."""

    __slots__ = ("function", "ctx", "tensor_inputs")
    backward_without_gradients = True  # as torch's: reached with no gradient, it runs on zeros (or Nones)

    def __init__(self, function, ctx, args, outs):
        edges = tuple(_graph.edge_of(a) if isinstance(a, Tensor) else None for a in args)
        # one gradient per output reaches backward, None for an output that is not a Tensor
        super().__init__(edges, tuple((o._v.shape, o._v.dtype) if isinstance(o, Tensor) else None for o in outs))
        self.function, self.ctx = function, ctx
        self.tensor_inputs = tuple(isinstance(a, Tensor) for a in args)  # which inputs may get a gradient

    def name(self):
        return f"{self.function.__name__}Backward"

    def saved_values(self):
        return [s for s in self.ctx._saved or () if isinstance(s, _graph.SavedValue)]

    def __call__(self, *grad_outputs):
        raise TypeError(f"'{self.name()}' object is not callable")  # as torch's nodes of a custom Function

    def backward(self, cotangents, create_graph, batch=None):
        if batch is None:
            return self._backward_rows(cotangents, create_graph)
        return run_batched(
            self.name(),
            lambda cts: self._backward_rows(cts, create_graph),
            cotangents,
            batch,
            vectorize=not create_graph,
            key=self.function,
        )

    def _check_gradient_kind(self, i, g):
        """torch's errors for backward's gradient `g` of input `i`: not None for an input that was not a Tensor,
        or neither a Tensor nor None (even for a Tensor that does not require grad)."""
        if not self.tensor_inputs[i]:
            if g is not None:
                raise RuntimeError(
                    f"function {self.name()} returned a gradient different than None at position {i + 1}, but the "
                    "corresponding forward input was not a Variable"
                )
        elif g is not None and not isinstance(g, Tensor):
            raise RuntimeError(f"expected Variable or None (got {python_type_name(g)})")

    def _backward_rows(self, cotangents, create_graph):
        """The user's backward on unbatched cotangents, with torch's checks on what it returns."""
        from .. import zeros

        if self.ctx.materialize_grads:
            cotangents = [
                zeros(meta[0], dtype=meta[1]) if c is None and meta is not None else c
                for c, meta in zip(cotangents, self.out_meta)
            ]
        with set_grad_enabled(create_graph):
            grads = _user_backward(self.function)(self.ctx, *cotangents)
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) > len(self.edges) and all(g is None for g in grads[len(self.edges) :]):
            grads = grads[: len(self.edges)]  # extra trailing Nones are accepted, as torch does
        if len(grads) != len(self.edges):
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients "
                f"(expected {len(self.edges)}, got {len(grads)})"
            )
        result = []
        for i, (g, edge) in enumerate(zip(grads, self.edges)):
            self._check_gradient_kind(i, g)
            if edge is None or g is None:
                result.append(None)
                continue
            shape, dtype = edge.node.out_meta[edge.output_nr]
            if tuple(g.shape) != tuple(shape) and _expands_to(shape, g.shape):
                g = g.sum_to_size(tuple(shape))  # as torch's: a broadcast gradient is summed back to its input
            if tuple(g.shape) != tuple(shape):
                raise RuntimeError(
                    f"Function {self.name()} returned an invalid gradient at index {i} - got "
                    f"{list(g.shape)} but expected shape compatible with {list(shape)}"
                )
            dtype = to_dtype(dtype)  # torch casts a gradient to its input's dtype
            result.append(g if g.dtype is dtype else g.to(dtype))
        return result


class Function:
    """Subclass with `forward(ctx, *args)` (or `forward(*args)` + `setup_context(ctx, inputs, output)`) and
    `backward(ctx, *grad_outputs)`; call it with `MyFunction.apply(*args)`."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        """The computation on Tensors; subclasses define it (with ctx first, or without and with setup_context)."""
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """Gradients of the inputs from gradients of the outputs; subclasses define it (or `vjp`, its alias)."""
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    vjp = backward  # as torch's: a subclass defines one of the two

    @staticmethod
    def jvp(ctx, *grad_inputs):
        """Tangents of the outputs from tangents of the inputs (forward-mode AD); subclasses define it."""
        raise NotImplementedError(NO_JVP)

    setup_context = None  # define it to use the `forward(*args)` style
    generate_vmap_rule = False  # True: under vmap.vmap, forward and backward run on the batched values

    @staticmethod
    def vmap(info, in_dims, *args):
        """Override with the batching rule: (output, out_dims) for the whole batch (or set generate_vmap_rule)."""
        raise NotImplementedError(
            "To use autograd.Function with vmap, you must either override the vmap staticmethod or set "
            "generate_vmap_rule=True."
        )

    def __init__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use new-"
            "style autograd function with static forward method."
        )

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward and record a node whose backward is this class's backward."""
        if cls.setup_context is None and in_transform():
            raise RuntimeError(NO_SETUP_CONTEXT)
        if cls.setup_context is not None:
            args, kwargs = _bound_arguments(cls.forward, args, kwargs)
        has_rule = cls.vmap is not Function.vmap
        if in_vmap_randomness() is not None:  # inside vmap.vmap
            _vmap_rule.check_vmappable(cls, has_rule, kwargs)
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        traced_inputs = _function_jvp.traced_input_values(args)  # None unless in a forward-mode trace
        dual = _dual.LEVELS.tangents is not None
        with no_grad(), _dual.suspended():  # as torch's, forward runs with forward-mode AD off
            if has_rule and _vmap_rule.is_traced(args):
                output = _vmap_rule.apply_rule(cls, args, kwargs)
                cls.setup_context(ctx, args, output)
            elif cls.setup_context is not None:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        is_tuple = isinstance(output, tuple)
        outs = output if is_tuple else (output,)
        dirty = _bump_dirty(ctx.dirty_tensors)
        node = FunctionNode(cls, ctx, args, outs) if is_grad_enabled() and any(ctx.needs_input_grad) else None
        received = _received_outputs(outs, node, ctx, args, dirty)
        returned = {id(o) for o in outs}
        if any(id(t) not in returned for t in ctx.dirty_tensors):
            raise RuntimeError(DIRTY_NOT_RETURNED)
        if dual:
            _function_jvp.set_dual_tangents(cls, ctx, args, outs, received, dirty)
        if traced_inputs is not None:
            received = _function_jvp.tied_outputs(
                cls, ctx, args, kwargs, traced_inputs, outs, is_tuple, received, dirty
            )
        if node is not None:
            ctx._save({id(o): r for o, r in zip(outs, received) if not any(o is a for a in args)})
        return tuple(received) if is_tuple else received[0]


@functools.lru_cache(maxsize=1024)
def _signature(forward):
    """forward's signature, and whether binding can change a call's arguments (keyword or default parameters)."""
    signature = inspect.signature(forward)
    plain = all(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        for p in signature.parameters.values()
    )
    return signature, plain


def _bound_arguments(forward, args, kwargs):
    """The call's arguments as torch passes them to a `forward(*args)`-style Function: keyword arguments that name
    a positional parameter become positional, and omitted parameters take their defaults (setup_context's inputs
    and needs_input_grad then count them)."""
    signature, plain = _signature(forward)
    if plain and not kwargs:
        return args, kwargs
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.args, bound.kwargs


def _expands_to(shape, target):
    """Whether `shape` broadcasts to `target` (torch's is_expandable_to)."""
    if len(shape) > len(target):
        return False
    return all(n == t or n == 1 for n, t in zip(reversed(tuple(shape)), reversed(tuple(target))))


def _user_backward(function):
    """The backward a Function defines, under either of its names (torch's check that it defines only one)."""
    backward, vjp = function.backward, function.vjp
    if backward is not Function.backward and vjp is not Function.vjp:
        raise RuntimeError(
            "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. You should only "
            "implement one of them."
        )
    return vjp if vjp is not Function.vjp else backward


def _bump_dirty(tensors):
    """The ids of the tensors given to mark_dirty, whose versions go up by one (torch's count for an in-place op
    recorded by a Function)."""
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise RuntimeError(f"mark_dirty can only accept variables, but argument {i} is of type {type(t).__name__}")
    for t in tensors:
        t._counter.value += 1
    return {id(t) for t in tensors}


def _is_differentiable(output, node, ctx):
    return (
        node is not None
        and id(output) not in ctx.non_differentiable
        and (output.dtype.is_floating_point or output.dtype.is_complex)
    )


def _received_outputs(outs, node, ctx, args, dirty):
    """What the caller of apply receives for each output of forward. A new tensor that forward returns more than
    once is received as one object each time, as torch's: the output it was returned as last (its output_nr)."""
    received, first = [], {}
    for k, output in enumerate(outs):
        again = first.get(id(output)) if isinstance(output, Tensor) else None
        if again is None:
            again = first[id(output)] = _received_output(output, k, node, ctx, args, dirty, len(outs))
        elif again.grad_fn is node and node is not None and not any(output is a for a in args):
            again._output_nr = k
        else:  # an input returned again is received as another alias of it, as torch's
            again = _received_output(output, k, node, ctx, args, dirty, len(outs))
        received.append(again)
    return received


def _received_output(output, k, node, ctx, args, dirty, n_outputs):
    """What the caller of apply receives for output k of forward (torch's set_history): the output joined to
    `node` (None when nothing is recorded), a dirty input itself, a non-Tensor as it is."""
    if not isinstance(output, Tensor):
        return output
    differentiable = _is_differentiable(output, node, ctx)
    if id(output) in dirty:
        if differentiable:
            return _rebased_dirty(output, k, node, any(output is a for a in args), n_outputs)
        return output.detach() if output.requires_grad else output
    if node is None:
        if any(output is a for a in args):  # an input returned as-is is received as an alias of it, as torch's
            with no_grad(), _dual.suspended():
                return output.detach() if output.requires_grad else output.view_as(output)
        return output
    if any(output is a for a in args) or output.grad_fn is not None or output._requires_grad:
        output = Tensor._wrap(output._value)
    if differentiable:
        output.grad_fn, output._output_nr = node, k
    return output


def _rebased_dirty(tensor, k, node, is_input, n_outputs):
    """`tensor`, modified in place by forward, as output k of `node`: its gradient is dropped, and its base and
    views are recorded around its new place in the graph, as an in-place op's are."""
    if tensor.grad_fn is None and tensor._requires_grad:
        raise RuntimeError(DIRTY_LEAF)
    if not is_input:
        warnings.warn(DIRTY_NOT_INPUT, UserWarning, stacklevel=5)
    view = tensor._view
    if view is not None and _ops_of(view[1]) and n_outputs > 1:
        raise RuntimeError(DIRTY_VIEW_WITH_OUTPUTS)
    if view is not None and DETACH not in view[1] and tensor.requires_grad and view[0].grad_fn is None:
        raise RuntimeError(VIEW_OF_LEAF_INPLACE)
    tensor._grad = None
    tensor._counter.modified_by, tensor._counter.reshaped = (
        node,
        None,
    )  # named by the error of a backward that needed the old values
    tensor._rebase(Tensor._wrap(tensor._v, grad_fn=node, output_nr=k))
    return tensor


class _OnceDifferentiableNode(_graph.Node):
    __slots__ = ("fn_name",)

    def __init__(self, fn_name, edges, out_meta):
        super().__init__(edges, out_meta)
        self.fn_name = fn_name

    def name(self):
        return "torch::autograd::Error"

    def backward(self, cotangents, create_graph, batch=None):
        raise RuntimeError("trying to differentiate twice a function that was marked with @once_differentiable")


def once_differentiable(backward):
    """Run `backward` without recording; differentiating its result again raises a clear error."""

    @functools.wraps(backward)
    def wrapper(ctx, *grad_outputs):
        with no_grad():
            grads = backward(ctx, *grad_outputs)
        if not is_grad_enabled():
            return grads
        edges = tuple(_graph.edge_of(g) for g in grad_outputs if isinstance(g, Tensor) and g.requires_grad)
        if not edges:
            return grads
        single = not isinstance(grads, tuple)
        grads = (grads,) if single else grads
        tensors = [g for g in grads if isinstance(g, Tensor)]
        node = _OnceDifferentiableNode(backward.__qualname__, edges, tuple((g._v.shape, g._v.dtype) for g in tensors))
        out, k = [], 0
        for g in grads:
            if isinstance(g, Tensor):
                g = Tensor._wrap(g._value, grad_fn=node, output_nr=k)
                k += 1
            out.append(g)
        return out[0] if single else tuple(out)

    return wrapper
