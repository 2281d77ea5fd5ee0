"""Grad modes (no_grad, enable_grad, set_grad_enabled, inference_mode) as context managers and decorators,
nested, against torch 2.13."""

import threading

import pytest

import batched_grad as bg
from batched_grad import _grad_mode
from test_tensor import _restore_modes, assert_like_torch  # noqa: F401

CONTEXTS = [
    "m.is_grad_enabled()",
    "with m.no_grad():\n    r = m.is_grad_enabled()\nr, m.is_grad_enabled()",
    "with m.no_grad():\n    with m.enable_grad():\n        r = m.is_grad_enabled()\n    r2 = m.is_grad_enabled()\n"
    "r, r2, m.is_grad_enabled()",
    "with m.enable_grad(), m.no_grad():\n    r = m.is_grad_enabled()\nr",
    "with m.set_grad_enabled(False):\n    r = m.is_grad_enabled()\nr, m.is_grad_enabled()",
    "with m.no_grad():\n    with m.set_grad_enabled(True):\n        r = m.is_grad_enabled()\n"
    "    r2 = m.is_grad_enabled()\n"
    "r, r2, m.is_grad_enabled()",
    "m.set_grad_enabled(False)\na = m.is_grad_enabled()\nm.set_grad_enabled(True)\na, m.is_grad_enabled()",
    "c = m.set_grad_enabled(False)\nm.is_grad_enabled()",
    "c = m.set_grad_enabled(False)\nm.set_grad_enabled(True)\nwith c:\n    r = m.is_grad_enabled()\nr, "
    "m.is_grad_enabled()",
    "m.set_grad_enabled(1)",
    "m.set_grad_enabled('a')",
    "with m.inference_mode():\n    r = m.is_grad_enabled()\nr, m.is_grad_enabled()",
    "with m.inference_mode(False):\n    r = m.is_grad_enabled()\nr",
    "with m.no_grad():\n    with m.inference_mode(False):\n        r = m.is_grad_enabled()\nr",
    "with m.inference_mode():\n    with m.enable_grad():\n        r = m.is_grad_enabled()\nr",
    "try:\n    with m.no_grad():\n        raise ValueError('inside')\nexcept ValueError:\n    pass\n"
    "m.is_grad_enabled()",
    "c = m.no_grad()\nwith c:\n    r = m.is_grad_enabled()\nwith c:\n    r2 = m.is_grad_enabled()\nr, r2, "
    "m.is_grad_enabled()",
    "c = m.no_grad()\nr = c.__enter__()\nc.__exit__(None, None, None)\nr, m.is_grad_enabled()",
    "r = []\nwith m.no_grad():\n    t = threading.Thread(target=lambda: r.append(m.is_grad_enabled()))\n    t.start()\n"
    "    t.join()\n"
    "r",
]

DECORATORS = [
    "@m.no_grad()\ndef f(a, b=2):\n    'doc'\n    return a + b, m.is_grad_enabled()\nf.__name__, f.__doc__, f(1), "
    "m.is_grad_enabled()",
    "@m.no_grad\ndef f(a, b=2):\n    'doc'\n    return a + b, m.is_grad_enabled()\nf.__name__, f.__doc__, f(1), "
    "m.is_grad_enabled()",
    "@m.enable_grad()\ndef f():\n    return m.is_grad_enabled()\nwith m.no_grad():\n    r = f()\nr, "
    "m.is_grad_enabled()",
    "@m.enable_grad\ndef f():\n    return m.is_grad_enabled()\nm.set_grad_enabled(False)\nr = f()\n"
    "m.set_grad_enabled(True)\nr",
    "@m.set_grad_enabled(False)\ndef f():\n    return m.is_grad_enabled()\nm.is_grad_enabled(), f(), "
    "m.is_grad_enabled()",
    "@m.inference_mode()\ndef f():\n    return m.is_grad_enabled()\nf(), m.is_grad_enabled()",
    "@m.inference_mode\ndef f():\n    return m.is_grad_enabled()\nf(), m.is_grad_enabled()",
    "@m.inference_mode(False)\ndef f():\n    return m.is_grad_enabled()\nwith m.no_grad():\n    r = f()\nr",
    "@m.no_grad()\ndef g():\n    yield m.is_grad_enabled()\n    yield m.is_grad_enabled()\nit = g()\na = next(it)\n"
    "b = m.is_grad_enabled()\nc = next(it)\na, b, c, list(it)",
    "@m.no_grad()\ndef g():\n    x = yield m.is_grad_enabled()\n    yield x, m.is_grad_enabled()\nit = g()\nnext(it)\n"
    "it.send(5)",
    "class C:\n    @m.no_grad()\n    def f(self):\n        return m.is_grad_enabled()\nC().f(), m.is_grad_enabled()",
    "@m.no_grad()\ndef f():\n    raise KeyError('k')\ntry:\n    f()\nexcept KeyError:\n    pass\nm.is_grad_enabled()",
    "@m.no_grad()\ndef f(n):\n    return m.is_grad_enabled() if n == 0 else f(n - 1)\nf(3), m.is_grad_enabled()",
]

