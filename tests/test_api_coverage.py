"""API coverage against torch 2.13: every public name of the torch namespaces below exists in batched_grad's
counterpart, or is listed with a reason in batched_grad/_omitted.py; a listed name that exists, or that torch does not
have, fails too, so the list stays current. The README's coverage table is this test's count (`python
tests/test_api_coverage.py` prints it)."""

import inspect
import pathlib

import pytest

pytest.importorskip("torch")
import torch
import torch.amp
import torch.autograd.functional
import torch.autograd.graph
import torch.distributions
import torch.fft
import torch.func
import torch.linalg
import torch.nn.functional
import torch.nn.init
import torch.nn.parallel
import torch.nn.utils
import torch.nn.utils.parametrizations
import torch.nn.utils.parametrize
import torch.nn.utils.prune
import torch.nn.utils.stateless
import torch.optim
import torch.optim.lr_scheduler
import torch.optim.swa_utils
import torch.special
import torch.utils.benchmark
import torch.utils.checkpoint
import torch.utils.data
import torch.utils.dlpack

import batched_grad as bg
import batched_grad.autograd.functional  # noqa: E402,F401
import batched_grad.autograd.graph  # noqa: E402,F401
import batched_grad.distributions  # noqa: E402,F401
import batched_grad.fft  # noqa: E402,F401
import batched_grad.func  # noqa: E402,F401
import batched_grad.special  # noqa: E402,F401
import batched_grad.utils.benchmark  # noqa: E402,F401
import batched_grad.utils.checkpoint  # noqa: E402,F401
import batched_grad.utils.data  # noqa: E402,F401
from batched_grad._omitted import OMITTED

# which public names count: "functions" (callables that are not classes, and dtypes), "classes", "optimizers"
# (torch.optim.Optimizer and its subclasses), "members" (every attribute), "all" (everything but submodules)
NAMESPACES = {
    "torch": (torch, bg, "functions"),
    "torch.Tensor": (torch.Tensor, bg.Tensor, "members"),
    "torch.nn": (torch.nn, bg.nn, "classes"),
    "torch.nn.functional": (torch.nn.functional, bg.nn.functional, "functions"),
    "torch.nn.init": (torch.nn.init, bg.nn.init, "functions"),
    "torch.nn.parallel": (torch.nn.parallel, bg.nn.parallel, "all"),
    "torch.nn.utils": (torch.nn.utils, bg.nn.utils, "all"),
    "torch.nn.utils.parametrize": (torch.nn.utils.parametrize, bg.nn.utils.parametrize, "all"),
    "torch.nn.utils.parametrizations": (torch.nn.utils.parametrizations, bg.nn.utils.parametrizations, "all"),
    "torch.nn.utils.prune": (torch.nn.utils.prune, bg.nn.utils.prune, "all"),
    "torch.nn.utils.stateless": (torch.nn.utils.stateless, bg.nn.utils.stateless, "all"),
    "torch.nn.utils.init": (torch.nn.utils.init, bg.nn.utils.init, "all"),
    "torch.linalg": (torch.linalg, bg.linalg, "all"),
    "torch.fft": (torch.fft, bg.fft, "functions"),
    "torch.special": (torch.special, bg.special, "functions"),
    "torch.optim": (torch.optim, bg.optim, "optimizers"),
    "torch.optim.lr_scheduler": (torch.optim.lr_scheduler, bg.optim.lr_scheduler, "all"),
    "torch.optim.swa_utils": (torch.optim.swa_utils, bg.optim.swa_utils, "all"),
    "torch.autograd": (torch.autograd, bg.autograd, "all"),
    "torch.autograd.functional": (torch.autograd.functional, bg.autograd.functional, "all"),
    "torch.autograd.graph": (torch.autograd.graph, bg.autograd.graph, "all"),
    "torch.func": (torch.func, bg.func, "all"),
    "torch.utils.data": (torch.utils.data, bg.utils.data, "all"),
    "torch.utils.checkpoint": (torch.utils.checkpoint, bg.utils.checkpoint, "all"),
    "torch.utils.dlpack": (torch.utils.dlpack, bg.utils.dlpack, "all"),
    "torch.utils.benchmark": (torch.utils.benchmark, bg.utils.benchmark, "all"),
    "torch.amp": (torch.amp, bg.amp, "all"),
    "torch.distributions": (torch.distributions, bg.distributions, "all"),
    "torch.overrides": (torch.overrides, bg.overrides, "all"),
    "torch.library": (torch.library, bg.library, "all"),
}
_KINDS = {
    "functions": lambda v: isinstance(v, torch.dtype) or (callable(v) and not isinstance(v, type)),
    "classes": lambda v: isinstance(v, type),
    "optimizers": lambda v: isinstance(v, type) and issubclass(v, torch.optim.Optimizer),
    "members": lambda v: True,
    "all": lambda v: True,
}
_TYPING = ("typing", "collections.abc", "typing_extensions")


