"""bg.compile: a step recorded once per signature into one program, whose later calls give what eager calls give
(and torch's), update parameters, .grad and optimizer state as the step does, and compile nothing more."""

import subprocess
import sys
import textwrap
import warnings

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap
from batched_grad.func import grad as func_grad
from batched_grad.func import hessian, jacrev
from oracle import assert_float32_as_accurate

_xla_compiles = [0]


def _count_xla_compile(event, duration, **kwargs):
    if event.endswith("backend_compile_duration"):
        _xla_compiles[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count_xla_compile)

X = np.random.default_rng(1).standard_normal((16, 4)).astype(np.float32)
Y = np.random.default_rng(2).standard_normal((16, 1)).astype(np.float32)


def _model(lib, optimizer, dtype, **options):
    rng = np.random.default_rng(0)
    model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 1)).to(getattr(lib, dtype))
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(dtype)))
    return model, getattr(lib.optim, optimizer)(model.parameters(), **options)


def _train(lib, compiled, optimizer="SGD", steps=5, zero_grad="first", dtype="float32", **options):
    model, opt = _model(lib, optimizer, dtype, **options)

    def step(x, y):
        if zero_grad == "first":
            opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        if zero_grad == "last":
            opt.zero_grad()
        return loss

    step = bg.compile(step) if compiled else step
    losses = np.array(
        [step(lib.tensor(X.astype(dtype)), lib.tensor(Y.astype(dtype))).detach().numpy() for _ in range(steps)]
    )
    grads = [p.grad.detach().numpy().copy() for p in model.parameters() if p.grad is not None]
    return losses, [p.detach().numpy().copy() for p in model.parameters()], grads, step


def _assert_trains_like_torch(**training):
    """A compiled float32 training step: its losses, parameters and gradients as accurate as torch's eager ones
    (oracle.assert_float32_as_accurate: each step is a few dependent float32 roundings per value). Returns the
    compiled step."""
    losses, params, grads, step = _train(bg, True, **training)
    t_losses, t_params, t_grads, _ = _train(torch, False, **training)
    assert len(grads) == len(t_grads)
    steps = training.get("steps", 5)
    exact_losses, exact_params, exact_grads, _ = _train(torch, False, **dict(training, dtype="float64"))
    assert_float32_as_accurate(
        [losses, *params, *grads], [t_losses, *t_params, *t_grads], [exact_losses, *exact_params, *exact_grads], steps
    )
    return step


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [{"lr": 0.1}, {"lr": 0.1, "momentum": 0.9}, {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}],
    ids=["plain", "momentum", "nesterov"],
)
@pytest.mark.parametrize("zero_grad, traces", [("first", 2), ("last", 1), ("never", 2)])
def test_an_sgd_training_step_matches_torch_and_updates_the_parameters(options, zero_grad, traces):
    step = _assert_trains_like_torch(zero_grad=zero_grad, **options)
    # a second trace where the first call's state differs from the later ones': .grad was None (zero_grad
    # first, or .grad accumulated from call to call); the momentum buffers made by the first step are then read
    # back as inputs. A step that leaves no .grad behind and updates its buffers in place traces once, at most twice
    assert step.compiles == (2 if "momentum" in options and zero_grad == "last" else traces)


@pytest.mark.slow
@pytest.mark.parametrize(
    "optimizer, options",
    [("Adam", {"lr": 0.05}), ("Adam", {"lr": 0.05, "amsgrad": True}), ("AdamW", {"lr": 0.05, "weight_decay": 0.1})],
)
def test_adam_steps_compile_and_match_torch(optimizer, options):
    step = _assert_trains_like_torch(optimizer=optimizer, steps=6, **options)
    assert step.compiles == 2  # its state (step count on the device, moments) made at the first step


def _optimizer_losses(lib, optimizer, steps, compiled):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 1))
    opt = getattr(lib.optim, optimizer)(model.parameters(), lr=0.01)
    x, y = lib.randn(16, 4), lib.randn(16, 1)

    def step():
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = bg.compile(step) if compiled else step
    return [step().item() for _ in range(steps)], [p.detach().numpy() for p in model.parameters()]


