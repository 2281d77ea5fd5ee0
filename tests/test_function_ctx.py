"""A custom Function's ctx and its gradients' storage, against torch 2.13: the deprecated ctx.saved_variables,
ctx._materialize_non_diff_grads, and which leaf's `.grad` takes over a gradient nobody else holds."""

import warnings

import torch

import batched_grad as bg


def test_saved_variables_warns_and_gives_the_saved_tensors():
    for m in (bg, torch):
        seen = []

        class Add(m.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a + b

            @staticmethod
            def backward(ctx, g):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    a, b = ctx.saved_variables
                seen.extend((w.category, str(w.message)) for w in caught)
                return g * b, g * a

        x, y = m.tensor([2.0], requires_grad=True), m.tensor([3.0], requires_grad=True)
        Add.apply(x, y).sum().backward()
        assert (x.grad.tolist(), y.grad.tolist()) == ([3.0], [2.0])
        assert seen == [(DeprecationWarning, "'saved_variables' is deprecated; use 'saved_tensors'")]


def test_non_differentiable_outputs_can_get_none_rather_than_zeros():
    results = []
    for m in (bg, torch):
        for materialize in (True, False):
            seen = []

            class Split(m.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    out0, out1 = x.clone(), x.clone()
                    ctx.mark_non_differentiable(out1)
                    ctx._materialize_non_diff_grads = materialize
                    return out0, out1

                @staticmethod
                def backward(ctx, g0, g1):
                    seen.append((g0.tolist(), None if g1 is None else g1.tolist()))
                    return g0

            a = m.tensor(1.0, requires_grad=True)
            Split.apply(a)[0].backward()
            results.append(seen)
    assert results[:2] == results[2:] == [[(1.0, 0.0)], [(1.0, None)]]


def test_a_gradient_nobody_else_holds_becomes_one_leafs_grad():
    for m in (bg, torch):
        pointers = []

        class Both(m.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                return a + b

            @staticmethod
            def backward(ctx, g):
                pointers.append(g.data_ptr())
                return g, g

        class Expanded(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.size = x.size()
                return m.tensor([1.0])

            @staticmethod
            def backward(ctx, g):
                return m.ones(1).expand(ctx.size)

        a, b = m.randn(5, 6, requires_grad=True), m.randn(5, 6, requires_grad=True)
        Expanded.apply(Both.apply(a, b)).backward()  # a view (expanded): copied into both
        assert pointers[-1] not in (a.grad.data_ptr(), b.grad.data_ptr())
        a.grad = b.grad = None
        Both.apply(a, b)[1][0].backward()
        assert a.grad.data_ptr() != b.grad.data_ptr()
        assert pointers[-1] in (a.grad.data_ptr(), b.grad.data_ptr())  # one of them took it over
        given = m.ones(5, 6)
        a.grad = None
        a.backward(given)  # the caller's gradient is copied
        assert a.grad.data_ptr() != given.data_ptr()
