"""Where torch's argument parser expects an int it also takes an integer tensor of one element (sizes and bounds
computed with tensors, as hash-grid and sampling code does): factories' sizes and bounds, and int[] arguments given
as a single such int. Float and bool tensors stay refused."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same


def _n(m, value=2):
    return m.tensor(value)


CASES = {
    "randint_high": lambda m: m.randint(0, _n(m, 5), (6,)),
    "randint_one_bound": lambda m: m.randint(_n(m, 7), (3,)),
    "randint_int32_bounds": lambda m: m.randint(-_n(m, 3).int(), m.tensor([3], dtype=m.int32), (4,)),
    "randint_size_entry": lambda m: m.randint(0, 10, (_n(m),)),
    "randint_like": lambda m: m.randint_like(m.ones(3), _n(m, 4)),
    "zeros_varargs": lambda m: m.zeros(_n(m), 3),
    "zeros_one_element_vector": lambda m: m.zeros(m.tensor([2]), 3),
    "empty_tuple": lambda m: m.empty((_n(m),)).shape,
    "full": lambda m: m.full([_n(m)], 3.0),
    "rand_size_keyword": lambda m: m.rand(size=(_n(m),)).shape,
    "randn_uint8": lambda m: m.randn(2, m.tensor(2, dtype=m.uint8)).shape,
    "eye": lambda m: m.eye(_n(m), _n(m, 3)),
    "linspace_steps": lambda m: m.linspace(0, 1, _n(m, 3)),
    "sum_dim": lambda m: m.arange(6.0).view(2, 3).sum(_n(m, 1)),
    "roll_shift": lambda m: m.arange(4).roll(_n(m, 1)),
    "interpolate_size": lambda m: m.nn.functional.interpolate(m.arange(4.0).view(1, 1, 4), size=_n(m, 2)),
    "adaptive_pool": lambda m: m.nn.functional.adaptive_avg_pool1d(m.arange(8.0).view(1, 1, 8), _n(m, 4)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_integer_tensor_taken_as_an_int(name):
    torch.manual_seed(0)
    bg.manual_seed(0)
    assert_same(CASES[name](bg), CASES[name](torch))


@pytest.mark.parametrize(
    "call",
    [lambda m: m.randint(0, m.tensor(5.0), (2,)), lambda m: m.zeros(m.tensor([2, 3])), lambda m: m.eye(m.tensor(2.0))],
    ids=["float_bound", "several_elements", "float_size"],
)
def test_non_integer_tensors_still_refused(call):
    with pytest.raises(TypeError):
        call(torch)
    with pytest.raises(TypeError):
        call(bg)


@pytest.mark.parametrize(
    "entries", [[2.0], [1, 2.5], [torch.tensor(2.0)]], ids=["float", "second_float", "float_tensor"]
)
def test_size_refuses_non_integers_with_torchs_message(entries):
    with pytest.raises(TypeError) as expected:
        torch.Size(entries)
    converted = [bg.tensor(e.item()) if isinstance(e, torch.Tensor) else e for e in entries]
    with pytest.raises(TypeError) as actual:
        bg.Size(converted)
    assert str(actual.value) == str(expected.value)


def test_size_entries_become_python_ints():
    def entries(m):
        return [m.tensor(2), 3, True, m.tensor([4])]

    assert repr(bg.Size(entries(bg))) == repr(torch.Size(entries(torch)))
    assert {type(v) for v in bg.Size(entries(bg))} == {int}
