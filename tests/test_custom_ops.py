"""torch.library custom operators and torch.ops against torch 2.13's: each operator is defined once, by a function
of the library module, for torch and for batched_grad; every value, gradient, version count and error is compared."""

import types
import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

MODULES = {"torch": torch, "bg": bg}
X = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
Y = np.cos(np.arange(12.0)).reshape(4, 3)


def define(lib):
    """The test operators of namespace "cotest", written against `lib` (torch or batched_grad)."""
    Tensor = lib.Tensor
    ops = types.SimpleNamespace()

    @lib.library.custom_op("cotest::numpy_sin", mutates_args=(), device_types="cpu")
    def numpy_sin(x: Tensor) -> Tensor:
        return lib.from_numpy(np.sin(x.numpy()))

    @numpy_sin.register_fake
    def _(x):
        return lib.empty_like(x)

    def sin_setup(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    def sin_backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos()

    numpy_sin.register_autograd(sin_backward, setup_context=sin_setup)
    ops.numpy_sin = numpy_sin

    @lib.library.custom_op("cotest::no_formula", mutates_args=())
    def no_formula(x: Tensor) -> Tensor:
        return lib.from_numpy(np.exp(x.numpy()))

    ops.no_formula = no_formula

    @lib.library.custom_op("cotest::scaled_mul", mutates_args=())
    def scaled_mul(x: Tensor, y: Tensor, scale: float) -> Tensor:
        return lib.from_numpy(x.numpy() * y.numpy() * scale)

    def mul_setup(ctx, inputs, output):
        x, y, scale = inputs
        ctx.scale = scale
        ctx.needs = ctx.needs_input_grad
        ctx.save_for_backward(x, y)

    def mul_backward(ctx, grad):
        x, y = ctx.saved_tensors
        gx = grad * y * ctx.scale if ctx.needs_input_grad[0] else None
        gy = grad * x * ctx.scale if ctx.needs_input_grad[1] else None
        return gx, gy, None

    scaled_mul.register_autograd(mul_backward, setup_context=mul_setup)
    ops.scaled_mul = scaled_mul

    @lib.library.custom_op("cotest::sin_cos", mutates_args=())
    def sin_cos(x: Tensor) -> tuple[Tensor, Tensor]:
        return lib.from_numpy(np.sin(x.numpy())), lib.from_numpy(np.cos(x.numpy()))

    def sin_cos_setup(ctx, inputs, output):
        ctx.save_for_backward(*output)

    def sin_cos_backward(ctx, gs, gc):
        s, c = ctx.saved_tensors
        return gs * c - gc * s

    sin_cos.register_autograd(sin_cos_backward, setup_context=sin_cos_setup)
    ops.sin_cos = sin_cos

    @lib.library.custom_op("cotest::weighted_sum", mutates_args=())
    def weighted_sum(tensors: list[Tensor], weights: list[float]) -> Tensor:
        return lib.from_numpy(sum(t.numpy() * w for t, w in zip(tensors, weights)))

    def ws_setup(ctx, inputs, output):
        ctx.weights = inputs[1]
        ctx.count = len(inputs[0])

    def ws_backward(ctx, grad):
        return [grad * w for w in ctx.weights], None

    weighted_sum.register_autograd(ws_backward, setup_context=ws_setup)
    ops.weighted_sum = weighted_sum

    @lib.library.custom_op("cotest::power", mutates_args=())
    def power(x: Tensor, *, exponent: float = 2.0) -> Tensor:
        return lib.from_numpy(x.numpy() ** exponent)

    def power_setup(ctx, inputs, keyword_only_inputs, output):
        ctx.exponent = keyword_only_inputs["exponent"]
        ctx.save_for_backward(inputs[0])

    def power_backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.exponent * x ** (ctx.exponent - 1)

    power.register_autograd(power_backward, setup_context=power_setup)
    ops.power = power

    @lib.library.custom_op("cotest::add_into", mutates_args={"out"}, device_types="cpu")
    def add_into(x: Tensor, out: Tensor) -> None:
        np.add(out.numpy(), x.numpy(), out=out.numpy())

    ops.add_into = add_into

    @lib.library.custom_op("cotest::returns_input", mutates_args=())
    def returns_input(x: Tensor) -> Tensor:
        return x

    ops.returns_input = returns_input

    @lib.library.custom_op("cotest::writes_undeclared", mutates_args=())
    def writes_undeclared(x: Tensor) -> Tensor:
        x.numpy()[...] = 0.0
        return lib.ones(3)

    ops.writes_undeclared = writes_undeclared

    @lib.library.custom_op("cotest::wrong_fake", mutates_args=())
    def wrong_fake(x: Tensor) -> Tensor:
        return lib.from_numpy(x.numpy().sum(0))

    wrong_fake.register_fake(lambda x: x.new_empty(x.shape))
    ops.wrong_fake = wrong_fake

    @lib.library.custom_op("cotest::cuda_only", mutates_args=(), device_types="cuda")
    def cuda_only(x: Tensor) -> Tensor:
        return x.clone()

    ops.cuda_only = cuda_only

    @lib.library.custom_op("cotest::too_many_grads", mutates_args=())
    def too_many_grads(x: Tensor, scale: float) -> Tensor:
        return lib.from_numpy(x.numpy() * scale)

    too_many_grads.register_autograd(lambda ctx, g: (g, None, g))
    ops.too_many_grads = too_many_grads

    @lib.library.custom_op("cotest::grad_for_scale", mutates_args=())
    def grad_for_scale(x: Tensor, scale: float) -> Tensor:
        return lib.from_numpy(x.numpy() * scale)

    grad_for_scale.register_autograd(lambda ctx, g: (g, g))
    ops.grad_for_scale = grad_for_scale
    return ops


OPS = {name: define(module) for name, module in MODULES.items()}


def on_both(run):
    """run(lib, ops) for torch and for batched_grad: (torch's result, batched_grad's)."""
    return run(torch, OPS["torch"]), run(bg, OPS["bg"])


def compare(run):
    """run(lib, ops)'s values, gradients and Nones compared between torch and batched_grad."""
    expected, actual = on_both(run)
    assert_same(actual, expected)


def error_of(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            call()
        except Exception as e:  # noqa: BLE001
            return type(e).__name__, str(e)
    raise AssertionError("expected an error")


def errors_on_both(run, prefix_until=None):
    """The error run(lib, ops) raises, compared between torch and batched_grad (up to `prefix_until`)."""
    expected, actual = (error_of(lambda lib=lib, ops=ops: run(lib, ops)) for lib, ops in PAIRS)
    if prefix_until is not None:
        expected, actual = ((kind, message.split(prefix_until)[0]) for kind, message in (expected, actual))
    assert actual == expected
    return actual


PAIRS = [(torch, OPS["torch"]), (bg, OPS["bg"])]


def leaf(lib, array):
    return lib.tensor(array).requires_grad_()


def test_forward_values_and_no_graph_without_grad():
    def run(lib, ops):
        y = ops.numpy_sin(lib.tensor(X))
        return y, y.requires_grad, y.grad_fn is None

    expected, actual = on_both(run)
    assert_same(actual[0], expected[0])
    assert actual[1:] == expected[1:] == (False, True)


def test_registered_backward_gradients_and_node_name():
    def run(lib, ops):
        x = leaf(lib, X)
        y = ops.numpy_sin(x)
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), x)
        return y, g, gg, type(y.grad_fn).__name__

    expected, actual = on_both(run)
    assert_same(actual[:3], expected[:3])
    assert actual[3] == expected[3] == "GeneratedBackwardFor_cotest_numpy_sin_defaultBackward"