RECORDING = [
    "x = m.ones(2, requires_grad=True)\nwith m.no_grad():\n    y = x * 2\ny.requires_grad, y.grad_fn, y.is_leaf",
    "x = m.ones(2, requires_grad=True)\nf = m.no_grad()(lambda: x * 2)\ny = f()\ny.requires_grad, m.is_grad_enabled()",
    "x = m.ones(2, requires_grad=True)\nf = m.enable_grad()(lambda: x * 2)\nwith m.no_grad():\n    y = f()\ny",
    "x = m.ones(2, requires_grad=True)\nwith m.inference_mode():\n    y = x * 2\ny.requires_grad, y.grad_fn",
    "x = m.ones(2, requires_grad=True)\nwith m.set_grad_enabled(False):\n    y = x.exp()\n"
    "with m.set_grad_enabled(True):\n"
    "    z = x.exp()\ny.requires_grad, z.grad_fn.name()",
    "x = m.ones(2, requires_grad=True)\nwith m.no_grad():\n    y = x * 2\nz = y * x\nz.sum().backward()\nx.grad",
    "x = m.ones(2, requires_grad=True)\ny = x * 2\nwith m.no_grad():\n    z = y + 1\nz.requires_grad, y.requires_grad",
    "x = m.ones(2, requires_grad=True)\nwith m.no_grad():\n    x.mul_(3)\nx, x.is_leaf",
]


@pytest.mark.parametrize("code", CONTEXTS + DECORATORS + RECORDING)
def test_grad_mode_like_torch(code):
    assert_like_torch(code.replace("threading.", "__import__('threading')."))


def test_modes_are_thread_local():
    seen = {}

    def worker():
        with bg.no_grad():
            seen["worker"] = bg.is_grad_enabled()
            barrier.wait()
            barrier.wait()

    barrier = threading.Barrier(2)
    t = threading.Thread(target=worker)
    t.start()
    barrier.wait()
    seen["main"] = bg.is_grad_enabled()
    barrier.wait()
    t.join()
    assert seen == {"worker": False, "main": True}


def test_nested_reuse_of_one_instance_restores_the_outer_mode():
    """torch's no_grad keeps one `prev` per instance, so re-entering the same object leaves grad off; ours stacks."""
    c = bg.no_grad()
    with c:
        with c:
            assert not bg.is_grad_enabled()
        assert not bg.is_grad_enabled()
    assert bg.is_grad_enabled()


def test_inference_mode_flag():
    assert not _grad_mode.is_inference_mode_enabled()
    with bg.inference_mode():
        assert _grad_mode.is_inference_mode_enabled() and not bg.is_grad_enabled()
        with bg.inference_mode(False):
            assert not _grad_mode.is_inference_mode_enabled() and bg.is_grad_enabled()
    assert not _grad_mode.is_inference_mode_enabled() and bg.is_grad_enabled()
    with pytest.raises(TypeError, match="inference_mode\\(\\): argument 'mode' \\(position 1\\) must be bool, not str"):
        bg.inference_mode("yes")


@pytest.mark.parametrize("m", [bg, pytest.importorskip("torch")], ids=["bg", "torch"])
def test_decorating_a_class_warns_and_constructs_it_without_grad(m):
    seen = []

    with pytest.warns(FutureWarning, match="Decorating classes is deprecated"):

        @m.no_grad()
        class Probe:
            def __init__(self):
                seen.append(m.is_grad_enabled())

            def method(self):
                seen.append(m.is_grad_enabled())

    Probe().method()
    assert seen == [False, True]  # the constructor runs under the mode, later method calls do not


def test_autograd_grad_mode_module_path():
    torch = pytest.importorskip("torch")
    theirs = pytest.importorskip("torch.autograd.grad_mode")
    import batched_grad.autograd.grad_mode as ours

    for name in ("no_grad", "enable_grad", "set_grad_enabled", "inference_mode"):
        assert getattr(theirs, name) is getattr(torch, name)
        assert getattr(ours, name) is getattr(bg, name)
        assert getattr(bg.autograd.grad_mode, name) is getattr(bg, name)
    x = bg.ones(2, requires_grad=True)
    with bg.autograd.grad_mode.no_grad():
        assert (x * 2).grad_fn is None


def test_torch_c_grad_switch_and_tracing_state_as_torch():
    """torch._C._set_grad_enabled (older code's switch) and _get_tracing_state (code that branches on TorchScript
    tracing) behave as torch's outside a trace."""

    def seen(m):
        m._C._set_grad_enabled(False)
        try:
            off = (m.ones(2, requires_grad=True) * 2).requires_grad, m.is_grad_enabled()
        finally:
            m._C._set_grad_enabled(True)
        return off, m.is_grad_enabled(), m._C._get_tracing_state()

    torch = pytest.importorskip("torch")
    from oracle import raises_like_torch

    assert seen(bg) == seen(torch)
    raises_like_torch(lambda m: m._C._set_grad_enabled(1))
