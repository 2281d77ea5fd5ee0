"""is_grads_batched semantics (SPEC §3-§4), the per-row fallback and its switches, chunking, vmap.vmap."""

import os
import re
import subprocess
import sys
import warnings

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap
from batched_grad import _lazy
from oracle import assert_same, pair
from vmap import _fallback

pytestmark = pytest.mark.usefixtures("engine_tier")


def test_batched_grad_matches_torch_and_has_batch_leading_shape():
    x, tx = pair(3)
    w, tw = pair(4, 3, seed=1)
    v = np.random.default_rng(2).standard_normal((5, 4))
    g = bg.autograd.grad(bg.tanh(w @ x), [x, w], bg.tensor(v), is_grads_batched=True)
    tg = torch.autograd.grad(torch.tanh(tw @ tx), [tx, tw], torch.tensor(v), is_grads_batched=True)
    assert_same(g, tg)
    assert g[1].shape == (5, 4, 3)


def test_per_sample_gradients_with_identity_cotangents():
    w, tw = pair(3, 4)
    X = np.random.default_rng(1).standard_normal((5, 4))

    def run(lib, w):
        losses = (lib.tensor(X) @ w.T).pow(2).sum(1)
        return lib.autograd.grad(losses, w, lib.eye(5, dtype=lib.float64), is_grads_batched=True)[0]

    assert_same(run(bg, w), run(torch, tw))


def _products(lib, x, params):
    """vector @ matrix, matrix @ vector, matrix @ matrix and linear layers between elementwise ops and reshapes."""
    w1, w2, w3, b, w4, b4 = params
    h = lib.tanh(x @ w1 + b)  # (5,)
    m = lib.sigmoid(w2 @ h).reshape(2, 3)  # (6,) -> (2, 3)
    return lib.nn.functional.linear((m @ w3) * 2.0 - 1.0, w4, b4)  # (2, 4) -> (2, 4)


def test_jacobian_seeds_match_torch_through_products():
    x, tx = pair(4)
    params = [pair(*shape, seed=i + 1) for i, shape in enumerate([(4, 5), (6, 5), (3, 4), (5,), (4, 4), (4,)])]
    bp, tp = [p[0] for p in params], [p[1] for p in params]
    want = torch.autograd.grad(
        _products(torch, tx, tp), [tx] + tp, torch.eye(8, dtype=torch.float64).view(8, 2, 4), is_grads_batched=True
    )
    for chunk_size in (None, 3):
        for _ in range(3):  # each structure's first calls run per-node kernels, later ones the fused program
            got = bg.autograd.grad(
                _products(bg, x, bp),
                [x] + bp,
                bg.eye(8, dtype=bg.float64).view(8, 2, 4),
                is_grads_batched=True,
                chunk_size=chunk_size,
            )
            assert_same(got, want)


def test_jacobian_seeds_keep_torchs_nan_where_a_derivative_is_not_finite():
    x, tx = pair(3)
    w, tw = pair(3, 4, seed=1)
    a, ta = pair(2, 3, seed=2)

    eye = np.eye(6)
    middle = [np.median(p.detach().numpy()) for p in (tx @ tw, ta @ tx)]

    def run(lib, x, w, a):  # sqrt of some negative entries: nan derivatives there, then products
        outputs = [lib.sqrt(x @ w - middle[0]), lib.sqrt(a @ x - middle[1])]
        return lib.autograd.grad(
            outputs, [x, w, a], [lib.tensor(eye[:, :4]), lib.tensor(eye[:, 4:])], is_grads_batched=True
        )

    want = run(torch, tx, tw, ta)
    for g in want[1:]:  # nan in some columns of w's gradient, some rows of a's
        assert np.isnan(g.numpy()).any() and not np.isnan(g.numpy()).all()
    for _ in range(3):
        assert_same(run(bg, x, w, a), want)


def test_jacobian_of_several_outputs_matches_torch():
    x, tx = pair(3)
    w, tw = pair(3, 2, seed=1)

    def f(lib, w):
        return lambda x: (lib.tanh(x @ w), x.exp() * 3.0, (x @ w).sum(), lib.nn.functional.linear(x, w.T, w[0]))

    want = torch.autograd.functional.jacobian(f(torch, tw), tx, vectorize=True)
    for _ in range(3):
        assert_same(bg.autograd.functional.jacobian(f(bg, w), x, vectorize=True), want)


