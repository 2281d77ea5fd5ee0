"""Behaviours the public sequence-model and time-series programs (test_fresh_programs_sequence.py) found wanting,
each checked against torch 2.13: einsum over operands of two dtypes (torch contracts pairwise: a pair that sums a
shared subscript refuses two dtypes, a pair that sums none promotes), Tensor.split's own keyword name, and where
deprecation warnings are attributed (which decides whether Python's default filters show them)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


def _operands(m, terms, dtypes, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for term, dtype in zip(terms, dtypes):
        shape = ([2] if "..." in term else []) + [3] * len(term.replace("...", ""))
        t = m.tensor(rng.uniform(1, 2, shape)).to(getattr(m, dtype))
        out.append(t.requires_grad_() if t.is_floating_point() else t)
    return out


PROMOTING = [
    ("ij,j->j", ("float64", "float32")),  # i is summed inside operand 0 alone; the pair multiplies elementwise
    ("ij,j->ij", ("float64", "float32")),
    ("ij,kj->ikj", ("float32", "float64")),
    ("ii,i->i", ("float64", "float32")),
    ("i,j,k->ijk", ("float64", "float32", "int64")),
    ("ij,j->ij", ("int64", "bool")),
    ("...j,j->...j", ("float32", "float64")),
    ("bld,dn->bdln", ("float64", "float32")),
    ("i,i,j->j", ("float64", "float64", "float32")),
]


@pytest.mark.parametrize("equation,dtypes", PROMOTING, ids=[f"{e}-{'-'.join(d)}" for e, d in PROMOTING])
def test_einsum_promotes_where_no_pair_sums_across_dtypes(equation, dtypes):
    results = []
    for m in (torch, bg):
        ops = _operands(m, equation.split("->")[0].split(","), dtypes)
        out = m.einsum(equation, *ops)
        grads = m.autograd.grad(out.sum(), [o for o in ops if o.requires_grad]) if out.is_floating_point() else ()
        results.append((out, grads))
    (want, want_grads), (got, got_grads) = results
    assert_same(got, want, rtol=1e-12, atol=1e-12)
    for g, w in zip(got_grads, want_grads):
        assert_same(g, w, rtol=1e-6, atol=1e-6)  # a float32 operand's gradient comes back in float32, as torch's


REFUSING = [
    ("ij,j->i", ("float64", "float32")),
    ("j,ij->i", ("float32", "float64")),
    ("ij,j", ("float64", "float32")),
    ("i,i,j->j", ("float64", "float32", "float32")),
]


@pytest.mark.parametrize("equation,dtypes", REFUSING, ids=[f"{e}-{'-'.join(d)}" for e, d in REFUSING])
def test_einsum_refuses_a_summed_pair_of_two_dtypes(equation, dtypes):
    raises_like_torch(lambda m: m.einsum(equation, *_operands(m, equation.split("->")[0].split(","), dtypes)))


def test_tensor_split_takes_split_size_and_torch_split_split_size_or_sections():
    for m in (torch, bg):
        x = m.arange(6.0)
        assert [t.tolist() for t in x.split(split_size=[2, 4], dim=0)] == [[0, 1], [2, 3, 4, 5]]
        assert [t.tolist() for t in x.split(split_size=4)] == [[0, 1, 2, 3], [4, 5]]
        assert [t.tolist() for t in m.split(x, split_size_or_sections=3)] == [[0, 1, 2], [3, 4, 5]]
    raises_like_torch(lambda m: m.arange(6.0).split(split_size_or_sections=2))
    raises_like_torch(lambda m: m.split(m.arange(6.0), split_size=2))


def _stderr_of(program, module, path):
    """What a program run as __main__ under Python's default warning filters prints on stderr."""
    path.write_text(f"import {module} as torch\n{program}\n")
    env = {**os.environ, "PYTHONPATH": str(Path(bg.__file__).parents[1])}
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=True, env=env).stderr


WARNING_PROGRAMS = [
    # torch.jit.script's DeprecationWarning is attributed to torch's own module, which the default filters hide
    "@torch.jit.script\ndef f(x):\n    return x\nf(torch.ones(2))",
    # weight_norm's FutureWarning is attributed to the line inside weight_norm: shown once for any number of modules
    "for _ in range(3):\n    torch.nn.utils.weight_norm(torch.nn.Linear(2, 2))",
]


@pytest.mark.slow
@pytest.mark.parametrize("program", WARNING_PROGRAMS, ids=["jit_script", "weight_norm"])
def test_deprecation_warnings_show_as_torch_shows_them(program, tmp_path):
    def shown(stderr):
        return [line.split(": ", 1)[1] for line in stderr.splitlines() if "Warning: " in line]

    ours, torchs = (
        _stderr_of(program, module, tmp_path / f"program_{module}.py") for module in ("batched_grad", "torch")
    )
    assert shown(ours) == shown(torchs)
