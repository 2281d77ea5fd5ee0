"""Numerical programs of the kinds public PyTorch code holds (the second half of test_fresh_programs_numerics.py's
round), each written once against torch's API and run with torch and with batched_grad in its place (seeded alike,
float64, compared to round-off): Gaussian-process regression with Adam then L-BFGS on the marginal likelihood and
kernel ridge regression, Bayesian optimisation by expected improvement over a Matern kernel, PCA by pca_lowrank,
svd, svd_lowrank and eigh, t-SNE with its perplexity search and gains, k-means with euclidean and cosine distances,
a full-covariance Gaussian mixture by EM, Griffin-Lim phase recovery with a mel filterbank, classic image filters
(separable Gaussian blur, Sobel, unfold/fold overlap-add, every resize mode including the anti-aliased ones) and a
spatial transformer trained through affine_grid and grid_sample."""

import math

import pytest

from ported._harness import float64_program, run_with_each_library

TOLERANCE = {"rtol": 1e-8, "atol": 1e-10}


def squared_exponential(torch, a, b, log_scale, log_amplitude):
    d2 = (a.unsqueeze(1) - b.unsqueeze(0)).pow(2).sum(-1)
    return log_amplitude.exp().pow(2) * torch.exp(-0.5 * d2 / log_scale.exp().pow(2))


@float64_program
def gp_regression(torch):
    X = torch.rand(20, 1) * 6
    y = torch.sin(X[:, 0]) + 0.1 * torch.randn(20)
    log_scale, log_amp, log_noise = (torch.tensor(v, requires_grad=True) for v in (0.0, 0.0, -1.0))
    params = [log_scale, log_amp, log_noise]

    def negative_mll():
        K = squared_exponential(torch, X, X, log_scale, log_amp) + (log_noise.exp() ** 2 + 1e-6) * torch.eye(20)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L)
        return 0.5 * (y.unsqueeze(-1) * alpha).sum() + L.diagonal().log().sum() + 10 * math.log(2 * math.pi)

    adam, history = torch.optim.Adam(params, lr=0.05), []
    for _ in range(10):
        adam.zero_grad()
        loss = negative_mll()
        loss.backward()
        adam.step()
        history.append(loss.item())
    lbfgs = torch.optim.LBFGS(params, lr=0.5, max_iter=10, line_search_fn="strong_wolfe")

    def closure():
        lbfgs.zero_grad()
        loss = negative_mll()
        loss.backward()
        return loss

    history.append(lbfgs.step(closure).item())
    with torch.no_grad():
        Xs = torch.linspace(0, 6, 5).unsqueeze(-1)
        K = squared_exponential(torch, X, X, log_scale, log_amp) + log_noise.exp() ** 2 * torch.eye(20)
        L = torch.linalg.cholesky(K)
        Ks = squared_exponential(torch, X, Xs, log_scale, log_amp)
        v = torch.linalg.solve_triangular(L, Ks, upper=False)
        mean = Ks.T @ torch.cholesky_solve(y.unsqueeze(-1), L)
        var = squared_exponential(torch, Xs, Xs, log_scale, log_amp).diagonal() - v.pow(2).sum(0)
        ridge = Ks.T @ torch.linalg.solve(K + 1e-2 * torch.eye(20), y)
        features = torch.cat([X, X**2, torch.ones_like(X)], 1)
        w = torch.linalg.lstsq(features, y.unsqueeze(-1)).solution
        logdets = [torch.linalg.slogdet(K).logabsdet, torch.logdet(K)]
    return [history, [p.detach() for p in params], mean, var, ridge, w, logdets]


