"""batched_grad.profiler and batched_grad.autograd.profiler against torch 2.13's profilers: what is recorded (op and
node names, call counts, nesting, self and total times), schedules and on_trace_ready, the table's layout, the Chrome
trace, and the errors."""

import gc
import gzip
import json
import time
import warnings

import jax.numpy as jnp
import pytest
import torch
import torch.autograd.profiler
import torch.profiler

import batched_grad as bg
import batched_grad.autograd.forward_ad as fwAD
import batched_grad.autograd.profiler
import batched_grad.profiler
from batched_grad import _profiling
from batched_grad._ops._core import Op
from batched_grad.profiler import ProfilerAction

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 1))


def _profiled_step(lib, **kwargs):
    """A forward inside a record_function range and a backward, under lib's profiler."""
    model, x = _model(lib), lib.ones(16, 4)
    with lib.profiler.profile(**kwargs) as prof:
        with lib.profiler.record_function("forward_pass"):
            loss = model(x).tanh().sum()
        loss.backward()
    return prof


def _names(prof, parent=None):
    """The names of the events whose parent is named `parent` (None: top-level), with their counts."""
    counts = {}
    for e in prof.events():
        if (e.cpu_parent.name if e.cpu_parent else None) == parent:
            counts[e.name] = counts.get(e.name, 0) + 1
    return counts


def test_forward_ops_are_named_and_counted_as_torch_names_them():
    ours, theirs = _profiled_step(bg), _profiled_step(torch)
    assert (
        _names(ours, "forward_pass")
        == _names(theirs, "forward_pass")
        == {"aten::linear": 2, "aten::tanh": 2, "aten::sum": 1}
    )


def test_backward_nodes_are_evaluate_function_spans_holding_the_node():
    ours, theirs = _profiled_step(bg), _profiled_step(torch)
    prefix = "autograd::engine::evaluate_function: "
    compared = ["SumBackward0", "TanhBackward0", "AddmmBackward0", "torch::autograd::AccumulateGrad"]
    for node in compared:
        assert _names(ours).get(prefix + node) == _names(theirs).get(prefix + node), node
        inside = _names(ours, prefix + node)  # torch's engine also sums and reshapes a gradient there: not ours
        assert inside == {node: _names(theirs)[prefix + node]} and _names(theirs, prefix + node)[node] == inside[node]
    top = set(_names(ours))
    assert top <= {"forward_pass"} | {prefix + n for n in compared}  # everything else is inside a span


def test_self_time_excludes_children_and_total_includes_them():
    prof = _profiled_step(bg)
    for e in prof.events():
        inner = sum(c.cpu_time_total for c in e.cpu_children)
        assert e.self_cpu_time_total == pytest.approx(e.cpu_time_total - inner)
        assert e.self_cpu_time_total >= -1e-6
        for c in e.cpu_children:
            assert e.start_us <= c.start_us and c.end_us <= e.end_us
    outer = next(e for e in prof.events() if e.name == "forward_pass")
    assert outer.cpu_time_total >= sum(c.cpu_time_total for c in outer.cpu_children) > 0


def test_spans_time_the_ops_own_work():
    """A span's time is its op's: deferred results are computed inside it (a recorded op's result is ready when the
    span ends), so an op computed slowly shows there, not later."""
    x = bg.randn(256, 256, requires_grad=True)
    with bg.profiler.profile() as prof:
        y = x @ x
    assert type(y._v).__name__ != "Pending"
    (mm,) = [e for e in prof.events() if e.name == "aten::matmul"]
    assert mm.cpu_time_total > 0


def test_record_function_nests_and_decorates():
    @bg.profiler.record_function("decorated")
    def f(t):
        return t.exp()

    with bg.profiler.profile() as prof:
        with bg.profiler.record_function("outer"):
            with bg.profiler.record_function("inner", "some args"):
                f(bg.ones(3))
            f(bg.ones(3))
    assert _names(prof) == {"outer": 1}
    assert _names(prof, "outer") == {"inner": 1, "decorated": 1}
    assert _names(prof, "inner") == {"decorated": 1}
    assert _names(prof, "decorated") == {"aten::exp": 2}
    inner = next(e for e in prof.events() if e.name == "inner")
    assert inner.args == "some args" and inner.is_user_annotation


def test_record_function_without_a_profiler_records_nothing_and_runs():
    with bg.profiler.record_function("alone"):
        y = bg.ones(2) * 2
    assert y.tolist() == [2.0, 2.0]
    assert not bg.autograd._profiler_enabled()


