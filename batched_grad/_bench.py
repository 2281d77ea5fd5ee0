"""The benchmark suite: the scripts in benchmarks/ of a source checkout, each run by this interpreter in its own
process, quick runs unless `full`. The scripts are not part of the installed package."""

import importlib.util
import pathlib
import subprocess
import sys

from ._demo import Progress

SCRIPTS = (
    "overhead.py",
    "batched.py",
    "functional.py",
    "func.py",
    "coldstart.py",
    "scale.py",
    "loops.py",
    "eager.py",
    "sparse.py",
    "curvature.py",
    "persample.py",
    "functional_calls.py",
)
INSTALL = "pip install -e '.[bench]'"
CHECKOUT_BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"  # with an editable install


class SetupError(Exception):
    """The benchmarks cannot run: their folder, a script, or torch (their peer) is missing."""


def locate(directory=None):
    """The benchmarks folder (`directory`, or benchmarks/ of the source checkout), after checking that it holds
    every script of SCRIPTS and that torch is installed."""
    folder = pathlib.Path(directory) if directory is not None else CHECKOUT_BENCHMARKS
    if not folder.is_dir():
        raise SetupError(
            f"no benchmarks folder at {folder}: the benchmarks ship with the source repository, not "
            f"the package; run `bench` from a clone installed with {INSTALL}, or pass "
            f"--benchmarks_dir"
        )
    missing = [name for name in SCRIPTS if not (folder / name).is_file()]
    if missing:
        raise SetupError(f"{folder} lacks the benchmark scripts {', '.join(missing)}")
    if importlib.util.find_spec("torch") is None:
        raise SetupError(f"the benchmarks compare against torch, which is not installed: {INSTALL}")
    return folder


def run(folder, full=False, stream=None):
    """Run every script of SCRIPTS in `folder`, their tables going to stdout, with a progress bar on `stream`
    (stderr); the names of the scripts that failed."""
    failed = []
    with Progress(len(SCRIPTS), stream) as bar:
        for name in SCRIPTS:
            command = [sys.executable, name] + ([] if full else ["--quick"])
            bar.step(name)
            print(f"\n== {' '.join(['python', *command[1:]])} ==", flush=True)
            if subprocess.run(command, cwd=folder).returncode != 0:
                failed.append(name)
    return failed
