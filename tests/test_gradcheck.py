"""gradcheck and gradgradcheck: every differentiable op of SPEC §2 passes (with the batched-grad check), wrong
backwards are caught with torch's messages, fast mode, and argument errors like torch's."""

import re
import warnings

import numpy as np
import pytest
import torch
from torch.autograd.gradcheck import GradcheckError as TorchGradcheckError

import batched_grad as bg
from batched_grad.autograd import GradcheckError, gradcheck, gradgradcheck
from oracle import raises_like_torch, rand

LINALG_SHIFT = 3.0  # keeps the composed matrices well conditioned


def shifted(a):
    """`a` (entries in [-1, 1)) plus a multiple of the identity: well conditioned, with a positive determinant."""
    return a + LINALG_SHIFT * bg.eye(a.shape[-1], dtype=a.dtype)


def spd(a):
    """A symmetric positive definite matrix made from any square `a` (for ops that read one triangle)."""
    return shifted(a @ a.mT)


def case(name, fn, *shapes, low=-1.0, high=1.0):
    return pytest.param(fn, shapes, low, high, id=name)


def idx(*values):
    return bg.tensor(list(values))


POSITIVE = dict(low=0.5, high=2.0)
UNIT = dict(low=-0.9, high=0.9)
ELEMENTWISE = [
    *(
        case(n, getattr(bg, n), (2, 3))
        for n in (
            "neg",
            "abs",
            "sign",
            "exp",
            "expm1",
            "square",
            "sin",
            "cos",
            "tan",
            "atan",
            "sinh",
            "cosh",
            "tanh",
            "asinh",
            "sigmoid",
            "erf",
            "erfc",
            "floor",
            "ceil",
            "round",
            "trunc",
            "frac",
        )
    ),
    *(
        case(n, getattr(bg, n), (2, 3), **POSITIVE)
        for n in ("log", "log1p", "log2", "log10", "sqrt", "rsqrt", "reciprocal")
    ),
    *(case(n, getattr(bg, n), (2, 3), **UNIT) for n in ("asin", "acos", "atanh")),
    case("acosh", bg.acosh, (2, 3), low=1.1, high=3.0),
    case("add", lambda x, y: bg.add(x, y, alpha=2), (2, 3), (3,)),
    case("sub", bg.sub, (2, 3), (2, 3)),
    case("mul", bg.mul, (2, 3), (2, 1)),
    case("div", bg.div, (2, 3), (2, 3), **POSITIVE),
    case("true_divide", bg.true_divide, (3,), (3,), **POSITIVE),
    case("floor_divide", bg.floor_divide, (3,), (3,), **POSITIVE),
    case("remainder", bg.remainder, (2, 3), (2, 3), **POSITIVE),
    case("fmod", bg.fmod, (2, 3), (2, 3), **POSITIVE),
    case("pow", bg.pow, (2, 3), (2, 3), **POSITIVE),
    case("pow_scalar", lambda x: x**3, (2, 3)),
    case("atan2", bg.atan2, (2, 3), (2, 3)),
    case("maximum", bg.maximum, (2, 3), (2, 3)),
    case("minimum", bg.minimum, (2, 3), (2, 3)),
    case("hypot", bg.hypot, (2, 3), (2, 3)),
    case("clamp", lambda x: bg.clamp(x, -0.5, 0.5), (2, 3)),
    case("clip", lambda x: bg.clip(x, max=0.2), (2, 3)),
    case("where", lambda x, y: bg.where(x > y, x, y * 2), (2, 3), (2, 3)),
    case("lerp", lambda x, y: bg.lerp(x, y, 0.3), (2, 3), (2, 3)),
]
REDUCTIONS = [
    case("sum", lambda x: bg.sum(x, 1), (2, 3)),
    case("mean", lambda x: bg.mean(x, (0, 1)), (2, 3)),
    case("prod", lambda x: bg.prod(x, 0), (2, 3)),
    case("amax", lambda x: bg.amax(x, -1), (2, 3)),
    case("amin", bg.amin, (2, 3)),
    case("max_dim", lambda x: bg.max(x, 1), (2, 3)),  # (values, indices): an integer output next to a float one
    case("min_dim", lambda x: bg.min(x, 0), (2, 3)),
    case("max", bg.max, (2, 3)),
    case("min", bg.min, (2, 3)),
    case("var", lambda x: bg.var(x, 1), (2, 3)),
    case("std", lambda x: bg.std(x, 0, correction=0), (2, 3)),
    case("norm", bg.norm, (2, 3)),
    case("logsumexp", lambda x: bg.logsumexp(x, 1), (2, 3)),
    case("cumsum", lambda x: bg.cumsum(x, 1), (2, 3)),
    case("cumprod", lambda x: bg.cumprod(x, 0), (2, 3)),
]
LINALG = [
    case("matmul", bg.matmul, (2, 3), (3,)),
    case("mm", bg.mm, (2, 3), (3, 2)),
    case("bmm", bg.bmm, (2, 2, 3), (2, 3, 2)),
    case("mv", bg.mv, (2, 3), (3,)),
    case("dot", bg.dot, (3,), (3,)),
    case("outer", bg.outer, (2,), (3,)),
    case("einsum", lambda x, y: bg.einsum("ij,jk->ik", x, y), (2, 3), (3, 2)),
    case("tensordot", lambda x, y: bg.tensordot(x, y, 1), (2, 3), (3, 2)),
    case("trace", bg.trace, (3, 3)),
    case("diag", bg.diag, (3,)),
    case("diagonal", lambda x: bg.diagonal(x, 1), (3, 3)),
    case("tril", bg.tril, (3, 3)),
    case("triu", lambda x: bg.triu(x, 1), (3, 3)),
    case("linalg.norm", bg.linalg.norm, (2, 3)),
    case("linalg.solve", lambda a, b: bg.linalg.solve(shifted(a), b), (2, 2), (2, 3)),
    case("linalg.inv", lambda a: bg.linalg.inv(shifted(a)), (2, 2)),
    case("linalg.det", bg.linalg.det, (3, 3)),
    case("linalg.slogdet", lambda a: bg.linalg.slogdet(shifted(a)), (2, 2)),
    case("linalg.cholesky", lambda a: bg.linalg.cholesky(spd(a)), (2, 2)),
    # eigenvectors and singular vectors are defined up to sign: the values are the gauge-invariant outputs
    case("linalg.eigh", lambda a: bg.linalg.eigh(spd(a)).eigenvalues, (2, 2)),
    case("linalg.svd", lambda a: bg.linalg.svd(a).S, (2, 2)),
    case("linalg.qr", lambda a: tuple(bg.linalg.qr(a)), (2, 2)),
]
SHAPE = [
    case("reshape", lambda x: x.reshape(3, 2), (2, 3)),
    case("view", lambda x: x.view(6), (2, 3)),
    case("view_as", lambda x, y: x.view_as(y), (2, 3), (3, 2)),
    case("flatten", bg.flatten, (2, 1, 3)),
    case("unflatten", lambda x: bg.unflatten(x, 0, (2, 3)), (6,)),
    case("squeeze", bg.squeeze, (2, 1, 3)),
    case("unsqueeze", lambda x: bg.unsqueeze(x, 1), (2, 3)),
    case("expand", lambda x: x.expand(2, 3), (3,)),
    case("expand_as", lambda x, y: x.expand_as(y), (3,), (2, 3)),
    case("broadcast_to", lambda x: bg.broadcast_to(x, (2, 3)), (1, 3)),
    case("permute", lambda x: bg.permute(x, (2, 0, 1)), (2, 1, 3)),
    case("transpose", lambda x: bg.transpose(x, 0, 1), (2, 3)),
    case("movedim", lambda x: bg.movedim(x, 0, -1), (2, 1, 3)),
    case("t", bg.t, (2, 3)),
    case("cat", lambda x, y: bg.cat([x, y], 1), (2, 3), (2, 1)),
    case("concat", lambda x, y: bg.concat([x, y]), (2, 3), (1, 3)),
    case("stack", lambda x, y: bg.stack([x, y], 1), (3,), (3,)),
    case("hstack", lambda x, y: bg.hstack([x, y]), (3,), (2,)),
    case("vstack", lambda x, y: bg.vstack([x, y]), (3,), (3,)),
    case("split", lambda x: bg.split(x, 2, 1), (2, 3)),  # several outputs: each one's grad left undefined in turn
    case("chunk", lambda x: bg.chunk(x, 2), (3, 2)),
    case("unbind", lambda x: bg.unbind(x, 1), (2, 3)),
    case("flip", lambda x: bg.flip(x, [0, 1]), (2, 3)),
    case("roll", lambda x: bg.roll(x, 1, 1), (2, 3)),
    case("repeat", lambda x: x.repeat(2, 1), (1, 3)),
    case("tile", lambda x: bg.tile(x, (2,)), (3,)),
    case("narrow", lambda x: bg.narrow(x, 1, 1, 2), (2, 3)),
    case("select", lambda x: bg.select(x, 1, 2), (2, 3)),
]
INDEXING = [
    case("getitem_basic", lambda x: x[1, None, ..., 1:], (2, 3)),
    case("getitem_int_tensor", lambda x: x[idx(1, 0, 1)], (2, 3)),
    case("getitem_mask", lambda x, y: x[y > 0], (2, 3), (2, 3)),
    case("getitem_pairs", lambda x: x[[0, 1], [2, 2]], (2, 3)),
    case("setitem", lambda x, y: _setitem(x, y), (2, 3), (2,)),
    case("index_select", lambda x: bg.index_select(x, 1, idx(2, 0)), (2, 3)),
    case("gather", lambda x: bg.gather(x, 1, bg.tensor([[0, 0], [2, 1]])), (2, 3)),
    case("scatter", lambda x, y: bg.scatter(x, 0, bg.tensor([[1, 0, 1]]), y), (2, 3), (1, 3)),
    case("scatter_add", lambda x, y: bg.scatter_add(x, 1, bg.tensor([[0, 0], [1, 2]]), y), (2, 3), (2, 2)),
    case("take_along_dim", lambda x: bg.take_along_dim(x, bg.tensor([[0], [2]]), 1), (2, 3)),
    case("masked_fill", lambda x, y: bg.masked_fill(x, y > 0, 0.5), (2, 3), (2, 3)),
    case("masked_select", lambda x, y: bg.masked_select(x, y < 0), (2, 3), (2, 3)),
    case("sort", lambda x: bg.sort(x, 1), (2, 3)),
    case("topk", lambda x: bg.topk(x, 2, 1), (2, 3)),
]


