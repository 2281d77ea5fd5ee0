"""Module.to / cpu / cuda / float / double / half / bfloat16 / type against torch.nn.Module's: which parameters,
buffers and gradients change dtype, which objects stay the same, the argument forms torch accepts and its errors;
"cuda" where JAX has no GPU raises as torch without CUDA does."""

import warnings

import jax
import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch

HAS_GPU = any(d.platform == "gpu" for d in jax.devices())


def _model(m):
    """Float parameters and buffers, an integer buffer and a gradient to convert."""
    model = m.nn.Sequential(m.nn.Linear(3, 2), m.nn.BatchNorm1d(2))
    model.register_buffer("count", m.tensor([1, 2]))
    model[0].weight.grad = m.ones(2, 3)
    return model


def _dtypes(model):
    """The dtype of every parameter, gradient and buffer, by name."""
    found = {name: repr(p.dtype) for name, p in model.named_parameters()}
    found.update({name + ".grad": repr(p.grad.dtype) for name, p in model.named_parameters() if p.grad is not None})
    found.update({name: repr(b.dtype) for name, b in model.named_buffers()})
    return found


def _identities(model):
    """Which parameters, gradients and buffers are still the same objects after a conversion."""
    params = {name: (p, p.grad) for name, p in model.named_parameters()}
    buffers = dict(model.named_buffers())
    return lambda: (
        {name: (p is params[name][0], p.grad is params[name][1]) for name, p in model.named_parameters()},
        {name: b is buffers[name] for name, b in model.named_buffers()},
    )


CONVERSIONS = {  # name: (convert(module, model), same objects expected as torch)
    "to_dtype": lambda m, model: model.to(m.float64),
    "to_dtype_keyword": lambda m, model: model.to(dtype=m.float16),
    "to_device_and_dtype": lambda m, model: model.to("cpu", m.float64),
    "to_device_keywords": lambda m, model: model.to(device="cpu", dtype=m.bfloat16, non_blocking=True),
    "to_device_object": lambda m, model: model.to(m.device("cpu"), m.float64),
    "to_device_only": lambda m, model: model.to("cpu"),
    "to_none": lambda m, model: model.to(None),
    "to_tensor": lambda m, model: model.to(m.zeros(1, dtype=m.float64)),
    "to_dtype_non_blocking": lambda m, model: model.to(m.float64, True),
    "double": lambda m, model: model.double(),
    "float_after_double": lambda m, model: model.double().float(),
    "half": lambda m, model: model.half(),
    "bfloat16": lambda m, model: model.bfloat16(),
    "cpu": lambda m, model: model.cpu(),
    "type_dtype": lambda m, model: model.type(m.float64),
    "type_name": lambda m, model: model[1].type("torch.DoubleTensor"),
}


@pytest.mark.parametrize("name", sorted(CONVERSIONS))
def test_conversions_change_what_torchs_change(name):
    results = []
    for m in (bg, torch):
        model = _model(m)
        same = _identities(model)
        returned = CONVERSIONS[name](m, model)
        results.append((returned is model or returned is model[1], _dtypes(model), same()))
    assert results[0] == results[1]


def test_converted_module_computes_in_the_new_dtype_and_keeps_its_optimizer():
    model = bg.nn.Linear(3, 2)
    opt = bg.optim.SGD(model.parameters(), lr=0.1)
    model.to(bg.float64)
    x = bg.ones(4, 3, dtype=bg.float64)
    model(x).sum().backward()
    assert model.weight.grad.dtype is bg.float64
    before = model.weight.detach().clone()
    opt.step()  # the optimizer holds the same Parameter objects, now float64
    assert model.weight.dtype is bg.float64
    assert (model.weight - before).abs().max().item() == pytest.approx(0.4)


def test_complex_dtype_warns_as_torch_and_converts_floats():
    messages = []
    for m in (bg, torch):
        model = _model(m)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.to(m.complex64)
        messages.append(([str(w.message) for w in caught], _dtypes(model)))
    assert messages[0] == messages[1]


@pytest.mark.parametrize(
    "case",
    [
        lambda m: m.nn.Linear(1, 1).to(m.int64),
        lambda m: m.nn.Linear(1, 1).to(dtype=m.int32),
        lambda m: m.nn.Linear(1, 1).to(m.zeros(1, dtype=m.int64)),
        lambda m: m.nn.Linear(1, 1).to("cpu", m.float64, True, 3),
        lambda m: m.nn.Linear(1, 1).to(m.float64, "cpu"),
        lambda m: m.nn.Linear(1, 1).to(m.float64, dtype=m.float32),
        lambda m: m.nn.Linear(1, 1).to("cpu", device="cpu"),
        lambda m: m.nn.Linear(1, 1).to("cpu", "cpu"),
        lambda m: m.nn.Linear(1, 1).to(foo=1),
        lambda m: m.nn.Linear(1, 1).to("foo"),
        lambda m: m.nn.Linear(1, 1).to(copy=True),
        lambda m: m.nn.Linear(1, 1).to(m.float64, non_blocking=True, copy=True),
        lambda m: m.nn.Linear(1, 1).type("foo"),
        lambda m: m.nn.Linear(1, 1).type(5),
        lambda m: m.nn.Linear(1, 1).type(m.int64),
    ],
)
def test_bad_arguments_raise_like_torch(case):
    got, want = raises_like_torch(case)
    assert str(got).split("\n")[0] == str(want).split("\n")[0]


@pytest.mark.skipif(HAS_GPU, reason="JAX has a GPU here")
@pytest.mark.parametrize(
    "case",
    [
        lambda m: m.nn.Linear(1, 1).to("cuda"),
        lambda m: m.nn.Linear(1, 1).to("cuda:0", m.float64),
        lambda m: m.nn.Linear(1, 1).to(m.device("cuda", 1)),
        lambda m: m.nn.Linear(1, 1).cuda(),
        lambda m: m.nn.Linear(1, 1).cuda(0),
        lambda m: m.nn.Linear(1, 1).to(0),
    ],
)
def test_cuda_without_a_gpu_raises_what_torch_without_cuda_raises(case):
    with pytest.raises(Exception) as want:
        case(torch)
    with pytest.raises(type(want.value), match="GPU backend|accelerator"):
        case(bg)


@pytest.mark.skipif(HAS_GPU, reason="JAX has a GPU here")
def test_cuda_without_a_gpu_changes_nothing():
    model = bg.nn.Linear(1, 1)
    for convert in (lambda: model.to("cuda", bg.float64), lambda: model.type("torch.cuda.DoubleTensor")):
        with pytest.raises(AssertionError, match="no CUDA device: JAX has no GPU backend"):
            convert()
        assert model.weight.dtype is bg.float32


@pytest.mark.skipif(not HAS_GPU, reason="JAX has no GPU here")
def test_cuda_moves_parameters_to_jax_gpu_and_back():
    model = bg.nn.Linear(3, 2)
    model.register_buffer("count", bg.tensor([1, 2]))
    model.cuda()
    assert {p.device.type for p in model.parameters()} == {"cuda"} and model.count.device.type == "cuda"
    model.to("cpu", bg.float64)
    assert {(p.device.type, p.dtype) for p in model.parameters()} == {("cpu", bg.float64)}
    assert model.count.dtype is bg.int64


def test_other_device_types_name_what_is_missing():
    with pytest.raises(RuntimeError, match="not linked with support for mps devices"):
        bg.nn.Linear(1, 1).to("mps")
