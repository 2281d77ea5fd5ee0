"""Lazy modules against torch 2.13: placeholders until the first forward (repr, state_dict, the shape error), then
the sizes read from the input, torch's initialization for the same seed, the eager class, the hooks gone; an
optimizer built before the first forward, load_state_dict into a lazy module, and a user's own LazyModuleMixin."""

import copy

import numpy as np
import pytest
import torch

import batched_grad as bg

CASES = {
    "LazyLinear": (lambda nn: nn.LazyLinear(3), (2, 5)),
    "LazyLinear-no-bias": (lambda nn: nn.LazyLinear(3, bias=False), (4, 2, 5)),
    "LazyConv1d": (lambda nn: nn.LazyConv1d(4, 3, padding=1), (2, 3, 7)),
    "LazyConv2d-unbatched": (lambda nn: nn.LazyConv2d(4, 3, groups=2), (2, 6, 6)),
    "LazyConv3d": (lambda nn: nn.LazyConv3d(2, 2), (1, 3, 4, 4, 4)),
    "LazyConvTranspose1d": (lambda nn: nn.LazyConvTranspose1d(4, 3, groups=2), (2, 6, 5)),
    "LazyConvTranspose2d": (lambda nn: nn.LazyConvTranspose2d(2, 3, stride=2), (1, 3, 4, 4)),
    "LazyBatchNorm1d": (lambda nn: nn.LazyBatchNorm1d(), (4, 3)),
    "LazyBatchNorm2d-no-affine": (lambda nn: nn.LazyBatchNorm2d(affine=False), (2, 3, 4, 4)),
    "LazyInstanceNorm2d": (lambda nn: nn.LazyInstanceNorm2d(), (2, 3, 4, 4)),
    "LazyInstanceNorm1d-no-stats": (lambda nn: nn.LazyInstanceNorm1d(track_running_stats=False, bias=False), (2, 3, 5)),
}


def state(module):
    return {k: v if isinstance(v, str) else np.asarray(v.detach().numpy()) for k, v in module.state_dict().items()}


def run(lib, make, shape):
    """What a lazy module shows before and after its first forward, with lib."""
    lib.manual_seed(0)
    module = make(lib.nn)
    before = (repr(module), type(module).__name__, [(k, repr(v)) for k, v in module.state_dict().items()])
    x = lib.tensor(np.random.default_rng(1).standard_normal(shape), dtype=lib.float32)
    out = module(x).detach().numpy()
    after = (repr(module), type(module).__name__, len(module._forward_pre_hooks))
    return before, after, out, state(module)


@pytest.mark.parametrize("case", CASES)
def test_a_lazy_module_initializes_as_torch(case):
    make, shape = CASES[case]
    ours, theirs = run(bg, make, shape), run(torch, make, shape)
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)
    assert ours[3].keys() == theirs[3].keys()
    for key in theirs[3]:
        np.testing.assert_allclose(ours[3][key], theirs[3][key], rtol=1e-6, atol=1e-7, err_msg=key)


def test_the_placeholders_have_no_shape():
    for lib in (torch, bg):
        weight = lib.nn.LazyLinear(2).weight
        assert isinstance(weight, lib.nn.UninitializedParameter) and isinstance(weight, lib.nn.Parameter)
        with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
            _ = weight.shape


def test_an_optimizer_built_before_the_first_forward_steps_the_materialized_parameters():
    results = []
    for lib in (torch, bg):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.LazyLinear(4), lib.nn.Tanh(), lib.nn.LazyLinear(1))
        opt = lib.optim.Adam(model.parameters(), lr=0.1)
        x = lib.ones(3, 2)
        for _ in range(3):
            opt.zero_grad()
            model(x).pow(2).sum().backward()
            opt.step()
        results.append([p.detach().numpy().copy() for p in model.parameters()])
    for ours, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_load_state_dict_materializes_a_lazy_module():
    for lib in (torch, bg):
        source = lib.nn.Linear(5, 3)
        lazy = lib.nn.LazyLinear(3)
        lazy.load_state_dict(source.state_dict())
        assert type(lazy).__name__ == "LazyLinear" and tuple(lazy.weight.shape) == (3, 5)
        np.testing.assert_array_equal(lazy.weight.detach().numpy(), source.weight.detach().numpy())
        lazy(lib.ones(1, 5))
        assert type(lazy).__name__ == "Linear"


