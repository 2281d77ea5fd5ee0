"""Short scientific and optimization programs of the kinds public PyTorch code holds, each written once against
torch's API and run twice, with torch and with batched_grad in its place (seeded alike, so their random draws agree):
a Burgers PINN and an inverse (identification) PINN under L-BFGS, an ODE fit by L-BFGS, Gaussian-process regression
and a Laplace GP classifier, a Hamiltonian network, a deep-equilibrium layer with Anderson acceleration and an
implicit backward hook, variational Bayesian regression, a K-FAC preconditioner, a Levenberg-Marquardt PINN over
torch.func Jacobians and physics-aware training through a custom Function. Everything is float64 and compared to
round-off."""

import math

import numpy as np
import pytest
import torch as real_torch

import batched_grad
from ported._harness import assert_trees_close, mlp

TOLERANCE = {"rtol": 1e-8, "atol": 1e-10}


def run_both(program, *args, tolerance=TOLERANCE):
    expected = program(real_torch, *args)
    actual = program(batched_grad, *args)
    assert_trees_close(actual, expected, program.__name__, tolerance)


def burgers_pinn(torch):
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    try:
        net = mlp(torch, [2, 12, 12, 1], torch.nn.Tanh)
        x = (torch.rand(40, 1) * 2 - 1).requires_grad_()
        t = torch.rand(40, 1).requires_grad_()
        x0 = torch.rand(20, 1) * 2 - 1
        optimizer = torch.optim.Adam(net.parameters(), lr=2e-3)
        losses = []
        for _ in range(8):
            optimizer.zero_grad()
            u = net(torch.hstack([x, t]))
            ones = torch.ones_like(u)
            u_t = torch.autograd.grad(u, t, ones, create_graph=True, allow_unused=True)[0]
            u_x = torch.autograd.grad(u, x, ones, create_graph=True)[0]
            u_xx = torch.autograd.grad(u_x, x, ones, create_graph=True)[0]
            residual = u_t + u * u_x - (0.01 / math.pi) * u_xx
            start = net(torch.hstack([x0, torch.zeros_like(x0)])) + torch.sin(math.pi * x0)
            loss = residual.pow(2).mean() + start.pow(2).mean()
            loss.backward(retain_graph=True)
            optimizer.step()
            losses.append(loss.item())
        return {"losses": losses, "params": [p.detach() for p in net.parameters()]}
    finally:
        torch.set_default_dtype(torch.float32)


def burgers_identification(torch):
    """Raissi's inverse problem: the two PDE coefficients as parameters registered on the network, L-BFGS with a
    strong-Wolfe line search over the data misfit plus the residual."""
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    points = rng.uniform([-1, 0], [1, 1], (60, 2))
    u_data = torch.tensor(-np.sin(np.pi * points[:, :1]) * np.exp(-points[:, 1:]))
    x = torch.tensor(points[:, :1], requires_grad=True)
    t = torch.tensor(points[:, 1:], requires_grad=True)
    net = mlp(torch, [2, 8, 8, 1], torch.nn.Tanh).double()
    net.register_parameter("lambda_1", torch.nn.Parameter(torch.tensor([0.0], dtype=torch.float64)))
    net.register_parameter("lambda_2", torch.nn.Parameter(torch.tensor([-6.0], dtype=torch.float64)))
    optimizer = torch.optim.LBFGS(net.parameters(), max_iter=12, history_size=10, line_search_fn="strong_wolfe")
    evaluations = []

    def closure():
        optimizer.zero_grad()
        u = net(torch.cat([x, t], dim=1))
        u_t, u_x = torch.autograd.grad(u, (t, x), torch.ones_like(u), create_graph=True)
        u_xx = torch.autograd.grad(u_x, x, torch.ones_like(u_x), create_graph=True)[0]
        f = u_t + net.lambda_1 * u * u_x - torch.exp(net.lambda_2) * u_xx
        loss = torch.mean((u_data - u) ** 2) + torch.mean(f**2)
        loss.backward()
        evaluations.append(loss.item())
        return loss

    optimizer.step(closure)
    state = optimizer.state[optimizer._params[0]]
    return {"evaluations": evaluations, "lambdas": [net.lambda_1.item(), net.lambda_2.item()], "iters": state["n_iter"]}


