"""functorch's make_functional and make_functional_with_buffers (deprecated there for torch.func.functional_call,
still in code written for functorch): the stateless model's values and gradients, per-sample gradients through
vmap(grad) of it, and its error, against functorch on torch 2.13."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad.func import grad, make_functional, make_functional_with_buffers
from oracle import assert_same, raises_like_torch

functorch = pytest.importorskip("functorch")


def _model(m):
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    if m is torch:
        return theirs
    ours = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.Tanh(), m.nn.Linear(4, 2)).double()
    ours.load_state_dict({k: m.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours


def _per_sample_grads(m, make, transforms):
    fmodel, params = make(_model(m))
    x = m.tensor(np.random.default_rng(1).standard_normal((5, 3)))

    def loss(params, row):
        return (fmodel(params, row[None]) ** 2).sum()

    return fmodel(params, x), transforms.vmap(transforms.grad(loss), in_dims=(None, 0))(params, x)


def test_make_functional_gives_functorchs_values_and_per_sample_gradients():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # functorch's deprecation
        want = _per_sample_grads(torch, functorch.make_functional, torch.func)
    got = _per_sample_grads(bg, make_functional, bg.func)
    assert_same(got[0], want[0].detach(), 1e-12, 1e-14)
    assert_same(list(got[1]), list(want[1]), 1e-12, 1e-14)


def test_make_functional_with_buffers_runs_the_model_with_given_buffers():
    def run(m, make):
        torch.manual_seed(0)
        model = m.nn.BatchNorm1d(3).double().eval()
        fmodel, params, buffers = make(model)
        shifted = tuple(b + 1 if b.is_floating_point() else b for b in buffers)
        x = m.tensor(np.random.default_rng(2).standard_normal((4, 3)))
        return fmodel(params, shifted, x), len(params), len(buffers)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        want = run(torch, functorch.make_functional_with_buffers)
    got = run(bg, make_functional_with_buffers)
    assert_same(got[0], want[0].detach(), 1e-12, 1e-14)
    assert got[1:] == want[1:]


def test_make_functional_of_a_model_with_buffers_raises_as_functorch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        raises_like_torch(lambda m: (functorch.make_functional if m is torch else make_functional)(m.nn.BatchNorm1d(3)))


def test_disable_autograd_tracking_gives_parameters_that_do_not_require_grad():
    _, params = make_functional(bg.nn.Linear(2, 2), disable_autograd_tracking=True)
    assert [p.requires_grad for p in params] == [False, False]
    grads = grad(lambda p: p[0].sum() + p[1].sum())(params)
    assert_same(list(grads), [torch.ones(2, 2), torch.ones(2)])


def torch_or_bg_sin(x):
    return x.sin()


def _deprecation_warnings(package, name, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        getattr(package, name)(*args)
    return [(w.category, str(w.message), w.filename) for w in caught if w.category is FutureWarning]


@pytest.mark.parametrize("name", ["vmap", "grad", "grad_and_value", "jacrev", "jacfwd", "hessian"])
def test_functorch_transforms_warn_futurewarning_as_torchs(name):
    import batched_grad.functorch as our_functorch

    want = _deprecation_warnings(functorch, name, torch_or_bg_sin)
    got = _deprecation_warnings(our_functorch, name, torch_or_bg_sin)
    assert [w[:2] for w in got] == [w[:2] for w in want] and len(got) == 1
    assert got[0][2] == __file__  # the warning points at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch.func's (and torch.vmap) are not deprecated
        getattr(bg.func, name)(torch_or_bg_sin)
        bg.vmap(torch_or_bg_sin)


@pytest.mark.parametrize("name", ["vjp", "jvp"])
def test_functorch_vjp_and_jvp_warn_and_compute_as_torch_func(name):
    import batched_grad.functorch as our_functorch

    def call(package, m):
        x, t = m.tensor([0.5, 1.0]), m.tensor([1.0, -2.0])
        args = (torch_or_bg_sin, x) if name == "vjp" else (torch_or_bg_sin, (x,), (t,))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = getattr(package, name)(*args)
        return [str(w.message) for w in caught if w.category is FutureWarning], out[0]

    got, want = call(our_functorch, bg), call(functorch, torch)
    assert got[0] == want[0]
    assert_same(got[1], want[1].detach())


def _ensemble(m, combine):
    torch.manual_seed(0)
    theirs = [torch.nn.BatchNorm1d(3).double() for _ in range(2)] + [torch.nn.Linear(3, 3).double() for _ in range(2)]
    for module in theirs:
        for p in module.parameters():
            p.data.uniform_(-1, 1)
    if m is torch:
        models = theirs
    else:
        models = [
            (m.nn.BatchNorm1d(3) if isinstance(t, torch.nn.BatchNorm1d) else m.nn.Linear(3, 3)).double() for t in theirs
        ]
        for ours, t in zip(models, theirs):
            ours.load_state_dict({k: m.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    x = m.tensor(np.random.default_rng(3).standard_normal((2, 5, 3)))
    results = []
    for group in (models[:2], models[2:]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            fmodel, params, buffers = combine(group)
        out = m.func.vmap(fmodel)(params, buffers, x)
        results.append((out, params, buffers, [p.requires_grad for p in params]))
    return results


def test_combine_state_for_ensemble_stacks_as_functorchs():
    from batched_grad.functorch import combine_state_for_ensemble

    for got, want in zip(
        _ensemble(bg, combine_state_for_ensemble), _ensemble(torch, functorch.combine_state_for_ensemble)
    ):
        assert_same(got[0], want[0].detach(), 1e-12, 1e-14)
        assert_same(list(got[1]) + list(got[2]), list(want[1]) + list(want[2]))
        assert got[3] == want[3]


@pytest.mark.parametrize("problem", ["no_models", "mixed_modes", "mixed_classes"])
def test_combine_state_for_ensemble_errors_match_functorch(problem):
    from batched_grad.functorch import combine_state_for_ensemble

    def run(m):
        models = [m.nn.Linear(2, 2) for _ in range(3)]
        if problem == "no_models":
            models = []
        elif problem == "mixed_modes":
            models[1].eval()
        else:
            models[1] = m.nn.Tanh()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            (functorch.combine_state_for_ensemble if m is torch else combine_state_for_ensemble)(models)

    raises_like_torch(run)


def test_functorch_experimental_keeps_replace_all_batch_norm_modules_without_warning():
    from batched_grad.functorch import experimental

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = experimental.replace_all_batch_norm_modules_(bg.nn.Sequential(bg.nn.BatchNorm1d(2)))
    assert model[0].running_mean is None and not model[0].track_running_stats
