"""What optimization libraries built on torch's autograd reach for beyond the public API, checked against torch:
the prototype vmap of torch._vmap_internals (Hessians and Jacobians from batched autograd.grad), the unchecked
autograd.functional._as_tuple, torch.optim.lbfgs's line search helpers, optim.optimizer.required, finfo/iinfo of
Python types, 0-dim Tensor alpha/beta of the addmm family, torch.norm's out=, cholesky_ex's partial factor where
the matrix is not positive-definite, in-place view ops on .data and detach() views, LinAlgError's class name."""

import importlib
import re

import numpy as np
import pytest
import torch
import torch.optim.lbfgs as torch_lbfgs

import batched_grad as bg
import batched_grad.optim.lbfgs as bg_lbfgs
from oracle import assert_same

F64 = dict(rtol=1e-12, atol=1e-12)


def _hessian_rows(m, vmap_of):
    """The rows of the Hessian of sum(x^3) * |x|^2 from one batched double backward over the identity."""
    x = m.tensor([0.5, -1.0, 2.0], dtype=m.float64, requires_grad=True)
    (grad,) = m.autograd.grad((x**3).sum() * x.square().sum(), x, create_graph=True)
    return vmap_of(lambda v: m.autograd.grad(grad, x, v, retain_graph=True)[0])(m.eye(3, dtype=m.float64))


def _prototype_vmap(m):
    return importlib.import_module(f"{m.__name__}._vmap_internals")


def test_prototype_vmap_module_is_an_attribute_as_torchs():
    """Code that writes torch._vmap_internals._vmap without importing the module finds it, as on torch."""
    assert bg._vmap_internals is _prototype_vmap(bg)
    assert torch._vmap_internals is _prototype_vmap(torch)


def test_prototype_vmap_batches_autograd_grad():
    expected = _hessian_rows(torch, _prototype_vmap(torch)._vmap)
    assert_same(_hessian_rows(bg, _prototype_vmap(bg)._vmap), expected, **F64)


def test_prototype_vmap_dims_and_none_results():
    def run(m):
        internals = _prototype_vmap(m)
        x = m.arange(6.0, dtype=m.float64).reshape(2, 3)
        swapped = internals._vmap(lambda row: (row * 2, row.sum()), in_dims=1, out_dims=(1, 0))(x)
        w = m.ones(3, dtype=m.float64, requires_grad=True)
        unused = m.ones(2, dtype=m.float64, requires_grad=True)
        out = (w * 3).sum()

        def vjp(v):
            return m.autograd.grad(out, (w, unused), v, retain_graph=True, allow_unused=True)

        grads = internals._vmap(vjp, allow_none_pass_through=True)(m.ones(4, dtype=m.float64))
        return [*swapped, grads[0], grads[1]]

    actual, expected = run(bg), run(torch)
    assert expected[3] is None and actual[3] is None
    assert_same(actual[:3], expected[:3], **F64)
    for m in (torch, bg):
        with pytest.raises(ValueError, match=r"must only return Tensors, got type <class 'NoneType'> for return 1"):
            _prototype_vmap(m)._vmap(lambda v: (v, None))(m.ones(2))
        with pytest.raises(ValueError, match="`out_dims` must be an int or a tuple of int"):
            _prototype_vmap(m)._vmap(lambda v: v, out_dims=[0])(m.ones(2))
        with pytest.warns(FutureWarning, match="Please use `torch.vmap`"):
            _prototype_vmap(m).vmap(lambda v: v)


def test_functional_as_tuple_forms():
    for m in (torch, bg):
        as_tuple = importlib.import_module(f"{m.__name__}.autograd.functional")._as_tuple
        t = m.ones(2)
        assert as_tuple(t) == (t,) and as_tuple([t, t]) == (t, t) and as_tuple((t,)) == (t,)
        assert as_tuple(t, "inputs", "jacobian") == (False, (t,))
        with pytest.raises(TypeError, match="The inputs given to jacobian must be either a Tensor or a tuple"):
            as_tuple((t, 1), "inputs", "jacobian")


