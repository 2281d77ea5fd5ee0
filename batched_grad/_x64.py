"""JAX's 64-bit mode for batched_grad's own work, not for the process: float64 and int64 tensors must really be
64-bit, while a user's own JAX code keeps JAX's default (32-bit types, `jnp.array(1.0)` float32).

Every path by which batched_grad runs JAX enters the mode: an op (`apply`), reading a deferred value, moving host
data to the device, a backward, a transform that traces a function (vmap.vmap, jacobian, gradcheck), an optimizer
step. Outside the mode JAX silently makes a float64 array float32, so a path that misses it is a wrong number,
not an error. JAX keeps the setting per thread, so each thread's calls set it for themselves.

`swap_x64`/`set_x64` are the two halves of `with jax.enable_x64(True)` without the context manager: 0.1 us
against 1.9 us per entry, on an op that costs 5-7 us to record; `apply` calls them directly."""

import functools

import jax

swap_x64, set_x64 = jax.enable_x64.swap_local, jax.enable_x64.set_local


def scoped(fn):
    """`fn`, run in the mode. The wrapper is one more frame: a warning's stacklevel inside `fn` counts it."""

    @functools.wraps(fn)
    def in_x64(*args, **kwargs):
        previous = swap_x64(True)
        try:
            return fn(*args, **kwargs)
        finally:
            set_x64(previous)

    return in_x64
