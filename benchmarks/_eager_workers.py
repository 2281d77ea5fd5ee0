"""The fresh processes of benchmarks/eager.py, each started as `python -c` with this folder on sys.path: a first-calls
workload, or one ported program of tests/ported, run once with one library. Each prints one RECORD line (JSON).
Nothing here imports a library at module level: a first-calls process imports only its own."""

import importlib
import inspect
import json
import pathlib
import sys
import tempfile
import time
import warnings

import numpy as np

RECORD = "RECORD "
FIRST_CALLS = ("hessian", "10 HVPs", "jacobian")
PORTED_DIR = pathlib.Path(__file__).resolve().parents[1] / "tests" / "ported"


def import_library(name):
    """(the library module, a function waiting for a tensor's value as NumPy, its compile count)."""
    if name == "torch":
        import torch

        torch.set_num_threads(1)
        return torch, lambda t: t.detach().numpy(), lambda: 0
    import batched_grad as bg
    import batched_grad.autograd.functional  # noqa: F401 - bg.autograd.functional

    return bg, lambda t: t.detach().numpy(), bg.compile_count


def first_call_code(lib, workload):
    """A zero-argument callable running one first-calls workload on a small function of a 32-vector."""
    rng = np.random.default_rng(0)
    w = lib.tensor((rng.standard_normal((16, 32)) / np.sqrt(32)).astype(np.float32))
    x0 = rng.standard_normal(32).astype(np.float32)
    vs = lib.tensor(rng.standard_normal((10, 32)).astype(np.float32))

    def energy(x):
        return (lib.tanh(w @ x) ** 2).sum()

    if workload == "hessian":
        return lambda: lib.autograd.functional.hessian(energy, lib.tensor(x0))
    if workload == "jacobian":
        return lambda: lib.autograd.functional.jacobian(lambda x: lib.tanh(w @ x), lib.tensor(x0))

    def hvps():
        x = lib.tensor(x0, requires_grad=True)
        (g,) = lib.autograd.grad(energy(x), x, create_graph=True)
        return lib.stack([lib.autograd.grad(g, x, v, retain_graph=True)[0] for v in vs])

    return hvps


def first_calls(library, workload, result):
    """Time one first call in this fresh process (import excluded); save its result to `result` (.npy)."""
    lib, numpy_of, compile_count = import_library(library)
    fn = first_call_code(lib, workload)
    compiles, start = compile_count(), time.perf_counter()
    out = numpy_of(fn())
    seconds = time.perf_counter() - start
    np.save(result, out)
    print(RECORD + json.dumps({"seconds": seconds, "compiles": compile_count() - compiles}), flush=True)


def ported_programs():
    """The module names of the ported programs (test_*.py of tests/ported), sorted; empty outside a checkout."""
    return sorted(p.stem for p in PORTED_DIR.glob("test_*.py")) if PORTED_DIR.is_dir() else []


def fixture_value(module, name, folder):
    """A test function's argument: pytest's tmp_path, or the module's own fixture function, called."""
    if name == "tmp_path":
        return pathlib.Path(tempfile.mkdtemp(dir=folder))
    fixture = inspect.unwrap(getattr(module, name))
    return fixture(*[fixture_value(module, arg, folder) for arg in inspect.signature(fixture).parameters])


def ported(name, library):
    """Run the tests of one ported program with its run_both replaced by one run of the program with `library`;
    prints the seconds of the import of the program's module and of the program's run(s)."""
    start = time.perf_counter()
    warnings.simplefilter("ignore")
    sys.path.insert(0, str(PORTED_DIR.parent))
    module = importlib.import_module(f"ported.{name}")
    harness = importlib.import_module("ported._harness")
    lib = importlib.import_module("torch" if library == "torch" else "batched_grad")
    imported, runs = time.perf_counter(), []

    def run_once(program, *inputs, tolerance=None):
        t0 = time.perf_counter()
        out = program(*harness.library_modules(lib), *inputs)
        materialize(out)
        runs.append(time.perf_counter() - t0)
        return out, out

    module.run_both = run_once
    with tempfile.TemporaryDirectory(prefix="eager-ported-") as folder:
        for test_name, test in inspect.getmembers(module, inspect.isfunction):
            if test_name.startswith("test_"):
                test(*[fixture_value(module, arg, folder) for arg in inspect.signature(test).parameters])
    record = {"import_s": imported - start, "run_s": sum(runs), "programs": len(runs)}
    print(RECORD + json.dumps(record), flush=True)


def materialize(out):
    """Read every tensor of a program's result (a tree of dicts, lists and tensors) as NumPy."""
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        for o in out:
            materialize(o)
    elif hasattr(out, "detach"):
        out.detach().numpy()
