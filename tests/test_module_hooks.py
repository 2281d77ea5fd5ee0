"""Module hooks against torch.nn.Module's: forward pre-hooks and hooks (replacing arguments and results, kwargs,
prepend, always_call, removal, global hooks), full backward pre-hooks and hooks (grad_input/grad_output, replacing
them, with backward, autograd.grad and is_grads_batched), and per-sample gradients captured by hooks."""

import inspect
import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


def _linear(lib, n_in=3, n_out=2, seed=0):
    """A float64 Linear with the same weights in both libraries."""
    rng = np.random.default_rng(seed)
    layer = lib.nn.Linear(n_in, n_out).double()
    with lib.no_grad():
        layer.weight.copy_(lib.tensor(rng.standard_normal((n_out, n_in))))
        layer.bias.copy_(lib.tensor(rng.standard_normal(n_out)))
    return layer


def _input(lib, *shape, seed=1, requires_grad=True):
    values = np.random.default_rng(seed).standard_normal(shape)
    return lib.tensor(values, requires_grad=requires_grad)


def test_forward_hooks_replace_arguments_and_result_in_order():
    def run(lib):
        layer, calls = _linear(lib), []
        layer.register_forward_pre_hook(lambda m, args: calls.append("pre") or (args[0] * 2,))
        layer.register_forward_pre_hook(lambda m, args: calls.append("first"), prepend=True)
        layer.register_forward_hook(lambda m, args, out: calls.append("post") or out + args[0].sum())
        handle = layer.register_forward_hook(lambda m, args, out: calls.append("removed"))
        handle.remove()
        return layer(_input(lib, 4, 3)), calls, len(layer._forward_hooks), len(layer._forward_pre_hooks)

    (out, calls, n_hooks, n_pre), (want, want_calls, *want_counts) = run(bg), run(torch)
    assert_same(out, want)
    assert calls == want_calls == ["first", "pre", "post"]
    assert [n_hooks, n_pre] == want_counts


