"""Spectral and score-based scientific programs of the kinds public PyTorch code holds, each written once against
torch's API and run with torch and with batched_grad in its place (seeded alike, float64, compared to round-off):
Fourier neural operators in 1, 2 and 3 dims (complex einsum weights on the low rfft/rfft2/rfftn modes, the relative
Lp loss, unit-Gaussian normalisers), a pseudo-spectral Navier-Stokes vorticity solver driven by a Gaussian random
field, viscous Burgers by RK4 with dealiasing and a viscosity fitted through the solver, the score-SDE tutorial
(Fourier time features, the VE SDE loss, Euler-Maruyama and predictor-corrector samplers, the probability-flow ODE
with a Hutchinson divergence), score_sde_pytorch's VP SDE loss and reverse-diffusion/Langevin sampler, sliced, exact
and denoising score matching with annealed Langevin sampling, spectral weights stored as real pairs under each fft
norm, and spectral clustering with kernel PCA.
test_fresh_programs_numerics2.py holds the rest of this round."""

import math

import numpy as np
import pytest

from ported._harness import float64_program, run_with_each_library

TOLERANCE = {"rtol": 1e-8, "atol": 1e-10}


def relative_lp(torch, pred, target):
    n = pred.shape[0]
    diff = torch.norm(pred.reshape(n, -1) - target.reshape(n, -1), 2, 1)
    return (diff / torch.norm(target.reshape(n, -1), 2, 1)).sum()


