"""Two spellings programs use that torch accepts: the module paths of torch.distributions' files
(`torch.distributions.normal.Normal`) and the NumPy names of keywords (`axis`, `keepdims`, `x1`, ...) on the
functions and methods torch binds in C++; each compared with torch 2.13."""

import importlib
import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import batched_grad as bg  # noqa: E402
from batched_grad.distributions._torch_files import TORCH_FILES  # noqa: E402


def _outcome(call):
    try:
        result = call()
    except Exception as error:  # noqa: BLE001  (compared with torch's)
        return (type(error).__name__, str(error))
    return (
        "returns",
        tuple(r.detach().numpy().round(12).tolist() for r in result)
        if isinstance(result, tuple)
        else result.detach().numpy().round(12).tolist(),
    )


@pytest.mark.parametrize("file", sorted(TORCH_FILES))
def test_distribution_files_name_the_families_torch_keeps_there(file):
    ours = importlib.import_module(f"batched_grad.distributions.{file}")
    theirs = importlib.import_module(f"torch.distributions.{file}")
    assert getattr(bg.distributions, file) is ours
    for name in TORCH_FILES[file].split():
        assert inspect.isclass(getattr(theirs, name)) and getattr(theirs, name).__module__ == theirs.__name__
        assert getattr(ours, name) is getattr(bg.distributions, name)


def test_family_imported_from_its_file_samples_and_scores_as_torch():
    from batched_grad.distributions.normal import Normal as OurNormal
    from torch.distributions.normal import Normal as TorchNormal

    results = []
    for library, Normal in ((torch, TorchNormal), (bg, OurNormal)):
        library.manual_seed(5)
        loc = library.tensor([0.5, -1.0], dtype=library.float64, requires_grad=True)
        dist = Normal(loc, library.tensor(2.0, dtype=library.float64))
        sample = dist.rsample((3,))
        (grad,) = library.autograd.grad(dist.log_prob(sample).sum(), loc)
        results.append((sample.detach().numpy(), grad.numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-12)


CALLS = [
    lambda L, x: L.sum(x, axis=1),
    lambda L, x: L.sum(x, axis=1, keepdims=True),
    lambda L, x: x.sum(axis=0, keepdims=True),
    lambda L, x: L.mean(x, axis=(0, 1)),
    lambda L, x: x.std(axis=0),
    lambda L, x: L.amax(x, axis=1, keepdims=True),
    lambda L, x: L.logsumexp(a=x, axis=1),
    lambda L, x: L.cumsum(x, axis=0),
    lambda L, x: x.softmax(axis=1),
    lambda L, x: L.cat([x, x], axis=0),
    lambda L, x: L.add(x1=x, x2=x),
    lambda L, x: L.matmul(x, x2=x.T),
    lambda L, x: L.var_mean(x, axis=1),
    # torch.linalg, torch.fft and torch.special are bound in C++, torch.linalg.norm included (torch.norm is not)
    lambda L, x: L.linalg.norm(x, axis=1),
    lambda L, x: L.linalg.norm(x, 2, axis=1, keepdims=True),
    lambda L, x: L.linalg.vector_norm(x, 3, axis=0),
    lambda L, x: L.linalg.cross(x[:, :3], x[:, 1:], axis=1),
    lambda L, x: L.fft.fft(x, axis=0).real,
    lambda L, x: L.special.logsumexp(x, axis=1, keepdims=True),
    # the same keyword under both names, and the functions torch writes in Python, which take only their own names
    lambda L, x: L.sum(x, 1, axis=1),
    lambda L, x: x.sum(dim=1, axis=1),
    lambda L, x: L.sum(x, axis=1, keepdims=True, keepdim=False),
    lambda L, x: L.norm(x, axis=1),
    lambda L, x: L.split(x, 2, axis=1),
]


@pytest.mark.parametrize("call", CALLS, ids=[f"call{i}" for i in range(len(CALLS))])
def test_numpy_keyword_spellings_as_torch(call):
    values = np.random.default_rng(0).standard_normal((3, 4))
    expected = _outcome(lambda: call(torch, torch.tensor(values)))
    actual = _outcome(lambda: call(bg, bg.tensor(values)))
    assert actual == expected


RESULT_TUPLES = [
    lambda L, x: L.max(x, 1),
    lambda L, x: x.min(dim=0),
    lambda L, x: L.sort(x),
    lambda L, x: L.topk(x, 2),
    lambda L, x: L.median(x, 0),
    lambda L, x: L.aminmax(x),
    lambda L, x: L.cummax(x, 0),
    lambda L, x: L.kthvalue(x, 1),
    lambda L, x: L.frexp(x),
    lambda L, x: L.histogram(x, bins=3),
    lambda L, x: L.slogdet(x[:, :3]),
    lambda L, x: x[:, :3].slogdet(),
    lambda L, x: L.linalg.slogdet(x[:, :3]),
]


@pytest.mark.parametrize("call", RESULT_TUPLES, ids=[f"call{i}" for i in range(len(RESULT_TUPLES))])
def test_result_tuples_print_as_torchs_return_types(call):
    """print(torch.max(x, 1)) and the like: the torch.return_types name, then one field a line."""
    values = np.random.default_rng(1).standard_normal((3, 4))
    expected, actual = call(torch, torch.tensor(values)), call(bg, bg.tensor(values))
    assert repr(actual) == repr(expected)
    assert type(actual).__name__ == type(expected).__name__