def _line_search(m, lbfgs):
    """A strong-Wolfe search along -g of the Rosenbrock function, as line-search code outside torch calls it."""
    x = m.tensor([-1.2, 1.0], dtype=m.float64)

    def rosen(z):
        return (1 - z[0]) ** 2 + 100 * (z[1] - z[0] ** 2) ** 2

    def obj_func(x, t, d):
        z = (x + t * d).requires_grad_(True)
        f = rosen(z)
        (g,) = m.autograd.grad(f, z)
        return float(f.detach()), g

    f, g = obj_func(x, 0.0, m.zeros(2, dtype=m.float64))
    d = -g
    found = lbfgs._strong_wolfe(obj_func, x, 1.0, d, f, g, g.dot(d))
    slope = m.tensor(-2.0, dtype=m.float64)  # torch passes directional derivatives as 0-dim tensors
    cubic = lbfgs._cubic_interpolate(0.0, 1.0, slope, 1.0, 0.5, -slope / 2, bounds=(0.1, 0.9))
    return [m.tensor(found[0]), found[1], m.tensor(found[2]), found[3], cubic]


def test_strong_wolfe_and_cubic_interpolate_as_torch_exposes_them():
    assert_same(_line_search(bg, bg_lbfgs), _line_search(torch, torch_lbfgs), **F64)


def test_required_hyperparameter():
    for m in (torch, bg):
        required = importlib.import_module(f"{m.__name__}.optim.optimizer").required
        assert repr(required) == "<required parameter>"

        class Plain(m.optim.Optimizer):
            def __init__(self, params, lr=required, momentum=0.0):
                super().__init__(params, dict(lr=lr, momentum=momentum))

        w = m.zeros(2, requires_grad=True)
        assert Plain([{"params": [w], "lr": 0.1}]).param_groups[0]["lr"] == 0.1
        with pytest.raises(ValueError, match="didn't specify a value of required optimization parameter lr"):
            Plain([w])


@pytest.mark.parametrize("kind", [float, int, bool, complex])
@pytest.mark.parametrize("info", ["finfo", "iinfo"])
def test_info_of_python_types(kind, info):
    try:
        expected = getattr(torch, info)(kind)
    except TypeError as error:
        with pytest.raises(TypeError, match=re.escape(str(error))):
            getattr(bg, info)(kind)
        return
    assert repr(getattr(bg, info)(kind)) == repr(expected)


FUSED = {
    "addmm": lambda m, x, a: m.addmm(x, x, x, beta=a, alpha=a),
    "addmm_": lambda m, x, a: x.clone().addmm_(x, x, alpha=a),
    "addmv": lambda m, x, a: m.addmv(x[0], x, x[1], beta=a, alpha=a),
    "addr": lambda m, x, a: m.addr(x, x[0], x[1], alpha=a),
    "addr_out": lambda m, x, a: m.addr(x, x[0], x[1], alpha=a, out=m.empty_like(x)),
    "Tensor.addr_": lambda m, x, a: x.clone().addr_(x[0], x[1], beta=a),
    "baddbmm": lambda m, x, a: m.baddbmm(x[None], x[None], x[None], alpha=a),
    "addbmm": lambda m, x, a: m.addbmm(x, x[None], x[None], beta=a),
}


@pytest.mark.parametrize("name", list(FUSED))
def test_fused_products_take_0dim_tensor_scalars(name):
    def run(m):
        x = m.tensor([[1.0, 2.0], [3.0, -1.0]], dtype=m.float64)
        return FUSED[name](m, x, m.tensor(-0.5, dtype=m.float64))

    assert_same(run(bg), run(torch), **F64)
    x = bg.ones(2, 2)
    with pytest.raises(TypeError, match=r"argument 'alpha' must be a Number, or a 0-dim Tensor.*shape \(1,\)"):
        bg.addr(x, x[0], x[1], alpha=bg.ones(1))
    with pytest.raises(TypeError, match="argument 'alpha' must be a Number.*that requires grad"):
        bg.addmm(x, x, x, alpha=bg.ones((), requires_grad=True))


