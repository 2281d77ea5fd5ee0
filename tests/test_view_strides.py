"""view() against torch 2.13 on inputs whose strides are not row-major (transposes, permutes, strided and column
slices, selects, expansions, diagonals): torch refuses a new shape that would need a copy (old code's
`x.t().view(-1)` bug) and accepts one that its strides can express."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch

CASES = {
    "transpose_flat": lambda m: m.arange(6.0).view(2, 3).t().view(-1),
    "transpose_reshaped": lambda m: m.arange(6.0).view(2, 3).t().view(3, 2),
    "transpose_unit_dim": lambda m: m.arange(6.0).view(2, 3).t().view(3, 1, 2),
    "middle_transpose_merge": lambda m: m.arange(24.0).view(2, 3, 4).transpose(0, 1).view(3, 8),
    "middle_transpose_keep_inner": lambda m: m.arange(24.0).view(2, 3, 4).transpose(0, 1).view(6, 4),
    "middle_transpose_split_inner": lambda m: m.arange(24.0).view(2, 3, 4).transpose(0, 1).view(3, 2, 2, 2),
    "permute": lambda m: m.arange(24.0).view(2, 3, 4).permute(2, 0, 1).view(4, 6),
    "every_other": lambda m: m.arange(12.0)[::2].view(2, 3),
    "columns_flat": lambda m: m.arange(12.0).view(3, 4)[:, :2].view(6),
    "columns_unit_dim": lambda m: m.arange(12.0).view(3, 4)[:, :2].view(3, 2, 1),
    "rows": lambda m: m.arange(12.0).view(3, 4)[1:].view(8),
    "middle_select": lambda m: m.arange(24.0).view(2, 3, 4)[:, 1].view(8),
    "first_select": lambda m: m.arange(24.0).view(2, 3, 4)[1].view(12),
    "last_step_of_batch_first": lambda m: m.arange(80.0).view(2, 5, 8)[:, -1, :].view(-1),
    "expanded_flat": lambda m: m.ones(3, 1).expand(3, 4).view(12),
    "expanded_split": lambda m: m.ones(1, 4).expand(3, 4).view(3, 2, 2),
    "unit_dims_moved": lambda m: m.arange(12.0).view(1, 3, 1, 4).transpose(0, 2).view(3, 4),
    "narrow": lambda m: m.arange(12.0).view(3, 4).narrow(1, 1, 2).view(-1),
    "diagonal": lambda m: m.arange(9.0).view(3, 3).diagonal().view(3, 1),
    "empty": lambda m: m.ones(0, 3).t().view(-1),
    "view_as": lambda m: m.arange(6.0).view(2, 3).t().view_as(m.ones(6)),
    "contiguous_first": lambda m: m.arange(6.0).view(2, 3).t().contiguous().view(-1),
}


def _outcome(m, case):
    try:
        return CASES[case](m)
    except RuntimeError as error:
        return str(error)


@pytest.mark.parametrize("case", CASES)
def test_view_of_strided_inputs_as_torch(case):
    expected = _outcome(torch, case)
    if isinstance(expected, str):
        raises_like_torch(CASES[case])
    else:
        assert_same(CASES[case](bg), expected)


def test_refused_view_leaves_reshape_and_gradients_working():
    def program(m):
        x = m.arange(6.0, dtype=m.float64, requires_grad=True)
        y = x.view(2, 3).t()
        flat = y.reshape(-1)
        (grad,) = m.autograd.grad((flat * m.arange(6.0, dtype=m.float64)).sum(), x)
        return flat, grad

    assert_same(program(bg), program(torch))


RESHAPES = {
    "transpose_flat": lambda x: x.t().reshape(-1),
    "transpose_flatten": lambda x: x.t().flatten(),
    "columns": lambda x: x[:, :2].reshape(4),
    "same_shape": lambda x: x.t().reshape(3, 2),
    "unit_dim": lambda x: x.t().reshape(3, 2, 1),
    "column": lambda x: x[:, 1].reshape(2, 1),
    "rows": lambda x: x[1:].reshape(3),
    "contiguous": lambda x: x.reshape(3, 2),
}


@pytest.mark.parametrize("case", RESHAPES)
def test_reshape_copies_where_a_view_cannot_express_it(case):
    """reshape/flatten give a view (ViewBackward0, or ReshapeAliasBackward0 of an input that is not contiguous)
    where the strides allow, else a copy (UnsafeViewBackward0 after CloneBackward0) whose writes the input does not
    see; the gradients are the same either way."""

    def program(m):
        x = m.arange(6.0, dtype=m.float64, requires_grad=True)
        base = x.view(2, 3)
        out = RESHAPES[case](base)
        names = (out.grad_fn.name(), [f[0].name() for f in out.grad_fn.next_functions if f[0] is not None])
        (grad,) = m.autograd.grad((out * m.arange(out.numel(), dtype=m.float64).view(out.shape)).sum(), x)
        with m.no_grad():
            written = base.detach().clone()
            RESHAPES[case](written).fill_(-1)
        return names, grad, written

    expected, actual = program(torch), program(bg)
    assert actual[0] == expected[0]
    assert_same(actual[1:], expected[1:])
