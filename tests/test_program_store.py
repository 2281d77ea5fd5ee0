"""The store of serialized executables (_store.py): a program compiled once is loaded later without being traced,
lowered or compiled, under a key that names what it computes in every process (_names.py) and the software and
machine it was compiled for; an entry that is corrupt, of another program or of another version is never used.
Loads and compiles are counted, never timed."""

import functools
import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _lazy, _names, _store

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def store(program_store):
    return program_store


def _op_of(fn, *args):
    """The Op and static params a public function records (read off its node)."""
    x = bg.tensor(np.ones(3), requires_grad=True)
    sig = fn(x, *args).grad_fn.sig
    return sig.op, sig.static


def _new_kernel(fn, *args):
    """A kernel of `fn`'s op as _lazy.kernel makes it, as a new object: no executable of its own in memory."""
    return _lazy.kernel.__wrapped__(*_op_of(fn, *args))


def _entries(folder):
    return sorted(os.path.join(d, f) for d, _, files in os.walk(folder) for f in files if f.endswith(".exe"))


def _counted(kernel, x):
    """(result, traces, loads) of one call (in JAX's 64-bit mode, as the engine calls kernels)."""
    traces, loads = bg.compile_count(), _store.counts()["loaded"]
    with jax.enable_x64(True):
        out = np.asarray(kernel(x))
    return out, bg.compile_count() - traces, _store.counts()["loaded"] - loads


X = np.linspace(-2.0, 2.0, 7)


def test_a_kernel_made_anew_loads_its_executable_without_tracing(store):
    first, traces, loads = _counted(_new_kernel(bg.tanh), X)
    assert (traces, loads) == (1, 0)
    _store.flush()
    assert len(_entries(store)) == 1
    kernel = _new_kernel(bg.tanh)
    again, traces, loads = _counted(kernel, X)
    assert (traces, loads) == (0, 1) and np.array_equal(again, first)
    assert _counted(kernel, X)[1:] == (0, 0)  # its later calls run the loaded executable
    _, traces, loads = _counted(kernel, X[:4])  # other avals: another program, compiled
    assert (traces, loads) == (1, 0)
    np.testing.assert_allclose(first, torch.tanh(torch.tensor(X)).numpy(), rtol=1e-15)


def test_a_kernel_staged_into_an_outer_trace_does_not_look_the_store_up(store):
    _counted(_new_kernel(bg.tan), X)
    _store.flush()
    kernel, before = _new_kernel(bg.tan), _store.counts()
    with jax.enable_x64(True):
        staged = np.asarray(jax.jit(lambda a: kernel(a) * 2)(X))
    assert _store.counts() == before  # neither loaded nor looked up: its executable would not run
    np.testing.assert_allclose(staged, 2 * np.tan(X), rtol=1e-14)
    assert _counted(_new_kernel(bg.tan), X)[1:] == (0, 1)  # called at the top level, it is loaded


def test_a_kernel_with_a_loaded_executable_is_traced_inside_an_outer_trace(store):
    # the loaded executable serves concrete calls only: a tracer of the same shape is traced into its trace
    _counted(_new_kernel(bg.sin), X)
    _store.flush()
    kernel = _new_kernel(bg.sin)
    assert _counted(kernel, X)[1:] == (0, 1)
    with jax.enable_x64(True):
        mapped = np.asarray(jax.vmap(kernel)(np.stack([X, 2 * X])))
    np.testing.assert_allclose(mapped, np.sin(np.stack([X, 2 * X])), rtol=1e-14)


def test_a_corrupt_entry_warns_once_is_compiled_again_and_replaced(store):
    expected, _, _ = _counted(_new_kernel(bg.sin), X)
    _store.flush()
    for entry in _entries(store):
        with open(entry, "r+b") as f:
            f.seek(60)
            f.write(b"garbage")
    with pytest.warns(UserWarning, match="is corrupt"):
        out, traces, loads = _counted(_new_kernel(bg.sin), X)
    assert (traces, loads) == (1, 0) and np.array_equal(out, expected)
    _store.flush()
    out, traces, loads = _counted(_new_kernel(bg.sin), X)  # the entry was written again
    assert (traces, loads) == (0, 1) and np.array_equal(out, expected)


