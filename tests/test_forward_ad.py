"""batched_grad.autograd.forward_ad against torch 2.13: tangents of dual tensors through elementwise ops, products,
reductions, indexing, nn.functional ops and in-place updates; forward-mode Jacobian columns; tangents that are
differentiable by reverse mode; the level rules and torch's errors."""

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import batched_grad as bg
import batched_grad.autograd.forward_ad as fw
from oracle import assert_same, raises_like_torch, to_torch
from test_function_jvp_transforms import make_exp

RNG = np.random.default_rng(11)
X = bg.tensor(RNG.standard_normal((3, 4)))
V = bg.tensor(RNG.standard_normal((3, 4)))
W = bg.tensor(RNG.standard_normal((4, 5)))
LINEAR_W, LINEAR_B = RNG.standard_normal((5, 4)), RNG.standard_normal(5)
BILINEAR_W = RNG.standard_normal((5, 4, 4))

FUNCTIONS = {
    "elementwise": lambda m, x: (x.sin() * x.exp() + x**2 / (1 + x.abs())).tanh(),
    "matmul": lambda m, x: x @ m.tensor(W.numpy()) if m is bg else x @ to_torch(W),
    "reductions": lambda m, x: m.stack([x.sum(), x.mean(), x.norm(), x.logsumexp(dim=(0, 1)), x.amax()]),
    "per_dim": lambda m, x: x.var(dim=1) + x.prod(dim=1) + x.cumsum(1)[:, -1],
    "indexing": lambda m, x: x[1:, ::2] * x[m.tensor([0, 2])][:, :2],
    "shape": lambda m, x: m.cat([x.T.reshape(2, 6), x.flip(0).reshape(2, 6)]).unsqueeze(0).expand(2, 4, 6),
    "nn": lambda m, x: (
        m.nn.functional.log_softmax(m.nn.functional.gelu(x), dim=-1) + m.nn.functional.layer_norm(x, (4,))
    ),
    "where_max": lambda m, x: m.where(x > 0, x, x * 0.1) + m.maximum(x, x.flip(1)),
    "complex": lambda m, x: m.fft.rfft(x * x, dim=1).abs(),
    # ops whose node name depends on their operands (the tangent op is named from the op's own operands)
    "linear": lambda m, x: (
        m.nn.functional.linear(x, m.tensor(LINEAR_W), m.tensor(LINEAR_B))
        + m.nn.functional.linear(x.unsqueeze(0), m.tensor(LINEAR_W))[0]
        + m.nn.functional.linear(x[0], m.tensor(LINEAR_W), m.tensor(LINEAR_B))
    ),
    "bilinear": lambda m, x: m.nn.functional.bilinear(x, x.flip(0), m.tensor(BILINEAR_W), m.tensor(LINEAR_B)),
    "interpolate": lambda m, x: m.nn.functional.interpolate(x[None], scale_factor=2, mode="linear"),
}


def _jvp(module, ad, f, x, v):
    with ad.dual_level():
        out = f(module, ad.make_dual(x, v))
        return ad.unpack_dual(out)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_tangents_as_torch(name):
    f = FUNCTIONS[name]
    primal, tangent = _jvp(bg, fw, f, X, V)
    t_primal, t_tangent = _jvp(torch, tfw, f, to_torch(X), to_torch(V))
    assert_same(primal, t_primal, rtol=1e-5, atol=1e-6)
    assert_same(tangent, t_tangent, rtol=1e-5, atol=1e-6)


def test_jacobian_columns_by_forward_mode():
    x = bg.tensor(RNG.standard_normal(3), dtype=bg.float64)
    f = lambda m, x: m.stack([x[0] * x[1], x.sin().sum(), (x**3)[2]])  # noqa: E731
    columns = []
    with fw.dual_level():
        for i in range(3):
            columns.append(fw.unpack_dual(f(bg, fw.make_dual(x, bg.eye(3, dtype=bg.float64)[i]))).tangent)
    expected = torch.autograd.functional.jacobian(lambda t: f(torch, t), to_torch(x))
    assert_same(bg.stack(columns, 1), expected)


def test_inplace_update_carries_the_tangent():
    def f(m, x):
        y = x.clone()
        y.mul_(x)
        y[0] = 1.0  # a constant written: that row's tangent becomes 0
        return y.add_(x.cos())

    assert_same(_jvp(bg, fw, f, X, V).tangent, _jvp(torch, tfw, f, to_torch(X), to_torch(V)).tangent)


def test_tangent_is_differentiable_by_reverse_mode():
    x = bg.tensor(X.numpy(), requires_grad=True)
    tx = to_torch(x, requires_grad=True)
    with fw.dual_level():
        (g,) = bg.autograd.grad(fw.unpack_dual((fw.make_dual(x, V) ** 3).sum()).tangent, x)
    with tfw.dual_level():
        (tg,) = torch.autograd.grad(tfw.unpack_dual((tfw.make_dual(tx, to_torch(V)) ** 3).sum()).tangent, tx)
    assert_same(g, tg)


FORWARD_OVER_REVERSE = {
    "tanh_matmul": lambda m, x, w: (x @ w).tanh().pow(2).sum(),
    "softmax": lambda m, x, w: (m.nn.functional.softmax(x @ w, dim=-1) * w[0]).sum(),
    "layer_norm": lambda m, x, w: m.nn.functional.layer_norm(x * w[:, 1], (4,)).sin().sum(),
    "saved_output": lambda m, x, w: (make_exp(m).apply(x) @ w).sum(),  # the output is saved twice
    "intermediate": lambda m, x, w: ((x * x + 1).sqrt() / (w.abs() + 1).sum()).sum(),
}


