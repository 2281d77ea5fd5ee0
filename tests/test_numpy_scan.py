"""Loops on the host (batched_grad/_numpy_loops.py): a scan's or while loop's body is a sub-Program run step by step,
so the recurrent layers and their gradients compile nothing at a new sequence length or batch, and match torch; the
loop rows give lax.scan's and lax.while_loop's values, keep their bodies when a program is stored, and count their
bodies' arrays toward the host's size bound."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax import lax

import batched_grad as bg
from batched_grad import _host, _numpy_eval, _numpy_program
from oracle import assert_same

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="host forms run on the CPU backend only")

TOLERANCE = {"rtol": 2e-5, "atol": 2e-6}  # float32, sums in another order than torch's


@pytest.fixture(autouse=True)
def per_op_tier():
    """The per-op tier only: a structure that repeats would otherwise be compiled as one fused program once its
    runs pay for it (_fusion.py), which is no compile the host forms cause."""
    previous = bg.get_fusion()
    bg.set_fusion("off")
    yield
    bg.set_fusion(previous)


def _pair(mode, **options):
    """The same recurrent layer in torch and here (torch's initial weights copied)."""
    torch.manual_seed(0)
    theirs = getattr(torch.nn, mode)(3, 8, **options)
    ours = getattr(bg.nn, mode)(3, 8, **options)
    ours.load_state_dict({k: bg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _run(lib, module, x, batch_first):
    """(output, final states, gradients of the input and the parameters) of a loss weighting every output."""
    module.zero_grad()
    x = lib.tensor(x, requires_grad=True)
    out, state = module(x)
    states = list(state) if isinstance(state, tuple) else [state]
    weight = lib.tensor(np.linspace(-1.0, 1.0, out.numel(), dtype=np.float32).reshape(out.shape))
    loss = (out * weight).sum() + sum([(s * s).sum() for s in states])
    loss.backward()
    return [out, *states, x.grad, *[p.grad for p in module.parameters()]]


def _sequence(length, batch, batch_first, seed=0):
    shape = (batch, length, 3) if batch_first else (length, batch, 3)
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# each layer and direction traces its forward and backward programs once (about 0.3 s each): the stacked,
# bidirectional ones run in the slow tier
SLOW = pytest.mark.slow
LAYERS = [
    pytest.param("LSTM", {}, id="LSTM"),
    pytest.param("GRU", {}, id="GRU"),
    pytest.param("RNN", {"batch_first": True}, id="RNN-batch_first"),
    pytest.param("RNN", {"nonlinearity": "relu", "num_layers": 2}, id="RNN-relu-2-layers"),
    pytest.param(
        "LSTM",
        {"proj_size": 5, "bidirectional": True},
        id="LSTM-proj-bidirectional",
        marks=[SLOW, pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")],
    ),
    pytest.param("LSTM", {"num_layers": 2, "bidirectional": True, "batch_first": True}, id="LSTM-2-bi", marks=SLOW),
    pytest.param("GRU", {"num_layers": 2, "bidirectional": True}, id="GRU-2-bi", marks=SLOW),
]


@pytest.mark.parametrize("mode,options", LAYERS)
def test_recurrent_layers_at_new_lengths_compile_nothing_and_match_torch(mode, options):
    ours, theirs = _pair(mode, **options)
    batch_first = options.get("batch_first", False)
    for length, batch in ((4, 2), (7, 2), (11, 3)):  # the first traces the programs and compiles their regions
        before = bg.compile_count()
        x = _sequence(length, batch, batch_first, seed=length)
        assert_same(_run(bg, ours, x, batch_first), _run(torch, theirs, x, batch_first), **TOLERANCE)
    assert bg.compile_count() == before


@pytest.mark.slow
def test_packed_sequences_at_new_lengths_compile_nothing_and_match_torch():
    ours, theirs = _pair("LSTM", bidirectional=True)

    def run(lib, x, lengths):
        x = lib.tensor(x, requires_grad=True)
        packed = lib.nn.utils.rnn.pack_padded_sequence(x, lib.tensor(lengths), enforce_sorted=False)
        out, (h, c) = (ours if lib is bg else theirs)(packed)
        padded, _ = lib.nn.utils.rnn.pad_packed_sequence(out)
        (padded.sum() + (h * c).sum()).backward()
        return [padded, h, c, x.grad]

    for lengths in ([4, 2, 3], [6, 3, 5], [9, 9, 2]):  # the first traces the programs and compiles their regions
        before = bg.compile_count()
        x = _sequence(max(lengths), 3, False, seed=lengths[0])
        assert_same(run(bg, x, lengths), run(torch, x, lengths), **TOLERANCE)
    assert bg.compile_count() == before


def test_batched_cotangents_through_a_layer_at_new_lengths_compile_nothing_and_match_torch():
    """is_grads_batched: the layer's VJP mapped over the rows by jax.vmap is a scan over batched values."""
    ours, theirs = _pair("GRU")

    def rows_of_gradient(lib, x, cotangents):
        x = lib.tensor(x, requires_grad=True)
        out, _ = (ours if lib is bg else theirs)(x)
        return lib.autograd.grad(out, x, lib.tensor(cotangents), is_grads_batched=True)

    rng = np.random.default_rng(3)
    for length in (4, 6, 9):  # the first traces the programs and compiles their regions
        before = bg.compile_count()
        x, cotangents = _sequence(length, 2, False, seed=length), rng.standard_normal((5, length, 2, 8))
        cotangents = cotangents.astype(np.float32)
        assert_same(rows_of_gradient(bg, x, cotangents), rows_of_gradient(torch, x, cotangents), **TOLERANCE)
    assert bg.compile_count() == before


def test_ctc_loss_at_new_lengths_compiles_nothing_and_matches_torch():
    """CTC's forward recursion is a scan over the input frames."""
    targets, target_lengths = [[1, 2, 3], [2, 2, 0]], [3, 2]

    def loss_and_gradient(lib, log_probs, frames):
        x = lib.tensor(log_probs, requires_grad=True)
        loss = lib.nn.functional.ctc_loss(
            x.log_softmax(2), lib.tensor(targets), lib.tensor([frames, frames - 2]), lib.tensor(target_lengths)
        )
        loss.backward()
        return [loss, x.grad]

    rng = np.random.default_rng(0)
    for frames in (10, 13, 17):  # the first traces the programs and compiles their regions
        before = bg.compile_count()
        log_probs = rng.standard_normal((frames, 2, 5)).astype(np.float32)
        assert_same(loss_and_gradient(bg, log_probs, frames), loss_and_gradient(torch, log_probs, frames), **TOLERANCE)
    assert bg.compile_count() == before


def test_recurrent_layers_on_the_host_agree_with_the_kernel(monkeypatch):
    """Within the error bound of sums in another order: the body's products are the only sums."""
    ours, _ = _pair("LSTM")
    x = _sequence(9, 4, False)
    host = [np.asarray(t.detach()) for t in _run(bg, ours, x, False)]
    monkeypatch.setattr(_host, "HOST_ELEMENTS", 0)
    kernel = [np.asarray(t.detach()) for t in _run(bg, ours, x, False)]
    for h, k in zip(host, kernel):
        np.testing.assert_allclose(h, k, rtol=0, atol=64 * np.finfo(np.float32).eps * max(1.0, np.abs(k).max()))


# ---- the loop rows against JAX's loops ------------------------------------------------------------------------------
def _program(fn, arrays):
    flat = lambda *a: tuple(jax.tree_util.tree_leaves(fn(*a)))
    found = _numpy_eval.program_for(fn, lambda structs: (flat, structs), [(a.shape, a.dtype) for a in arrays], True)
    assert found is not None, "no derived form"
    return found


def _expected(fn, arrays):
    with jax.enable_x64(True):
        return [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(fn)(*arrays))]


def _scan_of(consts, carries, xs, reverse, with_product):
    """A function of (consts, initial carries, xs) scanning a body that mixes them all: transcendental functions,
    selects, a reduction and (`with_product`) a matrix product."""

    def fn(*arrays):
        c, init, seq = arrays[:consts], arrays[consts : consts + carries], arrays[consts + carries :]

        def body(carry, x):
            total = sum(c) if c else 0.5
            new = []
            for i, h in enumerate(carry):
                drive = x[i % len(x)] if x else 0.25
                if with_product:
                    h = h @ c[0] if c else h @ h.T
                new.append(jnp.tanh(h * total + drive) - jnp.where(h > 0, 0.1 * h, jnp.exp(h) / 3))
            ys = [n + (x[0] if x else 0) for n in new] + [jnp.sum(new[0], axis=0)]
            return tuple(new), ys

        length = None if seq else 5
        final, ys = lax.scan(body, tuple(init), tuple(seq), length=length, reverse=reverse)
        return (*final, *ys)

    return fn


SCANS = [
    (c, k, x, r, p) for c, k, x in ((0, 1, 0), (1, 1, 1), (2, 2, 3), (1, 3, 2)) for r in (False, True) for p in (0, 1)
]


@pytest.mark.parametrize("consts,carries,xs,reverse,with_product", SCANS)
def test_scan_row_gives_lax_scan_values(consts, carries, xs, reverse, with_product):
    """float64: bit for bit where the body holds no sum of products; within a few ulp of the product's scale where
    it does (NumPy's matrix product sums in another order than XLA's)."""
    rng = np.random.default_rng(consts + 3 * carries + 7 * xs)
    arrays = [rng.standard_normal((4, 4)) for _ in range(consts + carries)] + [
        rng.standard_normal((6, 4, 4)) for _ in range(xs)
    ]
    fn = _scan_of(consts, carries, xs, reverse, with_product)
    got = _numpy_eval.evaluate(*_program(fn, arrays), arrays)
    want = _expected(fn, arrays)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if with_product:
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)
        else:
            np.testing.assert_array_equal(g, w)


def test_scan_of_length_zero_and_new_lengths_reuse_one_program():
    fn = lambda init, xs: lax.scan(lambda h, x: (h * 0.5 + x, jnp.sin(h)), init, xs)
    traced = None
    for length in (0, 3, 8):
        arrays = [np.ones(4), np.arange(4.0 * length).reshape(length, 4)]
        program, sizes = _program(fn, arrays)
        if length > 1:  # a length of 2 or more is a symbolic size: one program for them all
            assert traced is None or program is traced
            traced = program
        for g, w in zip(_numpy_eval.evaluate(program, sizes, arrays), _expected(fn, arrays)):
            np.testing.assert_array_equal(g, w)


def test_while_loops_give_lax_while_loop_values():
    def fn(x, n, limit):
        counted = lax.fori_loop(0, n, lambda i, h: jnp.cos(h) * i + h, x)  # bounds read from an operand: a while
        grown = lax.while_loop(lambda s: jnp.max(s[1]) < limit, lambda s: (s[0] + 1, s[1] * 1.5 + 0.1), (0, x))
        return counted, *grown

    x = np.random.default_rng(0).uniform(0.1, 1.0, 5)
    for n, limit in ((0, 0.0), (4, 10.0), (9, 1e4)):
        arrays = [x, np.int64(n), np.float64(limit)]
        for g, w in zip(_numpy_eval.evaluate(*_program(fn, arrays), arrays), _expected(fn, arrays)):
            np.testing.assert_array_equal(g, w)


def test_a_stored_program_keeps_its_loop_bodies():
    fn = _scan_of(1, 2, 2, True, True)
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((4, 4)) for _ in range(3)] + [rng.standard_normal((7, 4, 4)) for _ in range(2)]
    program, sizes = _program(fn, arrays)
    loaded = _numpy_program.loads(_numpy_program.dumps(program))
    bodies = [p for step in loaded.steps for p in step[3].values() if isinstance(p, _numpy_program.Program)]
    assert len(bodies) == 1 and bodies[0].names == program.names
    for g, w in zip(_numpy_eval.evaluate(loaded, sizes, arrays), _numpy_eval.evaluate(program, sizes, arrays)):
        np.testing.assert_array_equal(g, w)


def test_a_body_too_large_for_the_host_leaves_the_loop_to_the_kernel(monkeypatch):
    """The body's arrays count toward the size bound: an outer product of the carry inside the loop makes a
    program whose own operands and results are small too large for the host."""
    fn = lambda h, xs: lax.scan(lambda h, x: (jnp.sum(jnp.outer(h, x), axis=1) * 0.01, h), h, xs)
    arrays = [np.ones(40), np.ones((3, 40))]
    found = _program(fn, arrays)
    monkeypatch.setattr(_host, "HOST_ELEMENTS", 1000)  # more than 3 x 40, less than 40 x 40
    assert _numpy_eval.evaluate(*found, arrays) is None
    monkeypatch.setattr(_host, "HOST_ELEMENTS", 1600)
    for g, w in zip(_numpy_eval.evaluate(*found, arrays), _expected(fn, arrays)):
        np.testing.assert_allclose(g, w, rtol=1e-14)
