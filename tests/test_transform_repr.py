"""How a tensor prints inside the function transforms, against torch 2.13: wrapped by the levels that wrap it
(GradTrackingTensor for grad-type transforms, BatchedTensor for vmap with its batch axis, FunctionalTensor for
functionalize), numbered by nesting depth, innermost outside; and torch.func.debug_unwrap, the tensor one level
down."""

import numpy as np
import pytest
import torch

import batched_grad as bg

X42 = np.arange(8.0).reshape(4, 2) / 4
X432 = np.arange(24.0).reshape(4, 3, 2) / 8


def printed(m, nest, x, body=lambda m, t: t):
    """The reprs that `body(m, t)` gives inside the transforms `nest` (outermost first) applied to x."""
    seen = []

    def f(t):
        seen.append(repr(body(m, t)))
        return t.sum()

    fn, bdim = f, 0
    for name in reversed(nest):
        if name == "vmap":
            fn = m.func.vmap(fn, in_dims=bdim)
            bdim += 1
        else:
            fn = getattr(m.func, name)(fn)
    fn(m.tensor(x))
    return seen[-1]  # a vmap may run its function twice (once on placeholders): the last run saw the rows


@pytest.mark.parametrize(
    "nest, x",
    [
        (["vmap"], X42),
        (["vmap", "vmap"], X432),
        (["grad"], X42[0]),
        (["grad", "grad"], np.array(0.5)),
        (["vmap", "grad"], X42),
        (["functionalize"], X42),
        (["vmap", "functionalize"], X42),
        (["functionalize", "vmap"], X42),
    ],
    ids=lambda p: "_".join(p) if isinstance(p, list) else "",
)
def test_an_argument_prints_wrapped_as_torchs(nest, x):
    assert printed(bg, nest, x) == printed(torch, nest, x)


@pytest.mark.parametrize(
    "body",
    [
        lambda m, t: m.ones(2),  # made inside: wrapped by grad and functionalize, not by vmap (it varies not)
        lambda m, t: t * 2,
        lambda m, t: t.detach(),
        lambda m, t: m.ones(2) + t,
    ],
    ids=["factory", "computed", "detached", "mixed"],
)
@pytest.mark.parametrize("nest", [["grad"], ["vmap"], ["functionalize"]], ids=["grad", "vmap", "functionalize"])
def test_tensors_made_inside_print_as_torchs(nest, body):
    x = X42 if nest == ["vmap"] else X42[0]
    assert printed(bg, nest, x, body) == printed(torch, nest, x, body)


def test_a_captured_tensor_prints_plain():
    captured = {m: m.tensor([1.0, 2.0]) for m in (torch, bg)}
    for nest in (["grad"], ["vmap"]):
        got = printed(bg, nest, X42, lambda m, t: captured[m])
        assert got == printed(torch, nest, X42, lambda m, t: captured[m]) == "tensor([1., 2.])"


def test_the_autograd_outside_shows_under_grad():
    def case(m):
        seen = []

        def f(t):
            seen.append(repr(t))
            seen.append(repr(t * 2))
            return t.sum()

        m.func.grad(f)(m.tensor([0.5, 1.5], requires_grad=True))
        return seen

    assert case(bg) == case(torch)


def test_debug_unwrap_returns_the_callers_tensor_through_vmaps():
    for m in (torch, bg):
        seen = []
        x = m.tensor(X42)

        def f(t):
            seen.append(m.func.debug_unwrap(t))
            return t.sin()

        m.func.vmap(m.func.vmap(f))(x)
        assert seen[0] is x
        assert m.func.debug_unwrap(x) is x


def test_debug_unwrap_one_level():
    def case(m):
        seen = []

        def f(t):
            seen.append(repr(m.func.debug_unwrap(t, recurse=False)))
            seen.append(repr(m.func.debug_unwrap(t * 2)))
            return t.sum()

        m.func.vmap(m.func.grad(f))(m.tensor(X42))
        return seen[-2:]

    assert case(bg) == case(torch)