def _setitem(x, y):
    z = x * 1
    z[0, 1:] = y
    z[idx(1)] = 0.0
    return z


def _inputs(shapes, low, high):
    return tuple(rand(*s, low=low, high=high, seed=k) for k, s in enumerate(shapes))


@pytest.mark.slow
@pytest.mark.parametrize("fn, shapes, low, high", ELEMENTWISE + REDUCTIONS + LINALG + SHAPE + INDEXING)
def test_gradcheck_every_op(fn, shapes, low, high):
    assert gradcheck(fn, _inputs(shapes, low, high), check_batched_grad=True)


ALL_OPS = {p.id: p for p in ELEMENTWISE + REDUCTIONS + LINALG + SHAPE + INDEXING}
GRADGRAD = [  # second derivatives, on inputs as small as each op allows
    case("matmul", bg.matmul, (2, 2), (2,)),
    case("tanh", bg.tanh, (3,)),
    case("exp", bg.exp, (3,)),
    case("sqrt", bg.sqrt, (3,), **POSITIVE),
    case("pow", bg.pow, (2,), (2,), **POSITIVE),
    case("div", bg.div, (2,), (2,), **POSITIVE),
    case("atan2", bg.atan2, (2,), (2,)),
    case("prod", bg.prod, (3,)),
    case("std", bg.std, (3,)),
    case("logsumexp", lambda x: bg.logsumexp(x, 0), (3,)),
    case("linalg.solve", lambda a, b: bg.linalg.solve(shifted(a), b), (2, 2), (2,)),
    case("linalg.det", bg.linalg.det, (2, 2)),
    case("linalg.inv", lambda a: bg.linalg.inv(shifted(a)), (2, 2)),
    case("getitem_int_tensor", lambda x: x[idx(1, 0, 1)], (2,)),
    case("gather", lambda x: bg.gather(x, 0, idx(1, 1, 0)), (2,)),
]


