"""A backward graph too large to fuse whole runs as a sequence of fused segment programs (_segments.py): values
against torch's, equal segments sharing one compiled program, and the engine's semantics across segment
boundaries (create_graph, retain_graph, allow_unused, captures, accumulation, batched cotangents, vmap.vmap).
Compiles and programs are counted, never timed."""

import numpy as np
import pytest
import torch
import torch.func

import batched_grad as bg
import vmap
from batched_grad import _fused, _fusion, _lazy, _segments
from batched_grad._graph import edge_of
from oracle import assert_same

SMALL = 8  # the size bound most tests set, so that a short chain is "long"


pytestmark = pytest.mark.usefixtures("fusion_state")


@pytest.fixture
def small_segments(monkeypatch):
    monkeypatch.setattr(_fusion, "MAX_OPS", SMALL)


@pytest.fixture
def programs_run(monkeypatch):
    """Per backward run by a program: ("whole", nodes) or ("segments", [steps of each segment])."""
    runs = []
    whole, segmented = _fused.run, _segments.run

    def counting_whole(walk, *args, **kwargs):
        runs.append(("whole", len(walk.nodes)))
        return whole(walk, *args, **kwargs)

    def counting_segmented(walk, *args, limit, **kwargs):
        plan = _fused.template(walk.key).plan
        runs.append(("segments", [len(seg.runs) for seg in _segments.layout(plan, limit)]))
        return segmented(walk, *args, limit=limit, **kwargs)

    monkeypatch.setattr(_fused, "run", counting_whole)
    monkeypatch.setattr(_segments, "run", counting_segmented)
    return runs


def _chain(lib, x, steps):
    y = x
    for i in range(steps):
        y = y * (1.0 + i / 1000) + 0.25
    return y


def _uniform_chain(x, steps):
    y = x
    for _ in range(steps):
        y = y * 1.0001 + 0.0
    return y


def _leaf(lib, values):
    return lib.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


def _warm(fn, calls=_lazy.FUSE_AFTER + 1):
    """`fn()` called until its structure runs fused; the last result."""
    for _ in range(calls):
        result = fn()
    return result


def test_a_long_chain_runs_in_segments_with_torchs_gradient(small_segments, programs_run):
    x0 = np.linspace(-1.0, 1.0, 5)
    tx = _leaf(torch, x0)
    expected = torch.autograd.grad((_chain(torch, tx, 40) ** 2).sum(), tx)[0]
    for _ in range(_lazy.FUSE_AFTER + 2):
        x = _leaf(bg, x0)
        assert_same(bg.autograd.grad((_chain(bg, x, 40) ** 2).sum(), x)[0], expected)
    # 80 chain steps, the square and the sum: 82 steps with a gradient, in segments of at most 8
    assert programs_run == [("segments", [8] * 10 + [2])] * 2


def test_a_2000_op_chain_equals_torch_with_the_real_bound(programs_run):
    x0 = np.linspace(0.5, 1.5, 3)
    tx = _leaf(torch, x0)
    expected = torch.autograd.grad(_uniform_chain(tx, 1000).sum(), tx)[0]
    for _ in range(_lazy.FUSE_AFTER + 1):
        x = _leaf(bg, x0)
        assert_same(bg.autograd.grad(_uniform_chain(x, 1000).sum(), x)[0], expected)
    ((kind, sizes),) = programs_run
    assert kind == "segments" and max(sizes) == _fusion.MAX_OPS and sum(sizes) == 2001


def _segment_programs():
    return {key for key in _lazy._program_cache if key[0] == "segment"}