def test_forward_hooks_with_kwargs():
    class Scale(bg.nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale

    class TorchScale(torch.nn.Module):
        forward = Scale.forward

    def run(lib, module):
        module.register_forward_pre_hook(lambda m, args, kwargs: (args, {"scale": 3.0}), with_kwargs=True)
        seen = []
        module.register_forward_hook(lambda m, args, kwargs, out: seen.append(kwargs["scale"]), with_kwargs=True)
        return module(lib.ones(2), scale=2.0), seen

    (out, seen), (want, want_seen) = run(bg, Scale()), run(torch, TorchScale())
    assert_same(out, want)
    assert seen == want_seen == [3.0]
    raises_like_torch(lambda lib: _bad_pre_hook(lib)(lib.ones(3)))


def _bad_pre_hook(lib):
    layer = lib.nn.Identity()
    layer.register_forward_pre_hook(lambda m, args, kwargs: args, with_kwargs=True)
    return layer


def test_always_call_hook_runs_when_forward_raises():
    def run(lib):
        class Failing(lib.nn.Module):
            def forward(self, x):
                raise ValueError("no")

        module, seen = Failing(), []
        module.register_forward_hook(lambda m, args, out: seen.append(out), always_call=True)
        module.register_forward_hook(lambda m, args, out: seen.append("plain"))
        with pytest.raises(ValueError):
            module(lib.ones(1))
        return seen

    assert run(bg) == run(torch) == [None]


def test_global_forward_hook_runs_first_and_is_removable():
    def run(lib):
        calls = []
        layer = lib.nn.Identity()
        layer.register_forward_hook(lambda m, args, out: calls.append("own"))
        handle = lib.nn.modules.module.register_module_forward_hook(lambda m, args, out: calls.append("global"))
        layer(lib.ones(1))
        handle.remove()
        layer(lib.ones(1))
        return calls

    assert run(bg) == run(torch) == ["global", "own", "own"]


def _recorded_backward(lib, layer):
    records = {"pre": [], "hook": []}
    layer.register_full_backward_pre_hook(lambda m, g_out: records["pre"].append(g_out))
    layer.register_full_backward_hook(lambda m, g_in, g_out: records["hook"].append((g_in, g_out)))
    return records


def test_full_backward_hook_sees_grad_input_and_grad_output():
    def run(lib):
        layer, x = _linear(lib), _input(lib, 4, 3)
        records = _recorded_backward(lib, layer)
        (layer(x) ** 2).sum().backward()
        (g_in,), (g_out,) = records["hook"][0]
        return records["pre"][0][0], g_in, g_out, x.grad, layer.weight.grad

    for got, want in zip(run(bg), run(torch)):
        assert_same(got, want)


def test_full_backward_hook_replaces_grad_input_and_pre_hook_grad_output():
    def run(lib):
        layer, x = _linear(lib), _input(lib, 4, 3)
        layer.register_full_backward_pre_hook(lambda m, g_out: (g_out[0] * 10,))
        layer.register_full_backward_hook(lambda m, g_in, g_out: (g_in[0] + 1,))
        (grad_x,) = lib.autograd.grad(layer(x).sum(), x)
        return grad_x

    assert_same(run(bg), run(torch))


def test_full_backward_hook_without_input_requiring_grad():
    def run(lib):
        layer, seen = _linear(lib), []
        layer.register_full_backward_hook(lambda m, g_in, g_out: seen.append((g_in, g_out[0].shape)))
        with pytest.warns(UserWarning, match="no inputs require gradients"):
            layer(_input(lib, 4, 3, requires_grad=False)).sum().backward()
        return seen

    assert [(g_in, tuple(shape)) for g_in, shape in run(bg)] == [(g_in, tuple(s)) for g_in, s in run(torch)]


@pytest.mark.parametrize("register", ["register_full_backward_hook", "register_full_backward_pre_hook"])
def test_no_input_requiring_grad_warning_names_the_backward_line(register):
    """torch warns from its engine, so the warning points at the line that ran backward; a module with only a
    backward pre-hook warns too."""

    def run(lib):
        layer = _linear(lib)
        getattr(layer, register)(lambda *args: None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            layer(_input(lib, 4, 3, requires_grad=False)).sum().backward()
            line = inspect.currentframe().f_lineno - 1
        return [(w.filename, w.lineno == line, str(w.message)) for w in caught]

    assert run(bg) == run(torch) != []


class _TwoOutputs:
    """A module returning two tensors, built for either library."""

    def __new__(cls, lib):
        class Split(lib.nn.Module):
            def forward(self, x):
                return x * 2, x * 3

        return Split()


IN_PLACE_AFTER_HOOK = {
    "in-place ReLU after a hooked conv": lambda lib, x: lib.nn.Sequential(
        _hooked(lib.nn.Conv1d(2, 2, 1)), lib.nn.ReLU(inplace=True)
    )(x),
    "hooked in-place ReLU": lambda lib, x: _hooked(lib.nn.ReLU(inplace=True))(x),
    "one of two hooked outputs": lambda lib, x: _hooked(_TwoOutputs(lib))(x)[1].add_(1),
    "under no_grad": lambda lib, x: _no_grad_write(lib, _hooked(lib.nn.Conv1d(2, 2, 1))(x)),
}


def _hooked(module):
    module.register_full_backward_hook(lambda *args: None)
    return module


def _no_grad_write(lib, out):
    with lib.no_grad():
        out.mul_(2)
    return out


@pytest.mark.parametrize("case", IN_PLACE_AFTER_HOOK)
def test_in_place_write_into_a_hooked_modules_tensors_as_torch(case):
    """A module's full backward hooks route its inputs and outputs through an identity Function that returns them
    as-is: torch forbids writing them in place while recording (the classic in-place ReLU after a hooked layer)."""

    def run(lib):
        x = lib.ones(1, 2, 3, requires_grad=True)
        try:
            IN_PLACE_AFTER_HOOK[case](lib, x * 1).sum().backward()
        except RuntimeError as error:
            return str(error)
        return x.grad.tolist()

    assert run(bg) == run(torch)


def test_backward_hook_wrong_count_raises_as_torch():
    def run(lib):
        layer = _linear(lib)
        layer.register_full_backward_hook(lambda m, g_in, g_out: (g_in[0], g_in[0]))
        layer(_input(lib, 2, 3)).sum().backward()

    raises_like_torch(run)


@pytest.mark.slow
def test_full_backward_hook_sees_rows_with_batched_grads():
    def run(lib):
        layer, x = _linear(lib), _input(lib, 4, 3)
        records = _recorded_backward(lib, layer)
        cotangents = lib.tensor(np.random.default_rng(5).standard_normal((6, 4, 2)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (grads,) = lib.autograd.grad(layer(x), x, cotangents, is_grads_batched=True)
        (g_in,), (g_out,) = records["hook"][-1]
        return grads, tuple(g_in.shape), tuple(g_out.shape)

    (grads, in_shape, out_shape), (want, want_in, want_out) = run(bg), run(torch)
    assert_same(grads, want)
    assert (in_shape, out_shape) == (want_in, want_out) == ((4, 3), (4, 2))


def _per_sample_gradients(lib, model, x, target):
    """Per-sample weight gradients of every Linear from activations (forward hooks) and output gradients (full
    backward hooks), as the per-sample-gradient libraries compute them."""
    activations, output_grads = {}, {}
    for layer in model:
        if isinstance(layer, lib.nn.Linear):
            layer.register_forward_hook(lambda m, args, out: activations.__setitem__(m, args[0].detach()))
            layer.register_full_backward_hook(lambda m, g_in, g_out: output_grads.__setitem__(m, g_out[0]))
    loss = ((model(x) - target) ** 2).sum()
    loss.backward()
    return [lib.einsum("bo,bi->boi", output_grads[m], activations[m]) for m in model if m in activations]


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_per_sample_gradients_from_hooks_match_torch():
    def run(lib):
        model = lib.nn.Sequential(_linear(lib, 3, 5, seed=2), lib.nn.Tanh(), _linear(lib, 5, 2, seed=3))
        x, target = _input(lib, 4, 3, requires_grad=False), _input(lib, 4, 2, seed=4, requires_grad=False)
        per_sample = _per_sample_gradients(lib, model, x, target)
        return per_sample, [model[0].weight.grad, model[2].weight.grad]

    (got, got_sums), (want, _) = run(bg), run(torch)
    for g, w, total in zip(got, want, got_sums):
        assert_same(g, w)
        assert_same(g.sum(0), total)  # the per-sample gradients add up to the batch's gradient


def test_removable_handle_importable_as_torch():
    assert bg.utils.hooks.RemovableHandle.__name__ == torch.utils.hooks.RemovableHandle.__name__
    layer = bg.nn.Identity()
    with layer.register_forward_hook(lambda m, args, out: out * 2):
        assert_same(layer(bg.ones(2)), torch.full((2,), 2.0))
    assert_same(layer(bg.ones(2)), torch.ones(2))


def test_backward_hook_result_is_differentiated_again_with_create_graph():
    def run(lib):
        layer, x = _linear(lib), _input(lib, 2, 3)
        layer.register_full_backward_hook(lambda m, g_in, g_out: (g_in[0] * g_in[0],))
        (grad_x,) = lib.autograd.grad((layer(x) ** 2).sum(), x, create_graph=True)
        (second,) = lib.autograd.grad(grad_x.sum(), x)
        return grad_x, second

    for got, want in zip(run(bg), run(torch)):
        assert_same(got, want)


def test_module_unpickled_without_hook_registries_gets_them():
    layer = bg.nn.Linear(3, 2)
    state = {k: v for k, v in layer.__dict__.items() if "hooks" not in k}
    restored = bg.nn.Linear.__new__(bg.nn.Linear)
    restored.__setstate__(state)
    assert restored._forward_hooks == {} and tuple(restored(bg.ones(1, 3)).shape) == (1, 2)


def _hook_calls_in_double_backward(lib):
    """How many times a loss module's full backward hook runs in a first backward with create_graph and then in a
    backward of that gradient (which reaches the input through what the loss saved, not through its output)."""
    x = _input(lib, 3)
    target = _input(lib, 3, seed=2, requires_grad=False)
    loss = lib.nn.MSELoss()
    calls = []
    loss.register_full_backward_hook(lambda module, grad_input, grad_output: calls.append("hook"))
    (gradient,) = lib.autograd.grad(loss(x, target), x, create_graph=True)
    first = len(calls)
    (second,) = lib.autograd.grad(gradient.sum(), x)
    return first, len(calls), second


def test_full_backward_hook_does_not_run_again_in_a_double_backward():
    ours, theirs = _hook_calls_in_double_backward(bg), _hook_calls_in_double_backward(torch)
    assert ours[:2] == theirs[:2] == (1, 1)
    assert_same(ours[2], theirs[2])
