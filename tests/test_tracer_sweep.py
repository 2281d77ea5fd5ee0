"""No transform leaves a JAX tracer behind. Every ordered pair of transforms (grad, batched grad, create_graph, reverse
and forward Jacobians, the Hessian strategies, a hand-made forward-over-reverse Hessian, vmap.vmap with and without
chunk_size, gradients of a captured graph inside forward mode and vmap) runs three times interleaved on functions that
read tensors made on the host (bg.tensor, bg.randn, from_numpy, eye), a captured parameter and deferred values
computed from it; then every tensor involved is used in plain ops. Each result is compared with torch 2.13's. The
state-left-behind cases (a strict jvp of a function that ignores its input, a nested vmap returning the outer row)
run in the same sweep; `-m slow` runs it again in each engine tier. Also: a user's jax.jit, and Tensor code under a
forward-mode trace."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import batched_grad as bg
import batched_grad.autograd.functional as F
import vmap

_RNG = np.random.default_rng(7)
W_DATA = _RNG.uniform(-1, 1, (3, 3)).round(3).tolist()
M_DATA = _RNG.uniform(0.5, 1.5, 3).astype(np.float32)
P_DATA = _RNG.uniform(0.5, 1.5, 3).astype(np.float32)
X_DATA = _RNG.uniform(-1, 1, 3).astype(np.float32)
ROWS_DATA = _RNG.uniform(-1, 1, (4, 3)).astype(np.float32)
SEED = 11


def _randn():
    bg.manual_seed(SEED)
    return bg.randn(3)


B_DATA = _randn().numpy()


def _world(m):
    """The tensors the functions read, made on the host as a user makes them; for bg, fresh ones on every call."""
    b = _randn() if m is bg else torch.from_numpy(B_DATA.copy())
    p = m.tensor(P_DATA, requires_grad=True)
    return {
        "W": m.tensor(W_DATA),
        "b": b,
        "M": m.from_numpy(M_DATA.copy()),
        "E": m.eye(3),
        "p": p,
        "q": p * 2,
        "x": m.from_numpy(X_DATA.copy()),
        "rows": m.from_numpy(ROWS_DATA.copy()),
        "Y": m.tensor(ROWS_DATA[:2].tolist()),
        "loss": (p * p * 2).sum(),
    }


def f_vec(w, x):
    """A vector function of x that reads every tensor of the world."""
    return ((w["W"] @ x + w["b"]) * (w["E"] @ x)).tanh() * w["q"] * w["M"]


def f_scalar(w, x):
    return (f_vec(w, x) ** 2).sum()


def _input(w):
    return w["x"].detach().requires_grad_()


def _functional(m):
    return {bg: F, torch: TF}[m]


def _grad(m, w):
    x = _input(w)
    return m.autograd.grad(f_scalar(w, x), x)


def _grad_batched(m, w):  # the cotangents are the host-made identity E: a Jacobian
    x = _input(w)
    return m.autograd.grad(f_vec(w, x), x, w["E"], is_grads_batched=True)


def _grad_create_graph(m, w):
    x = _input(w)
    (g,) = m.autograd.grad(f_scalar(w, x), x, create_graph=True)
    return g, m.autograd.grad((g * g).sum(), x)[0]


def _jacobian(**options):
    return lambda m, w: _functional(m).jacobian(lambda x: f_vec(w, x), w["x"], **options)


def _jacobian_create_graph(m, w):
    x = _input(w)
    jac = _functional(m).jacobian(lambda z: f_vec(w, z), x, create_graph=True, vectorize=True)
    return jac, m.autograd.grad((jac * jac).sum(), x)[0]


def _hessian(**options):
    return lambda m, w: _functional(m).hessian(lambda x: f_scalar(w, x), w["x"], **options)


def _forward_over_reverse(m, w):
    functional = _functional(m)

    def gradient(x):
        return functional.jacobian(lambda z: f_scalar(w, z), x, create_graph=True, vectorize=True)

    # x requires grad: torch's inner jacobian would detach it otherwise, dropping its tangent (a zero Hessian)
    return functional.jacobian(gradient, _input(w), strategy="forward-mode", vectorize=True)


def _per_row(function, **options):
    """vmap.vmap of `function(m, w, row)` over the rows of w["rows"] (with `options`), and torch's loop over them."""

    def run(m, w):
        if m is bg:
            return vmap.vmap(lambda row: function(m, w, row), **options)(w["rows"])
        return torch.stack([function(m, w, row) for row in w["rows"]])

    return run


def _parameter_grad(m, w, row):
    return m.autograd.grad(f_scalar(w, row), w["p"], retain_graph=True)[0]  # q = 2 p's graph is walked again


def _row_jacobian(m, w, row):
    # inside vmap, torch.func's jacrev: torch refuses autograd.functional there (ours too); its loop uses the latter
    if m is bg:
        return bg.func.jacrev(lambda z: f_vec(w, z))(row)
    return _functional(m).jacobian(lambda z: f_vec(w, z), row)


