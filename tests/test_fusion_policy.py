"""The fusion policy (_fusion.py): large structures are not compiled whole, `bg.set_fusion` and BATCHED_GRAD_FUSION.
Compiles and program sizes are counted, never timed."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _fused, _fusion, _lazy

SMALL = 8  # the size bound the tests set, so that a short chain is "long"


pytestmark = pytest.mark.usefixtures("fusion_state")


@pytest.fixture
def traced_sizes(monkeypatch):
    """The number of calls of every fused program of deferred calls run (whole or a segment), and the number of
    nodes of every whole-graph backward program run."""
    sizes, backward_runs = [], []
    run_fused, run = _lazy._run_fused, _fused.run

    def counting_run_fused(calls, *args):
        sizes.append(len(calls))
        return run_fused(calls, *args)

    def counting_run(walk, *args, **kwargs):
        backward_runs.append(len(walk.nodes))
        return run(walk, *args, **kwargs)

    monkeypatch.setattr(_lazy, "_run_fused", counting_run_fused)
    monkeypatch.setattr(_fused, "run", counting_run)
    return sizes, backward_runs


def _chain(lib, x, steps):
    y = x
    for i in range(steps):
        y = y * (1.0 + i / 1000) + 0.25
    return (y * y).sum()


def _torch_chain(x0, steps):
    x = torch.tensor(x0, requires_grad=True)
    loss = _chain(torch, x, steps)
    (g,) = torch.autograd.grad(loss, x)
    return loss.detach().numpy(), g.numpy()


def _bg_chain(x0, steps, read_loss_first):
    x = bg.tensor(x0, requires_grad=True)
    loss = _chain(bg, x, steps)
    value = loss.item() if read_loss_first else None  # the forward alone: its deferred calls, in segments
    (g,) = bg.autograd.grad(loss, x)
    return (loss.item() if value is None else value), g.numpy()


@pytest.mark.parametrize("read_loss_first", [False, True])
def test_a_long_chain_runs_in_bounded_programs_with_torch_values(monkeypatch, traced_sizes, read_loss_first):
    monkeypatch.setattr(_fusion, "MAX_OPS", SMALL)
    sizes, backward_runs = traced_sizes
    x0 = np.linspace(-1.0, 1.0, 5)
    expected_loss, expected_grad = _torch_chain(x0, 40)
    for _ in range(_lazy.FUSE_AFTER + 3):
        loss, grad = _bg_chain(x0, 40, read_loss_first)
        np.testing.assert_allclose(loss, expected_loss, rtol=1e-12)
        np.testing.assert_allclose(grad, expected_grad, rtol=1e-12)
    assert backward_runs == []  # 80 nodes: never one whole program (segments: test_segmented_backward.py)
    if read_loss_first:
        assert sizes and max(sizes) <= SMALL  # the forward's 160 calls in fused segments of at most SMALL calls


def test_the_equal_segments_of_a_chain_share_one_program(monkeypatch):
    monkeypatch.setattr(_fusion, "MAX_OPS", SMALL)
    x0 = np.arange(4.0)
    # the forward's segments fuse from the third call, and the backward, which reads their values, from the fifth
    for _ in range(_lazy.FUSE_AFTER + 3):
        _bg_chain(x0, 40, read_loss_first=True)
    before = bg.compile_count()
    for _ in range(3):
        _bg_chain(x0 + 1, 40, read_loss_first=True)
    assert bg.compile_count() == before


def test_the_chain_compiles_a_bounded_number_of_programs_whatever_its_length(monkeypatch):
    monkeypatch.setattr(_fusion, "MAX_OPS", SMALL)
    counts = []
    for steps in (40, 160):
        _lazy._seen.clear()
        before = bg.compile_count()
        for _ in range(_lazy.FUSE_AFTER + 2):
            _bg_chain(np.arange(3.0), steps, read_loss_first=True)
        counts.append(bg.compile_count() - before)
    assert counts[1] <= counts[0] + 2  # four times the ops, not four times the compiles


def _mlp_step(lib, seed):
    rng = np.random.default_rng(seed)
    w1 = lib.tensor(rng.standard_normal((6, 5)), requires_grad=True)
    w2 = lib.tensor(rng.standard_normal((5, 2)), requires_grad=True)
    x = lib.tensor(rng.standard_normal((7, 6)))
    loss = lib.tanh(x @ w1).relu().matmul(w2).pow(2).mean()
    return lib.autograd.grad(loss, (w1, w2))


def _check_mlp(seed):
    for got, expected in zip(_mlp_step(bg, seed), _mlp_step(torch, seed)):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12, atol=1e-14)


def test_a_normal_graph_still_fuses_in_auto(traced_sizes):
    _, backward_runs = traced_sizes
    for seed in range(_lazy.FUSE_AFTER + 1):
        _check_mlp(seed)
    assert len(backward_runs) == 1  # the third call runs the whole-graph program
    before = bg.compile_count()
    for seed in range(10, 13):
        _check_mlp(seed)
    assert bg.compile_count() == before
    assert len(backward_runs) == 4


def test_off_runs_per_op_kernels_only(traced_sizes):
    sizes, backward_runs = traced_sizes
    bg.set_fusion("off")
    assert bg.get_fusion() == "off"
    _check_mlp(0)
    before = bg.compile_count()
    for seed in range(1, _lazy.FUSE_AFTER + 4):
        _check_mlp(seed)
    assert bg.compile_count() == before  # the first call's kernels serve every later one
    assert backward_runs == [] and sizes == []


def test_always_fuses_a_graph_of_any_size(monkeypatch, traced_sizes):
    monkeypatch.setattr(_fusion, "MAX_OPS", SMALL)
    sizes, backward_runs = traced_sizes
    bg.set_fusion("always")
    x0 = np.linspace(0.0, 1.0, 3)
    expected_loss, expected_grad = _torch_chain(x0, 20)
    for _ in range(_lazy.FUSE_AFTER + 1):
        loss, grad = _bg_chain(x0, 20, read_loss_first=False)
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-12)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12)
    assert backward_runs == [43]  # one program: 20 steps of two ops, the square, the sum and the leaf


@pytest.mark.parametrize("mode", [None, 1, True, ["auto"]])
def test_set_fusion_refuses_a_mode_that_is_not_a_string(mode):
    with pytest.raises(TypeError, match=r"set_fusion\(\): mode must be one of 'auto', 'off', 'always', but got"):
        bg.set_fusion(mode)
    assert bg.get_fusion() == "auto"


@pytest.mark.parametrize("mode", ["", "on", "AUTO", "never"])
def test_set_fusion_refuses_an_unknown_mode(mode):
    with pytest.raises(
        ValueError, match=r"set_fusion\(\): mode must be one of 'auto', 'off', 'always', but got " + repr(mode)
    ):
        bg.set_fusion(mode)
    assert bg.get_fusion() == "auto"


def _run_python(code, **env):
    environment = {**os.environ, **env}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_the_environment_variable_sets_the_mode_and_a_bad_value_warns():
    code = """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import batched_grad as bg
        print(bg.get_fusion(), [str(w.message) for w in caught if "BATCHED_GRAD_FUSION" in str(w.message)])
    """
    assert _run_python(code, BATCHED_GRAD_FUSION="Off").stdout.split()[0] == "off"
    out = _run_python(code, BATCHED_GRAD_FUSION="sometimes").stdout
    assert out.startswith("auto ") and "must be one of 'auto', 'off', 'always', but got 'sometimes'" in out


@pytest.mark.slow
def test_a_4000_op_chain_stays_under_1_gb():
    """2000 steps of `y = y * 1.0001 + 0.0`: fused whole, its third call compiled for half a minute in 1.8 GB."""
    code = """
        import batched_grad as bg
        x = bg.ones(4, requires_grad=True)
        counts = []
        for _ in range(7):
            y = x
            for _ in range(2000):
                y = y * 1.0001 + 0.0
            before = bg.compile_count()
            print(y.sum().item(), bg.autograd.grad(y.sum(), x)[0].numpy()[0])
            counts.append(bg.compile_count() - before)
        with open("/proc/self/status") as f:  # VmHWM: ru_maxrss would carry pytest's own peak across exec
            print(counts, next(line.split()[1] for line in f if line.startswith("VmHWM:")))
    """
    lines = _run_python(code).stdout.splitlines()
    counts, peak_kb = lines[-1].rsplit(" ", 1)
    assert int(peak_kb) < 1 << 20
    counts = eval(counts)
    # the forward's fused segments and the backward's three distinct ones (the first, the repeated, the last): no
    # program per op, and none once warm
    assert sum(counts[2:]) <= 8 and counts[-2:] == [0, 0]
    x = torch.ones(4, requires_grad=True)
    y = x
    for _ in range(2000):
        y = y * 1.0001 + 0.0
    (expected,) = torch.autograd.grad(y.sum(), x)
    np.testing.assert_allclose(np.float32(lines[-2].split()[1]), expected[0].numpy(), rtol=1e-6)
