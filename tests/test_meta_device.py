"""The meta device against torch 2.13: tensors with a shape and a dtype but no values, made by to('meta'), the
factories' device='meta' and Module.to('meta'); ops giving meta results; torch's device checks when meta meets other
tensors; torch's errors for reading values; gradients through meta tensors."""

import copy
import pickle

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch


def same_meta(got, want):
    """Both are meta tensors of the same shape, dtype, requires_grad and repr (so the same grad_fn name)."""
    assert want.is_meta and got.is_meta is True
    assert got.device == bg.device("meta") and str(got.device) == str(want.device) == "meta"
    assert tuple(got.shape) == tuple(want.shape) and str(got.dtype) == str(want.dtype)
    assert got.requires_grad is want.requires_grad and got.is_leaf is want.is_leaf
    assert repr(got) == repr(want)


# ---- making meta tensors ---------------------------------------------------------------------------------------
MADE = {
    "to": lambda m: m.ones(3, 4).to("meta"),
    "to-keyword": lambda m: m.ones(3, 4).to(device="meta"),
    "to-device-object": lambda m: m.ones(2).to(m.device("meta")),
    "to-with-dtype": lambda m: m.ones(2).to("meta", m.float64),
    "to-requiring-grad": lambda m: m.ones(3, requires_grad=True).to("meta"),
    "to-0d-int": lambda m: m.tensor(3).to("meta"),
    "to-empty-shape": lambda m: m.zeros(0, 3).to("meta"),
    "bool": lambda m: m.ones(3, dtype=m.bool).to("meta"),
    "complex": lambda m: m.ones(3, dtype=m.complex64).to("meta"),
    "half": lambda m: m.ones(3, dtype=m.float16).to("meta"),
    "empty": lambda m: m.empty(2, 3, device="meta"),
    "zeros": lambda m: m.zeros(2, 3, device="meta"),
    "ones-int": lambda m: m.ones(2, 3, dtype=m.int64, device="meta"),
    "full": lambda m: m.full((2, 3), 1.5, device="meta"),
    "full-int": lambda m: m.full((2,), 7, device="meta"),
    "randn": lambda m: m.randn(2, 3, device="meta"),
    "rand": lambda m: m.rand(2, 3, device="meta"),
    "randint": lambda m: m.randint(0, 5, (3,), device="meta"),
    "arange": lambda m: m.arange(5, device="meta"),
    "eye": lambda m: m.eye(3, device="meta"),
    "linspace": lambda m: m.linspace(0, 1, 5, device="meta"),
    "tensor": lambda m: m.tensor([1.0, 2.0], device="meta"),
    "zeros-requiring-grad": lambda m: m.zeros(2, device="meta", requires_grad=True),
    "huge": lambda m: m.empty(10**6, 10**6, device="meta"),  # no memory is allocated
    "empty_like-of-cpu": lambda m: m.empty_like(m.ones(3, 4), device="meta"),
    "long-repr": lambda m: (
        m.ones(2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, dtype=m.float64, device="meta", requires_grad=True) * 2
    ),
}


@pytest.mark.parametrize("make", MADE.values(), ids=MADE.keys())
def test_making_meta_tensors(make):
    same_meta(make(bg), make(torch))


LIKE = {
    "zeros_like": lambda m, t: m.zeros_like(t),
    "ones_like": lambda m, t: m.ones_like(t),
    "empty_like": lambda m, t: m.empty_like(t),
    "full_like": lambda m, t: m.full_like(t, 2),
    "rand_like": lambda m, t: m.rand_like(t),
    "randn_like": lambda m, t: m.randn_like(t),
    "randint_like": lambda m, t: m.randint_like(t, 5),
    "zeros_like-int": lambda m, t: m.zeros_like(t, dtype=m.int32),
    "new_zeros": lambda m, t: t.new_zeros(2),
    "new_ones": lambda m, t: t.new_ones(2, 3),
    "new_empty": lambda m, t: t.new_empty(2),
    "new_full": lambda m, t: t.new_full((2,), 3.0),
    "new_tensor": lambda m, t: t.new_tensor([1.0, 2.0]),
}


@pytest.mark.parametrize("make", LIKE.values(), ids=LIKE.keys())
def test_like_factories_keep_the_meta_device(make):
    same_meta(make(bg, bg.ones(3, 4).to("meta")), make(torch, torch.ones(3, 4).to("meta")))


