"""Calling the user's backward hooks, checked as torch checks what they return: tensor hooks (`register_hook`), a
node's pre-hooks and hooks (`grad_fn.register_prehook` / `register_hook`) and a leaf's post-accumulate-grad hooks.
In batched mode (is_grads_batched) a hook sees one row at a time: vectorized where it can be, else row by row."""

from ._rowwise import run_batched
from ._tensor import Tensor, python_type_name

_LEGACY_TYPES = ("float16", "float32", "float64", "int64", "int32", "int16", "int8", "uint8")


def _hook_name(hook):
    return getattr(hook, "__name__", "<unknown>")


def _type_string(tensor):
    """torch's name of a tensor's type in hook errors: torch.FloatTensor, or CPUBFloat16Type where torch has no
    legacy tensor type."""
    dtype, device = tensor.dtype, tensor.device.type
    if dtype.name in _LEGACY_TYPES:
        return f"torch.{'' if device == 'cpu' else device + '.'}{dtype.type_name}Tensor"
    return f"{device.upper()}{dtype.type_name}Type"


def _checked(hook, result, grad):
    """A hook's replacement for `grad`, checked as torch checks it: a Tensor of the same dtype and shape, or None
    (which replaces a gradient by none where a tuple of gradients is returned)."""
    if result is None:
        return None
    if grad is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(result, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{python_type_name(result)}'")
    if result.dtype is not grad.dtype:
        raise RuntimeError(
            f"hook '{_hook_name(hook)}' has changed the type of value (was {_type_string(grad)} got "
            f"{_type_string(result)})"
        )
    if result.shape != grad.shape:
        raise RuntimeError(f"hook '{_hook_name(hook)}' has changed the size of value")
    return result


def _call_hook(hook, grad):
    """hook(grad): None keeps `grad`, a Tensor must keep its dtype and shape."""
    result = hook(grad)
    return grad if result is None else _checked(hook, result, grad)


def run_tensor_hooks(hooks, grad, batch):
    """Apply tensor hooks in order; in batched mode each hook sees per-row gradients. A hook is called with None
    where the node runs but this output has no gradient, as torch's."""
    for hook in list(hooks.values()):
        if batch is None or grad is None:
            grad = _call_hook(hook, grad)
        else:
            name = f"hook '{_hook_name(hook)}'"
            (grad,) = run_batched(name, lambda cts, hook=hook: [_call_hook(hook, cts[0])], [grad], batch, key=hook)
    return grad


def _replaced(hook, result, grads):
    """A node hook's result: None keeps `grads`, else a tuple of as many (checked) gradients or Nones."""
    if result is None:
        return list(grads)
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{python_type_name(result)}'")
    if len(result) != len(grads):
        raise RuntimeError(
            f"hook '{_hook_name(hook)}' has returned an incorrect number of values (got {len(result)}, "
            f"but expected {len(grads)})"
        )
    return [_checked(hook, r, g) for r, g in zip(result, grads)]


def _batched(hook, fn, arrays, batch):
    """fn(list of Tensors or None) over the rows of `arrays` (batched mode), or once (unbatched)."""
    if batch is None:
        return fn(arrays)
    return run_batched(f"hook '{_hook_name(hook)}'", fn, arrays, batch, key=hook)


def run_prehooks(hooks, grad_outputs, batch):
    """A node's pre-hooks in order: hook(grad_outputs) may return new grad_outputs."""
    for hook in list(hooks.values()):
        grad_outputs = _batched(hook, lambda g, hook=hook: _replaced(hook, hook(tuple(g)), g), grad_outputs, batch)
    return grad_outputs


def run_posthooks(hooks, grad_inputs, grad_outputs, batch):
    """A node's hooks in order: hook(grad_inputs, grad_outputs) may return new grad_inputs."""
    n = len(grad_inputs)
    for hook in list(hooks.values()):

        def call(g, hook=hook):
            return _replaced(hook, hook(tuple(g[:n]), tuple(g[n:])), g[:n])

        grad_inputs = _batched(hook, call, list(grad_inputs) + list(grad_outputs), batch)
    return grad_inputs


def run_post_accumulate_hooks(tensor):
    """A leaf's post-accumulate-grad hooks, each called once its `.grad` holds the new gradient. As torch's, a hook
    must return None (or what it was given): a non-Tensor is a TypeError at once, another Tensor is passed to the
    hooks after it and makes a RuntimeError once they have run."""
    given, replaced = tensor, False
    for hook in list(tensor._post_accumulate_hooks.values()):
        result = hook(given)
        if result is None or result is given:
            continue
        if not isinstance(result, Tensor):
            raise TypeError(f"expected Variable, but hook returned '{python_type_name(result)}'")
        given, replaced = result, True
    if replaced:
        raise RuntimeError("Tensor post accumulate grad hooks should return None.")
