"""Sparse COO tensors where torch's rules of layout decide: a dense tensor's methods with a sparse operand,
gradcheck's refusal of sparse outputs, .data across layouts, _values() outside the graph, the *_like factories of a
sparse tensor and torch.func's transforms of sparse inputs, against torch 2.13."""

import re

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same
from test_sparse_coo import UNIQUE, VALUES, assert_same_sparse, both, dense_of, sparse

pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled")


@pytest.mark.parametrize(
    "method",
    [
        lambda d, s: d.mm(s),
        lambda d, s: d.matmul(s),
        lambda d, s: d.add(s),
        lambda d, s: d.sub(s, alpha=2),
        lambda d, s: d.mul(s),
    ],
)
def test_a_dense_tensors_methods_take_a_sparse_operand_as_torchs(method):
    """dense.mm(sparse) and the like run the op's sparse form, as the module functions do; the dense operand's
    gradient has torch's values (dense here where torch's of a product with a sparse tensor is sparse)."""
    results = {}
    for m in (bg, torch):
        d = dense_of(np.random.default_rng(4), m, 3, 3).requires_grad_()
        out = method(d, sparse(m))
        (out.to_dense() if out.is_sparse else out).pow(2).sum().backward()
        results[m] = (out, d.grad)
    (out, grad), (t_out, t_grad) = results[bg], results[torch]
    assert out.is_sparse == t_out.is_sparse
    assert_same(out.to_dense() if out.is_sparse else out, t_out.to_dense() if t_out.is_sparse else t_out, rtol=1e-5)
    assert_same(grad, t_grad.to_dense() if t_grad.is_sparse else t_grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("check", ["gradcheck", "gradgradcheck"])
@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradchecks_refuse_a_sparse_output_as_torch(check, fast_mode):
    """A function with a sparse output that requires grad is refused with torch's ValueError, even with
    raise_exception=False."""
    d = bg.rand(3, 2, dtype=bg.float64, requires_grad=True)
    s = sparse(bg, UNIQUE, VALUES[:4], dtype=bg.float64, requires_grad=True)
    with pytest.raises(ValueError) as theirs:
        torch.autograd.gradcheck(lambda x: x.to_sparse(), (torch.rand(3, 2, dtype=torch.float64, requires_grad=True),))
    for fn, inputs in [(lambda x: x.to_sparse(), (d,)), (lambda s: bg.sparse.log_softmax(s, 0), (s,))]:
        with pytest.raises(ValueError, match=re.escape(str(theirs.value))):
            getattr(bg.autograd, check)(fn, inputs, masked=True, fast_mode=fast_mode, raise_exception=False)


def test_setting_data_across_layouts_is_refused_and_within_the_sparse_layout_replaces_it():
    for m in (bg, torch):
        d, s = m.randn(1, 2), m.sparse_coo_tensor(m.zeros([1, 1]), m.ones([1]))
        with pytest.raises(RuntimeError, match=re.escape("have incompatible tensor type.")):
            d.data = s
        with pytest.raises(RuntimeError, match=re.escape("have incompatible tensor type.")):
            s.data = d
    s, t = both(lambda m: sparse(m, UNIQUE, VALUES[:4], requires_grad=True))
    s.data, t.data = both(lambda m: sparse(m, dtype=m.float64))
    assert_same_sparse(s, t)
    assert s.requires_grad and s.is_leaf


def test_underscore_values_is_outside_the_graph_and_values_inside_as_torchs():
    s, t = both(lambda m: sparse(m, requires_grad=True).coalesce())
    for x in (s, t):
        assert not x._values().requires_grad and x._values().grad_fn is None
        assert x.values().requires_grad
    (g,), (tg,) = bg.autograd.grad(s.values().sum(), s), torch.autograd.grad(t.values().sum(), t)
    assert_same_sparse(g, tg, flag=False)


@pytest.mark.parametrize("factory", ["zeros_like", "empty_like"])
def test_zeros_and_empty_like_of_a_sparse_tensor_are_sparse_with_no_element(factory):
    s, t = both(lambda m: m.sparse_coo_tensor(m.tensor([[0, 1]]), m.ones(2, 3), (4, 3)))
    made, t_made = getattr(bg, factory)(s, dtype=bg.float64), getattr(torch, factory)(t, dtype=torch.float64)
    assert_same_sparse(made, t_made)
    assert made.dtype == bg.float64 and made._nnz() == 0
    assert getattr(bg, factory)(s, requires_grad=True).requires_grad
    dense, t_dense = getattr(bg, factory)(s, layout=bg.strided), getattr(torch, factory)(t, layout=torch.strided)
    assert dense.layout == bg.strided and t_dense.layout == torch.strided and dense.shape == t_dense.shape


def test_torch_func_transforms_of_sparse_inputs_keep_the_layout():
    """Inside grad/grad_and_value/vjp a sparse argument is still sparse, and its gradient is sparse (zeros with
    no element where the output does not depend on it), as torch.func's."""
    got = {}
    for m in (bg, torch):
        s = m.sparse_coo_tensor(m.tensor(UNIQUE), m.tensor(VALUES[:4]), (3, 3))
        layouts = []

        def f(x, m=m, layouts=layouts):
            layouts.append(str(x.layout))
            return (m.sparse.mm(x, m.ones(3, 2)) ** 2).sum()

        g, value = m.func.grad_and_value(f)(s)
        unused = m.func.grad(lambda x, m=m: m.ones(()) * x.coalesce()._values().sum())(s)
        _, vjp_fn = m.func.vjp(lambda x, m=m: m.sparse.mm(x, m.ones(3, 2)), s)
        (vg,) = vjp_fn(m.ones(3, 2))
        got[m] = (layouts, g, value.item(), unused, vg)
    (layouts, g, value, unused, vg), (t_layouts, tg, t_value, t_unused, t_vg) = got[bg], got[torch]
    assert layouts == t_layouts == ["torch.sparse_coo"] and value == t_value
    for a, b in ((g, tg), (unused, t_unused), (vg, t_vg)):
        assert_same_sparse(a, b, flag=False)


def _gradcheck_outcome(lib, fn, inputs, **kw):
    try:
        return lib.autograd.gradcheck(fn, inputs, **kw)
    except RuntimeError as e:
        return str(e).splitlines()[0].split(":")[0]


@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradcheck_refuses_a_sparse_gradient_of_a_dense_input_as_torch(fast_mode):
    """A backward that returns a sparse gradient for a dense input passes the Jacobian comparison (read densely) and
    fails the layout check, as torch's."""
    outcome = {}
    for lib in (bg, torch):

        class ToSparse(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return g.to_sparse()

        x = lib.ones(3, dtype=lib.float64, requires_grad=True)
        outcome[lib] = [
            _gradcheck_outcome(lib, ToSparse.apply, (x,), fast_mode=fast_mode),
            lib.autograd.gradcheck(ToSparse.apply, (x,), fast_mode=fast_mode, raise_exception=False),
        ]
    assert outcome[bg] == outcome[torch] == ["grad is incorrect layout (torch.sparse_coo is not torch.strided)", False]


@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradcheck_batched_check_of_a_sparse_input_fails_as_torchs(fast_mode):
    """Batched gradients of sparse inputs are refused (grad(..., is_grads_batched=True) refuses them), so the batched
    check fails, as torch's (whose vmap has no sparse kernels)."""
    for lib in (bg, torch):
        x = lib.rand(6, dtype=lib.float64, requires_grad=True).to_sparse()
        with pytest.raises(RuntimeError, match="While computing batched gradients, got: "):
            lib.autograd.gradcheck(
                lambda s: s.to_dense(), (x,), masked=True, check_batched_grad=True, fast_mode=fast_mode
            )
        assert not lib.autograd.gradcheck(
            lambda s: s.to_dense(),
            (x,),
            masked=True,
            check_batched_grad=True,
            fast_mode=fast_mode,
            raise_exception=False,
        )
        assert lib.autograd.gradcheck(lambda s: s.to_dense(), (x,), masked=True, fast_mode=fast_mode)


def test_a_hook_on_a_sparse_tensor_sees_and_replaces_its_sparse_gradient():
    weights = [[1.0, 2.0], [3.0, 4.0]]
    got = {}
    for lib in (bg, torch):
        s = lib.sparse_coo_tensor(lib.tensor([[0, 1], [1, 0]]), lib.tensor([1.0, 2.0]), (2, 2), requires_grad=True)
        seen = []
        handle = s.register_hook(lambda g, seen=seen: seen.append(g.is_sparse) or g * 2)
        (s.to_dense() * lib.tensor(weights)).sum().backward()
        doubled = s.grad.to_dense().tolist()
        handle.remove()
        s.grad = None
        (s.to_dense() * lib.tensor(weights)).sum().backward()
        errors = []
        for bad in (lambda g: g.to_dense(), lambda g: g.double()):
            handle = s.register_hook(bad)
            try:
                s.to_dense().sum().backward()
            except RuntimeError as e:
                errors.append(str(e))
            handle.remove()
        got[lib] = (seen, doubled, s.grad.to_dense().tolist(), s.grad.layout == lib.sparse_coo, errors)
    assert got[bg] == got[torch]