def test_an_entry_of_another_program_is_never_used(store):
    _counted(_new_kernel(bg.cos), X)
    _store.flush()
    (cos_entry,) = _entries(store)
    expected, _, _ = _counted(_new_kernel(bg.exp), X)
    _store.flush()
    (exp_entry,) = [e for e in _entries(store) if e != cos_entry]
    with open(cos_entry, "rb") as f:
        cos_bytes = f.read()
    with open(exp_entry, "wb") as f:  # cos's executable where exp's is looked up
        f.write(cos_bytes)
    with pytest.warns(UserWarning, match="was written for another program, version or machine"):
        out, traces, loads = _counted(_new_kernel(bg.exp), X)
    assert (traces, loads) == (1, 0) and np.array_equal(out, expected)
    np.testing.assert_allclose(out, np.exp(X), rtol=1e-15)


def test_an_entry_of_another_version_is_never_used(store, monkeypatch):
    expected, _, _ = _counted(_new_kernel(bg.sinh), X)
    _store.flush()
    (entry,) = _entries(store)
    environment = _store._environment()
    assert f"batched_grad {bg.__version__} " in environment
    monkeypatch.setattr(_store._state, "environment", environment.replace(bg.__version__, "0.0.0-another"))
    out, traces, loads = _counted(_new_kernel(bg.sinh), X)  # another key: looked up elsewhere, compiled
    assert (traces, loads) == (1, 0) and np.array_equal(out, expected)
    _store.flush()
    (other,) = [e for e in _entries(store) if e != entry]
    with open(entry, "rb") as f:
        old = f.read()
    with open(other, "wb") as f:  # the old version's entry where the new one's is looked up
        f.write(old)
    with pytest.warns(UserWarning, match="was written for another program, version or machine"):
        out, traces, loads = _counted(_new_kernel(bg.sinh), X)
    assert (traces, loads) == (1, 0) and np.array_equal(out, expected)


def test_the_key_names_the_software_the_machine_and_the_program():
    import jaxlib

    text = _store.key_text("a program", {"donate_argnums": 0}, "PyTreeDef((*,))", [bg.tensor(X).jax().aval])
    for part in (
        f"jax {jax.__version__} jaxlib {jaxlib.__version__} numpy {np.__version__}",
        f"batched_grad {bg.__version__} sources ",
        f"backend {jax.devices()[0].platform} ",
        jax.devices()[0].device_kind,
        "XLA_FLAGS ",
        "jax_default_matmul_precision",
        "program a program",
        "options [('donate_argnums', 0)]",
        "arguments PyTreeDef((*,)) float64[7]",
        "x64 ",
    ):
        assert part in text, part


def test_names_tell_programs_apart_and_refuse_the_users_code():
    tanh, sin = _op_of(bg.tanh), _op_of(bg.sin)
    assert _names.describe(("kernel", *tanh)) == _names.describe(("kernel", *_op_of(bg.tanh)))
    assert _names.describe(("kernel", *tanh)) != _names.describe(("kernel", *sin))
    assert _names.describe(1.0) != _names.describe(1) != _names.describe(True)
    assert _names.describe(-0.0) != _names.describe(0.0)
    assert _names.describe(np.float32(1.5)) != _names.describe(np.float64(1.5))
    assert _names.describe(lambda x: x) is None  # a function of this module, which may change under its name
    assert _names.describe(object()) is None


def test_a_program_in_a_process_without_a_store_is_compiled(store, monkeypatch):
    monkeypatch.setenv(_store.ENV_VAR, "0")
    _store.use(str(store))
    assert not _store.active()
    _, traces, loads = _counted(_new_kernel(bg.cosh), X)
    _store.flush()
    assert (traces, loads) == (1, 0) and _entries(store) == []


def test_set_compilation_cache_moves_the_store_and_an_unusable_directory_turns_it_off(program_store, tmp_path):
    cache_dir = jax.config.jax_compilation_cache_dir  # the suite's, set back after
    blocker = tmp_path / "a file"
    blocker.write_text("not a directory")
    try:
        bg.set_compilation_cache(tmp_path / "elsewhere")
        assert _store._state.directory.startswith(str(tmp_path / "elsewhere" / "programs"))
        with pytest.warns(UserWarning, match="cannot create or write"):
            bg.set_compilation_cache(blocker)
        assert not _store.active()
        bg.set_compilation_cache(None)
        assert not _store.active()
    finally:
        bg.set_compilation_cache(cache_dir)


