"""Scientific programs of the kinds public PyTorch code holds (the second half of test_fresh_programs_sci2.py's
round), each written once against torch's API and run with torch and with batched_grad in its place (seeded alike,
compared to round-off): Bayesian optimisation by expected improvement, multiplicative NMF as an Optimizer, quantum
pulse engineering through complex matrix exponentials, conjugate variational inference, k-means, edge-aware image
restoration, a CVaR portfolio on the simplex by parametrization, a gradient cross-entropy planner (topk with
sorted=False) and an N-body leapfrog with autograd forces."""

import pytest

from ported._harness import float64_program, run_with_each_library

TOLERANCE = {"rtol": 1e-8, "atol": 1e-10}


@float64_program
def expected_improvement(torch):
    def kernel(a, b, log_scale):
        return torch.exp(-0.5 * torch.cdist(a / log_scale.exp(), b / log_scale.exp()) ** 2)

    def objective(z):
        return torch.sin(3 * z[..., 0]) + 0.5 * torch.cos(5 * z[..., 1]) + (z**2).sum(-1)

    x = torch.rand(5, 2) * 2 - 1
    y = objective(x)
    log_scale = torch.tensor(-1.0, requires_grad=True)
    picks = []
    for _ in range(3):
        ys = (y - y.mean()) / y.std()
        optimizer = torch.optim.Adam([log_scale], lr=0.05)
        for _ in range(8):
            L = torch.linalg.cholesky(kernel(x, x, log_scale) + 1e-4 * torch.eye(len(x)))
            alpha = torch.cholesky_solve(ys.unsqueeze(-1), L)
            nll = 0.5 * (ys.unsqueeze(-1) * alpha).sum() + L.diagonal().log().sum()
            optimizer.zero_grad()
            nll.backward()
            optimizer.step()
        candidates = (torch.rand(8, 2) * 2 - 1).requires_grad_()
        ascent = torch.optim.Adam([candidates], lr=0.05)
        for _ in range(6):
            L, info = torch.linalg.cholesky_ex(kernel(x, x, log_scale) + 1e-4 * torch.eye(len(x)))
            v = torch.linalg.solve_triangular(L, kernel(x, candidates, log_scale), upper=False)
            mean = (v.T @ torch.linalg.solve_triangular(L, ys.unsqueeze(-1), upper=False)).squeeze(-1)
            std = torch.sqrt((1 - (v**2).sum(0)).clamp_min(1e-9))
            normal = torch.distributions.Normal(mean.new_zeros(mean.size()), mean.new_ones(mean.size()))
            u = (ys.min() - mean) / std
            ei = (std * torch.exp(normal.log_prob(u)) + (ys.min() - mean) * normal.cdf(u)).clamp(min=0)
            ascent.zero_grad()
            (-ei.sum()).backward()
            ascent.step()
            with torch.no_grad():
                candidates.clamp_(-1, 1)
        best = candidates[ei.argmax()].detach()
        picks.append(best)
        x, y = torch.cat([x, best[None]]), torch.cat([y, objective(best[None])])
    return [torch.stack(picks), y, info, log_scale.detach()]


@float64_program
def multiplicative_nmf(torch):
    class BetaUpdates(torch.optim.Optimizer):
        def __init__(self, params, beta):
            super().__init__(params, dict(beta=beta))

        @torch.no_grad()
        def step(self, closure):
            closure = torch.enable_grad()(closure)
            for group in self.param_groups:
                for p in group["params"]:
                    p.requires_grad = True
                    V, WH = closure()
                    beta = group["beta"]
                    WH.backward(WH.pow(beta - 2) * V, retain_graph=True)
                    numerator = torch.clone(p.grad).relu_()
                    p.grad.zero_()
                    WH.backward(WH.pow(beta - 1))
                    denominator = torch.clone(p.grad).relu_()
                    p.mul_(numerator.add_(1e-8).div_(denominator.add_(1e-8)).pow_(1 / (2 - beta) if beta < 1 else 1))
                    p.requires_grad = False

    V = torch.rand(10, 3) @ torch.rand(3, 8)
    V[V < 0.2] = 0
    results = []
    for beta in (2.0, 1.0, 0.5):
        W, H = torch.nn.Parameter(torch.rand(10, 3)), torch.nn.Parameter(torch.rand(8, 3))
        target = V + 0.05 if beta < 1 else V
        trainer = BetaUpdates([W, H], beta)
        for _ in range(10):
            trainer.step(lambda: (target, torch.nn.functional.linear(W, H)))
        WH = W.detach() @ H.detach().T
        index = list(target.nonzero().t())
        kl = (target[index] * torch.log(target[index] / WH[index])).sum() + (WH - target).sum()
        results += [W.detach(), kl.item(), W.requires_grad]
    return results


