"""functorch.experimental: torch.func's forward-mode transforms, functionalize and replace_all_batch_norm_modules_
under their old names, without a deprecation warning (as torch 2.13's), and chunk_vmap."""

import functools

from ..func import functionalize, hessian, jacfwd, jvp, replace_all_batch_norm_modules_, vmap
from ..func._vmap import _batched_inputs


def chunk_vmap(func, in_dims=0, out_dims=0, randomness="error", chunks=2):
    """vmap over the rows split into `chunks` chunks (as Tensor.chunk splits them), one chunk at a time: vmap with
    the chunk size that split gives, so the results and the random draws are vmap's."""
    whole = vmap(func, in_dims, out_dims, randomness=randomness)  # checks the arguments now, as torch's does
    if chunks == 1:
        return whole

    @functools.wraps(func)
    def chunked(*args, **kwargs):
        size = _batched_inputs(func, in_dims, args)[0]
        chunk_size = max(-(-size // chunks), 1)
        return vmap(func, in_dims, out_dims, randomness=randomness, chunk_size=chunk_size)(*args, **kwargs)

    return chunked


__all__ = ["chunk_vmap", "functionalize", "hessian", "jacfwd", "jvp", "replace_all_batch_norm_modules_"]
