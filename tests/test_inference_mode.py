"""Inference mode and inference tensors against torch 2.13: which tensors are inference tensors (made in the mode,
views of them, not views of normal tensors made there), what ops inside and outside the mode give, and torch's
refusals outside it (in-place writes, version reads, requires_grad, saving for backward)."""

import threading
import warnings

import pytest
import torch

import batched_grad as bg
from batched_grad import _graph
from test_checkpoint import _keeps_what_it_saved
from test_tensor import _restore_modes, assert_like_torch  # noqa: F401

MADE = "with m.inference_mode():\n    i = m.ones(2, 3)\n    r = m.ones(2, 3, requires_grad=True)\n"
NORMAL = "a = m.ones(2, 3, requires_grad=True).clone()\n"

WHICH_TENSORS = [
    MADE + "i.is_inference(), m.is_inference(r), r.requires_grad, r.is_leaf, m.ones(1).is_inference()",
    MADE + "v = i.view(-1)\nv.is_inference(), v._is_view(), v.requires_grad, r.view(-1).requires_grad",
    MADE + "[t.is_inference() for t in (i[0], i.t(), i.unbind(0)[1], i.detach(), i.data, i.clone(), i * 2)]",
    "with m.inference_mode():\n    i = m.ones(2, 3, requires_grad=True)\n    v = i.view(-1)\n"
    "v.is_inference(), v.requires_grad, v._is_view()",
    NORMAL + "with m.inference_mode():\n    v = a.view(-1)\n    w = v[1:]\n    d = a.detach()\n"
    "v.is_inference(), w.is_inference(), d.is_inference(), v.requires_grad, v._is_view(), w.is_leaf",
    NORMAL + "with m.inference_mode():\n    y = a * a\n    s = a.sum()\n"
    "y.is_inference(), y.requires_grad, y.grad_fn, s.is_inference()",
    NORMAL + "with m.inference_mode():\n    a.add_(2)\n    a.mul_(3)\na.is_inference(), a.requires_grad, V(a)",
    NORMAL + "with m.inference_mode():\n    a.transpose_(0, 1)\n    v = a[0]\n"
    "a.is_inference(), a.shape, v.is_inference(), v.requires_grad, V(a), V(v)",
    "with m.inference_mode():\n    with m.inference_mode(False):\n        x = m.ones(2)\n    y = m.ones(2)\n"
    "x.is_inference(), y.is_inference(), m.is_inference_mode_enabled()",
    "with m.no_grad():\n    x = m.ones(2)\nwith m.inference_mode(mode=False):\n    y = m.ones(2)\n"
    "x.is_inference(), y.is_inference()",
    "m.is_inference(3)",
    "m.is_inference(None)",
]

INSIDE = [
    MADE + "with m.inference_mode():\n    for f in (lambda t: t.add_(1), lambda t: t.t_(), lambda t: t.zero_(),\n"
    "              lambda t: t.copy_(m.ones(3, 2)), lambda t: t.resize_(6), lambda t: t.resize_as_(m.ones(3))):\n"
    "        f(r)\nr, r.is_inference(), r.requires_grad",
    MADE + "with m.inference_mode():\n    i[0] = 5.\n    v = i[1]\n    v.mul_(2)\ni",
    MADE + "with m.inference_mode():\n    m.add(i, 1, out=i)\ni, i.is_inference()",
    NORMAL + "with m.inference_mode():\n    v = a.view(-1)\n    v.add_(2)\nV(a), V(v), v.is_inference(), a",
]