def test_equal_segments_share_one_program_whatever_the_chain_length(small_segments):
    """A uniform chain's segments are equal but for the first (it holds the sum) and the last (the leaf): 160
    steps compile the same number of programs as 40, three of them the backward's segments."""
    compiles, segment_programs = [], []
    for steps, shape in ((40, (11, 2)), (160, (13, 2))):  # shapes of their own: no test compiled for them before
        x0 = np.arange(float(np.prod(shape))).reshape(shape)

        def call():
            x = _leaf(bg, x0)
            return bg.autograd.grad(_uniform_chain(x, steps).sum(), x)[0].numpy()

        before, programs = bg.compile_count(), _segment_programs()
        _warm(call)
        compiles.append(bg.compile_count() - before)
        segment_programs.append(len(_segment_programs() - programs))
        before = bg.compile_count()
        np.testing.assert_allclose(_warm(call, 2), 1.0001**steps * np.ones(shape), rtol=1e-13)
        assert bg.compile_count() == before  # warm: nothing compiles
    assert segment_programs == [3, 3]
    assert compiles[1] == compiles[0]


def test_segment_layout_of_a_uniform_chain_has_three_distinct_programs(small_segments):
    x = _leaf(bg, [1.0, 2.0])
    y = _uniform_chain(x, 40).sum()
    walk = _fused.walk([y.grad_fn], [edge_of(y)], [bg.ones_like(y)], [], True, None)
    segments = _segments.layout(_fused.template(walk.key).plan, SMALL)
    assert [len(s.runs) for s in segments] == [8] * 10 + [1]
    assert len({s.plan for s in segments}) == 3
    # between two segments of a chain, one cotangent: the output of one is the input of the next
    assert all(len(s.ins) == 1 for s in segments[1:]) and all(len(s.outs) == 1 for s in segments)


def test_a_leaf_read_by_every_step_accumulates_across_segments(small_segments, programs_run):
    """w is read by every step of the chain: its gradient is added to in each segment and carried between them."""

    def run(lib):
        x, w = _leaf(lib, [0.5, -0.25, 1.0]), _leaf(lib, [0.9, 1.1, 1.0])
        y = x
        for _ in range(30):
            y = y * w + 0.1
        return lib.autograd.grad(y.sum(), [x, w])

    expected = run(torch)
    assert_same(_warm(lambda: run(bg)), expected)
    assert programs_run and programs_run[0][0] == "segments"


def test_backward_accumulates_into_dot_grad_across_calls(small_segments, programs_run):
    tx = _leaf(torch, [1.0, 2.0])
    for _ in range(3):
        _chain(torch, tx, 20).sum().backward()
    x = _leaf(bg, [1.0, 2.0])
    for _ in range(3):
        _chain(bg, x, 20).sum().backward()
    assert_same(x.grad, tx.grad)
    assert [kind for kind, _ in programs_run] == ["segments"]


def test_retain_graph_keeps_the_saved_values_and_without_it_a_second_backward_raises(small_segments):
    def twice(lib, retain):
        x = _leaf(lib, [1.0, -2.0])
        y = (_chain(lib, x, 20) ** 2).sum()
        y.backward(retain_graph=retain)
        y.backward()
        return x.grad

    for _ in range(_lazy.FUSE_AFTER):  # the structure's first sightings: per-node
        twice(bg, True)
    assert_same(twice(bg, True), twice(torch, True))
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        twice(bg, False)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        twice(torch, False)


def test_create_graph_records_the_segments_so_a_second_order_gradient_equals_torchs(small_segments, programs_run):
    def second_order(lib):
        x = _leaf(lib, [0.3, -0.7, 1.2])
        y = x
        for _ in range(12):
            y = lib.tanh(y) * 1.5 + 0.1
        (g,) = lib.autograd.grad((y**3).sum(), x, create_graph=True)
        (h,) = lib.autograd.grad((g * g).sum(), x)
        return g.detach(), h

    assert_same(_warm(lambda: second_order(bg)), second_order(torch))
    assert ("segments", [8] * 4 + [6]) in programs_run  # the first backward: 38 steps


def test_allow_unused_and_a_captured_intermediate_in_a_middle_segment(small_segments, programs_run):
    def grads(lib):
        x, unused = _leaf(lib, [1.0, 2.0, 3.0]), _leaf(lib, [4.0])
        middle = _chain(lib, x * 0.5, 10)
        y = _chain(lib, middle, 10).sum()
        return lib.autograd.grad(y, [x, unused, middle], allow_unused=True)

    got, expected = _warm(lambda: grads(bg)), grads(torch)
    assert got[1] is None and expected[1] is None
    assert_same([got[0], got[2]], [expected[0], expected[2]])
    assert programs_run[0][0] == "segments"


