"""The backward runs as compiled programs cached by graph structure: count compiles, never time them."""

import jax
import jax.numpy as jnp
import numpy as np

import batched_grad as bg
from batched_grad import _lazy


def _training_step(seed):
    w = bg.tensor(np.random.default_rng(seed).standard_normal((8, 4)), requires_grad=True)
    x = bg.tensor(np.random.default_rng(seed + 1).standard_normal((16, 8)))
    loss = bg.tanh(x @ w).pow(2).mean() + (w * w).sum() * 0.01
    return bg.autograd.grad(loss, w)[0]


def test_compile_count_is_zero_for_a_second_graph_of_the_same_structure():
    _lazy._seen.clear()
    _training_step(0)
    before = bg.compile_count()
    g = _training_step(1)
    assert bg.compile_count() == before
    assert g.shape == (8, 4)


def test_steady_state_runs_one_fused_program_and_compiles_nothing():
    _lazy._seen.clear()
    for seed in range(_lazy.FUSE_AFTER + 1):  # per-node calls, then the fused program's one compile
        _training_step(seed)
    before = bg.compile_count()
    for seed in range(10, 15):
        g = _training_step(seed)
    assert bg.compile_count() == before
    w0 = np.random.default_rng(14).standard_normal((8, 4))
    x = np.random.default_rng(15).standard_normal((16, 8))
    with jax.enable_x64(True):
        expected = jax.grad(lambda w: (jnp.tanh(x @ w) ** 2).mean() + (w * w).sum() * 0.01)(w0)
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12)


_xla_compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda name, duration, **kwargs: _xla_compiles.append(name) if name.endswith("backend_compile_duration") else None
)


def test_new_shapes_reach_the_device_without_compiling():
    # jnp.asarray and jnp.zeros compile a small program for every new shape; factories and reads must not
    _xla_compiles.clear()
    for n in range(41, 45):
        made = [
            bg.zeros(n),
            bg.ones(n, 2),
            bg.eye(n),
            bg.randn(n),
            bg.arange(n),
            bg.full((n,), 2.0),
            bg.tensor(np.ones(n + 100)),
            bg.from_numpy(np.ones((n, 3))),
        ]
        assert all(isinstance(t.jax(), jax.Array) for t in made)
    assert _xla_compiles == []


def test_integer_indices_are_operands_so_every_position_shares_a_program():
    data = np.random.default_rng(0).standard_normal((8, 3, 4))
    x = bg.tensor(data, requires_grad=True)

    def row_grad(i):  # a per-row loop, as users write it: x[i] with a new i every call
        (g,) = bg.autograd.grad((bg.tanh(x[i, 1:, -1]) ** 2).sum(), x)
        return g

    for i in range(_lazy.FUSE_AFTER + 1):  # per-op kernels, then the fused program's one compile
        row_grad(i)
    before, xla_before = bg.compile_count(), len(_xla_compiles)
    rows = list(range(8)) + [-1]
    grads = [row_grad(i) for i in rows]
    assert bg.compile_count() == before and len(_xla_compiles) == xla_before
    for i, g in zip(rows, grads):
        expected = np.zeros_like(data)
        row = data[i, 1:, -1]
        expected[i, 1:, -1] = 2 * np.tanh(row) * (1 - np.tanh(row) ** 2)
        np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12)


def test_select_slices_and_writes_at_operand_positions_share_a_program_across_positions():
    import torch

    data = np.random.default_rng(0).standard_normal((6, 3))

    def fill(lib, x, i):  # rows written one at a time, and windows read, as loops over positions do
        z = lib.zeros(6, 3, dtype=x.dtype)
        z[i] = x.select(0, (i + 1) % 6) * 2
        z[i, 1:] = x[i, :2]
        z[i // 2 : i // 2 + 3 : 2, :2] = x[i : i + 1, 1:] ** 2
        return lib.autograd.grad((z * z).sum() + x[..., i % 2 : i % 2 + 2].exp().sum(), x)[0]

    x, tx = bg.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    for i in range(2 * _lazy.FUSE_AFTER + 1):  # per-op kernels, then fused programs (the write's, the graph's)
        fill(bg, x, i)
    before = bg.compile_count()
    for i in range(6):
        np.testing.assert_allclose(fill(bg, x, i).numpy(), fill(torch, tx, i).numpy(), rtol=1e-12)
    assert bg.compile_count() == before


def test_equal_number_operands_do_not_change_the_structure():
    x = bg.tensor(np.arange(3.0), requires_grad=True)

    def step(c):  # each 2.0 is one shared device constant; c == 2.0 must not make a new structure
        return bg.autograd.grad((x * c + x * x * 2.0 / 2.0).sum(), x)[0]

    for c in (3.0, 5.0, 7.0):  # per-op kernels, then the fused program's one compile
        step(c)
    before = bg.compile_count()
    for c in (2.0, 4.0, 2.0, 11.0):
        np.testing.assert_allclose(step(c).numpy(), c + 2 * np.arange(3.0))
    assert bg.compile_count() == before
