"""autograd.Function against torch 2.13: generate_vmap_rule under vmap and the grad transforms, torch.func's
checks on a Function applied inside vmap, keyword arguments bound as torch binds them, `vjp` as an alias of
`backward`, and a broadcast gradient summed back to its input."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, pair, raises_like_torch


def make_cube(lib, **attributes):
    """x**3 and its derivative 3x**2 (saved from the outputs), batched by a generated rule unless `attributes`
    say otherwise."""

    class Cube(lib.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x**3, 3 * x**2

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0], output[1])

        @staticmethod
        def backward(ctx, g, g_derivative):
            x, derivative = ctx.saved_tensors
            return g * derivative + g_derivative * 6 * x

    for name, value in attributes.items():
        setattr(Cube, name, value)
    return Cube


def _cube_loss(lib, Cube):
    return lambda x: (Cube.apply(x)[0] * Cube.apply(x)[1]).sum()


TRANSFORMS = {
    "vmap": lambda lib, Cube: lib.func.vmap(Cube.apply),
    "vmap of vmap": lambda lib, Cube: lib.func.vmap(lib.func.vmap(Cube.apply)),
    "vmap of grad": lambda lib, Cube: lib.func.vmap(lib.func.grad(_cube_loss(lib, Cube))),
    "grad of vmap": lambda lib, Cube: lib.func.grad(lambda x: lib.func.vmap(_cube_loss(lib, Cube))(x).sum()),
    "vmap of grad of grad": lambda lib, Cube: lib.func.vmap(
        lib.func.grad(lambda x: lib.func.grad(_cube_loss(lib, Cube))(x).sum())
    ),
    "vmap of jacrev": lambda lib, Cube: lib.func.vmap(lib.func.jacrev(lambda x: Cube.apply(x)[0])),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_a_generated_vmap_rule_batches_forward_and_backward_like_torch(transform):
    x, tx = pair(3, 4)
    got = TRANSFORMS[transform](bg, make_cube(bg))(x.detach())
    want = TRANSFORMS[transform](torch, make_cube(torch))(tx.detach())
    assert_same(got, want)


def test_the_output_of_a_generated_rule_is_differentiable_outside_vmap():
    x, tx = pair(3, 4)
    (got,) = bg.autograd.grad(bg.func.vmap(make_cube(bg).apply)(x)[0].sum(), x)
    (want,) = torch.autograd.grad(torch.func.vmap(make_cube(torch).apply)(tx)[0].sum(), tx)
    assert_same(got, want)


def _no_rule(lib):
    return make_cube(lib, generate_vmap_rule=False)


def _two_rules(lib):
    return make_cube(lib, vmap=staticmethod(lambda info, in_dims, x: (x, in_dims[0])))


def _without_setup_context(lib):
    class Double(lib.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    return Double


MISUSES = {
    "neither a vmap staticmethod nor generate_vmap_rule": lambda lib, x: lib.func.vmap(_no_rule(lib).apply)(x),
    "both a vmap staticmethod and generate_vmap_rule": lambda lib, x: lib.func.vmap(_two_rules(lib).apply)(x),
    "no setup_context": lambda lib, x: lib.func.vmap(_without_setup_context(lib).apply)(x),
    # the checks hold for a Function applied inside vmap to arguments that are not batched
    "unbatched arguments, no rule": lambda lib, x: lib.func.vmap(lambda v: _no_rule(lib).apply(lib.ones(4))[0] + v)(x),
    "inside vmap of grad": lambda lib, x: lib.func.vmap(lib.func.grad(lambda v: _no_rule(lib).apply(v)[0].sum()))(x),
}


@pytest.mark.parametrize("misuse", list(MISUSES))
def test_a_function_inside_vmap_is_checked_like_torch_func(misuse):
    raises_like_torch(lambda lib: MISUSES[misuse](lib, lib.ones(3, 4)))


def test_a_function_without_a_rule_still_runs_in_a_vectorized_backward():
    x, tx = pair(4)
    Cube, TCube = _no_rule(bg), _no_rule(torch)
    basis = np.eye(4)
    (got,) = bg.autograd.grad(Cube.apply(x)[0], x, bg.tensor(basis), is_grads_batched=True)
    (want,) = torch.autograd.grad(TCube.apply(tx)[0], tx, torch.tensor(basis), is_grads_batched=True)
    assert_same(got, want)


def make_scaled(lib):
    """x * scale, scale a keyword argument with a default; its gradient says how many inputs backward saw."""

    class Scaled(lib.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x, scale=2.0):
            return x * scale

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.n_inputs = len(inputs)
            ctx.save_for_backward(*[t for t in inputs if isinstance(t, lib.Tensor)])

        @staticmethod
        def backward(ctx, g):
            saved = ctx.saved_tensors
            scale = saved[1] if len(saved) > 1 else 2.0
            return (g * scale * ctx.n_inputs,) + (None,) * (ctx.n_inputs - 1)

    return Scaled


CALLS = {
    "default": lambda lib, Scaled, x, s: Scaled.apply(x),
    "by keyword": lambda lib, Scaled, x, s: Scaled.apply(x, scale=s),
    "all by keyword": lambda lib, Scaled, x, s: Scaled.apply(x=x, scale=s),
    "under vmap, by keyword": lambda lib, Scaled, x, s: lib.func.vmap(lambda v: Scaled.apply(x=v, scale=s))(x),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_keyword_arguments_reach_setup_context_as_torch_binds_them(call):
    (x, tx), (s, ts) = pair(3, 2), pair(2, seed=1)
    got = CALLS[call](bg, make_scaled(bg), x, s)
    want = CALLS[call](torch, make_scaled(torch), tx, ts)
    assert_same(got, want)
    assert_same(bg.autograd.grad(got.sum(), x), torch.autograd.grad(want.sum(), tx))


def make_by_vjp(lib, also_backward=False):
    class Triple(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def vjp(ctx, g):
            return g * 3

    if also_backward:
        Triple.backward = staticmethod(lambda ctx, g: g * 3)
    return Triple


def test_a_vjp_staticmethod_serves_as_backward():
    x, tx = pair(3)
    got = bg.autograd.grad((make_by_vjp(bg).apply(x) ** 2).sum(), x, create_graph=True)[0]
    want = torch.autograd.grad((make_by_vjp(torch).apply(tx) ** 2).sum(), tx, create_graph=True)[0]
    assert_same(got, want)
    assert bg.autograd.gradcheck(make_by_vjp(bg).apply, (x,), check_forward_ad=False)


def test_defining_both_vjp_and_backward_is_torchs_error():
    raises_like_torch(
        lambda lib: make_by_vjp(lib, also_backward=True).apply(lib.ones(2, requires_grad=True)).sum().backward()
    )


def make_broadcast_gradient(lib, extra_shape):
    class Identity(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g.expand(*extra_shape, *g.shape) * 1

    return Identity


def test_a_gradient_with_the_inputs_shape_broadcast_is_summed_back():
    x, tx = pair(3, 4)
    got = bg.autograd.grad(make_broadcast_gradient(bg, (2, 1)).apply(x).sum(), x)
    want = torch.autograd.grad(make_broadcast_gradient(torch, (2, 1)).apply(tx).sum(), tx)
    assert_same(got, want)


def test_a_gradient_that_does_not_broadcast_from_the_input_is_refused_like_torch():
    def grad_of_a_wrong_shape(lib):
        class WrongShape(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                return g.sum(0)

        x = lib.ones(3, 4, requires_grad=True)
        return lib.autograd.grad(WrongShape.apply(x).sum(), x)

    raises_like_torch(grad_of_a_wrong_shape)


def test_save_for_forward_takes_tensors_only():
    raises_like_torch(lambda lib: _save_for_forward(lib, 3.0))
    _save_for_forward(bg, bg.ones(2))


def _save_for_forward(lib, value):
    class Saves(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x, value)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g

    return Saves.apply(lib.ones(2))


def _zeros_with_rule(lib, rule_returns):
    class Zeros(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return lib.zeros(x.shape)

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def vmap(info, in_dims, x):
            return rule_returns(lib.zeros(x.shape[1:]))

    return Zeros


RULE_RETURNS = {
    "a tuple of the output alone": lambda out: (out,),
    "four values": lambda out: (out, out, 0, 0),
    "out_dims of another structure": lambda out: (out, (None,)),
}


@pytest.mark.parametrize("returns", list(RULE_RETURNS))
def test_what_a_vmap_staticmethod_returns_is_checked_like_torch(returns):
    raises_like_torch(lambda lib: lib.func.vmap(_zeros_with_rule(lib, RULE_RETURNS[returns]).apply)(lib.ones(2, 3)))


def make_deep_reentrant(lib, calls):
    """A Function whose backward runs backward() on a new application of itself, one step lower, until below 0:
    reentrant backwards nested as deep as the starting value."""

    class DeepReentrant(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with lib.enable_grad():
                ctx.x = x.detach().requires_grad_() - 1
            return ctx.x.detach()

        @staticmethod
        def backward(ctx, g):
            calls.append((float(ctx.x.detach()), lib.is_grad_enabled()))  # grad mode carried onto a new thread
            if ctx.x < 0:
                return g * 2
            with lib.enable_grad():
                DeepReentrant.apply(ctx.x).sum().backward()
            return g * 2

    return DeepReentrant


def _deep_reentrant_backward(lib, depth):
    calls = []
    v = lib.tensor(float(depth), requires_grad=True)
    make_deep_reentrant(lib, calls).apply(v).sum().backward()
    return calls, v.grad


@pytest.mark.parametrize("depth", [150, pytest.param(2000, marks=pytest.mark.slow)])
def test_reentrant_backward_nested_past_the_recursion_limit_runs_like_torch(depth):
    calls, grad = _deep_reentrant_backward(bg, depth)
    t_calls, t_grad = _deep_reentrant_backward(torch, depth)
    assert calls == t_calls and len(calls) == depth + 1
    assert_same(grad, t_grad)


def test_an_error_deep_in_nested_reentrant_backwards_reaches_the_caller():
    class Failing(bg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise KeyError("deepest")

    def nest(level):
        class Nest(bg.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.x = x.detach()
                return x * 1

            @staticmethod
            def backward(ctx, g):
                with bg.enable_grad():
                    inner = ctx.x.requires_grad_()
                    (nest(level - 1) if level else Failing).apply(inner).sum().backward()
                return g

        return Nest

    x = bg.tensor(1.0, requires_grad=True)
    with pytest.raises(KeyError, match="deepest"):
        nest(100).apply(x).sum().backward()


def _returning_input(m, save, returned=lambda inputs, made: inputs[0], dirty=False, non_differentiable=False):
    class ReturnsInput(m.autograd.Function):
        @staticmethod
        def forward(x):
            return x.mul_(1) if dirty else x

        @staticmethod
        def setup_context(ctx, inputs, output):
            if dirty:
                ctx.mark_dirty(inputs[0])
            if non_differentiable:
                ctx.mark_non_differentiable(output)
            save(ctx, inputs[0], output)

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output

        @staticmethod
        def jvp(ctx, tangent):
            return tangent.view_as(tangent)

    return ReturnsInput


SAVES = {
    "input_for_backward": lambda ctx, x, out: ctx.save_for_backward(x),
    "output_for_backward": lambda ctx, x, out: ctx.save_for_backward(out),
    "input_for_forward": lambda ctx, x, out: ctx.save_for_forward(x),
}


@pytest.mark.parametrize("save", list(SAVES))
@pytest.mark.parametrize(
    "call",
    ["apply", "apply_requires_grad", "apply_integer", "apply_no_grad", "non_differentiable", "grad", "jvp", "dual"],
)
def test_an_input_returned_as_is_and_saved_raises_like_torch(save, call):
    def run(m):
        function = _returning_input(m, SAVES[save], non_differentiable=call == "non_differentiable")
        x, t = m.tensor(2.0), m.tensor(1.0)
        if call == "apply_requires_grad":
            return function.apply(m.tensor(2.0, requires_grad=True).clone())
        if call == "apply_integer":
            return function.apply(m.tensor(2))
        if call == "apply_no_grad":  # nothing recorded: an input that requires grad comes back detached, unchecked
            with m.no_grad():
                function.apply(m.tensor(2.0, requires_grad=True))
            return function.apply(x)
        if call == "grad":
            return m.func.grad(lambda y: function.apply(y.clone()))(x)
        if call == "jvp":
            return m.func.jvp(lambda y: function.apply(y.clone()), (x,), (t,))
        if call == "dual":
            with m.autograd.forward_ad.dual_level():
                return function.apply(m.autograd.forward_ad.make_dual(x, t))
        return function.apply(x)

    raises_like_torch(run)


def test_saving_a_view_of_the_returned_input_or_marking_it_dirty_is_allowed_saving_it_is_not():
    def run(m, save, dirty):
        x = m.tensor([2.0, 3.0], requires_grad=True).clone()
        y = _returning_input(m, save, dirty=dirty).apply(x)
        y.sum().backward()
        return y is x

    view = lambda ctx, x, out: ctx.save_for_backward(x.view_as(x))  # noqa: E731
    assert run(bg, view, False) is run(torch, view, False) is False
    assert run(bg, SAVES["input_for_backward"], True) is run(torch, SAVES["input_for_backward"], True) is True
    raises_like_torch(lambda m: run(m, SAVES["input_for_backward"], False))