@pytest.mark.parametrize("rows", [1, 4])
def test_batched_grad_outputs_of_a_2000_op_chain_equal_torchs(rows, programs_run):
    x0 = np.linspace(0.2, 0.8, 4)
    v = np.random.default_rng(rows).standard_normal((rows, 4))

    def grads(lib):
        x = _leaf(lib, x0)
        return lib.autograd.grad(_uniform_chain(x, 1000), x, lib.tensor(v), is_grads_batched=True)

    assert_same(_warm(lambda: grads(bg)), grads(torch))
    assert programs_run[0][0] == "segments"


def test_a_jacobian_through_a_long_chain_reads_its_basis_rows_in_the_first_segment_only(small_segments, programs_run):
    def f(x):
        y = x
        for _ in range(20):
            y = y.sin() * 0.9 + 0.2
        return y

    x0 = np.linspace(-1.0, 1.0, 5)
    expected = torch.autograd.functional.jacobian(f, torch.tensor(x0), vectorize=True)
    for _ in range(_lazy.FUSE_AFTER + 1):
        got = bg.autograd.functional.jacobian(f, bg.tensor(x0), vectorize=True)
    assert_same(got, expected)
    assert programs_run and programs_run[-1][0] == "segments"


def test_vmap_of_the_gradient_of_a_long_chain_equals_torch_func(small_segments, programs_run):
    def per_sample(lib, grad_of):
        def loss(w, x):
            return (_chain(lib, x * w, 15) ** 2).sum()

        return grad_of(loss)

    w0 = np.array([0.5, -1.0, 2.0])
    xs = np.random.default_rng(0).standard_normal((6, 3))
    expected = torch.func.vmap(per_sample(torch, torch.func.grad), in_dims=(None, 0))(
        torch.tensor(w0), torch.tensor(xs)
    )

    def bg_grad(loss):
        def grad(w, x):  # w requires grad from outside: torch refuses requires_grad_() inside vmap
            return bg.autograd.grad(loss(w, x), w)[0]

        return grad

    f = vmap.vmap(per_sample(bg, bg_grad), in_dims=(None, 0))
    assert_same(_warm(lambda: f(bg.tensor(w0, requires_grad=True), bg.tensor(xs))), expected)
    assert programs_run and all(kind == "segments" for kind, _ in programs_run)


def test_off_runs_node_by_node_and_always_fuses_whole(small_segments, programs_run):
    x0 = np.array([0.25, 0.75])
    tx = _leaf(torch, x0)
    expected = torch.autograd.grad(_chain(torch, tx, 20).sum(), tx)
    for mode, runs in (("off", []), ("always", [("whole", 42)]), ("auto", [("segments", [8] * 5 + [1])])):
        bg.set_fusion(mode)
        _lazy._seen.clear()
        programs_run.clear()
        for _ in range(_lazy.FUSE_AFTER + 1):
            x = _leaf(bg, x0)
            got = bg.autograd.grad(_chain(bg, x, 20).sum(), x)
        assert_same(got, expected)
        assert programs_run == runs, mode


def test_hooks_still_run_node_by_node_in_a_long_graph(small_segments, programs_run):
    seen = []
    for _ in range(_lazy.FUSE_AFTER + 1):
        x = _leaf(bg, [1.0, 2.0])
        middle = _chain(bg, x, 10)
        middle.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2)
        (g,) = bg.autograd.grad(_chain(bg, middle, 10).sum(), x)
    tx = _leaf(torch, [1.0, 2.0])
    tmiddle = _chain(torch, tx, 10)
    tmiddle.register_hook(lambda g: g * 2)
    assert_same(g, torch.autograd.grad(_chain(torch, tmiddle, 10).sum(), tx)[0])
    assert len(seen) == _lazy.FUSE_AFTER + 1 and programs_run == []
