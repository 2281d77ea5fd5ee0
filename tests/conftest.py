import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

# The suite starts from an empty persistent compilation cache of its own (and its subprocesses share it): it must
# pass on a fresh machine, and never read or fill the user's cache. Set before batched_grad is imported.
_SESSION_CACHE = tempfile.mkdtemp(prefix="batched_grad-test-cache-")
os.environ["BATCHED_GRAD_CACHE_DIR"] = _SESSION_CACHE
# Fused programs compile when first needed, so that which tier runs a call does not depend on timing; the
# background compile has tests of its own (test_background_compile.py).
os.environ["BATCHED_GRAD_BACKGROUND_COMPILE"] = "0"
# Likewise a structure runs as its own program from its third sighting on, not when the time it spent would pay for
# its compile (that cost model has tests of its own: test_payback.py).
os.environ["BATCHED_GRAD_FUSE_AFTER"] = "2"
# Every test traces what it compiles (counts of compiles stay exact whatever ran before it): the store of executables,
# which would load what an earlier test compiled, is off unless a test turns it on (the `program_store` fixture).
# BATCHED_GRAD_STORE=1 runs the suite with it.
os.environ.setdefault("BATCHED_GRAD_STORE", "0")

import pytest  # noqa: E402


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture(params=["per-node", "fused", "segmented"])
def engine_tier(request, monkeypatch):
    """Run a test under each engine tier: per-node kernels, whole-graph fused programs, and fused programs of one
    backward step (or one forward call) each, as a graph too large to fuse whole runs (_segments.py)."""
    from batched_grad import _fusion, _lazy

    monkeypatch.setattr(_lazy, "FUSE_AFTER", 10**9 if request.param == "per-node" else 0)
    monkeypatch.setattr(_fusion, "_mode", ["auto"])
    if request.param == "segmented":
        monkeypatch.setattr(_fusion, "MAX_OPS", 1)
    return request.param


@pytest.fixture(autouse=True)
def default_dtypes_restored():
    """Each test starts with float32 as both libraries' default dtype, whatever an earlier one set and left (a
    program run in float64 that stopped on a failed assert)."""
    import torch

    import batched_grad as bg

    yield
    if torch.get_default_dtype() is not torch.float32:
        torch.set_default_dtype(torch.float32)
    if bg.get_default_dtype() is not bg.float32:
        bg.set_default_dtype(bg.float32)


@pytest.fixture(autouse=True, scope="module")
def release_compiled_programs():
    """Drop JAX's compiled executables after each test module. Each XLA CPU executable maps its code into memory, and
    the whole suite compiles more of them than the kernel's default limit on a process's mappings (65530) allows:
    compiling past it crashes inside XLA."""
    yield
    import jax

    jax.clear_caches()


@pytest.fixture
def program_store(tmp_path, monkeypatch):
    """The store of executables on, in a directory of the test's own (the suite's state restored after)."""
    from batched_grad import _store

    _store.flush()
    for field in ("directory", "writable", "warned"):
        monkeypatch.setattr(_store._state, field, getattr(_store._state, field))
    monkeypatch.delenv(_store.ENV_VAR, raising=False)
    _store.use(str(tmp_path))
    assert _store.active()
    yield tmp_path
    _store.flush()


@pytest.fixture
def kernel_calls(monkeypatch):
    """The names of the ops whose per-op kernels run (one XLA dispatch each), in order."""
    from batched_grad import _lazy

    calls = []
    real = _lazy.kernel

    def counting(op, static):
        fn = real(op, static)
        return lambda *args: (calls.append(op.name), fn(*args))[1]

    monkeypatch.setattr(_lazy, "kernel", counting)
    return calls


@pytest.fixture
def fusion_state():
    """The test starts in fusion mode "auto" with no structure seen, and leaves the mode as it found it."""
    import batched_grad as bg
    from batched_grad import _lazy

    previous = bg.get_fusion()
    bg.set_fusion("auto")
    _lazy._seen.clear()
    yield
    bg.set_fusion(previous)
