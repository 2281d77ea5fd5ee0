"""Scientific programs of the kinds public PyTorch code holds, each written once against torch's API and run with
torch and with batched_grad in its place (seeded alike, compared to round-off): mass-spring integrators whose forces
come from backward passes, EM for a Gaussian mixture, Newton (IRLS) logistic regression, FGSM/PGD attacks, an
extended Kalman filter over torch.func Jacobians, noise-contrastive training with Langevin sampling, Hamiltonian Monte
Carlo with a Hessian metric, FastICA, STFT masking with a complex Fourier filter, and low-rank Gaussian KLs and an
ELBO. test_fresh_programs_sci2b.py holds the rest of this round."""

import numpy as np
import pytest

from ported._harness import float64_program, mlp, run_with_each_library

TOLERANCE = {"rtol": 1e-8, "atol": 1e-10}


@float64_program
def spring_integrators(torch):
    edges = [(0, 1), (1, 2), (2, 0)]
    incidence = torch.zeros(3, 3)
    for row, (i, j) in enumerate(edges):
        incidence[row, i], incidence[row, j] = 1, -1
    rest, stiffness, h = torch.tensor([1.0, 1.3, 1.4]), torch.full((3,), 8.0), 0.033

    def energy(x, stvk):
        squared = (incidence @ x).pow(2).sum(1)
        stretch = squared - rest**2 if stvk else (squared + 1e-6).sqrt() - rest
        return 0.5 * (stiffness * stretch.pow(2)).sum()

    history = []
    for stvk in (False, True):
        x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [2.0, 0.5]]).requires_grad_()
        v = torch.zeros(3, 2, dtype=torch.float32)  # a float32 buffer updated in place with float64 forces
        for _ in range(6):  # symplectic Euler: the force is minus x.grad
            if x.grad is not None:
                x.grad.zero_()
            energy(x, stvk).backward()
            v.data.add_(-x.grad * h)
            x.data.add_(v * h)
        y = x.detach() + v * h
        x1 = y.clone().requires_grad_()
        for _ in range(30):  # backward Euler: gradient descent with a backtracking line search
            loss = h * h * energy(x1, stvk) + 0.5 * (x1 - y).pow(2).sum()
            (grad,) = torch.autograd.grad(loss, x1)
            if grad.pow(2).sum() < 1e-24:
                break
            step = 1.0
            while h * h * energy(x1 - step * grad, stvk) + 0.5 * (x1 - step * grad - y).pow(2).sum() >= loss:
                step *= 0.3
                if step < 1e-20:
                    break
            x1.data.add_(-step * grad)
        history += [x.detach(), v, x1.detach(), energy(x1, stvk).item()]
    return history


@float64_program
def mixture_em(torch):
    centres = torch.tensor([[0.0, 0.0], [3.0, 3.0], [-3.0, 2.5]])
    x = torch.cat([c + torch.randn(40, 2) * s for c, s in zip(centres, [0.6, 0.9, 0.5])]).unsqueeze(1)
    mu, var = x[[0, 45, 90]].transpose(0, 1).clone(), torch.eye(2).repeat(1, 3, 1, 1)
    pi = torch.full((1, 3, 1), 1 / 3)
    scores = []
    for _ in range(8):
        precision = torch.inverse(var)
        log_det = torch.empty(3)
        for k in range(3):
            log_det[k] = 2 * torch.log(torch.diagonal(torch.linalg.cholesky(precision[0, k]))).sum()
        diff = (x - mu).unsqueeze(-2)
        mahalanobis = torch.stack([diff[:, k, 0] @ precision[0, k] for k in range(3)], 1).mul(diff[:, :, 0]).sum(-1)
        weighted = -0.5 * (2 * np.log(2 * np.pi) - log_det + mahalanobis).unsqueeze(-1) + torch.log(pi)
        norm = torch.logsumexp(weighted, dim=1, keepdim=True)
        resp = torch.exp(weighted - norm)
        pi = resp.sum(0, keepdim=True) + 1e-6
        mu = (resp * x).sum(0, keepdim=True) / pi
        outer = (x - mu).unsqueeze(-1) @ (x - mu).unsqueeze(-2)
        var = (outer * resp.unsqueeze(-1)).sum(0, keepdim=True) / resp.sum(0, keepdim=True).unsqueeze(-1)
        var = var + 1e-6 * torch.eye(2)
        pi = pi / x.shape[0]
        scores.append(norm.mean().item())
    labels = weighted.max(1)[1].squeeze().type(torch.LongTensor)
    return [scores, mu, var, pi, labels]