def test_backward_without_formula_raises_torchs_error():
    def run(lib, ops):
        x = leaf(lib, X)
        y = ops.no_formula(x)
        assert y.requires_grad
        y.sum().backward()

    errors_on_both(run)


def test_non_tensor_inputs_get_none_and_needs_input_grad():
    def run(lib, ops):
        x, y = leaf(lib, X), lib.tensor(Y)
        out = ops.scaled_mul(x, y, 3.0)
        out.backward(lib.ones_like(out))
        return out, x.grad, y.grad

    compare(run)


def test_multiple_outputs():
    def run(lib, ops):
        x = leaf(lib, X)
        s, c = ops.sin_cos(x)
        (s * 2 + c).sum().backward()
        return s, c, x.grad

    compare(run)


def test_tensor_list_inputs():
    def run(lib, ops):
        a, b = leaf(lib, X), leaf(lib, Y)
        out = ops.weighted_sum([a, b], [0.3, 0.7])
        out.sum().backward()
        return out, a.grad, b.grad

    compare(run)


def test_keyword_only_inputs_reach_setup_context():
    def run(lib, ops):
        x = leaf(lib, X)
        out = ops.power(x, exponent=3.0)
        out.sum().backward()
        default = ops.power(lib.tensor(X))
        return out, x.grad, default

    compare(run)