def test_record_shapes_as_torch_for_ops_taking_tensors():
    def shapes(lib):
        a, b = lib.ones(2, 3), lib.ones(3, 4)
        with lib.profiler.profile(record_shapes=True) as prof:
            (a @ b).exp()
        return {e.name: e.input_shapes for e in prof.events()}

    ours, theirs = shapes(bg), shapes(torch)
    assert ours["aten::matmul"] == theirs["aten::matmul"] == [[2, 3], [3, 4]]
    assert ours["aten::exp"] == theirs["aten::exp"] == [[2, 4]]
    grouped = {(a.key, str(a.input_shapes)) for a in _with_shapes_grouped()}
    assert ("aten::add", "[[2], [2]]") in grouped and ("aten::add", "[[3], [3]]") in grouped


def _with_shapes_grouped():
    with bg.profiler.profile(record_shapes=True) as prof:
        for n in (2, 3, 2):
            bg.add(bg.ones(n), bg.ones(n))
    return prof.key_averages(group_by_input_shape=True)


def test_key_averages_counts_and_total_average():
    with bg.profiler.profile() as prof:
        for _ in range(3):
            bg.ones(4).exp().sin()
    averages = {a.key: a for a in prof.key_averages()}
    assert averages["aten::exp"].count == 3 and averages["aten::sin"].count == 3
    exp = averages["aten::exp"]
    assert exp.cpu_time == pytest.approx(exp.cpu_time_total / 3)
    total = prof.events().total_average()
    assert total.key == "Total" and total.count == len(prof.events())


def _layout(table):
    """The table's header row split into its column titles, and its widths (the dashed rule)."""
    lines = table.splitlines()
    rule = lines[0]
    widths = [len(part) for part in rule.split("  ") if part]
    titles, start = [], 0
    for w in widths:
        titles.append(lines[1][start : start + w].strip())
        start += w + 2
    return titles, widths, lines


@pytest.mark.parametrize("record_shapes", [False, True])
def test_table_has_torchs_columns(record_shapes):
    def table(lib):
        with lib.profiler.profile(record_shapes=record_shapes) as prof:
            lib.ones(2, 3).exp().sum()
        return prof.key_averages(group_by_input_shape=record_shapes).table(sort_by="cpu_time_total", row_limit=1)

    ours, theirs = _layout(table(bg)), _layout(table(torch))
    assert ours[0] == theirs[0]
    assert ours[1][1:7] == theirs[1][1:7]  # the shapes' width follows the longest shape list: ours has no scalars
    lines = ours[2]
    assert len(lines) == 6 and lines[2] == lines[0] == lines[4] and lines[5].startswith("Self CPU time total: ")


def test_table_sorts_and_limits_rows():
    with bg.profiler.profile() as prof:
        with bg.profiler.record_function("slow"):
            time.sleep(0.02)
        bg.ones(2).exp()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=1)
    rows = table.splitlines()[3:-2]
    assert len(rows) == 1 and rows[0].strip().startswith("slow")
    with pytest.raises(AttributeError):
        prof.key_averages().table(sort_by="no_such_column")


def test_with_stack_groups_by_the_callers_frames(tmp_path):
    def one_place():
        return bg.ones(2).exp()

    with bg.profiler.profile(with_stack=True) as prof:
        one_place()
        one_place()
        bg.ones(2).exp()
    (exp_event, *_) = [e for e in prof.events() if e.name == "aten::exp"]
    assert "one_place" in exp_event.stack[0] and __file__ in exp_event.stack[0]
    groups = [a for a in prof.key_averages(group_by_stack_n=1) if a.key == "aten::exp"]
    assert sorted(a.count for a in groups) == [1, 2]
    table = prof.key_averages(group_by_stack_n=1).table()
    assert "Source Location" in table.splitlines()[1] and "one_place" in table
    path = tmp_path / "stacks.txt"
    prof.export_stacks(str(path), "self_cpu_time_total")
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(line.rsplit(" ", 1)[1].isdigit() for line in lines)
    assert "one_place" in lines[0].rsplit(" ", 1)[0].split(";")[-1]  # the innermost frame last


def test_top_level_only_and_time_unit():
    with bg.profiler.profile() as prof:
        with bg.profiler.record_function("outer"):
            bg.ones(2).exp()
    rows = prof.events().table(top_level_events_only=True, time_unit="ms").splitlines()
    assert rows[1] == "This report only display top-level ops statistics"
    body = rows[5:-2]
    assert len(body) == 1 and body[0].strip().startswith("outer") and body[0].split()[2].endswith("ms")