@float64_program
def newton_logistic(torch):
    X = torch.cat([torch.ones(80, 1), (torch.rand(80, 6) < 0.4).double()], 1)
    y = ((X @ torch.randn(7, 1) + 0.3 * torch.randn(80, 1)) > 0).double()

    def pinv_by_qr(A):
        Q, R = torch.linalg.qr(A)
        return R.inverse().mm(Q.t())

    results = []
    for method in ("svd", "pinverse", "qr"):
        w = 0.01 * torch.ones(7, 1)
        for _ in range(5):
            mu = torch.sigmoid(X.mm(w))
            XRX = X.t().mm((mu * (1 - mu)).expand_as(X) * X) + 2.0 * torch.eye(7)
            if method == "svd":
                U, S, V = torch.svd(XRX)
                inverse = V.mm(torch.where(S != 0, 1 / S, torch.zeros_like(S)).unsqueeze(1) * U.t())
            else:
                inverse = torch.pinverse(XRX) if method == "pinverse" else pinv_by_qr(XRX)
            w = w - inverse.mm(X.t().mm(mu - y) + 2.0 * w)
        probs = torch.exp(X.mm(w) * torch.tensor([[0.0, 1.0]])) / (1 + torch.exp(X.mm(w)))
        results += [w, torch.max(probs, 1)[1].type_as(torch.DoubleTensor()).eq(y.squeeze()).double().mean()]
    return results


@float64_program
def input_attacks(torch):
    F = torch.nn.functional
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 3, 3, stride=2), torch.nn.ReLU(), torch.nn.Flatten())
    net.append(torch.nn.Linear(27, 3))
    X, y = torch.rand(5, 1, 8, 8), torch.randint(0, 3, (5,))
    noise = torch.zeros_like(X, requires_grad=True)
    F.cross_entropy(net(X + noise), y).backward()
    fgsm = 0.1 * noise.grad.detach().sign()
    delta = torch.zeros_like(X, requires_grad=True)
    for _ in range(5):
        F.cross_entropy(net(X + delta), y).backward()
        delta.data = (delta + 0.03 * delta.grad.detach().sign()).clamp(-0.1, 0.1)
        delta.data = torch.min(torch.max(delta.detach(), -X), 1 - X)
        delta.grad.zero_()
    return [fgsm, delta.detach(), F.cross_entropy(net(X + delta), y).item(), [p.grad for p in net.parameters()]]


@float64_program
def extended_kalman(torch):
    dt = 0.1

    def f(x):
        return torch.stack([x[0] + dt * x[1], x[1] - dt * (9.81 * torch.sin(x[0]) + 0.2 * x[1])])

    def h(x):
        return torch.stack([torch.sin(x[0]), x[0] * x[1] + torch.cos(x[1])])

    Q, R = torch.diag(torch.tensor([1e-4, 1e-3])), torch.diag(torch.tensor([0.05, 0.02]))
    truth, observations = torch.tensor([[1.0], [0.3]]), []
    for _ in range(15):
        truth = f(truth) + Q.sqrt() @ torch.randn(2, 1)
        observations.append((h(truth) + R.sqrt() @ torch.randn(2, 1)).squeeze(-1))
    x, P = torch.tensor([[0.8], [0.0]]), 0.5 * torch.eye(2)
    filtered, gains = torch.zeros(15, 2), torch.zeros(15, 2, 2)
    for t, y in enumerate(observations):
        F_t = torch.func.jacrev(f)(x.squeeze()).reshape(2, 2)
        x, P = f(x), F_t @ P @ F_t.T + Q
        H = torch.func.jacrev(h)(x.squeeze()).reshape(2, 2)
        K = P @ H.T @ torch.linalg.inv(H @ P @ H.T + R)
        x = x + K @ (y.unsqueeze(-1) - h(x))
        joseph = torch.eye(2) - K @ H
        P = joseph @ P @ joseph.T + K @ R @ K.T
        filtered[t], gains[t] = x.squeeze(), K
    return [filtered, gains, P]