@pytest.mark.parametrize("fn, shapes, low, high", GRADGRAD)
def test_gradgradcheck_representative_ops(fn, shapes, low, high):
    assert gradgradcheck(fn, _inputs(shapes, low, high))


def test_gradgradcheck_batched():
    assert gradgradcheck(bg.tanh, _inputs([(3,)], -1, 1), check_batched_grad=True)


def make_functions(lib):
    """Functions written once against a module (torch or batched_grad), with deliberate mistakes."""

    class WrongBackward(lib.autograd.Function):  # d(x^2)/dx is 2x, not 3x
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x

    class DetachedBackward(lib.autograd.Function):  # right first derivative; the detach loses the second
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x.detach() ** 2

    class IgnoresGradOutput(lib.autograd.Function):  # right for grad_output 1 only
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return lib.ones_like(x)

    class NoneUnsafe(lib.autograd.Function):  # crashes when one output's grad is undefined
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

    class Noisy(lib.autograd.Function):  # a backward that is not deterministic
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * (2 + lib.tensor(np.random.default_rng().uniform(0, 1e-9, tuple(g.shape))))

    class NumpySquare(lib.autograd.Function):  # a backward JAX cannot vectorize: runs per row
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return lib.tensor(2 * np.asarray(x.detach().numpy()) * np.asarray(g.detach().numpy()))

    class ComplexWrong(lib.autograd.Function):  # the gradient of z^2 is 2 conj(z) g, not conj(z) g
        @staticmethod
        def forward(ctx, z):
            ctx.save_for_backward(z)
            return z * z

        @staticmethod
        def backward(ctx, g):
            (z,) = ctx.saved_tensors
            return g * z.conj() if hasattr(z, "conj") else g * lib.tensor(np.conj(z.detach().numpy()))

    return {
        c.__name__: c
        for c in (WrongBackward, DetachedBackward, IgnoresGradOutput, NoneUnsafe, Noisy, NumpySquare, ComplexWrong)
    }


