"""Sparse COO tensors against torch 2.13: construction, queries, reprs, the sparse products and reductions, their
gradients (sparse for a sparse input, with its indices), the errors, and a two-layer GCN trained step by step."""

import re
import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad._ops._public import SPARSE_DISPATCHED, SPARSE_VALUEWISE
from oracle import assert_same
from test_gradcheck import FUNCTIONS

pytestmark = pytest.mark.filterwarnings(  # torch's own notes on its sparse kernels
    "ignore:Sparse invariant checks are implicitly disabled",
    "ignore:Sparse CSR tensor support is in beta state",
    "ignore:log1p_backward",
)

INDICES = [[0, 1, 1, 2, 0], [2, 0, 2, 1, 2]]  # (0, 2) twice: an uncoalesced tensor
VALUES = [3.0, 4.0, 5.0, 6.0, 1.0]
UNIQUE = [[0, 1, 1, 2], [2, 0, 2, 1]]


def sparse(m, indices=INDICES, values=VALUES, size=(3, 3), **kw):
    return m.sparse_coo_tensor(m.tensor(indices), m.tensor(values), size, **kw)


def dense_of(rng, m, *shape):
    return m.tensor(rng.standard_normal(shape).astype(np.float32))


def assert_same_sparse(actual, expected, flag=True, **tol):
    """The same size, indices and values; with `flag`, the same is_coalesced() (torch's gradients set it variously)."""
    assert isinstance(actual, bg.Tensor) and actual.is_sparse and expected.is_sparse
    assert tuple(actual.shape) == tuple(expected.shape)
    assert not flag or actual.is_coalesced() == expected.is_coalesced()
    assert actual.sparse_dim() == expected.sparse_dim() and actual.dense_dim() == expected.dense_dim()
    assert_same(actual._indices(), expected._indices())
    assert_same(actual._values(), expected._values(), **tol)


def both(fn):
    return fn(bg), fn(torch)


# ---- construction and queries ------------------------------------------------------------------------------------
def test_construction_queries_and_repr_match_torch():
    s, t = both(lambda m: sparse(m, requires_grad=True))
    assert_same_sparse(s, t)
    assert (s._nnz(), s.sparse_dim(), s.dense_dim(), s.dim()) == (t._nnz(), 2, 0, 2)
    assert repr(s.layout) == repr(t.layout) == "torch.sparse_coo" and repr(bg.strided) == "torch.strided"
    assert s.layout is bg.sparse_coo and bg.ones(2).layout is bg.strided and not bg.ones(2).is_sparse
    assert s.is_leaf and s.requires_grad and s.grad_fn is None and s.dtype is bg.float32
    assert repr(s) == repr(t)
    assert repr(sparse(bg)) == repr(sparse(torch))
    assert_same(s.to_dense(), t.to_dense())


def test_size_is_inferred_and_values_may_have_dense_dimensions():
    s, t = both(lambda m: m.sparse_coo_tensor(m.tensor([[0, 3]]), m.tensor([[1.0, 2.0], [3.0, 4.0]])))
    assert_same_sparse(s, t)
    assert s.dense_dim() == 1 and repr(s) == repr(t)
    assert_same(s.to_dense(), t.to_dense())


def test_coalesce_sums_duplicates_and_values_need_it():
    s, t = both(sparse)
    with pytest.raises(RuntimeError, match=r"Cannot get values on an uncoalesced tensor, please call \.coalesce"):
        s.values()
    with pytest.raises(RuntimeError, match=r"Cannot get indices on an uncoalesced tensor"):
        s.indices()
    assert_same_sparse(s.coalesce(), t.coalesce())
    assert_same(s.coalesce().values(), t.coalesce().values())
    assert s.coalesce().coalesce() is not None and both(lambda m: sparse(m, is_coalesced=True).is_coalesced()) == (
        True,
        True,
    )


@pytest.mark.parametrize("sparse_dim", [None, 1, 2])
def test_to_sparse_of_a_dense_tensor(sparse_dim):
    x, tx = both(lambda m: m.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [2.0, 0.0, 3.0]]))
    args = () if sparse_dim is None else (sparse_dim,)
    assert_same_sparse(x.to_sparse(*args), tx.to_sparse(*args))
    assert_same_sparse(x.to_sparse_coo(), tx.to_sparse_coo())


