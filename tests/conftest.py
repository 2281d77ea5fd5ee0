import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest


@pytest.fixture(params=["per-node", "fused"])
def engine_tier(request, monkeypatch):
    """Run a test under both engine tiers: per-node kernels, and whole-graph fused programs."""
    from batched_grad import _lazy

    monkeypatch.setattr(_lazy, "FUSE_AFTER", 10**9 if request.param == "per-node" else 0)
    return request.param


@pytest.fixture(autouse=True, scope="module")
def release_compiled_programs():
    """Drop JAX's compiled executables after each test module. Each XLA CPU executable maps its code into memory, and
    the whole suite compiles more of them than the kernel's default limit on a process's mappings (65530) allows:
    compiling past it crashes inside XLA."""
    yield
    import jax

    jax.clear_caches()
