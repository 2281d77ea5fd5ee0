"""nn.AdaptiveLogSoftmaxWithLoss against torch 2.13: the same seed builds the same head and clusters; per-target
log-probabilities, the loss and every gradient, log_prob, predict, one unbatched example; the argument errors."""

import numpy as np
import pytest
import torch

import batched_grad as bg

RNG = np.random.default_rng(0)
X = RNG.standard_normal((12, 16)).astype(np.float32)
TARGETS = np.array([0, 3, 5, 9, 12, 19, 2, 7, 15, 18, 1, 11])


def run(lib, head_bias):
    lib.manual_seed(0)
    module = lib.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10, 15], div_value=2.0, head_bias=head_bias)
    x = lib.tensor(X, requires_grad=True)
    output, loss = module(x, lib.tensor(TARGETS))
    loss.backward()
    single = module(lib.tensor(X[0]), lib.tensor(TARGETS[0])).output
    with lib.no_grad():
        log_prob, predicted = module.log_prob(lib.tensor(X)), module.predict(lib.tensor(X))
    arrays = [output.detach(), loss.detach(), x.grad, single.detach(), log_prob] + [p.grad for p in module.parameters()]
    return [a.numpy() for a in arrays], predicted.numpy(), repr(module)


@pytest.mark.parametrize("head_bias", [False, True])
def test_as_torch(head_bias):
    (ours, our_prediction, our_repr), (theirs, their_prediction, their_repr) = (
        run(lib, head_bias) for lib in (bg, torch)
    )
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(our_prediction, their_prediction)
    assert our_repr == their_repr


@pytest.mark.parametrize(
    "call",
    [
        lambda nn, lib: nn.AdaptiveLogSoftmaxWithLoss(16, 20, []),
        lambda nn, lib: nn.AdaptiveLogSoftmaxWithLoss(16, 20, [10, 4]),
        lambda nn, lib: nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 20]),
        lambda nn, lib: nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4]).forward(lib.zeros(3, 16), lib.tensor([0, 1])),
        lambda nn, lib: nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4]).forward(lib.zeros(3, 16), lib.tensor([0, 1, 25])),
        lambda nn, lib: nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4]).forward(lib.zeros(3, 16), lib.zeros(3, 1).long()),
    ],
)
def test_errors_as_torch(call):
    messages = []
    for lib in (torch, bg):
        with pytest.raises((ValueError, RuntimeError)) as caught:
            call(lib.nn, lib)
        messages.append((type(caught.value), str(caught.value)))
    assert messages[1] == messages[0]