def test_legacy_typed_constructors_warn_as_torch():
    for build in (
        lambda m: m.sparse.FloatTensor(m.tensor(INDICES), m.tensor(VALUES), m.Size([3, 3])),
        lambda m: m.sparse.DoubleTensor(m.tensor(INDICES), m.tensor(VALUES, dtype=m.float64)),
        lambda m: m.sparse.LongTensor(2, 3),
    ):
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            s = build(bg)
        with warnings.catch_warnings(record=True) as theirs:
            warnings.simplefilter("always")
            t = build(torch)
        assert_same_sparse(s, t)
        assert [str(w.message) for w in ours] == [str(w.message).split(" (Triggered")[0] for w in theirs]


def test_dense_tensor_queries_raise_as_torch():
    x, tx = both(lambda m: m.ones(2, 2))
    for name in ("coalesce", "is_coalesced", "indices", "values"):
        with pytest.raises(RuntimeError) as theirs:
            getattr(tx, name)()
        with pytest.raises(RuntimeError, match=str(theirs.value)):
            getattr(x, name)()
    assert (x.sparse_dim(), x.dense_dim()) == (tx.sparse_dim(), tx.dense_dim())
    assert x.to_dense() is x


@pytest.mark.parametrize(
    "build",
    [
        lambda m: m.sparse_coo_tensor(m.tensor(INDICES), m.tensor(VALUES[:3]), (3, 3)),
        lambda m: m.sparse_coo_tensor(m.tensor(INDICES), m.tensor(VALUES), (3, 3, 3)),
        lambda m: m.sparse_coo_tensor(m.tensor(INDICES[0]), m.tensor(VALUES)),
        lambda m: m.sparse_coo_tensor(-m.tensor(INDICES), m.tensor(VALUES), (3, 3), check_invariants=True),
        lambda m: m.ones(2, 2).to_sparse(3),
        lambda m: m.ones(2, 2).to_sparse(0),
        lambda m: sparse(m).to_sparse(1),
        lambda m: sparse(m) + m.ones(3, 3),
        lambda m: m.ones(2) + sparse(m),
        lambda m: sparse(m).to_dense(m.float64),
    ],
)
def test_bad_input_gets_torchs_error(build):
    with pytest.raises(RuntimeError) as theirs:
        build(torch)
    with pytest.raises(RuntimeError, match=str(theirs.value).split("(")[0].strip()[:60].replace("[", r"\[")):
        build(bg)


def test_indices_outside_the_size_are_refused():
    with pytest.raises(RuntimeError, match="size is inconsistent with indices: for dim 0, size is 2 but found index 2"):
        sparse(bg, size=(2, 3))


def test_dense_ops_on_a_sparse_tensor_say_what_is_missing():
    s = sparse(bg)
    with pytest.raises(RuntimeError, match=r"not provided for sparse COO tensors.*\.to_dense\(\)"):
        s.exp()
    with pytest.raises(TypeError, match="can't convert Sparse layout tensor to numpy"):
        s.numpy()


# ---- products ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "product",
    [
        lambda m, s, d: m.sparse.mm(s, d),
        lambda m, s, d: m.spmm(s, d),
        lambda m, s, d: m.mm(s, d),
        lambda m, s, d: m.matmul(s, d),
        lambda m, s, d: s @ d,
        lambda m, s, d: s.mm(d),
        lambda m, s, d: m.sparse.addmm(m.ones(3, 2), s, d, beta=0.5, alpha=2.0),
    ],
)
def test_sparse_dense_products_and_their_gradients(product):
    rng = np.random.default_rng(0)
    s, t = both(lambda m: sparse(m, requires_grad=True))
    d, td = (dense_of(np.random.default_rng(1), m, 3, 2).requires_grad_() for m in (bg, torch))
    out, t_out = product(bg, s, d), product(torch, t, td)
    assert_same(out, t_out, rtol=1e-5, atol=1e-6)
    cot = rng.standard_normal((3, 2)).astype(np.float32)
    out.backward(bg.tensor(cot))
    t_out.backward(torch.tensor(cot))
    assert_same(d.grad, td.grad, rtol=1e-5, atol=1e-6)
    assert s.grad.is_sparse
    expected = t.grad if t.grad.is_sparse else t.grad.sparse_mask(t.coalesce())  # torch.mm's gradient is dense
    assert_same(s.grad.to_dense(), expected.to_dense() if t.grad.is_sparse else _masked(t.grad, t), rtol=1e-5)


