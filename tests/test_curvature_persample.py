"""Per-sample gradient norms by ghost norms, the DP-SGD step built on them and the exact GGN diagonal
(batched_grad.curvature) against per-sample gradients formed by torch.func's vmap(grad) (torch 2.13) and by our own,
against per-sample clipping written by hand in torch, and against BackPACK's DiagGGNExact and a dense GGN. Every
model is built twice, in torch.nn and in bg.nn, with the same weights, in float64."""

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.func  # noqa: F401 - bg.func
import batched_grad.nn as nn
from batched_grad.curvature import (
    GhostClipping,
    _diag_ggn,
    _dp_sgd,
    diag_ggn,
    dp_sgd_step,
    per_sample_grad_norms,
    per_sample_grads,
)
from batched_grad.curvature._ghost import _matched_sq_norms

B = 6


def pair(build, seed=0):
    """(torch model, bg model) built by build(lib) with the same float64 weights."""
    torch.manual_seed(seed)
    t_model = build(torch).double()
    b_model = build(bg).double()
    b_model.load_state_dict({k: bg.tensor(v.detach().numpy()) for k, v in t_model.state_dict().items()})
    return t_model, b_model


def as_bg(t):
    return bg.tensor(t.numpy())


def torch_per_sample_grads(model, x, y):
    """{name: (B, *shape)} by torch.func.vmap(grad) over one sample's cross-entropy, the oracle."""
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}

    def loss(p, xi, yi):
        out = torch.func.functional_call(model, p, (xi.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, yi.unsqueeze(0))

    return torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(params, x, y)


def bg_per_sample_grads(model, x, y):
    """The same through batched_grad.func's vmap(grad)."""
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}

    def loss(p, xi, yi):
        out = bg.func.functional_call(model, p, (xi.unsqueeze(0),))
        return nn.functional.cross_entropy(out, yi.unsqueeze(0))

    return bg.func.vmap(bg.func.grad(loss), in_dims=(None, 0, 0))(params, x, y)


def norms_of(grads):
    return {k: np.linalg.norm(np.asarray(g.detach().numpy()).reshape(B, -1), axis=1) for k, g in grads.items()}


