"""User-defined differentiable functions: Function with forward/backward and a ctx (once_differentiable is in
_once_differentiable.py)."""

import functools
import inspect
import warnings
import weakref

from .. import _dual, _graph
from .._dtypes import to_dtype
from .._grad_dtype import for_edge
from .._grad_mode import is_recording, no_grad, set_grad_enabled
from .._rowwise import run_batched
from .._saved import BACKWARD_TWICE, SavedTensor, SavedValue
from .._tensor import DETACH, VIEW_OF_LEAF_INPLACE, Tensor, _ops_of, python_type_name
from .._transform_levels import NO_SETUP_CONTEXT, in_transform
from .._transform_levels import levels as grad_levels
from .._view_meta import check_view_creation, note_custom_function_output
from .._vmap_levels import in_prototype_vmap, in_vmap_randomness
from . import _function_jvp, _vmap_rule
from ._function_jvp import NO_JVP
from ._once_differentiable import once_differentiable  # noqa: F401  (torch.autograd.function's)

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


CLEARED_ON_ACCESS = (
    "saved_tensors can only be accessed once when clear_saved_tensors_on_access=True is set on the "
    "autograd.Function. Either access saved_tensors only once, or set clear_saved_tensors_on_access=False."
)
RETURNED_INPUT_SAVED = (
    "An input that has been returned as-is as output is being saved for backward. This is not supported if you "
    "override setup_context. You should return and save a view of the input instead, e.g. with x.view_as(x) or "
    "setup ctx inside the forward function itself."
)


class FunctionCtx:
    """The `ctx` a Function's forward fills and its backward reads."""

    def __init__(self):
        self.to_save = ()
        self._saved = None  # the SavedValues, made when forward has returned
        self._node = None  # a weak reference to the Function's node, once recorded
        self._clear_on_access = False  # the Function's clear_saved_tensors_on_access
        self._cleared = False  # saved_tensors was read once with _clear_on_access
        self._released = False  # the node's backward freed what it saved
        self.dirty_tensors = ()
        self.needs_input_grad = ()
        self.non_differentiable = set()
        self.materialize_grads = True
        self._materialize_non_diff_grads = True  # False: the outputs marked non-differentiable get None, not zeros
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

    def _save(self, replaced, outputs, node):
        """Save `to_save` for `node`, each of forward's new results replaced by the output the caller received for
        it (`replaced` maps the id of a result to that output); an input is saved as the input, the `outputs` the
        caller received (a dirty input among them) as outputs, as torch's. `to_save` is dropped, as torch's."""
        outputs = {id(r) for r in outputs if isinstance(r, Tensor)}
        # dropped first: a pack hook that raises (a checkpoint's early stop) leaves no cycle output -> node -> ctx
        to_save, self.to_save = self.to_save, ()
        saved = []
        for t in to_save:
            if isinstance(t, Tensor):
                t = replaced.get(id(t), t)
                t = SavedValue(t, node if id(t) in outputs else None)
            saved.append(t)
        self._saved, self._node = tuple(saved), weakref.ref(node)

    @property
    def saved_tensors(self):
        """The tensors given to save_for_backward (checked against in-place changes since); inside the jvp
        staticmethod, those given to save_for_forward."""
        if self._saved_for_jvp is not None:
            return self._saved_for_jvp
        if self._cleared:
            raise RuntimeError(CLEARED_ON_ACCESS)
        if self._saved is None:
            return ()
        # as torch's, in any grad mode: a saved output or non-leaf keeps its grad_fn and output_nr
        node = self._node()
        tensors = tuple(s.unpack_for(node) if s is not None else None for s in self._saved)
        if self._clear_on_access:  # the caller's references are the last ones
            for s in self._saved:
                if s is not None:
                    s.free()
            self._saved, self._cleared = (), True
        return tensors

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

    @property
    def saved_variables(self):
        """Deprecated alias of saved_tensors (with torch's DeprecationWarning)."""
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning, stacklevel=2)
        return self.saved_tensors