def _masked(dense_grad, t):
    """torch's dense gradient kept where the sparse tensor specifies an element, zero elsewhere."""
    idx = t._indices()
    return torch.zeros_like(dense_grad).index_put_((idx[0], idx[1]), dense_grad[idx[0], idx[1]])


def test_dense_sparse_products_and_a_matrix_vector_product():
    rng = np.random.default_rng(2)
    s, t = both(sparse)
    d, td = (dense_of(np.random.default_rng(3), m, 2, 3) for m in (bg, torch))
    assert_same(d @ s, td @ t, rtol=1e-5)
    assert_same(bg.mm(d, s), torch.mm(td, t), rtol=1e-5)
    v = rng.standard_normal(3).astype(np.float32)
    assert_same(s @ bg.tensor(v), t @ torch.tensor(v), rtol=1e-5)


def test_sparse_sparse_product_is_sparse():
    s, t = both(sparse)
    assert_same_sparse(bg.sparse.mm(s, s), torch.sparse.mm(t, t))


def test_product_errors_name_the_mismatch():
    with pytest.raises(RuntimeError, match=r"Expected dim 0 size 3, got 4"):
        bg.sparse.mm(sparse(bg), bg.ones(4, 2))
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        bg.sparse.mm(sparse(bg), bg.ones(3, 2, dtype=bg.float64))


