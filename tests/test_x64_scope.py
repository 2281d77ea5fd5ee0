"""batched_grad's float64 and int64 tensors are 64-bit, while a user's own JAX code keeps JAX's defaults (32-bit):
importing batched_grad or calling it does not switch on jax_enable_x64 for the process (batched_grad/_x64.py)."""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap
from oracle import assert_same

# values that 32 bits cannot hold: float32 rounds 1 + 1e-12 to 1, and int32 cannot hold 2**40
FINE = [1.0 + 1e-12, -2.0 + 3e-13, 0.5]
BIG = [2**40, 2**40 + 3]


def assert_jax_defaults_are_32_bit():
    assert jnp.array(1.0).dtype == jnp.float32
    assert jnp.arange(3).dtype == jnp.int32
    assert not jax.config.jax_enable_x64


def workload(m):
    """Tutorial-style float64/int64 code: ops, a backward, a gradient, a Jacobian, a batched VJP, an SGD step."""
    x = m.tensor(FINE, dtype=m.float64, requires_grad=True)
    w = m.tensor([[1.0 + 1e-12, 2.0], [3.0, 4.0 - 1e-12], [0.5, 0.25]], dtype=m.float64, requires_grad=True)
    y = m.tanh(x @ w) * 3 + 1e-13
    loss = (y**2).sum()
    loss.backward(retain_graph=True)
    (gx,) = m.autograd.grad(loss, x, create_graph=True)
    rows = m.autograd.grad(y, x, m.eye(2, dtype=m.float64), retain_graph=True, is_grads_batched=True)[0]
    jac = m.autograd.functional.jacobian(lambda v: m.exp(v) * (1 + 1e-12), x.detach())
    sgd = m.optim.SGD([w], lr=1e-12)
    sgd.step()
    floats = [y, loss, x.grad, gx, rows, jac, w.detach().clone(), m.tensor(FINE, dtype=m.float64) - 1]
    return floats, [m.tensor(BIG) * 3 + 1, m.arange(2**40, 2**40 + 2)]


def test_float64_and_int64_tensors_are_64_bit_as_torch_while_jax_keeps_its_defaults():
    assert_jax_defaults_are_32_bit()
    for _ in range(2):  # compiled programs and caches from the first run give the same numbers
        (floats, ints), (expected_floats, expected_ints) = workload(bg), workload(torch)
        assert_same(floats, expected_floats, rtol=1e-10, atol=0)  # float32 is about 1e-7 off
        assert_same(ints, expected_ints, rtol=0, atol=0)
        assert_jax_defaults_are_32_bit()
    a = jnp.asarray(np.float64(1.0) + 1e-12)  # the user's JAX after ours: float32 as before
    assert a.dtype == jnp.float32 and float(a) == 1.0


def test_vmap_and_per_sample_gradients_are_64_bit():
    w = bg.tensor([1.0 + 1e-12, 2.0, 3.0], dtype=bg.float64, requires_grad=True)
    xs = bg.tensor(np.array([FINE, FINE[::-1]]), dtype=bg.float64)
    per_sample = vmap.vmap(lambda x: bg.autograd.grad(((w * x) ** 2).sum(), w)[0])(xs)
    expected = 2 * np.array([FINE, FINE[::-1]]) ** 2 * np.array([1.0 + 1e-12, 2.0, 3.0])
    assert per_sample.dtype is bg.float64
    np.testing.assert_allclose(per_sample.numpy(), expected, rtol=1e-15)
    assert_jax_defaults_are_32_bit()


def test_an_error_inside_a_call_leaves_jax_defaults_as_they_were():
    with pytest.raises(RuntimeError):
        bg.ones(2, dtype=bg.float64) @ bg.ones(3, dtype=bg.float64)
    with pytest.raises(RuntimeError):
        bg.autograd.grad(bg.ones(2, requires_grad=True).sum(), bg.ones(2))
    assert_jax_defaults_are_32_bit()


def test_a_user_who_enables_64_bit_jax_keeps_it():
    with jax.enable_x64(True):
        y = bg.tensor(FINE, dtype=bg.float64) * 2
        assert jnp.array(1.0).dtype == jnp.float64
    assert_jax_defaults_are_32_bit()
    np.testing.assert_array_equal(y.numpy(), np.array(FINE) * 2)


def test_each_thread_gets_64_bit_tensors_and_keeps_jax_defaults():
    results, errors = {}, []

    def run(k):
        try:
            x = bg.tensor(FINE, dtype=bg.float64, requires_grad=True)
            (g,) = bg.autograd.grad((x * x * k).sum(), x)
            results[k] = (g.numpy(), jnp.array(1.0).dtype)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, (g, default) in results.items():
        np.testing.assert_array_equal(g, 2 * k * np.array(FINE))
        assert default == jnp.float32


def test_our_ops_inside_a_users_32_bit_jax_jit_stay_32_bit():
    @jax.jit
    def f(a):
        return (bg.from_jax(a).tanh() * 2 + 1.5).jax()

    out = f(jnp.linspace(-1, 1, 4))
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(out, np.tanh(np.linspace(-1, 1, 4, dtype=np.float32)) * 2 + 1.5, rtol=1e-6)
    assert_jax_defaults_are_32_bit()
