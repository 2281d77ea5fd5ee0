"""Every op of SPEC §2 under is_grads_batched=True: the batched grad equals the stacked per-row grads at first
and second order, and no built-in op falls back to the per-row loop. Each family's ops are concatenated into
one output so that one compiled program per family covers them all."""

import warnings

import numpy as np
import pytest

import batched_grad as bg
import vmap
from batched_grad import _lazy

B = 3


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    a = lambda low, high, *shape: bg.tensor(rng.uniform(low, high, shape or (3, 3)), requires_grad=True)
    spd = rng.standard_normal((3, 3))
    return {
        "x": a(-1, 1),
        "y": a(-1, 1),
        "p": a(0.5, 2),
        "u": a(-0.9, 0.9),
        "n1": a(1.1, 3),
        "v": a(-1, 1, 3),
        "t": a(-1, 1, 2, 3, 3),
        "spd": bg.tensor(spd @ spd.T + 3 * np.eye(3), requires_grad=True),
    }


UNARY = [
    "exp",
    "expm1",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "sin",
    "cos",
    "tan",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "sigmoid",
    "erf",
    "erfc",
    "neg",
    "abs",
    "sign",
    "square",
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
]
FAMILIES = {
    "elementwise": lambda m, i: (
        [getattr(m, n)(i["x"]) for n in UNARY]
        + [
            m.log(i["p"]),
            m.log1p(i["p"]),
            m.log2(i["p"]),
            m.log10(i["p"]),
            m.asin(i["u"]),
            m.acos(i["u"]),
            m.atanh(i["u"]),
            m.acosh(i["n1"]),
            m.add(i["x"], i["y"], alpha=2),
            m.sub(i["x"], i["v"]),
            m.mul(i["x"], i["y"]),
            m.div(i["x"], i["p"]),
            m.true_divide(i["y"], i["p"]),
            m.floor_divide(i["x"], i["p"]),
            m.remainder(i["x"], i["p"]),
            m.fmod(i["x"], i["p"]),
            m.pow(i["p"], i["y"]),
            i["x"] ** 3,
            m.atan2(i["x"], i["p"]),
            m.maximum(i["x"], i["y"]),
            m.minimum(i["x"], i["y"]),
            m.hypot(i["x"], i["y"]),
            m.clamp(i["x"], -0.5, 0.5),
            m.clip(i["y"], max=0.2),
            m.where(i["x"] > i["y"], i["x"], i["y"] * 2),
            m.lerp(i["x"], i["y"], 0.3),
            2.0 - i["x"] / 3.0,
        ]
    ),
    "reductions": lambda m, i: [
        m.sum(i["t"], 1),
        m.mean(i["t"], (0, 2)),
        m.prod(i["x"], 0),
        m.amax(i["t"], -1),
        m.amin(i["x"]),
        m.max(i["x"], 1).values,
        m.min(i["x"], 0).values,
        m.max(i["y"]),
        m.var(i["t"], 1),
        m.std(i["x"], 0),
        m.norm(i["x"]),
        m.logsumexp(i["t"], 2),
        m.cumsum(i["x"], 1),
        m.cumprod(i["x"], 0),
        i["x"].std(correction=0),
    ],
    "linalg": lambda m, i: [
        m.matmul(i["t"], i["x"]),
        m.mm(i["x"], i["y"]),
        m.bmm(i["t"], i["t"]),
        m.mv(i["x"], i["v"]),
        m.dot(i["v"], i["v"]),
        m.outer(i["v"], i["v"]),
        m.einsum("bij,jk->bik", i["t"], i["y"]),
        m.tensordot(i["t"], i["x"], 1),
        m.trace(i["x"]),
        m.diag(i["v"]),
        m.diag(i["x"]),
        m.diagonal(i["t"], 0, 1, 2),
        m.tril(i["x"]),
        m.triu(i["y"], 1),
        m.linalg.norm(i["x"]),
        m.linalg.solve(i["spd"], i["x"]),
        m.linalg.inv(i["spd"]),
        m.linalg.det(i["spd"]),
        m.linalg.slogdet(i["spd"]).logabsdet,
        m.linalg.cholesky(i["spd"]),
        m.linalg.eigh(i["spd"]).eigenvalues,
        m.linalg.svd(i["spd"]).S,
        m.linalg.qr(i["spd"]).R.abs(),
    ],
    "shape": lambda m, i: [
        i["t"].reshape(6, 3),
        i["x"].view(9),
        i["x"].view_as(i["y"]),
        m.flatten(i["t"], 1),
        m.unflatten(i["v"], 0, (1, 3)),
        m.squeeze(i["x"][None]),
        m.unsqueeze(i["v"], 1),
        i["v"].expand(2, 3),
        i["v"].expand_as(i["x"]),
        m.broadcast_to(i["v"], (2, 3)),
        m.permute(i["t"], (2, 0, 1)),
        m.transpose(i["t"], 0, 2),
        m.movedim(i["t"], 0, -1),
        m.t(i["x"]),
        i["x"].T,
        i["t"].mT,
        m.cat([i["x"], i["y"]], 1),
        m.concat([i["x"], i["y"]]),
        m.stack([i["x"], i["y"]], 2),
        m.hstack([i["v"], i["v"]]),
        m.vstack([i["v"], i["v"]]),
        *m.split(i["x"], 2, 1),
        *m.chunk(i["t"], 2),
        *m.unbind(i["x"], 1),
        m.flip(i["x"], [0, 1]),
        m.roll(i["x"], 1, 0),
        i["v"].repeat(2, 2),
        m.tile(i["v"], (2,)),
        m.narrow(i["x"], 1, 1, 2),
        m.select(i["t"], 1, 2),
    ],
    "indexing": lambda m, i: [
        i["x"][1],
        i["x"][:, 1:],
        i["t"][..., None, 0],
        i["x"][m.tensor([2, 0, 2])],
        i["x"][i["y"] > 0],
        i["x"][[0, 2], [1, 1]],
        m.index_select(i["x"], 1, m.tensor([2, 0])),
        m.gather(i["x"], 1, m.tensor([[0, 0], [1, 2], [2, 1]])),
        m.scatter(i["x"], 0, m.tensor([[2, 1, 0]]), i["y"]),
        m.scatter_add(i["x"], 1, m.tensor([[0, 0, 1]] * 3), i["y"]),
        m.take_along_dim(i["x"], m.tensor([[0], [2], [1]]), 1),
        m.masked_fill(i["x"], i["y"] > 0, 0.5),
        m.masked_select(i["x"], i["y"] < 0),
        m.sort(i["x"], 1).values,
        m.topk(i["x"], 2, 0).values,
    ],
}