def ode_fit_lbfgs(torch):
    """y' = exp(x), y(0) = 1 by a one-hidden-layer network and L-BFGS without line search."""
    torch.manual_seed(2)
    net = torch.nn.Sequential(torch.nn.Linear(1, 10), torch.nn.Sigmoid(), torch.nn.Linear(10, 1)).double()
    optimizer = torch.optim.LBFGS(net.parameters(), max_iter=15)
    x = torch.linspace(0, 1, 30, dtype=torch.float64)[:, None]

    def closure():
        optimizer.zero_grad()
        x.requires_grad = True
        y = net(x)
        dy = torch.autograd.grad(y.sum(), x, create_graph=True)[0]
        loss = torch.mean((dy - torch.exp(x)) ** 2) + (y[0, 0] - 1.0) ** 2
        loss.backward()
        return loss

    returned = [optimizer.step(closure).item() for _ in range(3)]
    with torch.no_grad():
        fit = net(torch.linspace(0, 1, 5, dtype=torch.float64)[:, None])
    return {"returned": returned, "fit": fit}


def gp_regression(torch):
    """Exact GP regression written by hand: log-parameterised RBF kernel, Cholesky, triangular solves through
    linalg.solve, the negative log marginal likelihood minimised by Adam, and the predictive mean and variance."""
    rng = np.random.default_rng(3)
    X = torch.tensor(rng.uniform(-3, 3, (25, 1)))
    y = torch.sin(X) + 0.1 * torch.tensor(rng.standard_normal((25, 1)))
    log_length, log_noise, log_amplitude = (
        torch.nn.Parameter(torch.tensor(0.0, dtype=torch.float64)) for _ in range(3)
    )

    def kernel(A, B):
        sqdist = (A**2).sum(1, keepdim=True) + (B**2).sum(1, keepdim=True).T - 2 * A.mm(B.T)
        return torch.exp(log_amplitude) * torch.exp(-0.5 * sqdist / torch.exp(log_length))

    optimizer = torch.optim.Adam([log_length, log_noise, log_amplitude], lr=0.05)
    losses = []
    for _ in range(15):
        optimizer.zero_grad()
        K = kernel(X, X) + torch.exp(log_noise) * torch.eye(len(X), dtype=torch.float64)
        L = torch.linalg.cholesky(K)
        alpha = torch.linalg.solve(L.T, torch.linalg.solve(L, y))
        loss = (0.5 * y.T.mm(alpha) + torch.log(torch.diag(L)).sum()).sum()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    Xs = torch.linspace(-4, 4, 6, dtype=torch.float64).view(-1, 1)
    k = kernel(X, Xs)
    v = torch.linalg.solve_triangular(L, k, upper=False)
    return {"losses": losses, "mean": (k.T @ alpha).detach(), "var": (torch.exp(log_noise) - (v * v).sum(0)).detach()}


def laplace_gp_classifier(torch):
    """Binary GP classification by Laplace's approximation: Newton iterations on the latent function (detached
    between iterations), then the approximate marginal likelihood differentiated through the last one."""
    rng = np.random.default_rng(4)
    X = torch.tensor(rng.standard_normal((30, 2)))
    y = torch.where(X[:, :1] * X[:, 1:] > 0, 1.0, -1.0).double()
    log_length = torch.nn.Parameter(torch.tensor(0.0, dtype=torch.float64))
    optimizer = torch.optim.Adam([log_length], lr=0.05)
    losses, newton_steps = [], []
    for _ in range(6):
        optimizer.zero_grad()
        sq = (X**2).sum(1, keepdim=True)
        K = torch.exp(-0.5 * (sq + sq.T - 2 * X @ X.T) / torch.exp(log_length))
        f = torch.zeros_like(y)
        for step in range(20):  # noqa: B007  (the count of Newton steps is compared after the loop)
            f = f.detach()
            pi = torch.sigmoid(f)
            W = torch.diag((pi * (1 - pi)).squeeze(-1))
            sqrt_W = W.sqrt()
            L = torch.linalg.cholesky(torch.eye(len(X), dtype=torch.float64) + sqrt_W @ K @ sqrt_W)
            b = W @ f + (y + 1) / 2 - pi
            a = b - sqrt_W @ torch.cholesky_solve(sqrt_W @ (K @ b), L)
            change = (K @ a - f).abs().max()
            f = K @ a
            if change < 1e-8:
                break
        newton_steps.append(step)
        loss = (0.5 * a.T @ f + torch.log(torch.diag(L)).sum() + torch.log1p(torch.exp(-y * f)).sum()).sum()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"losses": losses, "newton_steps": newton_steps, "log_length": log_length.detach()}


