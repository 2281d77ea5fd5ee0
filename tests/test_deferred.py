"""Deferred recorded ops (batched_grad/_lazy.py): values are computed when read, once; shape errors still
raise at the call; a repeated structure's forward and backward run as one compiled program."""

import jax
import numpy as np
import pytest

import batched_grad as bg
from batched_grad import _lazy


def _mlp(x, params):
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        x = bg.tanh(x) if i < len(params) - 1 else x
    return x


@pytest.fixture
def computed_calls(kernel_calls, monkeypatch):
    """The names of the deferred calls computed one by one, by a kernel or on the host (_lazy._run)."""
    real = _lazy.on_host

    def counting(op, arrays, static):
        out = real(op, arrays, static)
        if out is not None:
            kernel_calls.append(op.name)
        return out

    monkeypatch.setattr(_lazy, "on_host", counting)
    return kernel_calls


def test_recorded_ops_are_computed_when_read_and_only_once(computed_calls):
    x = bg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = bg.exp(x) * 2
    z = y.sum()
    assert computed_calls == [] and z.shape == () and y.dtype == bg.float32  # metadata without computing
    np.testing.assert_allclose(z.item(), 2 * np.exp([0.5, -1.0, 2.0]).sum(), rtol=1e-6)
    computed = len(computed_calls)
    assert computed > 0
    np.testing.assert_allclose(y.detach().numpy(), 2 * np.exp([0.5, -1.0, 2.0]), rtol=1e-6)
    z.item()
    assert len(computed_calls) == computed  # y was computed on the way to z; nothing runs twice


def test_shape_errors_raise_at_the_call_not_when_read():
    x = bg.randn(3, requires_grad=True)
    add = bg.jax_function(lambda a, b: a + b)
    with pytest.raises(TypeError):
        add(x, bg.randn(4))


def test_steady_state_step_runs_one_program_and_no_per_op_kernels(kernel_calls):
    rng = np.random.default_rng(0)
    params = [(bg.tensor(rng.standard_normal((4, 4))), bg.tensor(rng.standard_normal(4))) for _ in range(3)]
    eye = bg.eye(4, dtype=bg.float64)

    def step(seed):
        x = bg.tensor(np.random.default_rng(seed).standard_normal(4), requires_grad=True)
        return x, bg.autograd.grad(_mlp(x, params), x, eye, is_grads_batched=True)[0]

    _lazy._seen.clear()
    for seed in range(_lazy.FUSE_AFTER + 1):
        step(seed)[1].numpy()
    del kernel_calls[:]
    programs, compiles = len(_lazy._program_cache), bg.compile_count()
    x, jac = step(99)
    jac = jac.numpy()
    assert kernel_calls == [] and len(_lazy._program_cache) == programs and bg.compile_count() == compiles
    with jax.enable_x64(True):  # a float64 jacrev of our ops (it traces kernels of its own)
        expected = np.asarray(jax.jacrev(lambda v: _mlp(bg.from_jax(v), params).jax())(x.detach().jax()))
    np.testing.assert_allclose(jac, expected, rtol=1e-10)


def test_the_fused_backward_also_computes_the_output_it_starts_from(kernel_calls):
    w = bg.tensor(np.linspace(-1, 1, 12).reshape(3, 4))

    def step(seed):
        x = bg.tensor(np.random.default_rng(seed).standard_normal(4), requires_grad=True)
        loss = (bg.tanh(w @ x) ** 2).sum()
        return x, loss, bg.autograd.grad(loss, x)[0]

    for seed in range(_lazy.FUSE_AFTER + 1):
        step(seed)
    del kernel_calls[:]
    programs = len(_lazy._program_cache)
    x, loss, g = step(99)
    assert loss._v.call.result is not None  # the loss came out of the backward's program: reading it runs nothing
    xv, wv = x.detach().numpy(), w.numpy()
    np.testing.assert_allclose(loss.item(), (np.tanh(wv @ xv) ** 2).sum(), rtol=1e-10)
    np.testing.assert_allclose(g.numpy(), wv.T @ (2 * np.tanh(wv @ xv) * (1 - np.tanh(wv @ xv) ** 2)), rtol=1e-10)
    assert kernel_calls == [] and len(_lazy._program_cache) == programs
    assert loss.grad_fn.call is None  # released with the graph: nodes keep no forward values alive


def test_a_detached_value_in_the_graph_is_a_constant_of_the_fused_program():
    def step(seed):
        x = bg.tensor(np.random.default_rng(seed).standard_normal(3), requires_grad=True)
        h = bg.tanh(x * 2)  # detach() computes h: the graph reads it as a constant, and h's call is computed
        return x, bg.autograd.grad((x * h.detach() + h).sum(), x)[0]

    # the detached value is computed on its own first, and that computation fuses on its third sighting: the
    # graph's structure (which of its calls are computed) settles then
    for seed in range(2 * _lazy.FUSE_AFTER + 1):
        step(seed)
    compiles = bg.compile_count()
    for seed in (7, 8):
        x, g = step(seed)
        h = np.tanh(2 * x.detach().numpy())
        np.testing.assert_allclose(g.numpy(), h + 2 * (1 - h**2), rtol=1e-10)
    assert bg.compile_count() == compiles


