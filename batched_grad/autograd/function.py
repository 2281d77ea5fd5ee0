"""User-defined differentiable functions: Function with forward/backward and a ctx, once_differentiable."""
import functools

from .. import _graph
from .._dtypes import to_dtype
from . import _vmap_rule
from .._grad_mode import is_grad_enabled, no_grad, set_grad_enabled
from .._tensor import Tensor


class FunctionCtx:
    """The `ctx` a Function's forward fills and its backward reads."""

    def __init__(self):
        self._saved = None
        self.needs_input_grad = ()
        self.non_differentiable = set()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        """Save tensors for backward; read them back as ctx.saved_tensors."""
        self._saved = tuple(_graph.SavedValue(t) if isinstance(t, Tensor) else t for t in tensors)
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument is of type {type(t).__name__}")

    @property
    def saved_tensors(self):
        """The tensors given to save_for_backward (checked against in-place changes since)."""
        if self._saved is None:
            return ()
        return tuple(s.unpack(is_grad_enabled()) if s is not None else None for s in self._saved)

    def mark_non_differentiable(self, *tensors):
        """Mark outputs as not differentiable: they do not require grad, and their gradients are zero."""
        self.non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        """Accepted for compatibility; in-place updates inside forward are tracked by version counters."""

    def set_materialize_grads(self, value):
        """Whether undefined output gradients reach backward as zeros (True, the default) or as None."""
        self.materialize_grads = bool(value)


class FunctionNode(_graph.Node):
    """The node of a Function.apply; its backward calls the user's backward with Tensors."""

    __slots__ = ("function", "ctx", "n_outputs")

    def __init__(self, function, ctx, args, outs):
        edges = tuple(_graph.edge_of(a) if isinstance(a, Tensor) else None for a in args)
        super().__init__(edges, tuple((o._v.shape, o._v.dtype) for o in outs))
        self.function, self.ctx = function, ctx

    def name(self):
        return f"{self.function.__name__}Backward"

    def saved_values(self):
        return [s for s in self.ctx._saved or () if isinstance(s, _graph.SavedValue)]

    def backward(self, cotangents, create_graph, batch=None):
        if batch is None:
            return self._backward_rows(cotangents, create_graph)
        from vmap._fallback import run_batched

        return run_batched(self.name(), lambda cts: self._backward_rows(cts, create_graph), cotangents, batch,
                           vectorize=not create_graph, key=self.function)

    def _backward_rows(self, cotangents, create_graph):
        """The user's backward on unbatched cotangents, with torch's checks on what it returns."""
        from .. import zeros

        if self.ctx.materialize_grads:
            cotangents = [zeros(shape, dtype=dtype) if c is None else c
                          for c, (shape, dtype) in zip(cotangents, self.out_meta)]
        with set_grad_enabled(create_graph):
            grads = self.function.backward(self.ctx, *cotangents)
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) != len(self.edges):
            raise RuntimeError(f"function {self.name()} returned an incorrect number of gradients "
                               f"(expected {len(self.edges)}, got {len(grads)})")
        result = []
        for i, (g, edge) in enumerate(zip(grads, self.edges)):
            if edge is None or g is None:
                result.append(None)
                continue
            if not isinstance(g, Tensor):
                raise TypeError(f"function {self.name()} returned a gradient of type {type(g).__name__} at "
                                f"index {i}; expected a Tensor or None")
            shape, dtype = edge.node.out_meta[edge.output_nr]
            if tuple(g.shape) != tuple(shape):
                raise RuntimeError(f"Function {self.name()} returned an invalid gradient at index {i} - got "
                                   f"{list(g.shape)} but expected shape compatible with {list(shape)}")
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
        """Gradients of the inputs from gradients of the outputs; subclasses define it."""
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    setup_context = None  # define it to use the `forward(*args)` style
    vmap = None  # define a staticmethod vmap(info, in_dims, *args) -> (output, out_dims) as the batching rule

    def __init__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use new-"
                           "style autograd function with static forward method.")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward and record a node whose backward is this class's backward."""
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            if cls.vmap is not None and _vmap_rule.is_traced(args):
                output = _vmap_rule.apply_rule(cls, args, kwargs)
                cls.setup_context(ctx, args, output)
            elif cls.setup_context is not None:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        is_tuple = isinstance(output, tuple)
        outs = output if is_tuple else (output,)
        if not (is_grad_enabled() and any(ctx.needs_input_grad)):
            return output
        tensors = [o for o in outs if isinstance(o, Tensor)]
        node = FunctionNode(cls, ctx, args, tensors)
        wrapped, k = [], 0
        for o in outs:
            if not isinstance(o, Tensor):
                wrapped.append(o)
                continue
            differentiable = id(o) not in ctx.non_differentiable and (o.dtype.is_floating_point or o.dtype.is_complex)
            if any(o is a for a in args) or o.grad_fn is not None or o._requires_grad:
                o = Tensor._wrap(o._value)
            if differentiable:
                o.grad_fn, o._output_nr = node, k
                for s in ctx._saved or ():
                    if isinstance(s, _graph.SavedValue) and s.value is o._value and s.edge_node is None:
                        s.edge_node, s.output_nr, s.requires_grad, s.leaf = node, k, True, None
            wrapped.append(o)
            k += 1
        return tuple(wrapped) if is_tuple else wrapped[0]


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