@float64_program
def pulse_engineering(torch):
    X = torch.tensor([[0, 1], [1, 0]], dtype=torch.complex128)
    Y = torch.tensor([[0, -1j], [1j, 0]], dtype=torch.complex128)
    Z = torch.tensor([[1, 0], [0, -1]], dtype=torch.complex128)
    eye = torch.eye(2, dtype=torch.complex128)
    drift = sum(torch.kron(a, a) for a in (X, Y, Z)) / 2
    controls = torch.stack([torch.kron(X, eye), torch.kron(Y, eye), torch.kron(eye, X), torch.kron(eye, Y)]) / 2
    theta = torch.nn.Parameter(torch.rand(9, 4) * 0.002 - 0.001)
    start = torch.tensor([1, 0, 0, 0], dtype=torch.complex128)
    target = torch.tensor([0, 0, 0, 1], dtype=torch.complex128)

    def loss():
        q = start
        for k in range(8):
            amplitudes = ((theta[k] + theta[k + 1]) / 2).to(torch.complex128)
            H = drift + (amplitudes @ controls.reshape(-1, 16)).reshape(4, 4)
            q = torch.linalg.matrix_exp((-1j * 0.25) * H) @ q
        overlap = torch.vdot(q, target)
        return 0.01 * torch.sum((theta[1:] - theta[:-1]) ** 2) - (overlap * overlap.conj()).real

    optimizer, history = torch.optim.Adam([theta], lr=0.2), []
    for _ in range(4):
        optimizer.zero_grad()
        value = loss()
        value.backward()
        optimizer.step()
        history.append(value.item())
    lbfgs = torch.optim.LBFGS([theta], max_iter=5, line_search_fn="strong_wolfe")

    def closure():
        lbfgs.zero_grad()
        value = loss()
        value.backward()
        return value

    history.append(lbfgs.step(closure).item())
    return [history, theta.detach()]


@float64_program
def conjugate_vi(torch):
    D = torch.distributions

    class Variational:
        def __init__(self, family, *shapes):
            self.family, self.vp = family, torch.nn.Parameter(torch.randn(len(shapes), *shapes[0]))

        def dist(self):
            return self.family(*self.vp.exp())

    class Model(torch.nn.Module):
        def __init__(self):
            self.rate, self.coin = Variational(D.Gamma, (), ()), Variational(D.Beta, (), ())
            self.weights = Variational(D.Dirichlet, (4,))
            super().__init__()
            self.vd = {}
            for key in self.__dict__:  # registers each family's parameters while walking the instance dict
                if isinstance(self.__getattribute__(key), Variational):
                    self.__setattr__(key + "_vp", self.__getattribute__(key).vp)
                    self.vd[key] = self.__getattribute__(key)

    counts, flips = torch.poisson(torch.full((30,), 3.0)), torch.bernoulli(torch.full((20,), 0.7))
    categories = torch.multinomial(torch.tensor([0.1, 0.2, 0.3, 0.4]), 40, replacement=True)
    priors = {"rate": D.Gamma(2.0, 0.5), "coin": D.Beta(1.0, 1.0), "weights": D.Dirichlet(torch.ones(4))}
    model = Model()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(12):
        draws = {key: vd.dist().rsample() for key, vd in model.vd.items()}
        likelihood = D.Poisson(draws["rate"]).log_prob(counts).sum() + D.Bernoulli(draws["coin"]).log_prob(flips).sum()
        likelihood = likelihood + D.Categorical(draws["weights"]).log_prob(categories).sum()
        elbo = likelihood - sum(D.kl_divergence(vd.dist(), priors[key]).sum() for key, vd in model.vd.items())
        optimizer.zero_grad()
        (-elbo).backward()
        optimizer.step()
    names = sorted(name for name, _ in model.named_parameters())
    return [names, elbo.item(), model.weights.dist().entropy(), model.rate.dist().mean, model.coin.dist().entropy()]


