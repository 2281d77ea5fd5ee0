"""The values a node saves for backward as torch's nodes show them: `grad_fn._saved_<name>` (an input comes back as
the tensor itself, an output as a new tensor in its place in the graph sharing its version counter),
`grad_fn._raw_saved_<name>` (a SavedTensor: what is kept, the unpack hook, register_hooks), the errors of reading
them after backward freed them, after an in-place change or an in-place detach, and a Function's saved tensors read
from its node. Each check runs on torch 2.13 and on batched_grad alike."""

import gc
import weakref

import pytest
import torch

import batched_grad as bg

BOTH = pytest.mark.parametrize("m", [torch, bg], ids=["torch", "batched_grad"])


@BOTH
def test_saved_inputs_come_back_as_the_tensors_themselves(m):
    leaf = m.randn(4, requires_grad=True)
    square = leaf * leaf
    cube = leaf * square
    assert square.grad_fn._saved_self is leaf and square.grad_fn._saved_other is leaf
    assert cube.grad_fn._saved_other is square  # a non-leaf input is kept as it is too
    assert (leaf.clone() ** 3).grad_fn._saved_self is not leaf


@BOTH
def test_a_saved_output_comes_back_as_a_new_tensor_of_the_same_node(m):
    x = m.randn(3, requires_grad=True)
    y = x.exp()
    saved = y.grad_fn._saved_result
    assert saved is not y
    assert saved.grad_fn is y.grad_fn and saved.requires_grad
    assert m.equal(saved.detach(), y.detach())


@BOTH
def test_a_saved_output_shares_the_version_and_values_of_the_output(m):
    x = m.rand(2, requires_grad=True)
    y = x.exp()
    saved = y.grad_fn._saved_result
    with m.no_grad():
        y += 1
    assert saved._version == y._version == 1
    assert m.equal(saved.detach(), y.detach())
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as error:
        _ = y.grad_fn._saved_result
    assert "which is output 0 of Exp," in str(error.value)


@BOTH
def test_reading_a_saved_value_after_backward_freed_it_raises(m):
    x = m.randn(3, requires_grad=True)
    y = x * x.sin()
    y.sum().backward()
    with pytest.raises(RuntimeError, match="after they have already been freed"):
        _ = y.grad_fn._saved_self
    with pytest.raises(RuntimeError, match="register_hooks on a saved tensor after it has been freed"):
        y.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)


@BOTH
def test_numbers_and_unsaved_operands_as_torch_shows_them(m):
    x = m.randn(3, requires_grad=True)
    assert (x**2).grad_fn._saved_exponent == 2 and type((x**2).grad_fn._saved_exponent) is int
    assert (x**2.5).grad_fn._saved_exponent == 2.5
    scaled = x * 2
    assert scaled.grad_fn._saved_self is None  # mul needs x only for the gradient of the number
    assert isinstance(scaled.grad_fn._saved_other, m.Tensor) and scaled.grad_fn._saved_other.item() == 2
    with pytest.raises(AttributeError):
        _ = x.exp().grad_fn._saved_self  # exp's node keeps its result only
    with pytest.raises(AttributeError):
        _ = (x + 1).grad_fn._saved_other


@BOTH
def test_indices_a_node_saves_are_the_indices_returned(m):
    x = m.randn(3, 4, requires_grad=True)
    values, indices = x.max(0)
    assert values.grad_fn._saved_indices is indices


@BOTH
def test_raw_saved_values_show_what_is_kept_and_the_unpack_hook(m):
    a = m.tensor(2.0, requires_grad=True)

    def unpack(t):
        return t

    with m.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        b = a**2
    c = b.exp()
    d = c**2
    assert b.grad_fn._raw_saved_self.data is a and b.grad_fn._raw_saved_self.unpack_hook is unpack
    kept = c.grad_fn._raw_saved_result
    assert kept.data is not c and not kept.data.requires_grad and kept.unpack_hook is None
    assert d.grad_fn._raw_saved_self.data is c and d.grad_fn._raw_saved_self.unpack_hook is None
    with pytest.raises(RuntimeError, match="from Python is forbidden"):
        m.autograd.SavedTensor()