def hamiltonian_network(torch):
    """A Hamiltonian network: the learned vector field is the symplectic gradient of the network's scalar output
    (a create_graph gradient with respect to the input), trained on a mass-spring field and rolled out by RK4."""
    torch.manual_seed(5)
    net = mlp(torch, [2, 16, 16, 1], torch.nn.Tanh).double()

    def field(z):
        if not z.requires_grad:
            z = z.requires_grad_(True)
        dH = torch.autograd.grad(net(z).sum(), z, create_graph=True)[0]
        return torch.cat([dH[:, 1:], -dH[:, :1]], dim=-1)

    qp = torch.rand(40, 2, dtype=torch.float64) * 2 - 1
    target = torch.stack([qp[:, 1], -qp[:, 0]], 1)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(10):
        loss = torch.nn.functional.mse_loss(field(qp), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    z, h = torch.tensor([[1.0, 0.0]], dtype=torch.float64), 0.1
    for _ in range(5):
        k1 = field(z)
        k2 = field(z + h / 2 * k1)
        k3 = field(z + h / 2 * k2)
        k4 = field(z + h * k3)
        z = (z + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)).detach()
    return {"losses": losses, "rollout": z}


def _anderson(torch, f, x0, m=4, lam=1e-4, max_iter=20, tol=1e-6):
    batch, size = x0.shape[0], x0[0].numel()
    X = torch.zeros(batch, m, size, dtype=x0.dtype)
    F = torch.zeros(batch, m, size, dtype=x0.dtype)
    X[:, 0], F[:, 0] = x0.reshape(batch, -1), f(x0).reshape(batch, -1)
    X[:, 1], F[:, 1] = F[:, 0], f(F[:, 0].view_as(x0)).reshape(batch, -1)
    H = torch.zeros(batch, m + 1, m + 1, dtype=x0.dtype)
    H[:, 0, 1:] = H[:, 1:, 0] = 1
    rhs = torch.zeros(batch, m + 1, 1, dtype=x0.dtype)
    rhs[:, 0] = 1
    residuals = []
    for k in range(2, max_iter):
        n = min(k, m)
        G = F[:, :n] - X[:, :n]
        H[:, 1 : n + 1, 1 : n + 1] = torch.bmm(G, G.transpose(1, 2)) + lam * torch.eye(n, dtype=x0.dtype)[None]
        alpha = torch.linalg.solve(H[:, : n + 1, : n + 1], rhs[:, : n + 1])[:, 1 : n + 1, 0]
        X[:, k % m] = (alpha[:, None] @ F[:, :n])[:, 0]
        F[:, k % m] = f(X[:, k % m].view_as(x0)).reshape(batch, -1)
        residuals.append((F[:, k % m] - X[:, k % m]).norm().item() / (1e-5 + F[:, k % m].norm().item()))
        if residuals[-1] < tol:
            break
    return X[:, k % m].view_as(x0), residuals


def deep_equilibrium(torch):
    """A deep-equilibrium layer: the fixed point by Anderson acceleration under no_grad, one more application with
    the graph, and the implicit backward as a hook that solves the adjoint fixed point with autograd.grad."""
    torch.manual_seed(6)
    layer = torch.nn.Linear(6, 6).double()
    with torch.no_grad():
        layer.weight.mul_(0.3)
    head = torch.nn.Linear(6, 2).double()
    optimizer = torch.optim.SGD([*layer.parameters(), *head.parameters()], lr=0.1, momentum=0.9)
    x = torch.randn(4, 6, dtype=torch.float64)
    target = torch.randn(4, 2, dtype=torch.float64)
    record = []
    for _ in range(3):

        def f(z):
            return torch.tanh(layer(z) + x)

        with torch.no_grad():
            z, forward = _anderson(torch, f, torch.zeros_like(x))
        z = f(z)
        z0 = z.clone().detach().requires_grad_()
        f0 = f(z0)
        adjoint = {}

        def hook(grad):
            g, adjoint["residuals"] = _anderson(
                torch, lambda y: torch.autograd.grad(f0, z0, y, retain_graph=True)[0] + grad, grad
            )
            return g

        z.register_hook(hook)
        loss = ((head(z) - target) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        record.append([loss.item(), len(forward), len(adjoint["residuals"])])
    return {"record": record, "weight": layer.weight.detach()}


def variational_regression(torch):
    """Black-box variational inference for Bayesian linear regression: reparameterised samples, log densities from
    torch.distributions.normal.Normal (the family's own module), the ELBO maximised by Adam."""
    torch.manual_seed(7)
    rng = np.random.default_rng(7)
    x = rng.uniform(-3, 3, 8)
    X = torch.tensor(np.stack([x, np.ones_like(x)], 1))
    y = torch.tensor(1.5 * x - 0.5 + rng.standard_normal(8))
    q_mean = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    q_logstd = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    log_sigma = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([q_mean, q_logstd, log_sigma], lr=0.1)
    Normal = torch.distributions.normal.Normal
    losses = []
    for _ in range(12):
        beta = q_mean + torch.exp(q_logstd) * torch.randn(64, 2, dtype=torch.float64)
        likelihood = Normal(beta @ X.T, torch.exp(log_sigma)).log_prob(y).sum(axis=1)
        prior = Normal(0.0, 10.0).log_prob(beta).sum(axis=1)
        entropy_term = Normal(q_mean, torch.exp(q_logstd)).log_prob(beta).sum(axis=1)
        loss = -(likelihood + prior - entropy_term).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"losses": losses, "q": [q_mean.detach(), q_logstd.detach(), log_sigma.detach()]}


