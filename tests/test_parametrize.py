"""torch.nn.utils.parametrize, parametrizations.weight_norm / spectral_norm and the hook forms nn.utils.weight_norm /
spectral_norm against torch 2.13: a small model written once against a module, trained one step both ways, every
value and gradient compared. Spectral norm's power iteration starts from random vectors: the tests copy the same
ones into both modules."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.utils.parametrizations
import torch.nn.utils.parametrize

import batched_grad as bg
from batched_grad.nn.utils.parametrize import register_parametrization
from oracle import assert_same, raises_like_torch

X = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
TOL = dict(rtol=1e-5, atol=1e-6)


def _linear(m, n_in=3, n_out=4):
    layer = m.nn.Linear(n_in, n_out)
    with m.no_grad():
        layer.weight.copy_(m.tensor(np.linspace(-1, 1, n_in * n_out).reshape(n_out, n_in), dtype=m.float32))
        layer.bias.copy_(m.tensor(np.linspace(0.1, 0.4, n_out), dtype=m.float32))
    return layer


def _conv_transpose(m):
    layer = m.nn.ConvTranspose1d(3, 2, 2)
    with m.no_grad():
        layer.weight.copy_(m.tensor(np.linspace(-1, 0.8, 12).reshape(3, 2, 2), dtype=m.float32))
        layer.bias.zero_()
    return layer


def _symmetric(m):
    class Symmetric(m.nn.Module):
        def forward(self, w):
            return w.triu() + w.triu(1).transpose(-1, -2)

        def right_inverse(self, w):
            return w.triu()

    return Symmetric()


def _custom_parametrization(m):
    layer = _linear(m, 3, 3)
    m.nn.utils.parametrize.register_parametrization(layer, "weight", _symmetric(m))
    names = sorted(n for n, _ in layer.named_parameters())
    first = layer.weight
    layer(m.tensor(X, dtype=m.float32)).pow(2).sum().backward()
    grad = layer.parametrizations.weight.original.grad
    layer.weight = m.tensor(np.arange(9.0).reshape(3, 3), dtype=m.float32)  # right_inverse, then the chain
    assigned = layer.weight
    state = sorted(layer.state_dict())
    flags = (
        type(layer).__name__,
        m.nn.utils.parametrize.is_parametrized(layer),
        m.nn.utils.parametrize.is_parametrized(layer, "bias"),
        m.nn.utils.parametrize.type_before_parametrizations(layer).__name__,
    )
    m.nn.utils.parametrize.remove_parametrizations(layer, "weight")
    return (
        names,
        state,
        flags,
        type(layer).__name__,
        sorted(n for n, _ in layer.named_parameters()),
        (
            first,
            grad,
            assigned,
            layer.weight,
        ),
    )


def test_register_read_assign_and_remove_a_parametrization():
    ours, theirs = _custom_parametrization(bg), _custom_parametrization(torch)
    assert ours[:5] == theirs[:5]
    assert_same(ours[5], theirs[5], **TOL)


def _weight_norm_step(m, dim):
    layer = m.nn.utils.parametrizations.weight_norm(_linear(m), dim=dim)
    layer(m.tensor(X, dtype=m.float32)).pow(2).sum().backward()
    p = layer.parametrizations.weight
    return sorted(layer.state_dict()), (layer.weight, p.original0, p.original0.grad, p.original1.grad)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization_matches_torch(dim):
    ours, theirs = _weight_norm_step(bg, dim), _weight_norm_step(torch, dim)
    assert ours[0] == theirs[0]
    assert_same(ours[1], theirs[1], **TOL)


def _spectral_norm_steps(m, make, dim):
    m.manual_seed(0)
    layer = m.nn.utils.parametrizations.spectral_norm(make(m), dim=dim)
    sn = layer.parametrizations.weight[0]
    h, w = sn._u.shape[0], sn._v.shape[0]
    with m.no_grad():  # the same starting vectors for both
        sn._u.copy_(m.tensor(np.linspace(0.2, 1.0, h), dtype=m.float32))
        sn._v.copy_(m.tensor(np.linspace(1.0, -0.5, w), dtype=m.float32))
    x = m.tensor(np.linspace(-1, 1, 2 * 3 * 5).reshape(2, 3, 5), dtype=m.float32)
    x = x.reshape(2, 15)[:, :3] if isinstance(layer, m.nn.Linear) else x
    for _ in range(2):  # each read in training mode takes one power-iteration step
        layer(x).pow(2).sum().backward()
    training = (sn._u.clone(), sn._v.clone(), layer.parametrizations.weight.original.grad)
    layer.eval()
    return sorted(layer.state_dict()), training + (layer.weight,)


@pytest.mark.parametrize(
    "make, dim",
    [(_linear, None), (_linear, 1), (_conv_transpose, None)],
    ids=["linear", "linear_dim1", "conv_transpose"],
)
def test_spectral_norm_parametrization_matches_torch_from_the_same_vectors(make, dim):
    ours, theirs = _spectral_norm_steps(bg, make, dim), _spectral_norm_steps(torch, make, dim)
    assert ours[0] == theirs[0]
    assert_same(ours[1], theirs[1], **TOL)


def _cached_reads(m):
    layer = m.nn.utils.parametrizations.weight_norm(_linear(m))
    with m.nn.utils.parametrize.cached():
        same = layer.weight is layer.weight
    return same, layer.weight is layer.weight


def test_cached_computes_each_parametrization_once():
    assert _cached_reads(bg) == _cached_reads(torch) == (True, False)


def _legacy_weight_norm(m):
    layer = _linear(m)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m.nn.utils.weight_norm(layer)
    names = sorted(n for n, _ in layer.named_parameters())
    layer(m.tensor(X, dtype=m.float32)).pow(2).sum().backward()
    grads = (layer.weight_g.grad, layer.weight_v.grad)
    m.nn.utils.remove_weight_norm(layer)
    return [(w.category, str(w.message)) for w in caught], names, sorted(layer.state_dict()), grads + (layer.weight,)


def test_legacy_weight_norm_hook_matches_torch():
    ours, theirs = _legacy_weight_norm(bg), _legacy_weight_norm(torch)
    assert ours[:3] == theirs[:3]
    assert_same(ours[3], theirs[3], **TOL)


def _legacy_spectral_norm(m):
    layer = m.nn.utils.spectral_norm(_linear(m))
    with m.no_grad():
        layer.weight_u.copy_(m.tensor([0.5, 0.5, 0.5, 0.5]))
        layer.weight_v.copy_(m.tensor([0.6, 0.8, 0.0]))
    state = sorted(layer.state_dict())
    for _ in range(2):
        layer(m.tensor(X, dtype=m.float32)).pow(2).sum().backward()
    values = (layer.weight_u.clone(), layer.weight_orig.grad)
    m.nn.utils.remove_spectral_norm(layer)
    return state, sorted(layer.state_dict()), values + (layer.weight,)


def test_legacy_spectral_norm_hook_matches_torch():
    ours, theirs = _legacy_spectral_norm(bg), _legacy_spectral_norm(torch)
    assert ours[:2] == theirs[:2]
    assert_same(ours[2], theirs[2], **TOL)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.nn.utils.parametrize.register_parametrization(_linear(m), "nothing", m.nn.Identity()),
        lambda m: m.nn.utils.parametrize.remove_parametrizations(_linear(m), "weight"),
        lambda m: m.nn.utils.parametrize.register_parametrization(_linear(m), "weight", m.nn.Flatten(0)),
        lambda m: m.nn.utils.parametrizations.spectral_norm(_linear(m), n_power_iterations=0),
        lambda m: m.nn.utils.parametrizations.spectral_norm(_linear(m), dim=2),
        lambda m: m.nn.utils.parametrizations.spectral_norm(_linear(m), name="nothing"),
        lambda m: m.nn.utils.remove_weight_norm(_linear(m)),
        lambda m: m.nn.utils.remove_spectral_norm(_linear(m)),
        lambda m: m.nn.utils.spectral_norm(m.nn.utils.spectral_norm(_linear(m))),
    ],
    ids=[
        "no_such_tensor",
        "remove_unparametrized",
        "shape_change",
        "no_iterations",
        "dim_range",
        "no_such_weight",
        "remove_weight_norm",
        "remove_spectral_norm",
        "spectral_twice",
    ],
)
def test_errors_match_torch(call):
    raises_like_torch(call)


def test_import_forms():
    assert register_parametrization is bg.nn.utils.parametrize.register_parametrization


def _orthogonal_layer(m, orthogonal_map, shape=(3, 3), complex_=False):
    layer = m.nn.Linear(shape[1], shape[0], bias=False)
    values = np.linspace(-1.0, 1.2, shape[0] * shape[1]).reshape(shape) + np.eye(*shape)
    with m.no_grad():
        layer.weight.copy_(m.tensor(values, dtype=m.float32))
    m.nn.utils.parametrizations.orthogonal(layer, orthogonal_map=orthogonal_map)
    x = m.tensor(np.linspace(-1, 1, 2 * shape[1]).reshape(2, shape[1]), dtype=m.float32)
    layer(x).pow(3).sum().backward()
    p = layer.parametrizations.weight
    weight = layer.weight
    gram = weight.mT @ weight if shape[0] >= shape[1] else weight @ weight.mT
    return sorted(layer.state_dict()), (weight, gram, p.original.grad)


@pytest.mark.parametrize("orthogonal_map", [None, "matrix_exp", "cayley", "householder"])
def test_orthogonal_parametrization_of_a_square_weight_matches_torch(orthogonal_map):
    ours, theirs = _orthogonal_layer(bg, orthogonal_map), _orthogonal_layer(torch, orthogonal_map)
    assert ours[0] == theirs[0]
    assert_same(ours[1], theirs[1], rtol=1e-4, atol=1e-5)


def test_orthogonal_non_square_weight_has_orthonormal_columns():
    """Its base is completed by random columns (as torch's), so only the structure is compared."""
    bg.manual_seed(0)
    _, (weight, gram, grad) = _orthogonal_layer(bg, None, shape=(4, 2))
    np.testing.assert_allclose(gram.detach().numpy(), np.eye(2), atol=1e-5)
    assert grad.shape == (4, 2)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.nn.utils.parametrizations.orthogonal(m.nn.Linear(3, 3), orthogonal_map="qr"),
        lambda m: m.nn.utils.parametrizations.orthogonal(m.nn.Linear(3, 3), name="bias"),
        lambda m: m.nn.utils.parametrizations.orthogonal(m.nn.Linear(3, 3), name="nothing"),
    ],
    ids=["unknown_map", "vector", "no_such_weight"],
)
def test_orthogonal_errors_match_torch(call):
    raises_like_torch(call)


def test_orthogonal_householder_without_trivialization_is_refused_by_name():
    with pytest.raises(NotImplementedError, match="geqrf"):
        bg.nn.utils.parametrizations.orthogonal(
            bg.nn.Linear(3, 3), orthogonal_map="householder", use_trivialization=False
        )