def test_mutable_op_writes_are_seen_and_bump_the_version():
    def run(lib, ops):
        out = lib.zeros(4, 3, dtype=lib.float64)
        before = out._version
        result = ops.add_into(lib.tensor(X), out)
        return result, out, out._version - before

    expected, actual = on_both(run)
    assert actual[0] is None and expected[0] is None
    assert_same(actual[1], expected[1])
    assert actual[2] == expected[2] == 1


def test_mutable_op_refuses_an_autograd_formula():
    errors_on_both(lambda lib, ops: ops.add_into.register_autograd(lambda ctx, g: g))


def test_output_aliasing_an_input_is_refused():
    # torch names the module of its implementation in the message; the rest is compared
    errors_on_both(lambda lib, ops: ops.returns_input(lib.tensor(X)), prefix_until=" (with implementation")
    expected, actual = (error_of(lambda ops=ops, lib=lib: ops.returns_input(lib.tensor(X)))[1] for lib, ops in PAIRS)
    assert actual.split("): ", 1)[1] == expected.split("): ", 1)[1]


def test_wrong_number_of_gradients_is_torchs_error():
    errors_on_both(lambda lib, ops: ops.too_many_grads(leaf(lib, X), 2.0).sum().backward())


def test_gradient_for_a_non_tensor_input_is_torchs_error():
    errors_on_both(lambda lib, ops: ops.grad_for_scale(leaf(lib, X), 2.0).sum().backward())


def test_vmap_without_a_rule_runs_the_rows():
    def run(lib, ops):
        s, c = lib.vmap(ops.sin_cos)(lib.tensor(X))
        return lib.vmap(ops.scaled_mul, in_dims=(0, None, None))(lib.tensor(X), lib.tensor(Y[0]), 2.0), s, c

    compare(run)


def test_vmap_then_backward_and_batched_grads():
    def run(lib, ops):
        x = leaf(lib, X)
        (g,) = lib.autograd.grad(lib.vmap(ops.numpy_sin)(x).sum(), x)
        y = ops.numpy_sin(x)
        rows = lib.eye(12, dtype=lib.float64).reshape(12, 4, 3)
        (jac,) = lib.autograd.grad(y, x, rows, is_grads_batched=True)
        return g, jac

    compare(run)


def test_registered_vmap_rule_is_called_with_torchs_arguments():
    def run(lib, ops):
        calls = []

        @lib.library.custom_op("cotest::vmapped", mutates_args=())
        def vmapped(x: lib.Tensor, n: int) -> lib.Tensor:
            return lib.from_numpy(x.numpy() * n)

        @vmapped.register_vmap
        def rule(info, in_dims, x, n):
            calls.append((info.batch_size, info.randomness, in_dims, n))
            return vmapped(x, n + 1), in_dims[0]

        out = lib.vmap(vmapped, in_dims=(1, None))(lib.tensor(X), 2)
        nested = lib.vmap(lib.vmap(vmapped, in_dims=(0, None)), in_dims=(0, None))(lib.tensor(X), 1)
        return out, nested, calls

    expected, actual = on_both(run)
    assert_same(actual[:2], expected[:2])
    assert actual[2] == expected[2]


def test_grad_transforms_refuse_the_operator_as_torch():
    errors_on_both(lambda lib, ops: lib.func.grad(lambda t: ops.numpy_sin(t).sum())(lib.tensor(X)))
    errors_on_both(lambda lib, ops: lib.func.jacrev(ops.numpy_sin)(lib.tensor(X[0])))


def test_jvp_gives_zero_tangents_as_torch():
    expected, actual = on_both(
        lambda lib, ops: lib.func.jvp(ops.numpy_sin, (lib.tensor(X),), (lib.ones(4, 3, dtype=lib.float64),))
    )
    assert_same(actual, expected)


def test_missing_kernel_for_the_device():
    errors_on_both(lambda lib, ops: ops.cuda_only(lib.tensor(X)), prefix_until=" This could be")


