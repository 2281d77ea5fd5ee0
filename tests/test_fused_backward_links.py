"""First-order gradients taken with create_graph=True link to what torch's derivative of each op reads: all the
inputs where torch's backward is one node (native_layer_norm_backward, convolution_backward, threshold_backward,
nll_loss_backward, ...), and only what the math reads, outside masks, where torch composes differentiable ops
(clamp, maximum, the margin losses). For each op and each choice of inputs that require grad, every gradient's
requires_grad must be torch's, and the gradients of its gradients (allow_unused=True) torch's values, None where
torch's are None."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import to_numpy

RNG = np.random.default_rng(29)


def uniform(shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape)


def F(m):
    return m.nn.functional


def _running(m):
    return m.zeros(4, dtype=m.float64), m.ones(4, dtype=m.float64)


def _mha(m, q, k, v, w, b, ow, ob):
    return F(m).multi_head_attention_forward(q, k, v, 4, 2, w, b, None, None, False, 0.0, ow, ob, need_weights=False)[0]


# name: (the op applied to float64 leaves, the leaves' values)
CASES = {
    # torch's backward is one node that reads every input
    "layer_norm": (lambda m, x, w, b: F(m).layer_norm(x, (4,), w, b), [uniform((3, 4)), uniform(4), uniform(4)]),
    "layer_norm_no_weight": (lambda m, x, b: F(m).layer_norm(x, (4,), None, b), [uniform((3, 4)), uniform(4)]),
    "prelu": (lambda m, x, w: F(m).prelu(x, w), [uniform((3, 4)), uniform(4)]),
    "nll_loss": (lambda m, x: F(m).nll_loss(x, m.tensor([0, 2, 1])), [uniform((3, 4))]),
    "relu": (lambda m, x: F(m).relu(x), [uniform((3, 4))]),
    "leaky_relu": (lambda m, x: F(m).leaky_relu(x, 0.1), [uniform((3, 4))]),
    "hardtanh": (lambda m, x: F(m).hardtanh(x, -0.5, 0.5), [uniform((3, 4))]),
    "threshold": (lambda m, x: F(m).threshold(x, 0.1, 2.0), [uniform((3, 4))]),
    "hardshrink": (lambda m, x: F(m).hardshrink(x, 0.3), [uniform((3, 4))]),
    "avg_pool1d": (lambda m, x: F(m).avg_pool1d(x, 2), [uniform((1, 2, 6))]),
    "max_pool2d": (lambda m, x: F(m).max_pool2d(x, 2), [uniform((1, 2, 4, 4))]),
    "adaptive_avg_pool2d": (lambda m, x: F(m).adaptive_avg_pool2d(x, 2), [uniform((1, 2, 4, 4))]),
    "copysign": (lambda m, x, y: m.copysign(x, y), [uniform(5), uniform(5)]),
    "polar": (lambda m, r, t: m.view_as_real(m.polar(r, t)), [uniform(4, 0.5, 1.0), uniform(4)]),
    # ... that reads the input and the weight, and of the bias only its size
    "conv1d": (lambda m, x, w, b: F(m).conv1d(x, w, b), [uniform((2, 3, 5)), uniform((4, 3, 2)), uniform(4)]),
    "conv2d_padded": (
        lambda m, x, w, b: F(m).conv2d(x, w, b, padding=1),
        [uniform((1, 2, 4, 4)), uniform((3, 2, 3, 3)), uniform(3)],
    ),
    "conv_transpose1d": (
        lambda m, x, w, b: F(m).conv_transpose1d(x, w, b),
        [uniform((2, 3, 5)), uniform((3, 4, 2)), uniform(4)],
    ),
    "batch_norm_training": (
        lambda m, x, w, b: F(m).batch_norm(x, None, None, w, b, training=True),
        [uniform((3, 4)), uniform(4), uniform(4)],
    ),
    "batch_norm_eval": (
        lambda m, x, w, b: F(m).batch_norm(x, *_running(m), w, b, training=False),
        [uniform((3, 4)), uniform(4), uniform(4)],
    ),
    "instance_norm": (
        lambda m, x, w, b: F(m).instance_norm(x, weight=w, bias=b),
        [uniform((2, 4, 3)), uniform(4), uniform(4)],
    ),
    # ... whose bias gradient is summed apart (group_norm's twice-differentiable backward)
    "group_norm": (lambda m, x, w, b: F(m).group_norm(x, 2, w, b), [uniform((2, 4, 3)), uniform(4), uniform(4)]),
    # torch composes differentiable ops: a gradient links to what it reads, not through a mask
    "clamp_tensors": (
        lambda m, x, low, high: m.clamp(x, low, high),
        [uniform(5), uniform(5, -1.0, -0.5), uniform(5, 0.5, 1.0)],
    ),
    "maximum": (lambda m, x, y: m.maximum(x, y), [uniform(5), uniform(5)]),
    "lerp": (lambda m, x, y, t: m.lerp(x, y, t), [uniform(3), uniform(3), uniform(3)]),
    "margin_ranking_loss": (
        lambda m, x, y: F(m).margin_ranking_loss(x, y, m.tensor([1.0, -1.0, 1.0], dtype=m.float64)),
        [uniform(3), uniform(3)],
    ),
    "triplet_margin_loss": (
        lambda m, a, p, n: F(m).triplet_margin_loss(a, p, n),
        [uniform((3, 4)), uniform((3, 4)), uniform((3, 4))],
    ),
    "amax": (lambda m, x: m.amax(x, 1), [uniform((3, 4))]),
    "sort": (lambda m, x: m.sort(x, 1)[0], [uniform((3, 4))]),
    "angle_of_reals": (lambda m, x: m.angle(x), [uniform(4)]),
    # composites and ops whose links were right already: kept right
    "linear": (lambda m, x, w, b: F(m).linear(x, w, b), [uniform((3, 4)), uniform((2, 4)), uniform(2)]),
    "embedding": (lambda m, w: F(m).embedding(m.tensor([0, 2, 1, 2]), w), [uniform((3, 4))]),
    "mse_loss": (lambda m, x, t: F(m).mse_loss(x, t), [uniform((3, 4)), uniform((3, 4))]),
    "binary_cross_entropy": (
        lambda m, x, t: F(m).binary_cross_entropy(x, t),
        [uniform((3, 4), 0.1, 0.9), uniform((3, 4), 0.1, 0.9)],
    ),
    "binary_cross_entropy_with_logits": (
        lambda m, x, t: F(m).binary_cross_entropy_with_logits(x, t),
        [uniform((3, 4)), uniform((3, 4), 0.1, 0.9)],
    ),
    "cross_entropy": (lambda m, x: F(m).cross_entropy(x, m.tensor([0, 2, 1])), [uniform((3, 4))]),
    "smooth_l1_loss": (lambda m, x, t: F(m).smooth_l1_loss(x, t), [uniform((3, 4)), uniform((3, 4))]),
    "kl_div": (
        lambda m, x, t: F(m).kl_div(x, t, reduction="batchmean"),
        [uniform((3, 4)), uniform((3, 4), 0.1, 0.9)],
    ),
    "scaled_dot_product_attention": (
        lambda m, q, k, v: F(m).scaled_dot_product_attention(q, k, v),
        [uniform((2, 3, 4)), uniform((2, 5, 4)), uniform((2, 5, 4))],
    ),
}
SLOW = {
    "multi_head_attention": (
        _mha,
        [uniform((3, 1, 4)), uniform((5, 1, 4)), uniform((5, 1, 4)), uniform((12, 4)), uniform(12)]
        + [uniform((4, 4)), uniform(4)],
    ),
}


def _subsets(n):
    """The choices of leaves that require grad: all of them, and each alone."""
    return [tuple(range(n))] + ([(i,) for i in range(n)] if n > 1 else [])


def _gradients(m, op, values, requiring, cotangent):
    """Per leaf that requires grad: its first-order gradient's (is None, requires_grad), and where it requires
    grad, the gradients of <gradient, weights> in those leaves (allow_unused=True), as arrays or None."""
    leaves = [m.tensor(v, requires_grad=i in requiring) for i, v in enumerate(values)]
    wanted = [leaves[i] for i in requiring]
    grads = m.autograd.grad(op(m, *leaves), wanted, m.tensor(cotangent), create_graph=True, allow_unused=True)
    results = []
    for j, g in enumerate(grads):
        if g is None or not g.requires_grad:
            results.append((g is None, False, None))
            continue
        weights = m.tensor(np.random.default_rng(j).uniform(-1, 1, tuple(g.shape)))
        try:
            seconds = m.autograd.grad((g * weights).sum(), wanted, allow_unused=True, retain_graph=True)
        except RuntimeError as e:  # torch has no derivative of some backward kernels (flash attention's)
            results.append((False, True, str(e)))
            continue
        results.append((False, True, [None if s is None else to_numpy(s) for s in seconds]))
    return results


def _check_like_torch(name, op, values):
    out = op(torch, *[torch.tensor(v) for v in values])
    cotangent = np.random.default_rng(1).uniform(-1, 1, tuple(out.shape))
    for requiring in _subsets(len(values)):
        expected = _gradients(torch, op, values, requiring, cotangent)
        actual = _gradients(bg, op, values, requiring, cotangent)
        for j, (e, a) in enumerate(zip(expected, actual)):
            where = f"{name}, leaves {requiring} requiring grad, gradient of leaf {requiring[j]}"
            assert a[:2] == e[:2], f"{where}: (is None, requires_grad) {a[:2]}, torch {e[:2]}"
            if isinstance(e[2], str):
                assert a[2] == e[2], f"{where}: its gradient gave {a[2]!r}, torch raised {e[2]!r}"
                continue
            for k, (s_e, s_a) in enumerate(zip(e[2] or (), a[2] or ())):
                of = f"{where}, its gradient in leaf {requiring[k]}"
                assert (s_a is None) == (s_e is None), f"{of}: {'None' if s_a is None else 'a tensor'}, torch's not"
                if s_e is not None:
                    np.testing.assert_allclose(s_a, s_e, rtol=1e-6, atol=1e-9, err_msg=of)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_gradient_links_and_second_order_match_torch(name):
    _check_like_torch(name, *CASES[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLOW))
def test_gradient_links_and_second_order_match_torch_slow(name):
    _check_like_torch(name, *SLOW[name])


@pytest.mark.parametrize("m", [torch, bg], ids=["torch", "batched_grad"])
def test_bias_gradient_of_layer_norm_is_differentiable_and_unused_without_allow_unused(m):
    x, w, b = [m.tensor(v, requires_grad=True) for v in (uniform((3, 4)), uniform(4), uniform(4))]
    y = F(m).layer_norm(x, (4,), w, b)
    _, _, gb = m.autograd.grad(y, (x, w, b), m.ones_like(y), create_graph=True)
    assert gb.requires_grad
    assert m.autograd.grad(gb.sum(), (x, w, b), allow_unused=True, retain_graph=True) == (None, None, None)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        m.autograd.grad(gb.sum(), x)


@pytest.mark.parametrize("m", [torch, bg], ids=["torch", "batched_grad"])
def test_convolution_saves_its_input_as_torch_does(m):
    """convolution_backward reads the input even where only the input requires grad (whose gradient needs only the
    weight): changing the input in place first raises."""
    x = m.tensor(uniform((2, 3, 5)), requires_grad=True) * 1
    y = F(m).conv1d(x, m.tensor(uniform((4, 3, 2))))
    x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