class FunctionNode(_graph.Node):
    """The node of a Function.apply; its backward calls the user's backward with Tensors. Each Function has its own
    subclass, named as torch's (node_class)."""

    __slots__ = ("function", "ctx", "tensor_inputs", "non_differentiable")
    backward_without_gradients = True  # as torch's: reached with no gradient, it runs on zeros (or Nones)

    def __init__(self, function, ctx, args, outs, edges):
        if any(isinstance(a, Tensor) and a._sparse_forms is not None and a.requires_grad for a in args):
            raise RuntimeError(
                f"{function.__name__}.apply: a sparse COO input that requires grad is not provided (the engine "
                "differentiates a sparse tensor through its values); pass its values (s.coalesce().values()) and "
                "its indices, and build the sparse tensor inside forward"
            )
        # one gradient per output reaches backward, None for an output that is not a Tensor
        super().__init__(edges, tuple((o._v.shape, o._v.dtype) if isinstance(o, Tensor) else None for o in outs))
        self.function, self.ctx = function, ctx
        self.tensor_inputs = tuple(isinstance(a, Tensor) for a in args)  # which inputs may get a gradient
        self.non_differentiable = frozenset(k for k, o in enumerate(outs) if id(o) in ctx.non_differentiable)

    def name(self):
        return type(self).__name__

    def saved_values(self):
        return [s for s in self.ctx._saved or () if isinstance(s, SavedValue)]

    def release(self):
        super().release()
        self.ctx._released = True

    @property
    def saved_tensors(self):
        """ctx.saved_tensors, read from the node (torch's node of a Function is its ctx)."""
        self._check_not_released()
        return self.ctx.saved_tensors

    @property
    def _raw_saved_tensors(self):
        """A SavedTensor per tensor given to save_for_backward (register_hooks on it)."""
        self._check_not_released()
        saved = self.ctx._saved or ()
        return tuple(SavedTensor._of(s, self) if s is None or isinstance(s, SavedValue) else s for s in saved)

    def _check_not_released(self):
        if self.ctx._released:
            raise RuntimeError(BACKWARD_TWICE)

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
            kept_none = self.non_differentiable if not self.ctx._materialize_non_diff_grads else ()
            cotangents = [
                zeros(meta[0], dtype=meta[1]) if c is None and meta is not None and k not in kept_none else c
                for k, (c, meta) in enumerate(zip(cotangents, self.out_meta))
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
            dtype = for_edge(edge, to_dtype(dtype))  # torch casts a gradient to its input's dtype (a leaf's grad_dtype)
            result.append(g if dtype is None or g.dtype is dtype else g.to(dtype))
        return result


_NODE_CLASSES = weakref.WeakKeyDictionary()  # a Function subclass -> {generated: the class of its nodes}


def node_class(function, generated):
    """The class of a Function's nodes, named as torch's: <Name>Backward, or <Name>GeneratedBackward where it is
    recorded inside a grad-type transform of torch.func (`generated`: torch runs a copy it generates there)."""
    classes = _NODE_CLASSES.setdefault(function, {})
    made = classes.get(generated)
    if made is None:
        name = f"{function.__name__}{'Generated' if generated else ''}Backward"
        attributes = {"__slots__": (), "__module__": FunctionNode.__module__, "__qualname__": name}
        made = classes[generated] = type(name, (FunctionNode,), attributes)
    return made


class _NodeClassOf:
    """`Function._backward_cls`, torch's name for the class of a Function's nodes (its grad_fn's class)."""

    def __get__(self, instance, owner):
        return node_class(owner, False)


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
    _backward_cls = _NodeClassOf()
    clear_saved_tensors_on_access = False  # True: ctx.saved_tensors may be read once, then drops them
    generate_vmap_rule = False  # True: under vmap.vmap, forward and backward run on the batched values

    @staticmethod
    def vmap(info, in_dims, *args):
        """Override with the batching rule: (output, out_dims) for the whole batch (or set generate_vmap_rule)."""
        raise NotImplementedError(
            "To use autograd.Function with vmap, you must either override the vmap staticmethod or set "
            "generate_vmap_rule=True."
        )

    def __init__(self, *args, **kwargs):
        # as torch's: an instance only warns; calling it (a legacy Function's non-static forward) raises
        warnings.warn(
            f"{self.__class__} should not be instantiated. Methods on autograd functions are all static, so you "
            "should invoke them on the class itself. Instantiating an autograd function will raise an error in a "
            "future version of PyTorch.",
            DeprecationWarning,
            stacklevel=2,
        )

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use new-style autograd "
            "function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
        )

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward and record a node whose backward is this class's backward."""
        prototype = in_prototype_vmap()  # torch's prototype vmap runs any Function on the batched values
        if cls.setup_context is None and in_transform() and not prototype:
            raise RuntimeError(NO_SETUP_CONTEXT)
        if cls.setup_context is not None:
            args, kwargs = _bound_arguments(cls.forward, args, kwargs)
        has_rule = cls.vmap is not Function.vmap
        if in_vmap_randomness() is not None and not prototype:  # inside vmap.vmap
            _vmap_rule.check_vmappable(cls, has_rule, kwargs)
        ctx = FunctionCtx()
        ctx._clear_on_access = cls.clear_saved_tensors_on_access
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        traced_inputs = _function_jvp.traced_input_values(args)  # None unless in a forward-mode trace
        dual = _dual.LEVELS.tangents is not None
        recorded = is_recording() and any(ctx.needs_input_grad)
        edges = _input_edges(args) if recorded else None
        output = _run_forward(cls, ctx, args, kwargs, has_rule)
        is_tuple = isinstance(output, tuple)
        outs = output if is_tuple else (output,)
        dirty = _bump_dirty(ctx.dirty_tensors)
        node = node_class(cls, bool(grad_levels()))(cls, ctx, args, outs, edges) if recorded else None
        if cls.setup_context is not None:
            _check_returned_inputs_not_saved(outs, node, ctx, args, dirty)
        received = _received_outputs(outs, node, ctx, args, dirty)
        returned = {id(o) for o in outs}
        if any(id(t) not in returned for t in ctx.dirty_tensors):
            raise RuntimeError(DIRTY_NOT_RETURNED)
        ctx.dirty_tensors = ()  # dropped, as torch's: a dirty output that ctx held would be in a reference cycle
        if dual:
            _function_jvp.set_dual_tangents(cls, ctx, args, outs, received, dirty)
        if traced_inputs is not None:
            received = _function_jvp.tied_outputs(
                cls, ctx, args, kwargs, traced_inputs, outs, is_tuple, received, dirty
            )
        if node is not None:
            ctx._save({id(o): r for o, r in zip(outs, received) if not any(o is a for a in args)}, received, node)
        return tuple(received) if is_tuple else received[0]


