"""The standalone functorch package's API, as torch 2.13 ships it: its transforms and module helpers are thin
wrappers of torch.func's that warn FutureWarning (deprecated since PyTorch 2.0) naming what replaces them;
`functorch.experimental` (experimental.py) keeps the few names that moved without a warning."""

import warnings

from .. import func as _func
from ..func._module import FunctionalModule, FunctionalModuleWithBuffers
from ..func._module import combine_state_for_ensemble as _combine_state_for_ensemble
from ..func._module import make_functional as _make_functional
from ..func._module import make_functional_with_buffers as _make_functional_with_buffers


def _warn_deprecated(api, new_api=None):
    """torch's FutureWarning for `functorch.<api>`, pointing at the caller of the deprecated function."""
    new_api = f"torch.func.{api}" if new_api is None else new_api
    warnings.warn(
        "We've integrated functorch into PyTorch. As the final step of the integration, "
        f"`functorch.{api}` is deprecated as of PyTorch 2.0 and will be deleted in a future version of "
        f"PyTorch >= 2.3. Please use `{new_api}` instead; see the PyTorch 2.0 release notes and/or the "
        "`torch.func` migration guide for more details https://pytorch.org/docs/main/func.migrating.html",
        FutureWarning,
        stacklevel=3,
    )


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.vmap, deprecated under this name."""
    _warn_deprecated("vmap", "torch.vmap")
    return _func.vmap(func, in_dims, out_dims, randomness=randomness, chunk_size=chunk_size)


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad, deprecated under this name."""
    _warn_deprecated("grad")
    return _func.grad(func, argnums, has_aux)


def grad_and_value(func, argnums=0, has_aux=False):
    """torch.func.grad_and_value, deprecated under this name."""
    _warn_deprecated("grad_and_value")
    return _func.grad_and_value(func, argnums, has_aux)


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp, deprecated under this name."""
    _warn_deprecated("vjp")
    return _func.vjp(func, *primals, has_aux=has_aux)


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """torch.func.jvp, deprecated under this name."""
    _warn_deprecated("jvp")
    return _func.jvp(func, primals, tangents, strict=strict, has_aux=has_aux)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """torch.func.jacrev, deprecated under this name."""
    _warn_deprecated("jacrev")
    return _func.jacrev(
        func, argnums, has_aux=has_aux, chunk_size=chunk_size, _preallocate_and_copy=_preallocate_and_copy
    )


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd, deprecated under this name."""
    _warn_deprecated("jacfwd")
    return _func.jacfwd(func, argnums, has_aux, randomness=randomness)


def hessian(func, argnums=0):
    """torch.func.hessian, deprecated under this name."""
    _warn_deprecated("hessian")
    return _func.hessian(func, argnums=argnums)


def functionalize(func, *, remove="mutations"):
    """torch.func.functionalize, deprecated under this name."""
    _warn_deprecated("functionalize")
    return _func.functionalize(func, remove=remove)


def make_functional(model, disable_autograd_tracking=False):
    """(fmodel, params) of `model`, fmodel(params, *args) running it with `params`; deprecated for
    torch.func.functional_call."""
    _warn_deprecated("make_functional", "torch.func.functional_call")
    return _make_functional(model, disable_autograd_tracking)


def make_functional_with_buffers(model, disable_autograd_tracking=False):
    """(fmodel, params, buffers) of `model`, fmodel(params, buffers, *args); deprecated for
    torch.func.functional_call."""
    _warn_deprecated("make_functional_with_buffers", "torch.func.functional_call")
    return _make_functional_with_buffers(model, disable_autograd_tracking)


def combine_state_for_ensemble(models):
    """(fmodel, stacked params, stacked buffers) of identical `models`, for vmap; deprecated for
    torch.func.stack_module_state."""
    _warn_deprecated("combine_state_for_ensemble", "torch.func.stack_module_state")
    return _combine_state_for_ensemble(models)


from . import experimental  # noqa: E402  (after the names it does not take from here)

__all__ = [
    "FunctionalModule",
    "FunctionalModuleWithBuffers",
    "combine_state_for_ensemble",
    "experimental",
    "functionalize",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "make_functional",
    "make_functional_with_buffers",
    "vjp",
    "vmap",
]
