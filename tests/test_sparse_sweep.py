"""Sparsity detection over the op database (tests/op_db.py): for every differentiable op, the pattern detected from
its recorded graph holds every nonzero of its dense Jacobian at random inputs, and equals that set where every rule
it met is exact (no max, where or dense fallback). Hessians: the detected pattern holds every nonzero of the Hessian
of a random projection of the output.

The default tier checks one op in forty (spread over the families); the slow tier checks them all."""

import warnings

import numpy as np
import pytest

import batched_grad as bg
import op_db
from batched_grad._sparsity._api import detected
from batched_grad._sparsity._recorded import detect, walk


def _float_outputs(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _float_outputs(o)]
    return [out] if isinstance(out, bg.Tensor) and out.dtype == bg.float64 and out.requires_grad else []


CASES = [
    (entry, name, call)
    for entry in op_db.ENTRIES
    if entry.differentiable and entry.result == "float" and entry.family != "random"
    for name, call in entry.calls().items()
]
DEFAULT = {name for k, (_, name, _) in enumerate(CASES) if k % 40 == 0}


def _params(cases):
    return [
        pytest.param(entry, call, id=name, marks=() if name in DEFAULT else pytest.mark.slow)
        for entry, name, call in cases
    ]


def _recorded(entry, call):
    """The op's float64 outputs that require grad, its float leaves, and the op as a function of those leaves."""
    args = op_db.make_args(entry, bg, seed=3, dtype=bg.float64)
    positions = [k for k, a in enumerate(args) if a.requires_grad]

    def fn(*leaves):
        full = list(args)
        for k, x in zip(positions, leaves):
            full[k] = x
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _float_outputs(call(bg, *full))

    outputs = fn(*[args[k] for k in positions])
    if not outputs or not positions:
        pytest.skip("no float64 output that requires grad")
    return outputs, [args[k] for k in positions], fn


def _dense_nonzeros(outputs, leaves):
    """The nonzeros of the Jacobian of the recorded outputs (rows) in the leaves (columns): the same graph the
    pattern was detected on (a dropout's mask is drawn once)."""
    m = sum(o.numel() for o in outputs)
    flat = bg.cat([o.reshape(-1) for o in outputs])
    grads = bg.autograd.grad(flat, leaves, bg.eye(m, dtype=bg.float64), allow_unused=True, is_grads_batched=True)
    blocks = [np.zeros((m, x.numel())) if g is None else g.reshape(m, -1).numpy() for g, x in zip(grads, leaves)]
    return np.concatenate(blocks, axis=1) != 0


def _flat_blocks(blocks, rows, cols):
    """One (rows, cols) NumPy array from a functional result's nested blocks."""
    return np.concatenate(
        [np.concatenate([b.detach().numpy().reshape(r, c) for b, c in zip(row, cols)], axis=1) for row, r in
         zip(blocks, rows)],
        axis=0,
    )  # fmt: skip


@pytest.mark.parametrize("entry, call", _params(CASES))
def test_detected_jacobian_pattern_holds_every_nonzero(entry, call):
    outputs, leaves, fn = _recorded(entry, call)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, ctx = detect(walk(outputs, leaves), [x.numel() for x in leaves])
        pattern = detected(outputs, leaves, hessian=False).to_dense()
    nonzero = _dense_nonzeros(outputs, leaves)
    missed = np.argwhere(nonzero & ~pattern)
    assert not len(missed), f"{entry.name}: nonzeros outside the detected pattern at {missed[:5].tolist()}"
    if ctx.exact:
        extra = np.argwhere(pattern & ~nonzero)
        assert not len(extra), f"{entry.name}: exact rules, yet entries beyond the nonzeros at {extra[:5].tolist()}"


TWICE = [(e, n, c) for e, n, c in CASES if e.gradgrad]


@pytest.mark.parametrize("entry, call", _params(TWICE))
def test_detected_hessian_pattern_holds_every_nonzero(entry, call):
    outputs, leaves, fn = _recorded(entry, call)
    rng = np.random.default_rng(5)
    weights = [bg.tensor(rng.standard_normal(tuple(o.shape))) for o in outputs]

    def projected(*xs):
        return sum((o * w).sum() for o, w in zip(fn(*xs), weights))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pattern = detected([projected(*leaves)], leaves, hessian=True).to_dense()
    dense = bg.autograd.functional.hessian(projected, tuple(leaves), vectorize=True)
    sizes = [x.numel() for x in leaves]
    nonzero = _flat_blocks(dense, sizes, sizes) != 0
    missed = np.argwhere(nonzero & ~pattern)
    assert not len(missed), f"{entry.name}: Hessian nonzeros outside the detected pattern at {missed[:5].tolist()}"