# ---- elementwise, shape and reductions ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "op",
    [
        lambda m, s: s * 2.5,
        lambda m, s: 2.5 * s,
        lambda m, s: s / 4,
        lambda m, s: -s,
        lambda m, s: s + s,
        lambda m, s: s.coalesce() + s.coalesce(),
        lambda m, s: m.add(s, s, alpha=2),
        lambda m, s: s - s * 3,
        lambda m, s: s.coalesce() * s.coalesce(),
        lambda m, s: s * m.arange(1.0, 4.0),
        lambda m, s: m.arange(9.0).reshape(3, 3) * s.coalesce(),
        lambda m, s: s.t(),
        lambda m, s: s.transpose(0, 1),
        lambda m, s: m.t(s.coalesce()),
        lambda m, s: s.double(),
        lambda m, s: m.sparse.sum(s, 1),
        lambda m, s: m.sparse.sum(s, 0),
        lambda m, s: m.sparse.softmax(s, 1),
        lambda m, s: m.sparse.softmax(s, 0),
        lambda m, s: m.sparse.log_softmax(s, 1),
    ],
)
def test_sparse_results_and_gradients(op):
    s, t = both(lambda m: sparse(m, requires_grad=True))
    out, t_out = op(bg, s), op(torch, t)
    assert_same_sparse(out, t_out, rtol=1e-5, atol=1e-6)
    cot = np.random.default_rng(4).standard_normal(tuple(out.shape)).astype(out._values().detach().numpy().dtype)
    (out.to_dense() * bg.tensor(cot)).sum().backward()
    (t_out.to_dense() * torch.tensor(cot)).sum().backward()
    assert_same(s.grad.to_dense(), t.grad.to_dense(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "op",
    [
        lambda m, s: m.sparse.sum(s),
        lambda m, s: s.sum(),
        lambda m, s: m.sum(s),
        lambda m, s: m.ones(3, 3) + s,
        lambda m, s: m.add(m.ones(3, 3), s, alpha=3),
        lambda m, s: s.to_dense() * 2,
        lambda m, s: m.sparse.sum(s, (0, 1)),
    ],
)
def test_dense_results_and_gradients(op):
    s, t = both(lambda m: sparse(m, requires_grad=True))
    out, t_out = op(bg, s), op(torch, t)
    assert_same(out, t_out, rtol=1e-5)
    out.sum().backward()
    t_out.sum().backward()
    assert s.grad.is_sparse
    expected = t.grad.to_dense() if t.grad.is_sparse else _masked(t.grad, t)  # dense + sparse: torch's is dense
    assert_same(s.grad.to_dense(), expected, rtol=1e-5)


def test_gradient_of_to_dense_keeps_the_indices():
    s, t = both(lambda m: sparse(m, requires_grad=True))
    (s.to_dense() * bg.arange(9.0).reshape(3, 3)).sum().backward()
    (t.to_dense() * torch.arange(9.0).reshape(3, 3)).sum().backward()
    assert_same_sparse(s.grad, t.grad, flag=False)


def test_to_sparse_passes_the_gradient_to_the_dense_tensor():
    x, tx = both(lambda m: m.tensor([[0.0, 1.0], [2.0, 0.0]], requires_grad=True))
    for m, v in ((bg, x), (torch, tx)):
        (m.sparse.mm(v.to_sparse(), m.ones(2, 3)) ** 2).sum().backward()
    assert_same(x.grad, tx.grad)


# ---- autograd API ---------------------------------------------------------------------------------------------------
def test_autograd_grad_with_sparse_inputs_outputs_and_grad_outputs():
    s, t = both(lambda m: sparse(m, UNIQUE, VALUES[:4], requires_grad=True))
    d, td = (dense_of(np.random.default_rng(5), m, 3, 2).requires_grad_() for m in (bg, torch))
    gs, gd = bg.autograd.grad(bg.sparse.mm(s, d).pow(2).sum(), (s, d))
    tgs, tgd = torch.autograd.grad(torch.sparse.mm(t, td).pow(2).sum(), (t, td))
    assert_same_sparse(gs, tgs, flag=False, rtol=1e-5)
    assert_same(gd, tgd, rtol=1e-5)
    doubled, t_doubled = s * 3, t * 3
    g = bg.autograd.grad(doubled, s, grad_outputs=s.detach())[0]
    tg = torch.autograd.grad(t_doubled, t, grad_outputs=t.detach())[0]
    assert_same(g.to_dense(), tg.to_dense())


def test_backward_from_a_sparse_output_and_grad_assignment():
    s, t = both(lambda m: sparse(m, UNIQUE, VALUES[:4], requires_grad=True))
    (s * 2).backward(s.detach())
    (t * 2).backward(t.detach())
    assert_same_sparse(s.grad, t.grad, flag=False)
    s.grad = None
    assert s.grad is None
    with pytest.raises(RuntimeError, match="with its indices"):
        s.grad = bg.ones(3, 3)


def test_gradcheck_through_a_sparse_product():
    idx = bg.tensor(UNIQUE)
    d = bg.randn(3, 2, dtype=bg.float64, requires_grad=True)
    v = bg.tensor(VALUES[:4], dtype=bg.float64, requires_grad=True)
    assert bg.autograd.gradcheck(lambda v, d: bg.sparse.mm(bg.sparse_coo_tensor(idx, v, (3, 3)), d), (v, d))
    assert bg.autograd.gradcheck(lambda v: bg.sparse.softmax(bg.sparse_coo_tensor(idx, v, (3, 3)), 1).to_dense(), v)


def test_a_sparse_tensor_made_from_values_that_require_grad_is_not_their_leaf():
    v, tv = both(lambda m: m.tensor(VALUES, requires_grad=True))
    s, t = both(lambda m: m.sparse_coo_tensor(m.tensor(INDICES), v if m is bg else tv, (3, 3)))
    assert not s.is_leaf and s.grad_fn is not None and not t.is_leaf
    s.to_dense().sum().backward()
    t.to_dense().sum().backward()
    assert_same(v.grad, tv.grad)


# ---- a two-layer GCN -----------------------------------------------------------------------------------------------
def _normalized_adjacency(m, rng, n):
    """D^-1/2 (A + I) D^-1/2 of a random undirected graph, as a sparse tensor (the GCN papers' propagation)."""
    a = (rng.random((n, n)) < 0.15).astype(np.float32)
    a = np.maximum(a, a.T) + np.eye(n, dtype=np.float32)
    inv_sqrt = 1.0 / np.sqrt(a.sum(1))
    rows, cols = np.nonzero(a)
    values = (inv_sqrt[rows] * a[rows, cols] * inv_sqrt[cols]).astype(np.float32)
    return m.sparse_coo_tensor(m.tensor(np.stack([rows, cols])), m.tensor(values), (n, n))


def _gcn_run(m, steps=4):
    rng = np.random.default_rng(6)
    n, features, hidden, classes = 20, 8, 16, 3
    adj = _normalized_adjacency(m, rng, n)
    x = m.tensor(rng.standard_normal((n, features)).astype(np.float32))
    labels = m.tensor(rng.integers(0, classes, n))
    w1 = m.tensor((rng.standard_normal((features, hidden)) * 0.3).astype(np.float32), requires_grad=True)
    w2 = m.tensor((rng.standard_normal((hidden, classes)) * 0.3).astype(np.float32), requires_grad=True)
    b = m.zeros(classes, requires_grad=True)
    opt = m.optim.Adam([w1, w2, b], lr=0.05)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        h = m.relu(m.spmm(adj, x @ w1))
        out = m.sparse.mm(adj, h @ w2) + b
        loss = m.nn.functional.cross_entropy(out, labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, (w1, w2, b)


def test_two_layer_gcn_trains_as_torch():
    losses, params = _gcn_run(bg)
    t_losses, t_params = _gcn_run(torch)
    np.testing.assert_allclose(losses, t_losses, rtol=1e-5, atol=1e-6)
    assert losses[-1] < losses[0]
    for p, tp in zip(params, t_params):
        assert_same(p, tp, rtol=1e-4, atol=1e-5)


# ---- elementwise functions of the values ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", SPARSE_VALUEWISE)
def test_zero_preserving_functions_apply_to_the_values(name):
    positive = [0.2, 0.7, 0.4, 0.9, 0.1]
    s, t = both(lambda m: sparse(m, values=positive, requires_grad=True))
    out, t_out = getattr(bg, name)(s), getattr(torch, name)(t)
    assert_same_sparse(out, t_out, rtol=1e-5, atol=1e-6)
    assert_same_sparse(getattr(s, name)(), getattr(t, name)(), rtol=1e-5, atol=1e-6)
    if not (t_out.dtype.is_floating_point and t_out.requires_grad):
        return
    out.to_dense().sum().backward()
    try:
        t_out.to_dense().sum().backward()
    except (NotImplementedError, RuntimeError):  # torch's backward of some (sin, sqrt, ...) has no sparse kernel
        expected = torch.func.grad(lambda v: getattr(torch, name)(v).sum())(t.coalesce()._values().detach())
        assert_same(s.grad._values(), expected, rtol=1e-5, atol=1e-6)
        return
    assert_same(s.grad.to_dense(), t.grad.to_dense(), rtol=1e-5, atol=1e-6)


def test_pow_clone_and_the_zeroth_power():
    s, t = both(lambda m: sparse(m, requires_grad=True))
    assert_same_sparse(s**2, t**2)
    assert_same_sparse(bg.pow(s, 3), torch.pow(t, 3))
    assert_same_sparse(s.clone(), t.clone())
    assert_same_sparse(bg.clone(s.coalesce()), torch.clone(t.coalesce()))
    with pytest.raises(RuntimeError, match="cannot raise to zeroth power on sparse tensor"):
        s.pow(0)


def test_every_dispatched_function_has_a_sparse_form():
    assert set(bg.sparse.SPARSE_FUNCTIONS) == SPARSE_DISPATCHED
    assert all(getattr(bg.sparse.SparseCOO, name) is not getattr(bg.Tensor, name) for name in SPARSE_DISPATCHED)


def test_tensor_conveniences_on_a_sparse_tensor():
    s, t = both(lambda m: sparse(m, UNIQUE, VALUES[:4], requires_grad=True))
    assert s.type() == t.type() == "torch.sparse.FloatTensor"
    for name in ("long", "int", "half", "bool", "double", "float"):
        assert_same_sparse(getattr(s, name)(), getattr(t, name)())
    assert_same_sparse(s.type(bg.float64), t.type(torch.float64))
    assert_same_sparse(s.T, t.T)
    assert_same_sparse(s.data, t.data)
    assert not s.data.requires_grad and s.detach().grad_fn is None
    one, t_one = both(lambda m: m.sparse_coo_tensor([[1]], [2.5], (3,)))
    assert one.sum().item() == t_one.sum().item() == 2.5
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        bool(s)


def test_batched_gradients_of_sparse_inputs_are_refused():
    s = sparse(bg, requires_grad=True)
    with pytest.raises(RuntimeError, match="is_grads_batched=True is not provided with sparse COO"):
        bg.autograd.grad(bg.sparse.mm(s, bg.ones(3, 2)), s, bg.ones(4, 3, 2), is_grads_batched=True)


def _renormalized(m, rng):
    """The preprocessing of the public GCN examples: a sparse integer adjacency, self-loops added densely, degrees
    scaled on both sides by sparse diagonal matrices, features row-scaled by one."""
    v, e = 30, 70
    edges = rng.integers(0, v, (e, 2)).astype(np.int32)
    features = m.tensor((rng.random((v, 6)) < 0.3).astype(np.float32))
    scale = 1 / m.sum(features, dim=1)
    scale[scale == float("inf")] = 0
    features = m.diag(scale).to_sparse() @ features
    adj = m.eye(v) + m.sparse_coo_tensor(edges.T, m.ones(e), (v, v), dtype=m.int64)
    degree = m.sqrt(1 / m.sum(adj, dim=1))
    degree = m.diag(degree).to_sparse()
    return features.to_sparse(), (degree @ adj @ degree).to_sparse()


def test_the_examples_adjacency_preprocessing_matches_torch():
    (f, adj), (tf, t_adj) = (_renormalized(m, np.random.default_rng(7)) for m in (bg, torch))
    assert_same_sparse(f, tf, rtol=1e-6)
    assert_same_sparse(adj, t_adj, rtol=1e-6)
    w = np.random.default_rng(8).standard_normal((6, 4)).astype(np.float32)
    assert_same(bg.spmm(adj, bg.mm(f, bg.tensor(w))), torch.spmm(t_adj, torch.mm(tf, torch.tensor(w))), rtol=1e-5)


def test_sparse_mask_reads_a_tensor_at_the_masks_positions():
    d, td = (m.arange(9.0).reshape(3, 3).requires_grad_() for m in (bg, torch))
    for mask, t_mask in (both(sparse), both(lambda m: sparse(m).coalesce())):
        assert_same_sparse(d.sparse_mask(mask), td.sparse_mask(t_mask))
    assert_same_sparse(sparse(bg).sparse_mask(sparse(bg)), sparse(torch).sparse_mask(sparse(torch)))
    (d.sparse_mask(mask).to_dense() * 2).sum().backward()
    (td.sparse_mask(t_mask).to_dense() * 2).sum().backward()
    assert_same(d.grad, td.grad)
    assert_same(bg.addmm(bg.ones(3, 2), mask, bg.ones(3, 2)), torch.addmm(torch.ones(3, 2), t_mask, torch.ones(3, 2)))


@pytest.mark.parametrize(
    "call",
    [
        lambda m, a: m.spmm(a, a),
        lambda m, a: m.sparse.mm(a, a),
        lambda m, a: m.sparse.addmm(a, a, a),
        lambda m, a: m.spmm(a, sparse(m, UNIQUE, VALUES[:4]).to_dense()[:2].to_sparse()),
    ],
)
def test_torch_sparse_products_take_dense_operands_too(call):
    a, ta = both(lambda m: m.arange(6.0).reshape(2, 3)[:, :2])
    assert_same(call(bg, a), call(torch, ta))


def test_torch_sparse_reductions_refuse_a_dense_tensor():
    with pytest.raises(RuntimeError, match="coalesce expected sparse coordinate tensor layout but got Strided"):
        bg.sparse.sum(bg.ones(2, 2))
    with pytest.raises(RuntimeError, match="input must be a sparse COO tensor"):
        bg.sparse.softmax(bg.ones(2, 2), 1)


def test_a_custom_function_refuses_a_sparse_input_that_requires_grad():
    class Product(bg.autograd.Function):
        @staticmethod
        def forward(ctx, s, d):
            ctx.s = s
            return bg.sparse.mm(s, d)

        @staticmethod
        def backward(ctx, g):
            return None, bg.sparse.mm(ctx.s.t(), g)

    d = bg.ones(3, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="Product.apply: a sparse COO input that requires grad is not provided"):
        Product.apply(sparse(bg, requires_grad=True), d)
    Product.apply(sparse(bg), d).sum().backward()  # a sparse input that does not require grad is an ordinary one
    assert_same(d.grad, sparse(torch).to_dense().sum(0).unsqueeze(1).expand(3, 2))


@pytest.mark.parametrize(
    "build",
    [
        lambda m, s: 1 + s,
        lambda m, s: m.add(1, s),
        lambda m, s: 1 - s,
        lambda m, s: s - 1,
        lambda m, s: m.sparse.addmm(m.ones(3, 3), s, s),
    ],
)
def test_numbers_and_sparse_second_factors_get_torchs_errors(build):
    with pytest.raises(RuntimeError) as theirs:
        build(torch, sparse(torch))
    with pytest.raises(RuntimeError, match=re.escape(str(theirs.value))):
        build(bg, sparse(bg))


def test_masked_gradcheck_of_sparse_inputs():
    s = sparse(bg, UNIQUE, VALUES[:4], dtype=bg.float64, requires_grad=True)
    d = bg.rand(3, 2, dtype=bg.float64, requires_grad=True)
    assert bg.autograd.gradcheck(lambda s, d: bg.sparse.mm(s, d), (s, d), masked=True)
    assert bg.autograd.gradcheck(lambda s: bg.sparse.log_softmax(s, 0).to_dense(), (s,), masked=True)
    assert bg.autograd.gradgradcheck(lambda s, d: bg.sparse.mm(s, d) ** 2, (s, d), masked=True)
    with pytest.raises(RuntimeError, match="checked on its specified elements only .*: pass masked=True"):
        bg.autograd.gradcheck(lambda s: s.to_dense(), (s,))
    wrong = FUNCTIONS[bg]["WrongBackward"]  # x * x with a backward of 3x
    assert not bg.autograd.gradcheck(lambda s: wrong.apply(s.to_dense()), (s,), masked=True, raise_exception=False)


@pytest.mark.parametrize("masked", [None, False, True])
@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradcheck_of_a_sparse_input_with_every_element_specified_under_any_masked(masked, fast_mode):
    def check(m, fn):
        s = m.tensor([[0.5, -1.0], [2.0, 3.0]], dtype=m.float64).to_sparse().requires_grad_()
        return m.autograd.gradcheck(fn(m), (s,), masked=masked, fast_mode=fast_mode, raise_exception=False)

    for fn in (lambda m: m.sum, lambda m: lambda s: (s * s).to_dense()):
        assert check(bg, fn) is check(torch, fn) is True
    wrong = lambda m: lambda s: FUNCTIONS[m]["WrongBackward"].apply(s.to_dense())  # noqa: E731
    assert check(bg, wrong) is check(torch, wrong) is False


def test_to_dense_without_masked_grad_where_every_element_is_specified():
    def gradient(m, masked_grad):
        s = m.tensor([[0.5, -1.0], [2.0, 3.0]], dtype=m.float64).to_sparse().requires_grad_()
        (m.arange(4.0, dtype=m.float64).reshape(2, 2) * s.to_dense(masked_grad=masked_grad)).sum().backward()
        return s.grad.to_dense()

    for masked_grad in (False, True):
        assert_same(gradient(bg, masked_grad), gradient(torch, masked_grad))
    partial = sparse(bg, UNIQUE, VALUES[:4], requires_grad=True)
    with pytest.raises(RuntimeError, match="masked_grad=False.* every element only"):
        partial.to_dense(masked_grad=False)


def _module_with_a_sparse_buffer(m):
    class Propagate(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("adj", sparse(m, UNIQUE, VALUES[:4]))
            self.lin = m.nn.Linear(3, 2)

        def forward(self, x):
            return m.spmm(self.adj, self.lin(x))

    return Propagate()


def test_a_sparse_buffer_converts_and_loads_with_its_module():
    model, t_model = _module_with_a_sparse_buffer(bg), _module_with_a_sparse_buffer(torch)
    for convert in (lambda mod: mod.double(), lambda mod: mod.to("cpu"), lambda mod: mod.float()):
        assert_same_sparse(convert(model).adj, convert(t_model).adj)
    source = dict(_module_with_a_sparse_buffer(bg).state_dict(), adj=sparse(bg, UNIQUE, [1.0, 2.0, 3.0, 4.0]))
    model.load_state_dict(source)
    assert_same_sparse(model.adj, sparse(torch, UNIQUE, [1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(RuntimeError, match="outside the graph only"):
        sparse(bg, requires_grad=True).copy_(sparse(bg))


@pytest.mark.parametrize(
    "pair",
    [
        lambda m: (sparse(m), sparse(m, UNIQUE, VALUES[:4])),
        lambda m: (sparse(m), sparse(m).to_dense()),
        lambda m: (sparse(m, UNIQUE, VALUES[:4]), sparse(m, UNIQUE, [3.0, 4.0, 5.0, 6.5])),
        lambda m: (sparse(m), sparse(m, size=(3, 4))),
    ],
)
def test_assert_close_compares_sparse_tensors_as_torch(pair):
    with pytest.raises(AssertionError) as theirs:
        torch.testing.assert_close(*pair(torch))
    with pytest.raises(AssertionError, match=re.escape(str(theirs.value).splitlines()[0])):
        bg.testing.assert_close(*pair(bg))


def test_assert_close_accepts_equal_sparse_tensors_and_other_layouts_when_told():
    bg.testing.assert_close(sparse(bg), sparse(bg))
    bg.testing.assert_close(sparse(bg), sparse(bg).to_dense(), check_layout=False)
    with pytest.raises(AssertionError):
        bg.testing.assert_close(sparse(bg), sparse(bg).to_dense() + 1, check_layout=False)


def test_backward_with_sparse_inputs_fills_only_their_grad():
    x, tx = both(lambda m: m.tensor([[0.0, 1.0], [2.0, 0.0]], requires_grad=True))
    d, td = both(lambda m: m.full((2, 2), 3.0, requires_grad=True))
    s, t = x.to_sparse(), tx.to_sparse()  # not leaves: their gradients are kept because they are the inputs
    bg.sparse.mm(s, d).sum().backward(inputs=[s])
    torch.sparse.mm(t, td).sum().backward(inputs=[t])
    assert_same_sparse(s.grad, t.grad, flag=False)
    assert d.grad is None and td.grad is None and x.grad is None and tx.grad is None


def test_the_underscore_accessors_as_torch():
    def accessors(m):
        s = sparse(m)  # uncoalesced: a position given twice
        parts = [s._indices(), s._values(), s._nnz(), s._dimI(), s._dimV(), s.is_coalesced()]
        unique = sparse(m, [[2, 0, 1], [0, 2, 1]], VALUES[:3])
        marked = unique._coalesced_(True)
        return parts + [marked is unique, unique.is_coalesced(), unique.indices(), unique.values()]

    ours, theirs = accessors(bg), accessors(torch)
    for got, want in zip(ours, theirs):
        if isinstance(want, torch.Tensor):
            assert_same(got, want)
        else:
            assert got == want
    with pytest.raises(TypeError, match="must be bool, not int"):
        sparse(bg)._coalesced_(1)
    for name in ("_indices", "_values", "_nnz"):
        with pytest.raises(NotImplementedError) as theirs:
            getattr(torch.ones(2), name)()
        with pytest.raises(NotImplementedError, match=re.escape(str(theirs.value).split(" backend")[0])):
            getattr(bg.ones(2), name)()