def test_identity_blocks_are_recognized_exactly():
    from batched_grad._batched import basis_block as _basis_block

    eye = np.eye(6)
    assert _basis_block(bg.tensor(eye)) == (0, (6,), np.float64)
    assert _basis_block(bg.tensor(eye.reshape(6, 2, 3))) == (0, (2, 3), np.float64)
    assert _basis_block(bg.tensor(np.eye(7, 4, k=-2, dtype=np.float32))) == (2, (4,), np.float32)
    assert _basis_block(bg.tensor(np.eye(6, 5))) == (0, (5,), np.float64)  # a last row of zeros
    with jax.enable_x64(True):  # JAX's own default is 32-bit
        on_device = bg.Tensor._wrap(jax.device_put(np.eye(7, 4, k=-2)))
    assert _basis_block(on_device) == _basis_block(on_device) == (2, (4,), np.float64)  # the second from a cache
    not_identity = [eye * 2, eye[:5], eye[::-1], np.eye(6, 7)]
    for entry, value in [((0, 1), -0.0), ((0, 1), 1e-300), ((5, 5), 0.0)]:
        altered = eye.copy()
        altered[entry] = value  # -0.0 is the same number, but not the identity's bits: the dense path takes it
        not_identity.append(altered)
    for a in not_identity:
        assert _basis_block(bg.tensor(a)) is None
    assert _basis_block(bg.tensor(eye, requires_grad=True)) is None
    assert _basis_block(bg.tensor(eye.astype(np.complex128))) is None
    assert _basis_block(bg.tensor(np.eye(3, dtype=np.int64))) is None


def test_a_host_identity_passed_again_is_checked_once_on_the_device():
    from batched_grad._batched import basis_block as _basis_block

    seeds = bg.eye(4)
    assert type(seeds._v) is np.ndarray and _basis_block(seeds) == (0, (4,), np.float32)
    assert type(seeds._v) is np.ndarray  # a first pass leaves it where it is
    assert _basis_block(seeds) == (0, (4,), np.float32)
    assert isinstance(seeds._v, jax.Array)  # the second moves it for good; its check is cached from then on
    assert _basis_block(seeds) == (0, (4,), np.float32)


def test_identity_written_in_place_is_checked_again():
    x, tx = pair(3)
    seeds = bg.eye(3, dtype=bg.float64)
    for _ in range(3):
        bg.autograd.grad(x.exp(), x, seeds, is_grads_batched=True)
    seeds[0, 1] = 2.0  # no longer the identity
    (got,) = bg.autograd.grad(x.exp(), x, seeds, is_grads_batched=True)
    (want,) = torch.autograd.grad(tx.exp(), tx, torch.tensor(seeds.numpy()), is_grads_batched=True)
    assert_same(got, want)


@pytest.mark.parametrize(
    "grads, message",
    [
        (
            [(5, 4)],
            r"grad_output\[0\] has a shape of torch.Size\(\[4\]\) and output\[0\] has a shape of torch.Size\(\[3\]\)",
        ),
        (
            [(2, 3), (2, 1)],
            r"grad_output\[1\] has a shape of torch.Size\(\[1\]\) and output\[1\] has a shape of torch.Size\(\[2\]\)",
        ),
    ],
)
def test_shape_mismatch_reports_correct_index_and_shapes(grads, message):
    x, _ = pair(3)
    outputs = [x * 2, x[:2] * 3][: len(grads)]
    with pytest.raises(RuntimeError, match=r"If `is_grads_batched=True`, we interpret the first dimension"):
        bg.autograd.grad(outputs, x, [bg.ones(*s) for s in grads], is_grads_batched=True)
    with pytest.raises(RuntimeError, match=message):
        bg.autograd.grad(outputs, x, [bg.ones(*s) for s in grads], is_grads_batched=True)


def test_unequal_batch_sizes_none_and_zero_dim_grad_outputs_are_clear_errors():
    x, _ = pair(3)
    with pytest.raises(ValueError, match=r"same batch size .* sizes \[3, 2\]"):
        bg.autograd.grad([x * 2, x * 3], x, [bg.ones(3, 3), bg.ones(2, 3)], is_grads_batched=True)
    with pytest.raises(RuntimeError, match=r"grad_outputs\[0\] cannot be None"):
        bg.autograd.grad((x * 2).sum(), x, is_grads_batched=True)
    with pytest.raises(RuntimeError, match=r"grad_output\[0\] is 0-dimensional"):
        bg.autograd.grad((x * 2).sum(), x, bg.tensor(1.0), is_grads_batched=True)


