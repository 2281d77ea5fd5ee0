"""nn.utils.prune against torch 2.13: the pruned structure of a module (`<name>_orig` parameter, `<name>_mask`
buffer, the forward pre-hook, state_dict keys), the masks of each method (seeded random ones included), iterative
pruning through PruningContainer, global pruning, removal, gradients through the mask, and torch's errors."""

import numpy as np
import pytest
import torch
import torch.nn.utils.prune as torch_prune

import batched_grad as bg
import batched_grad.nn.utils.prune as prune
from oracle import assert_same, raises_like_torch, to_numpy, to_torch


def twin_linears(in_features=6, out_features=4, seed=0):
    """A batched_grad Linear and a torch Linear with the same (seeded, distinct) values."""
    torch.manual_seed(seed)
    theirs = torch.nn.Linear(in_features, out_features)
    ours = bg.nn.Linear(in_features, out_features)
    with bg.no_grad():
        ours.weight.copy_(bg.tensor(theirs.weight.detach().numpy()))
        ours.bias.copy_(bg.tensor(theirs.bias.detach().numpy()))
    return ours, theirs


def twin_convs(seed=0):
    torch.manual_seed(seed)
    theirs = torch.nn.Conv2d(3, 5, 3)
    ours = bg.nn.Conv2d(3, 5, 3)
    with bg.no_grad():
        ours.weight.copy_(bg.tensor(theirs.weight.detach().numpy()))
        ours.bias.copy_(bg.tensor(theirs.bias.detach().numpy()))
    return ours, theirs


def assert_same_pruning(ours, theirs, name="weight"):
    """Same parameter, buffer and state_dict names, hook kinds, mask and pruned tensor."""
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    kinds = [type(h).__name__ for h in ours._forward_pre_hooks.values()]
    assert kinds == [type(h).__name__ for h in theirs._forward_pre_hooks.values()]
    assert_same(getattr(ours, name + "_mask"), getattr(theirs, name + "_mask"))
    assert_same(getattr(ours, name), getattr(theirs, name))


def test_random_unstructured_seeded_gives_torch_mask_and_structure():
    ours, theirs = twin_linears()
    bg.manual_seed(0)
    torch.manual_seed(0)
    assert prune.random_unstructured(ours, "weight", amount=0.3) is ours
    torch_prune.random_unstructured(theirs, "weight", amount=0.3)
    assert_same_pruning(ours, theirs)
    assert int(ours.weight_mask.sum()) == 24 - round(0.3 * 24)
    assert isinstance(ours.weight_orig, bg.nn.Parameter) and "weight" not in ours._parameters
    (hook,) = ours._forward_pre_hooks.values()
    assert isinstance(hook, prune.RandomUnstructured) and hook._tensor_name == "weight" and hook.amount == 0.3
    assert prune.is_pruned(ours) and not prune.is_pruned(bg.nn.Linear(2, 2))


@pytest.mark.parametrize("amount", [0, 5, 0.25, 1.0])
def test_l1_unstructured_amounts(amount):
    ours, theirs = twin_linears()
    prune.l1_unstructured(ours, "weight", amount=amount)
    torch_prune.l1_unstructured(theirs, "weight", amount=amount)
    assert_same_pruning(ours, theirs)


def test_importance_scores_choose_what_is_pruned():
    ours, theirs = twin_linears()
    scores = np.arange(24, dtype=np.float32)[::-1].reshape(4, 6).copy()
    prune.l1_unstructured(ours, "weight", amount=7, importance_scores=bg.tensor(scores))
    torch_prune.l1_unstructured(theirs, "weight", amount=7, importance_scores=torch.tensor(scores))
    assert_same_pruning(ours, theirs)
    assert to_numpy(ours.weight_mask)[3].sum() == 0  # the smallest scores are the last row's
    ours, theirs = twin_convs()
    conv_scores = np.random.default_rng(1).random((5, 3, 3, 3)).astype(np.float32)
    prune.ln_structured(ours, "weight", 2, n=1, dim=0, importance_scores=bg.tensor(conv_scores))
    torch_prune.ln_structured(theirs, "weight", 2, n=1, dim=0, importance_scores=torch.tensor(conv_scores))
    assert_same_pruning(ours, theirs)


@pytest.mark.parametrize("n, dim, amount", [(2, 0, 0.5), (1, 1, 2), (float("inf"), -1, 1), (2, 0, 0)])
def test_ln_structured(n, dim, amount):
    ours, theirs = twin_convs()
    prune.ln_structured(ours, "weight", amount=amount, n=n, dim=dim)
    torch_prune.ln_structured(theirs, "weight", amount=amount, n=n, dim=dim)
    assert_same_pruning(ours, theirs)


@pytest.mark.parametrize("dim, amount", [(0, 0.4), (1, 1), (-1, 2)])
def test_random_structured_seeded(dim, amount):
    ours, theirs = twin_convs()
    bg.manual_seed(3)
    torch.manual_seed(3)
    prune.random_structured(ours, "weight", amount=amount, dim=dim)
    torch_prune.random_structured(theirs, "weight", amount=amount, dim=dim)
    assert_same_pruning(ours, theirs)


