"""functorch.experimental: torch.func's forward-mode transforms, functionalize and replace_all_batch_norm_modules_
under their old names, without a deprecation warning (as torch 2.13's)."""

from ..func import functionalize, hessian, jacfwd, jvp, replace_all_batch_norm_modules_

__all__ = ["functionalize", "hessian", "jacfwd", "jvp", "replace_all_batch_norm_modules_"]