def kfac_preconditioned(torch):
    """A K-FAC preconditioner: layer inputs from forward pre-hooks and output gradients from (non-full) backward
    hooks, running Kronecker factors updated by addmm_ with mat1/mat2 keywords, damped inverses, gradients
    replaced through .grad.data before an SGD step."""
    torch.manual_seed(8)
    net = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3)).double()
    seen = {}
    for module in (net[0], net[2]):
        module.register_forward_pre_hook(lambda mod, inputs: seen.__setitem__((mod, "x"), inputs[0]))
        module.register_backward_hook(lambda mod, gin, gout: seen.__setitem__((mod, "gy"), gout[0] * gout[0].size(0)))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    factors, losses = {}, []
    data = [(torch.randn(16, 5, dtype=torch.float64), torch.randint(0, 3, (16,))) for _ in range(3)]
    for step, (x, labels) in enumerate(data):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), labels)
        loss.backward()
        for module in (net[0], net[2]):
            a = torch.cat([seen[module, "x"].data.t(), torch.ones_like(seen[module, "x"][:, :1]).t()], 0)
            g = seen[module, "gy"].data.t()
            if step == 0:
                factors[module] = [a @ a.t() / a.shape[1], g @ g.t() / g.shape[1]]
            else:
                factors[module][0].addmm_(mat1=a, mat2=a.t(), beta=0.9, alpha=0.1 / a.shape[1])
                factors[module][1].addmm_(mat1=g, mat2=g.t(), beta=0.9, alpha=0.1 / g.shape[1])
            xxt, ggt = factors[module]
            ixxt = (xxt + torch.diag(xxt.new(xxt.shape[0]).fill_(0.1**0.5))).inverse()
            iggt = (ggt + torch.diag(ggt.new(ggt.shape[0]).fill_(0.1**0.5))).inverse()
            full = torch.cat([module.weight.grad.data, module.bias.grad.data[:, None]], 1)
            natural = iggt @ full @ ixxt
            module.weight.grad.data = natural[:, :-1].contiguous()
            module.bias.grad.data = natural[:, -1].contiguous()
        optimizer.step()
        losses.append(loss.item())
    return {"losses": losses, "params": [p.detach() for p in net.parameters()]}


