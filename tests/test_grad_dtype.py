"""Tensor.grad_dtype (torch 2.13) and the deletion of autograd attributes, against torch: the default, None, the
checks on leaves and on `.grad`, and the dtype of the gradients backward and grad() deliver to a leaf."""

import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch


def _upcasting(m):
    """A Function whose backward returns float64 whatever its input."""

    class Upcast(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.to(m.float64)

    return Upcast.apply


def _name(dtype):
    return None if dtype is None else str(dtype).split(".")[-1]


def test_default_none_and_setting():
    for m in (bg, torch):
        leaf = m.tensor([1.0, 2.0], requires_grad=True)
        assert leaf.grad_dtype is m.float32
        leaf.grad_dtype = m.float16
        assert leaf.grad_dtype is m.float16
        leaf.grad_dtype = None
        assert leaf.grad_dtype is None
        assert m.ones(2, dtype=m.int64).grad_dtype is m.int64  # a leaf not requiring grad has one too


@pytest.mark.parametrize(
    "case",
    [
        lambda m: (m.ones(2, requires_grad=True) * 2).grad_dtype,
        lambda m: setattr(m.ones(2, requires_grad=True) * 2, "grad_dtype", m.float16),
        lambda m: setattr(m.ones(2, requires_grad=True), "grad_dtype", 5),
    ],
)
def test_errors_on_non_leaves_and_non_dtypes(case):
    got, want = raises_like_torch(case)
    assert type(got) is type(want) is RuntimeError and str(got) == str(want)


def test_grad_assignment_follows_grad_dtype():
    def assign(m, grad_dtype, grad):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        x.grad_dtype = grad_dtype
        x.grad = grad
        return _name(x.grad.dtype)

    for m in (bg, torch):
        assert assign(m, None, m.ones(2, dtype=m.float64)) == "float64"
    got, want = raises_like_torch(lambda m: assign(m, m.float16, m.ones(2)))
    assert str(got) == str(want)
    assert str(got).startswith("attempting to assign a gradient with dtype 'float' to a tensor with grad_dtype 'Half'")


def test_changing_grad_dtype_while_a_gradient_is_there():
    def change(m, new):
        g = m.tensor([1.0, 2.0], requires_grad=True)
        g.grad = m.ones(2)
        g.grad_dtype = new
        return _name(g.grad_dtype)

    for m in (bg, torch):
        assert change(m, m.float32) == "float32" and change(m, None) is None
    got, want = raises_like_torch(lambda m: change(m, m.float16))
    assert str(got) == str(want) and "because there is already a gradient with dtype 'float'" in str(got)


@pytest.mark.parametrize("grad_dtype", ["default", None, "float16", "float64"])
@pytest.mark.parametrize("through", ["function", "op"])
def test_incoming_gradients_are_cast_to_grad_dtype(grad_dtype, through):
    results = []
    for m in (bg, torch):
        seen = []
        x = m.tensor([1.0, 2.0], requires_grad=True)
        if grad_dtype != "default":
            x.grad_dtype = None if grad_dtype is None else getattr(m, grad_dtype)
        x.register_hook(lambda g: seen.append(_name(g.dtype)))
        f = _upcasting(m) if through == "function" else (lambda t: t * 2)
        f(x).sum().backward()
        f(x).sum().backward()  # accumulated into the .grad there is
        (by_grad,) = m.autograd.grad(f(x).sum(), x)
        results.append((seen, _name(x.grad.dtype), x.grad.tolist(), _name(by_grad.dtype)))
    assert results[0] == results[1]


def test_accumulation_keeps_the_dtype_of_grad():
    for m in (bg, torch):
        k = m.tensor([1.0, 2.0], requires_grad=True)
        k.grad_dtype = None
        (k * 2).sum().backward()
        k.grad = k.grad.to(m.bfloat16)
        (k * 3).sum().backward()
        assert k.grad.dtype is m.bfloat16 and k.grad.tolist() == [5.0, 5.0]


@pytest.mark.parametrize("name", ["data", "requires_grad", "_grad_fn", "_backward_hooks"])
def test_deleting_autograd_attributes_is_torchs_error(name):
    got, want = raises_like_torch(lambda m: delattr(m.randn(2, requires_grad=True), name))
    assert type(got) is type(want) is RuntimeError and str(got) == str(want)


def test_deleting_grad_clears_it_and_other_attributes_stay():
    for m in (bg, torch):
        x = m.randn(2, requires_grad=True)
        (x * 2).sum().backward()
        del x.grad
        assert x.grad is None
        x.note = 1
        del x.note
        assert not hasattr(x, "note")
        with pytest.raises(AttributeError):
            del x.grad_fn
        with pytest.raises(TypeError):
            x.data = None


def test_grad_dtype_holds_once_the_backward_is_one_compiled_program():
    for m in (bg, torch):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        x.grad_dtype = m.float64
        for _ in range(5):  # from the third sighting on, batched_grad runs the structure as one program
            (g,) = m.autograd.grad((x * x).sum(), x)
            assert g.dtype is m.float64 and g.tolist() == [2.0, 4.0]
            (x * x).sum().backward()
        assert x.grad.dtype is m.float64 and x.grad.tolist() == [10.0, 20.0]


def test_every_name_dir_lists_is_an_attribute():
    x = bg.randn(3, 3)
    for tensor in (x, x[:2], x.t(), bg.ones(2, 2, requires_grad=True)):  # leaves (grad_dtype's rule)
        missing = [name for name in dir(tensor) if name != "imag" and not hasattr(tensor, name)]
        assert missing == []


GRAD_ASSIGNMENTS = {
    "itself": lambda m, x: x,
    "not_a_tensor": lambda m, x: 0,
    "other_size": lambda m, x: m.zeros(2, 2),
    "other_dtype": lambda m, x: m.zeros(3, 3, dtype=m.int64),
}


@pytest.mark.parametrize("name", sorted(GRAD_ASSIGNMENTS))
@pytest.mark.parametrize("requires_grad", [False, True])
def test_grad_assignment_errors_as_torch(name, requires_grad):
    def assign(m):
        x = m.ones(3, 3, requires_grad=requires_grad)
        x.grad = GRAD_ASSIGNMENTS[name](m, x)

    raises_like_torch(assign)


def test_grad_may_be_a_view_or_detached_alias_of_the_tensor():
    x = bg.ones(3, 3, requires_grad=True)
    x.grad = x.detach()
    x.grad = x[:]
    assert x.grad.shape == (3, 3)