def test_like_factories_leave_meta_when_asked():
    got, want = (
        bg.zeros_like(bg.ones(2).to("meta"), device="cpu"),
        torch.zeros_like(torch.ones(2).to("meta"), device="cpu"),
    )
    assert not got.is_meta and got.device == bg.device("cpu") and got.tolist() == want.tolist()


def test_meta_tensor_attributes():
    m, t = bg.ones(3, 4).to("meta"), torch.ones(3, 4).to("meta")
    assert m.to("meta") is m and t.to("meta") is t  # nothing to move
    assert m.type() == t.type() == "torch.meta.FloatTensor"
    assert m.is_cuda is t.is_cuda is False and m.get_device() == t.get_device() == -1
    assert len(m) == len(t) and m.numel() == t.numel() and m.element_size() == t.element_size()
    assert m.nbytes == t.nbytes and m.dim() == t.dim()
    assert str(m) == str(t) and isinstance(m.jax(), bg._meta.MetaValue)
    assert not bg.ones(2).is_meta and not torch.ones(2).is_meta


@pytest.mark.parametrize(
    "name, copy_", [("deepcopy", copy.deepcopy), ("pickle", lambda t: pickle.loads(pickle.dumps(t)))]
)
def test_copies_of_a_meta_tensor_stay_meta(name, copy_):
    same_meta(
        copy_(bg.ones(3, requires_grad=True).to("meta").detach().requires_grad_()),
        copy_(torch.ones(3, requires_grad=True).to("meta").detach().requires_grad_()),
    )


# ---- ops on meta tensors ------------------------------------------------------------------------------------------
OPS = {
    "mul-number": lambda m, x: x * 2,
    "add": lambda m, x: x + x,
    "matmul": lambda m, x: x @ x.T,
    "sum": lambda m, x: x.sum(),
    "sum-dim": lambda m, x: x.sum(0),
    "mean": lambda m, x: x.mean(1, keepdim=True),
    "eq": lambda m, x: x == x,
    "index": lambda m, x: x[0],
    "slice": lambda m, x: x[:, 1:3],
    "index-cpu-tensor": lambda m, x: x[m.tensor([0, 2])],
    "clone": lambda m, x: x.clone(),
    "detach": lambda m, x: x.detach(),
    "to-float64": lambda m, x: x.to(m.float64),
    "double": lambda m, x: x.double(),
    "type": lambda m, x: x.type(m.float16),
    "relu": lambda m, x: m.nn.functional.relu(x),
    "softmax": lambda m, x: m.softmax(x, 1),
    "reshape": lambda m, x: x.reshape(2, 6),
    "t": lambda m, x: x.t(),
    "cat": lambda m, x: m.cat([x, x]),
    "stack": lambda m, x: m.stack([x, x], 1),
    "linear": lambda m, x: m.nn.functional.linear(x, m.ones(5, 4, device="meta")),
    "number-tensor": lambda m, x: x + m.tensor(2.0),
    "tensor-number": lambda m, x: m.tensor(2.0) * x,
    "where": lambda m, x: m.where(x > 0, x, x),
    "in-place": lambda m, x: x.clone().mul_(2),
    "setitem": lambda m, x: _set(x.clone(), 0, 1.0),
    "copy-into": lambda m, x: x.clone().copy_(m.ones(3, 4)),
    "data": lambda m, x: x.data,
    "iter": lambda m, x: list(x)[1],
}


def _set(x, index, value):
    x[index] = value
    return x


@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
@pytest.mark.parametrize("requires_grad", [False, True])
def test_ops_on_meta_tensors_give_meta_tensors(op, requires_grad):
    got = op(bg, bg.ones(3, 4, requires_grad=requires_grad).to("meta"))
    want = op(torch, torch.ones(3, 4, requires_grad=requires_grad).to("meta"))
    same_meta(got, want)


@pytest.mark.parametrize("name", ["max", "sort"])
def test_ops_with_several_results(name):
    got = getattr(bg.ones(3, 4).to("meta"), name)(0)
    want = getattr(torch.ones(3, 4).to("meta"), name)(0)
    for g, w in zip(got, want):
        same_meta(g, w)


def test_module_on_the_meta_device():
    model, reference = bg.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    assert model.to("meta") is model
    reference.to("meta")
    for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        assert type(p) is bg.nn.Parameter and name in ("weight", "bias")
        same_meta(p, q)
    same_meta(model(bg.ones(2, 3, device="meta")), reference(torch.ones(2, 3, device="meta")))
    for (_, p), (_, q) in zip(model.state_dict().items(), reference.state_dict().items()):
        same_meta(p, q)
    raises_like_torch(lambda m: m.nn.Linear(3, 2).to("meta").to("cpu"))  # names to_empty
    raises_like_torch(lambda m: m.nn.Linear(3, 2).to("meta")(m.ones(2, 3)))


