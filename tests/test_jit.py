"""torch.jit's decorators and guards against torch 2.13: library-style code that guards on is_scripting(), marks
methods with ignore / unused / export and is scripted or traced runs eagerly here and gives torch's numbers; trace
calls the function as torch's tracer does (is_tracing() True while tracing)."""

import warnings

import numpy as np
import pytest
import torch
import torch.jit

import batched_grad as bg
from batched_grad.jit import trace as imported_trace
from oracle import assert_same, raises_like_torch

Tr = torch.jit.TracerWarning  # torch's warnings about what its graph cannot record: none here

X = np.linspace(-1.0, 1.0, 6).reshape(2, 3)


def _block(m):
    class Block(m.nn.Module):
        scale: m.jit.Final[float]

        def __init__(self):
            super().__init__()
            self.scale = 0.5
            self.linear = m.nn.Linear(3, 2)
            with m.no_grad():
                self.linear.weight.copy_(m.tensor(np.linspace(-1, 1, 6).reshape(2, 3), dtype=m.float32))
                self.linear.bias.zero_()

        def forward(self, x):
            if not m.jit.is_scripting():
                x = self.eager_only(x)
            return self.linear(x) * self.scale

        @m.jit.ignore
        def eager_only(self, x):
            return x.tanh()

        @m.jit.unused
        def debug(self, x):
            raise RuntimeError("not called")

        @m.jit.export
        def doubled(self, x):
            return 2 * self.forward(x)

    return Block()


def _scripted(m):
    block = m.jit.script(_block(m)) if m is bg else _block(m)  # torch's scripting needs the source file: eager here
    x = m.tensor(X, dtype=m.float32, requires_grad=True)
    y = block(x)
    y.pow(2).sum().backward()
    empty = m.jit.annotate(list, [])
    return m.jit.is_scripting(), m.jit.is_tracing(), empty, (y, block.doubled(x), x.grad)


def test_guarded_module_runs_eagerly_with_torchs_numbers():
    ours, theirs = _scripted(bg), _scripted(torch)
    assert ours[:3] == theirs[:3] == (False, False, [])
    assert_same(ours[3], theirs[3], rtol=1e-6, atol=1e-7)


def test_script_returns_what_it_is_given():
    block = _block(bg)
    assert bg.jit.script(block) is block
    assert bg.jit.script(np.tanh) is np.tanh


def _trace_calls(m, **kwargs):
    calls = []

    def f(x):
        calls.append((m.jit.is_tracing(), int(x.shape[0])))
        return x * 2

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = m.jit.trace(f, m.ones(2), **kwargs)
    during = list(calls)  # later calls differ: torch replays its graph, batched_grad runs the function
    return during, traced(m.arange(3.0)), [(w.category, str(w.message)) for w in caught if w.category is not Tr]


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"check_trace": False}, {"check_inputs": [(bg.ones(3),), (bg.ones(4),)]}],
    ids=["checked", "unchecked", "check_inputs"],
)
def test_trace_calls_the_function_as_torch_does(kwargs):
    torch_kwargs = {k: [tuple(torch.ones(t.shape) for t in c) for c in v] if k == "check_inputs" else v
                    for k, v in kwargs.items()}  # fmt: skip
    ours, theirs = _trace_calls(bg, **kwargs), _trace_calls(torch, **torch_kwargs)
    assert ours[0] == [(tracing, int(n)) for tracing, n in theirs[0]]
    assert_same(ours[1], theirs[1])
    assert ours[2] == theirs[2]


def test_trace_of_a_module_with_keyword_inputs():
    for m in (bg, torch):
        block = m.nn.Sequential(m.nn.Linear(3, 2), m.nn.Tanh())
        traced = m.jit.trace(block, example_kwarg_inputs={"input": m.ones(1, 3)})
        assert traced(m.ones(1, 3)).shape == (1, 2)


@pytest.mark.parametrize(
    "call",
    [lambda m: m.jit.trace(lambda x: x, (1,)), lambda m: m.jit.trace(m.nn.Identity())],
    ids=["not_traceable", "no_inputs"],
)
def test_trace_errors_match_torch(call):
    raises_like_torch(call)


def test_ignore_with_arguments_and_import_forms():
    for m in (bg, torch):

        @m.jit.ignore(drop=True)
        def helper(x):
            return x + 1

        assert helper(1) == 2
    assert imported_trace is bg.jit.trace and bg.jit.Final is torch.jit.Final
