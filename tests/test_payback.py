"""The cost model of _payback.py: a structure runs as its own compiled program once the time spent running it per op
pays for that program's compile (or its load from the store of executables). The clock the model reads is replaced
by one that advances a fixed step per reading, so that the tests count compiles, never time."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _fused, _lazy, _payback, _store


class SteppingClock:
    """A clock that advances `step` seconds at every reading: each run without a program costs about `step`."""

    def __init__(self, step):
        self.step, self.now = step, 0.0

    def __call__(self):
        self.now += self.step
        return self.now


@pytest.fixture
def cost_model(monkeypatch):
    """The cost model in force (not the tests' fixed count), with no structure seen, no compile or load measured,
    and a clock of 1 ms a run (the test may change its step)."""
    monkeypatch.setattr(_lazy, "FUSE_AFTER", None)
    monkeypatch.setattr(_payback, "_compiles", [0.0, 0])
    monkeypatch.setattr(_payback, "_learned", {})
    monkeypatch.setattr(_payback, "_mixes", {})
    monkeypatch.setattr(_payback, "_loads", [0.0, 0])
    clock = SteppingClock(1e-3)
    monkeypatch.setattr(_payback, "clock", clock)
    _payback.clear()
    _lazy._seen.clear()
    bg.set_fusion("auto")
    yield clock
    _payback.clear()
    _lazy._seen.clear()


def _energy_grad(lib, x0, w0):
    """The gradient of sum(tanh(W x)^2): a forward and a backward of a few ops."""
    w = lib.tensor(w0)
    x = lib.tensor(x0, requires_grad=True)
    (g,) = lib.autograd.grad((lib.tanh(w @ x) ** 2).sum(), x)
    return g.detach().numpy()


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n), rng.standard_normal((n + 1, n)) / np.sqrt(n)


def _compiled_or_loaded():
    return bg.compile_count() + _store.counts()["loaded"]


def _calls_compiling(n, calls):
    """Run the gradient `calls` times on vectors of size `n` (a structure no other test builds); per call, whether
    it compiled or loaded anything. Every result matches torch's."""
    x0, w0 = _data(n)
    expected = _energy_grad(torch, x0, w0)
    compiled = []
    for _ in range(calls):
        before = _compiled_or_loaded()
        np.testing.assert_allclose(_energy_grad(bg, x0, w0), expected, rtol=1e-12, atol=1e-14)
        compiled.append(_compiled_or_loaded() > before)
    return compiled


def test_a_loop_of_ten_cheap_runs_compiles_nothing_after_its_first_call(cost_model):
    compiled = _calls_compiling(11, 10)
    assert compiled[1:] == [False] * 9  # the first call compiles its per-op kernels, no call a program


def test_the_fixed_count_compiles_the_same_loop_on_its_third_call(cost_model):
    bg.set_fuse_after(2)
    try:
        compiled = _calls_compiling(12, 10)
    finally:
        bg.set_fuse_after(None)
    assert compiled[1:] == [False, True] + [False] * 7


def test_runs_that_cost_more_than_a_compile_compile_at_the_second_sighting(cost_model):
    cost_model.step = 10.0  # every run seconds long: the first alone pays for any compile
    compiled = _calls_compiling(13, 5)
    assert compiled[1:] == [True, False, False, False]


def test_the_spent_time_decides_whatever_the_count(cost_model):
    """Runs of 1 ms against a predicted compile of PRIOR_FIXED plus the priors of its ops: no program until their sum
    reaches it."""
    x0, w0 = _data(14)
    _energy_grad(bg, x0, w0)
    (key,) = [k for k in _payback._spent if isinstance(k, _fused.WalkKey)]
    runs_to_pay = int(np.ceil(_payback.compile_estimate(_fused.mix(key)) / _payback.spent(key)))
    assert runs_to_pay > 10
    before = _compiled_or_loaded()
    for _ in range(runs_to_pay - 2):
        _energy_grad(bg, x0, w0)
    assert _compiled_or_loaded() == before
    for _ in range(3):
        _energy_grad(bg, x0, w0)
    assert _compiled_or_loaded() > before


def test_a_stored_program_is_loaded_once_the_runs_pay_for_a_load(cost_model, program_store):
    x0, w0 = _data(15)
    bg.set_fuse_after(2)  # two runs op by op, then the structure's program, compiled and stored
    try:
        for _ in range(3):
            _energy_grad(bg, x0, w0)
    finally:
        bg.set_fuse_after(None)
    _store.flush()
    _fused.template.cache_clear()  # forget the programs in memory (the kernels stay): only the store has them
    _lazy._program_cache.clear()
    _payback.clear()
    _lazy._seen.clear()
    cost_model.step = 0.004  # a run pays for a load (PRIOR_LOAD) in two sightings, for a compile in far more
    compiles, loads = bg.compile_count(), _store.counts()["loaded"]
    for _ in range(4):
        _energy_grad(bg, x0, w0)
    assert bg.compile_count() == compiles
    assert _store.counts()["loaded"] > loads


def test_one_time_work_is_not_counted_as_time_spent_without_a_program(monkeypatch):
    monkeypatch.setattr(_lazy, "FUSE_AFTER", None)
    _payback.clear()
    before = _payback.one_time()
    _payback.add_one_time(0.25)
    assert _payback.one_time() == pytest.approx(before + 0.25)
    start = _payback.clock()
    _payback.add_one_time(10.0)  # a compile of 10 s meanwhile: not part of the run
    assert _payback.clock() - start < 1.0


def test_measured_compiles_and_loads_replace_the_priors(monkeypatch):
    monkeypatch.setattr(_payback, "_compiles", [0.0, 0])
    monkeypatch.setattr(_payback, "_loads", [0.0, 0])
    assert _payback.compile_estimate(10) == pytest.approx(_payback.PRIOR_FIXED + 10 * _payback.PRIOR_PER_OP)
    assert _payback.load_estimate() == _payback.PRIOR_LOAD
    _payback.note_compile(10, 4 * (_payback.PRIOR_FIXED + 10 * _payback.PRIOR_PER_OP))
    _payback.note_compile(20, 1 * (_payback.PRIOR_FIXED + 20 * _payback.PRIOR_PER_OP))
    # the geometric mean of the measured factors (4 and 1) scales every prediction
    assert _payback.compile_estimate(30) == pytest.approx(2 * (_payback.PRIOR_FIXED + 30 * _payback.PRIOR_PER_OP))
    _payback.note_load(0.001)
    _payback.note_load(0.003)
    assert _payback.load_estimate() == pytest.approx(0.002)


def test_pays_back_asks_the_store_only_once_the_load_is_paid(monkeypatch):
    monkeypatch.setattr(_payback, "_compiles", [0.0, 0])
    monkeypatch.setattr(_payback, "_loads", [0.0, 0])
    _payback.clear()
    asked = []

    def stored():
        asked.append(True)
        return True

    key = ("a structure of this test",)
    assert not _payback.pays_back(key, 5, stored)  # never seen run: nothing spent
    _payback.note_unfused(key, _payback.PRIOR_LOAD / 2)
    assert not _payback.pays_back(key, 5, stored) and asked == []
    _payback.note_unfused(key, _payback.PRIOR_LOAD)
    assert _payback.pays_back(key, 5, stored) and _payback.pays_back(key, 5, stored) and asked == [True]
    assert _payback.pays_back(key, 5, lambda: False)  # the answer is kept per structure
    _payback.clear()


def test_set_fuse_after_checks_its_argument_and_returns_the_previous_setting(monkeypatch):
    monkeypatch.setattr(_lazy, "FUSE_AFTER", None)
    assert bg.set_fuse_after(3) is None
    assert bg.set_fuse_after(None) == 3
    with pytest.raises(TypeError, match=r"set_fuse_after\(\): argument 'n' must be None or an int, but got float"):
        bg.set_fuse_after(2.0)
    with pytest.raises(ValueError, match=r"argument 'n' must be None or an int >= 0, but got -1"):
        bg.set_fuse_after(-1)
    assert _lazy.FUSE_AFTER is None


def test_the_environment_variable_sets_a_count(monkeypatch):
    monkeypatch.setenv(_payback.ENV, "5")
    assert _payback.from_environment() == 5
    monkeypatch.setenv(_payback.ENV, "")
    assert _payback.from_environment() is None
    monkeypatch.setenv(_payback.ENV, "often")
    with pytest.warns(UserWarning, match="BATCHED_GRAD_FUSE_AFTER must be an int >= 0, but got 'often'"):
        assert _payback.from_environment() is None


def test_a_structure_in_segments_is_priced_by_its_distinct_segments(monkeypatch):
    """A long chain runs its backward in segments of which most are equal and share one program: its compile is
    predicted from the distinct ones, not from every node."""
    from batched_grad import _engine, _fusion, _segments

    monkeypatch.setattr(_fusion, "_mode", ["auto"])
    monkeypatch.setattr(_fusion, "MAX_OPS", 8)
    x = bg.tensor(np.linspace(0.5, 1.5, 4), requires_grad=True)
    y = x
    for _ in range(400):
        y = y * 1.001 + 0.5
    loss = y.sum()
    walk = _fused.walk([loss.grad_fn], [bg.autograd.graph.GradientEdge(loss.grad_fn, 0)], [bg.ones(())], [], True, None)
    mixes = _engine._program_mixes(walk)
    assert isinstance(mixes, tuple) and sum([n for m in mixes for _, n, _ in m]) < len(walk.nodes) / 2
    assert mixes == _segments.distinct_mixes(_fused.template(walk.key).plan, 8)
    whole = _fused.mix(walk.key)
    assert _payback.compile_estimate(mixes) < _payback.compile_estimate(whole)


def test_traces_and_loads_are_one_time_work_counted_once(program_store):
    """A value found by a trace (a host form's program, an op's avals) counts as one-time work, whether traced or
    read from the store, and work nested inside it (a compile during the trace) is not counted twice."""
    import time

    def traced():
        time.sleep(0.02)
        inner = _payback.one_time_mark()
        time.sleep(0.02)
        _payback.one_time_since(inner)  # counted inside: part of the outer piece, not added again
        return 7

    before = _payback.one_time()
    start = time.perf_counter()
    assert _store.remembered("test", ("a value of test_payback",), traced) == 7
    elapsed = time.perf_counter() - start
    assert 0.04 <= _payback.one_time() - before <= elapsed + 1e-9


def _chain_grad(lib, x0, steps):
    """The gradient of a chain of cheap float arithmetic: `steps` times y * 1.001 + 0.5."""
    x = lib.tensor(x0, requires_grad=True)
    y = x
    for _ in range(steps):
        y = y * 1.001 + 0.5
    (g,) = lib.autograd.grad(y.sum(), x)
    return g.detach().numpy()


def test_a_chain_of_cheap_arithmetic_compiles_once_its_runs_pay_for_that_arithmetic(cost_model, monkeypatch):
    """A node of float arithmetic adds a few ms to XLA's compile, not the tens of ms of tanh or a matrix product:
    60 steps of y * a + b (121 nodes) at 20 ms a clock reading are compiled within 15 calls (priced as other ops,
    0.03 s + 0.01 s a node, not within 30). The priors alone decide: the compiles' measured times are not learned
    from here."""
    monkeypatch.setattr(_payback, "note_compile", lambda mix, seconds: None)
    cost_model.step = 0.02
    x0 = np.linspace(-1.0, 1.0, 6)
    expected = _chain_grad(torch, x0, 60)
    compiled = []
    for _ in range(15):
        before = _compiled_or_loaded()
        np.testing.assert_allclose(_chain_grad(bg, x0, 60), expected, rtol=1e-12)
        compiled.append(_compiled_or_loaded() > before)
    assert True in compiled[1:]


def test_the_compile_of_each_op_is_learned_from_the_programs_it_took_part_in(monkeypatch):
    monkeypatch.setattr(_payback, "_compiles", [0.0, 0])
    monkeypatch.setattr(_payback, "_learned", {})
    cheap = _payback.Mix([("mul", 100, _payback.PRIOR_CHEAP)])
    costly = _payback.Mix([("tanh", 10, _payback.PRIOR_PER_OP)])
    mixed = _payback.Mix([("mul", 100, _payback.PRIOR_CHEAP), ("tanh", 10, _payback.PRIOR_PER_OP)])
    prior = {m: _payback.compile_estimate(m) for m in (cheap, costly, mixed)}
    assert prior[cheap] == pytest.approx(_payback.PRIOR_FIXED + 100 * _payback.PRIOR_CHEAP)
    assert prior[costly] == pytest.approx(_payback.PRIOR_FIXED + 10 * _payback.PRIOR_PER_OP)
    _payback.note_compile(cheap, prior[cheap] / 2)
    _payback.note_compile(costly, prior[costly] * 2)
    # each op keeps its own correction (mul's nodes at half their prior, tanh's at twice); the fixed part takes the
    # mean over all compiles (1 here)
    assert _payback.compile_estimate(cheap) == pytest.approx(_payback.PRIOR_FIXED + 0.5 * 100 * _payback.PRIOR_CHEAP)
    assert _payback.compile_estimate(costly) == pytest.approx(_payback.PRIOR_FIXED + 2 * 10 * _payback.PRIOR_PER_OP)
    # an op never compiled is scaled by the mean over all compiles (here 1)
    unseen = _payback.Mix([("exp", 10, _payback.PRIOR_PER_OP)])
    assert _payback.compile_estimate(unseen) == pytest.approx(_payback.PRIOR_FIXED + 10 * _payback.PRIOR_PER_OP)


def test_the_priors_price_views_and_arithmetic_below_other_ops():
    x = bg.tensor(np.ones((4, 8)), requires_grad=True)
    ops = {
        "add": x + 1.0,
        "mul": x * 2.0,
        "reshape": x.reshape(32),
        "permute": x.t(),
        "tanh": x.tanh(),
        "mm": x @ x.t(),
        "sum": x.sum(),
    }
    priors = {name: _payback.op_prior(t._v.call.sig.op) for name, t in ops.items()}
    assert {priors[k] for k in ("add", "mul", "reshape", "permute")} == {_payback.PRIOR_CHEAP}
    assert {priors[k] for k in ("tanh", "mm", "sum")} == {_payback.PRIOR_PER_OP}
