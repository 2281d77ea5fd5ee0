"""Run as a script in a process of its own with 4 simulated CPU devices (XLA_FLAGS): batched gradients whose rows
are split over the devices, each case checked against the same computation on one device. Prints one JSON line per
case: its name, whether its results equal the unsharded ones, and how its results are placed."""

import json
import sys

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import batched_grad as bg
import vmap

DEVICES = jax.devices()
ROWS = NamedSharding(Mesh(np.array(DEVICES), ("rows",)), P("rows"))
rng = np.random.default_rng(0)
W1 = rng.standard_normal((6, 16)).astype(np.float32)
W2 = rng.standard_normal((16, 5)).astype(np.float32)
maps = []  # (rows mapped, batch_size) of every lax.map traced: chunk_size applies to each device's rows
_lax_map = jax.lax.map


def _recording_map(f, xs, *, batch_size=None):
    maps.append((jax.tree_util.tree_leaves(xs)[0].shape[0], batch_size))
    return _lax_map(f, xs, batch_size=batch_size)


jax.lax.map = _recording_map


def placement(t):
    v = t._value
    return {"devices": len(v.devices()), "spec": str(getattr(v.sharding, "spec", None))}


def mlp_grad(cotangents, chunk_size=None, calls=3):
    """The batched VJP of a small MLP at a fixed input, with respect to both weights, called `calls` times (the
    first calls and the compiled program alike)."""
    x = bg.tensor(np.linspace(-1, 1, 18, dtype=np.float32).reshape(3, 6))
    w1, w2 = bg.tensor(W1, requires_grad=True), bg.tensor(W2, requires_grad=True)
    for _ in range(calls):
        out = bg.tanh(x @ w1) @ w2
        result = bg.autograd.grad(out, (w1, w2), cotangents, is_grads_batched=True, chunk_size=chunk_size)
    return result


def check_grad(name, rows, place, chunk_size=None):
    dense = rng.standard_normal((rows, 3, 5)).astype(np.float32)
    want = mlp_grad(bg.tensor(dense), calls=1)
    got = mlp_grad(place(dense), chunk_size)
    report(name, got, want)


def report(name, got, want, **extra):
    same = all(np.allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-5) for g, w in zip(got, want))
    print(json.dumps({"case": name, "same": bool(same), "placement": [placement(g) for g in got], **extra}), flush=True)


def case_unpadded():
    check_grad("unpadded", 64, lambda a: bg.Tensor._wrap(jax.device_put(a, ROWS)))


def case_padded():
    check_grad("padded", 52, lambda a: bg.Tensor._wrap(jax.device_put(a, ROWS)))  # 13 rows a device, 16 padded


def case_shard_rows():
    check_grad("shard_rows", 36, lambda a: vmap.shard_rows(bg.tensor(a)))


def case_two_axis_mesh():
    """A user's mesh of 2 x 2 devices, the rows split over its "data" axis and copied over "model"."""
    mesh = Mesh(np.array(DEVICES).reshape(2, 2), ("data", "model"))
    check_grad("two_axis_mesh", 20, lambda a: bg.Tensor._wrap(jax.device_put(a, NamedSharding(mesh, P("data")))))


def case_chunked():
    del maps[:]
    check_grad("chunked", 52, lambda a: vmap.shard_rows(bg.tensor(a)), chunk_size=4)
    print(json.dumps({"case": "chunked_maps", "maps": sorted(set(maps))}), flush=True)


def case_jacobian_seeds():
    """A Jacobian's cotangents (rows of the identity) split over the devices: the program makes its rows itself."""
    seeds = np.eye(20, dtype=np.float32).reshape(20, 4, 5)
    x = bg.tensor(rng.standard_normal((4, 6)).astype(np.float32), requires_grad=True)
    w = bg.tensor(W1[:, :5])

    def jac(cotangents):
        return bg.autograd.grad(bg.tanh(x @ w), x, cotangents, is_grads_batched=True)

    want = jac(bg.tensor(seeds))
    for _ in range(3):
        got = jac(vmap.shard_rows(bg.tensor(seeds)))
    report("jacobian_seeds", got, want)


def case_elementwise_jacobian():
    """A user's own identity, split over the devices, for ops whose VJP broadcasts the values it saved (pow, cumsum,
    a product): after the same calls with an unsplit identity, so that the fused program runs on each device."""
    x = bg.tensor(rng.standard_normal(48).astype(np.float32), requires_grad=True)
    functions = [lambda x: x**2, lambda x: x.cumsum(0) ** 2, lambda x: x.sin() * x]

    def jacobians(identity):
        return [bg.autograd.grad(f(x), x, identity, is_grads_batched=True)[0] for f in functions]

    want = jacobians(bg.eye(48))
    for _ in range(3):
        jacobians(bg.eye(48))
        got = jacobians(bg.from_jax(jax.device_put(np.eye(48, dtype=np.float32), ROWS)))
    report("elementwise_jacobian", got, want)


def case_per_sample():
    """Per-sample gradients with vmap.vmap over examples split over the devices."""
    X = rng.standard_normal((32, 6)).astype(np.float32)
    Y = rng.standard_normal((32, 5)).astype(np.float32)
    w1, w2 = bg.tensor(W1, requires_grad=True), bg.tensor(W2, requires_grad=True)

    def loss_grad(x, y):
        loss = ((bg.tanh(x @ w1) @ w2 - y) ** 2).mean()
        return bg.autograd.grad(loss, (w1, w2))

    per_sample = vmap.vmap(loss_grad)
    want = per_sample(bg.tensor(X), bg.tensor(Y))
    for _ in range(2):
        got = per_sample(vmap.shard_rows(bg.tensor(X)), vmap.shard_rows(bg.tensor(Y)))
    report("per_sample", got, want)
    chunked = vmap.vmap(loss_grad, chunk_size=2)(vmap.shard_rows(bg.tensor(X)), vmap.shard_rows(bg.tensor(Y)))
    report("per_sample_chunked", chunked, want)


def case_create_graph():
    """Hessian-vector products for rows split over the devices: a batched backward through a recorded one
    (create_graph=True), whose own batched backward is recorded too."""
    x = bg.tensor(rng.standard_normal(8).astype(np.float32), requires_grad=True)
    vectors = rng.standard_normal((12, 8)).astype(np.float32)

    def hvps(v):
        (g,) = bg.autograd.grad((bg.tanh(x) ** 3).sum(), x, create_graph=True)
        return bg.autograd.grad(g, x, v, is_grads_batched=True, create_graph=True)

    want = hvps(bg.tensor(vectors))
    for _ in range(3):
        got = hvps(vmap.shard_rows(bg.tensor(vectors)))
    report("create_graph", got, want)


if __name__ == "__main__":
    for case in sys.argv[1:]:
        globals()[f"case_{case}"]()
