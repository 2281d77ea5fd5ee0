"""In-place writes into views whose making forbids a recorded write, against torch 2.13's errors: views made with
grad mode off or in inference mode (and views of them), one of several views one op returns, and views a custom
Function returned (or an input it returned as-is); also mark_dirty on such views."""

import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch


def _function(m, forward, n_grads=1):
    class Fn(m.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            return forward(ctx, *args)

        @staticmethod
        def backward(ctx, *grads):
            return grads[:n_grads] + (None,) * (n_grads - len(grads))

    return Fn.apply


def _grad_leaf(m, n=2):
    return m.ones(n, requires_grad=True)


def _made_without_grad_then_viewed(m, mode):
    x = m.zeros(2)
    with getattr(m, mode)():
        y = x.view(2)
    y.requires_grad_(True)
    z = y.view(2)
    z /= 2


def _view_in_no_grad_of_history(m):
    x = _grad_leaf(m).clone()
    with m.no_grad():
        y = x.view(2)
    y.mul_(2)


def _view_in_no_grad_written_with_history(m):
    x = m.zeros(2)
    with m.no_grad():
        y = x.view(2)
    y.mul_(_grad_leaf(m))


def _one_of_several_views(m, index):
    a = m.rand(2, 2, requires_grad=True).clone()
    a.unbind()[index].mul_(2)


def _view_of_one_of_several_views(m):
    a = m.rand(2, 2, requires_grad=True).clone()
    a.unbind()[0][:1].mul_(2)


def _one_of_several_views_without_history(m):
    a = m.rand(1, 2)
    a.unbind()[0].copy_(m.rand(1, requires_grad=True))


def _narrowed(ctx, a):
    return a.narrow(0, 0, 2)


def _function_view(m, requires_grad):
    a = _grad_leaf(m).clone() if requires_grad else m.ones(2)
    t = _function(m, _narrowed)(a)
    t += _grad_leaf(m)


def _view_of_function_view(m):
    t = _function(m, _narrowed)(_grad_leaf(m).clone())
    t.view(2).add_(3)


def _function_view_of_a_temporary(m):
    t = _function(m, lambda ctx, a: a.clone().select(0, 0))(_grad_leaf(m).clone())
    t += 3


def _function_input_as_is(m):
    t = _function(m, lambda ctx, a: a)(_grad_leaf(m).clone())
    t += 3


def _function_two_views(m):
    t, _ = _function(m, lambda ctx, a, b: (a.narrow(0, 0, 2), a + b), 2)(_grad_leaf(m).clone(), _grad_leaf(m))
    t += 3


def _function_view_under_no_grad(m):
    with m.no_grad():
        t = _function(m, lambda ctx, a: a[:])(_grad_leaf(m))
    t.zero_()


def _dirty(m, forward, x):
    return _function(m, forward)(x)


def _mark(ctx, t):
    t.add_(1)
    ctx.mark_dirty(t)
    return t


def _dirty_split_view(m):
    b, _ = _grad_leaf(m).split_with_sizes([1, 1], dim=0)
    _dirty(m, _mark, b)


def _dirty_view_of_an_intermediate(m):
    _dirty(m, lambda ctx, a: _mark(ctx, a.clone().view_as(a)), _grad_leaf(m, 1).clone())


def _dirty_view_of_an_input_without_history(m):
    other = m.ones(3)
    _function(m, lambda ctx, a, o: _mark(ctx, o[:1]))(_grad_leaf(m, 1).clone(), other)


CASES = {
    "no_grad view of a view": lambda m: _made_without_grad_then_viewed(m, "no_grad"),
    "inference_mode view of a view": lambda m: _made_without_grad_then_viewed(m, "inference_mode"),
    "no_grad view, history through its base": _view_in_no_grad_of_history,
    "no_grad view, history through the value written": _view_in_no_grad_written_with_history,
    "unbind output 0": lambda m: _one_of_several_views(m, 0),
    "unbind output 1": lambda m: _one_of_several_views(m, 1),
    "view of an unbind output": _view_of_one_of_several_views,
    "unbind output without history": _one_of_several_views_without_history,
    "Function view": lambda m: _function_view(m, True),
    "Function view without history": lambda m: _function_view(m, False),
    "view of a Function view": _view_of_function_view,
    "Function view of a temporary": _function_view_of_a_temporary,
    "Function input returned as-is": _function_input_as_is,
    "Function returning two views": _function_two_views,
    "Function view under no_grad": _function_view_under_no_grad,
    "mark_dirty of a split view": _dirty_split_view,
    "mark_dirty of a view of an intermediate": _dirty_view_of_an_intermediate,
    "mark_dirty of a view of an input": _dirty_view_of_an_input_without_history,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_in_place_write_is_refused_as_torch(case):
    got, want = raises_like_torch(CASES[case])
    assert type(got) is RuntimeError and str(got) == str(want)


def test_allowed_writes_stay_allowed():
    for m in (bg, torch):
        a = m.rand(1, 2)
        a.select(1, 0).copy_(m.rand(1, requires_grad=True))  # an ordinary view without history
        assert a.grad_fn is not None
        v = _function(m, lambda ctx, x: x.view_as(x))(m.rand(1, 2))
        v += 1  # a Function's view written without history
        with m.no_grad():
            y = m.ones(2, requires_grad=True).clone()[:1]
            y.mul_(2)  # made and written with grad mode off
        a = m.ones(2)
        with m.no_grad():
            alias = _function(m, lambda ctx, x: x)(a)
        alias += 1  # an input returned as-is is an alias of it
        assert a.tolist() == [2.0, 2.0]


def test_function_outputs_that_are_views_still_differentiate():
    grads = []
    for m in (bg, torch):
        a = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        t = _function(m, lambda ctx, x: x.view(3))(a * 2)
        u = _function(m, lambda ctx, x: x)(a * 3)
        (t.sum() * 2 + (u * u).sum()).backward()
        grads.append(a.grad.tolist())
    assert grads[0] == grads[1]


def _reprs_of_views_changed_in_place(m):
    leaf = m.ones(2, requires_grad=True)
    with m.no_grad():
        changed = leaf[:]
        changed *= 2  # a view made and changed with grad mode off
    base = leaf.clone()
    with m.no_grad():
        other = base[:1]
        untouched = base[1:]
    base.mul_(3)  # changes the base of views made with grad mode off
    plain = m.ones(2)
    with m.no_grad():
        free = plain[:]
        free += 1  # its base requires no grad: nothing to rebuild
    return [repr(changed), repr(other), repr(untouched), repr(free)]


def test_a_no_grad_view_changed_in_place_prints_an_invalid_grad_fn():
    assert _reprs_of_views_changed_in_place(bg) == _reprs_of_views_changed_in_place(torch)


def _no_grad_view_story(m):
    """What a view made with grad mode off of a tensor that requires grad reports, and what ops on it record."""
    leaf = m.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    with m.no_grad():
        row, flat, detached_row, row_of_history = leaf[1], leaf.view(6), leaf.detach()[0], (leaf * 2)[0]
        made_here = row * 2
    seen = [v.requires_grad for v in (row, flat, detached_row, row_of_history, made_here)]
    seen += [row.is_leaf, row.grad_fn is None, row.unsqueeze(0).requires_grad]
    product = (flat * 3).sum()
    seen += [product.requires_grad, type(product.grad_fn).__name__, m.cat([m.zeros(1, 2), row[None]]).requires_grad]
    product.backward()
    seen += [leaf.grad is None, flat.grad is None]
    seen += [m.autograd.grad((row * 2).sum(), leaf, allow_unused=True)[0] is None]
    seen += [m.autograd.grad((row * 2).sum(), row, allow_unused=True, materialize_grads=True)[0].tolist()]
    (row * 2).sum().backward(inputs=[row, leaf])
    seen += [row.grad is None, leaf.grad is None]
    base = m.rand(2, requires_grad=True)
    with m.no_grad():
        piece = base[:1]
    base.requires_grad_(False)
    return seen + [piece.requires_grad]


def test_a_view_made_without_grad_requires_grad_through_its_base_as_torch():
    assert _no_grad_view_story(bg) == _no_grad_view_story(torch)


def test_an_unused_no_grad_view_is_named_as_torch():
    def differentiate(m):
        leaf = m.ones(3, requires_grad=True)
        with m.no_grad():
            piece = leaf[:2]
        return m.autograd.grad((piece * 2).sum(), piece)

    raises_like_torch(differentiate)


def test_a_graph_through_a_no_grad_view_is_freed_after_backward_as_torch():
    def twice(m):
        leaf = m.ones(3, requires_grad=True)
        with m.no_grad():
            piece = leaf[1:]
        shared = m.sin(piece)
        (shared.sum() * 2).backward()
        (shared.sum() * 3).backward()

    raises_like_torch(twice)


def _special_views_story(m):
    """Views of other special kinds made while nothing records (a custom Function's outputs under no_grad, one and
    several; views made in inference mode; several views of one op): each requires grad through its base, as torch's
    views of every kind do, and what is computed from them records."""
    leaf = m.rand(4, requires_grad=True)
    alias = _function(m, lambda ctx, x: x[:3])
    pair = _function(m, lambda ctx, x: (x[:3], x[1:]))
    with m.no_grad():
        one, two = alias(leaf), pair(leaf)
        pieces = leaf.unbind(0)
    with m.inference_mode():
        made_in_inference = leaf[:2]
    views = (one, *two, pieces[0], made_in_inference)
    seen = [(v.requires_grad, v.is_leaf, v.grad_fn is None) for v in views]
    seen += [type((v * 2).grad_fn).__name__ for v in views]
    with m.no_grad():
        detached = leaf.detach()[:2]
    return seen + [detached.requires_grad]


def test_views_of_every_special_kind_require_grad_through_their_base_as_torch():
    assert _special_views_story(bg) == _special_views_story(torch)


def _identity(m):
    return _function(m, lambda ctx, a: a)


def _unbound(m):
    return (_grad_leaf(m) * 1).reshape(2, 1).unbind()


CHANGED_UNRECORDED = {
    "Function output written under no_grad": lambda m: _written_under_no_grad(m, _identity(m)(_grad_leaf(m) * 1)),
    "Function output whose input changed": lambda m: _output_after_base_write(m, _identity(m)),
    "Function view of its input written": lambda m: _written_under_no_grad(
        m, _function(m, lambda ctx, a: a[:1])(_grad_leaf(m) * 1)
    ),
    "unbind view written under no_grad": lambda m: _written_under_no_grad(m, _unbound(m)[0]),
    "unbind sibling written under no_grad": lambda m: _sibling_written(m, _unbound(m)),
    "unbind view written through detach": lambda m: _detach_written(_unbound(m)[0]),
}


def _written_under_no_grad(m, view):
    with m.no_grad():
        view.mul_(2)
    return view


def _output_after_base_write(m, fn):
    base = _grad_leaf(m) * 1
    out = fn(base)
    with m.no_grad():
        base.mul_(2)
    return out


def _sibling_written(m, views):
    with m.no_grad():
        views[1].mul_(2)
    return views[0]


def _detach_written(view):
    view.detach().mul_(2)
    return view


@pytest.mark.parametrize("case", sorted(CHANGED_UNRECORDED))
@pytest.mark.parametrize("use", ["grad_fn", "op"])
def test_special_view_changed_unrecorded_raises_where_its_history_is_needed(case, use):
    """A view a custom Function returned or one of several views one op made, changed in place without recording
    (under no_grad, through a detached alias, or through its base or a sibling): torch cannot rebuild its grad_fn,
    so reading grad_fn or recording an op on it raises, naming the node it came from."""

    def run(m):
        view = CHANGED_UNRECORDED[case](m)
        return view.grad_fn if use == "grad_fn" else view.sum()

    got, want = raises_like_torch(run)
    assert type(got) is RuntimeError and str(got) == str(want)
