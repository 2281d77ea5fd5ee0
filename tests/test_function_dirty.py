"""autograd.Function against torch 2.13: ctx.mark_dirty (the output is the modified input itself, its version bumped
and its history rebased onto the Function's node, with torch's errors), and Functions with non-Tensor outputs (one
gradient per output reaches backward; extra trailing Nones from backward are accepted)."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap
from oracle import assert_same, raises_like_torch


def dirty_functions(lib):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class AddInto(lib.autograd.Function):  # x += y, in place
        @staticmethod
        def forward(ctx, x, y):
            x.add_(y)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g, g

    class ExpSavingOutput(lib.autograd.Function):  # saves the modified input: backward reads the output
        @staticmethod
        def forward(ctx, x):
            x.exp_()
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class SquareSavingInput(lib.autograd.Function):  # saves the input before changing it: torch saves it after
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            x.mul_(x)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return 2 * y.sqrt() * g

    class IdentitySavingInput(lib.autograd.Function):  # an input returned as it is, and saved
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x  # not the identity's gradient: which x it reads shows in the double backward

    class DoubleAndTriple(lib.autograd.Function):  # two outputs, the first the modified input
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 6

    return dict(
        double=Double,
        add_into=AddInto,
        exp=ExpSavingOutput,
        square=SquareSavingInput,
        identity=IdentitySavingInput,
        double_and_triple=DoubleAndTriple,
    )


def values(lib, n=4, seed=0):
    return lib.tensor(np.random.default_rng(seed).uniform(0.5, 1.5, size=n), dtype=lib.float64, requires_grad=True)


def test_dirty_output_is_the_input_with_its_version_bumped_and_history_rebased():
    seen = []
    for lib in (torch, bg):
        a = values(lib)
        x = a * 3
        y = dirty_functions(lib)["double"].apply(x)
        node = x.grad_fn
        assert y is x
        (g,) = lib.autograd.grad((x * x).sum(), a)  # through x itself, not only through y
        seen.append((x, g, x._version, node.name(), node.next_functions[0][0].name()))
    (t_x, t_g, *t_meta), (x, g, *meta) = seen
    assert meta == t_meta == [2, "DoubleBackward", "MulBackward0"]
    assert_same([x, g], [t_x, t_g])


def test_dirty_leaf_that_does_not_require_grad_joins_the_graph():
    seen = []
    for lib in (torch, bg):
        p, q = lib.zeros(4, dtype=lib.float64), values(lib)
        r = dirty_functions(lib)["add_into"].apply(p, q)
        assert r is p and p.requires_grad and not p.is_leaf and p.grad_fn.name() == "AddIntoBackward"
        seen.append((p, lib.autograd.grad((p * p).sum(), q), p._version))
    assert_same(seen[1][:2], seen[0][:2])
    assert seen[1][2] == seen[0][2] == 2


def test_dirty_view_writes_through_to_its_base_and_its_sibling_views():
    seen = []
    for lib in (torch, bg):
        a = values(lib, 5)
        base = a * 1
        middle, tail = base[1:4], base[3:]
        y = dirty_functions(lib)["double"].apply(middle)
        assert y is middle
        loss = (base**2).sum() + (middle * 3).sum() + tail.sum()
        seen.append((base, middle, tail, lib.autograd.grad(loss, a), base._version))
    assert_same(seen[1][:4], seen[0][:4])
    assert seen[1][4] == seen[0][4] == 2


def test_tensors_are_saved_when_forward_returns_and_double_backward_matches_torch():
    """A saved dirty tensor is saved as the output, with its new value; a saved input stays the input."""
    for name in ["exp", "square", "identity"]:
        seen = []
        for lib in (torch, bg):
            a = values(lib)
            y = dirty_functions(lib)[name].apply(a * 1 if name != "identity" else a)
            (g,) = lib.autograd.grad((y * y).sum(), a, create_graph=True)
            seen.append((y, g, lib.autograd.grad((g * g).sum(), a)))
        assert_same(seen[1], seen[0], rtol=1e-12)


def test_dirty_function_under_is_grads_batched_equals_the_rows():
    functions = dirty_functions(bg)
    a = values(bg)
    y = functions["exp"].apply(functions["double"].apply(a * 1))
    cotangents = bg.tensor(np.random.default_rng(1).standard_normal((3, 4)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmap.FallbackWarning)
        (batched,) = bg.autograd.grad(y, a, cotangents, retain_graph=True, is_grads_batched=True)
        (batched_graph,) = bg.autograd.grad(
            y, a, cotangents, retain_graph=True, is_grads_batched=True, create_graph=True
        )
    ta = values(torch)
    ty = torch.exp(ta * 2)
    rows = [torch.autograd.grad(ty, ta, torch.tensor(c.numpy()), retain_graph=True)[0] for c in cotangents]
    assert_same(batched, torch.stack(rows), rtol=1e-12)
    assert_same(batched_graph, torch.stack(rows), rtol=1e-12)
    (gg,) = bg.autograd.grad(batched_graph.sum(), a)
    (tgg,) = torch.autograd.grad(
        torch.autograd.grad(ty, ta, torch.tensor(cotangents.numpy().sum(0)), create_graph=True)[0].sum(), ta
    )
    assert_same(gg, tgg, rtol=1e-12)


def test_dirty_input_with_grad_mode_off_or_nothing_requiring_grad():
    for lib in (torch, bg):
        double = dirty_functions(lib)["double"]
        x = lib.ones(3)
        assert double.apply(x) is x and x._version == 2 and x.grad_fn is None
        leaf = lib.ones(3, requires_grad=True)
        with lib.no_grad():
            y = double.apply(leaf)
        assert y is not leaf and not y.requires_grad and leaf.is_leaf  # a detached alias, as torch returns
        assert leaf._version == y._version == 2 and y.tolist() == leaf.tolist() == [2.0, 2.0, 2.0]


def _leaf_requiring_grad(lib):
    return dirty_functions(lib)["double"].apply(lib.ones(3, requires_grad=True))


def _view_of_leaf(lib):
    return dirty_functions(lib)["double"].apply(lib.ones(3, requires_grad=True)[:2])


def _view_with_two_outputs(lib):
    return dirty_functions(lib)["double_and_triple"].apply((lib.ones(3, requires_grad=True) * 1)[:2])


def _not_returned(lib):
    class ReturnsACopy(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

    return ReturnsACopy.apply(lib.ones(3, requires_grad=True) * 1)


@pytest.mark.parametrize("make", [_leaf_requiring_grad, _view_of_leaf, _view_with_two_outputs, _not_returned])
def test_dirty_input_errors_match_torch(make):
    with pytest.raises(RuntimeError) as want:
        make(torch)
    with pytest.raises(RuntimeError) as got:
        make(bg)
    assert str(got.value) == str(want.value)


def test_dirty_two_outputs_of_a_non_view_match_torch():
    seen = []
    for lib in (torch, bg):
        a = values(lib)
        x = a * 1
        first, second = dirty_functions(lib)["double_and_triple"].apply(x)
        assert first is x and second.grad_fn is x.grad_fn
        seen.append((first, second, lib.autograd.grad((first * second).sum(), a)))
    assert_same(seen[1], seen[0])


def test_mark_dirty_of_a_non_tensor_and_of_a_non_input():
    for lib in (torch, bg):

        class MarksANumber(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_dirty(x, 3)
                return x

            @staticmethod
            def backward(ctx, g):
                return g

        with pytest.raises(RuntimeError, match="^mark_dirty can only accept variables, but argument "):
            MarksANumber.apply(lib.ones(2, requires_grad=True) * 1)

        class MarksItsOutput(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                ctx.mark_dirty(y)
                return y

            @staticmethod
            def backward(ctx, g):
                return g * 2

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = MarksItsOutput.apply(lib.ones(2, requires_grad=True))
        assert y.grad_fn.name() == "MarksItsOutputBackward"
        assert any(
            str(w.message).startswith(
                "ctx.mark_dirty() received a tensor that was not an input. Only input "
                "Tensors that have been mutated should be passed to ctx.mark_dirty()."
            )
            for w in caught
        ), lib.__name__


# ---- non-Tensor outputs ---------------------------------------------------------------------------------------


def mixed_outputs(lib, received, materialize=True):
    class Mixed(lib.autograd.Function):  # (number, Tensor, str, integer Tensor, Tensor)
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(materialize)
            return 3, x * 2, "label", (x * 3).long(), x * 4

        @staticmethod
        def backward(ctx, *grads):
            received.append([None if g is None else (tuple(g.shape), repr(g.dtype).split(".")[-1]) for g in grads])
            two = grads[1] * 2 if grads[1] is not None else 0
            four = grads[4] * 4 if grads[4] is not None else 0
            return two + four

    return Mixed


@pytest.mark.parametrize("materialize", [True, False])
@pytest.mark.parametrize("used", [(1, 4), (4,)])
def test_backward_gets_one_gradient_per_output_with_none_for_non_tensors(used, materialize):
    seen = []
    for lib in (torch, bg):
        received = []
        x = values(lib, 3)
        out = mixed_outputs(lib, received, materialize).apply(x)
        assert out[0] == 3 and out[2] == "label" and out[4].grad_fn is out[1].grad_fn
        (g,) = lib.autograd.grad(sum(out[k].sum() for k in used), x)
        seen.append((g, received))
    assert_same(seen[1][0], seen[0][0])
    assert seen[1][1] == seen[0][1]


def test_backward_gets_none_for_non_tensor_outputs_under_is_grads_batched():
    received = []
    x = values(bg, 3)
    _, doubled, _, _, quadrupled = mixed_outputs(bg, received).apply(x)
    out = bg.stack([doubled, quadrupled])
    (jac,) = bg.autograd.grad(out, x, bg.eye(6, dtype=bg.float64).reshape(6, 2, 3), is_grads_batched=True)
    expected = np.concatenate([np.eye(3) * 2, np.eye(3) * 4])
    np.testing.assert_allclose(jac.numpy(), expected)
    assert received and all(r[0] is None and r[2] is None for r in received)


def extra_gradients(lib, extra):
    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, factor):
            ctx.factor = factor
            return x * factor

        @staticmethod
        def backward(ctx, g):
            return (g * ctx.factor, None) + extra(lib)

    return Scale


EXTRAS = {
    "one None": lambda lib: (None,),
    "two Nones": lambda lib: (None, None),
    "a Tensor": lambda lib: (lib.ones(3),),
    "a number after a None": lambda lib: (None, 2.0),
}


def test_extra_trailing_gradients_are_accepted_only_when_all_none():
    for name, extra in EXTRAS.items():
        seen = []
        for lib in (torch, bg):
            x = values(lib, 3)
            try:
                seen.append(lib.autograd.grad(extra_gradients(lib, extra).apply(x, 3.0).sum(), x))
            except RuntimeError as e:
                seen.append(str(e))
        if isinstance(seen[0], str):
            assert seen[1] == seen[0], name
        else:
            assert_same(seen[1], seen[0])


def _add_in_place(m):
    class AddInPlace(m.autograd.function.InplaceFunction):
        @staticmethod
        def forward(ctx, a, b):
            ctx.mark_dirty(a)
            return a.add_(b), b * 3

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            return grad_a, grad_a + 3 * grad_b

    return AddInPlace


def test_inplace_function_subclass_modifies_a_tensor_that_needs_no_grad():
    def run(m):
        x, y = m.ones(2, 2), m.full((2, 2), 2.0, requires_grad=True)
        function = _add_in_place(m)
        q, p = function.apply(x, y)
        assert q is x and q.requires_grad
        assert type(q.grad_fn) is function._backward_cls
        assert type(q.grad_fn).__name__ == "AddInPlaceBackward"
        (q.sum() + p.sum()).backward()
        return x, y.grad

    assert_same(run(bg), run(torch))


def test_inplace_function_itself():
    def run(m):
        cls = m.autograd.function.InplaceFunction
        with pytest.warns(DeprecationWarning):
            assert cls(inplace=True).inplace is True
        cls.apply(m.ones(2, requires_grad=True))  # it has no forward

    raises_like_torch(run)