# ---- fresh processes -----------------------------------------------------------------------------------------------
WORKLOAD = textwrap.dedent("""
    import json, sys
    import jax
    import numpy as np
    events = {"traces": 0, "lowerings": 0, "compiles": 0}
    def on_duration(name, duration, **kwargs):
        events["traces"] += name.endswith("jaxpr_trace_duration")
        events["lowerings"] += name.endswith("jaxpr_to_mlir_module_duration")
        events["compiles"] += name.endswith("backend_compile_duration")
    jax.monitoring.register_event_duration_secs_listener(on_duration)
    import batched_grad as bg
    from batched_grad import _store
    rng = np.random.default_rng(0)
    w = bg.tensor(rng.standard_normal((5, 4)) / 2)
    x0 = rng.standard_normal(4)
    energy = lambda x: (bg.tanh(w @ x) ** 2).sum()
    ours = bg.compile_count()
    # op by op (no structure repeats enough to pay for a program): host forms derived from jaxprs, region kernels
    first = bg.autograd.functional.hessian(energy, bg.tensor(x0))
    bg.set_fuse_after(0)  # every structure compiled at its first sighting: programs, not only kernels
    hessian = bg.autograd.functional.hessian(energy, bg.tensor(x0), vectorize=True)
    jacobian = bg.autograd.functional.jacobian(lambda x: bg.tanh(w @ x), bg.tensor(x0), vectorize=True)
    ours = bg.compile_count() - ours
    _store.flush()
    print(json.dumps(dict(ours=ours, **events, **_store.counts(), first=first.numpy().tolist(),
                          hessian=hessian.numpy().tolist(), jacobian=jacobian.numpy().tolist())))
""")


