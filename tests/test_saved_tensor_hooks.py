"""torch.autograd.graph's hooks on the tensors saved for backward (saved_tensors_hooks, save_on_cpu,
disable_saved_tensors_hooks), and torch.func's refusal of them inside grad/vjp/jacrev/hessian, against torch 2.13."""

import threading

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch

BOTH = pytest.mark.parametrize("m", [torch, bg], ids=["torch", "batched_grad"])


def _logging_hooks(m, log):
    def pack(t):
        log.append(("pack", tuple(t.shape), t.requires_grad, m.is_grad_enabled()))
        return t.detach()

    def unpack(packed):
        log.append(("unpack", tuple(packed.shape), m.is_grad_enabled()))
        return packed

    return m.autograd.graph.saved_tensors_hooks(pack, unpack)


def _hooked_sin_of_product(m):
    log = []
    a = m.tensor([0.5, 1.0, 2.0], requires_grad=True)
    with _logging_hooks(m, log):
        y = (a * a).sin().sum()  # mul saves both operands, sin its input
    packed = list(log)
    y.backward()
    return packed, log[len(packed) :], a.grad


def test_pack_runs_under_no_grad_when_saved_and_unpack_when_backward_reads():
    ours, theirs = _hooked_sin_of_product(bg), _hooked_sin_of_product(torch)
    assert ours[:2] == theirs[:2]
    assert_same(ours[2], theirs[2])


def _double_backward_through_unpacked(m):
    log = []
    a = m.tensor([0.3, -1.2], requires_grad=True)
    with _logging_hooks(m, log):
        y = a.sin()  # saves the leaf itself
    (first,) = m.autograd.grad(y.sum(), a, create_graph=True)
    (second,) = m.autograd.grad(first.sum(), a)
    return log, first, second


# what ops' nodes save: torch saves (and its backward reads) the inputs sorted by name, then the results; an input
# its formula does not read is not saved (exp, tanh, softmax, ... save only their result)
SAVING_SEVERAL = {
    "exp": lambda m, a, b: a.exp(),
    "tanh_sigmoid": lambda m, a, b: a.tanh() + b.sigmoid(),
    "softmax": lambda m, a, b: a.reshape(2, 3).softmax(-1) * b.reshape(2, 3).log_softmax(-1),
    "relu": lambda m, a, b: a.relu() * b,
    "norm_max_prod": lambda m, a, b: a.norm() + b.max() + a.prod(),
    "logsumexp": lambda m, a, b: a.reshape(2, 3).logsumexp(1),
    "pow": lambda m, a, b: a.abs() ** b,
    "hypot": lambda m, a, b: m.hypot(a, b),
    "sqrt": lambda m, a, b: a.abs().sqrt(),
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "sub_mul": lambda m, a, b: (a - b) * (b - a),
    "atan2": lambda m, a, b: m.atan2(a, b),
    "maximum": lambda m, a, b: m.maximum(a, b),
    "xlogy": lambda m, a, b: m.xlogy(a, b.abs()),
    "grid_sample": lambda m, a, b: m.nn.functional.grid_sample(
        a.reshape(1, 1, 2, 3), b.reshape(1, 1, 3, 2).tanh(), align_corners=False
    ),
}


def _pack_and_unpack_order(m, f):
    """The tensors the op's node packs and its backward unpacks, in order, named by which input they are."""
    a = m.tensor([0.5, -1.0, 2.0, 0.3, -0.7, 1.5], requires_grad=True)
    b = m.tensor([1.5, 0.25, -0.5, -2.0, 0.8, 0.6], requires_grad=True)
    x, y = a * 1, b * 1  # fresh non-leaf inputs, recognisable by identity when packed
    names, log = {id(x): "a", id(y): "b"}, []

    def pack(t):
        log.append(("pack", names.get(id(t), "other")))
        return names.get(id(t), "other"), t

    def unpack(packed):
        log.append(("unpack", packed[0]))
        return packed[1]

    with m.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = f(m, x, y)
    out.sum().backward()
    return log


@pytest.mark.parametrize("name", sorted(SAVING_SEVERAL))
def test_saved_tensors_are_packed_and_unpacked_as_torchs(name):
    ours = _pack_and_unpack_order(bg, SAVING_SEVERAL[name])
    theirs = _pack_and_unpack_order(torch, SAVING_SEVERAL[name])
    assert ours == theirs


def test_create_graph_connects_the_unpacked_leaf_to_its_gradient():
    ours, theirs = _double_backward_through_unpacked(bg), _double_backward_through_unpacked(torch)
    assert ours[0] == theirs[0]  # unpack runs under grad mode when the backward is recorded
    assert_same(list(ours[1:]), [t.detach() for t in theirs[1:]])


def _unpacked_values_are_used(m):
    a = m.tensor([1.0, 2.0], requires_grad=True)
    with m.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), lambda p: p * 0 + 3):
        (a * a).sum().backward()
    b = m.tensor([1.0, 2.0], requires_grad=True)
    outer = m.autograd.graph.saved_tensors_hooks(lambda t: ("outer", t.detach()), lambda p: p[1])
    inner = m.autograd.graph.saved_tensors_hooks(lambda t: ("inner", t.detach() * 2), lambda p: p[1])
    with outer:
        with inner:
            (b * b).sum().backward()
    return a.grad, b.grad


def test_backward_reads_what_unpack_returns_and_only_the_innermost_pair_applies():
    assert_same(list(_unpacked_values_are_used(bg)), list(_unpacked_values_are_used(torch)))