def check_against_oracles(build, x, y, ours_too=False):
    """Ghost norms, per parameter and in total, the formed per-sample gradients and the DP-SGD step's clipped sums
    equal to torch.func's; with `ours_too`, to batched_grad.func's vmap(grad) too (a model mixing every layer kind
    and a few others check it: it takes half a second a model)."""
    t_model, b_model = pair(build)
    expected = torch_per_sample_grads(t_model, x, y)
    ours_by_vmap = bg_per_sample_grads(b_model, as_bg(x), as_bg(y)) if ours_too else expected
    loss = nn.CrossEntropyLoss()
    ghost = per_sample_grad_norms(b_model, loss, as_bg(x), as_bg(y), per_parameter=True)
    formed = per_sample_grads(b_model, loss, as_bg(x), as_bg(y))
    assert set(ghost) == set(expected) == set(formed)
    for name, norms in norms_of(expected).items():
        np.testing.assert_allclose(ghost[name].numpy(), norms, rtol=1e-10, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(norms_of(ours_by_vmap)[name], norms, rtol=1e-10, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(formed[name].numpy(), expected[name].numpy(), rtol=1e-10, atol=1e-12)
    total = np.sqrt(sum(n**2 for n in norms_of(expected).values()))
    np.testing.assert_allclose(per_sample_grad_norms(b_model, loss, as_bg(x), as_bg(y)).numpy(), total, rtol=1e-10)
    # the DP-SGD step's clipped sum, layer by layer, against the formed gradients clipped by hand (half clipped)
    bound = float(np.median(total))
    dp_sgd_step(b_model, loss, as_bg(x), as_bg(y), max_grad_norm=bound, noise_multiplier=0.0)
    factors = np.minimum(1.0, bound / (total + 1e-6))
    for name, p in b_model.named_parameters():
        if p.requires_grad:
            clipped = np.einsum("i,i...->...", factors, expected[name].numpy()) / B
            np.testing.assert_allclose(p.grad.numpy(), clipped, rtol=1e-10, atol=1e-14, err_msg=name)


def labels(classes=3, seed=1):
    return torch.randint(0, classes, (B,), generator=torch.Generator().manual_seed(seed))


def inputs(*shape, seed=2):
    return torch.randn(B, *shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- one layer kind at a time


class Pooled:
    """A head for layers with extra axes: mean over the axes between the batch and the features, then Linear."""

    @staticmethod
    def build(lib, body, features, classes=3):
        class Head(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.body, self.out = body, lib.nn.Linear(features, classes)

            def forward(self, x):
                h = self.body(x)
                return self.out(h.reshape(h.shape[0], -1, h.shape[-1]).mean(1))

        return Head()


def test_linear_without_and_with_sequence_axes():
    check_against_oracles(
        lambda lib: lib.nn.Sequential(lib.nn.Linear(4, 5), lib.nn.Tanh(), lib.nn.Linear(5, 3)),
        inputs(4),
        labels(),
        ours_too=True,
    )
    # T (d_in + d_out) <= d_in d_out: the Gram matrices (T = 2); past it, the products (T = 8); two sequence axes
    for shape in [(2, 5), (8, 5), (3, 2, 5)]:
        check_against_oracles(
            lambda lib: Pooled.build(lib, lib.nn.Linear(5, 6, bias=shape[0] != 8), 6), inputs(*shape), labels()
        )


@pytest.mark.parametrize(
    "conv",
    [
        pytest.param(dict(dims=2, args=(2, 4, 3), kwargs=dict(padding=1)), marks=pytest.mark.slow),
        dict(dims=2, args=(4, 6, (3, 2)), kwargs=dict(stride=(2, 1), padding=(1, 0), groups=2, bias=False)),
        dict(dims=2, args=(4, 6, 3), kwargs=dict(stride=2)),  # 4 positions: by the Gram matrices
        pytest.param(dict(dims=2, args=(2, 3, 3), kwargs=dict(padding="same", dilation=2)), marks=pytest.mark.slow),
        dict(dims=2, args=(2, 3, 2), kwargs=dict(padding=(1, 2), padding_mode="replicate")),
        pytest.param(dict(dims=1, args=(2, 4, 4), kwargs=dict(padding="same")), marks=pytest.mark.slow),
        pytest.param(
            dict(dims=1, args=(2, 4, 3), kwargs=dict(padding=2, padding_mode="circular")), marks=pytest.mark.slow
        ),
        dict(dims=1, args=(4, 4, 2), kwargs=dict(stride=2, dilation=2, groups=4, padding=1, padding_mode="reflect")),
    ],
)
def test_convolutions(conv):
    name = f"Conv{conv['dims']}d"
    shape = (conv["args"][0], 7) if conv["dims"] == 1 else (conv["args"][0], 6, 5)

    def build(lib):
        layer = getattr(lib.nn, name)(*conv["args"], **conv["kwargs"])
        channels = conv["args"][1]
        flatten = lib.nn.Flatten(2)  # (B, C, positions)
        return lib.nn.Sequential(layer, lib.nn.Tanh(), flatten, Transpose(lib), lib.nn.Linear(channels, 3), Mean(lib))

    check_against_oracles(build, inputs(*shape), labels(), ours_too=conv["kwargs"].get("groups", 1) > 1)


def Transpose(lib):
    class T(lib.nn.Module):
        def forward(self, x):
            return x.transpose(1, 2)

    return T()


def Mean(lib):
    class M(lib.nn.Module):
        def forward(self, x):
            return x.mean(1)

    return M()


@pytest.mark.parametrize("tokens, vocabulary", [(3, 20), (9, 5)])  # Gram matrix; then the scattered gradient
def test_embedding_with_repeated_and_padding_indices(tokens, vocabulary):
    index = torch.randint(0, vocabulary, (B, tokens), generator=torch.Generator().manual_seed(3))
    index[0, :2] = 2  # repeated within a sample
    index[1, 0] = 1  # padding_idx
    check_against_oracles(
        lambda lib: Pooled.build(lib, lib.nn.Embedding(vocabulary, 4, padding_idx=1), 4), index, labels()
    )


def test_layer_norm_over_two_axes_and_without_bias():
    check_against_oracles(lambda lib: Pooled.build(lib, lib.nn.LayerNorm((2, 3)), 3), inputs(4, 2, 3), labels())
    check_against_oracles(lambda lib: Pooled.build(lib, lib.nn.LayerNorm(3, bias=False), 3), inputs(4, 3), labels())


def test_other_layers_by_vmap_grad():
    def build(lib):
        class Scale(lib.nn.Module):  # a parameter of a module with no rule
            def __init__(self):
                super().__init__()
                self.scale = lib.nn.Parameter(lib.linspace(0.5, 1.5, 4, dtype=lib.float64))

            def forward(self, x):
                return x * self.scale

        return lib.nn.Sequential(lib.nn.Linear(3, 4), Scale(), lib.nn.GroupNorm(2, 4), lib.nn.Linear(4, 3))

    check_against_oracles(build, inputs(3), labels())


def mixed(attention):
    """A model mixing the kinds: Embedding, LayerNorm, a Linear called twice, Conv1d, GroupNorm (by vmap(grad)), a
    Linear whose weight is frozen, ReLU(inplace=True) after it; with `attention`, MultiheadAttention too (whose
    out_proj its parent reads without calling it)."""

    def build(lib):
        n = lib.nn

        class Model(n.Module):
            def __init__(self):
                super().__init__()
                self.embed, self.norm = n.Embedding(12, 8, padding_idx=0), n.LayerNorm(8)
                self.attention = n.MultiheadAttention(8, 2, batch_first=True) if attention else None
                self.shared = n.Linear(8, 8)
                self.conv, self.group = n.Conv1d(8, 6, 3, padding=1), n.GroupNorm(2, 6)
                self.frozen = n.Linear(6, 6)
                self.frozen.weight.requires_grad_(False)
                self.relu, self.head = n.ReLU(inplace=True), n.Linear(6, 3)

            def forward(self, index):
                h = self.norm(self.embed(index))
                if self.attention is not None:
                    h = h + self.attention(h, h, h, need_weights=False)[0]
                h = self.shared(lib.tanh(self.shared(h)))
                h = self.group(self.conv(h.transpose(1, 2))).transpose(1, 2)
                return self.head(self.relu(self.frozen(h)).mean(1))

        return Model()

    return build


def test_a_model_mixing_the_layers(monkeypatch):
    # every clipped sum by the weighted-sum rules, none from per-sample gradients kept from the norms
    monkeypatch.setattr(_dp_sgd, "KEPT_ELEMENTS", 0)
    index = torch.randint(0, 12, (B, 5), generator=torch.Generator().manual_seed(4))
    check_against_oracles(mixed(attention=False), index, labels(), ours_too=True)


@pytest.mark.slow
def test_a_model_mixing_the_layers_with_attention():
    index = torch.randint(0, 12, (B, 5), generator=torch.Generator().manual_seed(4))
    check_against_oracles(mixed(attention=True), index, labels(), ours_too=True)


def test_both_routes_of_the_linear_identity_agree():
    rng = np.random.default_rng(0)
    A, G = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 6))
    for T in (1, 2, 4):  # the product of the two norms; the Gram matrices (T (5 + 6) <= 30); the products
        expected = (np.einsum("bto,bti->boi", G[:, :T], A[:, :T]) ** 2).sum((1, 2))
        ours = _matched_sq_norms(bg.tensor(A[:, :T]), bg.tensor(G[:, :T]))
        np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-12)


# ---------------------------------------------------------------- what is refused


def test_errors_name_the_problem():
    _, model = pair(lambda lib: lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 2)))
    x, y = as_bg(inputs(3)), as_bg(labels(2))
    with pytest.raises(ValueError, match=r"module 1 \(BatchNorm1d\) is in training mode"):
        per_sample_grad_norms(model, nn.CrossEntropyLoss(), x, y)
    model.eval()
    per_sample_grad_norms(model, nn.CrossEntropyLoss(), x, y)  # running statistics: samples independent
    with pytest.raises(ValueError, match="one loss per sample"):
        per_sample_grad_norms(model, lambda out, t: nn.functional.cross_entropy(out, t), x, y)
    with pytest.raises(ValueError, match="max_grad_norm must be a positive number, but got 0"):
        GhostClipping(model, 0)


