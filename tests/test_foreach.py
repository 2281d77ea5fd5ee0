"""torch._foreach_* against torch 2.13: each op over a list of tensors with its operands given once or per tensor
(numbers, a number list, a 0-d tensor, tensor lists, a 1-D tensor of scalars), out-of-place results as a tuple with
gradients, in-place forms returning the list they update, and torch's errors for lists that do not match."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch

RNG = np.random.default_rng(0)
VALUES = [RNG.uniform(0.2, 0.9, (3,)), RNG.uniform(0.2, 0.9, (2, 2))]


def _list(m, requires_grad=False, offset=0.0):
    return [m.tensor(v + offset, requires_grad=requires_grad) for v in VALUES]


CALLS = {
    "sqrt": lambda m, a, b: m._foreach_sqrt(a),
    "sigmoid": lambda m, a, b: m._foreach_sigmoid(a),
    "add_number_alpha": lambda m, a, b: m._foreach_add(a, b, alpha=0.5),
    "sub_list": lambda m, a, b: m._foreach_sub(a, b, alpha=2),
    "mul_0d_tensor": lambda m, a, b: m._foreach_mul(a, m.tensor(3.0, dtype=m.float64)),
    "div_numbers": lambda m, a, b: m._foreach_div(a, [2.0, 4.0]),
    "pow_number": lambda m, a, b: m._foreach_pow(a, 3),
    "number_pow_list": lambda m, a, b: m._foreach_pow(2.0, a),
    "clamp_min": lambda m, a, b: m._foreach_clamp_min(a, 0.5),
    "maximum": lambda m, a, b: m._foreach_maximum(a, b),
    "lerp_number": lambda m, a, b: m._foreach_lerp(a, b, 0.3),
    "lerp_numbers": lambda m, a, b: m._foreach_lerp(a, b, [0.3, 0.7]),
    "addcmul_value": lambda m, a, b: m._foreach_addcmul(a, b, b, value=0.5),
    "addcdiv_scalar_tensor": lambda m, a, b: m._foreach_addcdiv(a, b, a, m.tensor([2.0, 3.0], dtype=m.float64)),
    "norm": lambda m, a, b: m._foreach_norm(a),
    "norm_ord_1": lambda m, a, b: m._foreach_norm(a, 1),
    "max": lambda m, a, b: m._foreach_max(a),
    "clone": lambda m, a, b: m._foreach_clone(a),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_out_of_place_results_and_gradients_match_torch(call):
    differentiable = call is not CALLS["addcdiv_scalar_tensor"]  # torch has no derivative for this overload

    def run(m):
        a, b = _list(m, requires_grad=differentiable), _list(m, offset=0.1)
        results = call(m, a, b)
        assert type(results) is tuple
        if differentiable:
            sum(r.sum() for r in results).backward()
        return list(results), [t.grad for t in a]

    assert_same(run(bg), run(torch))


IN_PLACE = {
    "mul_": lambda m, a, b: m._foreach_mul_(a, 0.9),
    "add_list_alpha": lambda m, a, b: m._foreach_add_(a, b, alpha=0.1),
    "lerp_": lambda m, a, b: m._foreach_lerp_(a, b, 0.25),
    "addcmul_": lambda m, a, b: m._foreach_addcmul_(a, b, b, [1.0, -1.0]),
    "exp_": lambda m, a, b: m._foreach_exp_(a),
    "copy_": lambda m, a, b: m._foreach_copy_(a, b),
    "zero_": lambda m, a, b: m._foreach_zero_(a),
}


@pytest.mark.parametrize("call", IN_PLACE.values(), ids=IN_PLACE.keys())
def test_in_place_forms_update_each_tensor_and_return_the_list(call):
    def run(m):
        a, b = _list(m), _list(m, offset=0.1)
        assert call(m, a, b) is a
        return a

    assert_same(run(bg), run(torch))


MISMATCHES = {
    "empty": lambda m: m._foreach_add([], 1.0),
    "tensor_lists": lambda m: m._foreach_add([m.ones(1)], [m.ones(1), m.ones(1)]),
    "scalar_list": lambda m: m._foreach_mul([m.ones(1)], [1.0, 2.0]),
}


@pytest.mark.parametrize("call", MISMATCHES.values(), ids=MISMATCHES.keys())
def test_lists_that_do_not_match_raise_torchs_errors(call):
    raises_like_torch(call)


def test_copy_takes_non_blocking_as_torchs():
    """Tensor.copy_(src, non_blocking) (positional or keyword), which the in-place lane of copy_ accepts too."""

    def run(m):
        x = m.zeros(2, 2)
        x.copy_(m.ones(2), True)
        y = m.zeros(3, requires_grad=True).clone()
        y.copy_(m.arange(3.0), non_blocking=False)
        return x, y

    assert_same(run(bg), run(torch))