def _in_place_change_after_saving(m):
    a = m.ones(3, requires_grad=True)
    with m.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda p: p):
        b = a * 1
        c = b.sin()
    b.add_(1)
    c.sum().backward()  # the packed copy holds the value at saving time: no version check, as torch's
    return a.grad


def test_a_packed_value_is_not_checked_against_later_in_place_changes():
    assert_same(_in_place_change_after_saving(bg), _in_place_change_after_saving(torch))


def _function_saved_tensors(m):
    class Scale(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x

    log = []
    a = m.tensor([1.0, 2.0], requires_grad=True)
    with _logging_hooks(m, log):
        y = Scale.apply(a)
    y.sum().backward()
    return log, a.grad


def test_save_for_backward_goes_through_the_hooks():
    ours, theirs = _function_saved_tensors(bg), _function_saved_tensors(torch)
    assert ours[0] == theirs[0]
    assert_same(ours[1], theirs[1])


@pytest.mark.parametrize("pin_memory", [False, True])
def test_save_on_cpu_gives_torchs_gradients(pin_memory):
    def run(m):
        a = m.tensor([0.5, -1.5, 2.0], requires_grad=True)
        with m.autograd.graph.save_on_cpu(pin_memory=pin_memory):
            y = (a.exp() * a).sum()
        y.backward()
        return a.grad

    assert_same(run(bg), run(torch))


def test_unpack_returning_a_non_tensor_and_a_second_backward_raise_like_torch():
    def non_tensor(m):
        a = m.ones(2, requires_grad=True)
        with m.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), lambda p: 5):
            y = a.sin().sum()
        y.backward()

    def twice(m):
        a = m.ones(2, requires_grad=True)
        with m.autograd.graph.save_on_cpu():
            y = a.sin().sum()
        y.backward()
        y.backward()

    raises_like_torch(non_tensor)
    raises_like_torch(twice)


@pytest.mark.parametrize("order", ["hooks_then_disable", "disable_then_hooks", "nested_disable"])
def test_disable_saved_tensors_hooks_raises_its_message_like_torch(order):
    def run(m):
        graph = m.autograd.graph
        if order == "hooks_then_disable":
            with graph.save_on_cpu(), graph.disable_saved_tensors_hooks("no hooks here"):
                pass
        elif order == "disable_then_hooks":
            with graph.disable_saved_tensors_hooks("no hooks here"), graph.save_on_cpu():
                pass
        else:
            with graph.disable_saved_tensors_hooks("outer"):
                with graph.disable_saved_tensors_hooks("inner"):
                    pass
                with graph.save_on_cpu():  # the outer message is back in force
                    pass

    raises_like_torch(run)


@BOTH
def test_hooks_are_per_thread(m):
    entered = []

    def other_thread():
        with m.autograd.graph.save_on_cpu():
            entered.append(True)

    with m.autograd.graph.disable_saved_tensors_hooks("not on this thread"):
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    assert entered == [True]


def _sin_sum(m):
    return lambda x: m.sin(x).sum()


def _hooked_inside(m):
    def g(x):
        with m.autograd.graph.save_on_cpu():
            return _sin_sum(m)(x)

    return g


TRANSFORMS = {
    "grad": lambda m, f, x: m.func.grad(f)(x),
    "grad_and_value": lambda m, f, x: m.func.grad_and_value(f)(x),
    "jacrev": lambda m, f, x: m.func.jacrev(f)(x),
    "hessian": lambda m, f, x: m.func.hessian(f)(x),
    "vjp": lambda m, f, x: m.func.vjp(f, x),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("where", ["around", "inside"])
def test_reverse_transforms_refuse_saved_tensor_hooks_like_torch(transform, where):
    def run(m):
        x = m.tensor([0.1, 0.2, 0.3])
        if where == "inside":
            return TRANSFORMS[transform](m, _hooked_inside(m), x)
        with m.autograd.graph.save_on_cpu():
            return TRANSFORMS[transform](m, _sin_sum(m), x)

    raises_like_torch(run)


@pytest.mark.parametrize("where", ["around", "inside"])
def test_jvp_and_vmap_run_under_saved_tensor_hooks(where):
    def run(m):
        x, t = m.tensor([0.1, 0.2, 0.3]), m.tensor([1.0, -1.0, 0.5])
        if where == "inside":
            f = _hooked_inside(m)
            return m.func.jvp(f, (x,), (t,)), m.func.vmap(f)(m.stack([x, t]))
        f = _sin_sum(m)
        with m.autograd.graph.save_on_cpu():
            return m.func.jvp(f, (x,), (t,)), m.func.vmap(f)(m.stack([x, t]))

    ours, theirs = run(bg), run(torch)
    assert_same(list(ours[0]), list(theirs[0]))
    assert_same(ours[1], theirs[1])


def test_a_pack_hook_changing_its_input_in_place_raises_like_torch():
    def run(m):
        a = m.randn(4, requires_grad=True)

        def increment(t):
            t += 1
            return t

        with m.autograd.graph.saved_tensors_hooks(increment, lambda p: p):
            m.exp(a)

    raises_like_torch(run)


def _hooks_entered_by_backward(m):
    packed = []
    lingering = m.autograd.graph.saved_tensors_hooks(lambda t: packed.append(1) or t.detach(), lambda p: p)

    def unpack(p):
        lingering.__enter__()  # never exited: it stays in the backward that entered it
        return p

    a = m.ones(3, requires_grad=True)
    with m.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), unpack):
        a.sin().sum().backward()
    a.exp()  # saved with no hooks in force
    return packed


def test_hooks_entered_during_backward_do_not_outlive_it():
    assert _hooks_entered_by_backward(bg) == _hooks_entered_by_backward(torch) == []