def _process(cache, **environ):
    env = dict(os.environ, BATCHED_GRAD_CACHE_DIR=str(cache), PYTHONPATH=REPO, **environ)
    env.pop("BATCHED_GRAD_FUSE_AFTER", None)  # the defaults: the cost model, the store on
    env.pop("BATCHED_GRAD_STORE", None)
    done = subprocess.run([sys.executable, "-c", WORKLOAD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "AOT result" not in done.stderr  # XLA's log line for every loaded CPU executable is silenced
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_second_process_traces_lowers_and_compiles_nothing(tmp_path):
    first = _process(tmp_path, PYTHONHASHSEED="1")
    assert first["ours"] > 0 and first["traces"] > 0 and first["saved"] >= first["compiles"] > 0
    assert first["loaded"] == first["remembered"] == 0
    second = _process(tmp_path, PYTHONHASHSEED="2")  # another hash seed: the names must not depend on it
    assert (second["ours"], second["lowerings"], second["compiles"]) == (0, 0, 0), second
    assert second["loaded"] > 0 and second["remembered"] > 0 and second["rejected"] == 0
    # JAX reports a trace for each executable loaded: the store ends it at the function's first line
    assert second["traces"] == second["loaded"]
    for result in ("first", "hessian", "jacobian"):  # the same bits
        assert second[result] == first[result]
    rng = np.random.default_rng(0)  # the workload's data, drawn in its order
    w = torch.tensor(rng.standard_normal((5, 4)) / 2)
    x0 = torch.tensor(rng.standard_normal(4))
    hessian = torch.autograd.functional.hessian(lambda x: (torch.tanh(w @ x) ** 2).sum(), x0)
    jacobian = torch.autograd.functional.jacobian(lambda x: torch.tanh(w @ x), x0, vectorize=True)
    for result in ("first", "hessian"):
        np.testing.assert_allclose(second[result], hessian.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(second["jacobian"], jacobian.numpy(), rtol=1e-12, atol=1e-14)


NAMES = textwrap.dedent("""
    import gc, json, sys
    import batched_grad as bg
    for module in sys.argv[1:]:
        __import__(module)
    from batched_grad import _names
    from batched_grad._ops._core import Op
    print(json.dumps(sorted(_names.describe(o) or "UNNAMED " + o.name for o in gc.get_objects() if type(o) is Op)))
""")


@pytest.mark.slow
def test_every_op_has_the_same_name_in_every_process():
    """Each Op's name, in two processes with other hash seeds that import the submodules in other orders."""
    modules = ["batched_grad.nn.functional", "batched_grad.linalg", "batched_grad.fft", "batched_grad.special"]
    texts = []
    for seed, order in (("3", modules), ("4", modules[::-1])):
        env = dict(os.environ, PYTHONPATH=REPO, PYTHONHASHSEED=seed)
        done = subprocess.run(
            [sys.executable, "-c", NAMES, *order], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        texts.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert texts[0] == texts[1]
    assert not [t for t in texts[0] if t.startswith("UNNAMED")]


def test_a_host_form_traced_once_is_found_in_the_store_without_a_trace(store, monkeypatch):
    from batched_grad import _numpy_eval

    traced = []
    real = _numpy_eval._trace
    monkeypatch.setattr(_numpy_eval, "_trace", lambda *args: traced.append(args) or real(*args))

    def grad():
        x = bg.tensor(np.linspace(-1.0, 2.0, 9), requires_grad=True)
        return bg.autograd.grad(bg.special.log_ndtr(x).sum(), x)[0].numpy()

    _numpy_eval.clear()  # what earlier tests traced (with the store off) is traced again, and kept
    monkeypatch.setattr(_lazy, "_signatures", {})
    first = grad()
    assert traced
    _store.flush()
    _numpy_eval.clear()  # forget the traced jaxprs: a later process's state
    monkeypatch.setattr(_lazy, "_signatures", {})
    traced.clear()
    remembered = _store.counts()["remembered"]
    again = grad()
    assert traced == [] and _store.counts()["remembered"] > remembered
    assert np.array_equal(again, first)
    t = torch.tensor(np.linspace(-1.0, 2.0, 9), requires_grad=True)
    expected = torch.autograd.grad(torch.special.log_ndtr(t).sum(), t)[0].numpy()
    np.testing.assert_allclose(first, expected, rtol=1e-10)


def test_a_corrupt_value_is_computed_again(store):
    calls = []
    name = ("a value of this test", 1.5)

    def compute():
        calls.append(1)
        return (1, 2, 3)

    assert _store.remembered("test value", name, compute) == (1, 2, 3) and len(calls) == 1
    _store.flush()
    assert _store.remembered("test value", name, compute) == (1, 2, 3) and len(calls) == 1
    (entry,) = [os.path.join(d, f) for d, _, fs in os.walk(store) for f in fs if f.endswith(".val")]
    with open(entry, "r+b") as f:
        f.seek(40)
        f.write(b"damage")
    with pytest.warns(UserWarning, match="is corrupt"):
        assert _store.remembered("test value", name, compute) == (1, 2, 3)
    assert len(calls) == 2
    assert _store.remembered("test value", lambda: None, compute) == (1, 2, 3)  # no stable name: computed
    assert len(calls) == 3


def test_functools_partial_and_closures_are_named_by_what_they_hold():
    make = functools.partial
    assert _names.describe(make(np.add, 1)) != _names.describe(make(np.add, 2))
    tanh, _ = _op_of(bg.tanh)
    assert _names.describe(tanh) is not None and "op:tanh" in _names.describe(tanh)


LIBRARY_CALLS = textwrap.dedent("""
    import json
    import batched_grad as bg
    from batched_grad import _store
    a = bg.tensor([[2.0, 0.0, 0.0], [0.5, 1.5, 0.0], [0.1, -0.3, 1.2]])
    b = bg.tensor([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]])
    mvn = bg.distributions.MultivariateNormal(bg.zeros(3), scale_tril=a)
    results = [mvn.log_prob(b.T), bg.linalg.solve_triangular(a, b, upper=False), bg.linalg.cholesky(a @ a.T),
               bg.fft.rfft(b[:, 0]).abs(), bg.linalg.inv(a)]
    _store.flush()
    print(json.dumps(dict(**_store.counts(), results=[r.numpy().tolist() for r in results])))
""")


def test_a_program_calling_into_a_library_is_not_kept(tmp_path):
    """LAPACK's and the FFT's entry points are registered with XLA while a program calling them is lowered: an
    executable of such a program loaded by a process that lowered nothing would call an unregistered target (a
    segmentation fault). Such programs are compiled in each process instead."""
    env = dict(os.environ, BATCHED_GRAD_CACHE_DIR=str(tmp_path), PYTHONPATH=REPO)
    env.pop("BATCHED_GRAD_STORE", None)
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", LIBRARY_CALLS], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert runs[0]["not kept"] > 0 and runs[1]["results"] == runs[0]["results"]
