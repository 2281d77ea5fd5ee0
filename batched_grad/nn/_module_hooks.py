"""Calling a module that has hooks, as torch.nn.Module._call_impl does: forward pre-hooks (which may replace the
arguments), the backward hooks set up on the inputs, forward, forward hooks (which may replace the result), the
backward hooks set up on the outputs; forward hooks registered with always_call also run when forward raises.
Global hooks (register_module_forward_hook, ...) run before the module's own."""

from collections import OrderedDict

from ..utils.hooks import RemovableHandle
from ._backward_hooks import BackwardHook
from ._legacy_backward_hooks import register_on_result

# the hooks of every module (torch.nn.modules.module's globals)
global_forward_pre_hooks = OrderedDict()
global_forward_hooks = OrderedDict()
global_forward_hooks_with_kwargs = OrderedDict()
global_forward_hooks_always_called = OrderedDict()
global_backward_pre_hooks = OrderedDict()
global_backward_hooks = OrderedDict()

# a module's hook registries, made by Module.__init__
HOOK_DICTS = (
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_backward_pre_hooks",
    "_backward_hooks",
    "_state_dict_pre_hooks",
    "_state_dict_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)


def add(hooks, hook, prepend=False, flags=()):
    """Register `hook` in `hooks` (first when `prepend`), noted in each dict of `flags`; its handle."""
    handle = RemovableHandle(hooks, extra_dict=list(flags))
    hooks[handle.id] = hook
    for flag in flags:
        flag[handle.id] = True
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def replaced_arguments(result, args, kwargs, what):
    """(args, kwargs) after a pre-hook `what` returned `result`: as they were for None, else its pair."""
    if result is None:
        return args, kwargs
    if not (isinstance(result, tuple) and len(result) == 2):
        raise RuntimeError(f"{what} must return None or a tuple of (new_args, new_kwargs), but got {result}.")
    return result


def register_module_forward_pre_hook(hook):
    """A forward pre-hook of every module, run before each module's own: hook(module, args)."""
    return add(global_forward_pre_hooks, hook)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """A forward hook of every module, run before each module's own: hook(module, args, output)."""
    flags = [global_forward_hooks_with_kwargs] if with_kwargs else []
    flags += [global_forward_hooks_always_called] if always_call else []
    return add(global_forward_hooks, hook, flags=flags)


def register_module_full_backward_pre_hook(hook):
    """A backward pre-hook of every module: hook(module, grad_output)."""
    return add(global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook):
    """A full backward hook of every module: hook(module, grad_input, grad_output)."""
    return add(global_backward_hooks, hook)


GLOBAL_REGISTRATIONS = (
    "register_module_forward_pre_hook",
    "register_module_forward_hook",
    "register_module_full_backward_pre_hook",
    "register_module_full_backward_hook",
)


def _run_forward_pre_hooks(module, args, kwargs):
    with_kwargs = module._forward_pre_hooks_with_kwargs
    for hook_id, hook in (*global_forward_pre_hooks.items(), *module._forward_pre_hooks.items()):
        if hook_id in with_kwargs:
            args, kwargs = replaced_arguments(hook(module, args, kwargs), args, kwargs, "forward pre-hook")
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    return args, kwargs


def _forward_hooks(module):
    return (*global_forward_hooks.items(), *module._forward_hooks.items())


def _call_forward_hook(module, hook_id, hook, args, kwargs, result):
    if hook_id in module._forward_hooks_with_kwargs or hook_id in global_forward_hooks_with_kwargs:
        return hook(module, args, kwargs, result)
    return hook(module, args, result)


def _run_forward_hooks(module, args, kwargs, result, called):
    for hook_id, hook in _forward_hooks(module):
        called.add(hook_id)
        returned = _call_forward_hook(module, hook_id, hook, args, kwargs, result)
        if returned is not None:
            result = returned
    return result


def _run_always_called_hooks(module, args, kwargs, result, called):
    """After forward raised: the always_call forward hooks that have not run yet (their errors only warned of)."""
    import warnings

    always = {**global_forward_hooks_always_called, **module._forward_hooks_always_called}
    for hook_id, hook in _forward_hooks(module):
        if hook_id in always and hook_id not in called:
            try:
                returned = _call_forward_hook(module, hook_id, hook, args, kwargs, result)
                result = returned if returned is not None else result
            except Exception as error:
                warnings.warn(
                    f"forward hook with ``always_call=True`` raised an exception that was silenced as another error "
                    f"was raised in forward: {error}",
                    stacklevel=4,
                )


def call_with_hooks(module, args, kwargs):
    """module(*args, **kwargs) with its hooks and the global ones."""
    non_full = module.__dict__.get("_is_full_backward_hook") is False  # register_backward_hook's hooks
    own_backward_hooks = list(module._backward_hooks.values())
    backward_hooks = [*global_backward_hooks.values(), *([] if non_full else own_backward_hooks)]
    backward_pre_hooks = [*global_backward_pre_hooks.values(), *module._backward_pre_hooks.values()]
    called, result = set(), None
    try:
        args, kwargs = _run_forward_pre_hooks(module, args, kwargs)
        backward_hook = None
        if backward_hooks or backward_pre_hooks:
            backward_hook = BackwardHook(module, backward_hooks, backward_pre_hooks)
            args = backward_hook.setup_input_hook(args)
        result = module.forward(*args, **kwargs)
        result = _run_forward_hooks(module, args, kwargs, result, called)
        if backward_hook is not None:
            result = backward_hook.setup_output_hook(result)
        if non_full and own_backward_hooks:
            register_on_result(module, own_backward_hooks, args, result)
        return result
    except Exception:
        _run_always_called_hooks(module, args, kwargs, result, called)
        raise