class InplaceFunction(Function):
    """torch's legacy base class of Functions that may work in place (kept by torch for old code): a Function whose
    instances remember `inplace`."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


def _input_edges(args):
    """The inputs' edges as they are before forward runs (as torch's, which forward's in-place writes do not move)."""
    return tuple(_graph.edge_of(a) if isinstance(a, Tensor) else None for a in args)


def _run_forward(cls, ctx, args, kwargs, has_rule):
    """The Function's output: its vmap rule's on batched values, else its forward's; as torch's, with grad mode
    and forward-mode AD off, and setup_context called on it."""
    with no_grad(), _dual.suspended():
        if has_rule and _vmap_rule.is_traced(args):
            output = _vmap_rule.apply_rule(cls, args, kwargs)
        elif cls.setup_context is not None:
            output = cls.forward(*args, **kwargs)
        else:
            return cls.forward(ctx, *args, **kwargs)
        cls.setup_context(ctx, args, output)
        return output


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


def _check_returned_inputs_not_saved(outs, node, ctx, args, dirty):
    """torch's refusal, for a Function with setup_context, of an input that forward returns as it is (not marked
    dirty) and setup_context saves (for backward or for forward): the caller receives an alias of it, not the tensor
    saved. As torch's, an input that requires grad returned where nothing is recorded is received detached,
    unchecked."""
    saved = {id(t) for t in (*ctx.to_save, *getattr(ctx, "saved_for_forward", ())) if isinstance(t, Tensor)}
    for output in outs:
        if not isinstance(output, Tensor) or id(output) not in saved or id(output) in dirty:
            continue
        if any(output is a for a in args) and (_is_differentiable(output, node, ctx) or not output.requires_grad):
            raise RuntimeError(RETURNED_INPUT_SAVED)


