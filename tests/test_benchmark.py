"""utils.benchmark against torch 2.13: Measurement's statistics and printout and Compare's tables (identical text for
the same times), the helpers, Timer's methods, checks and messages, and that a timed statement's values are computed
(batched_grad defers them) before the clock stops."""

import timeit

import pytest
import torch
import torch.utils.benchmark as torch_benchmark

import batched_grad as bg
import batched_grad.utils.benchmark as benchmark
from batched_grad._lazy import Pending
from oracle import assert_same

TIMES = {
    "one": [2.5e-3],
    "three": [1.0e-5, 1.1e-5, 0.98e-5],
    "steady": [1.00e-4, 1.01e-4, 0.99e-4, 1.02e-4, 1.00e-4, 0.995e-4],
    "noisy": [1e-4, 1.2e-4, 1.1e-4, 0.9e-4, 3e-4, 1.05e-4],
    "fluctuating": [1e-6, 1.06e-6, 0.97e-6, 1.1e-6, 1.0e-6, 1.03e-6, 0.95e-6, 1.08e-6],
}
SPECS = {
    "plain": dict(stmt="x + y", setup="pass"),
    "labelled": dict(stmt="x + y", setup="x = torch.ones(3)", label="add", sub_label="small", description="f32"),
    "multiline": dict(stmt="a = f(x)\nb = g(a)", setup="import math\nx = 1", sub_label="two", num_threads=4),
}