def test_to_empty_gives_a_meta_module_storage():
    model = bg.nn.Linear(3, 2).to("meta").to_empty(device="cpu")
    reference = torch.nn.Linear(3, 2).to("meta").to_empty(device="cpu")
    for p, q in zip(model.parameters(), reference.parameters()):
        assert not p.is_meta and p.device == bg.device("cpu") and p.shape == q.shape and p.requires_grad
    assert model(bg.ones(2, 3)).shape == (2, 2)


# ---- meta meets other devices ---------------------------------------------------------------------------------
MIXED = {
    "meta-cpu": lambda m: m.ones(3, 4).to("meta") + m.ones(3, 4),
    "cpu-meta": lambda m: m.ones(3, 4) + m.ones(3, 4).to("meta"),
    "meta-0d-then-cpu": lambda m: m.tensor(2.0).to("meta") + m.ones(3),
    "cpu-then-meta-0d": lambda m: m.ones(3) * m.tensor(2.0).to("meta"),
    "where": lambda m: m.where(m.ones(3) > 0, m.ones(3).to("meta"), m.ones(3).to("meta")),
    "cat": lambda m: m.cat([m.ones(3).to("meta"), m.ones(3)]),
    "copy-out-of-meta": lambda m: m.zeros(3).copy_(m.ones(3).to("meta")),
    "setitem-from-meta": lambda m: _set(m.zeros(3, 4), 0, m.ones(3, 4).to("meta")[0]),
}


@pytest.mark.parametrize("call", MIXED.values(), ids=MIXED.keys())
def test_meta_and_cpu_tensors_do_not_mix(call):
    raises_like_torch(call)


def test_a_cpu_number_tensor_mixes_with_meta():
    same_meta(bg.ones(3).to("meta") * bg.tensor(2.0), torch.ones(3).to("meta") * torch.tensor(2.0))


# ---- no values to read --------------------------------------------------------------------------------------------
READS = {
    "numpy": lambda m: m.ones(3).to("meta").numpy(),
    "array": lambda m: np.asarray(m.ones(3).to("meta")),
    "item": lambda m: m.tensor(1.0).to("meta").item(),
    "float": lambda m: float(m.tensor(1.0).to("meta")),
    "int": lambda m: int(m.tensor(1).to("meta")),
    "bool": lambda m: bool(m.tensor(1.0).to("meta")),
    "tolist": lambda m: m.ones(3).to("meta").tolist(),
    "to-cpu": lambda m: m.ones(3).to("meta").to("cpu"),
    "cpu": lambda m: m.ones(3).to("meta").cpu(),
    "allclose": lambda m: m.allclose(m.ones(3).to("meta"), m.ones(3).to("meta")),
    "format": lambda m: f"{m.tensor(1.0).to('meta'):.2f}",
    "nonzero": lambda m: m.ones(3).to("meta").nonzero(),
    "boolean-mask": lambda m: m.ones(3).to("meta")[m.ones(3).to("meta") > 0],
}


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
def test_reading_values_of_a_meta_tensor_raises(read):
    with pytest.raises(Exception) as want:
        read(torch)
    with pytest.raises(type(want.value)) as got:
        read(bg)
    if type(want.value) is not NotImplementedError:  # nonzero's message is about torch.compile
        assert str(got.value) == str(want.value)


# ---- gradients ------------------------------------------------------------------------------------------------
def _leaf(m):
    return m.ones(3, device="meta", requires_grad=True)


GRADS = {
    "grad": lambda m, x: m.autograd.grad((x * 2).sum(), x),
    "grad-sin": lambda m, x: m.autograd.grad(x.sin().sum(), x),
    "grad-output": lambda m, x: m.autograd.grad(x * 2, x, m.ones(3, device="meta")),
    "grad-output-cpu-0d": lambda m, x: m.autograd.grad((x * 2).sum(), x, m.tensor(1.0)),
    "batched": lambda m, x: m.autograd.grad(x * 2, x, m.ones(2, 3, device="meta"), is_grads_batched=True),
    "double": lambda m, x: m.autograd.grad(m.autograd.grad(x.sin().sum(), x, create_graph=True)[0].sum(), x),
}


