"""A torch.Tensor passed where a batched_grad Tensor is expected (code half ported from torch) gets one clear error,
from ops, factories, grad() and backward(), instead of a message about dtypes or iteration."""

import pytest
import torch

import batched_grad as bg

MESSAGE = "a torch.Tensor was passed where a batched_grad Tensor is expected"
t = torch.ones(3, requires_grad=True)
x = bg.ones(3, requires_grad=True)

CALLS = {
    "unary": lambda: bg.sin(t),
    "binary-first": lambda: bg.add(t, x),
    "binary-second": lambda: bg.add(x, t),
    "operator": lambda: x + t,
    "other-operator": lambda: x * t,
    "reduction": lambda: bg.sum(t),
    "matmul": lambda: bg.matmul(x, t),
    "cat": lambda: bg.cat([x, t]),
    "where": lambda: bg.where(x > 0, t, x),
    "clamp": lambda: bg.clamp(t, 0, 1),
    "reshape": lambda: bg.reshape(t, (3,)),
    "parameter": lambda: bg.exp(torch.nn.Parameter(torch.ones(2))),
    "out": lambda: bg.add(x, 1, out=t),
    "zeros_like": lambda: bg.zeros_like(t),
    "randn_like": lambda: bg.randn_like(t),
    "full_like": lambda: bg.full_like(t, 2),
    "tensor": lambda: bg.tensor(t),
    "as_tensor": lambda: bg.as_tensor(t),
    "grad-output": lambda: bg.autograd.grad(t.sum(), x),
    "grad-input": lambda: bg.autograd.grad(x.sum(), t),
    "grad-inputs-dict": lambda: bg.autograd.grad(x.sum(), {"w": t}),
    "grad-outputs-list": lambda: bg.autograd.grad([x.sum(), t.sum()], x),
    "grad-grad_outputs": lambda: bg.autograd.grad(x.sum(), x, torch.ones(())),
    "backward": lambda: bg.autograd.backward(t.sum()),
    "backward-grad": lambda: bg.autograd.backward(x, t),
    "isclose": lambda: bg.isclose(x, t),
    "var_mean": lambda: bg.var_mean(t),
    "unique": lambda: bg.unique(t),
}


@pytest.mark.parametrize("name", CALLS)
def test_torch_tensor_passed_by_mistake(name):
    with pytest.raises(TypeError, match=MESSAGE):
        CALLS[name]()


def test_methods_with_a_torch_operand():
    for call in (lambda: x.add(t), lambda: x.mul(t), lambda: x.maximum(t), lambda: x < t):
        with pytest.raises(TypeError, match=MESSAGE):
            call()


def test_other_wrong_arguments_keep_their_own_errors():
    with pytest.raises(TypeError, match="zeros_like\\(\\): argument 'input' \\(position 1\\) must be Tensor, not list"):
        bg.zeros_like([1.0])
    with pytest.raises(RuntimeError, match="Could not infer dtype of object"):
        bg.tensor(object())
    with pytest.raises(AttributeError):
        bg.sin([1.0])