def spectral_layer(torch, width, modes):
    """A Fourier layer for len(modes) dims: the lowest rfft modes (and, in the leading dims, the highest) mixed by
    complex weights; the rest dropped."""
    nn, dims = torch.nn, len(modes)
    letters = "xyz"[:dims]
    spec = f"bi{letters},io{letters}->bo{letters}"
    corners = 2 ** (dims - 1)

    class Spectral(nn.Module):
        def __init__(self):
            super().__init__()
            scale = 1 / (width * width)
            self.weights = nn.ParameterList(
                [nn.Parameter(scale * torch.rand(width, width, *modes, dtype=torch.cdouble)) for _ in range(corners)]
            )

        def forward(self, x):
            axes = list(range(-dims, 0))
            x_ft = torch.fft.rfftn(x, dim=axes)
            out = torch.zeros(x.shape[0], width, *x.shape[2:-1], x.shape[-1] // 2 + 1, dtype=torch.cdouble)
            for c, w in enumerate(self.weights):
                index = [slice(None), slice(None)]
                for d, m in enumerate(modes[:-1]):
                    index.append(slice(-m, None) if c >> d & 1 else slice(None, m))
                index = tuple(index + [slice(None, modes[-1])])
                out[index] = torch.einsum(spec, x_ft[index], w)
            return torch.fft.irfftn(out, s=x.shape[2:], dim=axes)

    return Spectral()


def fourier_operator(torch, dims, modes, width, channels_in):
    nn, F = torch.nn, torch.nn.functional
    conv = (nn.Conv1d, nn.Conv2d, nn.Conv3d)[dims - 1]

    class FNO(nn.Module):
        def __init__(self):
            super().__init__()
            self.lift = nn.Linear(channels_in + dims, width)
            self.spectral = nn.ModuleList([spectral_layer(torch, width, modes) for _ in range(2)])
            self.pointwise = nn.ModuleList([conv(width, width, 1) for _ in range(2)])
            self.project = nn.Sequential(nn.Linear(width, 32), nn.GELU(), nn.Linear(32, 1))

        def forward(self, a):
            axes = [torch.linspace(0, 1, n) for n in a.shape[1:-1]]
            grid = torch.stack(torch.meshgrid(*axes, indexing="ij"), -1).expand(a.shape[0], *a.shape[1:-1], dims)
            x = self.lift(torch.cat([a, grid], -1)).movedim(-1, 1)
            x = F.pad(x, [0, 2] * dims)
            for i, (k, w) in enumerate(zip(self.spectral, self.pointwise)):
                x = k(x) + w(x)
                x = F.gelu(x) if i == 0 else x
            x = x[(Ellipsis,) + (slice(None, -2),) * dims]
            return self.project(x.movedim(1, -1)).squeeze(-1)

    return FNO()


def train_operator(torch, dims, size, modes, steps):
    a = torch.randn(8, *(size,) * dims, 1)
    u = torch.tanh(a.squeeze(-1).cumsum(1) / 4)
    mean, std = u.mean(0), u.std(0)
    model = fourier_operator(torch, dims, modes, 6, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(a, (u - mean) / std), batch_size=4, shuffle=True
    )
    losses = []
    for _ in range(steps // 2):
        for x, y in loader:
            opt.zero_grad()
            loss = relative_lp(torch, model(x) * std + mean, y * std + mean)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
    with torch.no_grad():
        test = model(a[:2])
    return [losses, test, [p.detach() for p in model.parameters()]]


@float64_program
def fourier_operator_1d(torch):
    return train_operator(torch, 1, 24, (5,), 4)


@float64_program
def fourier_operator_2d(torch):
    return train_operator(torch, 2, 9, (3, 3), 2)


@float64_program
def fourier_operator_3d(torch):
    return train_operator(torch, 3, 6, (2, 2, 2), 2)


@float64_program
def navier_stokes_vorticity(torch):
    s, alpha, tau = 16, 2.5, 7.0
    k = torch.cat([torch.arange(0, s // 2), torch.arange(-s // 2, 0)]).repeat(s, 1)
    amplitude = (
        s**2
        * math.sqrt(2)
        * tau ** (0.5 * (2 * alpha - 2))
        * (4 * math.pi**2 * (k**2 + k.T**2) + tau**2) ** (-alpha / 2)
    )
    amplitude[0, 0] = 0
    w0 = torch.fft.ifftn(amplitude * torch.randn(2, s, s, dtype=torch.cfloat), dim=[-1, -2]).real
    t = torch.linspace(0, 1, s + 1)[:-1]
    X, Y = torch.meshgrid(t, t, indexing="ij")
    forcing_hat = torch.fft.rfft2(0.1 * (torch.sin(2 * math.pi * (X + Y)) + torch.cos(2 * math.pi * (X + Y))))
    ky, kx = k[..., : s // 2 + 1], k.T[..., : s // 2 + 1]
    lap = 4 * math.pi**2 * (kx**2 + ky**2)
    lap[0, 0] = 1.0
    dealias = ((ky.abs() <= s / 3) & (kx.abs() <= s / 3)).float()
    w_hat, dt, visc, snapshots = torch.fft.rfft2(w0), 1e-2, 1e-3, []
    for step in range(20):
        psi = w_hat / lap

        def physical(h):
            return torch.fft.irfft2(h, s=(s, s))

        q, v = physical(2j * math.pi * ky * psi), physical(-2j * math.pi * kx * psi)
        wx, wy = physical(2j * math.pi * kx * w_hat), physical(2j * math.pi * ky * w_hat)
        nonlinear = dealias * torch.fft.rfft2(q * wx + v * wy)
        w_hat = (-dt * nonlinear + dt * forcing_hat + (1 - 0.5 * dt * visc * lap) * w_hat) / (1 + 0.5 * dt * visc * lap)
        if step % 5 == 4:
            snapshots.append(physical(w_hat))
    return [w0, torch.stack(snapshots, -1)]


@float64_program
def burgers_viscosity_fit(torch):
    n = 32
    x = torch.arange(n) * 2 * math.pi / n
    k = torch.fft.rfftfreq(n, d=2 * math.pi / n) * 2 * math.pi
    keep = (k < 2 / 3 * k.max()).double()

    def rhs(u_hat, nu):
        u, ux = torch.fft.irfft(u_hat, n=n), torch.fft.irfft(1j * k * u_hat, n=n)
        return -keep * torch.fft.rfft(u * ux) - nu * k**2 * u_hat

    def solve(u0, nu, dt=0.02, steps=15):
        h = torch.fft.rfft(u0)
        for _ in range(steps):
            k1 = rhs(h, nu)
            k2 = rhs(h + dt / 2 * k1, nu)
            k3 = rhs(h + dt / 2 * k2, nu)
            k4 = rhs(h + dt * k3, nu)
            h = h + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return torch.fft.irfft(h, n=n)

    u0 = torch.sin(x) + 0.5 * torch.cos(2 * x)
    target = solve(u0, 0.1)
    heat = torch.fft.ifft(torch.fft.fft(u0 + 0j) * torch.exp(-0.3 * (torch.fft.fftfreq(n) * n) ** 2)).real
    log_nu = torch.tensor(math.log(0.3), requires_grad=True)
    opt, losses = torch.optim.Adam([log_nu], lr=0.1), []
    for _ in range(4):
        opt.zero_grad()
        loss = (solve(u0, log_nu.exp()) - target).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return [target, heat, losses, log_nu.detach(), torch.fft.fftshift(k)]


def score_network(torch, sigma):
    nn = torch.nn

    class ScoreNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.W = nn.Parameter(torch.randn(4) * 30, requires_grad=False)
            self.embed = nn.Linear(8, 8)
            self.down = nn.Conv2d(1, 4, 3, stride=2, bias=False)
            self.dense = nn.Linear(8, 4)
            self.norm = nn.GroupNorm(2, 4)
            self.up = nn.ConvTranspose2d(4, 1, 3, stride=2, output_padding=1)

        def forward(self, x, t):
            proj = t[:, None] * self.W[None, :] * 2 * np.pi
            embed = self.embed(torch.cat([torch.sin(proj), torch.cos(proj)], -1))
            embed = embed * torch.sigmoid(embed)
            h = self.down(x)
            h += self.dense(embed)[..., None, None]
            h = self.norm(h)
            h = self.up(h * torch.sigmoid(h))
            return h / torch.sqrt((sigma ** (2 * t) - 1) / 2 / np.log(sigma))[:, None, None, None]

    return ScoreNet()


@float64_program
def score_sde_tutorial(torch):
    sigma = 25.0

    def std(t):
        return torch.sqrt((sigma ** (2 * t) - 1.0) / 2.0 / np.log(sigma))

    model = score_network(torch, sigma)
    opt, losses = torch.optim.Adam(model.parameters(), lr=1e-3), []
    for x in torch.rand(3, 4, 1, 8, 8):
        t = torch.rand(4) * (1 - 1e-5) + 1e-5
        z = torch.randn_like(x)
        s = std(t)[:, None, None, None]
        loss = torch.mean(torch.sum((model(x + z * s, t) * s + z) ** 2, dim=(1, 2, 3)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = [losses]
    with torch.no_grad():
        x, steps = torch.randn(3, 1, 8, 8) * std(torch.ones(3))[:, None, None, None], torch.linspace(1.0, 1e-3, 4)
        for t in steps:
            g = sigma ** (torch.ones(3) * t)
            mean = x + (g**2)[:, None, None, None] * model(x, torch.ones(3) * t) * (steps[0] - steps[1])
            x = mean + torch.sqrt(steps[0] - steps[1]) * g[:, None, None, None] * torch.randn_like(x)
            score = model(x, torch.ones(3) * t)
            langevin = 2 * (0.16 * 8 / torch.norm(score.reshape(3, -1), dim=-1).mean()) ** 2
            x = x + langevin * score + torch.sqrt(2 * langevin) * torch.randn_like(x)
        out.append(mean)
    x, eps = torch.rand(2, 1, 8, 8), torch.randn(2, 1, 8, 8)
    for t in (1e-5, 0.5, 1.0):
        sample = x.clone().requires_grad_(True)
        times = torch.full((2,), t)
        grad = torch.autograd.grad(torch.sum(model(sample, times) * eps), sample)[0]
        out.append(-0.5 * sigma ** (2 * t) * torch.sum(grad * eps, dim=(1, 2, 3)))
    return out


@float64_program
def score_matching_losses(torch):
    nn = torch.nn

    def data(n):
        return torch.randn(n, 2) * 0.5 + (torch.randint(0, 2, (n, 1)).double() * 4 - 2)

    net = nn.Sequential(nn.Linear(2, 16), nn.Softplus(), nn.Linear(16, 2))
    opt, out = torch.optim.Adam(net.parameters(), lr=1e-3), []
    for _ in range(5):
        x = data(16).unsqueeze(0).expand(2, 16, 2).contiguous().view(-1, 2).requires_grad_(True)
        v = torch.randn_like(x)
        score = net(x)
        grad_v = torch.autograd.grad(torch.sum(score * v), x, create_graph=True)[0]
        loss = (torch.sum(score * score, -1) / 2 + torch.sum(v * grad_v, -1)).view(2, -1).mean(0).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    energy = nn.Sequential(nn.Linear(2, 8), nn.Softplus(), nn.Linear(8, 1))
    x = data(8).requires_grad_(True)
    g = torch.autograd.grad(-energy(x).sum(), x, create_graph=True)[0]
    trace = sum(torch.autograd.grad(g[:, i].sum(), x, create_graph=True)[0][:, i] for i in range(2))
    out.append((torch.norm(g, dim=-1) ** 2 / 2 + trace).mean().item())
    sigmas = torch.exp(torch.linspace(math.log(3.0), math.log(0.1), 4))
    embed, head = nn.Embedding(4, 8), nn.Sequential(nn.Linear(2, 8), nn.Softplus())
    tail = nn.Linear(8, 2)
    params = [*embed.parameters(), *head.parameters(), *tail.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    for _ in range(5):
        x, labels = data(16), torch.randint(0, 4, (16,))
        used = sigmas[labels].view(16, 1)
        noisy = x + torch.randn_like(x) * used
        scores = tail(head(noisy) * embed(labels))
        loss = (0.5 * ((scores + (noisy - x) / used**2) ** 2).sum(-1) * used.squeeze() ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    with torch.no_grad():
        x = torch.rand(8, 2) * 4 - 2
        for c, sigma in enumerate(sigmas):
            step = 2e-5 * (sigma / sigmas[-1]) ** 2
            for _ in range(3):
                labels = torch.full((8,), c, dtype=torch.long)
                x = x + step * tail(head(x) * embed(labels)) + torch.randn_like(x) * torch.sqrt(step * 2)
    return out + [x.clamp(-6, 6)]


@float64_program
def vp_sde_predictor_corrector(torch):
    nn, n_steps, beta_0, beta_1 = torch.nn, 20, 0.1, 20.0
    betas = torch.linspace(beta_0 / n_steps, beta_1 / n_steps, n_steps)
    alphas = 1 - betas

    def marginal_std(t):
        return torch.sqrt(1 - torch.exp(2 * (-0.25 * t**2 * (beta_1 - beta_0) - 0.5 * t * beta_0)))

    net = nn.Sequential(nn.Linear(3, 16), nn.SiLU(), nn.Linear(16, 2))

    def score(x, t):
        return -net(torch.cat([x, (t * 999 / 1000)[:, None]], 1)) / marginal_std(t)[:, None]

    data = torch.randn(64, 2) * torch.tensor([1.0, 0.3]) + torch.tensor([0.5, -0.5])
    opt, losses = torch.optim.Adam(net.parameters(), lr=2e-4), []
    for weighted in (False, True):
        for step in range(4):
            batch = data[torch.randint(0, 64, (16,))]
            t = torch.rand(16) * (1 - 1e-5) + 1e-5
            z, std = torch.randn_like(batch), marginal_std(t)
            mean = torch.exp(-0.25 * t**2 * (beta_1 - beta_0) - 0.5 * t * beta_0)[:, None] * batch
            s = score(mean + std[:, None] * z, t)
            g2 = beta_0 + t * (beta_1 - beta_0)
            per = (s + z / std[:, None]).square().sum(-1) * g2 if weighted else (s * std[:, None] + z).square().sum(-1)
            loss = torch.mean(0.5 * per)
            opt.zero_grad()
            loss.backward()
            for group in opt.param_groups:
                group["lr"] = 2e-4 * np.minimum((step + 1) / 2, 1.0)
            torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
            opt.step()
            losses.append(loss.item())
    with torch.no_grad():
        x = torch.randn(16, 2)
        for t in torch.linspace(1, 1e-3, n_steps):
            t = torch.ones(16) * t
            step = (t * (n_steps - 1)).long()
            grad, noise = score(x, t), torch.randn_like(x)
            size = (0.16 * noise.norm(dim=-1).mean() / grad.norm(dim=-1).mean()) ** 2 * 2 * alphas[step]
            x = x + size[:, None] * grad + torch.sqrt(size * 2)[:, None] * noise
            drift = torch.sqrt(alphas[step])[:, None] * x - x - betas[step][:, None] * score(x, t)
            mean = x - drift
            x = mean + torch.sqrt(betas[step])[:, None] * torch.randn_like(x)
    return [losses, mean, -np.log(2 * np.pi) - torch.sum(mean**2, dim=1) / 2]


@float64_program
def real_stored_spectral_weights(torch):
    nn = torch.nn
    out = []
    for norm in ("ortho", "forward", "backward"):
        weight = nn.Parameter(torch.randn(2, 3, 4, 2, 2) / 6)

        def layer(x):
            h, w = x.shape[-2:]
            x_ft = torch.fft.fftshift(torch.fft.rfft2(x, norm=norm), dim=-2)
            kept = (slice(None), slice(None), slice(h // 2 - 2, h // 2 + 2), slice(0, 2))
            mixed = torch.zeros(x.shape[0], 3, h, w // 2 + 1, dtype=x_ft.dtype)
            mixed[kept] = torch.einsum("bixy,ioxy->boxy", x_ft[kept], torch.view_as_complex(weight))
            return torch.fft.irfft2(torch.fft.ifftshift(mixed, dim=-2), s=(h, w), norm=norm)

        x = torch.randn(2, 2, 8, 8)
        fine = torch.nn.functional.interpolate(x, size=(16, 16), mode="bicubic")
        opt = torch.optim.Adam([weight], lr=1e-2)
        for _ in range(3):
            opt.zero_grad()
            loss = (layer(x) - x.flip(-1)[:, :1]).pow(2).mean()
            loss.backward()
            opt.step()
        out += [
            layer(x).detach(),
            layer(fine).detach(),
            weight.grad,
            torch.view_as_real(torch.fft.fft2(x[0], norm=norm)),
        ]
    return out


@float64_program
def spectral_clustering_moons(torch):
    t = torch.rand(40) * math.pi
    upper = torch.stack([torch.cos(t[:20]), torch.sin(t[:20])], 1)
    lower = torch.stack([1 - torch.cos(t[20:]), 0.5 - torch.sin(t[20:])], 1)
    points = torch.cat([upper, lower]) + 0.05 * torch.randn(40, 2)
    d2 = torch.cdist(points, points).pow(2)
    affinity = torch.exp(-d2 / 0.08)
    affinity.fill_diagonal_(0)
    scale = torch.diag(affinity.sum(1).rsqrt())
    laplacian = torch.eye(40) - scale @ affinity @ scale
    evals, evecs = torch.linalg.eigh(laplacian)
    embedding = evecs[:, :2] / evecs[:, :2].norm(dim=1, keepdim=True)
    centres = embedding[torch.tensor([0, 30])].clone()
    for _ in range(6):
        labels = torch.cdist(embedding, centres).argmin(1)
        centres = torch.stack([embedding[labels == k].mean(0) for k in range(2)])
    gram = torch.exp(-d2 / 0.5)
    mean = torch.full((40, 40), 1 / 40)
    centred = gram - mean @ gram - gram @ mean + mean @ gram @ mean
    lam, alphas = torch.linalg.eigh(centred)
    return [evals[:4], labels, lam.flip(0)[:3], (alphas.flip(1)[:, :2] * lam.flip(0)[:2].sqrt()).abs().sum(0)]


PROGRAMS = [
    fourier_operator_1d,
    fourier_operator_2d,
    fourier_operator_3d,
    navier_stokes_vorticity,
    burgers_viscosity_fit,
    score_sde_tutorial,
    score_matching_losses,
    vp_sde_predictor_corrector,
    real_stored_spectral_weights,
    spectral_clustering_moons,
]
# the programs whose two runs take under ~2 s from a cold compilation cache
FAST = {"spectral_clustering_moons"}


@pytest.mark.parametrize(
    "program",
    [pytest.param(p, id=p.__name__, marks=[] if p.__name__ in FAST else [pytest.mark.slow]) for p in PROGRAMS],
)
def test_program_matches_torch(program):
    run_with_each_library(program, TOLERANCE)
