"""nn.utils.stateless (the deprecated functional_call and _reparametrize_module) and nn.utils.init.skip_init,
against torch 2.13."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.utils.stateless as torch_stateless

import batched_grad as bg
import batched_grad.nn.utils.stateless as stateless
from oracle import assert_same, raises_like_torch

X = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
W = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)


def test_deprecated_functional_call_warns_and_runs_like_torch():
    layer, t_layer = bg.nn.Linear(3, 4), torch.nn.Linear(3, 4)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        got = stateless.functional_call(layer, {"weight": bg.tensor(W), "bias": bg.zeros(4)}, bg.tensor(X))
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        want = torch_stateless.functional_call(
            t_layer, {"weight": torch.tensor(W), "bias": torch.zeros(4)}, torch.tensor(X)
        )
    assert [w.category for w in ours] == [w.category for w in theirs] == [FutureWarning]
    assert str(ours[0].message) == str(theirs[0].message) and ours[0].filename == __file__
    assert_same(got, want, rtol=1e-6, atol=1e-6)
    assert layer.weight is not None and not np.array_equal(layer.weight.detach().numpy(), W)


def test_gradients_flow_to_the_given_tensors():
    weight = bg.tensor(W, requires_grad=True)
    t_weight = torch.tensor(W, requires_grad=True)
    with pytest.warns(FutureWarning):
        out = stateless.functional_call(bg.nn.Linear(3, 4, bias=False), {"weight": weight}, (bg.tensor(X),))
    with pytest.warns(FutureWarning):
        t_out = torch_stateless.functional_call(
            torch.nn.Linear(3, 4, bias=False), {"weight": t_weight}, torch.tensor(X)
        )
    (out**2).sum().backward()
    (t_out**2).sum().backward()
    assert_same(weight.grad, t_weight.grad, rtol=1e-5, atol=1e-5)


def test_reparametrize_module_swaps_inside_the_block_only():
    layer = bg.nn.Linear(3, 4)
    original = layer.weight
    given = bg.tensor(W)
    with stateless._reparametrize_module(layer, {"weight": given}):
        assert layer.weight is given and "weight" in layer._parameters
    assert layer.weight is original


class Counter:
    """A module class for either library whose forward assigns a new tensor to its buffer."""

    @staticmethod
    def make(m):
        class Counting(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("count", m.zeros(()))

            def forward(self, x):
                self.count = self.count + 1
                return x * self.count

        return Counting()


def test_tensors_assigned_in_the_block_are_written_back():
    results = []
    for m in (bg, torch):
        module = Counter.make(m)
        given = {"count": m.tensor(5.0)}
        with m.nn.utils.stateless._reparametrize_module(module, given):
            out = module(m.ones(2))
        results.append((float(given["count"]), float(module.count), out.tolist()))
    assert results[0] == results[1] == (6.0, 0.0, [6.0, 6.0])


@pytest.mark.parametrize("stack_weights", [False, True])
def test_stack_weights_sets_the_restore_order(stack_weights):
    """Two names of one slot (a submodule registered twice): which original survives depends on the order."""
    survivors = []
    for m in (bg, torch):
        shared = m.nn.Linear(3, 4)
        holder = m.nn.Module()
        holder.a, holder.b = shared, shared
        original, first, second = shared.weight, m.ones(4, 3), m.zeros(4, 3)
        with m.nn.utils.stateless._reparametrize_module(
            holder, {"a.weight": first, "b.weight": second}, stack_weights=stack_weights
        ):
            pass
        survivors.append([shared.weight is t for t in (original, first, second)])
    assert survivors[0] == survivors[1]
    assert survivors[0] == ([True, False, False] if stack_weights else [False, True, False])


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.nn.utils.stateless.functional_call(m.nn.Linear(3, 4), {"wieght": m.ones(4, 3)}, strict=True),
        lambda m: m.nn.utils.stateless.functional_call(
            m.nn.Sequential(*[m.nn.Linear(2, 2)] * 2), {"0.weight": m.ones(2, 2), "1.weight": m.zeros(2, 2)}
        ),
        lambda m: m.nn.utils.stateless.functional_call(m.nn.DataParallel(m.nn.Linear(2, 2)), {}, m.ones(2)),
        lambda m: m.jit.trace(lambda x: m.func.functional_call(m.nn.Linear(2, 2), {}, (x,)), (m.ones(1, 2),)),
    ],
)
def test_errors_match_torch(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        raises_like_torch(call)


def test_tied_weights_take_one_value():
    ours = bg.nn.Sequential(*[bg.nn.Linear(3, 3, bias=False)] * 2)
    theirs = torch.nn.Sequential(*[torch.nn.Linear(3, 3, bias=False)] * 2)
    square = np.eye(3, dtype=np.float32) * 2
    got = bg.func.functional_call(ours, {"0.weight": bg.tensor(square)}, bg.tensor(X))
    want = torch.func.functional_call(theirs, {"0.weight": torch.tensor(square)}, torch.tensor(X))
    assert_same(got, want)
    assert_same(got, bg.tensor(X) * 4)


def test_skip_init():
    layer = bg.nn.utils.init.skip_init(bg.nn.Linear, 3, 4, bias=False)
    assert bg.nn.utils.skip_init is bg.nn.utils.init.skip_init
    assert isinstance(layer, bg.nn.Linear) and layer.weight.shape == (4, 3) and layer.bias is None
    assert str(layer.weight.device) == "cpu" and layer.weight.requires_grad
    norm = bg.nn.utils.skip_init(bg.nn.BatchNorm1d, num_features=5, device="meta")
    assert str(norm.running_mean.device) == str(
        torch.nn.utils.skip_init(torch.nn.BatchNorm1d, 5, device="meta").running_mean.device
    )
    raises_like_torch(lambda m: m.nn.utils.skip_init(m.nn.Identity))
    raises_like_torch(lambda m: m.nn.utils.skip_init(int))
