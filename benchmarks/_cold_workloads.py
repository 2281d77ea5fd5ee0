"""The workloads of benchmarks/coldstart.py: for each, its data (NumPy, from a seeded generator), its code for
batched_grad and torch (written once against the library module, `lib`) and its code for JAX (`jax`, `jax.numpy`).
Each code function returns a zero-argument callable that runs the whole workload, building the graph anew as a user
would. Nothing here imports a library: the worker process imports only its own."""

import numpy as np

CHAIN_STEPS = 1000  # two ops each


def mlp_data(rng):
    sizes = [256, 256, 256, 256, 128]
    return {
        "x": rng.standard_normal(256).astype(np.float32),
        "ws": [(rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32) for a, b in zip(sizes, sizes[1:])],
        "bs": [(0.1 * rng.standard_normal(b)).astype(np.float32) for b in sizes[1:]],
    }


def mlp(x, ws, bs, tanh):
    """tanh after each hidden layer, linear output."""
    for i, (w, b) in enumerate(zip(ws, bs)):
        x = x @ w + b
        x = tanh(x) if i < len(ws) - 1 else x
    return x


def mlp_jacobian(lib, d):
    ws, bs, eye = [lib.tensor(w) for w in d["ws"]], [lib.tensor(b) for b in d["bs"]], lib.eye(128)

    def call():
        x = lib.tensor(d["x"], requires_grad=True)
        return lib.autograd.grad(mlp(x, ws, bs, lib.tanh), x, eye, is_grads_batched=True)[0]

    return call


def jax_mlp_jacobian(jax, jnp, d):
    jacobian = jax.jit(jax.jacrev(lambda x, ws, bs: mlp(x, ws, bs, jnp.tanh)))  # weights are arguments
    args = jax.tree_util.tree_map(jnp.asarray, (d["x"], d["ws"], d["bs"]))
    return lambda: jacobian(*args)


def energy_data(n, rows=0):
    def make(rng):
        d = {
            "w": (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32),
            "x": rng.standard_normal(n).astype(np.float32),
        }
        return {**d, "v": rng.standard_normal((rows, n)).astype(np.float32)} if rows else d

    return make


def tanh_energy(x, w, tanh):
    return (tanh(w @ x) ** 2).sum()


def batched_hvps(lib, d):
    w, v = lib.tensor(d["w"]), lib.tensor(d["v"])

    def call():
        x = lib.tensor(d["x"], requires_grad=True)
        (g,) = lib.autograd.grad(tanh_energy(x, w, lib.tanh), x, create_graph=True)
        return lib.autograd.grad(g, x, v, is_grads_batched=True)[0]

    return call


def jax_batched_hvps(jax, jnp, d):
    grad = jax.grad(lambda x, w: tanh_energy(x, w, jnp.tanh))
    hvps = jax.jit(lambda x, w, v: jax.vmap(lambda t: jax.jvp(lambda y: grad(y, w), (x,), (t,))[1])(v))
    x, w, v = (jnp.asarray(d[k]) for k in "xwv")
    return lambda: hvps(x, w, v)


def fallback_data(rng):
    def normal(*shape, scale=1.0):
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    return {
        "x": normal(192),
        "params": [
            normal(192, 320, scale=192**-0.5),
            normal(320, scale=0.1),
            normal(320, 64, scale=320**-0.5),
            normal(64, scale=0.1),
        ],
    }


def numpy_sin(lib):
    """sin and its backward in NumPy: no transform can trace it, so batched_grad loops over its rows."""

    class NumpySin(lib.autograd.Function):
        @staticmethod
        def forward(ctx, h):
            ctx.save_for_backward(h)
            return lib.from_numpy(np.sin(h.detach().numpy()))

        @staticmethod
        def backward(ctx, g):
            (h,) = ctx.saved_tensors
            return lib.from_numpy(np.cos(h.detach().numpy()) * g.numpy())

    return NumpySin.apply


def fallback_graph(lib, d):
    """(forward, the cotangent rows): x (192,) -> tanh(x W1 + b1) -> NumPy sin -> tanh(. W2 + b2) (64,)."""
    sin, (w1, b1, w2, b2) = numpy_sin(lib), [lib.tensor(p) for p in d["params"]]

    def forward():
        x = lib.tensor(d["x"], requires_grad=True)
        return x, lib.tanh(sin(lib.tanh(x @ w1 + b1)) @ w2 + b2)

    return forward, lib.eye(64)


