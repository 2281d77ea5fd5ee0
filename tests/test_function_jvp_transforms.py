"""A custom Function's `jvp` staticmethod in the forward-mode transforms, against torch 2.13: func.jvp, jacfwd and
linearize, autograd.functional's forward-mode Jacobian, and gradcheck's check_forward_ad, which checks the jvp while
check_backward_ad checks the backward. Dual tensors are in test_function_jvp.py."""

import itertools

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch

X = [0.5, 1.0, 2.0]
T = [1.0, 0.5, -1.0]


def _tensor(m, values, **kw):
    return m.tensor(values, dtype=m.float64, **kw)


def make_sin(m, scale=10.0, seen=None):
    """sin(x) * y * k for torch.func (setup_context, a generated vmap rule), whose jvp is `scale` times the true
    derivative along x: a tangent taken by differentiating forward instead of calling the jvp shows."""

    class Sin(m.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x, y, k):
            return x.sin() * y * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, y, k = inputs
            ctx.k = k
            ctx.save_for_forward(x, y)
            ctx.save_for_backward(x, y)

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * x.cos() * y * ctx.k, g * x.sin() * ctx.k, None

        @staticmethod
        def jvp(ctx, x_t, y_t, k_t):
            if seen is not None:
                seen.append(k_t)
            x, y = ctx.saved_tensors
            return scale * x_t * x.cos() * y * ctx.k + y_t * x.sin() * ctx.k

    return Sin


def test_func_jvp_and_jacfwd_use_the_jvp():
    def run(m):
        Sin, F = make_sin(m), m.func
        x, y, t = _tensor(m, X), _tensor(m, [2.0, 3, 4]), _tensor(m, T)
        f = lambda a, b: Sin.apply(a, b, 2.0)  # noqa: E731
        return (
            F.jvp(lambda a: f(a, y), (x,), (t,)),  # y is captured: its tangent is zeros
            F.jvp(f, (x, y), (t, t)),
            F.jacfwd(f)(x, y),
            F.jacfwd(f, argnums=(0, 1))(x, y),
            F.linearize(lambda a: f(a, y), x)[1](t),
        )

    assert_same(run(bg), run(torch))


def test_the_jvp_gets_none_for_a_non_tensor_argument_under_func_jvp():
    def run(m):
        seen = []
        m.func.jvp(lambda a: make_sin(m, seen=seen).apply(a, a, 2.0), (_tensor(m, X),), (_tensor(m, T),))
        return seen

    assert run(bg) == run(torch) == [None]


def test_functions_alike_but_for_their_jvp_keep_their_own_tangents():
    """Two Functions whose forwards trace alike, called in turn: each call's tangent is its own jvp's."""

    def run(m):
        x, y, t = _tensor(m, X), _tensor(m, [2.0, 3, 4]), _tensor(m, T)
        results = []
        for scale in (10.0, 1.0, 10.0, 3.0):
            Sin = make_sin(m, scale)
            results.append(m.func.jvp(lambda a: Sin.apply(a, y, 2.0), (x,), (t,))[1])
        return results

    assert_same(run(bg), run(torch))


def test_a_function_without_jvp_is_refused_by_func_jvp():
    def run(m):
        m.func.jvp(make_double_without_jvp(m, generated=True).apply, (_tensor(m, X),), (_tensor(m, T),))

    got, _ = raises_like_torch(run)
    assert isinstance(got, NotImplementedError)