OUTSIDE = [
    MADE + "V(i)",
    MADE + "V(i.view(-1))",
    MADE + "i.add_(1)",
    MADE + "i.zero_()",
    MADE + "i.copy_(m.zeros(2, 3))",
    MADE + "i[0] = 5.",
    MADE + "i.t_()",
    MADE + "i.resize_(6)",
    MADE + "m.mul(m.ones(2, 3), 2, out=i)",
    MADE + "v = i[0]\nv.mul_(2)",
    MADE + "try:\n    i.add_(1)\nexcept RuntimeError:\n    pass\ni",  # written, then refused, as torch's
    MADE + "i.requires_grad_()",
    MADE + "i.requires_grad = True",
    MADE + "i.requires_grad_(False), i.requires_grad",
    MADE + "m.nn.Parameter(i)",
    MADE + "m.nn.Parameter(i, requires_grad=False).is_inference()",
    NORMAL + "with m.inference_mode():\n    p = m.nn.Parameter(m.ones(2))\n    q = m.nn.Parameter(a.detach())\n"
    "p.is_inference(), q.is_inference()",
    MADE + "y = i * i\ny.is_inference(), y.requires_grad, y.is_leaf, y._version",
    MADE + "[(t.requires_grad, t.grad_fn) for t in (r * r, r.exp(), r.sum(), -r, r @ r.t())]",
    MADE + "v = r.view(-1)\nv.is_inference(), v.requires_grad, v._is_view(), v.is_leaf",
    MADE + "s = m.ones(2, 3, requires_grad=True)\ny = r.add(s)\ny.sum().backward()\n"
    "y.is_inference(), y.grad_fn.name(), r.grad, s.grad",
    MADE + "m.cat([r, m.ones(2, 3)]).grad_fn.name()",
    MADE + "s = m.ones(2, 3, requires_grad=True)\nr * s",
    MADE + "s = m.ones(2, 3, requires_grad=True)\ns * i",
    MADE + "s = m.ones(2, 3, requires_grad=True).clone()\ns.mul_(i)",
    MADE + "s = m.ones(2, 3).clone()\ns.mul_(i)\ns, s.is_inference()",
    MADE + "s = m.ones(2, 3, requires_grad=True)\ns.exp() + i",
    MADE + "i.view_as(m.ones(6)).is_inference(), m.ones(6).view_as(i).is_inference()",
    MADE + "c = i.clone()\nc.add_(1)\nc.is_inference(), c",
    MADE + "m.autograd.graph.increment_version(i)\nm.autograd.graph.increment_version([i.view(-1), r])\ni",
]

VIEWS_OF_NORMAL = [
    NORMAL + "with m.inference_mode():\n    v = a.view(-1)\nv.add_(2)",
    NORMAL + "with m.inference_mode():\n    v = a.view(-1)\nv.t_()",
    NORMAL + "with m.inference_mode():\n    v = a.view(-1)\na.add_(2)\nv.grad_fn",
    NORMAL + "with m.inference_mode():\n    v = a.view(-1)\na.t_()\nv.is_leaf",
    NORMAL + "with m.no_grad():\n    v = a.view(-1)\na.add_(2)\nv.grad_fn",
    "a = m.ones(2, 3).clone()\nwith m.inference_mode():\n    v = a.view(-1)\na.add_(2)\nv.grad_fn, v",
    NORMAL + "out = a * a\nwith m.inference_mode():\n    a.add_(2)\nout.backward(m.ones_like(out))",
    NORMAL + "with m.inference_mode():\n    v = a.view(-1)\ny = v * v\ny.requires_grad, y.is_inference()",
]

DECORATION = [
    "f = m.inference_mode(lambda x: (m.is_inference_mode_enabled(), x * x))\nf(m.ones(2))[1].is_inference()",
    "f = m.inference_mode(mode=lambda x: x * x)\nf(m.ones(2)).is_inference()",
    "f = m.inference_mode(mode=False)(lambda x: x * x)\ny = f(m.ones(2, requires_grad=True))\n"
    "y.is_inference(), y.requires_grad",
    "@m.inference_mode()\ndef g():\n    yield m.ones(1)\n    yield m.is_inference_mode_enabled()\n"
    "it = g()\nt = next(it)\nt.is_inference(), m.is_inference_mode_enabled(), next(it)",
    "@m.inference_mode(mode=True)\nclass C:\n    def __init__(self):\n        self.t = m.ones(1)\nC().t.is_inference()",
    "with m.inference_mode():\n    with m.no_grad():\n        x = m.ones(1)\n    with m.enable_grad():\n"
    "        y = m.is_inference_mode_enabled(), m.is_grad_enabled()\nx.is_inference(), y",
]

