"""The persistent compilation cache: a second process loads what a first compiled, the environment variable and
set_compilation_cache choose or turn off the directory, and a broken directory costs one warning, never an error.
Each case runs in fresh processes with a temporary cache directory; XLA compiles are counted from JAX's monitoring
events (a cache hit is reported as a compile event and a hit event)."""

import json
import os
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest

import batched_grad as bg
from batched_grad import _cache

pytestmark = pytest.mark.slow  # fresh processes per case: in CI's second step

torch = pytest.importorskip("torch")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A subprocess's preamble: count XLA compiles and cache hits, record warnings, then import batched_grad.
PREAMBLE = textwrap.dedent("""
    import json, os, warnings
    import jax
    import numpy as np
    compiles, hits = [0], [0]
    def on_duration(name, duration, **kwargs):
        if name.endswith("backend_compile_duration"):
            compiles[0] += 1
    def on_event(name, **kwargs):
        if name == "/jax/compilation_cache/cache_hits":
            hits[0] += 1
    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    warnings.simplefilter("always")
    caught = warnings.catch_warnings(record=True)
    recorded = caught.__enter__()
    import batched_grad as bg

    def mlp_jacobian():
        rng = np.random.default_rng(0)
        w1, w2 = bg.tensor(rng.standard_normal((6, 5))), bg.tensor(rng.standard_normal((5, 3)))
        x = bg.tensor(rng.standard_normal(6))
        return bg.autograd.functional.jacobian(lambda v: bg.tanh(bg.tanh(v @ w1) @ w2), x, vectorize=True)

    def graph_grad():
        rng = np.random.default_rng(1)
        a = bg.tensor(rng.standard_normal((4, 4)), requires_grad=True)
        loss = (bg.sin(a) * a.exp()).sum() + (a @ a).pow(2).mean()
        return bg.autograd.grad(loss, a)[0]

    def report(**values):
        caught.__exit__(None, None, None)
        print(json.dumps(dict(real_compiles=compiles[0] - hits[0], hits=hits[0],
                              warnings=[str(w.message) for w in recorded if "cache" in str(w.message)],
                              **{k: np.asarray(v).tolist() for k, v in values.items()})))
""")


def run(body, cache_dir, prelude="", **environ):
    """Run prelude + PREAMBLE + body in a fresh process with BATCHED_GRAD_CACHE_DIR=cache_dir; its report as a
    dict. The store of executables is off (BATCHED_GRAD_STORE=0), as it would serve what JAX's cache serves here:
    it has tests of its own (test_program_store.py)."""
    env = dict(os.environ, BATCHED_GRAD_CACHE_DIR=cache_dir, PYTHONPATH=REPO, BATCHED_GRAD_STORE="0", **environ)
    script = prelude + PREAMBLE + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "AOT result" not in done.stderr  # XLA's log line for every loaded CPU executable is silenced
    return json.loads(done.stdout.strip().splitlines()[-1])


WORKLOAD = "report(jacobian=mlp_jacobian(), grad=graph_grad())"


def torch_workload():
    rng = np.random.default_rng(0)
    w1, w2, x = (torch.tensor(rng.standard_normal(s)) for s in ((6, 5), (5, 3), 6))
    jacobian = torch.autograd.functional.jacobian(lambda v: torch.tanh(torch.tanh(v @ w1) @ w2), x, vectorize=True)
    a = torch.tensor(np.random.default_rng(1).standard_normal((4, 4)), requires_grad=True)
    loss = (torch.sin(a) * a.exp()).sum() + (a @ a).pow(2).mean()
    return jacobian.numpy(), torch.autograd.grad(loss, a)[0].numpy()


