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


def _classifier_class(m, with_norm):
    class Classifier(m.nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.fc1, self.fc2 = m.nn.Linear(2, hidden), m.nn.Linear(hidden, 3)
            self.norm = m.nn.BatchNorm1d(hidden) if with_norm else None

        def forward(self, x):
            h = self.fc1(x)
            if self.norm is not None:
                h = self.norm(h)
            return m.nn.functional.log_softmax(self.fc2(m.relu(h)), -1)

    return Classifier


@pytest.mark.parametrize("with_buffers", [False, True], ids=["weights", "weights-and-buffers"])
def test_functional_init_ensemble_runs_each_model_under_vmap(with_buffers):
    """functional_init builds an ensemble of a model class: the stacked weights (and buffers), given to torch's and
    ours, run under vmap to the same outputs, one model per row."""
    from torch._functorch.make_functional import functional_init as theirs
    from torch._functorch.make_functional import functional_init_with_buffers as theirs_with_buffers

    from batched_grad._functorch.make_functional import functional_init, functional_init_with_buffers

    inits = {
        torch: theirs_with_buffers if with_buffers else theirs,
        bg: functional_init_with_buffers if with_buffers else functional_init,
    }
    made = {m: init(_classifier_class(m, with_buffers), (4,))(5) for m, init in inits.items()}
    n = 2 if with_buffers else 1  # (weights, buffers, fn, names...) or (weights, fn, names)
    t_state, t_fn, b_fn = made[torch][:n], made[torch][n], made[bg][n]
    assert made[bg][n + 1 :] == made[torch][n + 1 :]
    assert [[tuple(t.shape) for t in group] for group in made[bg][:n]] == [
        [tuple(t.shape) for t in group] for group in t_state
    ]
    # the same numbers in both: torch's stacked state, copied
    b_state = [tuple(bg.tensor(t.numpy()) for t in group) for group in t_state]
    x = np.random.default_rng(2).standard_normal((4, 7, 2)).astype(np.float32)
    expected = torch.func.vmap(t_fn)(*t_state, (torch.tensor(x),))
    assert_same(bg.func.vmap(b_fn)(*b_state, (bg.tensor(x),)), expected, rtol=1e-5, atol=1e-6)


def test_functional_init_refuses_torch_ensemble_shapes():
    from batched_grad._functorch.make_functional import functional_init

    for shape, message in (((2, 2), "NYI: ensemble_shape with more than 1 element"), ((0,), "num_models 0")):
        with pytest.raises(ValueError, match=message):
            functional_init(_classifier_class(bg, False), shape)(5)


@pytest.mark.parametrize("chunks", [1, 2, 3, 7])
@pytest.mark.parametrize("randomness", ["error", "same", "different"])
def test_chunk_vmap_gives_vmaps_results_and_draws_as_torch(chunks, randomness):
    def run(m, chunk_vmap):
        def f(x, y):
            out = x.sin() * y
            return out if randomness == "error" else out + m.rand_like(x)

        m.manual_seed(4)
        x, y = m.randn(5, 3, 4), m.randn(4)
        return chunk_vmap(f, in_dims=(0, None), out_dims=2, randomness=randomness, chunks=chunks)(x, y).numpy()

    import functorch.experimental

    import batched_grad.functorch.experimental

    got = run(bg, batched_grad.functorch.experimental.chunk_vmap)
    np.testing.assert_allclose(got, run(torch, functorch.experimental.chunk_vmap), rtol=1e-6, atol=1e-6)
