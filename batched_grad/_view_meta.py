"""How a view was made (torch's CreationMeta), which decides whether it may be written in place while the write is
recorded: a view made with grad mode off or in inference mode, one of several views one op returns (unbind,
split, ...), or one a custom Function returned cannot be, and torch's error says which. The Tensor's `_creation`
slot holds None (DEFAULT) for a view made the ordinary way, else (kind, version when made): changed unrecorded since,
such a view's history cannot be rebuilt; a view of a view takes its base's kind unless its own is special
(inference mode's kind is never overridden)."""

import re

from . import _grad_mode
from ._inference import is_inference

DEFAULT, NO_GRAD_MODE, INFERENCE_MODE, MULTI_OUTPUT_NODE, IN_CUSTOM_FUNCTION = (
    None,
    "no_grad_mode",
    "inference_mode",
    "multi_output_node",
    "in_custom_function",
)

_REASONS = {
    MULTI_OUTPUT_NODE: (
        "This view is the output of a function that returns multiple views. Such functions do not allow the output "
        "views to be modified inplace. You should replace the inplace operation by an out-of-place one."
    ),
    NO_GRAD_MODE: (
        "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
        "both the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
        "tracked) or both outside (if you want the inplace to be tracked)."
    ),
    INFERENCE_MODE: (
        "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
        "both the view and the inplace either both inside the inference_mode block (if you don't want the inplace to "
        "be tracked) or both outside (if you want the inplace to be tracked)."
    ),
    IN_CUSTOM_FUNCTION: (
        "This view was created inside a custom Function (or because an input was returned as-is) and the autograd "
        "logic to handle view+inplace would override the custom backward associated with the custom Function, "
        "leading to incorrect gradients. This behavior is forbidden. You can fix this by cloning the output of the "
        "custom Function."
    ),
}


def creation_of(tensor):
    """The kind of view `tensor` is (DEFAULT for an ordinary view, or for a tensor that is no view)."""
    kind = tensor._creation
    return kind[0] if type(kind) is tuple else kind


def _set_creation(view, kind):
    if kind != creation_of(view):
        view._creation = None if kind is DEFAULT else (kind, view._counter.value)  # the version it was made at


def grad_fn_unavailable(tensor):
    """Whether torch raises on reading `tensor.grad_fn` (or recording an op on it): a view of a special kind (made with
    grad mode off or in inference mode, returned by a custom Function or a multi-output op) of a base that requires
    grad, changed in place (itself, its base or another view of it, unrecorded) since it was made. torch cannot
    rebuild such a view's history, and its repr shows grad_fn=<Invalid>."""
    kind, view = tensor._creation, tensor._view
    if type(kind) is not tuple or view is None or not view[0].requires_grad:
        return False
    from ._inplace import DETACH

    return DETACH not in view[1] and tensor._counter.value != kind[1]


def requires_grad_through_base(tensor):
    """torch's rule for a view of a special kind (made with grad mode off or in inference mode, or returned by a
    custom Function or a multi-output op while nothing was recorded): it requires grad while its base does, so ops on
    it with grad mode on record, but its history holds no edge into the view (torch gives it no grad accumulator): no
    gradient reaches it or its base. A detached view's base is not its autograd base."""
    view = tensor._view
    if tensor._creation is None or view is None:
        return False
    from ._inplace import DETACH

    return DETACH not in view[1] and view[0].requires_grad


def in_graph(tensor):
    """tensor.requires_grad read from its slots first: the test of the paths every op takes."""
    return tensor._requires_grad or tensor._node is not None or tensor._creation is not None and tensor.requires_grad


def _propagated(previous, new):
    if new is DEFAULT or previous == INFERENCE_MODE:
        return previous
    return new


def note_view(src, view, multi):
    """Record the kind of `view`, just made from `src` by a view op (`multi`: one of several views it returns)."""
    state = _grad_mode._state
    new = INFERENCE_MODE if state.inference else NO_GRAD_MODE if not state.enabled else DEFAULT
    if new is DEFAULT and multi:
        new = MULTI_OUTPUT_NODE
    if new is not DEFAULT and is_inference(view):  # torch keeps no view metadata for an inference tensor
        return
    _set_creation(view, _propagated(creation_of(src) if src._view is not None else DEFAULT, new))


def note_custom_function_output(view, multi):
    """`view`, a view a custom Function returned (or an input it returned as-is), is of that kind, or with `multi`
    (the Function returned several tensors) one of several views."""
    _set_creation(view, _propagated(creation_of(view), MULTI_OUTPUT_NODE if multi else IN_CUSTOM_FUNCTION))


def made_by_custom_node(view):
    """Whether `view` came out of a custom Function or a multi-output op: torch keeps its grad_fn when its base
    changes (and raises where that grad_fn is next needed) instead of regenerating it."""
    return creation_of(view) in (IN_CUSTOM_FUNCTION, MULTI_OUTPUT_NODE)


def renew_creation(view):
    """`view`, replayed whole from its base (as functionalize does), counts as made now."""
    view._creation = (creation_of(view), view._counter.value)


def _short_name(node):
    return re.sub(r"Backward\d*$", "", node.name())


def check_view_creation(tensor, indirect=False):
    """torch's error where a recorded in-place write (into `tensor`, a view, or with `indirect` into its base or
    another view of it, where reading its grad_fn raises) meets a view whose kind forbids it."""
    kind = creation_of(tensor)
    if kind is DEFAULT:
        return
    # torch names the node the view had: none for one made unrecorded (grad mode off), reached indirectly
    node = None if indirect and kind in (NO_GRAD_MODE, INFERENCE_MODE) else tensor._node
    changed = "its base or another view of its base has been" if indirect else "is being"
    if kind in (NO_GRAD_MODE, INFERENCE_MODE) or node is None:
        prefix = (
            f"Output {tensor._output_nr} of {_short_name(node)} is a view of a view which was created in"
            if node is not None
            else "A view was created in"
        )
        if kind == INFERENCE_MODE:
            message = f"{prefix} inference mode and {changed} modified inplace in normal mode."
        else:
            message = f"{prefix} no_grad mode and {changed} modified inplace with grad mode enabled."
    else:
        message = f"Output {tensor._output_nr} of {_short_name(node)} is a view and {changed} modified inplace."
    raise RuntimeError(f"{message} {_REASONS[kind]}")