def levenberg_marquardt_pinn(torch):
    """A Poisson PINN trained by Levenberg-Marquardt: residuals per point by functional_call, their Laplacians by
    jacrev(grad), the Jacobian over every parameter by vmap(jacrev(...)), and damped Gauss-Newton steps."""
    from_func = torch.func
    torch.manual_seed(9)
    model = torch.nn.Sequential(torch.nn.Linear(2, 10), torch.nn.Sigmoid(), torch.nn.Linear(10, 1)).double()
    params = {k: v.detach() for k, v in model.named_parameters()}

    def interior(p, point, source):
        def u(z):
            return from_func.functional_call(model, p, z).squeeze(0)

        hessian = from_func.jacrev(from_func.grad(u))(point)
        return (-torch.diagonal(hessian).sum() - source).reshape(1)

    def boundary(p, point, value):
        return (from_func.functional_call(model, p, point).squeeze(0) - value).reshape(1)

    inner = torch.rand(20, 2, dtype=torch.float64) * 2 - 1
    source = 2 * math.pi**2 * torch.sin(math.pi * inner[:, 0]) * torch.sin(math.pi * inner[:, 1])
    edge = torch.cat([torch.rand(10, 1, dtype=torch.float64) * 2 - 1, torch.ones(10, 1, dtype=torch.float64)], 1)
    zero = torch.zeros(10, dtype=torch.float64)

    def residuals(p):
        return torch.cat(
            [from_func.vmap(interior, (None, 0, 0))(p, inner, source).flatten(),
             from_func.vmap(boundary, (None, 0, 0))(p, edge, zero).flatten()]
        )  # fmt: skip

    def jacobian(p):
        parts = [
            from_func.vmap(from_func.jacrev(interior), (None, 0, 0))(p, inner, source),
            from_func.vmap(from_func.jacrev(boundary), (None, 0, 0))(p, edge, zero),
        ]
        return torch.cat([torch.cat([v.flatten(1) for v in part.values()], 1) for part in parts])

    mu, losses = 1e-2, []
    for _ in range(4):
        r, J = residuals(params), jacobian(params)
        step = torch.linalg.solve(J.T @ J + mu * torch.eye(J.shape[1], dtype=torch.float64), J.T @ r)
        flat = torch.cat([v.flatten() for v in params.values()]) - step
        sizes = [v.numel() for v in params.values()]
        trial = {k: chunk.view_as(v) for (k, v), chunk in zip(params.items(), flat.split(sizes))}
        if (residuals(trial) ** 2).mean() < (r**2).mean():
            params, mu = trial, mu / 3
        else:
            mu *= 2
        losses.append((r**2).mean().item())
    return {"losses": losses, "mu": mu, "params": list(params.values())}


def physics_aware_training(torch):
    """Physics-aware training: a custom Function whose forward runs a noisy 'physical' RK4 simulation and whose
    backward (defined without @staticmethod, as some public code does) differentiates a noise-free digital twin
    with autograd.functional.vjp under set_grad_enabled(True)."""
    torch.manual_seed(10)

    def rk4(state, coupling, steps=8, dt=0.05):
        def rate(s):
            q, p = s[..., 0], s[..., 1]
            force = -torch.sin(q) * 4 + coupling * (q.roll(1, -1) - q) + coupling.roll(1) * (q.roll(-1, -1) - q)
            return torch.stack([p, force - 0.1 * p], -1)

        for _ in range(steps):
            k1 = rate(state)
            k2 = rate(state + dt * k1 / 2)
            k3 = rate(state + dt * k2 / 2)
            k4 = rate(state + dt * k3)
            state = state + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return state[..., 0]

    def physical(x, coupling):
        out = rk4(torch.stack([x, torch.zeros_like(x)], -1), coupling)
        return out + 0.01 * torch.randn_like(out)

    def digital(x, coupling):
        return rk4(torch.stack([x, torch.zeros_like(x)], -1), coupling)

    class Trained(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, coupling):
            ctx.save_for_backward(x, coupling)
            return physical(x, coupling)

        def backward(ctx, grad_output):
            args = ctx.saved_tensors
            torch.set_grad_enabled(True)
            grads = torch.autograd.functional.vjp(digital, args, v=grad_output)[1]
            torch.set_grad_enabled(False)
            return grads

    coupling = torch.ones(4, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([coupling], lr=0.05)
    x = torch.rand(6, 4, dtype=torch.float64) - 0.5
    losses = []
    for _ in range(6):
        loss = ((Trained.apply(x, coupling) - x.roll(1, 1)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append([loss.item(), torch.is_grad_enabled()])
    return {"losses": losses, "coupling": coupling.detach()}


PROGRAMS = [
    burgers_pinn,
    burgers_identification,
    ode_fit_lbfgs,
    gp_regression,
    laplace_gp_classifier,
    hamiltonian_network,
    deep_equilibrium,
    variational_regression,
    kfac_preconditioned,
    levenberg_marquardt_pinn,
    physics_aware_training,
]
# the first runs compile their kernels: over 2 s each, but for the two L-BFGS and K-FAC programs
FAST = {"ode_fit_lbfgs", "kfac_preconditioned"}


@pytest.mark.parametrize(
    "program",
    [pytest.param(p, id=p.__name__, marks=[] if p.__name__ in FAST else [pytest.mark.slow]) for p in PROGRAMS],
)
def test_program_runs_as_with_torch(program):
    run_both(program)
