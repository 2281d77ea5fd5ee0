"""The torch.func Jacobians-and-Hessians tutorial's asserts, in float32 with torch.allclose's default tolerances
(rtol=1e-5, atol=1e-8), on models with saturated units: a Jacobian row by row with vjp, the same rows under vmap,
jacrev and jacfwd agree, and so do the Hessians of hessian, jacfwd(jacrev), jacfwd(jacfwd) and jacrev(jacrev). Rows
of one loop run in different tiers (the first ones per node, later ones as a fused program), so any op whose value
depends on its tier shows here (test_tier_agreement.py checks every unary op)."""

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.nn.functional as F
from batched_grad.func import hessian, jacfwd, jacrev, vjp, vmap

D = 16


def _params(seed, *shapes, scale=3.0):
    rng = np.random.default_rng(seed)
    return [bg.tensor((rng.standard_normal(s) * scale).astype(np.float32)) for s in shapes]


def _tanh_layer(weight, bias, x):
    return F.linear(x, weight, bias).tanh()


def _smooth_net(weight, bias, x):
    """sigmoid, softplus and gelu units, many of them saturated."""
    h = F.gelu(F.linear(x, weight, bias))
    return F.softplus(h - 4.0).sigmoid() + F.linear(x, weight, bias).sigmoid() * 0.5


MODELS = {"linear-tanh": _tanh_layer, "sigmoid-softplus-gelu": _smooth_net}
SLOW_ON_THE_NET = ["linear-tanh", pytest.param("sigmoid-softplus-gelu", marks=pytest.mark.slow)]  # 2-4 s each


def _allclose(a, b, atol=1e-8):
    return torch.allclose(torch.tensor(np.array(a.numpy())), torch.tensor(np.array(b.numpy())), atol=atol)


def _setup(name, seed=0):
    weight, bias, x = _params(seed, (D, D), (D,), (D,))
    model = MODELS[name]
    units = F.linear(x, weight, bias).abs()
    assert (units > 5).sum().item() >= 3  # saturated units
    return model, weight, bias, x


@pytest.mark.parametrize("name", MODELS)
def test_jacobians_of_a_loop_of_vjps_vmap_jacrev_and_jacfwd_agree(name):
    model, weight, bias, x = _setup(name)
    _, vjp_fn = vjp(lambda x: model(weight, bias, x), x)
    unit_vectors = bg.eye(D)
    loop = bg.stack([vjp_fn(v)[0] for v in unit_vectors])
    (vmapped,) = vmap(vjp_fn)(unit_vectors)
    assert _allclose(vmapped, loop)
    assert _allclose(jacrev(model, argnums=2)(weight, bias, x), loop)
    assert _allclose(jacfwd(model, argnums=2)(weight, bias, x), loop)


@pytest.mark.parametrize("name", SLOW_ON_THE_NET)
def test_the_same_jacobian_again_and_batched_agrees(name):
    model, weight, bias, x = _setup(name, seed=1)
    first = jacrev(model, argnums=2)(weight, bias, x)
    for _ in range(3):  # later calls of the same structure run as one fused program
        assert _allclose(jacrev(model, argnums=2)(weight, bias, x), first)
    xs = bg.stack([x, x * 0.5])
    batched = vmap(jacrev(model, argnums=2), in_dims=(None, None, 0))(weight, bias, xs)
    assert _allclose(batched[0], first)


@pytest.mark.parametrize("name", SLOW_ON_THE_NET)
def test_hessians_agree(name):
    model, weight, bias, x = _setup(name, seed=2)
    hess = hessian(model, argnums=2)(weight, bias, x)
    # each composition sums the second-order terms in its own order: torch's rtol, and its atol taken relative to the
    # Hessian's scale (entries that cancel to ~1e-6 of it differ by float32 roundings that depend on the CPU's FMA)
    atol = 1e-5 * float(hess.abs().max())
    for outer, inner in ((jacfwd, jacrev), (jacfwd, jacfwd), (jacrev, jacrev)):
        assert _allclose(outer(inner(model, argnums=2), argnums=2)(weight, bias, x), hess, atol)