GRAD_MODE_INSIDE = [  # grad mode can be turned on inside inference mode, which still records nothing
    NORMAL + "with m.inference_mode():\n    with m.enable_grad():\n        g = m.is_grad_enabled()\n"
    "        y, z = a * 2, a.exp()\n        w = a.sum()\ng, y.requires_grad, y.grad_fn, z.requires_grad, "
    "w.is_inference(), m.is_grad_enabled()",
    NORMAL + "with m.inference_mode():\n    with m.set_grad_enabled(True):\n        y = a @ a.t()\n"
    "        e = m.is_grad_enabled()\n    f = m.is_grad_enabled()\ne, f, y.requires_grad, y.is_inference()",
    NORMAL + "with m.no_grad():\n    with m.inference_mode():\n        with m.inference_mode(False):\n"
    "            y = a * 2\n            g = m.is_grad_enabled()\n        h = m.is_grad_enabled()\n"
    "    k = m.is_grad_enabled()\ng, h, k, y.requires_grad, y.grad_fn.name()",
    NORMAL + "@m.enable_grad()\ndef f(t):\n    return t.exp()\nwith m.inference_mode():\n    y = f(a)\n"
    "y.requires_grad, y.is_inference()",
]

TRANSFORMS = [  # torch.func's reverse-mode transforms leave inference mode inside (grad mode on)
    "seen = []\ndef f(r):\n    seen.append((m.is_inference_mode_enabled(), m.is_grad_enabled()))\n"
    "    return (r * r).sum()\nwith m.inference_mode():\n    x = m.ones(2)\n"
    "    g = m.func.grad(f)(x)\n    j = m.func.jacrev(lambda r: r * r)(x)\n    v = m.func.vjp(f, x)[1](m.tensor(1.))\n"
    "    y = m.func.vmap(lambda r: r * 2)(x)\ng, j, v, seen, m.is_inference_mode_enabled(), y.is_inference()",
]


@pytest.mark.parametrize(
    "code", WHICH_TENSORS + INSIDE + OUTSIDE + VIEWS_OF_NORMAL + DECORATION + GRAD_MODE_INSIDE + TRANSFORMS
)
def test_inference_mode_like_torch(code):
    assert_like_torch(code)


def test_custom_function_refuses_to_save_an_inference_tensor():
    for m in (torch, bg):
        with m.inference_mode():
            i = m.ones(3)
        with pytest.raises(RuntimeError, match="^Inference tensors cannot be saved for backward"):
            _keeps_what_it_saved(m, []).apply(m.ones(3, requires_grad=True), i)


def test_tensors_are_made_with_plain_counters_while_no_thread_is_in_inference_mode():
    assert _graph.new_counter is _graph.VersionCounter
    entered, leave = threading.Event(), threading.Event()

    def worker():
        with bg.inference_mode():
            entered.set()
            leave.wait()

    t = threading.Thread(target=worker)
    t.start()
    entered.wait()
    try:
        assert _graph.new_counter is not _graph.VersionCounter
        assert not bg.ones(1).is_inference()  # the mode is the worker's, not this thread's
    finally:
        leave.set()
        t.join()
    assert _graph.new_counter is _graph.VersionCounter


def test_jvp_leaves_inference_mode_inside():
    outcomes = []
    for m in (torch, bg):
        seen = []

        def f(r, m=m, seen=seen):
            seen.append(m.is_inference_mode_enabled())
            return r.sin()

        with warnings.catch_warnings():  # torch's first jvp warns of torch.jit.script while importing
            warnings.simplefilter("ignore")
            with m.inference_mode():
                out = m.func.jvp(f, (m.zeros(2),), (m.ones(2),))
        outcomes.append(([o.tolist() for o in out], seen))
    assert outcomes[0] == outcomes[1] == ([[0.0, 0.0], [1.0, 1.0]], [False])
