"""Threads: recording, deferred evaluation, .grad accumulation and the fallback-warning switch are safe to use from
several threads at once, as torch's autograd is."""

import contextlib
import sys
import threading
import time

import numpy as np
import torch

import batched_grad as bg
import vmap
from batched_grad import _graph, _lazy


def run_together(work, n_threads):
    """Run work(i) in `n_threads` threads that start at once; re-raise the first error any of them hit."""
    start, errors = threading.Barrier(n_threads), []

    def run(i):
        try:
            start.wait()
            work(i)
        except BaseException as error:  # handed to the main thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


@contextlib.contextmanager
def switch_interval(seconds):
    """Make the interpreter switch threads every `seconds` (races show up far more often), then restore it."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def test_backward_from_four_threads_into_one_leaf_loses_nothing():
    x = bg.ones(3, requires_grad=True)

    def work(_):
        for _ in range(500):
            (x * 1).sum().backward()

    run_together(work, 4)
    np.testing.assert_array_equal(x.grad.numpy(), [2000.0] * 3)


def test_retained_grads_of_one_shared_graph_from_four_threads_lose_nothing():
    x = bg.ones(3, requires_grad=True)
    h = x * 2
    h.retain_grad()
    out = (h * 3).sum()

    def work(_):
        for _ in range(100):
            out.backward(retain_graph=True)

    run_together(work, 4)
    np.testing.assert_array_equal(h.grad.numpy(), [1200.0] * 3)
    np.testing.assert_array_equal(x.grad.numpy(), [2400.0] * 3)


def _chain(m, x, depth):
    """A chain of ops; its values and the gradient are well conditioned (the per-node and fused tiers agree)."""
    hs, h = [], x
    for _ in range(depth):
        h = (h * 0.5).sin() * 0.5 + x
        hs.append(h)
    return hs


def test_threads_reading_one_deferred_graph_get_the_right_values():
    """Each trial records a fresh graph without computing it; four threads then read its values and take its gradient
    at once (the first trials run node by node, the later ones as one fused program)."""
    depth, values = 4, [0.3, -1.2, 2.0]
    t_x = torch.tensor(values, requires_grad=True)
    t_hs = _chain(torch, t_x, depth)
    (expected,) = torch.autograd.grad(t_hs[-1].sum(), t_x)
    middle = [h.detach().numpy() for h in t_hs[2:4]]
    with switch_interval(1e-5):
        for _ in range(200):
            x = bg.tensor(values, requires_grad=True)
            hs = _chain(bg, x, depth)
            out = hs[-1].sum()
            grads, read = [None] * 4, [None] * 4

            def work(i):
                read[i] = hs[2 + i % 2].numpy(force=True)
                grads[i] = bg.autograd.grad(out, x, retain_graph=True)[0].numpy()

            run_together(work, 4)
            for i in range(4):
                np.testing.assert_allclose(read[i], middle[i % 2], rtol=1e-5)
                np.testing.assert_allclose(grads[i], expected.numpy(), rtol=1e-5)


def test_threads_reading_one_deferred_graph_while_its_kernels_run_long(monkeypatch):
    """The same with every per-op kernel holding its thread for a while without the GIL (as XLA does on large
    arrays), longer in some threads than in others: their evaluations of the graph's shared calls overlap on every
    trial, the faster threads ahead."""
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 10**9)  # per-op kernels only
    compiled, speed = _lazy.kernel, threading.local()

    def kernel(op, static):
        run = compiled(op, static)

        def slow(*args):
            time.sleep(getattr(speed, "delay", 0.0))
            return run(*args)

        return slow

    monkeypatch.setattr(_lazy, "kernel", kernel)
    values = [0.3, -1.2, 2.0]
    t_x = torch.tensor(values, requires_grad=True)
    (expected,) = torch.autograd.grad(_chain(torch, t_x, 3)[-1].sum(), t_x)
    for _ in range(5):
        x = bg.tensor(values, requires_grad=True)
        out = _chain(bg, x, 3)[-1].sum()
        grads = [None] * 4

        def work(i):
            speed.delay = (i + 1) * 5e-4
            grads[i] = bg.autograd.grad(out, x, retain_graph=True)[0].numpy()

        run_together(work, 4)
        for g in grads:
            np.testing.assert_allclose(g, expected.numpy(), rtol=1e-5)


def test_two_threads_recording_on_one_new_leaf_share_its_accumulate_grad_node(monkeypatch):
    """Both threads reach the creation of the leaf's AccumulateGrad at once: one node must come out of it."""
    make = _graph.AccumulateGrad.__init__
    both_inside = threading.Barrier(2)

    def slow_init(self, variable):
        make(self, variable)
        with contextlib.suppress(threading.BrokenBarrierError):
            both_inside.wait(timeout=0.2)  # only reached by both threads when nothing keeps the second one out

    monkeypatch.setattr(_graph.AccumulateGrad, "__init__", slow_init)
    x = bg.tensor([1.0, 2.0], requires_grad=True)
    outs = [None, None]

    def work(i):
        outs[i] = x * (i + 1)

    run_together(work, 2)
    monkeypatch.undo()
    (first, _), (second, _) = outs[0].grad_fn.next_functions[0], outs[1].grad_fn.next_functions[0]
    assert first is second
    for i, out in enumerate(outs):
        np.testing.assert_array_equal(bg.autograd.grad(out.sum(), x)[0].numpy(), [i + 1.0] * 2)


def test_fallback_warnings_blocks_are_per_thread():
    assert not vmap.fallback_warnings_enabled()
    entered, left = threading.Barrier(2, timeout=30), threading.Barrier(2, timeout=30)
    seen = {}

    def work(i):
        enabled = i == 0
        with vmap.fallback_warnings(enabled):
            entered.wait()  # both threads are inside their blocks: each sees its own setting
            seen[i] = vmap.fallback_warnings_enabled()
            if i == 0:
                left.wait()  # thread 1 leaves first, thread 0 after it
        if i == 1:
            seen["1 after"] = vmap.fallback_warnings_enabled()
            left.wait()

    run_together(work, 2)
    assert seen == {0: True, 1: False, "1 after": False}
    assert not vmap.fallback_warnings_enabled()  # nothing leaked out of either block


def test_set_fallback_warnings_is_for_every_thread_and_a_block_keeps_its_own():
    inside = []
    try:
        vmap.set_fallback_warnings(True)
        with vmap.fallback_warnings(False):
            run_together(lambda _: inside.append(vmap.fallback_warnings_enabled()), 1)
            assert not vmap.fallback_warnings_enabled()
            vmap.set_fallback_warnings(True)  # inside a block: for the rest of it too
            assert vmap.fallback_warnings_enabled()
        assert vmap.fallback_warnings_enabled()
    finally:
        vmap.set_fallback_warnings(False)
    assert inside == [True]