@pytest.mark.parametrize("create_graph", [True, False])
@pytest.mark.parametrize("name", sorted(FORWARD_OVER_REVERSE))
def test_gradients_of_dual_inputs_carry_tangents(name, create_graph):
    """Forward over reverse with dual tensors: the gradients have the tangents of the backward's values, saved
    outputs included (a saved tensor keeps its tangent, as torch's)."""
    f = FORWARD_OVER_REVERSE[name]

    def run(m, ad):
        x = m.tensor(X.numpy(), dtype=m.float64, requires_grad=True)
        w = m.tensor(W.numpy(), dtype=m.float64, requires_grad=True)
        with ad.dual_level():
            dual = ad.make_dual(x, m.tensor(V.numpy(), dtype=m.float64))
            grads = m.autograd.grad(f(m, dual, w), (dual, w), create_graph=create_graph)
            return [tuple(t.detach() for t in ad.unpack_dual(g)) for g in grads]

    assert_same(run(bg, fw), run(torch, tfw))


TRANSFORMS_OF_DUAL_INPUTS = {
    "grad": lambda m, f, x: m.func.grad(lambda a: f(m, a).sum())(x),
    "vjp": lambda m, f, x: m.func.vjp(lambda a: f(m, a), x)[1](m.ones(3, 4, dtype=m.float64))[0],
    "grad_and_value": lambda m, f, x: m.func.grad_and_value(lambda a: f(m, a).sum())(x)[0],
    "jacrev": lambda m, f, x: m.func.jacrev(lambda a: f(m, a)[1])(x),
    "jacrev in chunks": lambda m, f, x: m.func.jacrev(lambda a: f(m, a)[1], chunk_size=3)(x),
}


@pytest.mark.parametrize("transform", TRANSFORMS_OF_DUAL_INPUTS)
def test_reverse_transforms_of_dual_inputs_carry_tangents(transform):
    """torch.func's reverse-mode transforms called on a dual tensor inside dual_level: forward over reverse, the
    gradient's tangent is the Hessian-vector product."""

    def run(m, ad):
        with ad.dual_level():
            dual = ad.make_dual(m.tensor(X.numpy(), dtype=m.float64), m.tensor(V.numpy(), dtype=m.float64))
            primal, tangent = ad.unpack_dual(TRANSFORMS_OF_DUAL_INPUTS[transform](m, FUNCTIONS["elementwise"], dual))
            return primal, tangent

    assert_same(run(bg, fw), run(torch, tfw), rtol=1e-12)


@pytest.mark.parametrize("rows", [4, 3, 1])
@pytest.mark.parametrize("create_graph", [False, True])
def test_batched_gradients_of_a_dual_input_carry_tangents(rows, create_graph):
    """autograd.grad(is_grads_batched=True) inside dual_level, also for a batch padded to a bucket of rows."""

    def run(m, ad):
        x = m.tensor([0.5, 1.0, 2.0, 1.5], dtype=m.float64, requires_grad=True)
        with ad.dual_level():
            dual = ad.make_dual(x, m.tensor([1.0, -1.0, 0.5, 2.0], dtype=m.float64))
            y = dual.sin() * dual.sum()
            (g,) = m.autograd.grad(
                y, dual, m.eye(4, dtype=m.float64)[:rows], is_grads_batched=True, create_graph=create_graph
            )
            return tuple(t.detach() for t in ad.unpack_dual(g))

    assert_same(run(bg, fw), run(torch, tfw), rtol=1e-12)


def test_a_dual_written_into_a_slice_of_a_plain_tensor_gives_it_a_tangent():
    def run(m, ad):
        with ad.dual_level():
            dual = ad.make_dual(m.tensor([0.5, 1.0], dtype=m.float64), m.tensor([1.0, 2.0], dtype=m.float64))
            out = m.zeros(3, 2, dtype=m.float64)
            out[0] = dual * 2
            out[1] = dual.sin()
            out[2, 1] = dual[0] * dual[1]
            return ad.unpack_dual(out).tangent.clone()

    assert_same(run(bg, fw), run(torch, tfw), rtol=1e-12)


def test_levels_and_plain_tensors():
    with fw.dual_level() as level:
        assert level == 0
        dual = fw.make_dual(X, V)
        assert dual._base is X and fw.unpack_dual(X).tangent is None
        assert fw.unpack_dual(dual.detach()).tangent is None
        assert fw.unpack_dual(dual.argmax()).tangent is None  # an integer result has no tangent
        primal, tangent = fw.unpack_dual(dual)
        assert fw.unpack_dual(primal).tangent is None and tangent is V
        assert isinstance(fw.unpack_dual(dual), fw.UnpackedDualTensor)
    assert fw.unpack_dual(dual).tangent is None  # closing the level drops the tangents
    assert fw.enter_dual_level() == 0
    fw.exit_dual_level()


@pytest.mark.parametrize(
    "call",
    [
        lambda m, ad: ad.make_dual(m.ones(3), m.ones(3)),
        lambda m, ad: _in_level(ad, lambda: ad.make_dual(m.ones(3), m.ones(4))),
        lambda m, ad: _in_level(ad, lambda: ad.make_dual(m.arange(3), m.arange(3))),
        lambda m, ad: _in_level(ad, lambda: ad.make_dual(m.ones(3), m.ones(3), level=3)),
        lambda m, ad: _in_level(ad, ad.enter_dual_level),
        lambda m, ad: _in_level(ad, lambda: ad.make_dual(ad.make_dual(m.ones(3), m.ones(3)), m.ones(3))),
    ],
)
def test_errors_as_torch(call):
    raises_like_torch(lambda m: call(m, tfw if m is torch else fw))


def _in_level(ad, f):
    with ad.dual_level():
        return f()
