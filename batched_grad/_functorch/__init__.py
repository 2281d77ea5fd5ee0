"""Modules of torch._functorch that code outside torch imports directly (make_functional's functional_init)."""
