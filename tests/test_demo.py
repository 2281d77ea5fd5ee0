"""The command line: `python -m batched_grad demo` checks batched results against their loops and fails loudly on a
mismatch; `bench` runs the benchmark scripts and explains what is missing when it cannot."""

import io
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from absl import app

import batched_grad as bg
from batched_grad import __main__ as cli
from batched_grad import _bench, _demo

SMALL = ["--width=8", "--outputs=4", "--batch=4", "--hvps=4", "--repeats=1"]


def command_line(*args):
    """Run `python -m batched_grad ARGS`; the finished process."""
    return subprocess.run([sys.executable, "-m", "batched_grad", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def parsed():
    """Parse command-line flags as `python -m batched_grad` would, and restore their defaults afterwards."""
    yield lambda *argv: cli.FLAGS(["batched_grad", *argv])
    cli.FLAGS.unparse_flags()


def test_demo_prints_the_table_and_every_check_is_ok():
    done = command_line("demo", *SMALL)
    assert done.returncode == 0, done.stderr
    header, *rows, legend = done.stdout.strip().splitlines()
    assert header.split()[:3] == ["workload", "batched", "ms"] and "speed-up" in header
    assert [row.split()[0] for row in rows] == ["Jacobian", "per-sample", "Hessian-vector"]
    assert all(row.endswith(" ok") for row in rows)
    assert "rtol=0.0001, atol=1e-05" in legend
    assert "[##########] 6/6 hvp loop" in done.stderr


def _broken(sizes, rng):
    return _demo.Workload("hvp", "broken HVPs", lambda: bg.ones(2) * 2.0, lambda: bg.ones(2))


def test_a_mismatch_exits_non_zero_naming_the_workload(parsed, monkeypatch, capsys):
    monkeypatch.setitem(_demo.WORKLOADS, "hvp", _broken)
    with pytest.raises(SystemExit, match="the batched result differs from the loop's for: broken HVPs$") as exited:
        cli.main(parsed("demo", "--workload=hvp", "--repeats=1"))
    assert isinstance(exited.value.code, str)  # the message goes to stderr and the exit status is 1
    assert capsys.readouterr().out.splitlines()[1].endswith("MISMATCH")


@pytest.mark.parametrize(
    "batched, loop, ok",
    [
        (np.ones(3), np.ones(3), True),
        (np.ones(3), np.ones(3) + 0.5 * _demo.ATOL, True),
        (np.ones(3), np.ones(3) + 2 * (_demo.ATOL + _demo.RTOL), False),
        (np.ones((2, 3)), np.ones((3, 2)), False),
        (np.ones(3), np.array([1.0, np.nan, 1.0]), False),
        (np.zeros((0, 3)), np.zeros((0, 3)), True),
    ],
)
def test_compare_applies_the_stated_tolerance(batched, loop, ok):
    assert _demo.compare(batched, loop)[1] is ok


def test_run_times_both_modes_under_a_progress_bar():
    stream = io.StringIO()
    (outcome,) = _demo.run([_broken(None, None)], repeats=1, stream=stream)
    assert not outcome.ok and outcome.max_diff == 1.0 and outcome.batched_ms > 0 and outcome.loop_ms > 0
    assert stream.getvalue().splitlines() == ["[#####     ] 1/2 hvp batched", "[##########] 2/2 hvp loop"]


def test_bench_without_a_benchmarks_folder_says_how_to_get_one(tmp_path):
    done = command_line("bench", f"--benchmarks_dir={tmp_path / 'absent'}")
    assert done.returncode == 1
    assert "no benchmarks folder at" in done.stderr and "pip install -e '.[bench]'" in done.stderr


def test_bench_with_a_misspelt_flag_names_it():
    done = command_line("bench", "--fulll")
    assert done.returncode == 1
    assert "Unknown command line flag 'fulll'" in done.stderr


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench", "--batch=3"], "`bench` does not take --batch$"),
        (["demo", "--full", "--benchmarks_dir=x"], "`demo` does not take --full, --benchmarks_dir$"),
        (["bnech"], "expected one command, demo or bench; got bnech"),
        ([], "expected one command, demo or bench; got nothing"),
        (["demo", "bench"], "got demo bench"),
    ],
)
def test_usage_errors_say_what_was_expected(parsed, argv, message):
    with pytest.raises(app.UsageError, match=message.replace("(", r"\(")):
        cli.main(parsed(*argv))


@pytest.mark.parametrize("flag", ["--width=0", "--repeats=-1", "--workload=hessian"])
def test_bad_flag_values_are_refused_by_the_flag_parser(parsed, flag):
    with pytest.raises(cli.flags.IllegalFlagValueError, match=flag.split("=")[0][2:]):
        parsed("demo", flag)


def _fake_benchmarks(folder, exit_codes):
    for name, code in zip(_bench.SCRIPTS, exit_codes):
        (folder / name).write_text(f"import sys\nprint('{name} ran with', sys.argv[1:])\nsys.exit({code})\n")
    return folder


@pytest.mark.parametrize("full, flags", [(False, ["--quick"]), (True, [])])
def test_bench_runs_every_script_quick_unless_full(tmp_path, capfd, full, flags):
    folder = _fake_benchmarks(tmp_path, [0, 3, 0, 5] + [0] * (len(_bench.SCRIPTS) - 4))
    assert _bench.run(_bench.locate(folder), full=full, stream=io.StringIO()) == ["batched.py", "func.py"]
    out = capfd.readouterr().out
    for name in _bench.SCRIPTS:
        assert f"== python {' '.join([name, *flags])} ==" in out and f"{name} ran with {flags}" in out


def test_bench_names_missing_scripts_and_a_missing_torch(tmp_path, monkeypatch):
    folder = _fake_benchmarks(tmp_path, [0, 0])
    with pytest.raises(
        _bench.SetupError,
        match=re.escape(
            f"{tmp_path} lacks the benchmark scripts functional.py, func.py, coldstart.py, scale.py, loops.py, "
            "eager.py, sparse.py, curvature.py, persample.py"
        ),
    ):
        _bench.locate(folder)
    _fake_benchmarks(tmp_path, [0] * len(_bench.SCRIPTS))
    real_find_spec = _bench.importlib.util.find_spec
    monkeypatch.setattr(
        _bench.importlib.util, "find_spec", lambda name: None if name == "torch" else real_find_spec(name)
    )
    with pytest.raises(_bench.SetupError, match=r"torch, which is not installed: pip install -e '\.\[bench\]'"):
        _bench.locate(folder)


def test_bench_looks_for_the_benchmarks_next_to_the_package():
    assert _bench.CHECKOUT_BENCHMARKS == pathlib.Path(cli.__file__).resolve().parents[1] / "benchmarks"
