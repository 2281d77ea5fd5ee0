"""After an in-place change, a view's history is one as_strided node of its base (torch's default on CPU), or its
chain of view ops replayed while torch.autograd._force_original_view_tracking(True) is in effect; either way the
gradients are the same."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same

VIEWS = {
    "transpose": lambda x: x.t(),
    "diagonal": lambda x: x.diagonal(),
    "select": lambda x: x[1],
    "select_then_view": lambda x: x[:, 0].view(2, 1),
}


def _history(m, make, replay, modify_base):
    x = m.arange(4.0).reshape(2, 2).requires_grad_()
    with m.autograd._force_original_view_tracking(replay):
        assert m.autograd.is_view_replay_enabled() is replay
        base = x.clone()
        view = make(base)
        (base if modify_base else view).mul_(2)
        names = [view.grad_fn.name()] + [n.name() for n, _ in view.grad_fn.next_functions if n is not None]
    (view * view).sum().backward()
    return names, x.grad


@pytest.mark.parametrize("modify_base", [False, True], ids=["view-modified", "base-modified"])
@pytest.mark.parametrize("replay", [False, True], ids=["as_strided", "replay"])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_history_of_a_view_after_an_in_place_change(name, replay, modify_base):
    got_names, got_grad = _history(bg, VIEWS[name], replay, modify_base)
    want_names, want_grad = _history(torch, VIEWS[name], replay, modify_base)
    assert got_names == want_names
    assert_same(got_grad, want_grad)


def test_the_switch_restores_and_decorates():
    for m in (bg, torch):
        assert not m.autograd.is_view_replay_enabled()
        m.autograd._force_original_view_tracking(True)  # a call sets it
        assert m.autograd.is_view_replay_enabled()
        m.autograd._force_original_view_tracking(False)

        @m.autograd._force_original_view_tracking(True)
        def inside():
            return m.autograd.is_view_replay_enabled()

        assert not m.autograd.is_view_replay_enabled()
        assert inside() and not m.autograd.is_view_replay_enabled()


def test_functionalize_replays_the_views_it_regenerates():
    def run(m):
        def f(x):
            base = x.clone()
            view = base[0]
            base.add_(1)
            return view

        return m.func.functionalize(f)(m.ones(2, 3, requires_grad=True)).grad_fn.name()

    assert run(bg) == run(torch) == "SelectBackward0"


def _history_after_an_unrecorded_change(m, make, replay, leaf_base):
    """The base changes under no_grad (an optimizer's step): torch still regenerates the view's grad_fn, and a
    backward through the view saved before the change names that node in its in-place error."""
    x = m.tensor([[0.0, 1.0], [2.0, 3.0]], requires_grad=True)
    with m.autograd._force_original_view_tracking(replay):
        base = x if leaf_base else x.clone()
        view = make(base)
        saved_square = (view * view).sum()
        with m.no_grad():
            base.mul_(2)
        names = [view.grad_fn.name()] + [n.name() for n, _ in view.grad_fn.next_functions if n is not None]
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as error:
        saved_square.backward()
    (make(base) * 3).sum().backward() if leaf_base else (view * 3).sum().backward()
    return names, str(error.value).split(" is at version")[0], x.grad


@pytest.mark.parametrize("leaf_base", [False, True], ids=["base", "leaf-base"])
@pytest.mark.parametrize("replay", [False, True], ids=["as_strided", "replay"])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_history_of_a_view_after_a_change_of_its_base_under_no_grad(name, replay, leaf_base):
    got = _history_after_an_unrecorded_change(bg, VIEWS[name], replay, leaf_base)
    want = _history_after_an_unrecorded_change(torch, VIEWS[name], replay, leaf_base)
    assert got[:2] == want[:2]
    assert_same(got[2], want[2])