def _captured_gradient(m, w, x):
    """x times the gradient of the captured graph of w["loss"] (built outside, computed when first read)."""
    return x * m.autograd.grad(w["loss"], w["p"], retain_graph=True)[0]


def _forward_mode_of_a_captured_gradient(m, w):
    return _functional(m).jacobian(
        lambda x: _captured_gradient(m, w, x), w["x"], strategy="forward-mode", vectorize=True
    )


def _forward_mode_of_a_captured_vjp(m, w):
    """The VJP of the captured q = 2 p with the traced x as its cotangent: the forward calls of q's graph, not yet
    computed, are computed outside the trace."""
    return _functional(m).jacobian(
        lambda v: m.autograd.grad(w["q"], w["p"], v, retain_graph=True)[0],
        w["x"],
        strategy="forward-mode",
        vectorize=True,
    )


def _strict_jvp_of_a_constant(m, w):
    """A strict jvp of a function whose output ignores its input raises torch's error, however often it runs."""
    with pytest.raises(RuntimeError) as error:
        _functional(m).jvp(lambda x: w["q"] * 2, w["x"], w["E"][0], strict=True)
    return str(error.value)


def _nested_vmap_of_the_outer_row(m, w):
    """An inner vmap returning the outer vmap's row: each row repeated, as torch.func.vmap gives."""
    vmap_ = vmap.vmap if m is bg else torch.func.vmap
    return vmap_(lambda row: vmap_(lambda y: row)(w["Y"]))(w["rows"])


TRANSFORMS = {
    "grad": _grad,
    "grad is_grads_batched": _grad_batched,
    "grad create_graph": _grad_create_graph,
    "jacobian": _jacobian(),
    "jacobian vectorize": _jacobian(vectorize=True),
    "jacobian forward-mode": _jacobian(vectorize=True, strategy="forward-mode"),
    "jacobian create_graph": _jacobian_create_graph,
    "hessian": _hessian(),
    "hessian vectorize": _hessian(vectorize=True),
    "hessian forward-mode": _hessian(vectorize=True, outer_jacobian_strategy="forward-mode"),
    "forward-over-reverse by hand": _forward_over_reverse,
    "vmap grad": _per_row(_parameter_grad),
    "vmap jacobian": _per_row(_row_jacobian),
    "vmap jacobian chunk_size": _per_row(_row_jacobian, chunk_size=3),
    "vmap function chunk_size": _per_row(lambda m, w, row: f_vec(w, row), chunk_size=2),
    "forward-mode of a captured gradient": _forward_mode_of_a_captured_gradient,
    "vmap of a captured gradient": _per_row(_captured_gradient),
    "forward-mode of a captured vjp": _forward_mode_of_a_captured_vjp,
    "strict jvp of a constant": _strict_jvp_of_a_constant,
    "nested vmap": _nested_vmap_of_the_outer_row,
}
_TORCH = {}


def _torch_result(name):
    if name not in _TORCH:
        _TORCH[name] = TRANSFORMS[name](torch, _world(torch))
    return _TORCH[name]


def _assert_matches(actual, expected):
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _assert_matches(a, e)
    elif isinstance(expected, str):
        assert actual == expected
    else:
        assert tuple(actual.shape) == tuple(expected.shape)
        expected = expected.detach().numpy()
        scale = max(1.0, float(np.abs(expected).max(initial=0.0)))  # float32 round-off is relative to the largest
        np.testing.assert_allclose(actual.detach().numpy(), expected, rtol=1e-5, atol=1e-6 * scale)


def _tensors(x):
    if isinstance(x, bg.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _tensors(item)]
    return []


def _use_in_plain_ops(tensors, expected):
    """Each tensor in ops outside any transform: a leaked tracer raises here."""
    for t, e in zip(tensors, expected):
        value = ((t.detach() * 2 + 1) - 1) / 2
        np.testing.assert_allclose(value.numpy(), e.detach().numpy(), rtol=1e-6, atol=1e-7)


def _run_interleaved(names, repeats=3):
    world, results = _world(bg), []
    for _ in range(repeats):
        for name in names:
            results.append((name, TRANSFORMS[name](bg, world)))
    for name, result in results:
        _assert_matches(result, _torch_result(name))
    reference = _world(torch)
    _use_in_plain_ops([world[k] for k in reference], [reference[k] for k in reference])
    for name, result in results:
        _use_in_plain_ops(_tensors(result), _tensors(_torch_result(name)))
    x = world["x"].detach().requires_grad_()  # and a plain backward through the world
    (g,) = bg.autograd.grad(f_scalar(world, x), x)
    x_torch = reference["x"].detach().requires_grad_()
    _assert_matches(g, torch.autograd.grad(f_scalar(reference, x_torch), x_torch)[0])


@pytest.mark.slow
@pytest.mark.parametrize("first", list(TRANSFORMS))
def test_each_transform_interleaved_with_every_other(first):
    for second in TRANSFORMS:
        _run_interleaved([first, second])


@pytest.mark.slow
@pytest.mark.parametrize("first", list(TRANSFORMS))
def test_each_transform_interleaved_with_every_other_in_each_engine_tier(first, engine_tier):
    for second in TRANSFORMS:
        _run_interleaved([first, second])


