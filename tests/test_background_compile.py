"""A structure's fused program compiles in a background thread while per-op kernels compute its calls
(bg.set_background_compile): every call gives torch's values whichever tier computes it, the program compiles once,
and once it is ready the structure runs as that one program."""

import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _compiled, _lazy


@pytest.fixture
def background(monkeypatch):
    monkeypatch.setattr(_compiled, "_background", [True])
    _lazy._seen.clear()


def _jacobian(m, x_values, params):
    x = m.tensor(x_values, requires_grad=True)
    h = x
    for w in params[:-1]:
        h = m.tanh(h @ m.tensor(w))
    y = h @ m.tensor(params[-1])
    return m.autograd.grad(y, x, m.eye(y.shape[0], dtype=y.dtype), is_grads_batched=True)[0]


def test_every_call_gives_torchs_values_and_the_program_compiles_once(background, kernel_calls):
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((6, 6)) / 3 for _ in range(3)] + [rng.standard_normal((6, 4))]
    for call in range(12):
        x = rng.standard_normal(6)
        np.testing.assert_allclose(
            _jacobian(bg, x, params).numpy(), _jacobian(torch, x, params).numpy(), rtol=1e-12, atol=1e-12
        )
        if call == _lazy.FUSE_AFTER:  # the structure's third sighting started its compile: wait for it once
            bg.wait_for_compiles()
            compiles = bg.compile_count()
    assert bg.compile_count() == compiles  # nothing compiled after the background compile
    del kernel_calls[:]
    _jacobian(bg, rng.standard_normal(6), params).numpy()
    assert kernel_calls == []  # one fused program


def _chain(m, values):
    x = m.tensor(values, dtype=m.float64, requires_grad=True)
    h = x
    for _ in range(3):  # each tanh's backward reads its result, which the deferred calls before it compute
        h = m.tanh(h * 1.5 + 0.1)
    return m.autograd.grad(h.sum(), x)[0]


def test_a_call_does_not_wait_for_its_programs_compile(background, monkeypatch):
    compiling = threading.Event()
    real = _compiled.Program._compile

    def held_back(program, args):  # the compile starts only once the call that started it has returned
        compiling.wait(timeout=120)
        real(program, args)

    monkeypatch.setattr(_compiled.Program, "_compile", held_back)
    values = [0.5, -1.0, 2.0]
    for _ in range(_lazy.FUSE_AFTER):
        _chain(bg, values)
    started = bg.compile_count()
    g = _chain(bg, values)  # the third sighting starts the compile and computes with per-op kernels meanwhile
    np.testing.assert_allclose(g.numpy(), _chain(torch, values).numpy(), rtol=1e-14)
    assert bg.compile_count() == started
    compiling.set()
    bg.wait_for_compiles()
    assert bg.compile_count() == started + 1  # the backward's program, not also the forward it computes alone
    np.testing.assert_allclose(_chain(bg, values).numpy(), g.numpy(), rtol=1e-14)


@pytest.mark.slow
def test_a_process_may_exit_while_a_program_compiles():
    script = textwrap.dedent("""
        import batched_grad as bg
        bg.set_background_compile(True)
        x = bg.randn(64, requires_grad=True, dtype=bg.float64)
        for _ in range(3):
            y = x
            for _ in range(40):
                y = bg.tanh(y) * 1.5 + y.sin()
            bg.autograd.grad(y.sum(), x)
        print("done")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"


# a chain of LAYERS layers whose batched Jacobian's third call starts a compile of a few seconds, interrupted by
# Ctrl-C (SIGINT from a thread) while wait_for_compiles() waits for it; the script says whether a compile was still
# running then (on a loaded machine the per-op third call can outlast it)
_INTERRUPTED_WAIT = """
import os, signal, threading, time
import batched_grad as bg
from batched_grad import _compiled
bg.set_background_compile(True)
bg.set_compilation_cache(None)
W = bg.randn(12, 12, dtype=bg.float64) / 4
x = bg.randn(12, requires_grad=True, dtype=bg.float64)
for _ in range(3):
    h = x
    for _ in range(LAYERS):
        h = bg.tanh(W @ h) + 0.1 * h
    bg.autograd.grad(h, x, bg.eye(12, dtype=bg.float64), is_grads_batched=True)


def interrupt():  # Ctrl-C while wait_for_compiles() waits, if a compile is still running then
    time.sleep(0.05)
    running = bool(_compiled._compiling)
    print("compiling" if running else "idle", flush=True)
    if running:
        os.kill(os.getpid(), signal.SIGINT)


threading.Thread(target=interrupt).start()
"""


_WAITS = {
    "caught": "try:\n    bg.wait_for_compiles()\nexcept KeyboardInterrupt:\n    print('interrupted')\n"
    "bg.wait_for_compiles()",
    "not-caught": "bg.wait_for_compiles()",
}


@pytest.mark.slow
@pytest.mark.parametrize("wait", _WAITS)
def test_ctrl_c_while_waiting_for_compiles_leaves_a_clean_exit(wait):
    for layers in (60, 240):  # a longer chain where the compile had finished before the interrupt came
        script = _INTERRUPTED_WAIT.replace("LAYERS", str(layers)) + _WAITS[wait]
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        if result.stdout.startswith("compiling") and result.returncode != 0 or "interrupted" in result.stdout:
            break
    assert "terminate called" not in result.stderr and "FATAL" not in result.stderr, result.stderr[-2000:]
    if wait == "caught":
        assert result.returncode == 0 and result.stdout.split() == ["compiling", "interrupted"], result.stderr[-2000:]
    else:  # Python's exit for an uncaught KeyboardInterrupt: killed by SIGINT
        assert result.returncode == -signal.SIGINT and "KeyboardInterrupt" in result.stderr, result.stderr[-2000:]


def test_set_background_compile_takes_a_bool():
    with pytest.raises(TypeError, match="argument 'enabled' must be a bool, not int"):
        bg.set_background_compile(1)
