"""Runs a ported program twice, once with torch and once with batched_grad passed in its place, and compares every
result. A program is a function `program(torch, nn, F, optim, data, *inputs)` written only against torch's API;
weights and data come from NumPy so that both runs start from the same numbers."""

import numpy as np
import torch as real_torch

import batched_grad

FLOAT64 = {"rtol": 1e-9, "atol": 1e-12}


def library_modules(torch):
    """The modules a ported program takes: torch, torch.nn, torch.nn.functional, torch.optim, torch.utils.data."""
    return torch, torch.nn, torch.nn.functional, torch.optim, torch.utils.data


def _numpy(value):
    return np.asarray(value.detach().cpu().numpy()) if hasattr(value, "detach") else np.asarray(value)


def assert_trees_close(actual, expected, path, tolerance):
    if isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_trees_close(actual[key], expected[key], f"{path}[{key!r}]", tolerance)
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected), f"{path}: {actual!r} != {expected!r}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_trees_close(a, e, f"{path}[{i}]", tolerance)
    elif isinstance(expected, (str, int, bool)) or expected is None:
        assert actual == expected and type(actual) is type(expected), f"{path}: {actual!r} != {expected!r}"
    else:
        assert type(actual).__name__ == type(expected).__name__, f"{path}: {type(actual)} != {type(expected)}"
        a, e = _numpy(actual), _numpy(expected)
        assert a.shape == e.shape and a.dtype == e.dtype, f"{path}: {a.shape} {a.dtype} != {e.shape} {e.dtype}"
        np.testing.assert_allclose(a, e, err_msg=path, **tolerance)


def run_both(program, *inputs, tolerance=FLOAT64):
    """program(torch, nn, F, optim, data, *inputs) with torch and with batched_grad; asserts that the results agree."""
    expected = program(*library_modules(real_torch), *inputs)
    actual = program(*library_modules(batched_grad), *inputs)
    assert_trees_close(actual, expected, program.__name__, tolerance)
    return expected, actual


def mlp_state(rng, sizes, prefix="", start=0):
    """{name: float64 array} for nn.Sequential Linear layers of the given sizes at indices start, start + 2, ...
    (uniform in +-1/sqrt(fan_in), as nn.Linear initialises)."""
    state = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        bound = 1 / np.sqrt(fan_in)
        state[f"{prefix}{start + 2 * i}.weight"] = rng.uniform(-bound, bound, (fan_out, fan_in))
        state[f"{prefix}{start + 2 * i}.bias"] = rng.uniform(-bound, bound, (fan_out,))
    return state


def load_state(torch, module, state):
    module.load_state_dict({name: torch.tensor(value) for name, value in state.items()})
    return module


def parameters_of(module):
    return {name: p.detach().clone() for name, p in module.named_parameters()}


def run_with_each_library(program, tolerance):
    """program(torch) with torch and with batched_grad; asserts that the results agree."""
    assert_trees_close(program(batched_grad), program(real_torch), program.__name__, tolerance)


def float64_program(program):
    """program(torch) run under a float64 default dtype from seed 0, the float32 default restored afterwards."""

    def seeded(torch):
        torch.manual_seed(0)
        torch.set_default_dtype(torch.float64)
        try:
            return program(torch)
        finally:
            torch.set_default_dtype(torch.float32)

    seeded.__name__ = program.__name__
    return seeded


def mlp(torch, sizes, activation):
    """nn.Sequential of Linear layers of the given sizes with activation() between them."""
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(fan_in, fan_out), activation()]
    return torch.nn.Sequential(*layers[:-1])