@float64_program
def contrastive_langevin(torch):
    noise = torch.distributions.MultivariateNormal(torch.zeros(2), covariance_matrix=2.0 * torch.eye(2))
    data = torch.cat([torch.randn(40, 2) * 0.3 + 1.5, torch.randn(40, 2) * 0.3 - 1.5])
    net = mlp(torch, [2, 12, 1], torch.nn.SiLU)
    log_z = torch.nn.Parameter(torch.zeros(()))
    optimizer = torch.optim.Adam([*net.parameters(), log_z], lr=0.02)
    for _ in range(10):
        fake = noise.sample((80,))
        logits = [net(s).squeeze(-1) - log_z - noise.log_prob(s) for s in (data, fake)]
        F = torch.nn.functional
        loss = F.binary_cross_entropy_with_logits(logits[0], torch.ones(80))
        loss = loss + F.binary_cross_entropy_with_logits(logits[1], torch.zeros(80))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    z, norms = noise.sample((10,)), []
    for _ in range(10):
        z.requires_grad_(True)
        (grad,) = torch.autograd.grad(net(z).sum(), z)
        norms.append(torch.norm(grad.view(10, -1), dim=1).mean().item())
        z = (z + 0.025 * grad + torch.sqrt(torch.tensor(0.05)) * torch.randn_like(z)).detach()
    return [loss.item(), norms, z]


@float64_program
def hamiltonian_monte_carlo(torch):
    X = torch.randn(30, 3)
    y = torch.bernoulli(torch.sigmoid(X @ torch.tensor([1.0, -2.0, 0.5])))

    def log_prob(w):
        prior = torch.distributions.Normal(0.0, 2.0).log_prob(w).sum()
        return prior + torch.distributions.Bernoulli(logits=X @ w).log_prob(y).sum()

    def grad(w):
        w = w.detach().requires_grad_()
        return torch.autograd.grad(log_prob(w), w)[0]

    w, chain = torch.zeros(3), []
    for _ in range(6):
        p = torch.distributions.Normal(torch.zeros(3), torch.ones(3)).sample()
        start = -log_prob(w) + 0.5 * p.dot(p)
        q, p_new = w.clone(), p + 0.5 * 0.15 * grad(w)
        for step in range(5):
            q = q + 0.15 * p_new
            p_new = p_new + (0.15 if step < 4 else 0.075) * grad(q)
        if torch.log(torch.rand(1)) <= min(0.0, (start + log_prob(q) - 0.5 * p_new.dot(p_new)).item()):
            w = q.detach()
        chain.append(w)
    hessian = torch.autograd.functional.hessian(log_prob, w, create_graph=True)
    eigenvalues, vectors = torch.linalg.eigh(-hessian, UPLO="L")
    soft = eigenvalues / torch.tanh(1e6 * eigenvalues)
    metric = vectors @ soft.diag() @ vectors.t()
    momentum = torch.distributions.MultivariateNormal(torch.zeros(3), metric).sample()
    lower = torch.linalg.cholesky(metric)
    half = torch.linalg.solve_triangular(lower, momentum.view(-1, 1), upper=False)
    return [torch.stack(chain), metric, torch.linalg.solve_triangular(lower.t(), half, upper=True)]


@float64_program
def fast_ica(torch):
    t = torch.linspace(0, 8, 300)
    sources = torch.stack([torch.sin(2 * t), torch.sign(torch.sin(3 * t)), (t % 1.3) - 0.65], 1)
    X = (sources + 0.02 * torch.randn(300, 3)) @ torch.tensor(
        [[1.0, 1, 1], [0.5, 2, 1], [1.5, 1, 2], [0.3, -0.7, 1.1]]
    ).T

    def decorrelate(W):
        s, u = torch.linalg.eigh(W @ W.T)
        return (u * (1.0 / torch.sqrt(torch.clamp(s, min=torch.finfo(W.dtype).tiny)))) @ u.T @ W

    centred = (X - X.mean(0)).T
    u, d, _ = torch.linalg.svd(centred, full_matrices=False)
    u = u * torch.sign(u[0:1, :])
    K = (u / d.unsqueeze(0)).T[:3]
    X1 = K @ centred * np.sqrt(300)
    results = []
    for parallel in (True, False):
        w_init = torch.randn(3, 3)
        if parallel:
            W = decorrelate(w_init)
            for _ in range(40):
                g = torch.tanh(W @ X1)
                W = decorrelate((g @ X1.T) / 300 - (1 - g**2).mean(-1).unsqueeze(1) * W)
        else:
            W = torch.zeros(3, 3)
            for j in range(3):
                w = w_init[j].clone()
                w /= torch.sqrt((w**2).sum())
                for _ in range(40):
                    wx = w @ X1
                    w1 = (X1 * (wx * torch.exp(-(wx**2) / 2)).unsqueeze(0)).mean(1)
                    w1 = w1 - ((1 - wx**2) * torch.exp(-(wx**2) / 2)).mean() * w
                    w1 = w1 - (w1 @ W[:j].T) @ W[:j]
                    w = w1 / torch.sqrt((w1**2).sum())
                W[j, :] = w
        S = (W @ K @ centred).T
        W = W / torch.std(S, dim=0, keepdim=True, correction=0).T
        results += [torch.corrcoef(torch.cat([S, sources], 1).T)[:3, 3:].abs(), torch.linalg.pinv(W @ K)]
    return results


