"""Under vmap, an op whose result's size depends on the values of a batched operand (nonzero, where(cond), unique,
unique_consecutive, masked_select over a batched mask, indexing with a batched boolean mask) raises torch's error;
the same ops on unbatched operands inside vmap run, and a batched backward still runs such a step per row. jacrev,
torch.func's vmap of a vjp, refuses such steps (and .item(), a branch on a value, a random draw) in a Function's
backward or a hook as torch's does."""

import pytest
import torch

import batched_grad as bg
import vmap
from oracle import assert_same, raises_like_torch

REFUSED = {
    "nonzero": lambda m, a: a.nonzero(),
    "nonzero_as_tuple": lambda m, a: a.nonzero(as_tuple=True),
    "where_condition_only": lambda m, a: m.where(a > 0),
    "unique": lambda m, a: m.unique(a),
    "unique_dim": lambda m, a: m.unique(a, dim=0),
    "unique_consecutive": lambda m, a: m.unique_consecutive(a),
    "masked_select_batched_mask": lambda m, a: a.masked_select(a > 0),
    "boolean_mask_index": lambda m, a: a[a > 0],
}


def _x(m):
    return m.tensor([[0.5, -1.0, 2.0], [0.0, 3.0, -0.5]])


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_dynamic_shape_op_on_batched_values_raises_torch_error(name):
    f = REFUSED[name]
    raises_like_torch(lambda m: m.func.vmap(lambda a: f(m, a))(_x(m)))


def test_unbatched_mask_inside_vmap_runs():
    def run(m):
        mask = m.tensor([True, False, True])
        return m.func.vmap(lambda a: a.masked_select(mask) + a[mask])(_x(m))

    assert_same(run(bg), run(torch))


# what user code in a backward does with its gradient rows; jacrev batches that backward as torch.func.vmap does
BACKWARD_STEPS = {
    "nonzero": lambda m, g: g * (g.nonzero().shape[0] > -1),
    "boolean_mask": lambda m, g: g * g[g > 0].sum(),
    "item": lambda m, g: g * g.sum().item(),
    "branch": lambda m, g: g if g.sum() > 0 else -g,
    "random_draw": lambda m, g: g * m.rand(()),
}


def _function_with_backward(m, step):
    class Doubles(m.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return step(m, g) * 2

    return Doubles


def test_batched_backward_still_runs_rows():
    # SPEC: a backward step that cannot be vectorized runs per row (torch raises here)
    reads_nonzero = _function_with_backward(bg, BACKWARD_STEPS["nonzero"])
    x = bg.ones(3, requires_grad=True)
    with vmap.fallback_warnings(False):
        (g,) = bg.autograd.grad(reads_nonzero.apply(x), x, bg.eye(3), is_grads_batched=True)
    assert_same(g, 2 * torch.eye(3))


@pytest.mark.parametrize("name", sorted(BACKWARD_STEPS))
def test_jacrev_refuses_a_step_of_a_functions_backward_as_torch(name):
    def jacobian(m, chunk_size):
        doubles = _function_with_backward(m, BACKWARD_STEPS[name])
        return m.func.jacrev(doubles.apply, chunk_size=chunk_size)(_x(m)[0])

    raises_like_torch(lambda m: jacobian(m, None))
    raises_like_torch(lambda m: jacobian(m, 2))
    if name != "random_draw":  # one row at a time is a plain backward, with nothing batched
        assert_same(jacobian(bg, 1), jacobian(torch, 1))


def test_jacrev_refuses_a_hook_that_reads_a_value_as_torch():
    def jacobian(m):
        def doubled(x):
            y = x * 2
            y.register_hook(lambda g: g * g.sum().item())
            return y

        return m.func.jacrev(doubled)(_x(m)[0])

    raises_like_torch(jacobian)