def make_exp(m, jvp_scale=1.0):
    """exp(x) in torch's older style (forward with ctx), with jvp `jvp_scale` times the true derivative."""

    class Exp(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_forward(y)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

        @staticmethod
        def jvp(ctx, t):
            (y,) = ctx.saved_tensors
            return t * y * jvp_scale

    return Exp


def test_autograd_functional_forward_mode_jacobian_uses_the_jvp():
    def run(m):
        x = _tensor(m, X)
        return m.autograd.functional.jacobian(make_exp(m, 5.0).apply, x, vectorize=True, strategy="forward-mode")

    assert_same(run(bg), run(torch))


def test_autograd_functional_forward_over_reverse_hessian_as_torch():
    """The inner gradient by the Functions' backwards, the outer Jacobian by forward mode, where an output a
    backward saved gets its tangent from the jvp."""

    def run(m):
        Exp, Sin = make_exp(m, 5.0), make_sin(m)

        def f(a, b):
            return (Exp.apply(a) * Sin.apply(b, a, 2.0)).sum()

        inputs = (_tensor(m, X), _tensor(m, [0.3, -0.2, 0.1]))
        return m.autograd.functional.hessian(f, inputs, vectorize=True, outer_jacobian_strategy="forward-mode")

    assert_same(run(bg), run(torch))


@pytest.mark.parametrize(
    "use",
    [
        lambda y, c: (y * c).sum(),  # the product also saves the output, as an input of its own
        lambda y, c: y.dot(c),
        lambda y, c: (y * c * 2).sum(),
        lambda y, c: (y * 3 + c).sum(),  # the output is read only by the Function's own backward
    ],
)
def test_forward_over_reverse_reads_a_saved_output_with_its_tangent(use):
    """The backward of a Function that saved its output reads it with the tangent its jvp gave, also when another
    op saved the same output for its own backward."""

    def run(m):
        Exp = make_exp(m, 5.0)
        inputs = (_tensor(m, X), _tensor(m, [0.3, -0.2, 0.1]))
        return m.autograd.functional.hessian(
            lambda a, c: use(Exp.apply(a), c), inputs, vectorize=True, outer_jacobian_strategy="forward-mode"
        )

    assert_same(run(bg), run(torch))


@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradcheck_forward_ad_checks_the_jvp(fast_mode):
    def run(m, scale):
        x = _tensor(m, X, requires_grad=True)
        return m.autograd.gradcheck(
            make_exp(m, scale).apply,
            (x,),
            check_forward_ad=True,
            check_backward_ad=False,
            fast_mode=fast_mode,
            raise_exception=False,
        )

    assert run(bg, 1.0) is run(torch, 1.0) is True
    assert run(bg, 2.0) is run(torch, 2.0) is False


def make_flagged(m):
    """2 * x whose jvp or backward raises when told to, by arguments that are not Tensors."""

    class Flagged(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, jvp_fails, backward_fails):
            ctx.jvp_fails, ctx.backward_fails = jvp_fails, backward_fails
            return x * 2

        @staticmethod
        def vjp(ctx, g):
            if ctx.backward_fails:
                raise RuntimeError("the backward was called")
            return 2 * g, None, None

        @staticmethod
        def jvp(ctx, t, _jvp_fails, _backward_fails):
            if ctx.jvp_fails:
                raise RuntimeError("the jvp was called")
            return 2 * t

    return Flagged


# fast_mode, check_backward_ad, whether the jvp fails, whether the backward fails (where its check does not run:
# a backward check that fails first hides the jvp's, as torch's)
CASES = [case for case in itertools.product([False, True], repeat=4) if not (case[1] and case[3])]


@pytest.mark.parametrize("fast_mode, backward_ad, jvp_fails, backward_fails", CASES)
def test_gradcheck_forward_ad_calls_the_jvp_and_backward_ad_the_backward(
    fast_mode, backward_ad, jvp_fails, backward_fails
):
    def run(m):
        x = _tensor(m, [0.25, 0.75], requires_grad=True)
        return m.autograd.gradcheck(
            make_flagged(m).apply,
            (x, jvp_fails, backward_fails),
            check_forward_ad=True,
            check_backward_ad=backward_ad,
            check_undefined_grad=backward_ad,
            check_batched_grad=backward_ad,
            fast_mode=fast_mode,
        )

    if jvp_fails:
        got, _ = raises_like_torch(run)
        assert str(got) == "the jvp was called"
    else:
        assert run(bg) is run(torch) is True


def make_cube_with_rule(m):
    """x**3 * w with a jvp and a vmap staticmethod that applies the Function again to each row, as public batching
    rules often do; the jvp is scaled by 3 so that a tangent not taken from it shows."""

    class Cube(m.autograd.Function):
        @staticmethod
        def forward(x, w):
            return x**3 * w

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(*inputs)
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g * 3 * x**2 * w, g * x**3

        @staticmethod
        def jvp(ctx, x_dot, w_dot):
            x, w = ctx.saved_tensors
            return 3 * (x_dot * 3 * x**2 * w + x**3 * w_dot)

        @staticmethod
        def vmap(info, in_dims, x, w):
            x = x.movedim(in_dims[0], 0) if in_dims[0] is not None else x.expand(info.batch_size, *x.shape)
            w = w.movedim(in_dims[1], 0) if in_dims[1] is not None else w.expand(info.batch_size, *w.shape)
            return m.stack([Cube.apply(a, b) for a, b in zip(x, w)]), 0

    return Cube


FORWARD_MODE_OVER_A_RULE = {
    "jacfwd": lambda m, f, xs, w: m.func.jacfwd(f, argnums=(0, 1))(xs[0], w),
    "vmap(jacfwd)": lambda m, f, xs, w: m.func.vmap(m.func.jacfwd(f), (0, None))(xs, w),
    "jacfwd(vmap)": lambda m, f, xs, w: m.func.jacfwd(m.func.vmap(f, (0, None)))(xs, w),
    "vmap(jvp)": lambda m, f, xs, w: m.func.vmap(lambda a: m.func.jvp(lambda b: f(b, w), (a,), (a,)))(xs),
    "vmap(hessian)": lambda m, f, xs, w: m.func.vmap(m.func.hessian(lambda a: f(a, w).sum()))(xs),
    "jacfwd(jacrev)": lambda m, f, xs, w: m.func.jacfwd(m.func.jacrev(lambda a: f(a, w).sum()))(xs[1]),
    "linearize": lambda m, f, xs, w: m.func.linearize(lambda a: f(a, w), xs[2])[1](xs[0]),
}


@pytest.mark.parametrize("case", FORWARD_MODE_OVER_A_RULE)
def test_forward_mode_over_a_vmap_rule_that_applies_the_function_again(case):
    """The tangents come from the jvp; batching them does not call the rule (whose own apply would batch them
    again, without end)."""

    def run(m):
        xs = m.tensor([[0.5, 1.0, 2.0], [1.5, -1.0, 0.25], [0.75, 0.5, -2.0]], dtype=m.float64)
        return FORWARD_MODE_OVER_A_RULE[case](m, make_cube_with_rule(m).apply, xs, _tensor(m, [1.0, 2.0, -1.0]))

    assert_same(run(bg), run(torch), rtol=1e-12)


def make_double_without_jvp(m, generated):
    """2 * x with a backward but no jvp, batched by a rule that applies it again or by a generated rule."""

    class Double(m.autograd.Function):
        generate_vmap_rule = generated

        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

    if not generated:
        Double.vmap = staticmethod(lambda info, in_dims, x: (Double.apply(x.movedim(in_dims[0], 0)), 0))
    return Double


@pytest.mark.parametrize("generated", [False, True])
@pytest.mark.parametrize(
    "transform",
    [
        lambda m, f, xs: m.func.jacfwd(f)(xs[0]),
        lambda m, f, xs: m.func.vmap(m.func.jacfwd(f))(xs),
        lambda m, f, xs: m.func.vmap(lambda a: m.func.jvp(f, (a,), (a,)))(xs),
    ],
    ids=["jacfwd", "vmap(jacfwd)", "vmap(jvp)"],
)
def test_a_tangent_reaching_a_function_without_jvp_raises_torchs_error_under_vmap(transform, generated):
    got, _ = raises_like_torch(lambda m: transform(m, make_double_without_jvp(m, generated).apply, m.ones(4, 3)))
    assert type(got) is NotImplementedError
