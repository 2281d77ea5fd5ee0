"""torch's other entry points to ops batched_grad has, against torch 2.13: the torch-level losses with an integer
reduction, convolution, constant_pad_nd, lu, range, unsafe_chunk, gradient, index_reduce, histogramdd, and the
Tensor methods apply_, map_, map2_, const_data_ptr, dim_order and conj_physical(_)."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, check_both, raises_like_torch, to_torch

pytestmark = pytest.mark.filterwarnings(
    "ignore:torch.range is deprecated", "ignore:index_reduce", "ignore:torch.lu is deprecated"
)


def leaf(*shape, seed=0, low=-1.0, high=1.0):
    return bg.tensor(np.random.default_rng(seed).uniform(low, high, shape), dtype=bg.float64, requires_grad=True)


CALLS = {
    "kl_div": lambda m, x, y: m.kl_div(x, y.abs(), 2),
    "kl_div-log": lambda m, x, y: m.kl_div(x, y, 0, log_target=True),
    "hinge_embedding_loss": lambda m, x, y: m.hinge_embedding_loss(x, y.sign(), 0.5, 1),
    "margin_ranking_loss": lambda m, x, y: m.margin_ranking_loss(x[0], y[0], y[1].sign(), 0.1, 2),
    "cosine_embedding_loss": lambda m, x, y: m.cosine_embedding_loss(x, y, y[:, 0].sign(), 0.2),
    "poisson_nll_loss": lambda m, x, y: m.poisson_nll_loss(x, y.abs(), True, False, 1e-8, 1),
    "triplet_margin_loss": lambda m, x, y: m.triplet_margin_loss(x, y, x * y, 1.0, 2, 1e-6, True, 0),
    "bce_with_logits": lambda m, x, y: m.binary_cross_entropy_with_logits(x, y.abs(), None, y[0].detach().abs() + 1, 2),
    "losses-default-reduction": lambda m, x, y: m.cat(
        [
            m.kl_div(x, y.abs()).reshape(-1),
            m.cosine_embedding_loss(x, y, y[:, 0].sign()),
            m.triplet_margin_loss(x, y, x * y),
        ]
    ),
    "convolution": lambda m, x, y: m.convolution(
        x[None, None], y[None, None, :2, :2], None, [1, 1], [1, 0], [1, 1], False, [0, 0], 1
    ),
    "convolution-transposed": lambda m, x, y: m.convolution(
        x[None, None], y[None, None, :2, :2], y[0, :1], [2, 1], [0, 0], [1, 1], True, [1, 0], 1
    ),
    "constant_pad_nd": lambda m, x, y: m.constant_pad_nd(x, [1, 2, 0, 1], 3.5),
    "unsafe_chunk": lambda m, x, y: m.cat([c * i for i, c in enumerate(x.unsafe_chunk(2, 1), 1)], 1),
    "gradient": lambda m, x, y: m.cat(m.gradient(x)),
    "gradient-spacing": lambda m, x, y: m.gradient(x, spacing=0.5, dim=1, edge_order=2)[0],
    "gradient-coordinates": lambda m, x, y: m.gradient(x, spacing=(m.tensor([0.0, 0.5, 2.0, 2.5]),), dim=1)[0],
    "gradient-spacings": lambda m, x, y: m.cat(m.gradient(x, spacing=[2.0, 0.25], dim=(1, 0))),
    "index_reduce-prod": lambda m, x, y: m.index_reduce(x.T, 0, m.tensor([0, 2, 0]), y.T[:3], "prod"),
    "index_reduce-mean": lambda m, x, y: x.index_reduce(1, m.tensor([3, 0]), y[:, :2], "mean", include_self=False),
    "index_reduce-amax": lambda m, x, y: m.index_reduce(x, 1, m.tensor([1, 1, 2, 1]), y, "amax"),
    "conj_physical": lambda m, x, y: m.conj_physical(x) * 2,
}


@pytest.mark.parametrize("name", CALLS)
def test_values_and_derivatives(name):
    check_both(CALLS[name], [leaf(3, 4), leaf(3, 4, seed=1)])


def test_lu_range_histogramdd_and_methods():
    a = leaf(3, 3)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert_same(bg.lu(a), torch.lu(to_torch(a)))
        assert_same(bg.lu(a, get_infos=True), torch.lu(to_torch(a), get_infos=True))
        assert_same(a.lu()[0], to_torch(a).lu()[0])
        for args, kwargs in (((1, 4), {}), ((0, 1, 0.25), {}), ((4, 1, -1), {}), ((1, 4), {"dtype": "int64"})):
            kw = {k: getattr(bg, v) for k, v in kwargs.items()}
            assert_same(bg.range(*args, **kw), torch.range(*args, **{k: getattr(torch, v) for k, v in kwargs.items()}))
    for lib in (bg, torch):  # attributed to the caller's line, with or without keywords
        with pytest.warns(UserWarning, match="torch.range is deprecated") as caught:
            lib.range(0, 3)
            lib.range(start=1, end=3, device=lib.device("cpu"))
        assert [w.filename for w in caught] == [__file__, __file__]
    points = bg.tensor(np.random.default_rng(2).uniform(size=(50, 2)))
    got, want = bg.histogramdd(points, [3, 4]), torch.histogramdd(to_torch(points), [3, 4])
    assert_same(got.hist, want.hist) and assert_same(tuple(got.bin_edges), tuple(want.bin_edges))
    x, t = bg.tensor([[1.0, -2.0], [3.0, 4.0]]), torch.tensor([[1.0, -2.0], [3.0, 4.0]])
    assert_same(x.clone().apply_(lambda v: v * v + 1), t.clone().apply_(lambda v: v * v + 1))
    assert_same(x.clone().map_(x.T, lambda a, b: a - b), t.clone().map_(t.T, lambda a, b: a - b))
    assert_same(
        x.clone().map2_(x, x[0], lambda a, b, c: a * b + c), t.clone().map2_(t, t[0], lambda a, b, c: a * b + c)
    )
    for view in (lambda v: v, lambda v: v.T, lambda v: v[None].repeat(3, 1, 1).permute(2, 0, 1)):
        assert view(x).dim_order() == view(t).dim_order()
    assert x.const_data_ptr() == x.data_ptr()
    z = bg.tensor([1 + 2j, 3j])
    assert_same(z.clone().conj_physical_(), to_torch(z).clone().conj_physical_())


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.gradient(m.ones(3), edge_order=3),
        lambda m: m.gradient(m.ones(2), edge_order=2),
        lambda m: m.index_reduce(m.ones(3), 0, m.tensor([0]), m.ones(1), "sum"),
    ],
    ids=["gradient-order", "gradient-size", "index_reduce-reduce"],
)
def test_errors(call):
    raises_like_torch(call)


UNSAFE_SPLITS = {
    "unsafe_split": lambda m, t: t.unsafe_split(1),
    "unsafe_split_with_sizes": lambda m, t: m.unsafe_split_with_sizes(t, (1, 1, 1), 1),
    "unsafe_chunk": lambda m, t: t.unsafe_chunk(3),
}


@pytest.mark.parametrize("name", sorted(UNSAFE_SPLITS))
def test_unsafe_split_outputs_share_values_but_are_no_views(name):
    """In-place ops on the outputs are allowed (not refused as on split's), write into the input's values, and are
    recorded as on a tensor of their own; the input's in-place updates reach their values, not their versions."""

    def program(m):
        a = m.tensor(np.arange(9.0).reshape(3, 3) + 1, requires_grad=True)
        b = a * 2
        first, second, *_ = UNSAFE_SPLITS[name](m, b)
        facts = [first._base is None, first.grad_fn.name(), first._version]
        first.mul_(second)
        facts += [b.detach().clone(), first.grad_fn.name(), b.grad_fn.name(), b._version]
        (first * 3).sum().backward()
        b.detach().add_(1)
        return facts + [a.grad, first.detach().clone(), first._version]

    got, expected = program(bg), program(torch)
    assert_same([g for g in got if isinstance(g, bg.Tensor)], [e for e in expected if isinstance(e, torch.Tensor)])
    assert [g for g in got if not isinstance(g, bg.Tensor)] == [e for e in expected if not isinstance(e, torch.Tensor)]


PROD_REDUCTIONS = {
    "scatter_reduce": lambda m, x, src: m.scatter_reduce(x, 0, m.tensor([0, 0, 1]), src, "prod"),
    "index_reduce": lambda m, x, src: m.index_reduce(x, 0, m.tensor([0, 0, 1]), src, "prod"),
}


def _prod_second_order(m, name, source):
    x = m.tensor([1.5, 2.0], dtype=m.float64, requires_grad=True)
    src = m.tensor(source, dtype=m.float64, requires_grad=True)
    out = PROD_REDUCTIONS[name](m, x, src)
    grad_x, grad_src = m.autograd.grad(out.sum(), (x, src), create_graph=True)
    second = m.autograd.grad((grad_x.sum(), grad_src.sum()), (x, src), retain_graph=True)
    return [out.grad_fn.name(), grad_x, grad_src, second]


@pytest.mark.filterwarnings("ignore:index_reduce")
@pytest.mark.parametrize("name", sorted(PROD_REDUCTIONS))
@pytest.mark.parametrize("source", [[0.0, 2.0, 0.0], [3.0, 2.0, 0.5]], ids=["one_zero_each", "no_zero"])
def test_prod_reductions_differentiate_twice_as_torch(name, source):
    got, expected = _prod_second_order(bg, name, source), _prod_second_order(torch, name, source)
    assert got[0] == expected[0]
    assert_same(got[1:], expected[1:])


@pytest.mark.filterwarnings("ignore:index_reduce")
@pytest.mark.parametrize("name", sorted(PROD_REDUCTIONS))
def test_prod_reductions_refuse_second_order_through_repeated_zeros(name):
    """Two zeros of the source sent to one position: the gradient of the source is given, differentiating it again
    raises torch's error (the input's gradient can still be differentiated)."""

    def second_order(m, through_source):
        x = m.tensor([1.5, 2.0], dtype=m.float64, requires_grad=True)
        src = m.tensor([0.0, 0.0, 4.0], dtype=m.float64, requires_grad=True)
        grad_x, grad_src = m.autograd.grad(PROD_REDUCTIONS[name](m, x, src).sum(), (x, src), create_graph=True)
        return m.autograd.grad((grad_src if through_source else grad_x).sum(), (x, src), allow_unused=True)

    raises_like_torch(lambda m: second_order(m, True))
    assert_same(second_order(bg, False), second_order(torch, False))