@float64_program
def expected_improvement_loop(torch):
    normal_dist = torch.distributions.Normal

    def objective(x):
        return -(torch.sin(3 * x[..., 0]) + x[..., 0] ** 2 - 0.7 * x[..., 0]) + 0.3 * torch.cos(5 * x[..., 1])

    def matern(a, b, scale, amplitude):
        d = torch.cdist(a / scale, b / scale)
        return amplitude * (1 + math.sqrt(5) * d + 5 / 3 * d**2) * torch.exp(-math.sqrt(5) * d)

    lo, hi = torch.tensor([-1.0, -1.0]), torch.tensor([2.0, 1.0])
    X = lo + (hi - lo) * torch.rand(4, 2)
    y, out = objective(X), []
    for _ in range(2):
        ys = (y - y.mean()) / y.std()
        raw = torch.zeros(4, requires_grad=True)

        def hyper():
            p = torch.nn.functional.softplus(raw)
            return p[:2] + 1e-3, p[2], p[3] * 0.1 + 1e-4

        def factor():
            scale, amplitude, noise = hyper()
            return torch.linalg.cholesky(matern(X, X, scale, amplitude) + noise * torch.eye(len(X)))

        opt = torch.optim.Adam([raw], lr=0.1)
        for _ in range(8):
            L = factor()
            mll = -0.5 * (ys[:, None] * torch.cholesky_solve(ys[:, None], L)).sum() - L.diagonal().log().sum()
            opt.zero_grad()
            (-mll).backward()
            opt.step()

        def ei(candidates):
            scale, amplitude, _ = hyper()
            L = factor()
            A = torch.linalg.solve_triangular(L, matern(X, candidates, scale, amplitude), upper=False)
            mu = (A.T @ torch.linalg.solve_triangular(L, ys[:, None], upper=False)).squeeze(-1)
            sd = (amplitude - (A**2).sum(0)).clamp_min(1e-12).sqrt()
            z = (mu - ys.max()) / sd
            n = normal_dist(torch.zeros_like(z), torch.ones_like(z))
            return sd * (z * n.cdf(z) + n.log_prob(z).exp())

        candidates = (lo + (hi - lo) * torch.rand(5, 2)).requires_grad_()
        opt = torch.optim.Adam([candidates], lr=0.05)
        for _ in range(6):
            opt.zero_grad()
            (-ei(candidates).sum()).backward()
            opt.step()
            with torch.no_grad():
                candidates.data = torch.max(torch.min(candidates, hi), lo)
        with torch.no_grad():
            scores = ei(candidates)
        best = candidates.detach()[scores.argmax()].unsqueeze(0)
        X, y = torch.cat([X, best]), torch.cat([y, objective(best)])
        out += [scores, raw.detach()]
    return out + [X, y]


@float64_program
def principal_components(torch):
    A = torch.randn(40, 3) @ torch.randn(3, 8) + 0.05 * torch.randn(40, 8)
    _, S, V = torch.pca_lowrank(A, q=3, center=True, niter=4)
    centred = A - A.mean(0, keepdim=True)
    U2, S2, Vh2 = torch.linalg.svd(centred, full_matrices=False)
    _, S3, _ = torch.svd_lowrank(centred, q=4, niter=3)
    evals = torch.linalg.eigh(centred.T @ centred / 39).eigenvalues.flip(0)
    signs = torch.sign(U2[torch.argmax(U2.abs(), dim=0), range(U2.shape[1])])
    Vh2 = Vh2 * signs[:, None]
    whitened = centred @ Vh2[:3].T / S2[:3] * math.sqrt(39)
    recon = (U2[:, :3] * S2[:3]) @ (Vh2[:3] * signs[:3, None]) + A.mean(0)
    return [
        S,
        (centred @ V[:, :3]).abs().sum(),
        S2,
        S3,
        evals[:3],
        torch.cov(whitened.T),
        torch.linalg.matrix_rank(recon - A.mean(0)),
        torch.linalg.norm(recon - A),
    ]


