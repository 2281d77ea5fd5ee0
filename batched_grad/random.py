"""torch.random: the default generator's seed and state, and fork_rng, which restores the state on leaving."""

import contextlib

from ._generator import default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["default_generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed", "set_rng_state"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type=None):
    """Run the block with the default generator's state saved, and restore it on leaving (also after an error).
    batched_grad has one generator for every device, so `devices` and `device_type` choose nothing."""
    if not enabled:
        yield
        return
    saved = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(saved)