FUNCTIONS = {lib: make_functions(lib) for lib in (torch, bg)}


def _leaf(lib, shape=(2, 3), dtype="float64", seed=0):
    a = np.random.default_rng(seed).uniform(0.5, 1.5, shape).astype(dtype)
    return lib.tensor(a, requires_grad=True)


def _check_fails_like_torch(check, name, first_line, **kw):
    """check(lib) raises GradcheckError for both libraries with the same first line; False without raising."""
    got, want = raises_like_torch(lambda lib: check(lib, FUNCTIONS[lib][name].apply, raise_exception=True, **kw))
    assert isinstance(got, GradcheckError) and isinstance(want, TorchGradcheckError)
    assert str(got).split("\n")[0] == first_line
    assert check(bg, FUNCTIONS[bg][name].apply, raise_exception=False, **kw) is False
    return got, want


def _gradcheck(lib, fn, **kw):
    return lib.autograd.gradcheck(fn, (_leaf(lib),), **kw)


def _gradgradcheck(lib, fn, **kw):
    return lib.autograd.gradgradcheck(fn, (_leaf(lib),), (_leaf(lib, seed=1),), **kw)


def _jacobians(message):
    """The numbers printed after "numerical:" and after "analytical:" in a mismatch message."""
    numerical, analytical = message.split("numerical:")[1].split("\n\n")[0].split("analytical:")
    numbers = [[float(v) for v in re.findall(r"-?\d+\.\d+", part)] for part in (numerical, analytical)]
    assert numbers[0] and numbers[1], message
    return numbers