@float64_program
def tsne_embedding(torch):
    X = torch.cat([torch.randn(12, 6) + 3, torch.randn(12, 6) - 3])
    n, perplexity = 24, 6.0
    D = (X.pow(2).sum(1) - 2 * X @ X.t()).t() + X.pow(2).sum(1)
    P, others = torch.zeros(n, n), list(range(n))
    for i in range(n):
        cols = others[:i] + others[i + 1 :]
        beta, low, high = torch.ones(1), None, None
        for _ in range(50):
            p = torch.exp(-D[i, cols] * beta)
            entropy = torch.log(p.sum()) + beta * (D[i, cols] * p).sum() / p.sum()
            gap = entropy - math.log(perplexity)
            if torch.abs(gap) < 1e-5:
                break
            if gap > 0:
                low = beta.clone()
                beta = beta * 2 if high is None else (beta + high) / 2
            else:
                high = beta.clone()
                beta = beta / 2 if low is None else (beta + low) / 2
        P[i, cols] = p / p.sum()
    P = torch.max((P + P.t()) / (P + P.t()).sum() * 4, torch.tensor([1e-21]))
    Y, step, gains, costs = torch.randn(n, 2), torch.zeros(n, 2), torch.ones(n, 2), []
    for it in range(15):
        num = 1 / (1 + ((Y.pow(2).sum(1) - 2 * Y @ Y.t()).t() + Y.pow(2).sum(1)))
        num[range(n), range(n)] = 0
        Q = torch.max(num / num.sum(), torch.tensor([1e-12]))
        dY = torch.stack([((P - Q)[:, i] * num[:, i]).repeat(2, 1).t().mul(Y[i] - Y).sum(0) for i in range(n)])
        same = (dY > 0) == (step > 0)
        gains = ((gains + 0.2) * (~same).double() + gains * 0.8 * same.double()).clamp_min(0.01)
        step = (0.5 if it < 10 else 0.8) * step - 100 * gains * dY
        Y = Y + step
        Y = Y - Y.mean(0)
        costs.append(torch.sum(P * torch.log(P / Q)).item())
    return [costs, Y]


@float64_program
def kmeans_two_distances(torch):
    x = torch.randn(90, 2) / 6
    x[:30] += 1.0
    x[30:60, 0] -= 1.0
    out = []
    for cosine in (False, True):

        def distance(a, b):
            if cosine:
                a, b = a / a.norm(dim=-1, keepdim=True), b / b.norm(dim=-1, keepdim=True)
                return 1 - (a.unsqueeze(1) * b.unsqueeze(0)).sum(-1).squeeze()
            return ((a.unsqueeze(1) - b.unsqueeze(0)) ** 2.0).sum(-1).squeeze()

        centres, rounds = x[torch.randperm(90)[:3]].clone(), 0
        while True:
            assignment = torch.argmin(distance(x, centres), dim=1)
            previous = centres.clone()
            for c in range(3):
                centres[c] = torch.index_select(x, 0, torch.nonzero(assignment == c).squeeze()).mean(0)
            rounds += 1
            if torch.sum(torch.sqrt(torch.sum((centres - previous) ** 2, dim=1))) ** 2 < 1e-4 or rounds == 20:
                break
        out += [rounds, assignment.bincount(), centres, torch.argmin(distance(torch.randn(4, 2), centres), 1)]
    return out