@pytest.mark.parametrize(
    "call",
    [
        lambda lib, ops: ops.numpy_sin(),
        lambda lib, ops: ops.numpy_sin(lib.tensor(X), lib.tensor(X)),
        lambda lib, ops: ops.numpy_sin(3.0),
        lambda lib, ops: ops.power(lib.tensor(X), 2.0),
        lambda lib, ops: ops.power(lib.tensor(X), bad=2.0),
        lambda lib, ops: ops.numpy_sin(lib.tensor(X), x=lib.tensor(X)),
        lambda lib, ops: ops.scaled_mul(lib.tensor(X), x=lib.tensor(X), scale=2.0),
    ],
    ids=[
        "missing",
        "too-many",
        "not-a-tensor",
        "keyword-only-given-positionally",
        "unknown-keyword",
        "given-twice",
        "given-twice-and-missing",
    ],
)
def test_bad_calls_raise_torchs_errors(call):
    errors_on_both(call)


def _annotated(lib, case):
    """A function whose type hints or mutates_args infer_schema refuses, by `case`."""
    Tensor = lib.Tensor
    if case == "no-annotation":
        return (lambda x: x), ()

    def unsupported(x: Tensor, y: dict) -> Tensor: ...

    def no_return(x: Tensor): ...

    def varargs(x: Tensor, *args) -> Tensor: ...

    def bad_return(x: Tensor) -> dict: ...

    def plain(x: Tensor, n: int) -> Tensor: ...

    def bad_default(x: Tensor, n: list[int] = (1,)) -> Tensor: ...

    return {
        "unsupported": (unsupported, ()),
        "no-return": (no_return, ()),
        "varargs": (varargs, ()),
        "bad-return": (bad_return, ()),
        "unknown-mutated": (plain, ("y",)),
        "mutated-int": (plain, ("n",)),
        "mutates-string": (plain, "everything"),
        "bad-default": (bad_default, ()),
    }[case]


@pytest.mark.parametrize(
    "case",
    [
        "no-annotation",
        "unsupported",
        "no-return",
        "varargs",
        "bad-return",
        "unknown-mutated",
        "mutated-int",
        "mutates-string",
        "bad-default",
    ],
)
def test_schema_inference_errors(case):
    def run(lib, ops):
        fn, mutates = _annotated(lib, case)
        lib.library.custom_op(f"cotest::bad_{case.replace('-', '_')}", fn, mutates_args=mutates)

    # the function's signature (with each library's Tensor type) and the list of valid types end the messages
    errors_on_both(run, prefix_until=" Got func" if case not in ("unsupported", "bad-return") else " The valid types")


def test_inferred_schemas():
    def run(lib, ops):
        Tensor = lib.Tensor

        def f(
            x: Tensor, n: int, s: float = 2.0, *, flag: bool = False, o: Tensor | None = None
        ) -> tuple[Tensor, Tensor]: ...

        def g(
            xs: list[Tensor], d: lib.dtype = lib.float32, dev: lib.device = None, w: list[float] | None = None
        ) -> None: ...

        def h(x: Tensor, name: str = "a", v: int | float | bool = 1) -> list[Tensor]: ...

        return [
            lib.library.infer_schema(f, mutates_args={"x"}),
            lib.library.infer_schema(g, mutates_args="unknown"),
            lib.library.infer_schema(h, mutates_args=(), op_name="h"),
            str(ops.add_into._opoverload._schema),
            str(lib.ops.cotest.power.default._schema),
        ]

    expected, actual = on_both(run)
    assert actual == expected


def test_explicit_schema_must_agree_with_mutates_args():
    def run(lib, ops):
        def f(x, y):
            return None

        lib.library.custom_op("cotest::explicit", f, mutates_args=(), schema="(Tensor(a0!) x, Tensor y) -> ()")

    errors_on_both(run)


def test_ops_namespace_packets_and_overloads():
    def run(lib, ops):
        packet = lib.ops.cotest.numpy_sin
        x = lib.tensor(X)
        return (
            str(packet),
            repr(packet.default),
            packet.overloads(),
            packet.default.__name__,
            packet.default.name(),
            packet(x),
            packet.default(x),
            lib.ops.aten.add.Tensor(x, x),
            lib.ops.aten.add.Scalar(x, 2.0),
            lib.ops.aten.sum.dim_IntList(x, [0]),
            lib.ops.aten.sin.default(x),
            lib.ops.aten.mm(x, x.t()),
            sorted(lib.ops.aten.sum.overloads()),
        )

    expected, actual = on_both(run)
    assert actual[:5] == expected[:5]
    assert_same(actual[5:12], expected[5:12])
    assert actual[12] == expected[12]