def torch_names(namespace):
    """The public names of torch's `namespace` that count: a module's __all__ where it has one (torch's own is
    partial: dir() then), else its attributes; not private, not submodules, not typing helpers it imports."""
    obj, _, kind = NAMESPACES[namespace]
    listed = getattr(obj, "__all__", None) if inspect.ismodule(obj) and obj is not torch else None
    names = set()
    for name in listed if listed is not None else dir(obj):
        value = getattr(obj, name, None)
        if name.startswith("_") or inspect.ismodule(value) or getattr(value, "__module__", None) in _TYPING:
            continue
        if _KINDS[kind](value):
            names.add(name)
    return sorted(names)


def coverage():
    """{namespace: (torch's names, present in batched_grad, omitted)}."""
    counts = {}
    for namespace, (_, ours, _) in NAMESPACES.items():
        names = torch_names(namespace)
        present = [n for n in names if hasattr(ours, n)]
        counts[namespace] = (len(names), len(present), len(OMITTED[namespace]))
    return counts


def coverage_table():
    """The README's coverage table (Markdown)."""
    rows = ["| namespace | torch 2.13 names | present | omitted |", "|---|---:|---:|---:|"]
    total = [0, 0, 0]
    for namespace, counts in coverage().items():
        rows.append(f"| `{namespace}` | {counts[0]} | {counts[1]} | {counts[2]} |")
        total = [a + b for a, b in zip(total, counts)]
    rows.append(f"| all | {total[0]} | {total[1]} | {total[2]} |")
    return "\n".join(rows)


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_every_name_is_present_or_omitted(namespace):
    ours = NAMESPACES[namespace][1]
    missing = [n for n in torch_names(namespace) if not hasattr(ours, n) and n not in OMITTED[namespace]]
    assert not missing, f"{namespace}: {len(missing)} names neither present nor in _omitted.py: {missing}"


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_omitted_names_are_missing_from_batched_grad_and_in_torch(namespace):
    ours = NAMESPACES[namespace][1]
    present = [n for n in OMITTED[namespace] if hasattr(ours, n)]
    assert not present, f"{namespace}: listed in _omitted.py but present now (remove them from the list): {present}"
    unknown = sorted(set(OMITTED[namespace]) - set(torch_names(namespace)))
    assert not unknown, f"{namespace}: listed in _omitted.py but not public names of torch 2.13: {unknown}"


def test_every_omission_has_a_reason():
    assert set(OMITTED) == set(NAMESPACES)
    for namespace, names in OMITTED.items():
        for name, reason in names.items():
            assert isinstance(reason, str) and len(reason) > 30, (namespace, name)


def test_readme_states_this_coverage():
    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert coverage_table() in readme, "README's coverage table is stale; regenerate it:\n" + coverage_table()


if __name__ == "__main__":
    print(coverage_table())
