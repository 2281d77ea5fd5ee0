"""The names of torch._C that user code reaches for: the switches of the __torch_function__ protocol (_subclass.py),
of grad mode and of the per-row fallback's warnings under vmap, and the TorchScript tracer's state. The rest of
torch._C is torch's private machinery, not provided."""

from ._grad_mode import _check_bool, _set, is_grad_enabled
from ._subclass import DisableTorchFunction, DisableTorchFunctionSubclass
from ._subclass import disabled_torch_function_impl as _disabled_torch_function_impl


def _set_grad_enabled(enabled):
    """Set grad mode for the thread (what set_grad_enabled does on entry), returning nothing."""
    _check_bool("set_grad_enabled", "enabled", enabled)
    _set(enabled)


def _get_tracing_state():
    """The TorchScript tracer's state: None, as batched_grad never traces TorchScript (torch.jit here runs
    eagerly), so code that branches on it takes its eager path."""
    return None


def _debug_only_display_vmap_fallback_warnings(enabled):
    """Switch the warning vmap gives where an op runs row by row (vmap.FallbackWarning) on or off."""
    import vmap

    vmap.set_fallback_warnings(enabled)


def _debug_only_are_vmap_fallback_warnings_enabled():
    import vmap

    return vmap.fallback_warnings_enabled()


__all__ = [
    "DisableTorchFunction",
    "DisableTorchFunctionSubclass",
    "_debug_only_are_vmap_fallback_warnings_enabled",
    "_debug_only_display_vmap_fallback_warnings",
    "_disabled_torch_function_impl",
    "_get_tracing_state",
    "_set_grad_enabled",
    "is_grad_enabled",
]