@pytest.mark.parametrize("fast_mode", [False, True])
def test_wrong_backward_reports_numerical_and_analytical(fast_mode):
    got, want = _check_fails_like_torch(
        _gradcheck, "WrongBackward", "Jacobian mismatch for output 0 with respect to input 0,", fast_mode=fast_mode
    )
    assert "\nnumerical:tensor(" in str(got) and "\nanalytical:tensor(" in str(got)
    if fast_mode:  # the random projections differ from torch's; the slow-mode Jacobians that follow do not
        got, want = (
            str(e).split("in slow mode:")[1].replace("Numerical:", "numerical:").replace("Analytical:", "analytical:")
            for e in (got, want)
        )
    np.testing.assert_allclose(_jacobians(str(got)), _jacobians(str(want)), atol=1e-4)


@pytest.mark.parametrize("fast_mode", [False, True])
def test_wrong_double_backward_fails_gradgradcheck(fast_mode):
    fn = FUNCTIONS[bg]["DetachedBackward"].apply
    assert _gradcheck(bg, fn, fast_mode=fast_mode)  # the first derivative is right
    _check_fails_like_torch(
        _gradgradcheck,
        "DetachedBackward",
        "Jacobian mismatch for output 0 with respect to input 0,",
        fast_mode=fast_mode,
    )


@pytest.mark.parametrize(
    "name, first_line, kw",
    [
        ("IgnoresGradOutput", "backward not multiplied by grad_output", {}),
        (
            "Noisy",
            "Backward is not reentrant, i.e., running backward with same input and grad_output multiple times "
            "gives different values, although analytical gradient matches numerical gradient.The tolerance for "
            "nondeterminism was 0.0.",
            {},
        ),
    ],
)
def test_backward_checks_like_torch(name, first_line, kw):
    _check_fails_like_torch(_gradcheck, name, first_line, **kw)


def test_nondet_tol_accepts_a_slightly_noisy_backward():
    assert _gradcheck(bg, FUNCTIONS[bg]["Noisy"].apply, nondet_tol=1e-6)


def test_backward_failing_on_an_undefined_grad_fails_like_torch():
    raises_like_torch(lambda lib: _gradcheck(lib, FUNCTIONS[lib]["NoneUnsafe"].apply))


class OneUndefinedWrong(bg.autograd.Function):  # right unless exactly one of its three grads is undefined
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 2, x * 2

    @staticmethod
    def backward(ctx, *grads):
        defined = [g for g in grads if g is not None]
        return sum(defined) * 2 + (1.0 if len(defined) == 2 else 0.0) if defined else None


def test_undefined_output_grads_must_give_zero_gradients():
    with pytest.raises(
        GradcheckError,
        match="Expected all input grads to be undefined or zero when all output grads are undefined or zero. "
        'Please look at "Notes about undefined output gradients"',
    ):
        gradcheck(OneUndefinedWrong.apply, (_leaf(bg),))
    assert gradcheck(OneUndefinedWrong.apply, (_leaf(bg),), raise_exception=False) is False
    assert gradcheck(OneUndefinedWrong.apply, (_leaf(bg),), check_undefined_grad=False)


def test_numpy_backward_passes_batched_check_through_the_per_row_fallback():
    import vmap

    with vmap.fallback_warnings(), pytest.warns(vmap.FallbackWarning, match="NumpySquareBackward"):
        assert _gradcheck(bg, FUNCTIONS[bg]["NumpySquare"].apply, check_batched_grad=True)


def test_backward_that_differs_when_vectorized_fails_batched_check():
    import jax

    class TracedDiffers(bg.autograd.Function):  # right per row, wrong under jax.vmap
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * (3 if isinstance(g.jax(), jax.core.Tracer) else 2)

    assert gradcheck(TracedDiffers.apply, (_leaf(bg),))
    with pytest.raises(
        GradcheckError,
        match="For output 0 and input 0:\n\ngradcheck or gradgradcheck failed while "
        "testing batched gradient computation",
    ) as e:
        gradcheck(TracedDiffers.apply, (_leaf(bg),), check_batched_grad=True)
    assert "\n\nGot:\ntensor(" in str(e.value) and "\n\nExpected:\ntensor(" in str(e.value)


