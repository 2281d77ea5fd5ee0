"""torch.func.functionalize against torch 2.13: an input written in place takes its final value (and shape) once the
function returns; results alias the caller's inputs only where torch's do; remove="mutations_and_views" returns no
view at all; views keep how they were made (a view of a multi-output op cannot be written); mutating a captured
tensor with a value made inside is refused; composition with vmap, grad and jvp. Also functorch's names for it."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

LIBS = {"torch": torch, "bg": bg}
X42 = np.arange(8.0).reshape(4, 2)


def both(case):
    """case(lib) under torch and batched_grad."""
    return case(torch), case(bg)


def is_view(t):
    return t._base is not None


def test_writes_into_an_input_reach_it_once_after_the_function_returns():
    def case(m):
        x = m.tensor(X42)
        seen = []

        def f(x_in):
            x_in.view(8).add_(1)
            seen.append(float(x.sum()))  # the caller's tensor is unchanged while the function runs
            return x_in

        out = m.func.functionalize(f)(x)
        return x, out, x._version, seen, out is x, out.data_ptr() == x.data_ptr()

    (tx, tout, tv, ts, tis, tshares), (bx, bout, bv, bs, bis, bshares) = both(case)
    assert_same(bx, tx)
    assert_same(bout, tout)
    assert (bv, bs, bis, bshares) == (tv, ts, tis, tshares) == (1, [28.0], False, False)


def test_a_result_viewing_a_written_input_does_not_alias_the_callers_tensor():
    def case(m):
        x = m.zeros(4, 2)
        out = m.func.functionalize(lambda x: x.view(8).add_(1))(x)
        return out._base is x, out.data_ptr() == x.data_ptr(), is_view(out)

    assert both(case)[1] == both(case)[0] == (False, False, True)


@pytest.mark.parametrize("remove", ["mutations", "mutations_and_views"])
def test_unchanged_inputs_and_their_views_as_results(remove):
    def case(m):
        x = m.tensor(X42)
        fn = m.func.functionalize(lambda x: (x, x.t(), x[1]), remove=remove)
        same, t, row = fn(x)
        return (
            same is x,
            [is_view(t), t._base is x, t.data_ptr() == x.data_ptr(), t.is_contiguous()],
            [is_view(row), row._base is x],
            x._version,
        )

    want, got = both(case)
    assert got == want


def test_mutations_and_views_returns_copies_with_the_view_copy_nodes():
    def case(m):
        x = m.tensor(X42, requires_grad=True)
        out = m.func.functionalize(lambda x: (x * 2).unbind(0)[1], remove="mutations_and_views")(x)
        out.mul_(2)  # a copy: writable, although unbind's views are not
        (g,) = m.autograd.grad(out.sum(), x)
        return out.grad_fn.name(), is_view(out), g

    (tname, tview, tg), (bname, bview, bg_) = both(case)
    assert (bname, bview) == (tname, tview) == ("MulBackward0", False)
    assert_same(bg_, tg)
    t_name = both(
        lambda m: m.func.functionalize(lambda x: x.t(), remove="mutations_and_views")(
            m.ones(2, 3, requires_grad=True)
        ).grad_fn.name()
    )
    assert t_name[1] == t_name[0] == "TBackward0_copy"


def test_a_regenerated_view_of_a_multi_output_op_still_refuses_in_place_writes():
    def f(x):
        base = x.clone()
        out = base.unbind(0)[0]
        base.add_(1)
        return out

    for m in (torch, bg):
        out = m.func.functionalize(f)(m.ones(2, 3, requires_grad=True))
        assert out.grad_fn.name() == "UnbindBackward0"
        with pytest.raises(RuntimeError, match="output of a function that returns multiple views"):
            out.mul_(2)


def test_in_place_shape_changes_of_an_input_are_written_back():
    def case(m):
        x = m.tensor(X42)
        m.func.functionalize(lambda x: x.transpose_(0, 1))(x)
        y = m.tensor(X42)
        m.func.functionalize(lambda x: x.unsqueeze_(0).mul_(2))(y)
        z = m.zeros(0)

        def grow(t):
            t.resize_(5)
            t.fill_(2)

        m.func.functionalize(grow)(z)
        return x, y, z

    want, got = both(case)
    assert_same(got, want)


def test_gradients_flow_through_the_written_back_input():
    def case(m):
        leaf = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x = leaf * 1

        def f(t):
            t.mul_(3).add_(1)
            return t

        out = m.func.functionalize(f)(x)
        (g,) = m.autograd.grad((x * out).sum(), leaf)
        return x, x.grad_fn.name().rsplit("::", 1)[-1], out.grad_fn.name(), x._version, g

    (tx, tname, tout, tv, tg), (bx, bname, bout, bv, bg_) = both(case)
    assert_same(bx, tx)
    assert_same(bg_, tg)
    assert (bname, bout, bv) == (tname, tout, tv) == ("CopyBackwards", "AddBackward0", 1)


def test_writing_into_a_leaf_that_requires_grad_is_refused_at_the_write_back():
    for m in (torch, bg):
        x = m.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            m.func.functionalize(lambda t: t.add_(1))(x)


def test_a_captured_tensor_cannot_take_a_value_made_inside():
    captured = bg.zeros(2)

    def f(x):
        captured.add_(x)
        return x

    with pytest.raises(RuntimeError, match="mutating a non-functional tensor with a functional tensor is not allowed"):
        bg.func.functionalize(f)(bg.ones(2))
    bg.func.functionalize(lambda x: captured.add_(1) + x)(bg.ones(2))  # a value from outside: written as it is
    assert captured.tolist() == [1.0, 1.0]


def test_pytrees_keywords_and_non_tensor_results():
    def case(m):
        f = m.func.functionalize(lambda d, *, a: ({"y": d["x"].add_(a)}, 3, "s"))
        d = {"x": m.zeros(2)}
        out = f(d, a=2)
        return d["x"], out[0]["y"], out[1:]

    (tx, ty, trest), (bx, by, brest) = both(case)
    assert_same(bx, tx)
    assert_same(by, ty)
    assert brest == trest


def test_invalid_remove_is_refused_with_torchs_message():
    def case(m):
        try:
            m.func.functionalize(lambda x: x, remove="views")
        except RuntimeError as error:
            return str(error)

    want, got = both(case)
    assert got == want and "remove=views" in got


def test_composes_with_vmap_grad_and_jvp():
    def f(x):
        y = x + x
        z = y.view(-1)
        y.add_(1)
        return z

    def case(m):
        F = m.func
        x = m.tensor(X42)
        t = m.tensor(X42[::-1].copy())
        written = m.tensor(X42)
        F.vmap(F.functionalize(lambda r: r.view(2).add_(1)))(written)
        return (
            F.vmap(F.functionalize(f))(x),
            F.grad(F.functionalize(lambda x: f(x).sin().sum()))(x),
            F.vmap(F.functionalize(lambda x, t: F.jvp(f, (x,), (t,))))(x, t),
            written,
        )

    want, got = both(case)
    assert_same(got, want)


def test_a_function_without_setup_context_is_refused_inside():
    class MySin(bg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sin()

        @staticmethod
        def backward(ctx, gy):
            return gy

    with pytest.raises(RuntimeError, match="must override the setup_context"):
        bg.func.functionalize(MySin.apply)(bg.ones(3))


def test_functorch_names():
    from batched_grad import functorch
    from batched_grad.functorch import experimental

    with pytest.warns(FutureWarning, match="Please use `torch.func.functionalize`"):
        functorch.functionalize(bg.sin)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert experimental.functionalize(bg.sin)(bg.zeros(1)).tolist() == [0.0]
