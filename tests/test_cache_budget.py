"""The compiled code kept in memory is bounded by bytes and by executables (batched_grad/_budget.py): a small budget
evicts the programs called least recently, which compile again when called again, with the same results; and a
sweep over 2000 distinct shapes stays under 1.5 GB of RSS."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _budget, _host, _lazy, _store

_xla_compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kwargs: (
        _xla_compiles.append(event) if event.endswith("backend_compile_duration") else None
    )
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def budget(monkeypatch):
    """Restores the limits in force, and starts from an empty budget. Ops run as kernels, not on the host (whose
    derived forms compile a kernel per bucket of sizes, not per size). The store of executables is off: an evicted
    program would load from it instead of compiling again (test_program_store.py)."""
    monkeypatch.setattr(_host, "HOST_ELEMENTS", 0)
    monkeypatch.setattr(_store._state, "directory", None)
    limits = _budget.set_cache_limit()
    _budget.clear()
    yield
    _budget.set_cache_limit(bytes=limits.bytes, entries=limits.entries)


def _chain_grad(n, seed=0):
    data = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    x = bg.tensor(data, requires_grad=True)
    (g,) = bg.autograd.grad((bg.sin(x * 1.5) * x).sum(), x)  # kernels for each size (the fixture)
    t = torch.tensor(data, requires_grad=True)
    (expected,) = torch.autograd.grad((torch.sin(t * 1.5) * t).sum(), t)
    np.testing.assert_allclose(g.numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)
    return g


def test_compiling_charges_the_budget_and_a_second_call_does_not(budget):
    assert _budget.cache_usage() == (0, 0)
    _chain_grad(5)
    used, executables = _budget.cache_usage()
    assert executables > 0 and used >= executables * _budget.FIXED_BYTES
    compiles, xla = bg.compile_count(), len(_xla_compiles)
    _chain_grad(5, seed=1)
    assert _budget.cache_usage() == (used, executables)
    assert (bg.compile_count(), len(_xla_compiles)) == (compiles, xla)  # sizing an executable compiles nothing


def test_an_entry_limit_evicts_the_least_recently_called(budget):
    _chain_grad(1)
    limit = 2 * _budget.cache_usage()[1]  # the executables of two sizes (a size compiles several kernels)
    _budget.set_cache_limit(entries=limit)
    for n in range(2, 8):
        _chain_grad(n)
        assert _budget.cache_usage()[1] <= limit
    # the newest size is still compiled; the oldest was evicted and compiles again, with the same result
    compiles = bg.compile_count()
    _chain_grad(7, seed=2)
    assert bg.compile_count() == compiles
    _chain_grad(2, seed=3)
    assert bg.compile_count() > compiles
    assert _budget.cache_usage()[1] <= limit


def test_a_byte_limit_evicts_down_to_it(budget):
    _chain_grad(3)
    one_size = _budget.cache_usage()[0]
    _budget.set_cache_limit(bytes=one_size)
    for n in range(4, 9):
        _chain_grad(n)
        assert _budget.cache_usage()[0] <= one_size
    _budget.set_cache_limit(bytes=1)  # below any executable: all but the one just compiled go at its next compile
    assert _budget.cache_usage() == (0, 0)
    _chain_grad(20)
    assert _budget.cache_usage()[1] == 1


def test_an_evicted_fused_program_compiles_again_with_the_same_result(budget):
    w = bg.tensor(np.random.default_rng(0).standard_normal((6, 4)), requires_grad=True)
    x = bg.tensor(np.random.default_rng(1).standard_normal((5, 6)))

    def step():
        return bg.autograd.grad(bg.tanh(x @ w).pow(2).mean(), w)[0].numpy()

    for _ in range(_lazy.FUSE_AFTER + 1):
        expected = step()
    compiles = bg.compile_count()
    assert np.array_equal(step(), expected) and bg.compile_count() == compiles
    _budget.clear()
    assert _budget.cache_usage() == (0, 0)
    assert np.array_equal(step(), expected)
    assert bg.compile_count() == compiles + 1  # the fused program alone, traced and compiled again
    assert _budget.cache_usage()[1] == 1


def test_the_optimizer_step_is_budgeted_too(budget):
    p = bg.zeros(3, requires_grad=True)
    p.grad = bg.ones(3)
    opt = bg.optim.Adam([p], lr=0.1)
    opt.step()
    assert _budget.cache_usage()[1] >= 1
    _budget.clear()
    compiles = bg.compile_count()
    opt.step()
    assert bg.compile_count() > compiles
    torch_p = torch.zeros(3, requires_grad=True)
    torch_p.grad = torch.ones(3)
    torch_opt = torch.optim.Adam([torch_p], lr=0.1)
    torch_opt.step()
    torch_opt.step()
    np.testing.assert_allclose(p.detach().numpy(), torch_p.detach().numpy(), rtol=1e-6)


def test_set_cache_limit_checks_its_arguments():
    with pytest.raises(TypeError, match=r"set_cache_limit\(\): argument 'bytes' must be an int or None, not float"):
        bg.set_cache_limit(bytes=1e9)
    with pytest.raises(TypeError, match="argument 'entries' must be an int or None, not bool"):
        bg.set_cache_limit(entries=True)
    with pytest.raises(ValueError, match="argument 'entries' must be positive, but got 0"):
        bg.set_cache_limit(entries=0)
    limits = bg.set_cache_limit()
    assert limits == (_budget.DEFAULT_BYTES, _budget.DEFAULT_ENTRIES) and limits.bytes == _budget.DEFAULT_BYTES


def _python(code, **env):
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT, **env},
        timeout=300,
    )


def test_the_environment_sets_the_byte_limit():
    done = _python("import batched_grad as bg; print(bg.set_cache_limit().bytes)", BATCHED_GRAD_CACHE_BYTES="12345")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["12345"]
    bad = _python("import batched_grad", BATCHED_GRAD_CACHE_BYTES="lots")
    assert "BATCHED_GRAD_CACHE_BYTES must be a positive number of bytes, but got 'lots'" in bad.stderr


@pytest.mark.slow
def test_a_sweep_over_2000_shapes_stays_under_1_5_gb():
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "shape_sweep.py"), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=3600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["shapes"] == 2000
    assert report["peak_rss_mb"] < 1500, report
