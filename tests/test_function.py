"""autograd.Function (ctx API, setup_context style, once_differentiable, backwards that leave JAX) and
anomaly mode, against torch 2.13."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


def make_functions(lib):
    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x**3 * scale

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x**2 * ctx.scale, None

    class NumpySquare(lib.autograd.Function):  # backward leaves the array library entirely
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return lib.tensor(2 * np.asarray(x.detach().numpy()) * np.asarray(g.detach().numpy()))

    class ItemBranch(lib.autograd.Function):  # .item() and a Python branch on values
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 if x.sum().item() > 0 else g * -1

    class SplitSetup(lib.autograd.Function):  # forward(*args) + setup_context
        @staticmethod
        def forward(x, y):
            return x * y, (x + y).argmax()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)
            ctx.mark_non_differentiable(output[1])

        @staticmethod
        def backward(ctx, g, g_idx):
            x, y = ctx.saved_tensors
            return g * y, g * x

    class NeedsGrad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.record = ctx.needs_input_grad
            ctx.set_materialize_grads(False)
            return x + y, x - y

        @staticmethod
        def backward(ctx, g1, g2):
            ctx.seen_none = (g1 is None, g2 is None)
            g1 = 0 if g1 is None else g1
            g2 = 0 if g2 is None else g2
            return g1 + g2, g1 - g2

    return Cube, NumpySquare, ItemBranch, SplitSetup, NeedsGrad


def leaves(lib, seed=0):
    a = np.random.default_rng(seed).uniform(0.5, 1.5, size=(2, 3))
    return lib.tensor(a, requires_grad=True), lib.tensor(a[::-1].copy(), requires_grad=True)


@pytest.mark.parametrize("index", range(3))
def test_single_input_functions_match_torch(index):
    def run(lib):
        fn = make_functions(lib)[index]
        x, _ = leaves(lib)
        out = fn.apply(x, 2.0) if index == 0 else fn.apply(x)
        return out, lib.autograd.grad((out * out).sum(), x)

    assert_same(run(bg), run(torch))


def test_setup_context_and_non_differentiable_output():
    def run(lib):
        fn = make_functions(lib)[3]
        x, y = leaves(lib)
        out, idx = fn.apply(x, y)
        assert not idx.requires_grad
        return out, idx, lib.autograd.grad(out.sum(), [x, y])

    assert_same(run(bg), run(torch))


def test_needs_input_grad_and_unmaterialized_grads():
    def run(lib):
        fn = make_functions(lib)[4]
        x, _ = leaves(lib)
        y = lib.ones(2, 3, dtype=x.dtype)
        a, b = fn.apply(x, y)
        (g,) = lib.autograd.grad(a.sum(), x)
        return a.grad_fn, g

    (node, g), (t_node, tg) = run(bg), run(torch)
    assert node.name() == t_node.name() == "NeedsGradBackward"
    assert_same(g, tg)


def test_double_backward_through_function():
    def run(lib):
        fn = make_functions(lib)[0]
        x, _ = leaves(lib)
        (g,) = lib.autograd.grad(fn.apply(x, 2.0).sum(), x, create_graph=True)
        return g, lib.autograd.grad(g.sum(), x)

    assert_same(run(bg), run(torch))


def test_once_differentiable_refuses_double_backward():
    for lib in (bg, torch):

        class Square(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            @lib.autograd.function.once_differentiable
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 2 * x * g

        x, _ = leaves(lib)
        v = lib.ones(2, 3, dtype=x.dtype, requires_grad=True)
        (g,) = lib.autograd.grad(Square.apply(x), x, v, create_graph=True)
        assert g.requires_grad
        assert g.grad_fn.name() == "torch::autograd::Error"
        with pytest.raises(RuntimeError, match="marked with @once_differentiable"):
            g.sum().backward()


def test_wrong_number_of_gradients_is_a_clear_error():
    for lib in (bg, torch):

        class Bad(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * y

            @staticmethod
            def backward(ctx, g):
                return g

        x, y = leaves(lib)
        with pytest.raises(RuntimeError, match=r"returned an incorrect number of gradients \(expected 2, got 1\)"):
            Bad.apply(x, y).sum().backward()


def test_anomaly_mode_names_the_node_and_shows_the_forward_trace():
    for lib in (bg, torch):
        x = lib.tensor([0.0, 1.0], requires_grad=True)
        with lib.autograd.detect_anomaly():
            y = (x.sqrt() * 0).sum()  # d/dx sqrt at 0 is inf; inf * 0 = nan
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with pytest.raises(
                    RuntimeError, match=r"Function 'SqrtBackward0' returned nan values in its 0th output."
                ):
                    y.backward()
        assert any("Traceback of forward call that caused the error" in str(w.message) for w in caught)


def test_set_detect_anomaly_toggles_and_restores():
    assert not bg.autograd.anomaly_mode.is_anomaly_enabled()
    with bg.autograd.set_detect_anomaly(True):
        assert bg.autograd.anomaly_mode.is_anomaly_enabled()
    assert not bg.autograd.anomaly_mode.is_anomaly_enabled()


def test_jax_function_is_a_differentiable_batchable_op():
    import jax.numpy as jnp
    import jax.scipy.special as jsp

    gammaln = bg.jax_function(jsp.gammaln)
    x, _ = leaves(bg)
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    out = gammaln(x * 2)
    (g,) = bg.autograd.grad(out.sum(), x, create_graph=True)
    (gg,) = bg.autograd.grad(g.sum(), x)
    t_out = torch.lgamma(tx * 2)
    (tg,) = torch.autograd.grad(t_out.sum(), tx, create_graph=True)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    assert_same([out, g, gg], [t_out, tg, tgg])
    (jac,) = bg.autograd.grad(gammaln(x * 2).reshape(6), x, bg.eye(6, dtype=bg.float64), is_grads_batched=True)
    assert jac.shape == (6, 2, 3)

    split = bg.jax_function(lambda a, *, k: (a[:k] * 2, jnp.sin(a[k:])))
    a, b = split(bg.tensor([1.0, 2.0, 3.0], requires_grad=True), k=1)
    assert a.shape == (1,) and b.shape == (2,) and a.requires_grad


@pytest.mark.parametrize("chained", [False, True])
def test_gradient_of_another_dtype_is_cast_to_the_input_dtype_like_torch(chained):
    def make(lib, from_numpy):
        class DoubleGrad(lib.autograd.Function):  # float64 gradients for float32 inputs
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return from_numpy(2 * np.asarray(x.detach().numpy(), np.float64) * np.asarray(g.numpy(), np.float64))

        return DoubleGrad

    grads = []
    for lib, from_numpy in ((bg, bg.from_numpy), (torch, torch.from_numpy)):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = make(lib, from_numpy).apply(x.exp() if chained else x)
        grads.append(lib.autograd.grad(out.sum(), x)[0])
    assert_same(grads[0], grads[1], rtol=1e-6)


def _returns_twice(lib, log):
    """A Function whose forward returns one new tensor twice (between them another output), saved for backward."""

    class Twice(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            doubled = x * 2
            ctx.save_for_backward(doubled)
            return doubled, x * 3, doubled

        @staticmethod
        def backward(ctx, g_first, g_middle, g_last):
            (doubled,) = ctx.saved_tensors
            log.append(("saved output_nr", doubled.output_nr, doubled.grad_fn is not None))
            log.append(("grads", g_first.tolist(), g_middle.tolist(), g_last.tolist()))
            return g_first * 2 + g_middle * 3 + g_last * 2

    return Twice


def test_a_tensor_returned_twice_is_one_output_object_as_torchs():
    """torch hands back the same object for both, as the later output (output_nr 2): gradients of both uses reach
    backward through that output, and the saved tensor is that output."""
    logs = []
    for lib in (bg, torch):
        log = []
        x = lib.tensor([1.0, -2.0], requires_grad=True)
        first, middle, last = _returns_twice(lib, log).apply(x)
        log.append(("same object", first is last, first.output_nr, middle.output_nr))
        (first * 5 + last + middle).sum().backward()
        logs.append((log, x.grad.tolist()))
    assert logs[0] == logs[1]


def test_gradcheck_of_a_function_returning_a_tensor_twice():
    def twice_summed(x):
        first, _, last = _returns_twice(bg, []).apply(x)
        assert first is last
        return first + last

    x = bg.randn(3, dtype=bg.float64, requires_grad=True)
    assert bg.autograd.gradcheck(twice_summed, (x,))
    assert bg.autograd.gradgradcheck(twice_summed, (x,))


def test_saved_tensors_keep_their_output_nr_and_grad_fn_when_backward_records_nothing():
    """An output of another node saved for backward: unpacked with its grad_fn and output_nr in any grad mode."""
    outcomes = []
    for lib in (bg, torch):
        seen = []

        class Halves(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x[:2], x[2:]

            @staticmethod
            def backward(ctx, *grads):
                return lib.cat(grads)

        class SaveInput(lib.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                ctx.save_for_backward(t)
                return t * 2

            @staticmethod
            def backward(ctx, g):
                (t,) = ctx.saved_tensors
                seen.append((t.output_nr, t.requires_grad, t.grad_fn.name()))
                return g * 2

        _, second = Halves.apply(lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True))
        for create_graph in (False, True):
            SaveInput.apply(second).sum().backward(create_graph=create_graph)
        outcomes.append((second.output_nr, seen))
    assert outcomes[0] == outcomes[1]


def _node_names(m):
    class FooBar(m.autograd.Function):
        @staticmethod
        def forward(x):
            return x.clone()

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output

    seen = []

    def f(x):
        node = FooBar.apply(x).grad_fn
        seen.append((type(node).__name__, node.name(), type(node).__module__.split(".", 1)[1]))
        return x.sum() * 0 + FooBar.apply(x).sum()

    x = m.tensor([1.0, 2.0])
    m.func.grad(f)(x)  # torch records a copy of the Function it generates inside grad-type transforms
    m.func.vjp(f, x)
    f(m.ones(2, requires_grad=True))
    first, second = (FooBar.apply(m.ones(1, requires_grad=True)) for _ in range(2))
    return seen, type(first.grad_fn) is type(second.grad_fn), isinstance(first.grad_fn, m.autograd.graph.Node)


def test_a_functions_node_class_is_named_as_torchs():
    assert _node_names(bg) == _node_names(torch)


def _legacy(m):
    class Legacy(m.autograd.Function):  # forward is an instance method: torch's deprecated style
        def forward(self, x):
            return x * 2

    return Legacy


def test_instantiating_a_legacy_function_only_warns():
    for m in (bg, torch):
        with pytest.warns(DeprecationWarning, match="should not be instantiated"):
            instance = _legacy(m)()
        x = m.ones(2, requires_grad=True)
        instance.forward(x).sum().backward()  # its methods are plain methods, as torch's
        assert x.grad.tolist() == [2.0, 2.0]


def test_calling_a_legacy_function_raises_torch_error():
    def run(m):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            instance = _legacy(m)()
        instance(m.ones(2))

    raises_like_torch(run)
