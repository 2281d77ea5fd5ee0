"""The losses beyond mse/l1/smooth_l1/nll/cross_entropy/bce and the distances, against torch 2.13: values and first
and second derivatives (float32 and float64; every reduction), node names, errors, and the loss and distance
modules."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.nn as nn
import batched_grad.nn.functional as F
from oracle import FLOAT_TIERS, FLOATS, assert_same, check_both, raises_like_torch, to_torch

pytestmark = pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss")
REDUCTIONS = ["mean", "sum", "none"]


def _f(m):
    return torch.nn.functional if m is torch else F


def data(dtype, seed=0):
    rng = np.random.default_rng(seed)
    d = FLOATS[dtype][0]
    leaf = lambda *shape, low=-1.0, high=1.0: bg.tensor(rng.uniform(low, high, shape), dtype=d, requires_grad=True)
    return {
        "x": leaf(4, 5),
        "y": leaf(4, 5),
        "p": leaf(4, 5, low=0.1, high=0.9),
        "v": leaf(4, 5, low=0.2, high=2),
        "a": leaf(4, 5),
        "sign": bg.tensor(np.where(rng.uniform(size=4) > 0.5, 1.0, -1.0), dtype=d),
        "sign2": bg.tensor(np.where(rng.uniform(size=(4, 5)) > 0.5, 1.0, -1.0), dtype=d),
        "labels": bg.tensor(rng.integers(0, 5, 4)),
        "bits": bg.tensor(rng.integers(0, 2, (4, 5)), dtype=d),
        "w": bg.tensor(rng.uniform(0.5, 2, 5), dtype=d),
        "counts": bg.tensor(rng.integers(0, 5, (4, 5)), dtype=d),
        "multi": bg.tensor([[3, 0, -1, 1, 2], [1, 4, 2, -1, 0], [2, -1, 0, 0, 0], [-1, 1, 1, 1, 1]]),
    }


LOSSES = {
    "kl_div": lambda F, i, r: F.kl_div(i["x"], i["p"], reduction=r),
    "kl_div-log_target": lambda F, i, r: F.kl_div(i["x"], i["y"], reduction=r, log_target=True),
    "huber_loss": lambda F, i, r: F.huber_loss(i["x"] * 2, i["y"], reduction=r),
    "huber_loss-delta": lambda F, i, r: F.huber_loss(i["x"], i["y"], reduction=r, delta=0.3),
    "huber_loss-weight": lambda F, i, r: F.huber_loss(i["x"], i["y"], reduction=r, delta=0.5, weight=i["v"]),
    "soft_margin_loss": lambda F, i, r: F.soft_margin_loss(i["x"], i["sign2"], reduction=r),
    "margin_ranking_loss": lambda F, i, r: F.margin_ranking_loss(
        i["x"][:, 0], i["y"][:, 1], i["sign"], 0.1, reduction=r
    ),
    "hinge_embedding_loss": lambda F, i, r: F.hinge_embedding_loss(i["x"], i["sign2"], 0.5, reduction=r),
    "poisson_nll_loss": lambda F, i, r: F.poisson_nll_loss(i["x"], i["counts"], reduction=r),
    "poisson_nll_loss-full": lambda F, i, r: F.poisson_nll_loss(i["v"], i["counts"], False, True, reduction=r),
    "gaussian_nll_loss": lambda F, i, r: F.gaussian_nll_loss(i["x"], i["y"], i["v"], reduction=r),
    "gaussian_nll_loss-full": lambda F, i, r: F.gaussian_nll_loss(i["x"], i["y"], i["v"][:, 0], True, reduction=r),
    "gaussian_nll_loss-clamped": lambda F, i, r: F.gaussian_nll_loss(
        i["x"], i["y"], i["v"] * 0.1, eps=0.1, reduction=r
    ),
    "cosine_embedding_loss": lambda F, i, r: F.cosine_embedding_loss(i["x"], i["y"], i["sign"], 0.2, reduction=r),
    "multilabel_soft_margin_loss": lambda F, i, r: F.multilabel_soft_margin_loss(i["x"], i["bits"], reduction=r),
    "multilabel_soft_margin_loss-weight": lambda F, i, r: F.multilabel_soft_margin_loss(
        i["x"], i["bits"], i["w"], reduction=r
    ),
    "multi_margin_loss": lambda F, i, r: F.multi_margin_loss(i["x"], i["labels"], reduction=r),
    "multi_margin_loss-p2": lambda F, i, r: F.multi_margin_loss(i["x"], i["labels"], 2, 0.5, i["w"], reduction=r),
    "multilabel_margin_loss": lambda F, i, r: F.multilabel_margin_loss(i["x"], i["multi"], reduction=r),
    "triplet_margin_loss": lambda F, i, r: F.triplet_margin_loss(i["x"], i["y"], i["a"], reduction=r),
    "triplet_margin_loss-swap": lambda F, i, r: F.triplet_margin_loss(
        i["x"], i["y"], i["a"], 2.0, 1, swap=True, reduction=r
    ),
    "triplet_margin_with_distance_loss": lambda F, i, r: F.triplet_margin_with_distance_loss(
        i["x"], i["y"], i["a"], distance_function=lambda a, b: (a - b).abs().sum(-1), margin=1.5, reduction=r
    ),
}


@pytest.mark.parametrize(("dtype", "batched"), FLOAT_TIERS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", LOSSES)
def test_values_and_derivatives(name, reduction, dtype, batched):
    if batched and reduction != "mean":
        pytest.skip("the batched comparison runs with reduction='mean'")
    inputs = data(dtype)
    keys = sorted(inputs)
    check_both(
        lambda m, *values: LOSSES[name](_f(m), dict(zip(keys, values)), reduction),
        [inputs[k] for k in keys],
        batched=batched,
        gradgrad=name not in FIRST_ORDER,
        **FLOATS[dtype][1],
    )


# torch has no derivative of these losses' backward
FIRST_ORDER = {
    "multi_margin_loss": "multi_margin_loss",
    "multi_margin_loss-p2": "multi_margin_loss",
    "multilabel_margin_loss": "multilabel_margin_loss",
}


@pytest.mark.parametrize("name", [*FIRST_ORDER, "pdist", "cdist"])
def test_no_double_backward_where_torch_has_none(name):
    def double_backward(m):
        inputs = {k: m.tensor(v.detach().numpy(), requires_grad=v.requires_grad) for k, v in data("float64").items()}
        loss = (
            m.pdist(inputs["x"]).sum()
            if name == "pdist"
            else m.cdist(inputs["x"], inputs["y"]).sum()
            if name == "cdist"
            else LOSSES[name](_f(m), inputs, "sum")
        )
        (g,) = m.autograd.grad(loss, inputs["x"], create_graph=True)
        m.autograd.grad(g.sum(), inputs["x"])

    raises_like_torch(double_backward)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", LOSSES)
def test_node_names(name, reduction):
    inputs = data("float64")
    got = LOSSES[name](F, inputs, reduction)
    want = LOSSES[name](torch.nn.functional, {k: to_torch(v) for k, v in inputs.items()}, reduction)
    assert got.grad_fn.name() == want.grad_fn.name()


def test_kl_div_batchmean_and_mean_warning():
    inputs = data("float64")
    keys = ["x", "p"]
    check_both(lambda m, x, p: _f(m).kl_div(x, p, reduction="batchmean"), [inputs[k] for k in keys])
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(inputs["x"], inputs["p"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.kl_div(inputs["x"], inputs["p"], reduction="sum")
    assert_same(
        F.kl_div(inputs["x"][0, 0], inputs["p"][0, 0], reduction="batchmean"),
        torch.nn.functional.kl_div(*to_torch([inputs["x"][0, 0], inputs["p"][0, 0]]), reduction="batchmean"),
    )


def test_edge_values():
    x, t = bg.tensor([0.0, 1.0, 2.0], requires_grad=True), bg.tensor([0.0, 0.0, 1.0])
    tx, tt = to_torch([x, t])
    for fn in ("kl_div", "poisson_nll_loss"):
        assert_same(getattr(F, fn)(x, t, reduction="sum"), getattr(torch.nn.functional, fn)(tx, tt, reduction="sum"))
    # ties of the hinge and margin losses (torch's clamp_min takes the gradient at 0)
    a, b = bg.tensor([1.0, 0.5], requires_grad=True), bg.tensor([1.0, 0.3], requires_grad=True)
    check_both(lambda m, a, b: _f(m).margin_ranking_loss(a, b, m.tensor([1.0, -1.0]), 0.0), [a, b])
    check_both(lambda m, a: _f(m).hinge_embedding_loss(a, m.tensor([-1.0, -1.0]), 1.0), [a])
    check_both(
        lambda m, a: _f(m).multi_margin_loss(m.stack([a, a * 2]), m.tensor([0, 1]), margin=0.0), [a], gradgrad=False
    )


DISTANCES = {
    "cosine_similarity": lambda m, x, y: _f(m).cosine_similarity(x, y),
    "cosine_similarity-dim": lambda m, x, y: m.cosine_similarity(x, y[:1], dim=0, eps=0.5),
    "cosine_similarity-zero": lambda m, x, y: _f(m).cosine_similarity(x * 0, y, dim=-1),
    "pairwise_distance": lambda m, x, y: _f(m).pairwise_distance(x, y),
    "pairwise_distance-p": lambda m, x, y: m.pairwise_distance(x, y[0], 1.0, 1e-3, True),
    "pdist": lambda m, x, y: _f(m).pdist(x),
    "pdist-p": lambda m, x, y: m.pdist(y, 3),
    "cdist": lambda m, x, y: m.cdist(x, y[:3]),
    "cdist-p1": lambda m, x, y: m.cdist(x[None], y[None], 1.0),
    "cdist-same": lambda m, x, y: m.cdist(x, x),
    "dist": lambda m, x, y: m.dist(x, y),
    "dist-p": lambda m, x, y: m.dist(x, y[0], 3),
    "normalize": lambda m, x, y: _f(m).normalize(x),
    "normalize-p": lambda m, x, y: _f(m).normalize(x, 1.0, 0),
}


@pytest.mark.parametrize(("dtype", "batched"), FLOAT_TIERS)
@pytest.mark.parametrize("name", DISTANCES)
def test_distances(name, dtype, batched):
    inputs = data(dtype, seed=3)
    # torch has no double backward of cdist and pdist, and a nan one of a zero norm
    gradgrad = not name.startswith(("cdist", "pdist", "cosine_similarity-zero"))
    check_both(DISTANCES[name], [inputs["x"], inputs["y"]], batched=batched, gradgrad=gradgrad, **FLOATS[dtype][1])
    got = DISTANCES[name](bg, inputs["x"], inputs["y"])
    assert got.grad_fn.name() == DISTANCES[name](torch, *to_torch([inputs["x"], inputs["y"]])).grad_fn.name()


@pytest.mark.parametrize(
    "call",
    [
        lambda F, m: F.kl_div(m.ones(2), m.ones(2), reduction="bad"),
        lambda F, m: F.huber_loss(m.ones(2), m.ones(2), delta=0.0),
        lambda F, m: F.margin_ranking_loss(m.ones(2), m.ones(2, 1), m.ones(2)),
        lambda F, m: F.gaussian_nll_loss(m.ones(2, 3), m.ones(2, 3), m.ones(3, 2)),
        lambda F, m: F.gaussian_nll_loss(m.ones(2, 3), m.ones(2, 3), -m.ones(2, 3)),
        lambda F, m: F.gaussian_nll_loss(m.ones(2, 3), m.ones(2, 3), m.ones(2, 3), reduction="max"),
        lambda F, m: F.cosine_embedding_loss(m.ones(2, 3), m.ones(3), m.ones(2)),
        lambda F, m: F.multi_margin_loss(m.ones(2, 3), m.tensor([0, 1]), p=3),
        lambda F, m: F.multi_margin_loss(m.ones(2, 3), m.tensor([0, 1, 2])),
        lambda F, m: F.multi_margin_loss(m.ones(2, 3), m.tensor([0, 3])),
        lambda F, m: F.cosine_embedding_loss(m.ones(2, 3), m.ones(2, 3), m.ones(2, 1)),
        lambda F, m: F.multilabel_margin_loss(m.ones(2, 3), m.ones(2, 2, dtype=m.int64)),
        lambda F, m: F.triplet_margin_loss(m.ones(2, 3), m.ones(2, 3), m.ones(3)),
        lambda F, m: F.triplet_margin_with_distance_loss(m.ones(2, 3), m.ones(2, 3), m.ones(2, 3), margin=0),
        lambda F, m: F.pdist(m.ones(2, 3, 4)),
        lambda F, m: m.cdist(m.ones(2, 3), m.ones(2, 4)),
        lambda F, m: m.cdist(m.ones(3), m.ones(2, 3)),
        lambda F, m: m.dist(m.ones(2), m.ones(3)),
        lambda F, m: F.poisson_nll_loss(m.ones(2), m.ones(2), reduction="avg"),
        lambda F, m: F.kl_div(m.ones(2), m.ones(3), reduction="sum"),
        lambda F, m: F.kl_div(m.ones(4, 2), m.ones(3, 1), reduction="sum", log_target=True),
    ],
    ids=[
        "kl-reduction",
        "huber-delta",
        "ranking-dims",
        "gaussian-var-size",
        "gaussian-negative",
        "gaussian-reduction",
        "cosine-embedding-dims",
        "multi-margin-p",
        "multi-margin-target",
        "multi-margin-range",
        "cosine-embedding-target",
        "multilabel-size",
        "triplet-dims",
        "triplet-distance-margin",
        "pdist-3d",
        "cdist-columns",
        "cdist-1d",
        "dist-shapes",
        "poisson-reduction",
        "kl-broadcast",
        "kl-log-target-broadcast",
    ],
)
def test_errors(call):
    raises_like_torch(lambda m: call(_f(m), m))


MODULES = {
    "L1Loss": ((), {}, ("x", "y")),
    "SmoothL1Loss": ((), {"beta": 0.5}, ("x", "y")),
    "HuberLoss": (("sum", 0.5), {}, ("x", "y")),
    "NLLLoss": ((), {"ignore_index": 2}, ("logp", "labels")),
    "NLLLoss-weight": ((), {"reduction": "sum"}, ("logp", "labels")),
    "BCELoss": ((), {}, ("p", "bits")),
    "BCEWithLogitsLoss": ((), {}, ("x", "bits")),
    "KLDivLoss": ((), {"reduction": "batchmean"}, ("x", "p")),
    "SoftMarginLoss": ((), {}, ("x", "sign2")),
    "MarginRankingLoss": ((0.2,), {}, ("x0", "y0", "sign")),
    "HingeEmbeddingLoss": ((), {}, ("x", "sign2")),
    "PoissonNLLLoss": ((), {}, ("x", "counts")),
    "GaussianNLLLoss": ((), {"full": True}, ("x", "y", "v")),
    "CosineEmbeddingLoss": ((0.1,), {}, ("x", "y", "sign")),
    "TripletMarginLoss": ((), {"p": 1.0}, ("x", "y", "a")),
    "TripletMarginWithDistanceLoss": ((), {"swap": True}, ("x", "y", "a")),
    "MultiLabelSoftMarginLoss": ((), {}, ("x", "bits")),
    "MultiMarginLoss": ((2, 0.5), {}, ("x", "labels")),
    "MultiLabelMarginLoss": ((), {}, ("x", "multi")),
    "PairwiseDistance": ((1.0,), {}, ("x", "y")),
    "CosineSimilarity": ((0,), {}, ("x", "y")),
}


@pytest.mark.parametrize("name", MODULES)
def test_modules(name):
    args, kwargs, keys = MODULES[name]
    cls = name.split("-")[0]
    inputs = data("float32")
    inputs.update(logp=F.log_softmax(inputs["x"], 1), x0=inputs["x"][:, 0], y0=inputs["y"][:, 0])
    if name == "NLLLoss-weight":
        kwargs = dict(kwargs, weight=inputs["w"])
    ours = getattr(nn, cls)(*args, **kwargs)
    theirs = getattr(torch.nn, cls)(*args, **{k: to_torch(v) for k, v in kwargs.items()})
    assert repr(ours) == repr(theirs)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    got = ours(*[inputs[k] for k in keys])
    want = theirs(*to_torch([inputs[k] for k in keys]))
    assert_same(got, want, rtol=1e-5, atol=1e-6)


def test_deprecated_nll_loss_2d():
    with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated"):
        loss = nn.NLLLoss2d()
    assert isinstance(loss, nn.NLLLoss)
    for call in (
        lambda m: m.nn.TripletMarginLoss(margin=0),
        lambda m: m.nn.TripletMarginWithDistanceLoss(margin=-1),
        lambda m: m.nn.MultiMarginLoss(p=3),
        lambda m: m.nn.MultiMarginLoss(weight=m.ones(2, 2)),
    ):
        raises_like_torch(call)
    assert_same(bg.dist(bg.ones(2), bg.zeros(2, dtype=bg.float64)), torch.dist(torch.ones(2), torch.zeros(2).double()))


LEGACY = [(None, False), (False, None), (False, False), (True, True), (True, None), (None, True)]


@pytest.mark.parametrize("size_average, reduce", LEGACY)
@pytest.mark.parametrize("fn", ["mse_loss", "l1_loss", "soft_margin_loss"])
def test_legacy_size_average_and_reduce_name_a_reduction_as_torchs(fn, size_average, reduce):
    def run(m):
        x, y = m.linspace(-1, 2, 6, dtype=m.float64), m.linspace(1, -1, 6, dtype=m.float64).sign()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            functional = getattr(m.nn.functional, fn)(x, y, size_average=size_average, reduce=reduce)
            module = m.nn.MSELoss(size_average=size_average, reduce=reduce)(x, y)
        return (functional, module), sorted({str(w.message) for w in seen})

    (ours, our_warnings), (theirs, their_warnings) = run(bg), run(torch)
    assert_same(ours, theirs, rtol=1e-12)
    assert our_warnings == their_warnings


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_loss_with_a_weight_as_torchs(reduction):
    def run(m):
        x = m.linspace(-1, 2, 6, dtype=m.float64).reshape(2, 3).requires_grad_()
        w = m.linspace(0.5, 1.5, 6, dtype=m.float64).reshape(2, 3)
        loss = m.nn.functional.mse_loss(x, m.zeros(2, 3, dtype=m.float64), reduction=reduction, weight=w)
        return loss, m.autograd.grad(loss.sum(), x)[0]

    assert_same(run(bg), run(torch), rtol=1e-12)
    raises_like_torch(lambda m: m.nn.functional.mse_loss(m.ones(3), m.ones(3), weight=m.ones(2)))


@pytest.mark.parametrize("extra", ["plain", "pos_weight", "weight"])
def test_bce_with_logits_of_mixed_dtypes_rounds_each_step_into_the_target(extra):
    """A float64 model's logits against float32 labels (`.float()` targets): torch writes each step of the loss
    in place into a tensor of the target's dtype, so its elementwise values are those roundings."""
    rng = np.random.default_rng(3)
    x, t = rng.standard_normal(40) * 3, (rng.random(40) > 0.5).astype(np.float64)

    def losses(m):
        m.manual_seed(0)
        extras = {"plain": {}, "pos_weight": {"pos_weight": m.tensor([2.5])}, "weight": {"weight": m.rand(40)}}
        logits, target = m.tensor(x, dtype=m.float64), m.tensor(t, dtype=m.float32)
        return m.nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none", **extras[extra])

    assert_same(losses(bg), losses(torch), rtol=0, atol=0)


def test_bce_with_logits_gradient_of_mixed_dtypes_divides_by_the_count_in_the_wider_dtype():
    """torch's backward of the mean loss divides (sigmoid(x) - t) by the count last, in the input's float64: the
    gradient holds no float32 rounding of 1 / n."""

    def grad(m):
        x = m.tensor([-2.0, -1.0, 0.0, 1.0, 2.0], dtype=m.float64, requires_grad=True)
        t = m.tensor([0.0, 1.0, 1.0, 0.0, 1.0], dtype=m.float32)
        return m.autograd.grad(m.nn.functional.binary_cross_entropy_with_logits(x, t), x)[0]

    assert_same(grad(bg), grad(torch), rtol=1e-15, atol=0)
