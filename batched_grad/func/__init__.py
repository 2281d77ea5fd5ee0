"""torch.func's function transforms on batched_grad's engine: `grad`, `grad_and_value`, `vjp`, `jacrev` record the
function and take batched_grad.autograd.grad of it; `jvp`, `linearize`, `jacfwd`, `hessian` trace it into one JAX
forward-mode op; `vmap` is vmap.vmap. Every transform composes with every other, and with autograd.grad inside."""

from .._wrappers import debug_unwrap
from ._forward import hessian, jacfwd, jvp, linearize
from ._functionalize import functionalize
from ._module import (
    combine_state_for_ensemble,
    functional_call,
    make_functional,
    make_functional_with_buffers,
    replace_all_batch_norm_modules_,
    stack_module_state,
)
from ._reverse import grad, grad_and_value, jacrev, vjp
from ._vmap import vmap

__all__ = [
    "debug_unwrap",
    "functional_call",
    "functionalize",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "replace_all_batch_norm_modules_",
    "stack_module_state",
    "vjp",
    "vmap",
]