def test_batch_of_zero_rows_returns_empty_results():
    x, _ = pair(3)
    (g,) = bg.autograd.grad(x.sin(), x, bg.ones(0, 3, dtype=bg.float64), is_grads_batched=True)
    assert g.shape == (0, 3) and g.dtype is bg.float64


def test_create_graph_is_differentiable_wrt_inputs_and_grad_outputs():
    x, tx = pair(3)
    y, ty = pair(3, seed=1)

    def run(lib, x, y):
        v = lib.ones(4, 3, dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(x * y, x, v, is_grads_batched=True, create_graph=True)
        gv = lib.autograd.grad(g.sum(), v, retain_graph=True)[0]
        gy = lib.autograd.grad((g * g).sum(), y)[0]
        return g, gv, gy

    assert_same(run(bg, x, y), run(torch, tx, ty))


def test_hessian_and_third_derivative_by_batched_grad_of_grad():
    x, tx = pair(3)

    def run(lib, x):
        (g,) = lib.autograd.grad((x.sin() * x.sum() ** 2).sum(), x, create_graph=True)
        H = lib.autograd.grad(g, x, lib.eye(3, dtype=lib.float64), is_grads_batched=True, create_graph=True)[0]
        T = lib.autograd.grad(H, x, lib.eye(9, dtype=lib.float64).view(9, 3, 3), is_grads_batched=True)[0]
        return H, T

    assert_same(run(bg, x), run(torch, tx))


def test_allow_unused_and_materialize_grads_give_none_or_torchs_unbatched_zeros():
    x, tx = pair(3)
    y, ty = pair(2)
    v = bg.ones(4, 3, dtype=bg.float64)
    assert bg.autograd.grad(x * 2, [x, y], v, is_grads_batched=True, allow_unused=True)[1] is None
    for create_graph in (False, True):
        got = bg.autograd.grad(
            x * 2, [x, y], v, is_grads_batched=True, materialize_grads=True, create_graph=create_graph
        )
        want = torch.autograd.grad(
            tx * 2,
            [tx, ty],
            torch.ones(4, 3, dtype=torch.float64),
            is_grads_batched=True,
            materialize_grads=True,
            create_graph=create_graph,
        )
        assert_same(got, want)
        assert got[1].requires_grad is want[1].requires_grad is create_graph
    with pytest.raises(RuntimeError, match="index 1 appears to not have been used"):
        bg.autograd.grad(x * 2, [x, y], v, is_grads_batched=True)


def test_second_batched_call_without_retain_graph_raises():
    x, _ = pair(3)
    y = x.exp()
    v = bg.ones(2, 3, dtype=bg.float64)
    bg.autograd.grad(y, x, v, is_grads_batched=True)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        bg.autograd.grad(y, x, v, is_grads_batched=True)


def test_hooks_and_function_backward_see_per_row_shapes():
    x, _ = pair(3)
    seen = []

    class Double(bg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(("function", tuple(g.shape)))
            return g * 2

    m = x * 1
    m.register_hook(lambda g: seen.append(("hook", tuple(g.shape))) or g * 10)
    (g,) = bg.autograd.grad(Double.apply(m), x, bg.eye(3, dtype=bg.float64), is_grads_batched=True)
    assert set(seen) == {("function", (3,)), ("hook", (3,))}
    np.testing.assert_allclose(g.numpy(), 20 * np.eye(3))


@pytest.mark.slow
def test_hook_that_keeps_its_argument_sees_real_rows():
    x, _ = pair(3)
    kept = []
    m = x * 1
    m.register_hook(lambda g: kept.append(g))
    with vmap.fallback_warnings(), pytest.warns(vmap.FallbackWarning, match="leaked tracer"):
        # retained: m = x * 1 saves the number 1, freed with the graph as torch frees it
        bg.autograd.grad(m * 2, x, bg.eye(3, dtype=bg.float64), is_grads_batched=True, retain_graph=True)
    assert [k.tolist() for k in kept[1:]] == (2 * np.eye(3)).tolist()  # kept[0]: the vectorization attempt
    kept.clear()  # the hook is now known to need rows: no second attempt
    bg.autograd.grad(m * 3, x, bg.eye(3, dtype=bg.float64), is_grads_batched=True)
    assert [k.tolist() for k in kept] == (3 * np.eye(3)).tolist()


def test_a_hook_raising_a_plain_exception_is_not_taken_for_a_leak():
    x, _ = pair(3)
    m = x * 1
    m.register_hook(lambda g: (_ for _ in ()).throw(Exception("the hook's own error")))
    with pytest.raises(Exception, match="the hook's own error"):
        bg.autograd.grad(m * 2, x, bg.eye(3, dtype=bg.float64), is_grads_batched=True)


def test_anomaly_mode_works_with_batched_grads():
    x, _ = pair(3)
    with bg.autograd.detect_anomaly():
        (g,) = bg.autograd.grad(x.exp(), x, bg.eye(3, dtype=bg.float64), is_grads_batched=True)
    np.testing.assert_allclose(g.numpy(), np.diag(np.exp(x.detach().numpy())))


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7])
def test_chunk_size_gives_identical_results(chunk_size):
    x, _ = pair(4)
    w, _ = pair(6, 4, seed=1)
    v = bg.tensor(np.random.default_rng(3).standard_normal((6, 6)))
    expected = bg.autograd.grad(bg.tanh(w @ x), [x, w], v, is_grads_batched=True)
    got = bg.autograd.grad(bg.tanh(w @ x), [x, w], v, is_grads_batched=True, chunk_size=chunk_size)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_bad_chunk_size_is_a_clear_error():
    x, _ = pair(3)
    with pytest.raises(ValueError, match='chunk_size must be None, "auto" or a positive int, but got 0'):
        bg.autograd.grad(x * 2, x, bg.eye(3, dtype=bg.float64), is_grads_batched=True, chunk_size=0)


