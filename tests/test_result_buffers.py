"""Large results are written into the memory of earlier results that nothing refers to any more (README,
Performance), and never into one that a Tensor, an array or a NumPy view still refers to."""

import jax
import numpy as np
import pytest

import batched_grad as bg
import vmap
from batched_grad import _compiled, _lazy

N, D, K = 16, 256, 64  # per-sample gradients of a (D, K) weight: N * D * K float32s = 1 MiB, a large result


def per_sample(W):
    return vmap.vmap(lambda x: bg.autograd.grad(bg.tanh(x @ W).sum(), W)[0])


def expected(X, W):
    x, w = X.numpy().astype(np.float64), W.detach().numpy().astype(np.float64)
    return x[:, :, None] * (1 - np.tanh(x @ w) ** 2)[:, None, :]


def pointer(t):
    return t.jax().unsafe_buffer_pointer()


def test_a_loop_rebinding_its_result_alternates_between_two_buffers(monkeypatch):
    bg.manual_seed(0)
    W = (bg.randn(D, K) / 16).requires_grad_()
    f = per_sample(W)
    assert N * D * K * 4 >= _compiled.RECYCLE_BYTES
    for _ in range(6):  # the inner grad's backward fuses on its third call, which changes f's program once; the
        g = f(bg.randn(N, D))  # new program's third call is its first to reuse a buffer, and compiles that variant
    program = _compiled._recycling[-1]  # the program of the last call
    reusing, reused = program.reusing, []
    monkeypatch.setattr(program, "reusing", lambda *args: reused.append(True) or reusing(*args))
    pointers, before = [], bg.compile_count()
    for _ in range(6):
        X = bg.randn(N, D)
        g = f(X)  # while f runs, g still holds the previous result: the one before that is free
        pointers.append(pointer(g))
        np.testing.assert_allclose(g.numpy(), expected(X, W), rtol=1e-5, atol=1e-6)
    assert len(reused) == 6 and pointers[0] != pointers[1] and pointers == pointers[:2] * 3
    assert bg.compile_count() == before


def test_results_still_referred_to_are_never_overwritten():
    bg.manual_seed(1)
    W = (bg.randn(D, K) / 16).requires_grad_()
    f = per_sample(W)
    inputs = [bg.randn(N, D) for _ in range(8)]
    held = [f(X) for X in inputs[:3]]  # Tensors held in a list
    arrays = [f(X).jax() for X in inputs[3:5]]  # the arrays alone, their Tensors dropped
    view = np.asarray(f(inputs[5]))  # a NumPy array of a dropped Tensor's result
    for X in inputs[6:] * 3:  # more calls, each of which would write into any result nothing refers to
        f(X)
    for t, X in zip(held, inputs[:3]):
        np.testing.assert_allclose(t.numpy(), expected(X, W), rtol=1e-5, atol=1e-6)
    for a, X in zip(arrays, inputs[3:5]):
        assert not a.is_deleted()
        np.testing.assert_allclose(np.asarray(a), expected(X, W), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(view, expected(inputs[5], W), rtol=1e-5, atol=1e-6)


def test_only_the_last_two_programs_with_large_results_keep_them(monkeypatch):
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 0)  # each structure's first call runs its program (not rows on the host)
    bg.manual_seed(2)
    X = bg.randn(N, D)
    functions = [per_sample(bg.randn(D, K + i, requires_grad=True)) for i in range(3)]
    keeping = []
    for f in functions:
        f(X)
        keeping.append({p for p in _lazy._program_cache.values() if p.spares})
    assert [len(k) for k in keeping[1:]] == [2, 2] and not keeping[0] & keeping[2]


def test_a_traced_call_neither_reuses_nor_keeps_results():
    program = _compiled.Program(lambda x: (x * 2,))
    x = bg.ones(_compiled.RECYCLE_BYTES // 4).jax()
    program(x), program(x)  # two large results, dropped at once: both free
    kept = [[id(a) for a in spare] for spare in program.spares]
    traced = jax.jit(lambda y: program(y)[0])(x)  # inside another trace the arguments are tracers
    assert [[id(a) for a in spare] for spare in program.spares] == kept
    assert not any(a.is_deleted() for spare in program.spares for a in spare)
    np.testing.assert_array_equal(np.asarray(traced), 2 * np.asarray(x))


def test_the_reference_counts_hold_on_this_interpreter():
    assert _compiled.alone_count() is not None


def test_no_memory_is_reused_where_reference_counts_cannot_tell(monkeypatch):
    monkeypatch.setattr(_compiled, "alone_count", lambda: None)
    program = _compiled.Program(lambda x: (x * 2,))
    monkeypatch.setattr(program, "reusing", lambda *args: pytest.fail("a result's memory was reused"))
    x = bg.ones(_compiled.RECYCLE_BYTES // 4).jax()
    for _ in range(4):  # each result dropped at once: with calibrated counts, the third call would reuse one
        program(x)
    np.testing.assert_array_equal(np.asarray(program(x)[0]), 2 * np.asarray(x))