@float64_program
def spectral_masking(torch):
    t = torch.linspace(0, 1, 512)
    clean = torch.sin(2 * torch.pi * (20 * t + 60 * t**2)).repeat(2, 1)
    noisy = clean + 0.4 * torch.randn_like(clean)
    window = torch.hann_window(64)
    spec = torch.view_as_real(torch.stft(noisy, 64, 16, window=window, normalized=True, return_complex=True))
    logits = torch.zeros(spec.shape[1:3], requires_grad=True)
    optimizer, losses = torch.optim.Adam([logits], lr=0.1), []
    for _ in range(5):
        masked = torch.view_as_complex(spec * torch.sigmoid(logits).unsqueeze(-1))
        out = torch.istft(masked, 64, 16, window=window, normalized=True)
        loss = (out - clean[:, : out.shape[-1]]).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    onesided = torch.stft(noisy, 128, 32, window=torch.hann_window(128), onesided=True, return_complex=True)
    back = torch.istft(onesided, 128, 32, window=torch.hann_window(128), length=512, return_complex=False)
    weight = torch.ones(257, dtype=torch.complex128, requires_grad=True)  # complex parameters under Adam
    optimizer = torch.optim.Adam([weight], lr=0.05)
    for _ in range(5):
        loss = (torch.fft.irfft(weight * torch.fft.rfft(noisy, n=512), n=512) - clean).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return [losses, back, weight.detach(), torch.fft.fftshift(torch.fft.fftfreq(8, d=0.1))]


@float64_program
def low_rank_gaussians(torch):
    D = torch.distributions
    mu, factor = torch.randn(2, 5), torch.randn(2, 5, 2)
    p = D.LowRankMultivariateNormal(mu[0], factor[0], torch.full((5,), 0.49))
    q = D.LowRankMultivariateNormal(mu[1], factor[1], torch.full((5,), 1.69))
    diagonal = D.Independent(D.Normal(mu[1], torch.full((5,), 1.3)), 1)
    full = D.MultivariateNormal(mu[1], scale_tril=q.scale_tril)
    values = [D.kl_divergence(p, q), D.kl_divergence(p, full), p.entropy(), p.log_prob(mu[1]), q.precision_matrix]
    values.append(D.kl_divergence(diagonal, D.Independent(D.Normal(mu[0], torch.ones(5)), 1)))
    x = torch.randn(30, 5)
    y = x @ torch.randn(5) + 0.1 * torch.randn(30)
    loc, low, log_diag = (
        torch.zeros(5, requires_grad=True),
        (0.1 * torch.randn(5, 2)).requires_grad_(),
        torch.full((5,), -2.0, requires_grad=True),
    )
    optimizer, prior = (
        torch.optim.Adam([loc, low, log_diag], lr=0.05),
        D.MultivariateNormal(torch.zeros(5), torch.eye(5)),
    )
    for _ in range(10):
        posterior = D.LowRankMultivariateNormal(loc, low, log_diag.exp())
        w = posterior.rsample((6,))
        elbo = D.Normal(w @ x.T, 0.1).log_prob(y).sum(-1).mean() - D.kl_divergence(posterior, prior)
        optimizer.zero_grad()
        (-elbo).backward()
        optimizer.step()
    return values + [elbo.item(), loc.detach(), low.detach()]


PROGRAMS = [
    spring_integrators,
    mixture_em,
    newton_logistic,
    input_attacks,
    extended_kalman,
    contrastive_langevin,
    hamiltonian_monte_carlo,
    fast_ica,
    spectral_masking,
    low_rank_gaussians,
]
# the programs whose two runs take under ~2 s from a cold compilation cache
FAST = {
    "spring_integrators",
    "mixture_em",
    "newton_logistic",
    "input_attacks",
    "hamiltonian_monte_carlo",
}


@pytest.mark.parametrize(
    "program",
    [pytest.param(p, id=p.__name__, marks=[] if p.__name__ in FAST else [pytest.mark.slow]) for p in PROGRAMS],
)
def test_program_matches_torch(program):
    run_with_each_library(program, TOLERANCE)