@pytest.mark.parametrize("grad", GRADS.values(), ids=GRADS.keys())
def test_gradients_of_meta_leaves_are_meta(grad):
    (got,), (want,) = grad(bg, _leaf(bg)), grad(torch, _leaf(torch))
    same_meta(got, want)


def test_gradients_accumulate_into_a_meta_leaf():
    x, y = _leaf(bg), _leaf(torch)
    for k in (2, 3, 4):  # the third backward of a repeated structure runs the fused program
        (x * k).sum().backward()
        (y * k).sum().backward()
    same_meta(x.grad, y.grad)


def test_gradient_of_a_non_leaf_meta_tensor():
    x, y = bg.ones(3, requires_grad=True).to("meta"), torch.ones(3, requires_grad=True).to("meta")
    same_meta(bg.autograd.grad((x * 2).sum(), x)[0], torch.autograd.grad((y * 2).sum(), y)[0])


BAD_GRADS = {
    "through-to-meta": lambda m: (m.ones(3, requires_grad=True).to("meta") * 2).sum().backward(),
    "grad-through-to-meta": lambda m: (lambda x: m.autograd.grad((x * 1).to("meta").sum(), x))(
        m.ones(3, requires_grad=True)
    ),
    "cpu-grad-for-meta": lambda m: m.autograd.grad(_leaf(m) * 2, [], m.ones(3)),
    "cpu-grad-output-for-meta-output": lambda m: (lambda x: m.autograd.grad(x * 2, x, m.ones(3)))(_leaf(m)),
    "meta-grad-output-for-cpu-output": lambda m: (lambda x: m.autograd.grad(x * 2, x, m.ones(3, device="meta")))(
        m.ones(3, requires_grad=True)
    ),
    "meta-0d-grad-output-for-cpu-output": lambda m: (
        lambda x: m.autograd.grad((x * 2).sum(), x, m.ones((), device="meta"))
    )(m.ones(3, requires_grad=True)),
}


@pytest.mark.parametrize("call", BAD_GRADS.values(), ids=BAD_GRADS.keys())
def test_gradient_errors(call):
    raises_like_torch(call)


def test_vmap_over_meta_tensors_is_refused_clearly():
    with pytest.raises(NotImplementedError, match="vmap over meta tensors is not supported"):
        bg.func.vmap(lambda x: x * 2)(bg.ones(2, 3, device="meta"))  # torch maps it (a deliberate gap)


def test_through_to_meta_raises_on_the_fused_program_too():
    x = bg.ones(3, requires_grad=True)
    for _ in range(4):  # past the first evaluations of the structure, which run node by node
        with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor; no data!"):
            (x.to("meta") * 2).sum().backward()
    assert x.grad is None


MODULES_WITH_DEVICE = {
    "Linear": lambda m, d: m.nn.Linear(3, 4, device=d),
    "Conv2d": lambda m, d: m.nn.Conv2d(1, 2, 3, device=d),
    "BatchNorm1d": lambda m, d: m.nn.BatchNorm1d(3, device=d),
    "LSTM": lambda m, d: m.nn.LSTM(3, 4, device=d),
    "Embedding": lambda m, d: m.nn.Embedding(5, 2, device=d),
    "LayerNorm": lambda m, d: m.nn.LayerNorm(4, device=d),
    "TransformerEncoderLayer": lambda m, d: m.nn.TransformerEncoderLayer(8, 2, 16, device=d),
}


@pytest.mark.parametrize("make", MODULES_WITH_DEVICE)
@pytest.mark.parametrize("where", ["meta", "cpu"])
def test_modules_made_with_a_device_put_their_state_there(make, where):
    def states(m):
        module = MODULES_WITH_DEVICE[make](m, where)
        return [
            (name, str(t.device), str(t.dtype), tuple(t.shape), t.requires_grad)
            for name, t in list(module.named_parameters()) + list(module.named_buffers())
        ]

    assert states(bg) == states(torch)


def test_normal_of_numbers_takes_device_and_layout_as_torchs_factory():
    def made(m):
        m.manual_seed(5)
        on_cpu = m.normal(1.0, 2.0, (2, 3), device="cpu", layout=m.strided)
        on_meta = m.normal(1.0, 2.0, (4,), device="meta")
        return on_cpu.tolist(), on_meta.device.type, tuple(on_meta.shape), str(on_meta.dtype).split(".")[-1]

    assert made(bg) == made(torch)