@float64_program
def gaussian_mixture_em(torch):
    x = torch.cat(
        [
            torch.randn(40, 2) * 0.5 + torch.tensor([2.0, 0.0]),
            torch.randn(40, 2) @ torch.tensor([[1.0, 0.3], [0.0, 0.4]]) - 1,
        ]
    )
    x = x.unsqueeze(1)
    mu, var, pi = torch.randn(1, 2, 2), torch.eye(2).expand(1, 2, 2, 2).clone(), torch.full((1, 2, 1), 0.5)

    def weighted_log_prob():
        precision = torch.inverse(var)
        log_det = torch.stack([2 * torch.linalg.cholesky(precision[0, k]).diagonal().log().sum() for k in range(2)])
        diff = (x - mu).unsqueeze(-2)
        quad = torch.zeros(diff.shape)
        for k in range(2):
            quad[:, k] = diff[:, k].squeeze(-2).mm(precision[0, k]).unsqueeze(1)
        maha = torch.sum(quad.squeeze(-2) * (x - mu), dim=2, keepdim=True)
        return -0.5 * (2 * math.log(2 * math.pi) - log_det.unsqueeze(-1) + maha) + torch.log(pi)

    scores = []
    for _ in range(8):
        log_resp = weighted_log_prob() - torch.logsumexp(weighted_log_prob(), dim=1, keepdim=True)
        resp = log_resp.exp()
        pi = resp.sum(0, keepdim=True) + 1e-6
        mu = (resp * x).sum(0, keepdim=True) / pi
        outer = (x - mu).unsqueeze(-1).matmul((x - mu).unsqueeze(-2))
        var = (outer * resp.unsqueeze(-1)).sum(0, keepdim=True) / resp.sum(0, keepdim=True).unsqueeze(-1)
        var = var + 1e-6 * torch.eye(2)
        pi = pi / x.shape[0]
        scores.append(torch.logsumexp(weighted_log_prob(), dim=1).mean().item())
    _, labels = torch.max(weighted_log_prob(), 1)
    return [scores, pi, mu, var, labels.squeeze().type(torch.LongTensor)]


@float64_program
def griffin_lim_phase(torch):
    n_fft, hop, rate = 32, 8, 400
    t = torch.arange(0, 0.5, 1 / rate)
    wave = 0.6 * torch.sin(2 * math.pi * 50 * t) + 0.3 * torch.sin(2 * math.pi * 90 * t * (1 + t))
    window = torch.hann_window(n_fft)

    def stft(signal):
        return torch.stft(signal, n_fft, hop, n_fft, window, center=True, pad_mode="reflect", return_complex=True)

    def istft(spec):
        return torch.istft(spec, n_fft, hop, n_fft, window, length=wave.shape[-1])

    magnitude = stft(wave).abs()
    angles, previous, errors = torch.rand(magnitude.shape, dtype=torch.complex128), torch.tensor(0.0), []
    for _ in range(6):
        rebuilt = stft(istft(magnitude * angles))
        angles = rebuilt - previous.mul_(0.99 / 1.99)
        angles = angles.div(angles.abs().add(1e-16))
        previous = rebuilt
        errors.append((rebuilt.abs() - magnitude).pow(2).mean().item())
    mels = torch.linspace(0, 2595 * math.log10(1 + rate / 2 / 700), 8)
    hz = 700 * (10 ** (mels / 2595) - 1)
    slopes = hz.unsqueeze(0) - torch.linspace(0, rate // 2, n_fft // 2 + 1).unsqueeze(1)
    bank = torch.max(
        torch.zeros(1), torch.min(-slopes[:, :-2] / (hz[1:-1] - hz[:-2]), slopes[:, 2:] / (hz[2:] - hz[1:-1]))
    )
    db = 10 * torch.log10(torch.clamp(torch.matmul(magnitude.pow(2).T, bank).T, min=1e-10))
    return [errors, istft(magnitude * angles), torch.max(db, db.max() - 80), istft(stft(wave)) - wave]


@float64_program
def image_filters(torch):
    F = torch.nn.functional
    img = torch.rand(2, 3, 12, 14)
    taps = torch.exp(-0.5 * (torch.arange(-3, 4, dtype=torch.float64) / 1.2) ** 2)
    taps = taps / taps.sum()
    padded = F.pad(img, (3, 3, 3, 3), mode="reflect")
    blur = F.conv2d(
        F.conv2d(padded, taps.view(1, 1, 1, -1).repeat(3, 1, 1, 1), groups=3),
        taps.view(1, 1, -1, 1).repeat(3, 1, 1, 1),
        groups=3,
    )
    gray = (img * torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)).sum(1, keepdim=True)
    sobel = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])
    edges = F.conv2d(F.pad(gray, (1, 1, 1, 1), mode="replicate"), torch.stack([sobel, sobel.t()]).unsqueeze(1))
    patches = F.unfold(img, kernel_size=4, stride=2)
    patches = patches - patches.mean(1, keepdim=True)
    count = F.fold(F.unfold(torch.ones_like(img), 4, stride=2), img.shape[-2:], 4, stride=2)
    out = [
        blur,
        edges.pow(2).sum(1).sqrt(),
        torch.atan2(edges[:, 1], edges[:, 0]),
        F.fold(patches, img.shape[-2:], 4, stride=2) / count,
    ]
    for mode, extra in [("bilinear", {"align_corners": True}), ("bicubic", {}), ("nearest-exact", {}), ("area", {})]:
        out.append(F.interpolate(img, size=(17, 9), mode=mode, **extra))
    for mode, extra in [("bilinear", {}), ("bicubic", {"align_corners": True}), ("lanczos", {})]:
        out.append(F.interpolate(img, scale_factor=(0.5, 0.7), mode=mode, antialias=True, **extra))
    out.append(img.unfold(2, 3, 1).unfold(3, 3, 1).reshape(2, 3, 10, 12, 9).median(-1).values)
    return out