def test_a_deep_copy_before_the_first_forward_stays_lazy():
    for lib in (torch, bg):
        copied = copy.deepcopy(lib.nn.LazyConv2d(2, 3))
        assert type(copied.weight).__name__ == "UninitializedParameter"
        copied(lib.ones(1, 1, 4, 4))
        assert tuple(copied.weight.shape) == (2, 1, 3, 3)


@pytest.mark.parametrize(
    "call",
    [
        lambda nn, lib: nn.LazyConv2d(4, 3)(lib.ones(2, 3)),
        lambda nn, lib: nn.LazyConv1d(4, 3, groups=2)(lib.ones(1, 3, 5)),
    ],
)
def test_errors_as_torch(call):
    messages = []
    for lib in (torch, bg):
        with pytest.raises((RuntimeError, ValueError)) as caught:
            call(lib.nn, lib)
        messages.append((type(caught.value), str(caught.value)))
    assert messages[0][1] == messages[1][1]


def test_a_users_lazy_module():
    for lib in (torch, bg):

        class LazyScale(lib.nn.modules.lazy.LazyModuleMixin, lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = lib.nn.UninitializedParameter()

            def initialize_parameters(self, x):
                if self.has_uninitialized_params():
                    with lib.no_grad():
                        self.scale.materialize(x.shape[-1:])
                        self.scale.fill_(2.0)

            def forward(self, x):
                return x * self.scale

        module = LazyScale()
        assert module.has_uninitialized_params()
        assert module(lib.ones(2, 3)).sum().item() == 12.0
        assert not module.has_uninitialized_params() and len(module._forward_pre_hooks) == 0


@pytest.mark.parametrize("convert", ["to_device", "to_dtype", "double", "cpu_then_half_then_double"])
def test_a_lazy_module_converted_before_its_first_forward(convert):
    """d2l moves a model of lazy layers with net.to(device=try_gpu()) before any input: the placeholders stay
    placeholders (a buffer's too), take the dtype, and the first forward materializes them in it."""

    def run(m):
        m.manual_seed(0)
        model = m.nn.Sequential(m.nn.LazyLinear(3), m.nn.LazyBatchNorm1d())
        if convert == "to_device":
            model = model.to(device=m.device("cpu"))
        elif convert == "to_dtype":
            model.to(m.float64)
        elif convert == "double":
            model.double()
        else:
            model.cpu().half().double()
        kinds = [type(t).__name__ for t in (model[0].weight, model[1].running_mean)]
        dtype = m.float32 if convert == "to_device" else m.float64
        out = model(m.linspace(-1, 1, 8, dtype=dtype).reshape(2, 4))
        return kinds, out, model[1].running_var

    (kinds, out, var), (want_kinds, want_out, want_var) = run(bg), run(torch)
    assert kinds == want_kinds
    np.testing.assert_allclose(out.detach().numpy(), want_out.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(var.numpy(), want_var.numpy(), rtol=1e-6)
    assert out.dtype.is_floating_point and repr(out.dtype) == repr(want_out.dtype)


@pytest.mark.parametrize("device", [None, "cpu", "meta"])
@pytest.mark.parametrize(
    "make, shape",
    [
        (lambda m, device: m.nn.LazyLinear(3, device=device), (2, 4)),
        (lambda m, device: m.nn.LazyConv2d(2, 3, device=device), (1, 2, 5, 5)),
        (lambda m, device: m.nn.LazyBatchNorm1d(device=device), (4, 3)),
    ],
    ids=["linear", "conv2d", "batchnorm"],
)
def test_placeholders_report_and_materialize_on_the_device_asked_for(make, shape, device):
    """`next(model.parameters()).device` before the first forward (the usual way to pick the input's device) is the
    device the lazy module was made for, and the first forward makes its values there, as torch's."""
    for m in (torch, bg):
        module = make(m, device)
        tensors = list(module.parameters()) + list(module.buffers())
        where = next(module.parameters()).device
        assert str(where) == (device or "cpu")
        module(m.ones(shape, device=where))
        made = list(module.parameters()) + list(module.buffers())
        assert [str(t.device) for t in tensors + made] == [device or "cpu"] * (2 * len(tensors))
