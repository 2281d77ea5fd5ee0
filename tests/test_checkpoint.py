"""torch.utils.checkpoint (both variants, checkpoint_sequential) against torch 2.13: the same model written once
against a module, run with each, gradients of the inputs and of the parameters the function closes over compared;
dropout inside the checkpointed function; torch's warnings and errors."""

import warnings

import numpy as np
import pytest
import torch
import torch.utils.checkpoint

import batched_grad as bg
from batched_grad.utils.checkpoint import checkpoint as imported_checkpoint
from oracle import assert_same, raises_like_torch

VARIANTS = pytest.mark.parametrize("reentrant", [True, False], ids=["reentrant", "non_reentrant"])
X = np.linspace(-2.0, 2.5, 8).reshape(2, 4)


def _two_layers(m):
    """A small MLP whose weights are fixed numbers, so torch and batched_grad start from the same model."""
    first, second = m.nn.Linear(4, 5), m.nn.Linear(5, 3)
    with m.no_grad():
        first.weight.copy_(m.tensor(np.linspace(-1, 1, 20).reshape(5, 4), dtype=m.float32))
        first.bias.copy_(m.tensor(np.linspace(-0.5, 0.5, 5), dtype=m.float32))
        second.weight.copy_(m.tensor(np.linspace(-0.3, 0.7, 15).reshape(3, 5), dtype=m.float32))
        second.bias.zero_()
    return first, second


def _train_step(m, reentrant):
    first, second = _two_layers(m)

    def block(x):  # closes over both layers: their gradients come from the recomputation
        return second(m.tanh(first(x)) * x.sum())

    x = m.tensor(X, dtype=m.float32, requires_grad=True)
    y = m.utils.checkpoint.checkpoint(block, x, use_reentrant=reentrant)
    (y**2).sum().backward()
    return y, x.grad, first.weight.grad, first.bias.grad, second.weight.grad


@VARIANTS
def test_gradients_of_inputs_and_captured_parameters_match_torch(reentrant):
    assert_same(_train_step(bg, reentrant), _train_step(torch, reentrant), rtol=1e-5, atol=1e-6)


def test_checkpointed_and_plain_runs_agree():
    first, second = _two_layers(bg)
    x = bg.tensor(X, dtype=bg.float32, requires_grad=True)
    y = second(bg.tanh(first(x)) * x.sum())
    (y**2).sum().backward()
    plain = (y, x.grad, first.weight.grad, first.bias.grad, second.weight.grad)
    for got, want in zip(_train_step(bg, False), plain):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)


def _autograd_grad_of_nested(m):
    def inner(t):
        return m.sin(t) * t

    def outer(t):
        h = m.utils.checkpoint.checkpoint(inner, t, use_reentrant=False)
        return m.cos(h) * h

    x = m.tensor(X, requires_grad=True)
    y = m.utils.checkpoint.checkpoint(outer, x, use_reentrant=False)
    (g,) = m.autograd.grad((y * m.arange(8.0, dtype=m.float64).reshape(2, 4)).sum(), x)
    return g


def test_non_reentrant_nests_and_works_with_autograd_grad():
    assert_same(_autograd_grad_of_nested(bg), _autograd_grad_of_nested(torch))


def _keyword_arguments(m):
    x = m.tensor(X, requires_grad=True)
    scale = m.tensor(3.0, requires_grad=True)
    y = m.utils.checkpoint.checkpoint(lambda a, k: (a * k).exp(), x, k=scale, use_reentrant=False)
    y.sum().backward()
    return x.grad, scale.grad


def test_non_reentrant_passes_keyword_arguments():
    assert_same(_keyword_arguments(bg), _keyword_arguments(torch))


def _double_backward_through_checkpoint(m):
    x = m.tensor(X, requires_grad=True)
    y = m.utils.checkpoint.checkpoint(lambda t: (t**3).sum(), x, use_reentrant=False)
    (g,) = m.autograd.grad(y, x, create_graph=True)
    (gg,) = m.autograd.grad(g.sum(), x)
    return g, gg


def test_non_reentrant_double_backward_matches_torch():
    assert_same(_double_backward_through_checkpoint(bg), _double_backward_through_checkpoint(torch))