def test_iterative_pruning_composes_masks_in_a_container():
    ours, theirs = twin_convs()
    bg.manual_seed(1)
    torch.manual_seed(1)
    for module, p in ((ours, prune), (theirs, torch_prune)):
        p.random_unstructured(module, "weight", amount=0.3)
        p.ln_structured(module, "weight", amount=0.4, n=2, dim=0)
        p.l1_unstructured(module, "weight", amount=10)
        p.random_structured(module, "weight", amount=1, dim=1)
    assert_same_pruning(ours, theirs)
    (container,) = ours._forward_pre_hooks.values()
    assert isinstance(container, prune.PruningContainer) and len(container) == 4
    assert [type(m).__name__ for m in container] == [
        "RandomUnstructured",
        "LnStructured",
        "L1Unstructured",
        "RandomStructured",
    ]
    assert isinstance(container[1], prune.LnStructured)


def test_forward_recomputes_the_pruned_tensor_and_gradients_reach_orig():
    ours, theirs = twin_linears()
    prune.l1_unstructured(ours, "weight", amount=0.5)
    torch_prune.l1_unstructured(theirs, "weight", amount=0.5)
    with bg.no_grad():
        ours.weight_orig.mul_(2.0)
    with torch.no_grad():
        theirs.weight_orig.mul_(2.0)
    x = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)
    out, t_out = ours(bg.tensor(x)), theirs(torch.tensor(x))
    assert_same(out, t_out, rtol=1e-5, atol=1e-6)
    assert_same(ours.weight, theirs.weight)
    (out**2).sum().backward()
    (t_out**2).sum().backward()
    assert_same(ours.weight_orig.grad, theirs.weight_orig.grad, rtol=1e-5, atol=1e-6)
    assert_same(ours.bias.grad, theirs.bias.grad, rtol=1e-5, atol=1e-6)
    assert ours.weight_mask.grad is None and not ours.weight_mask.requires_grad


def test_remove_makes_pruning_permanent():
    ours, theirs = twin_linears()
    for module, p in ((ours, prune), (theirs, torch_prune)):
        p.l1_unstructured(module, "weight", amount=0.5)
        p.l1_unstructured(module, "weight", amount=2)
        p.identity(module, "bias")
        assert p.remove(module, "weight") is module
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias_orig", "weight", "bias_mask"]
    assert isinstance(ours.weight, bg.nn.Parameter) and "weight" in ours._parameters
    assert_same(ours.weight, theirs.weight)
    assert len(ours._forward_pre_hooks) == 1
    raises_like_torch(lambda m: m.nn.utils.prune.remove(m.nn.Linear(2, 3), "weight"))


def test_global_unstructured_matches_torch():
    pairs = [twin_linears(6, 4, seed=0), twin_linears(4, 3, seed=1), twin_convs(seed=2)]
    ours = [(o, "weight") for o, _ in pairs] + [(pairs[0][0], "bias")]
    theirs = [(t, "weight") for _, t in pairs] + [(pairs[0][1], "bias")]
    prune.l1_unstructured(pairs[1][0], "weight", amount=3)
    torch_prune.l1_unstructured(pairs[1][1], "weight", amount=3)
    scores = np.random.default_rng(2).random((3, 4)).astype(np.float32)
    prune.global_unstructured(
        ours, prune.L1Unstructured, importance_scores={(pairs[1][0], "weight"): bg.tensor(scores)}, amount=0.35
    )
    torch_prune.global_unstructured(
        theirs,
        torch_prune.L1Unstructured,
        importance_scores={(pairs[1][1], "weight"): torch.tensor(scores)},
        amount=0.35,
    )
    for (o, name), (t, _) in zip(ours, theirs):
        assert_same_pruning(o, t, name)
    assert [type(m).__name__ for m in next(iter(pairs[1][0]._forward_pre_hooks.values()))] == [
        "L1Unstructured",
        "CustomFromMask",
    ]


def test_custom_from_mask_and_identity():
    ours, theirs = twin_linears()
    mask = np.random.default_rng(3).integers(0, 2, (4, 6)).astype(np.float32)
    prune.custom_from_mask(ours, "weight", bg.tensor(mask))
    torch_prune.custom_from_mask(theirs, "weight", torch.tensor(mask))
    assert_same_pruning(ours, theirs)
    prune.identity(ours, "bias")
    torch_prune.identity(theirs, "bias")
    assert_same_pruning(ours, theirs, "bias")
    assert float(ours.bias_mask.sum()) == 4


def test_pruning_methods_on_plain_tensors():
    t = np.random.default_rng(4).standard_normal((4, 5)).astype(np.float32)
    default = np.ones((4, 5), np.float32)
    default[0, :2] = 0
    for make in (
        lambda m: m.L1Unstructured(amount=6),
        lambda m: m.LnStructured(amount=2, n=2, dim=1),
        lambda m: m.CustomFromMask(mask=bg.tensor(default) if m is prune else torch.tensor(default)),
    ):
        got = make(prune).prune(bg.tensor(t), default_mask=bg.tensor(default))
        want = make(torch_prune).prune(torch.tensor(t), default_mask=torch.tensor(default))
        assert_same(got, want)
    assert_same(prune.Identity().prune(bg.tensor(t)), torch.tensor(t))
    scored = prune.L1Unstructured(2).prune(bg.tensor(t), importance_scores=bg.tensor(-t))
    assert_same(scored, torch_prune.L1Unstructured(2).prune(torch.tensor(t), importance_scores=torch.tensor(-t)))