def _assert_optimizer_compiles_like_torch(optimizer, steps):
    """The optimizers that keep float32 scalars as state and compute step-dependent factors from them."""
    ours, ours_params = _optimizer_losses(bg, optimizer, steps, compiled=True)
    theirs, their_params = _optimizer_losses(torch, optimizer, steps, compiled=False)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    for a, b in zip(ours_params, their_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_radam_compiles_through_its_rectification_switch():
    _assert_optimizer_compiles_like_torch("RAdam", steps=8)  # the variance becomes tractable at step 6


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "Rprop", "ASGD"])
def test_optimizers_with_scalar_state_compile_and_match_torch(optimizer):
    _assert_optimizer_compiles_like_torch(optimizer, steps=6)


W = np.random.default_rng(3).standard_normal((5, 3)).astype(np.float32)


def _f(x):
    return bg.tanh(bg.tensor(W) @ x)


WORKLOADS = {
    "batched jacobian": lambda x: bg.autograd.grad(_f(x), x, bg.eye(5), is_grads_batched=True)[0],
    "functional jacobian": lambda x: bg.autograd.functional.jacobian(_f, x, vectorize=True),
    "jacrev": lambda x: jacrev(_f)(x),
    "hessian": lambda x: hessian(lambda x: (_f(x) ** 2).sum())(x),
    "hvp": lambda x: bg.autograd.functional.hvp(lambda x: (_f(x) ** 2).sum(), x, bg.ones(3))[1],
    "vmap(grad)": lambda x: vmap.vmap(func_grad(lambda x: (_f(x) ** 2).sum()))(x * bg.arange(1.0, 5.0)[:, None]),
    "batched HVPs": lambda x: bg.autograd.grad(
        bg.autograd.grad((_f(x) ** 2).sum(), x, create_graph=True)[0], x, bg.eye(3), is_grads_batched=True
    )[0],
    "Gauss-Newton step": lambda x: _gauss_newton_step(x),
    "CG iteration": lambda x: _cg_iteration(x, bg.tensor([0.5, -1.0, 2.0])),
}


def _gauss_newton_step(x):
    """loops.py's Gauss-Newton iteration: the residuals' Jacobian, then a damped normal-equations solve."""
    J = bg.autograd.functional.jacobian(_f, x, vectorize=True)
    return x + bg.linalg.solve(J.T @ J + 0.1 * bg.eye(3), -(J.T @ _f(x)))


def _cg_iteration(x, v):
    """loops.py's Newton-CG iteration from p = 0, r = v: its Hessian-vector product recomputes the gradient."""
    (g,) = bg.autograd.grad((_f(x) ** 2).sum() + 0.005 * (x * x).sum(), x, create_graph=True)
    (hv,) = bg.autograd.grad(g, x, v)
    rr = (v * v).sum()
    alpha = rr / (v * hv).sum()
    r = v - alpha * hv
    return bg.stack([alpha * v, r, r + ((r * r).sum() / rr) * v])


@pytest.mark.slow
@pytest.mark.parametrize("name", WORKLOADS)
def test_every_transform_compiles_to_one_program_with_the_eager_results(name):
    fn = WORKLOADS[name]
    compiled = bg.compile(fn)
    rng = np.random.default_rng(4)
    for _ in range(4):
        x = bg.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
        got = compiled(x)
        np.testing.assert_allclose(got.numpy(), fn(x).detach().numpy(), rtol=1e-4, atol=1e-5)
        assert not got.requires_grad and got.grad_fn is None  # a program's result, not recorded
    assert compiled.compiles == 1