def _changing_function(m):
    """A function whose recomputation runs other ops than its first call, saving a tensor of another shape."""
    calls = []

    def fn(x):
        calls.append(x)
        return x.sin().exp() if len(calls) == 1 else x.sin() * m.tensor([1.0, 2.0])

    return fn


def _mismatch_message(m, debug, debug_enabled):
    x = m.tensor([0.5], requires_grad=True)
    with m.utils.checkpoint.set_checkpoint_debug_enabled(debug_enabled):
        out = m.utils.checkpoint.checkpoint(_changing_function(m), x, use_reentrant=False, debug=debug)
        with pytest.raises(m.utils.checkpoint.CheckpointError) as caught:
            out.backward()
    return str(caught.value)


@pytest.mark.parametrize("debug, debug_enabled", [(True, None), (False, True), (True, False)])
def test_debug_mode_reports_a_mismatch_with_the_ops_each_pass_ran(debug, debug_enabled):
    expected, message = _mismatch_message(torch, debug, debug_enabled), _mismatch_message(bg, debug, debug_enabled)
    logged = debug if debug_enabled is None else debug_enabled
    heading = "You are seeing this error because you passed `debug=True` to checkpoint"
    assert (heading in message) == (heading in expected) == logged
    if not logged:  # torch's message then adds a tip about torch.compile
        assert expected.startswith(message)
        return
    # the logs name batched_grad's ops (torch's name ATen operators) and the lines of this file that ran them
    forward, recompute = message.split("Operations executed during the original forward:")[1].split(
        "Operations executed during recomputation:"
    )
    assert forward.split() == ["sin(torch.float32[1])", "exp(torch.float32[1])"]
    assert recompute.split("+---")[0].split() == ["sin(torch.float32[1])", "mul(torch.float32[1],", "torch.float32[2])"]
    assert f"{__file__}:" in message
    banners = [[line for line in m.splitlines() if line.startswith(("+", "|"))] for m in (message, expected)]
    assert banners[0] == banners[1]
    assert message.split("+---")[-1] == expected.split("+---")[-1]


def test_non_reentrant_retain_graph_backward_twice_recomputes_again():
    for m in (bg, torch):
        x = m.tensor(X, requires_grad=True)
        y = m.utils.checkpoint.checkpoint(lambda t: m.sin(t).exp().sum(), x, use_reentrant=False)
        y.backward(retain_graph=True)
        first = x.grad.clone()
        y.backward()
        np.testing.assert_allclose(np.asarray(x.grad.detach().numpy()), 2 * np.asarray(first.numpy()), rtol=1e-12)


@VARIANTS
def test_dropout_draws_the_same_mask_in_the_recomputation(reentrant):
    """The random streams differ from torch's, so the check is torch's property: the gradient is the one of the
    mask the forward drew: zero where the output is zero, 32x elsewhere."""
    for m in (bg, torch):
        m.manual_seed(3)
        drop = m.nn.Dropout(0.5)
        x = m.tensor(X, requires_grad=True)
        y = m.utils.checkpoint.checkpoint(lambda t: drop(2 * t) ** 2, x, use_reentrant=reentrant)
        y.sum().backward()
        kept = np.asarray(y.detach().numpy()) != 0
        expected = np.where(kept, 32 * X, 0.0)  # d/dx (2 * 2x)^2 = 32x where kept (the scale 1/(1-p) is 2)
        np.testing.assert_allclose(np.asarray(x.grad.numpy()), expected, rtol=1e-12)
        assert 0 < kept.sum() < kept.size


def _sequential(m, reentrant):
    first, second = _two_layers(m)
    model = m.nn.Sequential(first, m.nn.Tanh(), second, m.nn.Sigmoid())
    x = m.tensor(X, dtype=m.float32, requires_grad=True)
    y = m.utils.checkpoint.checkpoint_sequential(model, 2, x, use_reentrant=reentrant)
    y.sum().backward()
    return y, x.grad, first.weight.grad, second.bias.grad


@VARIANTS
def test_checkpoint_sequential_matches_torch(reentrant):
    assert_same(_sequential(bg, reentrant), _sequential(torch, reentrant), rtol=1e-5, atol=1e-6)