# ---- per-row fallback ---------------------------------------------------------------------------


class NumpyBackward(bg.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return bg.tensor(2 * a.detach().numpy() * g.detach().numpy())  # as in torch: numpy() of no graph


class ItemBackward(bg.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 3

    @staticmethod
    def backward(ctx, g):
        return g * (3.0 if g.sum().item() != 12345.0 else 0.0)


class BranchBackward(bg.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a.clone()

    @staticmethod
    def backward(ctx, g):
        return g * 2 if g.sum() > 0 else g * -1


def _graph_with(function, x):
    return (function.apply(x.sin()) * x).tanh()


@pytest.mark.parametrize("function", [NumpyBackward, ItemBackward, BranchBackward])
def test_fallback_equals_loop_warns_only_when_on_and_other_nodes_stay_vectorized(function):
    x, _ = pair(3)
    v = bg.tensor(np.random.default_rng(4).standard_normal((5, 3)))
    expected = np.stack([bg.autograd.grad(_graph_with(function, x), x, v[b])[0].numpy() for b in range(5)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", vmap.FallbackWarning)
        (quiet,) = bg.autograd.grad(_graph_with(function, x), x, v, is_grads_batched=True)
    np.testing.assert_allclose(quiet.numpy(), expected, rtol=1e-12)
    loops = _fallback.row_loops[0]
    with vmap.fallback_warnings(), pytest.warns(vmap.FallbackWarning) as record:
        (g,) = bg.autograd.grad(_graph_with(function, x), x, v, is_grads_batched=True)
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12)
    assert _fallback.row_loops[0] == loops + 1  # one node looped; sin, mul, tanh stayed vectorized
    message = str(record[0].message)
    assert f"{function.__name__}Backward" in message and "5 rows" in message and "Error" in message


def test_fallback_disabled_raises_fallback_error():
    x, _ = pair(3)
    vmap.set_fallback_enabled(False)
    try:
        with pytest.raises(vmap.FallbackError, match="BranchBackwardBackward could not be vectorized"):
            bg.autograd.grad(BranchBackward.apply(x), x, bg.eye(3, dtype=bg.float64), is_grads_batched=True)
    finally:
        vmap.set_fallback_enabled(True)
    assert vmap.fallback_enabled()


def test_fallback_with_create_graph_is_differentiable():
    x, _ = pair(3)
    (g,) = bg.autograd.grad(
        NumpyBackward.apply(x).sum() * x,
        x,
        bg.eye(3, dtype=bg.float64) * 0 + 1,
        is_grads_batched=True,
        create_graph=True,
    )
    assert g.shape == (3, 3)


def test_fallback_switches_validate_and_restore():
    with pytest.raises(TypeError, match="enabled must be a bool, but got int"):
        vmap.set_fallback_warnings(1)
    assert not vmap.fallback_warnings_enabled()
    with vmap.fallback_warnings():
        assert vmap.fallback_warnings_enabled()
    assert not vmap.fallback_warnings_enabled()


def test_torchs_debug_switch_of_fallback_warnings_is_the_same_switch():
    """torch._C's spelling, which code written against functorch's tests uses, sets and reads vmap's switch."""
    assert not bg._C._debug_only_are_vmap_fallback_warnings_enabled()
    bg._C._debug_only_display_vmap_fallback_warnings(True)
    try:
        assert vmap.fallback_warnings_enabled() and bg._C._debug_only_are_vmap_fallback_warnings_enabled()
    finally:
        bg._C._debug_only_display_vmap_fallback_warnings(False)
    assert not vmap.fallback_warnings_enabled()


def test_environment_variable_turns_warnings_on_at_import():
    env = dict(os.environ, VMAP_FALLBACK_WARNINGS="1")
    out = subprocess.run(
        [sys.executable, "-c", "import vmap; print(vmap.fallback_warnings_enabled())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "True"


# ---- compiles -----------------------------------------------------------------------------------


def _batched_step(batch, seed=0):
    rng = np.random.default_rng(seed)
    w = bg.tensor(rng.standard_normal((8, 4)), requires_grad=True)
    x = bg.tensor(rng.standard_normal(4))
    (g,) = bg.autograd.grad(bg.tanh(w @ x), w, bg.tensor(rng.standard_normal((batch, 8))), is_grads_batched=True)
    return g.numpy()  # read, so that it is computed: recorded ops are deferred until read


def test_repeated_batched_calls_and_batch_size_sweep_compile_nothing_new(engine_tier):
    _lazy._seen.clear()
    for seed in range(_lazy.FUSE_AFTER + 1 if engine_tier == "fused" else 1):
        _batched_step(64, seed)
    before = bg.compile_count()
    for batch in range(33, 65):  # one bucket (64): no program per batch size
        assert _batched_step(batch, batch).shape == (batch, 8, 4)
    assert bg.compile_count() == before


# ---- vmap.vmap ----------------------------------------------------------------------------------


def test_vmap_per_sample_gradients_equal_the_loop():
    w = bg.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    X = bg.tensor(np.random.default_rng(1).standard_normal((6, 4)))
    Y = bg.tensor(np.random.default_rng(2).standard_normal((6, 3)))
    loss = lambda x, y: ((w @ x - y) ** 2).sum()
    per_sample = vmap.vmap(lambda x, y: bg.autograd.grad(loss(x, y), w)[0])(X, Y)
    loop = np.stack([bg.autograd.grad(loss(X[i], Y[i]), w)[0].numpy() for i in range(6)])
    np.testing.assert_allclose(per_sample.numpy(), loop, rtol=1e-12)
    chunked = vmap.vmap(lambda x, y: bg.autograd.grad(loss(x, y), w)[0], chunk_size=4)(X, Y)
    np.testing.assert_allclose(chunked.numpy(), loop, rtol=1e-12)


def test_vmap_in_dims_out_dims_and_errors():
    a = bg.tensor(np.arange(6.0).reshape(2, 3))
    b = bg.tensor([1.0, 2.0])
    out = vmap.vmap(lambda r, s: r * s, in_dims=(1, None), out_dims=1)(a, b)
    np.testing.assert_allclose(out.numpy(), np.arange(6.0).reshape(2, 3) * np.array([1.0, 2.0])[:, None])
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        vmap.vmap(lambda r, s: r + s)(a, bg.ones(3))
    with pytest.raises(ValueError, match="randomness must be one of"):
        vmap.vmap(lambda r: r, randomness="sometimes")
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure of `inputs`"):
        vmap.vmap(lambda r, s: r, in_dims=(0,))(a, b)
    with pytest.raises(ValueError, match="the input is of type <class 'float'>. We cannot vmap over non-Tensor"):
        vmap.vmap(lambda r, s: r)(a, 2.0)
    with pytest.raises(
        IndexError, match=re.escape("Dimension out of range (expected to be in range of [-2, 1], but got 3)")
    ):
        vmap.vmap(lambda r: r * 2, out_dims=3)(a)


def test_vmap_randomness_error_refuses_random_ops_and_same_shares_one_draw():
    x = bg.ones(4, 3)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap.vmap(lambda r: r + bg.rand(3))(x)
    out = vmap.vmap(lambda r: r + bg.rand(3), randomness="same")(x)
    assert np.allclose(out.numpy(), out.numpy()[0])