@float64_program
def lloyd_kmeans(torch):
    x = torch.cat([c + torch.randn(30, 2) for c in torch.tensor([[0.0, 0.0], [5, 5], [-4, 3], [3, -4]])])
    x = torch.cat([x[torch.randperm(len(x))], torch.tensor([[60.0, 60.0]])])
    c = x[torch.randperm(len(x))[:6]]
    for _ in range(5):
        assignment = ((x[:, None, :] - c[None, :, :]) ** 2).sum(-1).argmin(1)
        c = torch.stack([x[assignment == k].mean(0) for k in range(6)])
        dead = torch.any(torch.isnan(c), dim=1)
        c[dead] = x[torch.randperm(len(x))[: dead.sum().item()]]
    centroids = x[:4].clone()
    for _ in range(6):
        labels = torch.argmin(torch.cdist(x, centroids), dim=1)
        centroids.zero_()
        centroids.scatter_add_(0, labels[:, None].repeat(1, 2), x)
        centroids /= torch.bincount(labels, minlength=4).type_as(centroids).view(4, 1)
    return [c, centroids, labels]


@float64_program
def edge_restoration(torch):
    F = torch.nn.functional
    sobel = torch.nn.Conv2d(1, 2, 3, bias=False)
    gx = torch.tensor([[1.0, 0.0, -1.0], [2.0, 0.0, -2.0], [1.0, 0.0, -1.0]])
    sobel.weight = torch.nn.Parameter(torch.stack([gx, gx.t()]).unsqueeze(1) * 2)
    sobel.requires_grad_(False)
    span = torch.arange(-5 // 2 + 1.0, 5 // 2 + 1.0)
    gx_grid, gy_grid = torch.meshgrid(span, span, indexing="ij")
    blur = torch.exp(-(gx_grid**2 + gy_grid**2) / 2)
    blur = (blur / blur.sum()).repeat(1, 1, 1, 1)
    laplacian = torch.tensor([[0.0, 1, 0], [1, -4, 1], [0, 1, 0]]).reshape(1, 1, 3, 3)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, 20), torch.linspace(-1, 1, 20), indexing="ij")
    target = ((xx**2 + yy**2 < 0.4).double() + 0.5 * (xx > 0.3).double()).reshape(1, 1, 20, 20)
    noisy = target + 0.3 * torch.randn_like(target)

    def edges(image):
        grads = sobel(image.view(-1, 1, 20, 20))
        magnitude = torch.sqrt(torch.sum(torch.mul(grads, grads), dim=1, keepdim=True) + 1e-7)
        return (magnitude - magnitude.min()) / (magnitude.max() - magnitude.min())

    image = noisy.clone().requires_grad_()
    optimizer, losses = torch.optim.Adam([image], lr=0.05), []
    for _ in range(8):
        loss = (F.conv2d(image, blur, padding=2) - F.conv2d(noisy, blur, padding=2)).pow(2).mean()
        loss = (
            loss
            + 0.1 * (edges(image) - edges(target)).pow(2).mean()
            + 0.05 * F.conv2d(image, laplacian, padding=1).abs().mean()
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            image.clamp_(0, 1.5)
        losses.append(loss.item())
    grouped = F.conv2d(torch.cat([image, target], 1), laplacian.repeat(2, 1, 1, 1), padding=1, groups=2)
    return [losses, image.detach(), grouped.detach()]


@float64_program
def cvar_portfolio(torch):
    pz = torch.nn.utils.parametrize
    assets = torch.nn.Linear(5, 1, bias=False)
    pz.register_parametrization(assets, "weight", torch.nn.Softmax(dim=-1))
    tau = torch.nn.Parameter(torch.tensor(0.0))
    mean, factor = torch.tensor([0.05, 0.08, 0.02, 0.10, 0.04]), 0.1 * torch.randn(5, 5)
    L = torch.linalg.cholesky(factor @ factor.T + 0.01 * torch.eye(5))
    optimizer, losses = torch.optim.SGD([*assets.parameters(), tau], lr=0.1), []
    for _ in range(12):
        returns = assets(mean + torch.randn(32, 5) @ L.T)
        loss = (-returns + 2.0 * (tau + torch.nn.functional.relu(-returns - tau) / 0.1)).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad(), pz.cached():
        cached = [assets.weight is assets.weight, assets.weight.sum().item()]
    names = sorted(assets.state_dict())
    pz.remove_parametrizations(assets, "weight", leave_parametrized=True)
    return [losses, cached, names, assets.weight.detach(), type(assets.weight).__name__, pz.is_parametrized(assets)]


@float64_program
def gradient_cem_planner(torch):
    H, K, elite, dt = 6, 12, 4, 0.1
    centre, goal = torch.full((2,), 0.5), torch.ones(2)

    def rollout(actions):
        pos, vel, total = torch.zeros(K, 2), torch.zeros(K, 2), torch.zeros(K, requires_grad=True)
        for a in actions:
            contact = pos - centre
            dist = contact.norm(dim=-1, keepdim=True)
            push = 40.0 * contact * ((0.5 - dist).clamp(0, 0.5) / (dist + 1e-6) + 1e-16).pow(0.3)
            vel = vel + dt * (torch.nn.Tanh()(a) + push)
            pos = pos + dt * vel
            total = total - ((pos - goal) ** 2).sum(-1)
        return total

    actions = torch.tensor(torch.randn(H, K, 2), requires_grad=True)  # copy-constructed, as planners write it
    optimizer, best = torch.optim.RMSprop([actions], lr=0.1), []
    for _ in range(5):
        optimizer.zero_grad()
        returns = rollout(actions)
        (-returns.sum()).backward()
        norm = actions.grad.norm(2.0, dim=2, keepdim=True) + 1e-6
        actions.grad.data.div_(norm)
        actions.grad.data.mul_(norm.clamp(min=0, max=1.0))
        optimizer.step()
        _, top = returns.reshape(1, K).topk(elite, dim=1, largest=True, sorted=False)
        chosen = actions[:, top.view(-1)]
        mu, std = chosen.mean(dim=1, keepdim=True), chosen.std(dim=1, unbiased=False, keepdim=True)
        _, worst = returns.reshape(1, K).topk(K - elite, dim=1, largest=False, sorted=False)
        actions.data[:, worst.view(-1)] = (mu + std * torch.randn(H, K - elite, 2)).data
        best.append(returns.max().item())
    return [best, top, worst, actions.detach()]


@float64_program
def nbody_leapfrog(torch):
    def accelerations(pos, mass, softening=0.1):
        dx, dy, dz = (pos[:, i : i + 1].T - pos[:, i : i + 1] for i in range(3))
        inv_r3 = dx**2 + dy**2 + dz**2 + softening**2
        inv_r3 = torch.where(inv_r3 > 0, inv_r3 ** (-1.5), torch.zeros_like(inv_r3))
        return torch.cat([(d * inv_r3) @ mass for d in (dx, dy, dz)], dim=1)

    def potential(pos, mass, softening=0.1):
        pair = -(mass @ mass.T) / torch.sqrt(((pos[:, None] - pos[None]) ** 2).sum(-1) + softening**2)
        return 0.5 * (pair.sum() - pair.diagonal().sum())

    mass = torch.rand(6, 1) + 0.5
    pos, vel = torch.randn(6, 3), torch.randn(6, 3)
    vel -= torch.mean(mass * vel, dim=0) / torch.mean(mass)
    acc, energies = accelerations(pos, mass), []
    for _ in range(20):  # in place, as the simulation loops write it
        vel += acc * 0.005
        pos += vel * 0.01
        acc = accelerations(pos, mass)
        vel += acc * 0.005
        energies.append((0.5 * torch.sum(mass * vel**2) + potential(pos, mass)).item())
    x = pos.clone().requires_grad_()
    forces = -torch.autograd.grad(potential(x, mass), x)[0] / mass - accelerations(x.detach(), mass)
    kick = torch.zeros(3, requires_grad=True)
    optimizer = torch.optim.Adam([kick], lr=0.1)
    for _ in range(4):
        x, v = pos.detach(), torch.cat([kick[None], torch.zeros(5, 3)])
        for _ in range(8):
            x = x if x.requires_grad else x.requires_grad_()
            v = v - torch.autograd.grad(potential(x, mass), x, create_graph=True)[0] / mass * 0.02
            x = x + v * 0.02
        loss = ((x[0] - torch.ones(3)) ** 2).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return [energies, forces.abs().max().item() < 1e-12, loss.item(), kick.detach()]


PROGRAMS = [
    expected_improvement,
    multiplicative_nmf,
    pulse_engineering,
    conjugate_vi,
    lloyd_kmeans,
    edge_restoration,
    cvar_portfolio,
    gradient_cem_planner,
    nbody_leapfrog,
]
# the programs whose two runs take under ~2 s from a cold compilation cache
FAST = {"multiplicative_nmf", "lloyd_kmeans", "cvar_portfolio"}


@pytest.mark.parametrize(
    "program",
    [pytest.param(p, id=p.__name__, marks=[] if p.__name__ in FAST else [pytest.mark.slow]) for p in PROGRAMS],
)
def test_program_matches_torch(program):
    run_with_each_library(program, TOLERANCE)