def _warnings_of(m, call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(m)
    return [str(w.message) for w in caught]


def test_missing_use_reentrant_warns_as_torch_and_runs_reentrant():
    def call(m):
        x = m.tensor(X, requires_grad=True)
        y = m.utils.checkpoint.checkpoint(lambda t: t.sin(), x)
        m.autograd.grad(y.sum(), x)  # the reentrant variant refuses it

    ours = _warnings_of(bg, lambda m: raises_like_torch(call))
    assert ours and all(w == ours[0] for w in ours)
    theirs = _warnings_of(torch, lambda m: torch.utils.checkpoint.checkpoint(lambda t: t, torch.ones(1)))
    assert ours[0] in theirs


def test_no_input_requiring_grad_warns_in_the_reentrant_variant():
    def call(m):
        m.utils.checkpoint.checkpoint(lambda t: t * 2, m.ones(2), use_reentrant=True)

    assert _warnings_of(bg, call) == _warnings_of(torch, call)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.utils.checkpoint.checkpoint(lambda t, k: t, m.ones(1), k=1, use_reentrant=True),
        lambda m: m.utils.checkpoint.checkpoint(lambda t: t, m.ones(1), use_reentrant=True, debug=True),
        lambda m: m.utils.checkpoint.checkpoint(lambda t: t, m.ones(1), use_reentrant=False, determinism_check="x"),
        lambda m: m.utils.checkpoint.checkpoint_sequential([m.sin], 1, m.ones(1), use_reentrant=False, extra=1),
        lambda m: m.utils.checkpoint.detach_variable([m.ones(1)]),
    ],
    ids=["keyword_reentrant", "debug_reentrant", "determinism_check", "sequential_keyword", "detach_list"],
)
def test_argument_errors_match_torch(call):
    raises_like_torch(call)


def test_reentrant_backward_with_inputs_is_refused():
    def call(m):
        x = m.tensor(X, requires_grad=True)
        y = m.utils.checkpoint.checkpoint(lambda t: t.exp(), x, use_reentrant=True)
        y.sum().backward(inputs=[x])

    raises_like_torch(call)


def test_recomputation_saving_differently_raises_checkpoint_error():
    def call(m):
        calls = []

        def changing(t):  # saves three tensors the first time, one when recomputed
            calls.append(1)
            return t.exp() * t if len(calls) == 1 else t.exp()

        x = m.tensor(X, requires_grad=True)
        m.utils.checkpoint.checkpoint(changing, x, use_reentrant=False).sum().backward()

    ours, theirs = raises_like_torch(call)
    assert isinstance(ours, bg.utils.checkpoint.CheckpointError)
    assert isinstance(theirs, torch.utils.checkpoint.CheckpointError)


def test_import_forms():
    assert imported_checkpoint is bg.utils.checkpoint.checkpoint


def _recomputations_in_a_group(m):
    calls = []

    def two_heads(t):
        calls.append(1)
        return t.sin() * 2, t.cos() * 3

    x = m.tensor(X, requires_grad=True)
    with m.utils.checkpoint.GraphExecGroup():
        a, b = m.utils.checkpoint.checkpoint(two_heads, x, use_reentrant=False)
        a.sum().backward()
        b.sum().backward()
    return len(calls), x.grad


def test_graph_exec_group_recomputes_once_for_several_backward_calls():
    (ours, grad), (theirs, t_grad) = _recomputations_in_a_group(bg), _recomputations_in_a_group(torch)
    assert ours == theirs
    assert_same(grad, t_grad)


def _batched_and_second_order(m):
    x = m.tensor(X, requires_grad=True)
    y = m.utils.checkpoint.checkpoint(lambda t: (t.sin() * t).sum(1), x, use_reentrant=False)
    (rows,) = m.autograd.grad(y, x, m.eye(2, dtype=m.float64), is_grads_batched=True)

    def energy(t):
        return m.utils.checkpoint.checkpoint(lambda u: (u.exp() * u).sum(), t, use_reentrant=False)

    return rows, m.autograd.functional.hessian(energy, m.tensor([0.1, 0.2], dtype=m.float64))


