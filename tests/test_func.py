"""batched_grad.func against torch.func 2.13: each case is written once against a library `m` and its `F = m.func`,
run with torch and with batched_grad, and every result compared (float64, rtol 1e-6)."""

import collections

import numpy as np
import pytest
import torch
import torch.func

import batched_grad as bg
import batched_grad.func
from oracle import assert_same
from vmap._pytree import flatten

RNG = np.random.default_rng(0)
X5 = RNG.standard_normal(5)
X3 = RNG.standard_normal(3)
W = RNG.standard_normal((3, 5))
XS = RNG.standard_normal((4, 5))
YS = RNG.standard_normal((4, 2))


def assert_tree(actual, expected, rtol=1e-6, atol=1e-10):
    """assert_same over pytrees: dicts compared key by key, in order."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected), (actual, expected)
        for k in expected:
            assert_tree(actual[k], expected[k], rtol, atol)
    elif isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected):
            assert_tree(a, e, rtol, atol)
    else:
        assert_same(actual, expected, rtol, atol)


def t(m, data):
    return m.tensor(data, dtype=m.float64)


def loss(m, x, w):
    return (m.tanh(w @ x) ** 2).sum() + (x * x).sum() * 0.1


CASES = {
    "grad": lambda m, F: F.grad(lambda x: loss(m, x, t(m, W)))(t(m, X5)),
    "grad argnums tuple": lambda m, F: F.grad(lambda x, w: loss(m, x, w), argnums=(0, 1))(t(m, X5), t(m, W)),
    "grad negative argnum": lambda m, F: F.grad(lambda x, w: loss(m, x, w), argnums=-1)(t(m, X5), t(m, W)),
    "grad has_aux": lambda m, F: F.grad(lambda x: (loss(m, x, t(m, W)), {"x2": x * 2}), has_aux=True)(t(m, X5)),
    "grad dict input": lambda m, F: F.grad(lambda p, x: loss(m, x, p["w"]) + p["b"].sum())(
        {"w": t(m, W), "b": t(m, X3)}, t(m, X5)
    ),
    "grad kwargs": lambda m, F: F.grad(lambda x, scale=1.0: loss(m, x, t(m, W)) * scale)(t(m, X5), scale=3.0),
    "grad unused input": lambda m, F: F.grad(lambda x, y: (x * 2).sum(), argnums=(0, 1))(t(m, X5), t(m, X3)),
    "grad_and_value": lambda m, F: F.grad_and_value(lambda x: loss(m, x, t(m, W)))(t(m, X5)),
    "grad_and_value has_aux": lambda m, F: F.grad_and_value(lambda x: (loss(m, x, t(m, W)), x.sum()), has_aux=True)(
        t(m, X5)
    ),
    "grad of grad": lambda m, F: F.grad(lambda x: F.grad(lambda y: loss(m, y, t(m, W)))(x).sum())(t(m, X5)),
    "grad with autograd.grad inside": lambda m, F: F.grad(
        lambda x: m.autograd.grad(loss(m, x, t(m, W)), x, create_graph=True)[0].pow(2).sum()
    )(t(m, X5)),
    "grad closing over its input's outer value": lambda m, F: F.grad(
        lambda x: F.grad(lambda y: (x * y).sum())(x).sum()
    )(t(m, X5)),
    "vjp": lambda m, F: _vjp(m, F),
    "vjp dict output has_aux": lambda m, F: _vjp_dict(m, F),
    "jvp": lambda m, F: F.jvp(lambda x, w: m.tanh(w @ x), (t(m, X5), t(m, W)), (t(m, X5[::-1].copy()), t(m, W) * 0.5)),
    "jvp has_aux": lambda m, F: F.jvp(lambda x: (m.sin(x), {"c": m.cos(x)}), (t(m, X5),), (t(m, X5),), has_aux=True),
    "jvp of a function that reads values": lambda m, F: F.jvp(
        lambda x: x * 2 if x.sum().item() > 0 else x * 3, (t(m, X5),), (t(m, X5),)
    ),
    "jacrev": lambda m, F: F.jacrev(lambda x: m.tanh(t(m, W) @ x))(t(m, X5)),
    "jacrev argnums tuple, tuple output": lambda m, F: F.jacrev(
        lambda x, w: (m.tanh(w @ x), (x * x).sum()), argnums=(0, 1)
    )(t(m, X5), t(m, W)),
    "jacrev dict input": lambda m, F: F.jacrev(lambda p: m.tanh(p["w"] @ p["x"]))({"w": t(m, W), "x": t(m, X5)}),
    "jacrev chunk_size": lambda m, F: F.jacrev(lambda x: m.tanh(t(m, W) @ x), chunk_size=2)(t(m, X5)),
    "jacrev has_aux": lambda m, F: F.jacrev(lambda x: (m.sin(x), x.sum()), has_aux=True)(t(m, X5)),
    "jacrev constant output": lambda m, F: F.jacrev(lambda x: (x * 2, t(m, X3)))(t(m, X5)),
    "jacrev one-element output, unused argnum": lambda m, F: F.jacrev(
        lambda x, w: loss(m, x, t(m, W)).reshape(1, 1), argnums=(0, 1)
    )(t(m, X5), t(m, W)),
    "jacfwd": lambda m, F: F.jacfwd(lambda x: m.tanh(t(m, W) @ x))(t(m, X5)),
    "jacfwd argnums tuple": lambda m, F: F.jacfwd(lambda x, w: m.tanh(w @ x), argnums=(0, 1))(t(m, X5), t(m, W)),
    "jacfwd has_aux": lambda m, F: F.jacfwd(lambda x: (m.sin(x), x.sum()), has_aux=True)(t(m, X5)),
    "hessian": lambda m, F: F.hessian(lambda x: loss(m, x, t(m, W)))(t(m, X5)),
    "hessian argnums tuple": lambda m, F: F.hessian(lambda x, w: loss(m, x, w), argnums=(0, 1))(t(m, X5), t(m, W)),
    "jacrev of jacrev": lambda m, F: F.jacrev(F.jacrev(lambda x: loss(m, x, t(m, W))))(t(m, X5)),
    "jacfwd of jacfwd": lambda m, F: F.jacfwd(F.jacfwd(lambda x: m.sin(x).prod()))(t(m, X5)),
    "linearize": lambda m, F: _linearize(m, F),
    "vmap of grad": lambda m, F: F.vmap(F.grad(lambda x: loss(m, x, t(m, W))))(t(m, XS)),
    "vmap of grad, weights unbatched": lambda m, F: F.vmap(F.grad(lambda w, x: loss(m, x, w)), in_dims=(None, 0))(
        t(m, W), t(m, XS)
    ),
    "vmap of jacrev": lambda m, F: F.vmap(F.jacrev(lambda x: m.tanh(t(m, W) @ x)))(t(m, XS)),
    "vmap of jacfwd": lambda m, F: F.vmap(F.jacfwd(lambda x: m.tanh(t(m, W) @ x)))(t(m, XS)),
    "vmap of hessian": lambda m, F: F.vmap(F.hessian(lambda x: loss(m, x, t(m, W))))(t(m, XS)),
    "vmap of vjp": lambda m, F: F.vmap(lambda x, v: F.vjp(lambda y: m.sin(y) * y, x)[1](v))(t(m, XS), t(m, XS) * 2),
    "vmap of jvp": lambda m, F: F.vmap(lambda x, v: F.jvp(lambda y: m.sin(y) * y, (x,), (v,)))(t(m, XS), t(m, XS)),
    "nested vmap of grad": lambda m, F: F.vmap(F.vmap(F.grad(lambda x: (m.sin(x) * x).sum())))(
        t(m, XS).reshape(2, 2, 5)
    ),
}


def _vjp(m, F):
    out, vjp_fn = F.vjp(lambda x, w: m.tanh(w @ x), t(m, X5), t(m, W))
    return out, vjp_fn(t(m, X3))


def _vjp_dict(m, F):
    out, vjp_fn, aux = F.vjp(lambda x: ({"s": m.sin(x), "c": m.cos(x)}, x.mean()), t(m, X5), has_aux=True)
    return out, vjp_fn({"s": t(m, X5), "c": t(m, X5) * 2}), aux


def _linearize(m, F):
    out, jvp_fn = F.linearize(lambda x: m.sin(x) * x, t(m, X5))
    return out, jvp_fn(t(m, X5)), jvp_fn(t(m, X5) * 3)


@pytest.mark.parametrize("name", list(CASES))
def test_transform_matches_torch_func(name):
    expected = CASES[name](torch, torch.func)
    for _ in range(2):  # a second call reuses what the first cached and must give the same numbers
        assert_tree(CASES[name](bg, bg.func), expected, rtol=1e-6, atol=1e-10)


def test_results_are_differentiable_outside_with_respect_to_captured_tensors():
    def run(m, F):
        w = m.tensor(W, dtype=m.float64, requires_grad=True)
        g = F.grad(lambda x: loss(m, x, w))(t(m, X5))
        jac = F.jacrev(lambda x: m.tanh(w @ x))(t(m, X5))
        per_sample = F.vmap(F.grad(lambda x: loss(m, x, w)))(t(m, XS))
        total = (g**2).sum() + jac.sum() + per_sample.pow(2).sum()
        return g.requires_grad, m.autograd.grad(total, w)

    assert_tree(run(bg, bg.func), run(torch, torch.func))


def test_no_grad_outside_gives_results_that_do_not_require_grad_as_torch():
    def run(m, F):
        w = m.tensor(W, dtype=m.float64, requires_grad=True)
        with m.no_grad():
            g = F.grad(lambda x: loss(m, x, w))(t(m, X5))
        return g.requires_grad, g

    assert_tree(run(bg, bg.func), run(torch, torch.func))


ERRORS = {
    "argnums out of range": lambda m, F: F.grad(lambda x: x.sum(), argnums=2)(t(m, X5)),
    "argnums empty": lambda m, F: F.grad(lambda x: x.sum(), argnums=())(t(m, X5)),
    "argnums repeated": lambda m, F: F.grad(lambda x, y: x.sum(), argnums=(0, 0))(t(m, X5), t(m, X5)),
    "argnums list": lambda m, F: F.grad(lambda x: x.sum(), argnums=[0])(t(m, X5)),
    "argnums float": lambda m, F: F.grad(lambda x: x.sum(), argnums=(0.0,))(t(m, X5)),
    "grad of a vector": lambda m, F: F.grad(lambda x: x * 2)(t(m, X5)),
    "grad of a non-tensor": lambda m, F: F.grad(lambda x: 3.0)(t(m, X5)),
    "grad has_aux without a pair": lambda m, F: F.grad(lambda x: x.sum(), has_aux=True)(t(m, X5)),
    "grad of a non-tensor input": lambda m, F: F.grad(lambda x: x * 2)(3.0),
    "vjp integer output": lambda m, F: F.vjp(lambda x: (x > 0).long(), t(m, X5)),
    "vjp cotangent structure": lambda m, F: F.vjp(lambda x: (x, x), t(m, X5))[1](t(m, X5)),
    "vjp non-tensor output": lambda m, F: F.vjp(lambda x: 3, t(m, X5)),
    "jvp primals not a tuple": lambda m, F: F.jvp(lambda x: x, t(m, X5), (t(m, X5),)),
    "jvp structure mismatch": lambda m, F: F.jvp(lambda x, y: x, (t(m, X5), t(m, X5)), (t(m, X5),)),
    "jvp strict": lambda m, F: F.jvp(lambda x: t(m, X3) * 2, (t(m, X5),), (t(m, X5),), strict=True),
    "jvp size mismatch": lambda m, F: F.jvp(lambda x: x, (t(m, X5),), (t(m, X3),)),
    "jacrev chunk_size 0": lambda m, F: F.jacrev(lambda x: x, chunk_size=0),
    "jacrev complex input": lambda m, F: F.jacrev(lambda x: x)(m.ones(2, dtype=m.complex128)),
    "jacfwd bad randomness": lambda m, F: F.jacfwd(lambda x: x, randomness="sometimes")(t(m, X5)),
    "grad of an integer input": lambda m, F: F.grad(lambda x: (x * 2.0).sum())(m.arange(3)),
    "jacrev of an integer input": lambda m, F: F.jacrev(lambda x: x * 2.0)(m.arange(3)),
    "vjp of an integer input": lambda m, F: F.vjp(lambda x: x * 2.0, m.arange(3)),
    "jvp integer primal": lambda m, F: F.jvp(lambda x: x * 2, (m.arange(3),), (t(m, X3),)),
    "jvp integer tangent": lambda m, F: F.jvp(lambda x: x * 2, (t(m, X3),), (m.arange(3),)),
    "linearize integer primal": lambda m, F: F.linearize(lambda x: x * 2, m.arange(3)),
    "functional_call non-tensor value": lambda m, F: F.functional_call(m.nn.Linear(3, 2), {"weight": 3.0}, (t(m, X3),)),
    "vmap chunk_size 0": lambda m, F: F.vmap(lambda x: x, chunk_size=0),
    "vmap chunk_size negative": lambda m, F: F.vmap(lambda x: x, chunk_size=-2.5),
    "linearize tangent structure": lambda m, F: _linearized(m, F)(t(m, X5)),
    "linearize tangent in a list": lambda m, F: _linearized(m, F)(t(m, X5), [t(m, X5)]),
    "linearize tangent shape": lambda m, F: _linearized(m, F)(t(m, X5), t(m, X3)),
    "linearize tangent dtype": lambda m, F: _linearized(m, F)(t(m, X5), t(m, X5).float()),
}


def test_jvp_takes_a_tangent_in_its_primals_dtype_as_torch():
    def run(m, F):
        return F.jvp(lambda x: m.sin(x) * x, (t(m, X5),), (t(m, X5).float(),))

    assert_tree(run(bg, bg.func), run(torch, torch.func))


def _linearized(m, F):
    """The jvp_fn of a function of two tensors, for the checks of its tangents."""
    return F.linearize(lambda x, y: m.sin(x) * y, t(m, X5), t(m, X5))[1]


def raised(case, m):
    """The type and message of what `case` raises with library `m`."""
    with pytest.raises(Exception) as error:
        case(m, m.func)
    return type(error.value), str(error.value)


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_as_torch_func(name):
    assert raised(ERRORS[name], bg) == raised(ERRORS[name], torch)


# ---- functional_call and stack_module_state ----------------------------------------------------------------------


def _model(m, seed):
    torch.manual_seed(seed)
    ref = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    if m is torch:
        return ref
    model = bg.nn.Sequential(bg.nn.Linear(5, 4), bg.nn.Tanh(), bg.nn.Linear(4, 2)).double()
    with bg.no_grad():
        for p, r in zip(model.parameters(), ref.parameters()):
            p.copy_(bg.tensor(r.detach().numpy()))
    return model


def test_functional_call_and_per_sample_gradients_as_torch():
    def run(m, F):
        model = _model(m, 0)
        params = {k: v.detach() for k, v in model.named_parameters()}
        doubled = {k: v * 2 for k, v in params.items()}
        x, y = t(m, XS), t(m, YS)

        def sample_loss(p, xi, yi):
            return ((F.functional_call(model, p, (xi[None],)) - yi) ** 2).sum()

        per_sample = F.vmap(F.grad(sample_loss), in_dims=(None, 0, 0))(params, x, y)
        split = F.functional_call(model, ({"0.weight": params["0.weight"]}, {"0.bias": params["0.bias"] * 0}), x)
        return (
            F.functional_call(model, doubled, x),
            F.functional_call(model, doubled, args=(x,)),
            split,
            per_sample,
            model(x),
        )

    assert_tree(run(bg, bg.func), run(torch, torch.func))


def test_model_ensembling_with_stack_module_state_as_torch():
    def run(m, F):
        models = [_model(m, seed) for seed in range(3)]
        params, buffers = F.stack_module_state(models)
        base = models[0]

        def one(p, b, x):
            return F.functional_call(base, (p, b), (x,))

        out = F.vmap(one, in_dims=(0, 0, None))(params, buffers, t(m, XS))
        return params, buffers, [v.requires_grad for v in params.values()], out

    assert_tree(run(bg, bg.func), run(torch, torch.func))


MODULE_ERRORS = {
    "strict missing": lambda m, F: F.functional_call(
        _model(m, 0), {"0.weight": t(m, W[:, :4].T.copy())}, (t(m, XS),), strict=True
    ),
    "strict unexpected": lambda m, F: F.functional_call(
        _model(m, 0), {**dict(_model(m, 0).named_parameters()), "extra": t(m, X3)}, (t(m, XS),), strict=True
    ),
    "repeated keys": lambda m, F: F.functional_call(
        _model(m, 0), ({"0.bias": t(m, X3)}, {"0.bias": t(m, X3)}), (t(m, XS),)
    ),
    "not a dict": lambda m, F: F.functional_call(_model(m, 0), 3, (t(m, XS),)),
    "no models": lambda m, F: F.stack_module_state([]),
    "mixed classes": lambda m, F: F.stack_module_state([m.nn.Linear(2, 2), m.nn.Tanh()]),
}


@pytest.mark.parametrize("name", list(MODULE_ERRORS))
def test_module_helper_errors_as_torch(name):
    assert raised(MODULE_ERRORS[name], bg) == raised(MODULE_ERRORS[name], torch)


def test_tied_weights_are_replaced_together_unless_tie_weights_is_false():
    def run(m, F):
        model = m.nn.Sequential(m.nn.Linear(2, 2, bias=False), m.nn.Linear(2, 2, bias=False)).double()
        with m.no_grad():
            model[0].weight.copy_(m.tensor([[1.0, 2.0], [3.0, 4.0]]))
        model[1].weight = model[0].weight
        new = {"0.weight": m.eye(2, dtype=m.float64) * 3}
        x = m.ones(1, 2, dtype=m.float64)
        return F.functional_call(model, new, (x,)), F.functional_call(model, new, (x,), tie_weights=False)

    assert_tree(run(bg, bg.func), run(torch, torch.func))


def test_the_module_is_left_as_it_was():
    model = _model(bg, 0)
    before = collections.OrderedDict((k, v) for k, v in model.named_parameters())
    with pytest.raises(RuntimeError):
        bg.func.functional_call(model, {"0.weight": bg.ones(2, 2, dtype=bg.float64)}, (bg.ones(3, 5),))
    assert all(a is b for a, b in zip(before.values(), dict(model.named_parameters()).values()))


@pytest.mark.parametrize(
    "name", ["grad", "jacrev", "jacfwd", "hessian", "vmap of grad", "vmap of jacrev", "jvp", "jacrev of jacrev"]
)
def test_a_repeated_transform_compiles_nothing_after_its_first_calls(name):
    for call in range(7):
        before = bg.compile_count()
        for leaf in flatten(CASES[name](bg, bg.func))[0]:
            leaf.numpy()
        if call >= 5:  # a structure runs per-op kernels twice, then one program (a nested one's inner, then outer)
            assert bg.compile_count() == before, (name, call)


def test_forward_mode_results_are_differentiable_with_respect_to_captured_tensors():
    """A PINN-style loss: derivatives of a model's output with respect to its input by forward mode, then the
    gradient of a loss of them with respect to the model's weights."""

    def run(m, F):
        w = m.tensor(W, dtype=m.float64, requires_grad=True)
        u = lambda x: m.tanh(w @ x).sum()  # noqa: E731
        x = t(m, X5)
        _, u_x = F.jvp(u, (x,), (m.ones(5, dtype=m.float64),))
        jac = F.jacfwd(lambda v: m.tanh(w @ v))(x)
        hess = F.hessian(u)(x)
        loss = u_x**2 + jac.pow(2).sum() + hess.diagonal().sum()
        with m.no_grad():
            off = F.jacfwd(lambda v: m.tanh(w @ v))(x)
        return u_x.requires_grad, off.requires_grad, m.autograd.grad(loss, w)

    assert_tree(run(bg, bg.func), run(torch, torch.func))


def test_forward_mode_jacobians_are_differentiable_with_respect_to_their_inputs():
    def run(m, F):
        x = m.tensor(X5, dtype=m.float64, requires_grad=True)
        jac = F.jacfwd(lambda v: m.sin(v) * v.sum())(x)
        hess = F.hessian(lambda v: (m.sin(v) * v).sum())(x)
        return jac.requires_grad, hess.requires_grad, m.autograd.grad(jac.pow(2).sum() + hess.sum(), x)

    assert_tree(run(bg, bg.func), run(torch, torch.func))