def assert_matches_torch(report):
    jacobian, grad = torch_workload()
    np.testing.assert_allclose(report["jacobian"], jacobian, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(report["grad"], grad, rtol=1e-12, atol=1e-14)


def entries(cache_dir):
    return sorted(os.path.join(d, f) for d, _, files in os.walk(cache_dir) for f in files if f.endswith("-cache"))


def test_a_second_process_compiles_nothing_the_first_compiled(tmp_path):
    cache = str(tmp_path / "cache")
    first = run(WORKLOAD, cache)
    assert first["real_compiles"] > 0 and first["hits"] == 0
    assert len(entries(cache)) >= first["real_compiles"]
    second = run(WORKLOAD, cache)
    assert second["real_compiles"] == 0 and second["hits"] == first["real_compiles"]
    assert first["warnings"] == second["warnings"] == []
    assert_matches_torch(second)


def test_an_empty_variable_turns_the_cache_off(tmp_path):
    report = run("import jax\nassert jax.config.jax_compilation_cache_dir is None\n" + WORKLOAD, "")
    assert report["real_compiles"] > 0 and report["hits"] == 0
    assert_matches_torch(report)


def test_set_compilation_cache_switches_it_at_run_time(tmp_path):
    cache = tmp_path / "chosen"
    body = f"""
        bg.set_compilation_cache({str(cache)!r})
        jacobian = mlp_jacobian()
        jacobian_compiles = compiles[0]
        bg.set_compilation_cache(None)
        assert jax.config.jax_compilation_cache_dir is None
        report(jacobian=jacobian, grad=graph_grad(), jacobian_compiles=jacobian_compiles)
    """
    first = run(body, "")  # the cache is off at import, on for the Jacobian, off again for the gradient
    grad_compiles = first["real_compiles"] - first["jacobian_compiles"]
    assert first["jacobian_compiles"] > 0 and grad_compiles > 0
    assert len(entries(cache)) == first["jacobian_compiles"]
    second = run(f"bg.set_compilation_cache(__import__('pathlib').Path({str(cache)!r}))\n" + WORKLOAD, "")
    assert second["hits"] == first["jacobian_compiles"] and second["real_compiles"] == grad_compiles
    assert_matches_torch(second)


def test_a_file_where_the_directory_should_be_warns_once_and_computes(tmp_path):
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("a file, not a directory")
    for cache in (blocker, blocker / "below"):
        report = run("import jax\nassert jax.config.jax_compilation_cache_dir is None\n" + WORKLOAD, str(cache))
        assert len(report["warnings"]) == 1, report["warnings"]
        assert str(cache) in report["warnings"][0] and "cannot create or write" in report["warnings"][0]
        assert_matches_torch(report)
    assert blocker.read_text() == "a file, not a directory"


def test_corrupt_entries_warn_once_are_compiled_again_and_replaced(tmp_path):
    cache = str(tmp_path / "cache")
    first = run(WORKLOAD, cache)
    for k, entry in enumerate(entries(cache)):
        with open(entry, "wb") as f:
            f.write(b"garbage" if k % 2 else b"")
    with open(os.path.join(cache, "unrelated.bin"), "wb") as f:
        f.write(os.urandom(100))
    second = run(WORKLOAD, cache)
    assert second["hits"] == 0 and second["real_compiles"] == first["real_compiles"]
    assert len(second["warnings"]) == 1 and "corrupt" in second["warnings"][0] and cache in second["warnings"][0]
    assert_matches_torch(second)
    third = run(WORKLOAD, cache)  # the corrupt entries were replaced by good ones
    assert third["real_compiles"] == 0 and third["warnings"] == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes through permissions")
def test_a_directory_without_permissions_warns_once_and_computes(tmp_path):
    cache = tmp_path / "locked"
    cache.mkdir(mode=0o500)
    try:
        report = run(WORKLOAD, str(cache))
    finally:
        cache.chmod(0o700)
    assert len(report["warnings"]) == 1 and str(cache) in report["warnings"][0]
    assert_matches_torch(report)


def test_the_default_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("BATCHED_GRAD_CACHE_DIR", str(tmp_path / "mine"))
    assert _cache.default_directory() == str(tmp_path / "mine")
    monkeypatch.setenv("BATCHED_GRAD_CACHE_DIR", "")
    assert _cache.default_directory() is None
    monkeypatch.delenv("BATCHED_GRAD_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _cache.default_directory() == str(tmp_path / "xdg" / "batched_grad")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _cache.default_directory() == str(tmp_path / "home" / ".cache" / "batched_grad")


def test_a_directory_the_user_gave_jax_is_left_alone(tmp_path):
    own = str(tmp_path / "jax_own")
    body = f"import jax\nassert jax.config.jax_compilation_cache_dir == {own!r}\nreport(grad=graph_grad())"
    report = run(body, str(tmp_path / "x"), JAX_COMPILATION_CACHE_DIR=own)
    assert report["warnings"] == []
    assert not (tmp_path / "x").exists()


def test_set_compilation_cache_checks_its_argument():
    with pytest.raises(
        TypeError,
        match=r"set_compilation_cache\(\): argument 'path' must be a str, an os.PathLike "
        r"or None, not int",
    ):
        bg.set_compilation_cache(3)
    with pytest.raises(TypeError, match="argument 'path' must be a str, an os.PathLike or None, not bytes"):
        bg.set_compilation_cache(b"cache")
    with pytest.raises(ValueError, match="argument 'path' must be a directory path or None, not ''"):
        bg.set_compilation_cache("")


def test_entries_jax_cannot_load_warn_once_in_all_and_are_replaced(tmp_path):
    cache = str(tmp_path / "cache")
    first = run(WORKLOAD, cache)
    damaged = entries(cache)
    assert len(damaged) > 1
    for entry in damaged:  # a payload JAX cannot load, under a checksum that holds
        payload = b"not an executable"
        with open(entry, "wb") as f:
            f.write(_cache._MAGIC + zlib.crc32(payload).to_bytes(4, "big") + payload)
    second = run(WORKLOAD, cache)
    assert second["hits"] == 0 and second["real_compiles"] == first["real_compiles"]
    assert len(second["warnings"]) == 1 and "cannot be loaded" in second["warnings"][0], second["warnings"]
    assert_matches_torch(second)
    third = run(WORKLOAD, cache)
    assert third["real_compiles"] == 0 and third["warnings"] == []


def test_another_process_probing_the_directory_at_once_leaves_it_on(tmp_path):
    """Processes started together (a job array, pytest-xdist) probe a shared directory at once: each probe is a file
    of its own, so another's, present at that moment (here one that stays, and that no file can replace), changes
    nothing."""
    cache = tmp_path / "shared"
    (cache / _cache.host_kind() / ".probe").mkdir(parents=True)
    first = run(WORKLOAD, str(cache))
    second = run(WORKLOAD, str(cache))
    assert first["warnings"] == second["warnings"] == [] and first["real_compiles"] > 0
    assert second["real_compiles"] == 0 and second["hits"] == first["real_compiles"]


# a file system mounted read-only: making a file in it fails
READ_ONLY = """
import errno, tempfile
def read_only_file_system(*args, **kwargs):
    raise OSError(errno.EROFS, "Read-only file system")
tempfile.mkstemp = read_only_file_system
"""


def test_a_prebuilt_cache_on_a_read_only_file_system_is_read(tmp_path):
    cache = str(tmp_path / "prebuilt")
    first = run(WORKLOAD, cache)
    built = [(entry, os.path.getmtime(entry)) for entry in entries(cache)]
    second = run(WORKLOAD, cache, prelude=READ_ONLY)
    assert len(second["warnings"]) == 1 and "its entries are read" in second["warnings"][0], second["warnings"]
    assert second["real_compiles"] == 0 and second["hits"] == first["real_compiles"]
    assert_matches_torch(second)
    assert [(entry, os.path.getmtime(entry)) for entry in entries(cache)] == built