def _gradient_with_hooks(m, make_input, pack, unpack):
    a = make_input()
    y = a * a
    y.grad_fn._raw_saved_self.register_hooks(pack, unpack)
    seen = y.grad_fn._saved_self
    (grad,) = m.autograd.grad(y.sum(), a)
    return a, seen, grad


@pytest.mark.parametrize("leaf", [True, False], ids=["leaf", "non-leaf"])
def test_hooks_registered_on_a_saved_input_change_what_backward_reads(leaf):
    for m in (torch, bg):
        m.manual_seed(0)
        source = m.randn(5, requires_grad=True)
        make = (lambda: source) if leaf else (lambda: source * 1)
        a, seen, grad = _gradient_with_hooks(m, make, lambda t: 2 * t, lambda t: t)
        assert m.equal(seen.detach(), 2 * a.detach())
        assert m.allclose(grad, 3 * a.detach())  # self reads 2a, other reads a
        if not leaf:
            assert seen.grad_fn is a.grad_fn


@BOTH
def test_hooks_registered_on_a_saved_output(m):
    x = m.randn(5, requires_grad=True)
    y = x.exp()
    y.grad_fn._raw_saved_result.register_hooks(lambda t: t, lambda t: t)
    assert y.grad_fn._saved_result.grad_fn is y.grad_fn
    assert m.equal(y.grad_fn._saved_result.detach(), y.detach())
    y.sum().backward()
    assert m.allclose(x.grad, y.detach())


@BOTH
def test_register_hooks_errors(m):
    x = m.randn(5, requires_grad=True)
    y = x * x
    saved = y.grad_fn._raw_saved_self
    with pytest.raises(TypeError, match="incompatible function arguments"):
        saved.register_hooks(1, 1)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        saved.register_hooks(lambda t, extra: t, lambda t: t)
    y = x * x
    y.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: 1)
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        _ = y.grad_fn._saved_self
    with pytest.raises(RuntimeError, match="hooks have already been set"):
        y.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)

    def double_in_place(t):
        t *= 2
        return t

    with pytest.raises(RuntimeError, match="pack hook is modifying its input in place"):
        (x * x).grad_fn._raw_saved_self.register_hooks(double_in_place, lambda t: t)
    if m is bg:  # torch 2.13 crashes (a segmentation fault) on this one
        with pytest.raises(RuntimeError, match="pack hook is modifying its input in place"):
            x.exp().grad_fn._raw_saved_result.register_hooks(double_in_place, lambda t: t)


@BOTH
def test_saved_values_read_through_the_default_hooks(m):
    with m.autograd.graph.saved_tensors_hooks(lambda t: 2 * t, lambda t: t):
        a = m.randn(5, requires_grad=True)
        y = a * a
        assert m.equal(y.grad_fn._saved_self.detach(), 2 * a.detach())
    y.sum().backward()
    assert m.allclose(a.grad, 4 * a.detach())


@BOTH
def test_a_result_torch_saves_goes_through_the_pack_hook_and_the_input_does_not(m):
    # exp's node saves its result: the hooks see it (not the input), and _saved_result reads it back through them
    packed = []

    def pack(t):
        packed.append(t)
        return 2 * t

    with m.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        a = m.randn(5, requires_grad=True)
        z = a.exp()
    assert len(packed) == 1 and m.equal(packed[0], z)
    assert m.equal(z.grad_fn._saved_result.detach(), 2 * z.detach())
    assert z.grad_fn._raw_saved_result.unpack_hook is not None