def test_non_reentrant_with_batched_grads_and_hessian():
    assert_same(_batched_and_second_order(bg), _batched_and_second_order(torch))


def _batch_norm_inside(m, reentrant):
    """The recomputation runs the batch norm again, so its running statistics move twice, as torch's do."""
    bn = m.nn.BatchNorm1d(4, momentum=0.5)
    x = m.tensor(X, dtype=m.float32, requires_grad=True)
    y = m.utils.checkpoint.checkpoint(lambda t: bn(t).tanh(), x, use_reentrant=reentrant)
    y.pow(2).sum().backward()
    return x.grad, bn.running_mean, bn.running_var, int(bn.num_batches_tracked)


@VARIANTS
def test_batch_norm_statistics_update_in_the_recomputation_as_torch(reentrant):
    ours, theirs = _batch_norm_inside(bg, reentrant), _batch_norm_inside(torch, reentrant)
    assert ours[3] == theirs[3]
    assert_same(ours[:3], theirs[:3], rtol=1e-5, atol=1e-6)


def _context_fn_log(m):
    import contextlib

    log = []

    @contextlib.contextmanager
    def tagged(name):
        log.append(f"enter {name}")
        yield
        log.append(f"exit {name}")

    x = m.tensor(X, requires_grad=True)
    y = m.utils.checkpoint.checkpoint(
        lambda t: (log.append("run"), t.exp())[1],
        x,
        use_reentrant=False,
        context_fn=lambda: (tagged("forward"), tagged("recompute")),
    )
    y.sum().backward()
    return log, x.grad


def test_context_fn_wraps_the_forward_and_the_recomputation():
    ours, theirs = _context_fn_log(bg), _context_fn_log(torch)
    assert ours[0] == theirs[0]
    assert_same(ours[1], theirs[1])


