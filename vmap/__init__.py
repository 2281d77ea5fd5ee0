"""vmap: the batching layer of batched_grad (batched backward programs, per-row fallback, vmap over Tensors)."""