def test_a_users_jit_leaves_the_captured_tensors_it_reads_concrete():
    W = bg.tensor([[1.0, 2.0], [3.0, 4.0]])
    p = bg.tensor([1.0, 2.0], requires_grad=True)
    q = p * 3  # deferred: computed when first read, here inside the trace

    @jax.jit
    def f(a):
        x = bg.from_jax(a)
        return ((W @ x) * q.detach() + W @ x).jax()  # W read twice: it moves to the device inside the trace

    ones = jnp.ones(2, jnp.float32)
    np.testing.assert_allclose(f(ones), [12.0, 49.0])
    np.testing.assert_allclose(f(2 * ones), [24.0, 98.0])
    np.testing.assert_allclose((W * 1).numpy(), [[1.0, 2.0], [3.0, 4.0]])
    (g,) = bg.autograd.grad((q * q).sum(), p)
    np.testing.assert_allclose(g.numpy(), [18.0, 36.0])


def test_the_implicit_gradient_of_a_scalar_first_made_inside_a_trace_is_cached_concrete():
    @jax.jit
    def f(a):
        y = bg.from_jax(a).requires_grad_()
        with bg.enable_grad():
            (g,) = bg.autograd.grad((y * y).sum().reshape(1, 1, 1), y)  # a one-element shape of its own
        return g.jax()

    np.testing.assert_allclose(f(jnp.ones(2, jnp.float32)), [2.0, 2.0])
    z = bg.tensor([1.0, 2.0], requires_grad=True)
    (g,) = bg.autograd.grad((z * z).sum().reshape(1, 1, 1), z)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])


def test_an_in_place_op_inside_a_trace_on_tensors_made_outside_it_leaves_them_concrete():
    """An in-place op that reads no traced value, on tensors made outside the trace (on the device, and memory shared
    with NumPy), changes them as torch's does instead of leaving a tracer in them: in a forward-mode Jacobian (its
    function runs once, in torch under vmap) and in a user's jax.jit (its function runs once, when traced)."""

    def forward_mode(m):
        made = [m.ones(3), m.from_numpy(np.ones(3, np.float32))]

        def f(x):
            for t in made:
                t.add_(1)
            return x * made[0] * made[1]

        jacobian = _functional(m).jacobian(f, m.tensor(X_DATA), strategy="forward-mode", vectorize=True)
        return jacobian, [t * 2 for t in made]

    _assert_matches(forward_mode(bg), forward_mode(torch))
    counter = bg.zeros(())

    @jax.jit
    def f(a):
        counter.add_(1)
        return (bg.from_jax(a) * 2).jax()

    np.testing.assert_allclose(f(jnp.ones(2, jnp.float32)), [2.0, 2.0])
    assert (counter * 1).item() == 1.0


# ---- Tensor code under a forward-mode trace sees what torch's dual tensors see ------------------------------------


def test_detach_and_data_stop_the_tangent_of_a_forward_mode_jacobian():
    results = [
        _functional(m).jacobian(
            lambda x: x.detach() * x + x.data * x, m.tensor(X_DATA), strategy="forward-mode", vectorize=True
        )
        for m in (bg, torch)
    ]
    _assert_matches(*results)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_forward_mode_over_a_reverse_jacobian_follows_the_inputs_requires_grad(requires_grad):
    """torch's inner jacobian detaches an input that does not require grad (a zero Hessian) and keeps one that does."""

    def outer(m):
        def gradient(x):
            assert x.requires_grad == requires_grad
            return _functional(m).jacobian(lambda z: (z**3).sum(), x, create_graph=True, vectorize=True)

        x = m.tensor(X_DATA, requires_grad=requires_grad)
        return _functional(m).jacobian(gradient, x, strategy="forward-mode", vectorize=True)

    _assert_matches(outer(bg), outer(torch))


def test_a_fused_backward_inside_a_trace_computes_the_traced_forward_calls_and_no_captured_one(monkeypatch):
    """In a forward-over-reverse Hessian, the inner backward's fused program also computes the forward calls that
    read the traced input, none of them on its own; the captured deferred q = 2 p, which reads no traced value, is
    computed outside the trace, concrete."""
    from batched_grad import _lazy

    monkeypatch.setattr(_lazy, "FUSE_AFTER", 0)
    computed_alone = []
    run = _lazy._run
    monkeypatch.setattr(_lazy, "_run", lambda call: (computed_alone.append(call.op.name), run(call))[1])

    def hessian(m):
        p = m.tensor(P_DATA, requires_grad=True)
        q = p * 2
        with m.no_grad():
            h = m.func.hessian(lambda x: ((m.tensor(W_DATA) @ x).tanh() * q).pow(2).sum())(m.tensor(X_DATA))
        return h, q

    (h, q), (h_torch, q_torch) = hessian(bg), hessian(torch)
    assert computed_alone == ["mul"]  # q's call, outside the trace
    _assert_matches(h, h_torch)
    _use_in_plain_ops([q], [q_torch])