def test_complex_inputs_and_outputs():
    z = bg.tensor([1.0 + 2j, 0.5 - 1j], dtype=bg.complex128, requires_grad=True)
    x = _leaf(bg, (2,))
    assert gradcheck(lambda a: bg.exp(a) * a, (z,))
    assert gradcheck(lambda a: (a * a).abs(), (z,), fast_mode=True)
    assert gradcheck(lambda a: a.to(bg.complex128) * (1 + 2j), (x,), fast_mode=True)
    got, want = raises_like_torch(
        lambda lib: lib.autograd.gradcheck(
            FUNCTIONS[lib]["ComplexWrong"].apply,
            (lib.tensor([1.0 + 2j, 0.5 - 1j], dtype=lib.complex128, requires_grad=True),),
        )
    )
    assert str(got).startswith("While considering the imaginary part of complex outputs only, Jacobian mismatch")


def test_fast_mode_passes_correct_ops():
    for name in ("tanh", "matmul", "linalg.det", "max_dim", "split"):
        fn, shapes, low, high = ALL_OPS[name].values
        assert gradcheck(fn, _inputs(shapes, low, high), fast_mode=True)
        assert gradgradcheck(fn, _inputs(shapes, low, high), fast_mode=True)


@pytest.mark.parametrize("fast_mode", [False, True])
def test_outputs_without_gradient(fast_mode):
    x = _leaf(bg)
    assert gradcheck(lambda a: bg.argmax(a, 1), (x,), fast_mode=fast_mode)  # no float output: nothing to compare
    raises_like_torch(lambda lib: lib.autograd.gradcheck(lambda a: a.detach() * 2, (_leaf(lib),), fast_mode=fast_mode))


@pytest.mark.parametrize(
    "inputs",
    [
        lambda lib: (1.0, 2.0),
        lambda lib: (lib.ones(3, dtype=lib.float64),),
        lambda lib: lib.ones(3, dtype=lib.float64),
        lambda lib: [lib.arange(3), 2],
    ],
    ids=["numbers", "no-requires-grad", "single-tensor", "list"],
)
def test_no_input_requiring_grad_like_torch(inputs):
    got, _ = raises_like_torch(lambda lib: lib.autograd.gradcheck(lambda *a: a[0], inputs(lib)))
    assert "Got inputs of types" in str(got)
    with pytest.raises(ValueError, match=re.escape(str(got))):  # checked before func runs (torch calls it first)
        gradgradcheck(lambda *a: a[0], inputs(bg))


def test_argument_errors():
    x = _leaf(bg)
    with pytest.raises(TypeError, match="func must be callable, but got int"):
        gradcheck(3, (x,))
    with pytest.raises(TypeError, match="func must return a Tensor or a tuple of Tensors, but output 1 is a float"):
        gradcheck(lambda a: (a * 2, 1.0), (x,))


def test_non_double_inputs_warn_like_torch():
    with pytest.warns(
        UserWarning, match="Input #0 requires gradient and is not a double precision floating point"
    ) as got:
        gradcheck(lambda a: a * 2, (_leaf(bg, dtype="float32"),), atol=1e-2, rtol=1e-2, eps=1e-3)
    with warnings.catch_warnings(record=True) as want:
        warnings.simplefilter("always")
        torch.autograd.gradcheck(lambda a: a * 2, (_leaf(torch, dtype="float32"),), atol=1e-2, rtol=1e-2, eps=1e-3)
    assert str(got[0].message) == str(want[0].message)
    assert got[0].filename == __file__  # points at the caller


@pytest.mark.parametrize("fast_mode", [False, True])
def test_an_input_with_overlapping_elements_is_refused_like_torch(fast_mode):
    def check(lib, make):
        x = make(lib.ones(1, 3, dtype=lib.float64, requires_grad=True))
        return lib.autograd.gradcheck(lambda a: a * 2, (x,), raise_exception=False, fast_mode=fast_mode)

    raises_like_torch(lambda lib: check(lib, lambda x: x.expand(2, 3)))  # even with raise_exception=False
    assert check(bg, lambda x: x.expand(1, 3)) is check(torch, lambda x: x.expand(1, 3)) is True  # size 1: no overlap