# One process: a compiled Adam step's three calls, printing how many XLA compiles they made. Run twice on one
# persistent cache (the test session's own): the second process finds every program on disk.
_STEP_IN_A_PROCESS = textwrap.dedent("""
    import jax
    import numpy as np
    import batched_grad as bg

    compiles = [0]  # XLA compiles less persistent-cache hits: what XLA really compiled

    def on_duration(event, duration, **kwargs):
        compiles[0] += event.endswith("backend_compile_duration")

    def on_event(event, **kwargs):
        compiles[0] -= event == "/jax/compilation_cache/cache_hits"

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    model = bg.nn.Linear(4, 1)
    opt = bg.optim.Adam(model.parameters(), lr=0.1)

    @bg.compile
    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    x, y = bg.ones(8, 4), bg.zeros(8, 1)
    before = compiles[0]
    for _ in range(3):
        step(x, y)
    print(compiles[0] - before, step.compiles)
""")


@pytest.mark.slow
def test_a_compiled_step_is_found_in_the_persistent_cache_by_a_later_process():
    runs = [
        subprocess.run([sys.executable, "-c", _STEP_IN_A_PROCESS], capture_output=True, text=True, timeout=300)
        for _ in range(2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    (first, traces), (second, _) = [map(int, run.stdout.split()) for run in runs]
    assert traces == 2 and second == 0 < first


def test_later_calls_compile_nothing_and_record_nothing():
    w = bg.tensor(W, requires_grad=True)
    step = bg.compile(lambda x: bg.autograd.grad((bg.tanh(w @ x) ** 2).sum(), w)[0])
    x = bg.ones(3)
    step(x)
    before = _xla_compiles[0], bg.compile_count()
    for _ in range(5):
        step(x)
    assert (_xla_compiles[0], bg.compile_count()) == before


def test_a_new_shape_or_constant_argument_traces_again():
    calls = []

    @bg.compile
    def scaled(x, factor):
        calls.append(factor)
        return x * factor

    np.testing.assert_allclose(scaled(bg.ones(3), 2.0).numpy(), 2.0)
    np.testing.assert_allclose(scaled(bg.ones(3), 2.0).numpy(), 2.0)
    np.testing.assert_allclose(scaled(bg.ones(3), 3.0).numpy(), 3.0)  # a Python constant by value
    np.testing.assert_allclose(scaled(bg.ones(4), 3.0).numpy(), 3.0)  # another shape
    np.testing.assert_allclose(scaled(bg.ones(4, dtype=bg.float64), 3.0).numpy(), 3.0)
    assert calls == [2.0, 3.0, 3.0, 3.0] and scaled.compiles == 4  # the function runs only when traced


def test_captured_tensors_are_read_at_every_call():
    w = bg.tensor([1.0, 2.0])
    shared = np.array([10.0, 20.0], np.float32)
    s = bg.from_numpy(shared)
    step = bg.compile(lambda x: x * w + s)
    np.testing.assert_allclose(step(bg.ones(2)).numpy(), [11.0, 22.0])
    with bg.no_grad():
        w.mul_(3.0)  # changed in place between calls
    shared[:] = [100.0, 200.0]  # memory shared with NumPy, written by the user
    np.testing.assert_allclose(step(bg.ones(2)).numpy(), [103.0, 206.0])
    assert step.compiles == 1


def test_a_function_of_captured_state_alone_computes_it_at_every_call():
    """No argument at all: every op reads only captured tensors, and the program still reads them at each call."""
    torch.manual_seed(0)
    w, x = torch.randn(4, 1), torch.randn(16, 4)
    ours_w, ours_x = bg.tensor(w.numpy()), bg.tensor(x.numpy())
    total = bg.compile(lambda: (ours_x @ ours_w).sum())
    for _ in range(3):
        np.testing.assert_allclose(total().item(), (x @ w).sum().item(), rtol=1e-6)
        w.add_(1.0)
        with bg.no_grad():
            ours_w.add_(1.0)
    assert total.compiles == 1


def test_transforms_of_captured_tensors_alone_are_computed_at_every_call():
    """vmap(jacrev(...)) over captured data only, inside a compiled function without arguments."""
    torch.manual_seed(0)
    w, b, x = torch.randn(3, 4), torch.randn(3), torch.randn(5, 4)
    ours_w, ours_b, ours_x = (bg.tensor(t.numpy()) for t in (w, b, x))
    jacobians = bg.compile(lambda: bg.func.vmap(bg.func.jacrev(lambda v: bg.tanh(ours_w @ v + ours_b)))(ours_x).sum())
    for _ in range(3):
        expected = torch.func.vmap(torch.func.jacrev(lambda v: torch.tanh(w @ v + b)))(x).sum()
        np.testing.assert_allclose(jacobians().item(), expected.item(), rtol=1e-5)
        w.mul_(1.1)
        with bg.no_grad():
            ours_w.mul_(1.1)


def test_a_captured_tensor_whose_value_is_deferred_is_read_at_every_call():
    w = bg.randn(3, requires_grad=True)
    doubled = w * 2  # recorded, its value not computed yet
    total = bg.compile(lambda: doubled.detach().sum())
    for _ in range(3):
        np.testing.assert_allclose(total().item(), doubled.detach().sum().item(), rtol=1e-6)
        with bg.no_grad():
            doubled.add_(1.0)


def test_a_training_step_over_a_captured_model_and_optimizer_matches_torch():
    def losses(lib):
        lib.manual_seed(0)
        model = lib.nn.Linear(4, 1)
        optimizer = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x, y = lib.randn(16, 4), lib.randn(16, 1)

        def step():
            optimizer.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            optimizer.step()
            return loss

        step = bg.compile(step) if lib is bg else step
        return [step().item() for _ in range(5)], model.weight.detach().numpy()

    (ours, ours_weight), (theirs, their_weight) = losses(bg), losses(torch)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    np.testing.assert_allclose(ours_weight, their_weight, rtol=1e-5)


def test_reading_a_value_is_a_clear_error_or_runs_eagerly():
    def branch(x):
        if x.sum() > 0:
            return x * 2
        return x

    message = (
        r"bg.compile\(.*branch\): the function reads a tensor's value while it is compiled: Tensor.item\(\) "
        r".* at .*test_compile.py:\d+ \(if x.sum\(\) > 0:\)"
    )
    with pytest.raises(RuntimeError, match=message):
        bg.compile(branch)(bg.ones(3))  # fullgraph=True by default (SPEC section 5)
    eager = bg.compile(branch, fullgraph=False)
    with pytest.warns(UserWarning, match="these calls run eagerly"):
        np.testing.assert_allclose(eager(bg.ones(3)).numpy(), 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per signature
        np.testing.assert_allclose(eager(-bg.ones(3)).numpy(), -1.0)


def test_state_replaced_at_every_call_runs_eagerly_with_a_warning():
    state = {"total": bg.zeros(2)}

    def accumulate(x):
        state["total"] = state["total"] + x  # a new tensor each call: nothing a program can read back
        return state["total"].sum()

    step = bg.compile(accumulate)
    with pytest.warns(UserWarning, match="keeps new tensors at every call"):
        results = [float(step(bg.ones(2))) for _ in range(4)]
    assert results == [2.0, 4.0, 6.0, 8.0]
    np.testing.assert_allclose(state["total"].numpy(), 4.0)


def test_results_may_be_nested_and_hold_constants():
    step = bg.compile(lambda x: {"double": x * 2, "pair": (x.sum(), "label", 3)})
    out = step(bg.ones(2))
    np.testing.assert_allclose(out["double"].numpy(), 2.0)
    assert float(out["pair"][0]) == 2.0 and out["pair"][1:] == ("label", 3)


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="compile\\(\\): argument 'model' must be callable, but got int"):
        bg.compile(5)
    with pytest.raises(TypeError, match="argument 'fullgraph' must be a bool, but got str"):
        bg.compile(lambda x: x, fullgraph="yes")
    with pytest.raises(TypeError, match="a non-Tensor argument must be hashable .* but got ndarray"):
        bg.compile(lambda x, weights: x)(bg.ones(2), np.ones(2))
    with pytest.raises(TypeError, match="must return Tensors or constants, but returned a JAX array"):
        bg.compile(lambda x: x.jax())(bg.ones(2))