def test_a_parameter_shared_by_two_called_modules_is_refused():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    with pytest.raises(NotImplementedError, match=r"shared by several called modules \(a.weight, b.weight\)"):
        per_sample_grad_norms(Tied(), nn.CrossEntropyLoss(), bg.randn(B, 3), bg.randint(0, 3, (B,)))


# ---------------------------------------------------------------- DP-SGD


def torch_dp_gradient(model, x, y, max_grad_norm, noise_multiplier, noise):
    """Per-sample clipping by hand in torch: formed gradients, factor min(1, C / (norm + 1e-6)), noise, mean."""
    grads = torch_per_sample_grads(model, x, y)
    norms = torch.cat([g.reshape(B, -1) for g in grads.values()], 1).norm(dim=1)
    factors = (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
    return [
        (torch.einsum("i,i...->...", factors, g) + noise_multiplier * max_grad_norm * z) / B
        for g, z in zip(grads.values(), noise)
    ], norms


def mlp(lib):
    return lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.ReLU(), lib.nn.Linear(6, 3))


@pytest.mark.parametrize("with_noise", [False, True])
def test_dp_sgd_step_equals_clipping_by_hand(with_noise):
    t_model, b_model = pair(mlp)
    x, y = inputs(4) * 3, labels()
    shapes = [p.shape for p in t_model.parameters()]
    noise = [
        torch.randn(s, dtype=torch.float64, generator=torch.Generator().manual_seed(i)) for i, s in enumerate(shapes)
    ]
    sigma = 0.8 if with_noise else 0.0
    expected, norms = torch_dp_gradient(t_model, x, y, 2.0, sigma, noise)
    before = [p.detach().numpy().copy() for p in b_model.parameters()]
    optimizer = bg.optim.SGD(b_model.parameters(), lr=0.1)
    step = dp_sgd_step(
        b_model,
        nn.CrossEntropyLoss(),
        as_bg(x),
        as_bg(y),
        max_grad_norm=2.0,
        noise_multiplier=sigma,
        optimizer=optimizer,
        noise=[as_bg(z) for z in noise],
    )
    assert (norms.numpy() > 2.0).any() and (norms.numpy() < 2.0).any()  # some samples clipped, some not
    np.testing.assert_allclose(step.per_sample_norms.numpy(), norms.numpy(), rtol=1e-10)
    for p, g, old in zip(b_model.parameters(), expected, before):
        np.testing.assert_allclose(p.grad.numpy(), g.numpy(), rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(p.detach().numpy(), old - 0.1 * g.numpy(), rtol=1e-10, atol=1e-14)
    assert step.loss.item() == pytest.approx(torch.nn.functional.cross_entropy(t_model(x), y).item(), rel=1e-12)


def test_ghost_clipping_draws_noise_from_its_generator():
    _, b_model = pair(mlp)
    x, y = as_bg(inputs(4)), as_bg(labels())

    def gradients(seed, expected_batch_size=None):
        generator = bg.Generator().manual_seed(seed)
        dp = GhostClipping(b_model, 1.0, 2.0, generator=generator, expected_batch_size=expected_batch_size)
        dp.step(nn.CrossEntropyLoss(), x, y)
        return [p.grad.numpy().copy() for p in b_model.parameters()]

    first, again, other = gradients(0), gradients(0), gradients(1)
    for a, b, c in zip(first, again, other):
        np.testing.assert_array_equal(a, b)
        assert not np.allclose(a, c)
    for a, b in zip(first, gradients(0, expected_batch_size=2 * B)):
        np.testing.assert_allclose(b, a / 2, rtol=1e-12)


@pytest.mark.slow
def test_compiled_steps_equal_eager_ones_with_fresh_noise_each_step():
    x, y = as_bg(inputs(4)), as_bg(labels())
    trained = {}
    for compiled in (False, True):
        _, b_model = pair(mlp)
        optimizer = bg.optim.SGD(b_model.parameters(), lr=0.5)
        generator = bg.Generator().manual_seed(7)
        dp = GhostClipping(b_model, 1.0, 0.5, generator=generator, compile=compiled)
        steps = [dp.step(nn.CrossEntropyLoss(), x, y, optimizer=optimizer) for _ in range(3)]
        trained[compiled] = [p.detach().numpy().copy() for p in b_model.parameters()]
        assert steps[0].loss.item() != steps[2].loss.item()
    for a, b in zip(trained[False], trained[True]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_drawing_noise_inside_a_users_compile_is_refused():
    _, b_model = pair(mlp)
    plain = GhostClipping(b_model, 1.0, 0.5)
    with pytest.raises(RuntimeError, match="every call would add the same noise"):
        bg.compile(lambda x, y: plain.step(nn.CrossEntropyLoss(), x, y))(as_bg(inputs(4)), as_bg(labels()))


def test_ghost_clipping_copies_outputs_once_an_in_place_change_is_seen():
    t_model, b_model = pair(
        lambda lib: lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.ReLU(inplace=True), lib.nn.Linear(6, 3))
    )
    x, y = inputs(4), labels()
    dp = GhostClipping(b_model, 1.0)
    norms = dp.per_sample_norms(nn.CrossEntropyLoss(), as_bg(x), as_bg(y))
    assert dp.clone_outputs
    expected = np.sqrt(sum(n**2 for n in norms_of(torch_per_sample_grads(t_model, x, y)).values()))
    np.testing.assert_allclose(norms.numpy(), expected, rtol=1e-10)


def test_ghost_norms_equal_opacus_ghost_norms():
    opacus = pytest.importorskip("opacus.grad_sample")
    t_model, b_model = pair(
        lambda lib: lib.nn.Sequential(lib.nn.Conv1d(2, 3, 3), lib.nn.Flatten(), lib.nn.Linear(12, 3))
    )
    x, y = inputs(2, 6), labels()
    wrapped = opacus.GradSampleModuleFastGradientClipping(t_model, loss_reduction="sum", max_grad_norm=1.0)
    torch.nn.functional.cross_entropy(wrapped(x), y, reduction="none").sum().backward()
    ours = per_sample_grad_norms(b_model, nn.CrossEntropyLoss(), as_bg(x), as_bg(y))
    np.testing.assert_allclose(ours.numpy(), wrapped.get_norm_sample().numpy(), rtol=1e-10)


# ---------------------------------------------------------------- the GGN diagonal


def cnn(lib):
    n = lib.nn
    return n.Sequential(
        n.Conv2d(2, 3, 3, padding=1), n.ReLU(), n.Flatten(), n.Linear(3 * 4 * 4, 5), n.Tanh(), n.Linear(5, 4)
    )


def dense_ggn_diagonal(model, loss_fn, x, y):
    """diag(J^T H J) with J the Jacobian of the flattened output and H the loss Hessian in it, by torch.func."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    output = model(x).detach()
    H = torch.func.hessian(lambda o: loss_fn(o, y))(output).reshape(output.numel(), output.numel())
    J = torch.func.jacrev(lambda p: torch.func.functional_call(model, p, (x,)).reshape(-1))(params)
    return {
        k: torch.einsum("ap,ab,bp->p", j.reshape(output.numel(), -1), H, j.reshape(output.numel(), -1)).reshape(
            params[k].shape
        )
        for k, j in J.items()
    }


@pytest.mark.parametrize("loss", ["CrossEntropyLoss", "MSELoss"])
def test_diag_ggn_equals_the_dense_ggns_diagonal(loss, monkeypatch):
    if loss == "MSELoss":  # the per-(column, sample) gradients formed one column at a time
        monkeypatch.setattr(_diag_ggn, "FORMED_ELEMENTS", 1)
    t_model, b_model = pair(cnn)
    x = inputs(2, 4, 4)
    y = labels(4) if loss == "CrossEntropyLoss" else inputs(4, seed=5)
    expected = dense_ggn_diagonal(t_model, getattr(torch.nn, loss)(), x, y)
    ours = diag_ggn(b_model, getattr(nn, loss)(), as_bg(x), as_bg(y))
    for name, value in expected.items():
        np.testing.assert_allclose(ours[name].numpy(), value.numpy(), rtol=1e-10, atol=1e-14, err_msg=name)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_diag_ggn_equals_backpacks(reduction):
    backpack = pytest.importorskip("backpack")
    from backpack.extensions import DiagGGNExact

    t_model, b_model = pair(cnn)
    x, y = inputs(2, 4, 4), labels(4)
    model, loss_fn = backpack.extend(t_model), backpack.extend(torch.nn.CrossEntropyLoss(reduction=reduction))
    with backpack.backpack(DiagGGNExact()):
        loss_fn(model(x), y).backward()
    ours = diag_ggn(b_model, nn.CrossEntropyLoss(reduction=reduction), as_bg(x), as_bg(y))
    for name, p in t_model.named_parameters():
        np.testing.assert_allclose(ours[name].numpy(), p.diag_ggn_exact.numpy(), rtol=1e-10, atol=1e-14, err_msg=name)
