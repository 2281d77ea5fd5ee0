"""A custom Function's `jvp` staticmethod as its forward-mode derivative, against torch 2.13, on dual tensors
(autograd.forward_ad): the tangents the jvp receives, its ctx and what save_for_forward saved, forward running with
forward mode off, torch's checks of what the jvp returns, and the rules for outputs written in place or that are
views of inputs. The forward-mode transforms are in test_function_jvp_transforms.py."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


def make_scaled(m, seen=None):
    """x * y * k, whose jvp is 10 times the true derivative, so that a tangent taken by differentiating forward
    instead of calling the jvp shows. `seen` collects the tangents the jvp receives."""

    class Scaled(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k):
            ctx.k = k
            ctx.save_for_forward(x, y)
            return x * y * k

        @staticmethod
        def backward(ctx, g):
            return g, g, None

        @staticmethod
        def jvp(ctx, x_t, y_t, k_t):
            if seen is not None:
                seen.append((x_t, y_t, k_t))
            x, y = ctx.saved_tensors
            tangent = x_t * y if x_t is not None else 0
            if y_t is not None:
                tangent = tangent + x * y_t
            return 10 * ctx.k * tangent

    return Scaled


def _tensor(m, values, **kw):
    return m.tensor(values, dtype=m.float64, **kw)


def _tangent_through(m, function, *args):
    """The tangent of `function(*args)` with args[0] made dual (tangent 0.5, -1, 2)."""
    fw = m.autograd.forward_ad
    with fw.dual_level():
        dual = fw.make_dual(args[0], _tensor(m, [0.5, -1.0, 2.0]))
        return fw.unpack_dual(function(dual, *args[1:])).tangent


def test_the_tangent_of_the_output_is_what_jvp_returns():
    def run(m):
        seen = []
        tangent = _tangent_through(m, make_scaled(m, seen).apply, _tensor(m, [1.0, 2, 3]), _tensor(m, [4.0, 5, 6]), 2)
        ((x_t, y_t, k_t),) = seen
        return tangent, x_t, y_t, k_t

    got, want = run(bg), run(torch)
    assert_same(got, want)  # y has no tangent: zeros; k is not a Tensor: None


@pytest.mark.parametrize("materialize", [True, False])
def test_tangents_of_inputs_without_one_as_torch(materialize):
    """A float Tensor without tangent gets zeros (None when ctx does not materialize gradients); an integer Tensor and
    a non-Tensor get None."""

    def run(m):
        seen = []

        class Mixed(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, y, n, scale, nothing):
                ctx.set_materialize_grads(materialize)
                return x * y * n * scale

            @staticmethod
            def backward(ctx, g):
                return g, None, None, None, None

            @staticmethod
            def jvp(ctx, *tangents):
                seen.extend(tangents)
                return tangents[0] * 2

        x, y = _tensor(m, [1.0, 2, 3]), _tensor(m, [4.0, 5, 6])
        tangent = _tangent_through(m, Mixed.apply, x, y, m.tensor([1, 2, 3]), 0.5, None)
        return tangent, seen

    assert_same(run(bg), run(torch))


def test_jvp_gets_the_ctx_of_setup_context_and_reads_what_save_for_forward_saved():
    def run(m):
        contexts, log = [], []

        class Sin(m.autograd.Function):
            @staticmethod
            def forward(x):
                return x.sin()

            @staticmethod
            def setup_context(ctx, inputs, output):
                contexts.append(ctx)
                ctx.save_for_backward(output)  # not what the jvp reads
                ctx.save_for_forward(inputs[0])

            @staticmethod
            def backward(ctx, g):
                log.append(len(ctx.saved_tensors))
                return g * ctx.saved_tensors[0]

            @staticmethod
            def jvp(ctx, t):
                log.append(ctx is contexts[-1])
                (x,) = ctx.saved_tensors
                return t * x.cos() * 10

        x = _tensor(m, [0.5, 1.0, 2.0], requires_grad=True)
        tangent = _tangent_through(m, Sin.apply, x)
        (grad,) = m.autograd.grad(Sin.apply(x).sum(), x)
        return tangent, grad, log

    assert_same(run(bg), run(torch))


def test_forward_runs_with_forward_mode_off():
    """Inside forward neither the inputs nor a captured dual tensor show a tangent, and the output's tangent is
    the jvp's alone."""

    def run(m):
        fw, shown = m.autograd.forward_ad, []
        with fw.dual_level():
            captured = fw.make_dual(_tensor(m, [1.0, 1, 1]), _tensor(m, [3.0, 3, 3]))

            class Times(m.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    shown.extend([fw.unpack_dual(x).tangent, fw.unpack_dual(captured).tangent])
                    return x * captured

                @staticmethod
                def backward(ctx, g):
                    return g

                @staticmethod
                def jvp(ctx, t):
                    return t * 5

            x = fw.make_dual(_tensor(m, [1.0, 2, 3]), _tensor(m, [1.0, 1, 1]))
            with_tangent = fw.unpack_dual(Times.apply(x)).tangent
            without = fw.unpack_dual(Times.apply(_tensor(m, [1.0, 2, 3]))).tangent
        return with_tangent, without, shown

    assert_same(run(bg), run(torch))


def test_a_function_without_jvp_is_refused_once_a_tangent_reaches_it():
    class_of = {}

    def no_jvp(m):
        class Double(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        class_of[m] = Double
        return Double

    def run(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            no_jvp(m).apply(fw.make_dual(_tensor(m, [1.0, 2]), _tensor(m, [1.0, 1])))

    got, _ = raises_like_torch(run)
    assert isinstance(got, NotImplementedError)
    with bg.autograd.forward_ad.dual_level():  # no input with a tangent: no jvp needed
        out = class_of[bg].apply(_tensor(bg, [1.0, 2]))
        assert bg.autograd.forward_ad.unpack_dual(out).tangent is None


def _returning(m, jvp, outputs="one"):
    """A Function of x whose jvp is `jvp(t)`: one output x * 2, or (x * 2, 3, x > 0)."""

    class Returning(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2 if outputs == "one" else (x * 2, 3, x > 0)

        @staticmethod
        def backward(ctx, *grads):
            return grads[0]

    Returning.jvp = staticmethod(lambda ctx, t: jvp(t))
    return Returning


JVP_RESULTS = {
    "too many": (lambda t: (t, t), "one"),
    "too few": (lambda t: t, "three"),
    "a number": (lambda t: 3.0, "one"),
    "a list": (lambda t: [t], "one"),
    "a number for a non-Tensor output": (lambda t: (t, 5.0, None), "three"),
    "a tangent for a bool output": (lambda t: (t, None, t), "three"),
    "another size": (lambda t: t[:1], "one"),
}


@pytest.mark.parametrize("name", sorted(JVP_RESULTS))
def test_what_jvp_returns_is_checked_as_torch(name):
    jvp, outputs = JVP_RESULTS[name]

    def run(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            _returning(m, jvp, outputs).apply(fw.make_dual(_tensor(m, [1.0, 2]), _tensor(m, [1.0, 1])))

    got, _ = raises_like_torch(run)
    assert isinstance(got, RuntimeError)


def test_tangents_of_outputs_that_are_not_tensors_are_ignored():
    def run(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            out = _returning(m, lambda t: (t * 3, t, None), "three").apply(
                fw.make_dual(_tensor(m, [1.0, 2]), _tensor(m, [1.0, 1]))
            )
            return fw.unpack_dual(out[0]).tangent, out[1], fw.unpack_dual(out[2]).tangent

    assert_same(run(bg), run(torch))


def test_none_for_a_differentiable_output_is_an_error():
    def run(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            _returning(m, lambda t: None).apply(fw.make_dual(_tensor(m, [1.0, 2]), _tensor(m, [1.0, 1])))

    for m in (torch, bg):  # torch's message is an internal assert; batched_grad says what to return
        with pytest.raises(RuntimeError):
            run(m)


def _in_place(m, jvp, mark_output=False):
    """x.mul_(2) marked dirty (or a new tensor marked dirty, when `mark_output`), with jvp `jvp(t)`."""

    class Doubling(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2 if mark_output else x.mul_(2)
            ctx.mark_dirty(y)
            return y

        @staticmethod
        def backward(ctx, g):
            return g * 2

    Doubling.jvp = staticmethod(lambda ctx, t: jvp(t))
    return Doubling


def test_an_in_place_function_changes_the_tangent_in_place():
    def run(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            tangent = _tensor(m, [1.0, -1])
            x = fw.make_dual(_tensor(m, [1.0, 2]), tangent)
            out = _in_place(m, lambda t: t.mul_(2)).apply(x)
            return out is x, fw.unpack_dual(out), tangent

    assert_same(run(bg), run(torch))


def _copy_then_double(t):
    copy = t.clone()
    t.mul_(2)
    return copy


@pytest.mark.parametrize(
    "jvp, mark_output",
    [(lambda t: t * 2, False), (_copy_then_double, False), (lambda t: t * 2, True)],
    ids=["new tangent", "tangent changed but another returned", "output marked dirty"],
)
def test_in_place_rules_as_torch(jvp, mark_output):
    def run(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            _in_place(m, jvp, mark_output).apply(fw.make_dual(_tensor(m, [1.0, 2]), _tensor(m, [1.0, -1])))

    got, _ = raises_like_torch(run)
    assert isinstance(got, RuntimeError)


def _view(m, forward, jvp):
    class View(m.autograd.Function):
        @staticmethod
        def backward(ctx, g):
            return g

    View.forward = staticmethod(lambda ctx, x: forward(x))
    View.jvp = staticmethod(lambda ctx, t: jvp(t))
    return View


def test_an_output_that_views_an_input_gets_a_view_of_its_tangent():
    def run(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            tangent = _tensor(m, [3.0, 4, 5])
            x = fw.make_dual(_tensor(m, [1.0, 2, 3]), tangent)
            same = fw.unpack_dual(_view(m, lambda x: x, lambda t: t.view_as(t)).apply(x)).tangent
            head = fw.unpack_dual(_view(m, lambda x: x[:2], lambda t: t[:2]).apply(x)).tangent
            return same, same._base is tangent, head

    assert_same(run(bg), run(torch))


@pytest.mark.parametrize(
    "forward, jvp, tangent_is_view",
    [
        (lambda x: x, lambda t: t, False),
        (lambda x: x[:2], lambda t: (t * 1)[:2], False),
        (lambda x: x[:2], lambda t: (t * 1)[:2], True),
    ],
    ids=["input as-is, tangent not a view", "view of another tensor", "view of another base"],
)
def test_view_rules_as_torch(forward, jvp, tangent_is_view):
    def run(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            tangent = _tensor(m, [3.0, 4, 5])
            tangent = tangent[:] if tangent_is_view else tangent
            _view(m, forward, jvp).apply(fw.make_dual(_tensor(m, [1.0, 2, 3]), tangent))

    got, _ = raises_like_torch(run)
    assert isinstance(got, RuntimeError)


def test_a_view_of_a_dual_tensor_has_a_view_of_its_tangent():
    def run(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            tangent = _tensor(m, [3.0, 4, 5])
            x = fw.make_dual(_tensor(m, [1.0, 2, 3]), tangent)
            head = fw.unpack_dual(x[:2]).tangent
            same = fw.unpack_dual(x.view_as(x)).tangent
            return head, head._base is tangent, same._base is tangent

    assert_same(run(bg), run(torch))


def test_view_of_a_viewed_input_must_share_its_tangents_base():
    # the input is itself a view of a dual tensor, so its tangent is a view: the jvp's result must view that base
    def run(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            x = fw.make_dual(_tensor(m, [1.0, 2, 3]), _tensor(m, [3.0, 4, 5]))
            _view(m, lambda x: x[:2], lambda t: (t * 1)[:2]).apply(x.view_as(x))

    got, _ = raises_like_torch(run)
    assert isinstance(got, RuntimeError)


def test_the_jvp_tangent_is_differentiable_by_reverse_mode():
    def run(m):
        x = _tensor(m, [1.0, 2, 3], requires_grad=True)
        tangent = _tangent_through(m, make_scaled(m).apply, x, _tensor(m, [4.0, 5, 6]), 2)
        return tangent, m.autograd.grad((tangent**2).sum(), x)

    assert_same(run(bg), run(torch))


def test_an_input_returned_as_is_is_received_as_an_alias():
    """As torch: a view of it, or (where it requires grad but nothing is recorded) a detached alias."""

    def run(m):
        identity = _view(m, lambda x: x, lambda t: t.view_as(t))
        x = _tensor(m, [1.0, 2])
        y = identity.apply(x)
        leaf = _tensor(m, [1.0, 2], requires_grad=True)
        with m.no_grad():
            z = identity.apply(leaf)
        return y is x, y._base is x, z is leaf, z.requires_grad

    assert run(bg) == run(torch)
