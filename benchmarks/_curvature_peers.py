"""The models, data and torch peers of benchmarks/curvature.py: the same weights and batches in torch and batched_grad,
and PyHessian's loops written out in torch (PyHessian is not a dependency): its Hessian-vector product over a data
loader (per batch: a forward, a backward with create_graph, a backward of the gradients with the vector, weighted by
the batch's share), its Lanczos density (full reorthogonalization) and its top eigenvalues (power iteration,
deflated against the eigenvectors found, stopped when an eigenvalue changes by less than tol relative)."""

import numpy as np
import torch

import batched_grad as bg

MLP = ("mlp", "784-64-64-10 tanh MLP, cross-entropy, 2 batches of 128, float64")
CNN = ("cnn", "CIFAR-sized CNN (3x32x32; conv 8 s2, conv 16 s2, max-pool, linear), cross-entropy, 2 batches of 32")


def _mlp(nn):
    return nn.Sequential(nn.Linear(784, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10))


def _cnn(nn):
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 4 * 4, 10),
    )


class Problem:
    """One model and data set in both libraries: `models`, `data`, `losses` and `params` keyed by "bg" / "torch"."""

    def __init__(self, name, seed=0):
        rng = np.random.default_rng(seed)
        torch.manual_seed(seed)
        build, shape, batch = (_mlp, (784,), 128) if name == "mlp" else (_cnn, (3, 32, 32), 32)
        torch_model = build(torch.nn).double()
        bg_model = build(bg.nn).double()
        bg_model.load_state_dict({k: bg.tensor(v.detach().numpy()) for k, v in torch_model.state_dict().items()})
        X = [rng.standard_normal((batch, *shape)) for _ in range(2)]
        Y = [rng.integers(0, 10, batch) for _ in range(2)]
        self.models = {"bg": bg_model, "torch": torch_model}
        self.data = {
            lib: [(m.tensor(x), m.tensor(y)) for x, y in zip(X, Y)] for lib, m in (("bg", bg), ("torch", torch))
        }
        self.losses = {"bg": bg.nn.CrossEntropyLoss(), "torch": torch.nn.CrossEntropyLoss()}
        self.params = {lib: list(m.parameters()) for lib, m in self.models.items()}
        self.P = sum(p.numel() for p in self.params["torch"])
        self.N = sum(len(y) for y in Y)

    def operator(self, module, lib, name):
        return getattr(module, name)(
            self.models[lib], self.losses[lib], self.params[lib], self.data[lib], check_deterministic=False
        )


def pyhessian_hvp(problem):
    """PyHessian's dataloader_hv_product: v (a list shaped like the parameters) -> H v over the data."""
    model, loss_fn, params = problem.models["torch"], problem.losses["torch"], problem.params["torch"]

    def hvp(v):
        total = [torch.zeros_like(p) for p in params]
        for X, y in problem.data["torch"]:
            loss = loss_fn(model(X), y)
            grads = torch.autograd.grad(loss, params, create_graph=True)
            Hv = torch.autograd.grad(grads, params, grad_outputs=v, retain_graph=False)
            total = [t + h * len(y) for t, h in zip(total, Hv)]
        return [t / problem.N for t in total]

    return hvp


def _dot(a, b):
    return sum((x * y).sum() for x, y in zip(a, b))


def _normalized(v):
    norm = torch.sqrt(_dot(v, v))
    return [x / norm for x in v]


def _orthonormal_to(w, vs):
    for v in vs:
        w = [x - _dot(w, v) * y for x, y in zip(w, v)]
    return _normalized(w)


def pyhessian_density(problem, iterations, seed=0):
    """PyHessian's density(iter, n_v=1): Lanczos from a Rademacher vector, each new vector orthonormalized against all
    the earlier ones; returns the tridiagonal matrix's eigenvalues and the squares of its eigenvectors' first
    entries (the quadrature's nodes and weights)."""
    hvp, params = pyhessian_hvp(problem), problem.params["torch"]
    generator = torch.Generator().manual_seed(seed)
    v = _normalized([torch.randint(0, 2, p.shape, generator=generator).double() * 2 - 1 for p in params])
    vs, alphas, betas = [v], [], []
    w = hvp(v)
    alphas.append(_dot(w, v).item())
    w = [x - alphas[-1] * y for x, y in zip(w, v)]
    for _ in range(1, iterations):
        beta = torch.sqrt(_dot(w, w))
        betas.append(beta.item())
        v_prev, v = v, _orthonormal_to(w, vs)
        vs.append(v)
        w = hvp(v)
        alphas.append(_dot(w, v).item())
        w = [x - alphas[-1] * y - beta * z for x, y, z in zip(w, v, v_prev)]
    T = np.diag(alphas) + np.diag(betas, 1) + np.diag(betas, -1)
    values, vectors = np.linalg.eigh(T)
    return values, vectors[0] ** 2


def pyhessian_top_eigenvalues(problem, top_n, max_iter=100, tol=1e-3, seed=0):
    """PyHessian's eigenvalues(maxIter, tol, top_n): power iteration per eigenvalue, each vector kept orthogonal to
    the eigenvectors found; an eigenvalue is done when it changes by less than tol relative (or after max_iter).
    Returns (eigenvalues, Hessian-vector products used)."""
    hvp, params = pyhessian_hvp(problem), problem.params["torch"]
    generator = torch.Generator().manual_seed(seed)
    eigenvalues, eigenvectors, products = [], [], 0
    for _ in range(top_n):
        v = _normalized([torch.randn(p.shape, generator=generator, dtype=torch.float64) for p in params])
        value = None
        for _ in range(max_iter):
            v = _orthonormal_to(v, eigenvectors)
            Hv = hvp(v)
            products += 1
            new = _dot(Hv, v).item()
            v = _normalized(Hv)
            if value is not None and abs(value - new) / (abs(value) + 1e-6) < tol:
                value = new
                break
            value = new
        eigenvalues.append(value)
        eigenvectors.append(v)
    return np.array(eigenvalues), products
