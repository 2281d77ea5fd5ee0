"""The per-row fallback (vmap/_fallback.py) against torch's loop over rows, and what it compiles: on the CPU backend
rows are sliced and results stacked on the host (nothing compiles), elsewhere one kernel per shape (never a number
of kernels that grows with the row count)."""

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap
from batched_grad import _lazy
from vmap import _fallback

_xla_compiles = [0]


def _count_xla_compile(event, duration, **kwargs):
    if event.endswith("backend_compile_duration"):
        _xla_compiles[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count_xla_compile)


def _cube_and_sine(lib):
    """A Function computed with NumPy both ways (its backward cannot be vectorized): (a**3, sin a) of `a`, and
    `scale`, which gets no gradient. A row whose cotangents are all zero gets None as the gradient of `a`."""

    class CubeAndSine(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, scale):
            ctx.save_for_backward(a)
            values = a.detach().numpy()
            return lib.from_numpy(values**3), lib.from_numpy(np.sin(values))

        @staticmethod
        def backward(ctx, g_cube, g_sine):
            (a,) = ctx.saved_tensors
            values, g_cube, g_sine = a.detach().numpy(), g_cube.numpy(), g_sine.numpy()
            if not g_cube.any() and not g_sine.any():
                return None, None
            return lib.from_numpy(3 * values**2 * g_cube + np.cos(values) * g_sine), None

    return CubeAndSine


BgCubeAndSine, TorchCubeAndSine = _cube_and_sine(bg), _cube_and_sine(torch)


def _cotangents(rows, n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    cube, sine = (rng.standard_normal((rows, n)).astype(dtype) for _ in range(2))
    if rows > 1:
        cube[rows // 2] = sine[rows // 2] = 0  # a row whose backward gives None: a zero row in the result
    return cube, sine


def _batched(x, cube, sine, outputs=2):
    a = bg.tensor(x, requires_grad=True)
    scale = bg.tensor(np.float32(2.0), requires_grad=True)
    y = BgCubeAndSine.apply(a, scale)
    grad_outputs = [bg.tensor(cube), bg.tensor(sine)][:outputs]
    return bg.autograd.grad(list(y[:outputs]), [a, scale], grad_outputs, is_grads_batched=True, allow_unused=True)


def _torch_loop(x, cube, sine, outputs=2):
    a = torch.tensor(x, requires_grad=True)
    y = TorchCubeAndSine.apply(a, torch.tensor(np.float32(2.0), requires_grad=True))
    rows = [
        torch.autograd.grad(
            list(y[:outputs]),
            a,
            [torch.tensor(cube[b]), torch.tensor(sine[b])][:outputs],
            retain_graph=True,
            materialize_grads=True,
        )[0]
        for b in range(len(cube))
    ]
    return torch.stack(rows)


def _check_against_torch(rows, dtype, outputs=2):
    n = 5
    x = np.linspace(-1.0, 1.5, n).astype(dtype)
    cube, sine = _cotangents(rows, n, dtype)
    got_a, got_scale = _batched(x, cube, sine, outputs)
    expected = _torch_loop(x, cube, sine, outputs)
    assert got_scale is None
    assert got_a.shape == tuple(expected.shape) and got_a.dtype == getattr(bg, str(expected.dtype).split(".")[1])
    np.testing.assert_allclose(got_a.numpy(), expected.numpy(), rtol=1e-6 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 7, 64])  # 7 rows are padded to 8
def test_fallback_matches_torchs_loop_over_rows(rows, dtype):
    _check_against_torch(rows, dtype)


def test_an_output_without_a_gradient_reaches_backward_as_zeros_in_every_row():
    _check_against_torch(7, np.float64, outputs=1)


def test_the_kernel_path_of_other_backends_gives_the_same_results(monkeypatch):
    monkeypatch.setattr(_fallback, "host_view", lambda array: None)  # as on a backend whose arrays are not host
    for rows in (1, 7, 64):
        _check_against_torch(rows, np.float32)


def _compiles_of_a_jacobian(rows, identity):
    """(kernel traces, XLA compiles) of a first Jacobian (or batch of random cotangents, of a shape of its own)
    through the Function."""
    n = rows if identity else rows + 3
    x = np.linspace(-1.0, 1.0, n).astype(np.float32)
    cube = (
        np.eye(rows, dtype=np.float32)
        if identity
        else np.random.default_rng(rows).standard_normal((rows, n)).astype(np.float32)
    )
    before = _lazy.compile_count(), _xla_compiles[0]
    a = bg.tensor(x, requires_grad=True)
    cubed, _ = BgCubeAndSine.apply(a, 1.0)
    (g,) = bg.autograd.grad(cubed, a, bg.tensor(cube), is_grads_batched=True)
    np.testing.assert_allclose(g.numpy(), cube * 3 * x**2, rtol=1e-6)
    return _lazy.compile_count() - before[0], _xla_compiles[0] - before[1]


@pytest.mark.parametrize("identity", [True, False], ids=["jacobian", "random cotangents"])
def test_compiles_do_not_grow_with_the_row_count(identity):
    counts = [_compiles_of_a_jacobian(rows, identity) for rows in (8, 16, 64)]
    assert counts[0] == counts[1] == counts[2]
    if jax.default_backend() == "cpu":
        assert counts[0] == (0, 0)  # rows and results on the host


def test_compiles_of_the_kernel_path_do_not_grow_with_the_row_count(monkeypatch):
    monkeypatch.setattr(_fallback, "host_view", lambda array: None)
    _compiles_of_a_jacobian(5, identity=False)  # what a first kernel path compiles once per process (run alone)
    counts = [_compiles_of_a_jacobian(rows, identity=False) for rows in (9, 17, 65)]  # shapes no test compiled
    assert counts[0] == counts[1] == counts[2]
    assert counts[0][0] == 0  # no kernel of the engine's: the rows are unstacked and stacked as arrays


def test_fallback_warning_is_raised_when_enabled():
    x = np.linspace(-1.0, 1.0, 5)
    cube, sine = _cotangents(7, 5, np.float64, seed=3)
    with (
        vmap.fallback_warnings(),
        pytest.warns(vmap.FallbackWarning, match="CubeAndSineBackward could not be vectorized .*7 rows"),
    ):
        _batched(x, cube, sine)


def test_rows_given_to_backward_do_not_write_into_the_cotangent():
    seen = []

    class Keep(bg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.clone()

        @staticmethod
        def backward(ctx, g):
            seen.append(g.numpy())
            return bg.from_numpy(np.array(g.numpy()))

    a = bg.zeros(3, requires_grad=True)
    v = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    cotangent = bg.tensor(v)
    (g,) = bg.autograd.grad(Keep.apply(a), a, cotangent, is_grads_batched=True)
    np.testing.assert_array_equal(g.numpy(), v)
    assert [s.tolist() for s in seen] == v.tolist()
    for s in seen:  # a row's array is its own: writes into it do not reach the caller's cotangent
        s[...] = -1.0
    np.testing.assert_array_equal(cotangent.numpy(), v)