@pytest.mark.parametrize(
    "get",
    [
        lambda lib: lib.ops.cotest.nope,
        lambda lib: lib.ops.nonamespace.nope,
        lambda lib: lib.ops.cotest.numpy_sin.Tensor,
        lambda lib: lib.ops.aten.not_an_op,
        lambda lib: lib.ops.aten.sin.Tensor,
    ],
)
def test_ops_attribute_errors(get):
    errors_on_both(lambda lib, ops: get(lib))


CHECKS = ("test_schema", "test_autograd_registration", "test_faketensor")


def test_opcheck_results():
    def run(lib, ops):
        x = leaf(lib, X)
        return [
            lib.library.opcheck(ops.numpy_sin, (x,), test_utils=CHECKS),
            lib.library.opcheck(lib.ops.cotest.numpy_sin.default, (lib.tensor(X),), test_utils=CHECKS),
            lib.library.opcheck(ops.add_into, (lib.tensor(X), lib.zeros(4, 3, dtype=lib.float64)), test_utils=CHECKS),
            lib.library.opcheck(ops.power, (x,), {"exponent": 3.0}, test_utils=CHECKS[:2]),
        ]

    expected, actual = on_both(run)
    assert actual == expected


@pytest.mark.parametrize(
    "case",
    [
        ("writes_undeclared", "test_schema"),
        ("no_formula", "test_faketensor"),
        ("wrong_fake", "test_faketensor"),
    ],
    ids=lambda c: c[0],
)
def test_opcheck_failures(case):
    name, check = case

    def run(lib, ops):
        results = lib.library.opcheck(getattr(ops, name), (lib.tensor(X),), test_utils=CHECKS, raise_exception=False)
        assert set(results) == set(CHECKS)
        error = results[check]
        return {k: v for k, v in results.items() if v == "SUCCESS"}, type(error).__name__, str(error)

    expected, actual = on_both(run)
    assert actual == expected
    errors_on_both(lambda lib, ops: lib.library.opcheck(getattr(ops, name), (lib.tensor(X),), test_utils=check))


def test_opcheck_argument_errors():
    errors_on_both(lambda lib, ops: lib.library.opcheck(ops.numpy_sin, (lib.tensor(X),), rtol=1e-3))
    errors_on_both(lambda lib, ops: lib.library.opcheck(ops.numpy_sin, (lib.tensor(X),), test_utils="test_nothing"))
    errors_on_both(lambda lib, ops: lib.library.opcheck(lambda x: x, (lib.tensor(X),)), prefix_until=", got")


def test_get_ctx_inside_a_fake_kernel():
    def run(lib, ops):
        seen = []

        @lib.library.custom_op("cotest::ctx_op", mutates_args=())
        def ctx_op(x: lib.Tensor) -> lib.Tensor:
            return x.clone()

        @ctx_op.register_fake
        def _(x):
            seen.append(lib.library.get_ctx() is not None)
            return lib.empty_like(x)

        lib.library.opcheck(ctx_op, (lib.tensor(X),), test_utils="test_faketensor")
        return lib.library.get_ctx() is None, seen

    expected, actual = on_both(run)
    assert actual == expected == (True, [True])


def test_library_define_and_impl():
    def run(lib, ops):
        library = lib.library.Library("cotest_lib", "FRAGMENT")
        library.define("scale(Tensor x, float s=2.0, *, int k=1) -> Tensor")
        library.impl("scale", lambda x, s=2.0, *, k=1: x * s + k, "CPU")
        x = leaf(lib, X)
        y = lib.ops.cotest_lib.scale(x, k=3)
        y.sum().backward()
        z = lib.ops.cotest_lib.scale.default(lib.tensor(X), 0.5)
        schema = str(lib.ops.cotest_lib.scale.default._schema)
        library._destroy()
        return y, x.grad, z, schema

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that the kernel has no autograd registration
        expected, actual = on_both(run)
    assert_same(actual[:3], expected[:3])
    assert actual[3] == expected[3]


def test_library_errors():
    def duplicate(lib, ops):
        library = lib.library.Library("cotest_dup", "FRAGMENT")
        library.define("f(Tensor x) -> Tensor")
        try:
            library.define("f(Tensor x) -> Tensor")
        finally:
            library._destroy()

    def second_def(lib, ops):
        first = lib.library.Library("cotest_def", "DEF")
        try:
            lib.library.Library("cotest_def", "DEF")
        finally:
            first._destroy()

    errors_on_both(lambda lib, ops: lib.library.Library("cotest_kind", "BAD"))
    errors_on_both(duplicate, prefix_until=" Duplicate registration")
    errors_on_both(second_def, prefix_until=" If you were trying")