def _received_outputs(outs, node, ctx, args, dirty):
    """What the caller of apply receives for each output of forward. A new tensor that forward returns more than
    once is received as one object each time, as torch's: the output it was returned as last (its output_nr)."""
    received, first = [], {}
    counts = (len(outs), sum([isinstance(o, Tensor) for o in outs]))
    for k, output in enumerate(outs):
        again = first.get(id(output)) if isinstance(output, Tensor) else None
        if again is None:
            again = first[id(output)] = _received_output(output, k, node, ctx, args, dirty, counts)
        elif again.grad_fn is node and node is not None and not any(output is a for a in args):
            again._output_nr = k
        else:  # an input returned again is received as another alias of it, as torch's
            again = _received_output(output, k, node, ctx, args, dirty, counts)
        received.append(again)
    return received


def _received_output(output, k, node, ctx, args, dirty, counts):
    """What the caller of apply receives for output k of forward (torch's set_history): the output joined to
    `node` (None when nothing is recorded), a dirty input itself, a non-Tensor as it is. `counts`: how many outputs
    forward returned, and how many of them are Tensors."""
    n_outputs, n_tensors = counts
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
                output = output.detach() if output.requires_grad else output.view_as(output)
        return _custom_view(output, n_tensors)
    if any(output is a for a in args):  # received as a view of the input, whose history is this node
        with no_grad(), _dual.suspended():
            output = output.view_as(output)
    elif output.grad_fn is not None or output._requires_grad:
        output = Tensor._wrap(output._value)
    if differentiable:
        output._node, output._output_nr = node, k
    return _custom_view(output, n_tensors)


def _custom_view(output, n_tensors):
    """`output` of a Function that returned `n_tensors` Tensors, noted as a view made in one where it is a view
    (torch forbids writing it in place while recording)."""
    view = output._view
    if view is not None and DETACH not in view[1]:
        note_custom_function_output(output, n_tensors > 1)
    return output


def _rebased_dirty(tensor, k, node, is_input, n_outputs):
    """`tensor`, modified in place by forward, as output k of `node`: its gradient is dropped, and its base and
    views are recorded around its new place in the graph, as an in-place op's are."""
    view = tensor._view
    is_view = view is not None and DETACH not in view[1]
    # as torch's, a view without history requires grad with its base: a leaf that requires grad
    if tensor._node is None and (tensor._requires_grad or (is_view and view[0].requires_grad)):
        raise RuntimeError(DIRTY_LEAF)
    if not is_input:
        if is_view:  # of an input or not, a view is never an input itself
            raise RuntimeError(DIRTY_NOT_INPUT)
        warnings.warn(DIRTY_NOT_INPUT, UserWarning, stacklevel=5)
    if view is not None and _ops_of(view[1]) and n_outputs > 1:
        raise RuntimeError(DIRTY_VIEW_WITH_OUTPUTS)
    if is_view:
        check_view_creation(tensor)
    if is_view and tensor.requires_grad and view[0].grad_fn is None:
        raise RuntimeError(VIEW_OF_LEAF_INPLACE)
    tensor._grad = None
    tensor._counter.modified_by, tensor._counter.reshaped = (
        node,
        None,
    )  # named by the error of a backward that needed the old values
    tensor._rebase(Tensor._wrap(tensor._v, grad_fn=node, output_nr=k))
    return tensor
