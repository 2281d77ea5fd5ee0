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