@pytest.mark.parametrize("steps", [3, 4])
def test_acc_events_keeps_every_cycle_as_torch(steps):
    def counts(lib):
        sched = lib.profiler.schedule(wait=0, warmup=1, active=1)
        found = []
        for acc in (False, True):
            with lib.profiler.profile(schedule=sched, acc_events=acc) as prof:
                for _ in range(steps):
                    lib.ones(2).exp()
                    prof.step()
            found.append(_names(prof, "ProfilerStep*").get("aten::exp"))
        return found

    assert counts(bg) == counts(torch)


def test_chrome_trace_is_valid_json_with_complete_events(tmp_path):
    prof = _profiled_step(bg, record_shapes=True)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(prof.events())
    assert {e["cat"] for e in spans} == {"cpu_op", "user_annotation"}
    for e in spans:
        assert e["dur"] >= 0 and isinstance(e["ts"], float) and {"name", "pid", "tid", "args"} <= set(e)
    assert any(e["name"] == "aten::tanh" and e["args"]["Input Dims"] == [[16, 8]] for e in spans)
    gz = tmp_path / "trace.json.gz"
    prof.export_chrome_trace(str(gz))
    assert json.loads(gzip.decompress(gz.read_bytes()))["traceEvents"]


def test_profile_memory_counts_the_bytes_each_op_makes_as_torch():
    def memory(lib):
        x = lib.ones(4, 8)
        with lib.profiler.profile(profile_memory=True) as prof:
            x.exp()[0]
        return {a.key: (a.self_cpu_memory_usage, a.cpu_memory_usage) for a in prof.key_averages()}, prof

    (ours, prof), (theirs, _) = memory(bg), memory(torch)
    assert ours["aten::exp"] == theirs["aten::exp"] == (128, 128)
    assert ours["aten::select"] == theirs["aten::select"] == (0, 0)  # a view makes no array
    titles = _layout(prof.key_averages().table())[0]
    assert titles[6:9] == ["CPU Mem", "Self CPU Mem", "# of Calls"]


def _run_steps(lib, steps, **schedule):
    ready = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = lib.profiler.schedule(**schedule)
    with lib.profiler.profile(schedule=sched, on_trace_ready=lambda p: ready.append(p.step_num)) as prof:
        for _ in range(steps):
            with lib.profiler.record_function("work"):
                lib.ones(2).exp()
            prof.step()
    return ready, _names(prof)


@pytest.mark.parametrize(
    "schedule",
    [
        dict(wait=1, warmup=1, active=2),
        dict(wait=1, warmup=1, active=2, repeat=1),
        dict(wait=0, warmup=0, active=1, repeat=2, skip_first=2),
        dict(wait=2, warmup=1, active=1, skip_first=1, skip_first_wait=1),
    ],
)
def test_schedule_phases_and_on_trace_ready_as_torch(schedule):
    assert _run_steps(bg, 9, **schedule) == _run_steps(torch, 9, **schedule)


def test_schedule_actions_as_torch():
    ours = bg.profiler.schedule(wait=1, warmup=2, active=3, repeat=2, skip_first=1)
    theirs = torch.profiler.schedule(wait=1, warmup=2, active=3, repeat=2, skip_first=1)
    assert [ours(s).name for s in range(16)] == [theirs(s).name for s in range(16)]
    with pytest.raises(AssertionError, match="active=0"):
        bg.profiler.schedule(wait=1, warmup=1, active=0)
    with pytest.warns(UserWarning, match="won't be using warmup"):
        bg.profiler.schedule(wait=1, warmup=0, active=1)
    assert ours(4) is ProfilerAction.RECORD


def test_tensorboard_trace_handler_writes_a_trace_per_cycle(tmp_path):
    sched = bg.profiler.schedule(wait=0, warmup=1, active=1)
    handler = bg.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w0")
    with bg.profiler.profile(schedule=sched, on_trace_ready=handler) as prof:
        for _ in range(4):
            bg.ones(3).exp()
            prof.step()
            time.sleep(0.002)  # the file names carry the time in ms
    files = sorted(tmp_path.iterdir())
    assert len(files) == 2 and all(f.name.startswith("w0.") and f.name.endswith(".pt.trace.json") for f in files)
    for f in files:
        assert any(e["name"].startswith("ProfilerStep#") for e in json.loads(f.read_text())["traceEvents"])