@float64_program
def spatial_transformer_alignment(torch):
    nn, F = torch.nn, torch.nn.functional
    target = F.avg_pool2d(torch.rand(4, 1, 16, 16), 3, 1, 1)
    c, s = math.cos(0.3), math.sin(0.3)
    theta = torch.tensor([[c, -s, 0.1], [s, c, -0.05]]).expand(4, 2, 3)
    moved = F.grid_sample(target, F.affine_grid(theta, target.size(), align_corners=False), align_corners=False)
    features = nn.Sequential(
        nn.Conv2d(1, 4, 5), nn.MaxPool2d(2, 2), nn.ReLU(True), nn.Conv2d(4, 4, 3), nn.MaxPool2d(2, 2), nn.ReLU(True)
    )
    head = nn.Sequential(nn.Linear(16, 8), nn.ReLU(True), nn.Linear(8, 6))
    head[2].weight.data.zero_()
    head[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
    opt, losses = torch.optim.SGD([*features.parameters(), *head.parameters()], lr=0.05, momentum=0.9), []
    for _ in range(5):
        affine = head(features(moved).view(-1, 16)).view(-1, 2, 3)
        aligned = F.grid_sample(moved, F.affine_grid(affine, moved.size(), align_corners=False), align_corners=False)
        loss = F.mse_loss(aligned, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    img = torch.rand(1, 2, 5, 6, requires_grad=True)
    grid = (torch.rand(1, 3, 4, 2) * 2.4 - 1.2).requires_grad_()
    out = [losses, affine.detach()]
    for mode, padding, corners in [
        ("bilinear", "border", True),
        ("nearest", "reflection", False),
        ("bicubic", "zeros", False),
    ]:
        sampled = F.grid_sample(img, grid, mode=mode, padding_mode=padding, align_corners=corners)
        out += [sampled, *torch.autograd.grad(sampled.pow(2).sum(), (img, grid))]
    return out


PROGRAMS = [
    gp_regression,
    expected_improvement_loop,
    principal_components,
    tsne_embedding,
    kmeans_two_distances,
    gaussian_mixture_em,
    griffin_lim_phase,
    image_filters,
    spatial_transformer_alignment,
]
# the programs whose two runs take under ~2 s from a cold compilation cache
FAST = {
    "principal_components",
    "tsne_embedding",
    "kmeans_two_distances",
    "gaussian_mixture_em",
    "griffin_lim_phase",
    "image_filters",
}


@pytest.mark.parametrize(
    "program",
    [pytest.param(p, id=p.__name__, marks=[] if p.__name__ in FAST else [pytest.mark.slow]) for p in PROGRAMS],
)
def test_program_matches_torch(program):
    run_with_each_library(program, TOLERANCE)