def test_subclassed_pruning_method():
    def every_other(p):
        class EveryOther(p.BasePruningMethod):
            PRUNING_TYPE = "unstructured"

            def compute_mask(self, t, default_mask):
                mask = default_mask.clone()
                mask.view(-1)[::2] = 0
                return mask

        return EveryOther

    ours, theirs = twin_linears()
    every_other(prune).apply(ours, "bias")
    every_other(torch_prune).apply(theirs, "bias")
    prune.l1_unstructured(ours, "bias", amount=1)
    torch_prune.l1_unstructured(theirs, "bias", amount=1)
    assert_same_pruning(ours, theirs, "bias")


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.nn.utils.prune.l1_unstructured(m.nn.Linear(2, 3), "weight", amount=-1),
        lambda m: m.nn.utils.prune.l1_unstructured(m.nn.Linear(2, 3), "weight", amount=1.5),
        lambda m: m.nn.utils.prune.l1_unstructured(m.nn.Linear(2, 3), "weight", amount="half"),
        lambda m: m.nn.utils.prune.l1_unstructured(m.nn.Linear(2, 3), "weight", amount=7),
        lambda m: m.nn.utils.prune.random_structured(m.nn.Linear(2, 3), "bias", amount=1, dim=0),
        lambda m: m.nn.utils.prune.ln_structured(m.nn.Linear(2, 3), "weight", amount=1, n=2, dim=2),
        lambda m: m.nn.utils.prune.l1_unstructured(
            m.nn.Linear(2, 3), "weight", amount=1, importance_scores=m.ones(2, 3)
        ),
        lambda m: m.nn.utils.prune.L1Unstructured(1).prune(m.ones(2, 3), importance_scores=m.ones(3)),
        lambda m: m.nn.utils.prune.global_unstructured(
            [(m.nn.Linear(2, 3), "weight")], m.nn.utils.prune.RandomStructured, amount=1
        ),
        lambda m: m.nn.utils.prune.global_unstructured(5, m.nn.utils.prune.L1Unstructured, amount=1),
        lambda m: m.nn.utils.prune.global_unstructured(
            [(m.nn.Linear(2, 3), "weight")], m.nn.utils.prune.L1Unstructured, importance_scores=[1], amount=1
        ),
        lambda m: m.nn.utils.prune.custom_from_mask(m.nn.Linear(2, 3), "weight", m.ones(2, 2)),
        lambda m: m.nn.utils.prune.PruningContainer(m.nn.utils.prune.Identity()).add_pruning_method(3),
    ],
)
def test_errors_match_torch(call):
    with pytest.raises(Exception) as want:
        call(torch)
    with pytest.raises(type(want.value)) as got:
        call(bg)
    assert str(got.value) == str(want.value).replace("torch.nn.utils.prune", "batched_grad.nn.utils.prune")


def test_failed_pruning_restores_the_parameter():
    ours, theirs = twin_linears(2, 3)
    for module, p in ((ours, prune), (theirs, torch_prune)):
        with pytest.raises(ValueError, match="should be smaller than the number of parameters"):
            p.l1_unstructured(module, "weight", amount=7)
    assert list(ours._parameters) == list(theirs._parameters) == ["bias", "weight"]
    assert not ours._buffers and not prune.is_pruned(ours)


def test_container_refuses_a_method_for_another_tensor():
    first, second = prune.Identity(), prune.Identity()
    first._tensor_name, second._tensor_name = "weight", "bias"
    t_first, t_second = torch_prune.Identity(), torch_prune.Identity()
    t_first._tensor_name, t_second._tensor_name = "weight", "bias"
    with pytest.raises(ValueError) as got:
        prune.PruningContainer(first).add_pruning_method(second)
    with pytest.raises(ValueError) as want:
        torch_prune.PruningContainer(t_first).add_pruning_method(t_second)
    assert str(got.value).split(" to PruningContainer")[0] == str(want.value).split(" to PruningContainer")[0]
    assert str(got.value).endswith("Found 'bias'")


def test_to_torch_round_trip_of_a_pruned_state_dict():
    ours, theirs = twin_linears()
    prune.l1_unstructured(ours, "weight", amount=0.5)
    fresh = torch.nn.Linear(6, 4)
    torch_prune.identity(fresh, "weight")
    fresh.load_state_dict({k: to_torch(v) for k, v in ours.state_dict().items()})
    torch_prune.l1_unstructured(theirs, "weight", amount=0.5)
    fresh(torch.ones(1, 6))  # the pruned weight is recomputed by the forward pre-hook
    assert torch.equal(fresh.weight, theirs.weight)