def test_start_stop_and_errors_as_torch():
    prof = bg.profiler.profile()
    with pytest.raises(AssertionError, match="Profiler must be initialized before stopping trace"):
        prof.stop()
    with pytest.raises(AssertionError, match="Profiler must be initialized before getting key averages"):
        prof.key_averages()
    with pytest.raises(AssertionError, match="Profiler must be initialized before accessing events"):
        prof.events()
    prof.start()
    assert bg.autograd._profiler_enabled()
    bg.ones(2).exp()
    prof.stop()
    assert not bg.autograd._profiler_enabled() and not _profiling.PROFILING.on
    assert _names(prof) == {"aten::exp": 1}
    with bg.profiler.profile():
        with pytest.raises(RuntimeError, match="one profiler at a time"):
            bg.profiler.profile().start()
    with pytest.raises(AssertionError, match="No valid profiler activities found"):
        bg.profiler.profile(activities=["cpu"])


def test_refusals_name_the_argument():
    for name in ("with_flops", "with_modules"):
        with pytest.raises(NotImplementedError, match=name):
            bg.profiler.profile(**{name: True})
    with pytest.raises(NotImplementedError, match="NVTX"):
        with bg.autograd.profiler.emit_nvtx():
            pass
    with bg.autograd.profiler.emit_nvtx(enabled=False):
        pass


@pytest.mark.skipif(bg.cuda.is_available(), reason="CUDA profiling is kept where JAX has a GPU")
def test_cuda_activity_on_a_cpu_only_build_is_dropped_as_torch_does():
    with pytest.warns(UserWarning, match="CUDA is not available, disabling CUDA profiling"):
        prof = bg.profiler.profile(activities=[bg.profiler.ProfilerActivity.CUDA, bg.profiler.ProfilerActivity.CPU])
    assert prof.activities == {bg.profiler.ProfilerActivity.CPU}
    assert bg.profiler.supported_activities() == {bg.profiler.ProfilerActivity.CPU}


def test_autograd_profiler_legacy_interface():
    x = bg.ones(3, requires_grad=True)
    with bg.autograd.profiler.profile(record_shapes=True) as prof:
        with bg.autograd.profiler.record_function("block"):
            y = (x * 2).sum()
        y.backward()
    names = [e.name for e in prof.function_events]
    assert names[:3] == ["block", "aten::mul", "aten::sum"]
    assert "autograd::engine::evaluate_function: MulBackward0" in names
    assert prof.self_cpu_time_total == pytest.approx(sum(e.self_cpu_time_total for e in prof.function_events))
    assert "Self CPU time total" in prof.table() and prof.total_average().key == "Total"
    with pytest.raises(RuntimeError, match="not reentrant"):
        with prof:
            with prof:
                pass
    assert bg.autograd.profiler.profile(enabled=False).__enter__() is None


def test_no_profiler_means_no_recording():
    assert not _profiling.PROFILING.on
    prof = bg.profiler.profile()
    with prof:
        pass
    assert len(prof.events()) == 0 and prof.key_averages().table() == ""


def _op_rows():
    """Every Op row, those made at import included (batched_grad's import freezes them out of gc.get_objects)."""
    gc.unfreeze()
    try:
        return [o for o in gc.get_objects() if isinstance(o, Op)]
    finally:
        gc.freeze()


def test_op_names_are_aten_ops_or_batched_grads_own():
    leaf = bg.ones(4, requires_grad=True)
    (leaf * 2)[:2].mul_(3)  # an in-place op on a view makes its copy_slices_of row at run time
    rows = _op_rows()
    unknown = [o.name for o in rows if _profiling.torch_name(o).startswith("aten::") and not _aten(o)]
    assert not unknown, unknown
    assert _profiling.OWN_ROWS <= {o.name for o in rows}


def test_rows_made_at_run_time_are_batched_grads_own():
    bg.jax_function(lambda x: jnp.sin(x) * 2)(bg.ones(2, requires_grad=True))
    with fwAD.dual_level():
        (fwAD.make_dual(bg.ones(2), bg.ones(2)) > 0.5).float().sum()
    made = [
        o
        for o in gc.get_objects()
        if isinstance(o, Op) and (o.name.endswith("_jvp") or str(o.backward_name).startswith("JaxFunction_"))
    ]
    assert made and all(_profiling.torch_name(o).startswith("batched_grad::") for o in made)


def _aten(op):
    return hasattr(torch.ops.aten, _profiling.torch_name(op)[len("aten::") :])