@pytest.mark.parametrize(
    "args", [dict(), dict(p=2), dict(p=1, dim=1), dict(p="fro", dim=(0, 1)), dict(p="nuc"), dict(dtype="float64")]
)
def test_norm_out(args):
    def run(m):
        kwargs = {k: getattr(m, v) if k == "dtype" else v for k, v in args.items()}
        x = m.tensor([[3.0, 4.0, 1.0], [0.5, -2.0, 2.0]])
        out = m.empty(0, dtype=kwargs.get("dtype", m.float32))
        result = m.norm(x, out=out, **kwargs)
        return out, result is out

    (actual, same_actual), (expected, same_expected) = run(bg), run(torch)
    assert same_actual == same_expected
    assert_same(actual, expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got double instead"):
        bg.norm(bg.ones(2), out=bg.empty((), dtype=bg.float64))


def _not_positive_definite(m, dtype, failing):
    rng = np.random.default_rng(failing)
    a = rng.standard_normal((6, 6))
    a = a @ a.T + 0.1 * np.eye(6)
    if np.dtype(dtype).kind == "c":
        skew = rng.standard_normal((6, 6))
        a = a + 1j * (skew - skew.T)
    a[failing, failing] -= 40
    return m.tensor(a.astype(dtype))


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
@pytest.mark.parametrize("failing", [0, 2, 5])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_ex_partial_factor(dtype, failing, upper):
    """LAPACK leaves the columns before the failed one factored, the failed pivot's value in place and the rest
    as given; trust-region solvers build their next step from that row."""

    def run(m):
        a = _not_positive_definite(m, dtype, failing)
        batch = m.stack([a, a + 50 * m.eye(6, dtype=a.dtype)])
        return [*m.linalg.cholesky_ex(a, upper=upper), *m.linalg.cholesky_ex(batch, upper=upper)]

    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else F64
    assert_same(run(bg), run(torch), **tol)


def test_in_place_view_ops_on_detached_views():
    def run(m):
        w = m.arange(12.0, requires_grad=True).reshape(3, 4)
        w.grad = m.arange(12.0).reshape(3, 4)
        data = w.grad.data
        data.transpose_(0, 1)
        detached = w.detach()
        detached.t_()
        detached.unsqueeze_(0)
        detached.squeeze_(0)
        data.mul_(2)
        return [data, detached, w.grad]

    assert_same(run(bg), run(torch), **F64)


def test_lin_alg_error_class_name():
    with pytest.raises(bg.linalg.LinAlgError) as caught:
        bg.linalg.cholesky(-bg.eye(2))
    assert type(caught.value).__name__ == torch.linalg.LinAlgError.__name__ == "_LinAlgError"


def test_sync_batch_norm_normalizes_by_its_own_batch():
    def run(m):
        m.manual_seed(0)
        plain = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.BatchNorm1d(4), m.nn.Sequential(m.nn.BatchNorm1d(4)))
        model = m.nn.SyncBatchNorm.convert_sync_batchnorm(plain)
        x = m.randn(6, 3)
        out = model(x)
        out.square().sum().backward()
        sync = m.nn.SyncBatchNorm(2, momentum=None)
        images = sync(m.randn(2, 2, 3, 3))
        kinds = [type(layer).__name__ for layer in model.modules()]
        return [out, model[0].weight.grad, model[1].running_var, model[2][0].num_batches_tracked, images], kinds

    (actual, actual_kinds), (expected, expected_kinds) = run(bg), run(torch)
    assert actual_kinds == expected_kinds
    assert_same(actual, expected, rtol=1e-5, atol=1e-6)
    for m in (torch, bg):
        with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
            m.nn.SyncBatchNorm(3)(m.ones(3))


def test_distributed_collectives_without_a_process_group():
    import torch.distributed.nn as torch_collectives

    import batched_grad.distributed.nn as bg_collectives

    for m, collectives in ((torch, torch_collectives), (bg, bg_collectives)):
        assert m.distributed.ReduceOp.SUM is not None
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            collectives.all_reduce(m.ones(2), op=m.distributed.ReduceOp.SUM)
