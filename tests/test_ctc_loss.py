"""F.ctc_loss, nn.CTCLoss and torch.ctc_loss against torch 2.13: losses and gradients to the logits for padded and
concatenated targets, every reduction, other blanks, empty targets, infeasible alignments (inf, or 0 with
zero_infinity), lengths as lists, one unbatched sequence; torch's argument errors."""

import numpy as np
import pytest
import torch

import batched_grad as bg

RNG = np.random.default_rng(0)
LOGITS = RNG.standard_normal((8, 3, 5))
TARGETS = np.array([[1, 2, 2, 4], [3, 1, 1, 0], [2, 0, 0, 0]])
INPUT_LENGTHS, TARGET_LENGTHS = np.array([8, 6, 5]), np.array([4, 3, 1])


def loss_and_grad(lib, logits=LOGITS, call=None, **kwargs):
    x = lib.tensor(logits, requires_grad=True)
    arguments = {
        "log_probs": x.log_softmax(-1),
        "targets": lib.tensor(TARGETS),
        "input_lengths": lib.tensor(INPUT_LENGTHS),
        "target_lengths": lib.tensor(TARGET_LENGTHS),
    }
    arguments.update({k: lib.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()})
    loss = (call or lib.nn.functional.ctc_loss)(**arguments)
    loss.sum().backward()
    return loss.detach().numpy(), x.grad.numpy()


CASES = {
    "mean": {},
    "none": {"reduction": "none"},
    "sum": {"reduction": "sum"},
    "last-blank": {"blank": 4, "targets": np.array([[1, 2, 2, 3], [3, 1, 1, 0], [2, 0, 0, 0]])},
    "empty-target": {"target_lengths": np.array([4, 3, 0])},
    "concatenated": {"targets": np.array([1, 2, 2, 4, 3, 1, 1, 2])},
    "infeasible": {"input_lengths": np.array([3, 6, 5]), "reduction": "none"},
    "zero-infinity": {"input_lengths": np.array([3, 6, 5]), "zero_infinity": True},
    "length-lists": {"input_lengths": (8, 6, 5), "target_lengths": [4, 3, 1]},
}


@pytest.mark.parametrize("case", CASES)
def test_losses_and_gradients_as_torch(case):
    (loss, grad), (their_loss, their_grad) = (loss_and_grad(lib, **CASES[case]) for lib in (bg, torch))
    np.testing.assert_allclose(loss, their_loss, rtol=1e-12)
    np.testing.assert_allclose(grad, their_grad, atol=1e-12)


def test_one_unbatched_sequence_as_torch():
    results = [
        loss_and_grad(
            lib,
            logits=LOGITS[:, 0],
            targets=TARGETS[0],
            input_lengths=lib.tensor(8),
            target_lengths=lib.tensor(4),
        )
        for lib in (bg, torch)
    ]
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_the_module_and_torchs_integer_reduction():
    for lib in (bg, torch):
        module = lib.nn.CTCLoss(blank=0, reduction="sum")
        by_module = loss_and_grad(lib, call=module)
        by_function = loss_and_grad(lib, call=lib.ctc_loss, reduction=2)
        np.testing.assert_allclose(by_module[0], by_function[0])
    np.testing.assert_allclose(loss_and_grad(bg, call=bg.ctc_loss)[0], loss_and_grad(torch, call=torch.ctc_loss)[0])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"input_lengths": np.array([9, 6, 5])},
        {"target_lengths": np.array([5, 3, 1])},
        {"blank": 5},
        {"input_lengths": np.array([8, 6])},
    ],
)
def test_errors_as_torch(kwargs):
    messages = []
    for lib in (torch, bg):
        with pytest.raises(RuntimeError) as caught:
            loss_and_grad(lib, **kwargs)
        messages.append(str(caught.value).split("\n")[0])
    assert messages[1] == messages[0]