def _setitem(m, i):
    z = i["x"] * 1
    z[0, 1:] = i["y"][2, :2]
    z[m.tensor([2])] = 0.0
    return [z]


FAMILIES["setitem"] = _setitem


def _output(name, inputs):
    return bg.cat([o.reshape(-1) for o in FAMILIES[name](bg, inputs)])


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_batched_equals_per_row_loop_at_first_and_second_order(name, monkeypatch):
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 0)  # one program per family instead of a kernel per op
    inputs = _inputs()
    leaves = [x for x in inputs.values()]
    out = _output(name, inputs)
    rng = np.random.default_rng(1)
    cots = bg.tensor(rng.standard_normal((B,) + tuple(out.shape)))
    with vmap.fallback_warnings(), warnings.catch_warnings():
        warnings.simplefilter("error", vmap.FallbackWarning)
        batched = bg.autograd.grad(out, leaves, cots, retain_graph=True, allow_unused=True, is_grads_batched=True)
        (g,) = bg.autograd.grad(
            out, [inputs["x"]], bg.tensor(rng.standard_normal(tuple(out.shape))), create_graph=True, allow_unused=True
        )
        v2 = bg.tensor(rng.standard_normal((B, 3, 3)))
        linear = g is None or not g.requires_grad  # a family linear in x has no second derivative to check
        second = (
            []
            if linear
            else bg.autograd.grad(g, leaves, v2, retain_graph=True, allow_unused=True, is_grads_batched=True)
        )
    for b in range(B):
        row = bg.autograd.grad(out, leaves, cots[b], retain_graph=True, allow_unused=True)
        row2 = [] if linear else bg.autograd.grad(g, leaves, v2[b], retain_graph=True, allow_unused=True)
        for got, want in [*zip(batched, row), *zip(second, row2)]:
            assert (got is None) == (want is None)
            if got is not None:
                np.testing.assert_allclose(got[b].numpy(), want.numpy(), rtol=1e-9, atol=1e-12)


def _seeds(outputs, dense):
    """jacobian()'s cotangents: per output, its block of columns of the identity."""
    numels = [o.numel() for o in outputs]
    eye = np.eye(sum(numels))
    blocks = np.split(eye, np.cumsum(numels)[:-1], axis=1)
    for block in blocks if dense else ():
        block[tuple(np.argwhere(block == 0)[0])] = -0.0  # the same numbers, not the identity's bits: plain cotangents
    return [bg.tensor(b.reshape((len(eye),) + tuple(o.shape))) for b, o in zip(blocks, outputs)]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_jacobian_seeds_carried_as_rows_equal_dense_cotangents(name, monkeypatch):
    """The identity as grad_outputs (a Jacobian) takes the rules of batched_grad/_basis.py; the same values
    given as ordinary cotangents take the plain batched VJPs: first and second derivatives agree."""
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 0)
    inputs = _inputs()
    leaves = [x for x in inputs.values()]
    outputs = [o for o in FAMILIES[name](bg, inputs) if o.requires_grad]
    results = []
    for dense in (False, True):
        first = bg.autograd.grad(
            outputs, leaves, _seeds(outputs, dense), retain_graph=True, allow_unused=True, is_grads_batched=True
        )
        jac = bg.autograd.grad(
            outputs,
            inputs["x"],
            _seeds(outputs, dense),
            retain_graph=True,
            create_graph=True,
            allow_unused=True,
            is_grads_batched=True,
        )[0]
        second = bg.autograd.grad((jac * jac).sum(), leaves, allow_unused=True) if jac.requires_grad else ()
        results.append([*first, jac, *second])
    for got, want in zip(*results):
        assert (got is None) == (want is None)
        if got is not None:
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-9, atol=1e-12)