def test_define_impl_register_by_name_and_overloads():
    def run(lib, ops):
        library = lib.library.Library("cotest_named", "FRAGMENT")
        lib.library.define("cotest_named::cube", "(Tensor x) -> Tensor", lib=library)
        lib.library.define("cotest_named::cube.scaled", "(Tensor x, float s) -> Tensor", lib=library)

        @lib.library.impl("cotest_named::cube", "cpu", lib=library)
        def cube(x):
            return lib.from_numpy(x.numpy() ** 3)

        @lib.library.impl("cotest_named::cube.scaled", "default", lib=library)
        def cube_scaled(x, s):
            return x**3 * s

        lib.library.register_fake("cotest_named::cube", lambda x: lib.empty_like(x), lib=library)

        def setup(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * g * x**2

        lib.library.register_autograd("cotest_named::cube", backward, setup_context=setup, lib=library)
        x = leaf(lib, X)
        y = lib.ops.cotest_named.cube.default(x)
        y.sum().backward()
        scaled = lib.ops.cotest_named.cube(lib.tensor(X), 2.0)
        overloads = sorted(lib.ops.cotest_named.cube.overloads())
        checked = lib.library.opcheck(lib.ops.cotest_named.cube.default, (leaf(lib, X),), test_utils=CHECKS)
        library._destroy()
        return y, x.grad, scaled, overloads, checked

    expected, actual = on_both(run)
    assert_same(actual[:3], expected[:3])
    assert actual[3:] == expected[3:]


def test_impl_abstract_warns_as_torch():
    def run(lib, ops):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.library.impl_abstract("cotest::no_formula", lambda x: lib.empty_like(x))
        return [(w.category.__name__, str(w.message)) for w in caught if w.category is FutureWarning]

    expected, actual = on_both(run)
    assert actual == expected and len(actual) == 1


@pytest.mark.slow  # torch.compile's first compilation takes seconds
def test_compiled_step_calls_the_kernel_on_the_host():
    def run(lib, ops):
        w = leaf(lib, X)

        @lib.compile
        def step():
            y = ops.numpy_sin(w * 2).sum()
            y.backward()
            return ops.numpy_sin(w).detach()

        first = step()
        return first, w.grad

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bg.compile notes that the step makes w.grad anew
        compare(run)


def test_backward_calling_an_operator_under_batched_grads():
    def run(lib, ops):
        @lib.library.custom_op("cotest::doubled", mutates_args=())
        def doubled(x: lib.Tensor) -> lib.Tensor:
            return lib.from_numpy(x.numpy() * 2)

        doubled.register_fake(lambda x: lib.empty_like(x))
        doubled.register_autograd(lambda ctx, g: doubled(g))
        x = leaf(lib, X)
        rows = lib.eye(12, dtype=lib.float64).reshape(12, 4, 3)
        (jac,) = lib.autograd.grad(doubled(ops.numpy_sin(x)), x, rows, is_grads_batched=True)
        return jac

    compare(run)


def test_device_kernels():
    def run(lib, ops):
        @lib.library.custom_op("cotest::ones_on", mutates_args=(), device_types="cpu")
        def ones_on(n: int, device: lib.device) -> lib.Tensor:
            return lib.ones(n)

        @lib.library.custom_op("cotest::plus", mutates_args=())
        def plus(x: lib.Tensor) -> lib.Tensor:
            return x + 1

        @plus.register_kernel("cpu")
        def _(x):
            return x + 2

        return ones_on(2, "cpu"), plus(lib.zeros(2)), error_of(lambda: ones_on(2, "meta"))

    expected, actual = on_both(run)
    assert_same(actual[:2], expected[:2])
    assert actual[2] == expected[2]

    def no_device(lib, ops):
        @lib.library.custom_op("cotest::no_device", mutates_args=(), device_types="cpu")
        def no_device(n: int) -> lib.Tensor:
            return lib.ones(n)

    errors_on_both(no_device)


def test_mutable_op_writes_into_views():
    def run(lib, ops):
        buffer = lib.zeros(5, 3, dtype=lib.float64)
        view = buffer[1:]
        before = (buffer._version, view._version)
        ops.add_into(lib.tensor(X), view)
        ops.add_into(lib.tensor(Y), view)
        return buffer, view, buffer._version - before[0], view._version - before[1]

    expected, actual = on_both(run)
    assert_same(actual[:2], expected[:2])
    assert actual[2:] == expected[2:]


def test_loading_a_cpp_operator_library_is_refused():
    with pytest.raises(NotImplementedError, match="C\\+\\+ operator libraries"):
        bg.ops.load_library("libcustom.so")


def test_autograd_registration_check_of_library_kernels():
    def run(lib, ops):
        library = lib.library.Library("cotest_keys", "FRAGMENT")
        library.define("backend(Tensor x) -> Tensor")
        library.impl("backend", lambda x: x * 2, "CPU")
        library.define("implicit(Tensor x) -> Tensor")
        library.impl("implicit", lambda x: x * 2, "CompositeImplicitAutograd")
        x = leaf(lib, X)
        checks = ("test_schema", "test_autograd_registration")
        results = [
            lib.library.opcheck(
                getattr(lib.ops.cotest_keys, name).default, (x,), test_utils=checks, raise_exception=False
            )
            for name in ("backend", "implicit")
        ]
        library._destroy()
        return [{k: v if v == "SUCCESS" else (type(v).__name__, str(v)) for k, v in r.items()} for r in results]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected, actual = on_both(run)
    assert actual == expected


@pytest.mark.parametrize(
    "register",
    [
        lambda lib, ops: lib.library.register_fake("cotest::nonexistent", lambda x: x),
        lambda lib, ops: lib.library.register_autograd("nonexistent", lambda ctx, g: g),
        lambda lib, ops: lib.library.register_vmap("cotest::nonexistent", lambda *a: a),
        lambda lib, ops: ops.numpy_sin.register_kernel("bogus")(lambda x: x),
        lambda lib, ops: lib.library.custom_op("cotest::no_kind", mutates_args="some")(lambda x: x),
    ],
    ids=["fake-unknown-op", "autograd-bad-name", "vmap-unknown-op", "kernel-bad-device", "mutates-args-string"],
)
def test_bad_registrations_raise_torchs_errors(register):
    errors_on_both(register)


def test_tensor_list_output():
    def run(lib, ops):
        @lib.library.custom_op("cotest::split_rows", mutates_args=())
        def split_rows(x: lib.Tensor) -> list[lib.Tensor]:
            return [lib.from_numpy(np.sin(row)) for row in x.numpy()]

        def setup(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        def backward(ctx, grads):
            (x,) = ctx.saved_tensors
            return lib.stack(grads) * x.cos()

        split_rows.register_autograd(backward, setup_context=setup)
        x = leaf(lib, X)
        rows = split_rows(x)
        (rows[0] * 2 + rows[3]).sum().backward()
        return type(rows).__name__, rows, x.grad

    expected, actual = on_both(run)
    assert actual[0] == expected[0] == "list"
    assert_same(actual[1:], expected[1:])


def test_kernel_registered_before_the_definition():
    def run(lib, ops):
        library = lib.library.Library("cotest_early", "FRAGMENT")
        library.impl("late", lambda x: x * 3, "CPU")
        library.define("late(Tensor x) -> Tensor")
        result = lib.ops.cotest_early.late(lib.tensor(X))
        library._destroy()
        return result

    compare(run)
    errors_on_both(
        lambda lib, ops: lib.library.Library("cotest_impl", "IMPL").define("f(Tensor x) -> Tensor"),
        prefix_until="  (Error",
    )
    errors_on_both(lambda lib, ops: lib.library.Library("cotest_fn", "FRAGMENT").impl("f", 3, "CPU"))


def test_set_kernel_enabled():
    def run(lib, ops):
        @lib.library.custom_op("cotest::plus_one", mutates_args=())
        def plus_one(x: lib.Tensor) -> lib.Tensor:
            return x + 1

        @plus_one.register_kernel("cpu")
        def _(x):
            return x + 2

        x = lib.zeros(2)
        with plus_one.set_kernel_enabled("cpu", enabled=False):
            off = plus_one(x)
            with plus_one.set_kernel_enabled("cpu"):
                on_inside = plus_one(x)
            still_off = plus_one(x)
        return off, on_inside, still_off, plus_one(x)

    compare(run)