def _inputs_without_grad(m):
    """torch's known pitfall: the reentrant variant's output needs an input requiring grad; parameters inside the
    function are not enough. The non-reentrant variant records them."""
    layer = m.nn.Linear(2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reentrant = m.utils.checkpoint.checkpoint(layer, m.ones(1, 2), use_reentrant=True)
    plain = m.utils.checkpoint.checkpoint(layer, m.ones(1, 2), use_reentrant=False)
    plain.sum().backward()
    doubled, three = m.utils.checkpoint.checkpoint(lambda t: (t * 2, 3), m.ones(2, requires_grad=True), use_reentrant=1)
    return reentrant.requires_grad, plain.requires_grad, layer.weight.grad is not None, three, doubled.requires_grad


def test_which_outputs_require_grad_matches_torch():
    assert _inputs_without_grad(bg) == _inputs_without_grad(torch) == (False, True, True, 3, True)


def _keeps_what_it_saved(m, seen):
    """A Function that saves its second input and, in backward, records what it reads back."""

    class KeepSecond(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, kept):
            ctx.save_for_backward(kept)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            seen.append(ctx.saved_tensors[0])
            return grad * 2, None

    return KeepSecond


def test_recomputation_reads_back_the_input_tensors_themselves():
    for m in (torch, bg):
        seen = []
        keep = _keeps_what_it_saved(m, seen)
        a, b = m.tensor(1.5, requires_grad=True), m.tensor(3.0)
        m.utils.checkpoint.checkpoint(keep.apply, a, b, use_reentrant=False).backward()
        assert seen[0] is b, m.__name__


def test_early_stopped_recomputation_leaves_no_cycle():
    """The recomputation stops at the last tensor the backward needs, inside a Function's saving of its output: that
    output, once the backward is done, is freed by reference counting alone (no collector), as torch's."""
    import gc
    import weakref

    for m in (torch, bg):
        refs = []

        class SavesItsOutput(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.clone()
                ctx.save_for_backward(y)
                refs.append(weakref.ref(y))
                return y

            @staticmethod
            def backward(ctx, grad):
                _ = ctx.saved_tensors
                return grad

        x = m.ones(3, requires_grad=True)
        gc.disable()
        try:
            m.utils.checkpoint.checkpoint(SavesItsOutput.apply, x, use_reentrant=False).sum().backward()
            assert [r() for r in refs] == [None, None], m.__name__
        finally:
            gc.enable()


def _graph_nodes_alive_after(m, fn):
    """The names of the nodes of fn(x)'s graph (x a fresh leaf) that outlive the call, with the collector off: each
    node is tagged with a weakly watched object in its metadata."""
    import gc
    import weakref

    class Tag:
        def __init__(self, name):
            self.name = name

    def run():
        out = fn(m.tensor(0.7, requires_grad=True))
        tags, seen, todo = [], {out.grad_fn}, [out.grad_fn]
        while todo:
            node = todo.pop()
            tag = node.metadata["tag"] = Tag(node.name())
            tags.append(weakref.ref(tag))
            for child, _ in node.next_functions:
                if child is not None and child not in seen:
                    seen.add(child)
                    todo.append(child)
        return tags

    gc.disable()
    try:
        return sorted(t().name for t in run() if t() is not None)
    finally:
        gc.enable()


def _grad_of_nested_checkpoints(m):
    def ckpt(fn):
        return lambda x: m.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)

    def inner(x):
        return x.sin().exp().sin()  # exp saves its result

    def grad_of(x):
        (g,) = m.autograd.grad(ckpt(ckpt(inner))(x), x, create_graph=True)
        return g

    return grad_of


@pytest.mark.parametrize("early_stop", [True, False])
def test_a_gradient_through_recomputed_checkpoints_frees_its_graph(early_stop):
    """create_graph through a recomputation whose ops saved their results: the recomputed graph holds no cycle."""
    for m in (torch, bg):
        with m.utils.checkpoint.set_checkpoint_early_stop(early_stop):
            assert _graph_nodes_alive_after(m, _grad_of_nested_checkpoints(m)) == [], m.__name__


def _recomputations(m, early_stop, local):
    calls = {"outer": 0, "inner": 0}

    def ckpt(fn, **kwargs):
        return lambda x: m.utils.checkpoint.checkpoint(fn, x, use_reentrant=False, **kwargs)

    def inner(x):
        calls["inner"] += 1
        return x.sin().exp().clone()  # clone saves nothing: an early stop skips it

    def outer(x):
        calls["outer"] += 1
        return ckpt(inner, **local)(x.cos()).exp()

    x = m.tensor([0.3, 0.7], requires_grad=True)
    with m.utils.checkpoint.set_checkpoint_early_stop(early_stop):
        (g,) = m.autograd.grad(ckpt(outer)(x).sum(), x, create_graph=True)
    g.sum().backward()
    return calls, x.grad


@pytest.mark.parametrize("early_stop", [True, False])
@pytest.mark.parametrize("local", [{}, {"early_stop": True}, {"early_stop": False}], ids=["default", "on", "off"])
def test_nested_checkpoints_recompute_as_often_as_torchs(early_stop, local):
    ours, theirs = _recomputations(bg, early_stop, local), _recomputations(torch, early_stop, local)
    assert ours[0] == theirs[0]
    assert_same(ours[1], theirs[1])


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("enabled", [True, False])
def test_the_recomputation_runs_in_the_forwards_autocast_region(reentrant, enabled):
    """backward() outside the autocast region: the recomputed products are bfloat16 again where the forward's were,
    as torch's checkpoint restores the region (otherwise the saved and recomputed dtypes differ)."""
    got = {}
    for lib in (bg, torch):
        dtypes = []

        def chain(x, y, z, lib=lib, dtypes=dtypes):
            out = lib.mm(lib.mm(lib.mm(x, y), z), z)
            dtypes.append(str(out.dtype))
            return out

        x, y, z = (lib.full((3, 3), 0.5 + k, requires_grad=True) for k in range(3))
        with lib.autocast("cpu", dtype=lib.bfloat16, enabled=enabled):
            loss = lib.utils.checkpoint.checkpoint(chain, x, y, z, use_reentrant=reentrant).float().sum()
        loss.backward()
        got[lib] = (dtypes, [np.asarray(t.grad.tolist()) for t in (x, y, z)])
    assert got[bg][0] == got[torch][0]
    for ours, theirs in zip(got[bg][1], got[torch][1]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-2)