def fallback_jacobian(lib, d):
    forward, eye = fallback_graph(lib, d)

    def call():
        x, out = forward()
        return lib.autograd.grad(out, x, eye, is_grads_batched=True)[0]

    return call


def fallback_jacobian_loop(lib, d):
    forward, eye = fallback_graph(lib, d)

    def call():
        x, out = forward()
        return lib.stack([lib.autograd.grad(out, x, e, retain_graph=True)[0] for e in eye])

    return call


def vectorized_hessian(lib, d):
    w, x = lib.tensor(d["w"]), lib.tensor(d["x"])
    return lambda: lib.autograd.functional.hessian(lambda x: tanh_energy(x, w, lib.tanh), x, vectorize=True)


def jax_hessian(jax, jnp, d):
    hessian = jax.jit(jax.hessian(lambda x, w: tanh_energy(x, w, jnp.tanh)))
    x, w = jnp.asarray(d["x"]), jnp.asarray(d["w"])
    return lambda: hessian(x, w)


def chain_data(rng):
    return {"x": rng.standard_normal(1000).astype(np.float32)}


def chain(y):
    for _ in range(CHAIN_STEPS):
        y = y * 1.0001 + 0.0
    return y.sum()


def chain_grad(lib, d):
    def call():
        x = lib.tensor(d["x"], requires_grad=True)
        return lib.autograd.grad(chain(x), x)[0]

    return call


def jax_chain_grad(jax, jnp, d):
    grad, x = jax.jit(jax.grad(chain)), jnp.asarray(d["x"])
    return lambda: grad(x)


def per_sample_data(rng):
    return {
        "X": rng.standard_normal((64, 784)).astype(np.float32),
        "Y": rng.integers(0, 10, 64),
        "params": {
            "w1": (rng.standard_normal((784, 128)) / 28).astype(np.float32),
            "b1": (0.1 * rng.standard_normal(128)).astype(np.float32),
            "w2": (rng.standard_normal((128, 10)) / np.sqrt(128)).astype(np.float32),
            "b2": (0.1 * rng.standard_normal(10)).astype(np.float32),
        },
    }


def mlp_logits(p, x, relu):
    return relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def per_sample_grads(lib, d):
    F, params = lib.nn.functional, {k: lib.tensor(v) for k, v in d["params"].items()}

    def loss(p, x, y):
        return F.cross_entropy(mlp_logits(p, x, F.relu).unsqueeze(0), y.unsqueeze(0))

    per_sample = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))
    X, Y = lib.tensor(d["X"]), lib.tensor(d["Y"])
    return lambda: per_sample(params, X, Y)


def jax_per_sample_grads(jax, jnp, d):
    def loss(p, x, y):
        return -jax.nn.log_softmax(mlp_logits(p, x, jax.nn.relu))[y]

    per_sample = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
    params, X, Y = jax.tree_util.tree_map(jnp.asarray, (d["params"], d["X"], d["Y"]))
    return lambda: per_sample(params, X, Y)


WORKLOADS = {  # number: (label, data, batched_grad's code, torch's code, JAX's code or None)
    1: ("Jacobian, 256-256x3-128 tanh MLP, 128 rows", mlp_data, mlp_jacobian, mlp_jacobian, jax_mlp_jacobian),
    2: ("64 batched HVPs, n=512", energy_data(512, 64), batched_hvps, batched_hvps, jax_batched_hvps),
    3: ("Jacobian through a NumPy Function, 64 rows", fallback_data, fallback_jacobian, fallback_jacobian_loop, None),
    4: ("hessian(vectorize=True), n=256", energy_data(256), vectorized_hessian, vectorized_hessian, jax_hessian),
    5: (f"{2 * CHAIN_STEPS}-op chain y * 1.0001 + 0.0, grad", chain_data, chain_grad, chain_grad, jax_chain_grad),
    6: (
        "per-sample grads, MLP 784-128-10, B=64",
        per_sample_data,
        per_sample_grads,
        per_sample_grads,
        jax_per_sample_grads,
    ),
}
