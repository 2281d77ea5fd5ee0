"""torch.autograd.graph.allow_mutation_on_saved_tensors against torch 2.13: which saved tensors a write clones (the
context's maps, step by step), the gradients backward reads, and the errors of a backward outside the context and of
nested contexts."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


def _sizes(ctx):
    """(clones, originals, saved tids) the context holds now."""
    return len(list(ctx.cloned.items())), len(list(ctx.original.items())), len(list(ctx.tid_to_weakhandle.items()))


def _no_grad_add(m, t):
    with m.no_grad():
        t.add_(1.0)


# each writes into a saved non-leaf through another door
WRITES = {
    "method": lambda m, b: b.mul_(3.0),
    "own_input_saved": lambda m, b: b.sin_(),  # sin_ saves the values before the write, as a copy
    "own_result_saved": lambda m, b: b.exp_(),
    "zero": lambda m, b: b.zero_(),
    "copy": lambda m, b: b.copy_(m.ones(2, 3)),
    "setitem": lambda m, b: b.__setitem__(0, 5.0),
    "through_a_slice": lambda m, b: b[1:].mul_(2.0),
    "through_a_detached_alias": lambda m, b: b.detach().mul_(2.0),
    "inplace_view_op": lambda m, b: b.t_(),
    "functional_inplace": lambda m, b: m.nn.functional.relu(b, inplace=True),
    "foreach": lambda m, b: m._foreach_mul_([b], 2.0),
    "under_no_grad": _no_grad_add,
}


def _saved_non_leaf(m):
    """(leaf, a non-leaf the forward saved, forward's output)."""
    a = m.tensor([[0.5, 1.5, -2.0], [1.0, 2.0, 3.0]], requires_grad=True)
    b = a.clone()
    return a, b, (b * b).sum()


def _saved_operand(m):
    """(leaf, an operand that needs no gradient which the forward saved, forward's output)."""
    w, x = m.tensor([0.5, 1.5], requires_grad=True), m.tensor([2.0, 3.0])
    return w, x, (w * x).sum()


def _write_after_save(m, forward, write):
    """The context's sizes after the forward, after `write` into the saved tensor and after backward, then on exit;
    the leaf's gradient."""
    with m.autograd.graph.allow_mutation_on_saved_tensors() as ctx:
        leaf, saved, out = forward(m)
        steps = [_sizes(ctx)]
        write(m, saved)
        steps.append(_sizes(ctx))
        out.backward()
        steps.append(_sizes(ctx))
    return steps + [_sizes(ctx)], leaf.grad


def _check_write(forward, write):
    ours, theirs = _write_after_save(bg, forward, write), _write_after_save(torch, forward, write)
    assert ours[0] == theirs[0]
    assert_same(ours[1], theirs[1])


@pytest.mark.parametrize("door", list(WRITES))
def test_a_write_clones_what_is_saved_and_backward_reads_the_old_values(door):
    _check_write(_saved_non_leaf, WRITES[door])


def _set_data(m, x):
    x.data = m.tensor([9.0, 9.0])  # not a write torch's mode sees: backward reads the new values


# each writes into an operand that needs no gradient
OPERAND_WRITES = {
    "out_argument": lambda m, x: m.sin(m.tensor([1.0, 2.0]), out=x),
    "ternary_out_argument": lambda m, x: m.addcmul(m.ones(2), m.ones(2), m.ones(2), out=x),
    "set_": lambda m, x: x.set_(m.tensor([7.0, 8.0])),
    "resize_": lambda m, x: x.resize_(5),
    "data": _set_data,
}


@pytest.mark.parametrize("door", list(OPERAND_WRITES))
def test_out_arguments_set_and_resize_are_writes(door):
    _check_write(_saved_operand, OPERAND_WRITES[door])


def _versions(m):
    with m.autograd.graph.allow_mutation_on_saved_tensors() as ctx:
        a = m.tensor([0.5, 1.5], requires_grad=True).clone()
        steps = []
        b = a.sin()
        steps.append(_sizes(ctx))
        a.mul_(2.0)  # clones a as sin saved it
        steps.append(_sizes(ctx))
        c = a.exp()
        c.mul_(2.0)  # clones exp's saved result
        a.mul_(3.0)  # clones a as exp saved it; the first clone stays as it is
        steps.append(_sizes(ctx))
        (b.sum() + c.sum()).backward(retain_graph=True)
        steps.append(_sizes(ctx))
        del b
        steps.append(_sizes(ctx))
        d = (a * a).sum()
        del c
        steps.append(_sizes(ctx))
        d.backward()  # frees what mul saved: a later write clones nothing
        a.add_(1.0)
        steps.append(_sizes(ctx))
    return steps


def test_each_saved_version_is_cloned_once_and_forgotten_with_its_graph():
    assert _versions(bg) == _versions(torch)


def _double_backward(m):
    with m.autograd.graph.allow_mutation_on_saved_tensors():
        a = m.tensor([0.5, 1.5, -2.0], requires_grad=True)
        b = a.clone()
        out = (b**3).sum()
        b.cos_()
        (da,) = m.autograd.grad(out, a, create_graph=True)
        (d2a,) = m.autograd.grad(da.sum(), a)
    return da, d2a


def test_double_backward_reads_the_clone():
    assert_same(_double_backward(bg), _double_backward(torch))


def _backward_after_the_context(m):
    with m.autograd.graph.allow_mutation_on_saved_tensors():
        out = (m.tensor([1.0, 2.0], requires_grad=True) ** 2).sum()
    out.backward()


def _backward_in_another_context(m):
    with m.autograd.graph.allow_mutation_on_saved_tensors():
        out = (m.tensor([1.0, 2.0], requires_grad=True) ** 2).sum()
    with m.autograd.graph.allow_mutation_on_saved_tensors():
        out.backward()


def _nested(m):
    with m.autograd.graph.allow_mutation_on_saved_tensors():
        with m.autograd.graph.allow_mutation_on_saved_tensors():
            pass


def _backward_after_a_refused_nesting(m):
    """torch's refused inner context closes the outer one too: its graph can no longer be read."""
    with m.autograd.graph.allow_mutation_on_saved_tensors():
        out = (m.tensor([1.0, 2.0], requires_grad=True) ** 2).sum()
        try:
            _nested(m)
        except RuntimeError:
            pass
        out.backward()


def _inside_disabled_hooks(m):
    with m.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
        with m.autograd.graph.allow_mutation_on_saved_tensors():
            pass


@pytest.mark.parametrize(
    "fn",
    [
        _backward_after_the_context,
        _backward_in_another_context,
        _nested,
        _backward_after_a_refused_nesting,
        _inside_disabled_hooks,
    ],
)
def test_refusals(fn):
    raises_like_torch(fn)


def test_the_context_is_cleared_on_exit_and_its_type_is_torchs():
    with bg.autograd.graph.allow_mutation_on_saved_tensors() as ctx:
        a = bg.tensor([1.0, 2.0], requires_grad=True).clone()
        out = a * a
        a.mul_(2.0)
        assert _sizes(ctx) == (1, 0, 1)
    assert _sizes(ctx) == (0, 0, 0) and dict(ctx.sid_to_tid) == {}
    assert type(ctx).__name__ == "_AllowMutationOnSavedContext"
    del out