@pytest.mark.parametrize("fuse_after", [0, 10**9])
def test_values_match_eager_evaluation_in_both_tiers(monkeypatch, fuse_after):
    monkeypatch.setattr(_lazy, "FUSE_AFTER", fuse_after)
    data = np.linspace(-1, 1, 6).reshape(2, 3)
    x = bg.tensor(data, requires_grad=True)
    h = bg.tanh(x @ x.T) * x.sum()
    loss = (h**2).mean()
    (g,) = bg.autograd.grad(loss, x, retain_graph=True)
    with bg.no_grad():  # the same computation, eager
        x0 = bg.tensor(data)
        h0 = bg.tanh(x0 @ x0.T) * x0.sum()
    np.testing.assert_allclose(h.detach().numpy(), h0.numpy())  # an intermediate read after the backward
    np.testing.assert_allclose(loss.item(), float(np.mean(h0.numpy() ** 2)))
    assert g.shape == (2, 3)


def test_vmap_runs_a_per_sample_gradient_as_one_program_with_current_parameter_values(kernel_calls):
    import vmap

    w = bg.tensor(np.linspace(-1, 1, 12).reshape(3, 4), requires_grad=True)
    per_sample = vmap.vmap(lambda x: bg.autograd.grad(bg.tanh(w @ x).sum(), w)[0])
    X = bg.tensor(np.random.default_rng(0).standard_normal((5, 4)))

    def expected():
        wv, xv = w.detach().numpy(), X.numpy()
        return (1 - np.tanh(xv @ wv.T) ** 2)[:, :, None] * xv[:, None, :]

    for _ in range(_lazy.FUSE_AFTER + 1):  # the engine fuses the inner grad on its third call: one more structure
        np.testing.assert_allclose(per_sample(X).numpy(), expected(), rtol=1e-10)
    with bg.no_grad():
        w.mul_(2)  # a new parameter value is a new input, not a stale constant
    del kernel_calls[:]
    compiles = bg.compile_count()
    np.testing.assert_allclose(per_sample(X).numpy(), expected(), rtol=1e-10)
    assert kernel_calls == [] and bg.compile_count() == compiles


def test_vmap_traces_a_function_that_reads_values():
    import vmap

    def branchy(x):
        y = x * 2
        return y if float(abs(y).sum()) >= 0 else -y  # a Python branch on a value: not vectorizable

    X = bg.randn(4, 3)
    with pytest.raises(RuntimeError, match=r"vmap: It looks like you're calling \.item\(\) on a Tensor"):  # torch's
        vmap.vmap(branchy)(X)
    doubled = vmap.vmap(lambda x: x * 2 if x.shape[0] == 3 else x)(X)  # shape branches need no values
    np.testing.assert_allclose(doubled.numpy(), X.numpy() * 2)


def test_ops_outside_the_graph_compute_now_so_no_deferred_chain_grows():
    total = bg.zeros(())
    for step in range(3):
        x = bg.tensor([1.0, 2.0], requires_grad=True)
        loss = (x * step).sum()
        assert type(loss._v) is _lazy.Pending  # recorded: deferred
        total = total + loss.detach()  # not recorded: computed at once, as torch would
        assert type(total._v) is not _lazy.Pending
    assert total.item() == 9.0


def test_host_data_read_again_moves_to_the_device_once():
    w = bg.tensor(np.ones((3, 3), np.float32))
    x = bg.tensor(np.arange(3, dtype=np.float32), requires_grad=True)
    y = w @ x  # first read of each: passed to the program as is
    assert type(w._v) is np.ndarray and type(x._v) is np.ndarray
    z = w @ y  # w is read again: a weight, kept on the device from now on
    assert isinstance(w._v, jax.Array) and type(x._v) is np.ndarray
    np.testing.assert_allclose(z.detach().numpy(), np.full(3, 9.0))
    fresh = bg.tensor(np.arange(3, dtype=np.float32))
    d = fresh.detach()  # no op read it: the alias shares the host data (no device_put for a fresh hessian() input)
    assert type(d._v) is np.ndarray and d._v is fresh._v and (d * 2).tolist() == [0.0, 2.0, 4.0]
    d = x.detach()  # an op read x: it moves once, with its aliases (the functional API detaches its input per call)
    assert isinstance(x._v, jax.Array) and d._v is x._v and (d * 2).tolist() == [0.0, 2.0, 4.0]


def test_number_operands_reach_the_program_as_shared_device_constants():
    x = bg.tensor([1.0, -2.0], requires_grad=True)
    a, b = x * 2.0, x * 2.0
    (two_a,), (two_b,) = [[v for v in y._v.call.args if v is not y._v.call.args[0]] for y in (a, b)]
    assert two_a is two_b and isinstance(two_a, jax.Array)  # one device array per value, not a copy per call
    # a float is keyed by its exact bits: -0.0 and 0.0 stay distinct constants
    np.testing.assert_array_equal(np.signbit((x * -0.0).detach().numpy()), [True, False])
    np.testing.assert_array_equal(np.signbit((x * 0.0).detach().numpy()), [False, True])
    assert (bg.tensor([1, 2]) * True).tolist() == [1, 2] and (x**2).tolist() == [1.0, 4.0]


def test_a_number_exponent_is_compiled_in_so_xla_can_simplify_the_power():
    x = bg.tensor([0.0, -1.5, 2.0], requires_grad=True)
    y = x**2
    call = y._v.call
    assert len(call.args) == 1 and dict(call.sig.static)["exponent"] == 2  # a constant, not an operand
    hlo = jax.jit(lambda a: call.op.fn(a, **dict(call.sig.static))).lower(x._v).compile().as_text()
    assert " power(" not in hlo  # x * x, not a general power
    assert (x**0.5).tolist()[2] == pytest.approx(2**0.5) and (x**3).tolist() == [0.0, -3.375, 8.0]