def both(spec, times, number=10):
    """The same Measurement in batched_grad and in torch."""
    ours = benchmark.Measurement(number, list(times), benchmark.TaskSpec(**spec))
    theirs = torch_benchmark.Measurement(number, list(times), torch_benchmark.TaskSpec(**spec))
    return ours, theirs


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("times", TIMES)
def test_measurement_statistics_and_printout_match_torch(spec, times):
    ours, theirs = both(SPECS[spec], TIMES[times])
    for name in ("mean", "median", "iqr"):
        assert getattr(ours, name) == pytest.approx(getattr(theirs, name), rel=1e-12), name
    for name in ("times", "significant_figures", "has_warnings", "title", "env", "as_row_name", "label", "stmt"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.meets_confidence(0.05) == theirs.meets_confidence(0.05)
    assert repr(ours).split("\n")[1:] == repr(theirs).split("\n")[1:]
    assert repr(ours).startswith("<batched_grad.utils.benchmark.")


def test_merge_pools_the_times_of_each_task():
    spec = SPECS["labelled"]
    ours = [benchmark.Measurement(n, [t], benchmark.TaskSpec(**spec)) for n, t in ((10, 1e-3), (100, 2e-2))]
    theirs = [
        torch_benchmark.Measurement(n, [t], torch_benchmark.TaskSpec(**spec)) for n, t in ((10, 1e-3), (100, 2e-2))
    ]
    (merged,), (t_merged,) = benchmark.Measurement.merge(ours), torch_benchmark.Measurement.merge(theirs)
    assert merged.number_per_run == 1 and merged.times == t_merged.times == [1e-4, 2e-4]


def grid(module):
    """Measurements of two labels, two statements, two thread counts and two descriptions (one cell missing); the
    "mul" table's large statement runs in a second env."""
    results = []
    for label in ("add", "mul"):
        for description, spread in (("float", 0.01), ("double", 0.2)):
            for sub_label, base in (("small", 1e-6), ("large", 3.3e-5)):
                for threads in (1, 2):
                    if (label, description, sub_label, threads) == ("mul", "double", "large", 2):
                        continue
                    spec = module.TaskSpec(
                        stmt="x * y", setup="", label=label, sub_label=sub_label, description=description,
                        num_threads=threads, env=None if label == "add" else "jit" if sub_label == "large" else "eager",
                    )  # fmt: skip
                    times = [base * 100 * threads * (1 + spread * ((i * 7) % 5)) for i in range(7)]
                    results.append(module.Measurement(100, times, spec))
    return results


def test_compare_tables_match_torch():
    ours, theirs = benchmark.Compare(grid(benchmark)), torch_benchmark.Compare(grid(torch_benchmark))
    assert str(ours) == str(theirs)
    for change in (
        lambda c: c.trim_significant_figures(),
        lambda c: c.highlight_warnings(),
        lambda c: c.colorize(rowwise=True),
        lambda c: c.colorize(),
    ):
        change(ours)
        change(theirs)
        assert str(ours) == str(theirs)
    ours.extend_results(grid(benchmark)[:3])
    theirs.extend_results(grid(torch_benchmark)[:3])
    assert str(ours) == str(theirs)
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`, got <class 'int'> instead."):
        benchmark.Compare([3])


def test_helpers_match_torch():
    for x, n in ((1.23456e-5, 3), (987654.0, 2), (0.5, 1), (3.14159, 4)):
        assert benchmark.trim_sigfig(x, n) == torch_benchmark.trim_sigfig(x, n)
    for t in (3e-10, 3e-7, 4.5e-4, 0.2, 2.0, 1234.0):
        assert benchmark.select_unit(t) == torch_benchmark.select_unit(t)
    assert [benchmark.unit_to_english(u) for u in ("ns", "us", "ms", "s")] == [
        torch_benchmark.unit_to_english(u) for u in ("ns", "us", "ms", "s")
    ]
    assert benchmark.ordered_unique([3, 1, 3, 2, 1]) == [3, 1, 2]
    with pytest.raises(AssertionError, match="must be an integer"):
        benchmark.trim_sigfig(1.0, 1.5)
    before = bg.get_num_threads()
    with benchmark.set_torch_threads(1):
        assert bg.get_num_threads() == 1
    assert bg.get_num_threads() == before


def test_timer_methods():
    timer = benchmark.Timer("x * 2", setup="x = torch.ones(4)", label="double", sub_label="ones", description="bg")
    measured = timer.timeit(50)
    assert isinstance(measured, benchmark.Measurement) and measured.number_per_run == 50
    assert len(measured.raw_times) == 1 and measured.raw_times[0] > 0
    assert (measured.label, measured.sub_label, measured.description, measured.stmt) == (
        "double",
        "ones",
        "bg",
        "x * 2",
    )
    blocks = []
    blocked = timer.blocked_autorange(callback=lambda number, spent: blocks.append((number, spent)), min_run_time=0.05)
    assert sum(blocked.raw_times) >= 0.05 and [b[1] for b in blocks] == blocked.raw_times
    assert all(number == blocked.number_per_run for number, _ in blocks)
    adaptive = timer.adaptive_autorange(threshold=0.5, min_run_time=0.01, max_run_time=1.0)
    assert len(adaptive.raw_times) >= 4 or sum(adaptive.raw_times) > 1.0
    assert "double: ones" in repr(adaptive)


def test_timer_refusals_match_torch():
    for timer_cls in (benchmark.Timer, torch_benchmark.Timer):
        with pytest.raises(ValueError, match="Currently only a `str` stmt is supported."):
            timer_cls(lambda: None)
        with pytest.raises(ValueError, match="global_setup is C\\+\\+ only, got `int x;`"):
            timer_cls("pass", global_setup="int x;")
        with pytest.raises(ValueError, match="Invalid language `fortran`."):
            timer_cls("pass", language="fortran")
        for method in ("repeat", "autorange"):
            with pytest.raises(NotImplementedError, match="See `Timer.blocked_autorange.`"):
                getattr(timer_cls("pass"), method)()
    with pytest.raises(NotImplementedError, match="only Python statements"):
        benchmark.Timer("x", language=benchmark.Language.CPP)


def test_statement_runs_with_batched_grad_as_torch_and_its_threads():
    seen = []
    benchmark.Timer("seen.append((torch, torch.get_num_threads()))", globals={"seen": seen}, num_threads=2).timeit(3)
    assert seen and all(entry == (bg, 2) for entry in seen)
    mine = []
    benchmark.Timer("mine.append(torch)", globals={"mine": mine, "torch": "given"}).timeit(2)
    assert set(mine) == {"given"}


def test_timed_values_are_computed_before_the_clock_stops():
    kept = []

    def keep(value):
        kept.append(value)
        return value

    x = bg.randn(64, 64, requires_grad=True)  # results that require grad are deferred until read
    namespace = {"x": x, "keep": keep}
    timeit.Timer("keep((x @ x).tanh())", globals=namespace).timeit(1)  # control: recording alone computes nothing
    assert type(kept[-1]._v) is Pending
    kept.clear()
    benchmark.Timer("keep((x @ x).tanh())", globals=namespace).timeit(3)
    benchmark.Timer("y = keep(x.exp()); z = keep([y * 2, {'a': y + 1}])", globals=namespace).timeit(2)
    tensors = [v for v in kept if isinstance(v, bg.Tensor)] + [v[0] for v in kept if isinstance(v, list)]
    tensors += [v[1]["a"] for v in kept if isinstance(v, list)]
    assert len(tensors) > 10 and all(type(t._v) is not Pending for t in tensors)


def test_a_jacobian_tutorial_flow_runs():
    def predict(weight, bias, x):
        return bg.nn.functional.linear(x, weight, bias).tanh()

    bg.manual_seed(0)
    namespace = {"predict": predict, "jacrev": bg.func.jacrev, "w": bg.randn(8, 8), "b": bg.randn(8), "x": bg.randn(8)}
    rows = benchmark.Timer(
        "torch.stack([torch.autograd.grad(predict(w, b, xp), xp, v)[0] for v in torch.eye(8)])",
        setup="xp = x.clone().requires_grad_()",
        globals=namespace,
        label="jacobian",
        description="rows",
    ).timeit(5)
    vectorized = benchmark.Timer(
        "jacrev(predict, argnums=2)(w, b, x)", globals=namespace, label="jacobian", description="jacrev"
    ).timeit(5)
    gain = abs(rows.times[0] - vectorized.times[0]) / rows.times[0] * 100
    assert gain >= 0 and "1 measurement, 5 runs , 1 thread" in repr(vectorized)
    table = str(benchmark.Compare([rows, vectorized]))
    assert table.startswith("[") and "jacobian" in table and "rows" in table and "jacrev" in table


def fuzzer_of(module, seed):
    """A Fuzzer of torch.utils.benchmark's kinds: log-uniform, uniform and strict parameters, parameter-named sizes,
    steps and dims, a random layout, element limits and a constraint that rejects some draws."""
    b = module.utils.benchmark
    return b.Fuzzer(
        parameters=[
            b.FuzzedParameter("rows", minval=1, maxval=64, distribution="loguniform"),
            b.FuzzedParameter("cols", minval=2, maxval=10, distribution="uniform"),
            b.FuzzedParameter("depth", minval=1, maxval=3, distribution="uniform"),
            b.FuzzedParameter("dims", minval=2, maxval=3, distribution="uniform"),
            [
                b.FuzzedParameter("step", minval=1, maxval=3, distribution="uniform", strict=True),
                b.FuzzedParameter("scale", minval=0.5, maxval=2.5, distribution="uniform"),
            ],
        ],
        tensors=[
            b.FuzzedTensor(
                "x",
                size=("rows", "cols", "depth"),
                steps=("step", 1),
                dim_parameter="dims",
                probability_contiguous=0.4,
                max_elements=600,
            ),
            [b.FuzzedTensor("n", size=("cols", 4), dtype=module.int32, probability_contiguous=0.0, min_elements=4)],
        ],  # fmt: skip
        constraints=[lambda p: p["rows"] * p["cols"] < 40],
        seed=seed,
    )


@pytest.mark.parametrize("seed", [0, pytest.param(7, marks=pytest.mark.slow)])  # each new shape compiles
def test_fuzzer_draws_match_torch(seed):
    ours, theirs = fuzzer_of(bg, seed), fuzzer_of(torch, seed)
    for (tensors, properties, params), (t_tensors, t_properties, t_params) in zip(ours.take(4), theirs.take(4)):
        assert params == pytest.approx(t_params)
        for name in ("x", "n"):
            assert_same(tensors[name], t_tensors[name])
            got, want = properties[name], t_properties[name]
            assert list(got["order"]) == list(want["order"]) and got["steps"] == want["steps"]
            for key in ("numel", "is_contiguous", "dtype"):
                assert got[key] == want[key], key
    assert ours.rejection_rate == theirs.rejection_rate > 0


@pytest.mark.parametrize(
    "call",
    [
        lambda b: b.FuzzedParameter("a", 1, 4, distribution="normal"),
        lambda b: b.FuzzedParameter("a", distribution={1: 0.5, 2: 0.5}),  # torch's inverted normalization check
        lambda b: b.FuzzedParameter("a", distribution={1: -0.5, 2: 1.5}),
        lambda b: b.Fuzzer([b.FuzzedParameter("a", 1, 2, "uniform")], [b.FuzzedTensor("a", size=(2,))]),
        lambda b: next(b.Fuzzer([b.FuzzedParameter("a", 1, 2, "uniform")], [], constraints=[lambda p: False]).take(1)),
        lambda b: b.Fuzzer._resolve_aliases({"a": b.ParameterAlias("b"), "b": b.ParameterAlias("a")}),
    ],
)
def test_fuzzer_errors_match_torch(call):
    with pytest.raises(Exception) as want:
        call(torch_benchmark)
    with pytest.raises(type(want.value)) as got:
        call(benchmark)
    assert str(got.value) == str(want.value)


def test_parameter_aliases_resolve():
    params = {"a": 3, "b": benchmark.ParameterAlias("a"), "c": benchmark.ParameterAlias("b")}
    t_params = {"a": 3, "b": torch_benchmark.ParameterAlias("a"), "c": torch_benchmark.ParameterAlias("b")}
    assert benchmark.Fuzzer._resolve_aliases(params) == torch_benchmark.Fuzzer._resolve_aliases(t_params)
    assert repr(benchmark.ParameterAlias("a")) == repr(torch_benchmark.ParameterAlias("a"))
