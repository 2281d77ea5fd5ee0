"""How vmap calls a Function's `vmap` staticmethod, against torch.func.vmap with the same Function written for
torch: the rule gets the batched arguments where their rows are, with torch's `info` and `in_dims`, and its output
is the result; the Function's forward does not run on batched arguments."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, to_torch


def make_recording_identity(lib, seen, n_inputs=1):
    """An identity whose forward returns nothing (it must not run under vmap); its rule notes (batch_size,
    randomness, in_dims, shapes of the Tensor arguments) and returns its arguments where they came."""

    def forward(*args):
        seen.append("forward")

    def rule(info, in_dims, *args):
        shapes = [tuple(a.shape) for a in _leaves(args)]
        seen.append((info.batch_size, info.randomness, in_dims, shapes))
        return (args[0], in_dims[0]) if n_inputs == 1 else (args, in_dims)

    return type(
        "Identity",
        (lib.autograd.Function,),
        {
            "forward": staticmethod(forward),
            "setup_context": staticmethod(lambda ctx, inputs, output: None),
            "vmap": staticmethod(rule),
        },
    )


def _leaves(args):
    for a in args:
        yield from _leaves(a) if isinstance(a, (tuple, list)) else [a]


def both(run):
    """run(lib, seen) with batched_grad and with torch: (result, what the rule and forward saw) of each."""
    seen, t_seen = [], []
    return (run(bg, seen), seen), (run(torch, t_seen), t_seen)


@pytest.mark.parametrize("randomness", ["error", "different", "same"])
def test_the_rule_gets_torchs_info_and_its_output_is_the_result(randomness):
    x = np.random.default_rng(0).standard_normal((10, 3))

    def run(lib, seen):
        return lib.func.vmap(make_recording_identity(lib, seen).apply, randomness=randomness)(lib.tensor(x))

    (got, seen), (want, t_seen) = both(run)
    assert_same(got, want)
    assert seen == t_seen == [(10, randomness, (0,), [(10, 3)])]


@pytest.mark.parametrize("in_dims", [1, (1,), -1])
def test_in_dims_say_where_the_rows_of_each_argument_are(in_dims):
    x = np.random.default_rng(1).standard_normal((3, 6))

    def run(lib, seen):
        return lib.func.vmap(make_recording_identity(lib, seen).apply, in_dims=in_dims)(lib.tensor(x))

    (got, seen), (want, t_seen) = both(run)
    assert_same(got, want)
    assert seen == t_seen == [(6, "error", (1,), [(3, 6)])]


def test_in_dims_have_the_structure_of_the_arguments():
    x = np.arange(2.0)

    def run(lib, seen):
        t = lib.tensor(x)
        return lib.func.vmap(make_recording_identity(lib, seen, n_inputs=2).apply)(t, [t, t])

    (got, seen), (want, t_seen) = both(run)
    assert_same(got[0], want[0])
    assert isinstance(got[1], list) and len(got[1]) == 2
    assert_same(tuple(got[1]), tuple(want[1]))
    assert seen == t_seen == [(2, "error", (0, [0, 0]), [(2,), (2,), (2,)])]
    assert type(seen[0][2]) is tuple and type(seen[0][2][1]) is list


def make_scaled(lib, seen):
    """x * scale * factor (a number); the rule notes what it got and works on the whole batch at once."""

    class Scaled(lib.autograd.Function):
        @staticmethod
        def forward(x, scale, factor):
            return x * scale * factor

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.scale, ctx.factor = inputs[1], inputs[2]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.scale * ctx.factor, None, None

        @staticmethod
        def vmap(info, in_dims, x, scale, factor):
            seen.append((info.batch_size, info.randomness, in_dims, tuple(x.shape), tuple(scale.shape), factor))
            x_dim, scale_dim, _ = in_dims
            x = x.movedim(x_dim, 0) if x_dim is not None else x.expand(info.batch_size, *x.shape)
            if scale_dim is not None:  # its rows first, then its dims lined up with the ends of x's rows
                scale = scale.movedim(scale_dim, 0)
                scale = scale.reshape(scale.shape[:1] + (1,) * (x.ndim - scale.ndim) + scale.shape[1:])
            return x * scale * factor, 0

    return Scaled


def test_unbatched_tensors_and_other_arguments_get_in_dim_none():
    x, scale = np.random.default_rng(2).standard_normal((2, 3, 4, 5)), np.arange(1.0, 6.0)

    def run(lib, seen):
        apply = make_scaled(lib, seen).apply
        return lib.func.vmap(lambda v: apply(v, lib.tensor(scale), 2.0), in_dims=2)(lib.tensor(x))

    (got, seen), (want, t_seen) = both(run)
    assert_same(got, want)
    assert seen == t_seen == [(4, "error", (2, None, None), (2, 3, 4, 5), (5,), 2.0)]


def test_the_rule_of_the_innermost_vmap_the_arguments_vary_across_is_called():
    outer, inner = np.random.default_rng(3).standard_normal((4, 3)), np.arange(5.0)

    def run(lib, seen):
        apply = make_scaled(lib, seen).apply

        def per_outer_row(a):  # apply's arguments vary across the outer vmap's rows only
            return lib.func.vmap(lambda b: apply(a, lib.ones(3), 3.0) + b, randomness="same")(lib.tensor(inner))

        return lib.func.vmap(per_outer_row, randomness="different")(lib.tensor(outer))

    (got, seen), (want, t_seen) = both(run)
    assert_same(got, want)
    assert seen == t_seen == [(4, "different", (0, None, None), (4, 3), (3,), 3.0)]


def test_a_rule_inside_nested_vmaps_gets_the_batch_of_the_inner_one():
    x, y = np.random.default_rng(4).standard_normal((4, 3)), np.random.default_rng(5).standard_normal((3, 5))

    def run(lib, seen):
        apply = make_scaled(lib, seen).apply
        inner = lib.func.vmap(lambda a, b: apply(a, b, 0.5), in_dims=(None, 1))
        return lib.func.vmap(inner, in_dims=(0, None))(lib.tensor(x), lib.tensor(y))

    (got, seen), (want, t_seen) = both(run)
    assert_same(got, want)
    assert seen == t_seen == [(5, "error", (None, 1, None), (3,), (3, 5), 0.5)]


def test_outputs_of_the_rule_that_are_not_tensors_are_returned_as_they_are():
    class WithCount(bg.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2, 7

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def vmap(info, in_dims, x):
            return (x * 2, 7), (in_dims[0], 0)  # torch ignores the out_dim of a non-Tensor

    x = bg.randn(4, 3, dtype=bg.float64)
    doubled, count = bg.func.vmap(WithCount.apply, out_dims=(0, None))(x)
    assert_same(doubled, to_torch(x) * 2)
    assert count == 7


def test_forward_runs_outside_vmap_only():
    calls = []

    class Doubled(bg.autograd.Function):
        @staticmethod
        def forward(x):
            calls.append("forward")
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def vmap(info, in_dims, x):
            calls.append("vmap")
            return Doubled.apply(x), in_dims[0]  # outside the vmap: forward on the whole batch

    x = bg.randn(4, 3, dtype=bg.float64)
    assert_same(bg.func.vmap(Doubled.apply)(x), to_torch(x) * 2)
    assert calls == ["vmap", "forward"]


def test_the_rule_under_grad_sees_the_argument_where_its_rows_are():
    x = np.random.default_rng(6).standard_normal((3, 4))

    def run(lib, seen):
        apply = make_scaled(lib, seen).apply
        loss = lambda v: lib.func.vmap(lambda r: apply(r, lib.ones(()), 2.0), in_dims=1)(v).sin().sum()
        return lib.func.grad(loss)(lib.tensor(x))

    (got, seen), (want, t_seen) = both(run)
    assert_same(got, want)
    assert seen[0] == t_seen[0] == (4, "error", (1, None, None), (3, 4), (), 2.0)


def _rule_returning(out):
    class Returns(bg.autograd.Function):
        @staticmethod
        def forward(x):
            return x

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def vmap(info, in_dims, x):
            return out(x)

    return Returns


# torch does not check these (its results have the wrong shape); here they are clear errors
@pytest.mark.parametrize(
    "out, error, match",
    [
        (lambda x: (x, 2), IndexError, r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
        (
            lambda x: (x[:2], 0),
            RuntimeError,
            "output of shape \\[2, 3\\] with out_dim 0, which has 2 rows; the batch has 4",
        ),
    ],
)
def test_an_out_dim_that_does_not_name_the_rows_is_a_clear_error(out, error, match):
    with pytest.raises(error, match=match):
        bg.func.vmap(_rule_returning(out).apply)(bg.randn(4, 3))
