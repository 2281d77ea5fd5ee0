"""Behaviours the public sequence-model and time-series programs (test_fresh_programs_sequence*.py) found wanting,
each checked against torch 2.13: einsum over operands of two dtypes (torch contracts pairwise: a pair that sums a
shared subscript refuses two dtypes, a pair that sums none promotes), Tensor.split's own keyword name, where
deprecation warnings are attributed (which decides whether Python's default filters show them), Tensor.numpy()'s
writable memory shared with the tensor (a sampler zeroing probabilities in place), torch.jit.ScriptModule with
script_method (run eagerly), bmm's two wordings of a dtype mismatch, and opt_einsum.contract on batched_grad tensors."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch
from test_tensor import _restore_modes, assert_like_torch  # noqa: F401  (the fixture restores grad mode)


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


def _run_file(program, module, path):
    """(stdout, stderr) of a program run from a file as __main__ (TorchScript reads its source), under Python's
    default warning filters, with `torch` bound to `module`."""
    path.write_text(f"import {module} as torch\n{program}\n")
    env = {**os.environ, "PYTHONPATH": str(Path(bg.__file__).parents[1])}
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=True, env=env)
    return done.stdout, done.stderr


def _run_both(program, folder):
    """_run_file's (stdout, stderr) with batched_grad, then with torch."""
    return [_run_file(program, module, folder / f"program_{module}.py") for module in ("batched_grad", "torch")]


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

    ours, torchs = (stderr for _, stderr in _run_both(program, tmp_path))
    assert shown(ours) == shown(torchs)


NUMPY_MEMORY = [
    # the array is the tensor's memory: writes through it reach the tensor, the tensor's in-place writes reach it
    "t = m.ones(3)\nb = t.numpy()\nb[0] = 5\nt, t * 2, b.flags.writeable",
    "t = m.ones(3) * 2\nb = t.numpy()\nt.add_(1)\nb",
    "t = m.ones(2)\nb = t.numpy()\nc = t.numpy()\nb[0] = 3\nc, np.shares_memory(b, c)",
    "t = m.ones(3, requires_grad=True)\nb = t.detach().numpy()\nb[1] = 7\nb",
    "w = m.ones(3, requires_grad=True)\nb = w.numpy(force=True)\nb[0] = 2\nw",
    # top-p sampling as language-model samplers write it: probabilities below the cutoff zeroed in place
    "x = m.softmax(m.tensor([1., 2., 3.]), -1)\np = x.numpy()\np[p < 0.2] = 0\np, x, x.sum()",
    "t = m.arange(4.)\nv = t[::2]\nb = v.numpy()\nb[0] = 9\nb, b.flags.writeable",
]


@pytest.mark.parametrize("code", NUMPY_MEMORY)
def test_numpy_is_writable_memory_of_the_tensor_like_torch(code):
    assert_like_torch(code)


SCRIPT_MODULE = """
class Mixer(torch.jit.ScriptModule):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.full((3,), 2.0))
        self.eval()

    @torch.jit.script_method
    def mix(self, x, state, i: int):
        state[i] = x
        return x * self.scale

    def forward(self, x, state):
        return self.mix(x, state, 1)
mixer, state = Mixer(), torch.zeros(2, 3)
out = mixer(torch.ones(3), state)
out.sum().backward()
print(out, state, mixer.scale.grad, mixer.training, isinstance(mixer, torch.nn.Module))
print([n for n, _ in mixer.named_parameters()])
"""


@pytest.mark.slow
def test_script_module_subclass_runs_its_script_methods_eagerly(tmp_path):
    ours, torchs = _run_both(SCRIPT_MODULE, tmp_path)
    assert ours == torchs


# torch's bmm names the operands' dtypes one way round in its naive kernel (a product of under 400 multiply-adds a
# batch) and the other way round in its BLAS path; matmul of batches reaches the same kernels
BATCHED_PRODUCTS = [
    ((2, 3, 4), (2, 4, 5)),
    ((1, 10, 4), (1, 4, 9)),
    ((1, 10, 4), (1, 4, 10)),
    ((4, 8, 8), (4, 8, 20)),
    ((1, 1, 400), (1, 400, 1)),
    ((2, 2, 10, 4), (2, 2, 4, 10)),
    ((10, 4), (2, 4, 10)),
]


@pytest.mark.parametrize("shapes", BATCHED_PRODUCTS, ids=str)
@pytest.mark.parametrize("dtypes", [("float64", "float32"), ("float32", "float64")], ids=str)
@pytest.mark.parametrize("fn", ["matmul", "bmm"])
def test_batched_product_of_two_dtypes_refused_with_torchs_message(fn, shapes, dtypes):
    if fn == "bmm" and any(len(s) != 3 for s in shapes):
        pytest.skip("bmm takes 3-D operands")
    raises_like_torch(lambda m: getattr(m, fn)(*(m.ones(s, dtype=getattr(m, d)) for s, d in zip(shapes, dtypes))))


CONTRACTIONS = [
    ("ij,j->i", [(3, 4), (4,)]),  # a pair: opt_einsum's tensordot with batched_grad's dims
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),  # a path of tensordots
    ("ij,ij,jk->ik", [(2, 3), (2, 3), (3, 4)]),  # a Hadamard pair: opt_einsum's einsum
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),  # a batch dim: einsum, then transpose of the result
]


@pytest.mark.parametrize("equation,shapes", CONTRACTIONS, ids=[e for e, _ in CONTRACTIONS])
def test_opt_einsum_contract_runs_on_batched_grad_tensors_as_on_torchs(equation, shapes):
    contract = pytest.importorskip("opt_einsum").contract
    rng = np.random.default_rng(0)
    values = [rng.normal(size=s) for s in shapes]
    results = []
    for m in (torch, bg):
        ops = [m.tensor(v, requires_grad=True) for v in values]
        out = contract(equation, *ops)
        results.append((out, m.autograd.grad(out.sum(), ops)))
    (want, want_grads), (got, got_grads) = results
    assert_same(got, want, rtol=1e-12, atol=1e-12)
    assert_same(list(got_grads), list(want_grads), rtol=1e-12, atol=1e-12)