@BOTH
def test_a_saved_input_detached_in_place_cannot_be_used(m):
    a = m.tensor(1.0, requires_grad=True).clone()
    b = a.sin()
    a.detach_()
    with pytest.raises(RuntimeError, match="Trying to use a saved tensor that has been detached"):
        b.backward()
    a = m.tensor(1.0, requires_grad=True).clone()
    b = a.exp()  # exp saves its result, not `a`
    a.detach_()
    b.backward()


@BOTH
def test_the_in_place_error_names_the_saved_input_grad_fn_as_it_is_now(m):
    a = m.randn(3, requires_grad=True).clone()
    b = a.sin()
    a.mul_(2)
    with pytest.raises(RuntimeError, match="output 0 of Mul, is at version 1; expected version 0"):
        b.sum().backward()


class _SavesInputAndOutput:
    @staticmethod
    def forward(ctx, x):
        y = x * 3
        ctx.save_for_backward(x, y, None)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y, nothing = ctx.saved_tensors
        return g * 3


def _function(m, body, **attributes):
    methods = {"forward": staticmethod(body.forward), "backward": staticmethod(body.backward)}
    return type(body.__name__.strip("_"), (m.autograd.Function,), {**methods, **attributes})


@BOTH
def test_a_function_node_shows_its_saved_tensors(m):
    x = m.randn(4, requires_grad=True)
    y = _function(m, _SavesInputAndOutput).apply(x)
    saved_x, saved_y, nothing = y.grad_fn.saved_tensors
    assert saved_x is x and nothing is None
    assert saved_y is not y and saved_y.grad_fn is y.grad_fn
    raw = y.grad_fn._raw_saved_tensors
    assert len(raw) == 3 and raw[0].data is x
    with pytest.raises(RuntimeError, match="None is forbidden"):
        raw[2].register_hooks(lambda t: t, lambda t: t)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="after they have already been freed"):
        _ = y.grad_fn.saved_tensors
    with pytest.raises(RuntimeError, match="after they have already been freed"):
        _ = y.grad_fn._raw_saved_tensors


class _ReadsSavedTwice:
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        _ = ctx.saved_tensors
        _ = ctx.saved_tensors
        return g


class _ReadsSavedOnce:
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        ref = weakref.ref(x)
        del x
        assert ref() is None  # the caller's reference was the last one
        return g


@BOTH
def test_saved_tensors_cleared_on_access_can_be_read_once(m):
    x = m.randn(3, requires_grad=True)
    m_twice = _function(m, _ReadsSavedTwice, clear_saved_tensors_on_access=True)
    with pytest.raises(RuntimeError, match="can only be accessed once"):
        m_twice.apply(x).sum().backward()
    once = _function(m, _ReadsSavedOnce, clear_saved_tensors_on_access=True)
    once.apply(x.clone()).sum().backward()
    assert x.grad is not None


class _DirtySaved:
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


@BOTH
def test_no_reference_cycle_keeps_a_dirty_view_saved_by_a_function(m):
    def scope():
        x = m.tensor(1.0, requires_grad=True).clone()
        x = x.view_as(x)
        _function(m, _DirtySaved).apply(x)
        return weakref.ref(x)

    gc.disable()
    try:
        assert scope()() is None
    finally:
        gc.enable()


class _CountsDeletion:
    """A hook that does nothing, whose deletion (with the node holding it) is counted."""

    def __init__(self, deleted):
        self.deleted = deleted

    def __call__(self, grad_inputs, grad_outputs):
        return None

    def __del__(self):
        self.deleted.append(True)


@BOTH
def test_no_reference_cycle_keeps_an_in_place_op_on_a_view(m):
    deleted = []

    def scope():
        copy = m.randn(3, 3, requires_grad=True).clone()
        copy.grad_fn.register_hook(_CountsDeletion(deleted))
        view = copy.view(9)
        m.nn.functional.relu(view, inplace=True)  # its node saves its result, a view of `copy`

    gc.disable()
    try:
        scope()
    finally:
        gc.enable()
    assert deleted == [True]
