"""3-D, geometry and implicit-function programs of the kinds public code holds (NeRF's ray sampling and volume
rendering, SIREN's derivative losses, IGR's eikonal term, DeepSDF's latent codes, PointNet's learned transforms,
DGCNN's edge convolution, Chamfer and Sinkhorn distances, DirectVoxGO-style voxel grids), each written once
against torch's API and run with torch and with batched_grad from the same seed, in float64, compared number for
number. Rotation conversions and so(3) maps, homographies and warps, spherical harmonics, PointNet++ grouping,
hash grids and Gaussian splatting are in test_fresh_programs_geometry2.py."""

import math

import numpy as np
import pytest

from test_fresh_programs_vision import _both, _float64


def nerf_coarse_to_fine(m):
    """Frequency encoding, an MLP with a skip, rays from a meshgrid, stratified then inverse-CDF samples
    (searchsorted, gather), alpha compositing with an exclusive cumprod, two Adam steps on both networks."""
    nn, F = m.nn, m.nn.functional
    _float64(m)

    def encode(x, n_freqs=3):
        bands = 2.0 ** m.linspace(0.0, n_freqs - 1, n_freqs)
        return m.cat([x] + [f(x * b) for b in bands for f in (m.sin, m.cos)], -1)

    class Field(nn.Module):
        def __init__(self, width=16):
            super().__init__()
            self.inner = nn.ModuleList([nn.Linear(21, width), nn.Linear(width, width), nn.Linear(width + 21, width)])
            self.sigma, self.rgb = nn.Linear(width, 1), nn.Linear(width + 21, 3)

        def forward(self, pts, dirs):
            x = h = encode(pts)
            for i, layer in enumerate(self.inner):
                h = F.relu(layer(m.cat([x, h], -1) if i == 2 else h))
            return m.cat([self.rgb(m.cat([h, encode(dirs)], -1)), self.sigma(h)], -1)

    def rays(height, width, focal, c2w):
        i, j = m.meshgrid(m.linspace(0, width - 1, width), m.linspace(0, height - 1, height), indexing="ij")
        i, j = i.t(), j.t()
        dirs = m.stack([(i - width / 2) / focal, -(j - height / 2) / focal, -m.ones_like(i)], -1)
        return c2w[:3, -1].expand(height, width, 3), m.sum(dirs[..., None, :] * c2w[:3, :3], -1)

    def composite(raw, z, dirs):
        dists = m.cat([z[..., 1:] - z[..., :-1], m.full_like(z[..., :1], 1e10)], -1) * dirs.norm(dim=-1, keepdim=True)
        alpha = 1.0 - m.exp(-F.relu(raw[..., 3]) * dists)
        trans = m.cumprod(m.cat([m.ones(alpha.shape[0], 1), 1.0 - alpha + 1e-10], -1), -1)[:, :-1]
        weights = alpha * trans
        return (weights[..., None] * m.sigmoid(raw[..., :3])).sum(-2), weights, (weights * z).sum(-1)

    def inverse_cdf(bins, weights, n):
        pdf = (weights + 1e-5) / (weights + 1e-5).sum(-1, keepdim=True)
        cdf = m.cat([m.zeros_like(pdf[..., :1]), m.cumsum(pdf, -1)], -1)
        u = m.rand(cdf.shape[0], n).contiguous()
        idx = m.searchsorted(cdf, u, right=True)
        pair = m.stack([m.clamp(idx - 1, min=0), m.clamp(idx, max=cdf.shape[-1] - 1)], -1)
        shape = [pair.shape[0], pair.shape[1], cdf.shape[-1]]
        cdf_g = m.gather(cdf.unsqueeze(1).expand(shape), 2, pair)
        bins_g = m.gather(bins.unsqueeze(1).expand(shape), 2, pair)
        denom = cdf_g[..., 1] - cdf_g[..., 0]
        t = (u - cdf_g[..., 0]) / m.where(denom < 1e-5, m.ones_like(denom), denom)
        return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])

    coarse, fine = Field(), Field()
    opt = m.optim.Adam(list(coarse.parameters()) + list(fine.parameters()), lr=5e-4)
    c2w = m.eye(4)[:3]
    c2w[2, 3] = 4.0
    out = []
    for _ in range(2):
        origins, dirs = rays(6, 6, 8.0, c2w)
        pick = m.randperm(36)[:16]
        o, d = origins.reshape(-1, 3)[pick], dirs.reshape(-1, 3)[pick]
        z = (2.0 + 4.0 * m.linspace(0.0, 1.0, 8)).expand(16, 8)
        mids = 0.5 * (z[:, 1:] + z[:, :-1])
        z = m.cat([z[:, :1], mids], -1) + (m.cat([mids, z[:, -1:]], -1) - m.cat([z[:, :1], mids], -1)) * m.rand(16, 8)
        view = F.normalize(d, dim=-1)[:, None].expand(16, 8, 3)
        rgb0, weights, _ = composite(coarse(o[:, None] + d[:, None] * z[..., None], view), z, d)
        extra = inverse_cdf(0.5 * (z[:, 1:] + z[:, :-1]), weights[:, 1:-1], 6).detach()
        z_all, _ = m.sort(m.cat([z, extra], -1), -1)
        view = F.normalize(d, dim=-1)[:, None].expand(16, 14, 3)
        rgb, _, depth = composite(fine(o[:, None] + d[:, None] * z_all[..., None], view), z_all, d)
        target = m.rand(16, 3)
        loss = ((rgb - target) ** 2).mean() + ((rgb0 - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [loss.detach(), depth.detach(), m.std(extra, dim=-1, unbiased=False)]
    return out + [p.detach() for p in fine.parameters()]


def siren_derivative_losses(m):
    """A sine network's gradient, divergence and Laplacian with respect to its input coordinates by autograd.grad
    with create_graph, a Hessian written into a zeros tensor slice by slice, and a Poisson (gradient-matching) fit."""
    nn = m.nn
    _float64(m)

    class Sine(nn.Module):
        def __init__(self, fan_in, fan_out, first):
            super().__init__()
            self.linear = nn.Linear(fan_in, fan_out)
            bound = 1 / fan_in if first else math.sqrt(6 / fan_in) / 30
            with m.no_grad():
                self.linear.weight.uniform_(-bound, bound)

        def forward(self, x):
            return m.sin(30 * self.linear(x))

    net = nn.Sequential(Sine(2, 16, True), Sine(16, 16, False), nn.Linear(16, 1))

    def gradient(y, x):
        return m.autograd.grad(y, [x], grad_outputs=m.ones_like(y), create_graph=True)[0]

    def divergence(y, x):
        total = 0.0
        for i in range(y.shape[-1]):
            total += m.autograd.grad(y[..., i], x, m.ones_like(y[..., i]), create_graph=True)[0][..., i : i + 1]
        return total

    coords = m.stack(m.meshgrid(m.linspace(-1, 1, 6), m.linspace(-1, 1, 6), indexing="ij"), -1).reshape(1, -1, 2)
    target_grad = m.randn(1, 36, 2)
    opt = m.optim.Adam(net.parameters(), lr=1e-4)
    out = []
    for _ in range(2):
        x = coords.clone().detach().requires_grad_(True)
        y = net(x)
        lap = divergence(gradient(y, x), x)
        loss = (gradient(y, x) - target_grad).pow(2).sum(-1).mean() + 1e-3 * lap.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [loss.detach(), lap.detach()]
    x = coords.clone().requires_grad_(True)
    y = net(x)
    hess = m.zeros(1, 36, 1, 2, 2)
    dydx = m.autograd.grad(y[..., 0], x, m.ones_like(y[..., 0]), create_graph=True)[0]
    for j in range(2):
        hess[..., 0, j, :] = m.autograd.grad(dydx[..., j], x, m.ones_like(y[..., 0]), create_graph=True)[0]
    hess.sum().backward()
    return out + [hess.detach(), net[0].linear.weight.grad]


def igr_eikonal(m):
    """An implicit surface network (softplus beta=100, geometric initialisation, a skip divided by sqrt 2) fitted to
    points with normals: manifold, eikonal and normal losses, off-surface samples from randn_like and rand."""
    nn = m.nn
    _float64(m)
    dims = [3, 16, 16, 16, 1]
    layers = nn.ModuleList()
    for k in range(4):
        out_dim = dims[k + 1] - 3 if k + 1 == 2 else dims[k + 1]
        lin = nn.Linear(dims[k], out_dim)
        if k == 3:
            nn.init.normal_(lin.weight, mean=math.sqrt(math.pi) / math.sqrt(dims[k]), std=1e-5)
            nn.init.constant_(lin.bias, -1.0)
        else:
            nn.init.constant_(lin.bias, 0.0)
            nn.init.normal_(lin.weight, 0.0, math.sqrt(2) / math.sqrt(out_dim))
        layers.append(lin)
    act = nn.Softplus(beta=100)

    def sdf(x):
        h = x
        for k, lin in enumerate(layers):
            h = m.cat([h, x], -1) / math.sqrt(2) if k == 2 else h
            h = lin(h)
            h = act(h) if k < 3 else h
        return h

    def grad_of(x, y):
        return m.autograd.grad(y, x, m.ones_like(y), create_graph=True, retain_graph=True, only_inputs=True)[0]

    normals = m.nn.functional.normalize(m.randn(48, 3), dim=-1)
    points = (0.7 * normals).requires_grad_()
    sigma = m.cdist(points.detach(), points.detach()).sort(dim=1)[0][:, 6]
    opt = m.optim.Adam([{"params": layers.parameters(), "lr": 0.005, "weight_decay": 0}])
    out = []
    for step in range(3):
        pick = m.tensor(np.random.RandomState(step).choice(48, 32, replace=False))
        surface = points[pick]
        off = m.cat([surface + m.randn_like(surface) * sigma[pick].unsqueeze(-1), m.rand(4, 3) * 3.6 - 1.8])
        on_pred, off_pred = sdf(surface), sdf(off)
        on_grad, off_grad = grad_of(surface, on_pred), grad_of(off, off_pred)
        loss = on_pred.abs().mean() + 0.1 * ((off_grad.norm(2, dim=-1) - 1) ** 2).mean()
        loss = loss + (on_grad - normals[pick]).abs().norm(2, dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.detach())
    return out + [points.grad, layers[3].weight.detach()]


def deepsdf_latent_codes(m):
    """An auto-decoder: per-shape latent codes in an Embedding with max_norm, a weight-normalised decoder with the
    latent re-injected mid-way and dropout, clamped L1 (sum) over chunks of the batch with code regularisation,
    two parameter groups in Adam."""
    nn, F = m.nn, m.nn.functional
    _float64(m)
    latent = 4
    lins = nn.ModuleList(
        [nn.utils.weight_norm(nn.Linear(i, o)) for i, o in ((latent + 3, 16), (16, 16 - latent - 3), (16, 16))]
        + [nn.Linear(16, 1)]
    )

    def decode(inp):
        x = inp
        for k, lin in enumerate(lins):
            x = lin(m.cat([x, inp], 1) if k == 2 else x)
            if k < 3:
                x = F.dropout(m.relu(x), p=0.2, training=True)
        return m.tanh(x)

    codes = nn.Embedding(5, latent, max_norm=1.0)
    nn.init.normal_(codes.weight.data, 0.0, 1.0)
    opt = m.optim.Adam([{"params": lins.parameters(), "lr": 5e-4}, {"params": codes.parameters(), "lr": 1e-3}])
    samples = m.rand(5, 12, 4) * 2 - 1
    samples[..., 3] = samples[..., :3].norm(dim=-1) - 0.5
    l1 = nn.L1Loss(reduction="sum")
    out = []
    for epoch in range(2):
        scenes = m.randperm(5)[:3]
        data = samples[scenes].reshape(-1, 4)
        xyz = m.chunk(data[:, :3], 2)
        gt = m.chunk(m.clamp(data[:, 3].unsqueeze(1), -0.1, 0.1), 2)
        idx = m.chunk(scenes.unsqueeze(-1).repeat(1, 12).view(-1), 2)
        opt.zero_grad()
        total = 0.0
        for i in range(2):
            vecs = codes(idx[i])
            pred = m.clamp(decode(m.cat([vecs, xyz[i]], dim=1)), -0.1, 0.1)
            reg = 1e-4 * min(1, (epoch + 1) / 100) * m.sum(m.norm(vecs, dim=1))
            chunk = (l1(pred, gt[i]) + reg) / data.shape[0]
            chunk.backward()
            total += chunk.item()
        opt.step()
        out.append(total)
    return out + [codes.weight.detach(), lins[0].weight_g.detach(), lins[0].weight_v.grad]


def pointnet_learned_transforms(m):
    """A spatial transformer regressing a k x k matrix (identity added from NumPy) applied with bmm, max pooling over
    points, the orthogonality regulariser ||A A^T - I|| with torch.eye, NLL on log_softmax, Adam with StepLR."""
    nn, F = m.nn, m.nn.functional
    _float64(m)

    class Transform(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k
            self.conv = nn.Sequential(nn.Conv1d(k, 16, 1), nn.BatchNorm1d(16), nn.ReLU(), nn.Conv1d(16, 32, 1))
            self.fc = nn.Sequential(nn.Linear(32, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, k * k))

        def forward(self, x):
            h = m.max(self.conv(x), 2, keepdim=True)[0].view(-1, 32)
            iden = m.from_numpy(np.eye(self.k).flatten()).view(1, self.k * self.k).repeat(x.size(0), 1)
            return (self.fc(h) + iden).view(-1, self.k, self.k)

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.stn, self.fstn = Transform(3), Transform(8)
            self.conv1, self.bn1 = nn.Conv1d(3, 8, 1), nn.BatchNorm1d(8)
            self.conv2 = nn.Conv1d(8, 32, 1)
            self.head = nn.Sequential(
                nn.Linear(32, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3)
            )

        def forward(self, x):
            x = m.bmm(x.transpose(2, 1), self.stn(x)).transpose(2, 1)
            x = F.relu(self.bn1(self.conv1(x)))
            feat = self.fstn(x)
            x = m.bmm(x.transpose(2, 1), feat).transpose(2, 1)
            x = m.max(self.conv2(x), 2, keepdim=True)[0].view(-1, 32)
            return F.log_softmax(self.head(x), dim=1), feat

    def regulariser(trans):
        eye = m.eye(trans.size(1))[None, :, :]
        return m.mean(m.norm(m.bmm(trans, trans.transpose(2, 1)) - eye, dim=(1, 2)))

    model = Classifier()
    opt = m.optim.Adam(model.parameters(), lr=0.001, betas=(0.9, 0.999))
    sched = m.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    clouds, labels = m.rand(6, 3, 24) - 0.5, m.randint(0, 3, (6,))
    out = []
    for _ in range(2):
        opt.zero_grad()
        pred, feat = model(clouds)
        loss = F.nll_loss(pred, labels) + 0.001 * regulariser(feat)
        loss.backward()
        opt.step()
        sched.step()
        out += [loss.detach(), pred.data.max(1)[1].eq(labels).cpu().sum()]
    model.eval()
    return out + [model(clouds)[0].detach(), model.fstn.fc[3].weight.detach()]


def dgcnn_edge_convolution(m):
    """k nearest neighbours by topk of negative pairwise distances, edge features gathered with flat index
    arithmetic (idx + arange * N, view, permute), Conv2d over edges with max over neighbours, adaptive max and mean
    pooling, label-smoothed cross-entropy through scatter, SGD with momentum and CosineAnnealingLR."""
    nn, F = m.nn, m.nn.functional
    _float64(m)

    def knn(x, k):
        inner = -2 * m.matmul(x.transpose(2, 1), x)
        xx = m.sum(x**2, dim=1, keepdim=True)
        return (-xx - inner - xx.transpose(2, 1)).topk(k=k, dim=-1)[1]

    def edge_features(x, k=4):
        b, c, n = x.shape
        idx = (knn(x, k) + m.arange(0, b).view(-1, 1, 1) * n).view(-1)
        x = x.transpose(2, 1).contiguous()
        nbrs = x.view(b * n, -1)[idx, :].view(b, n, k, c)
        x = x.view(b, n, 1, c).repeat(1, 1, k, 1)
        return m.cat((nbrs - x, x), dim=3).permute(0, 3, 1, 2).contiguous()

    def edge_block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2))

    e1, e2 = edge_block(6, 8), edge_block(16, 8)
    fuse = nn.Sequential(nn.Conv1d(16, 16, 1, bias=False), nn.BatchNorm1d(16), nn.LeakyReLU(0.2))
    head = nn.Sequential(
        nn.Linear(32, 16, bias=False), nn.BatchNorm1d(16), nn.LeakyReLU(0.2), nn.Dropout(0.5), nn.Linear(16, 4)
    )
    modules = nn.ModuleList([e1, e2, fuse, head])

    def forward(x):
        x1 = e1(edge_features(x)).max(dim=-1, keepdim=False)[0]
        x2 = e2(edge_features(x1)).max(dim=-1, keepdim=False)[0]
        h = fuse(m.cat((x1, x2), dim=1))
        pooled = m.cat(
            (F.adaptive_max_pool1d(h, 1).view(x.size(0), -1), F.adaptive_avg_pool1d(h, 1).view(x.size(0), -1)), 1
        )
        return head(pooled)

    def smoothed_loss(pred, gold, eps=0.2):
        one_hot = m.zeros_like(pred).scatter(1, gold.view(-1, 1), 1)
        one_hot = one_hot * (1 - eps) + (1 - one_hot) * eps / (pred.size(1) - 1)
        return -(one_hot * F.log_softmax(pred, dim=1)).sum(dim=1).mean()

    opt = m.optim.SGD(modules.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    sched = m.optim.lr_scheduler.CosineAnnealingLR(opt, 2, eta_min=0.001)
    clouds, labels = m.rand(4, 3, 16) - 0.5, m.randint(0, 4, (4,))
    out = []
    for _ in range(2):
        opt.zero_grad()
        logits = forward(clouds)
        loss = smoothed_loss(logits, labels)
        loss.backward()
        opt.step()
        sched.step()
        out += [loss.detach(), logits.max(dim=1)[1]]
    return out + [e1[0].weight.detach(), knn(clouds, 4)]


def chamfer_and_sinkhorn(m):
    """Chamfer distance from expanded squared norms and bmm with min/argmin both ways, an F-score whose NaNs are
    zeroed by boolean assignment, and a log-domain Sinkhorn loop (logsumexp updates, stopping on err.item())
    giving a transport cost that moves one cloud onto another."""
    _float64(m)

    def chamfer(x, y):
        b, nx, _ = x.size()
        ny = y.size(1)
        rx = m.pow(x, 2).sum(2).unsqueeze(1).expand(b, ny, nx)
        ry = m.pow(y, 2).sum(2).unsqueeze(1).expand(b, nx, ny)
        p = rx.transpose(2, 1) + ry - 2 * m.bmm(x, y.transpose(2, 1))
        return m.min(p, 2)[0], m.min(p, 1)[0], m.min(p, 2)[1].int()

    def fscore(d1, d2, threshold):
        p1, p2 = m.mean((d1 < threshold).double(), dim=1), m.mean((d2 < threshold).double(), dim=1)
        f = 2 * p1 * p2 / (p1 + p2)
        f[m.isnan(f)] = 0
        return f

    def sinkhorn(x, y, eps=0.05, iters=30):
        cost = m.sum(m.abs(x.unsqueeze(-2) - y.unsqueeze(-3)) ** 2, -1)
        mu = m.empty(x.shape[0], x.shape[1]).fill_(1.0 / x.shape[1]).squeeze()
        nu = m.empty(y.shape[0], y.shape[1]).fill_(1.0 / y.shape[1]).squeeze()
        u, v = m.zeros_like(mu), m.zeros_like(nu)

        def scaled(u, v):
            return (-cost + u.unsqueeze(-1) + v.unsqueeze(-2)) / eps

        for _ in range(iters):
            previous = u
            u = eps * (m.log(mu + 1e-8) - m.logsumexp(scaled(u, v), dim=-1)) + u
            v = eps * (m.log(nu + 1e-8) - m.logsumexp(scaled(u, v).transpose(-2, -1), dim=-1)) + v
            if (u - previous).abs().sum(-1).mean().item() < 1e-3:
                break
        plan = m.exp(scaled(u, v))
        return m.sum(plan * cost, dim=(-2, -1)).mean(), plan

    target = m.nn.functional.normalize(m.randn(2, 20, 3), dim=-1)
    points = m.nn.Parameter(m.rand(2, 16, 3) - 0.5)
    opt = m.optim.Adam([points], lr=0.05)
    out = []
    for _ in range(3):
        opt.zero_grad()
        d1, d2, idx = chamfer(points, target)
        ot, plan = sinkhorn(points, target)
        (d1.mean() + d2.mean() + ot).backward()
        opt.step()
        out += [d1.detach(), idx, fscore(d1, d2, 0.05), ot.detach(), plan.sum(-1).detach()]
    return out + [points.detach()]


def voxel_grids(m):
    """A dense feature volume sampled by 5-D grid_sample at flipped normalised coordinates and rescaled by trilinear
    interpolation to a size held in a long tensor, a vector-matrix (TensoRF) factorisation sampled by 4-D grid_sample
    with index lists and assembled by einsum, and a max_pool3d + softplus occupancy mask."""
    nn, F = m.nn, m.nn.functional
    _float64(m)
    low, high = m.tensor([-1.0] * 3), m.tensor([1.0] * 3)
    size = ((high - low) / 0.3).long()
    grid = nn.Parameter(m.zeros([1, 2, *size]))
    planes = nn.ParameterList(
        [nn.Parameter(m.randn([1, 3, size[a], size[b]]) * 0.1) for a, b in ((0, 1), (0, 2), (1, 2))]
    )
    lines = nn.ParameterList([nn.Parameter(m.randn([1, 3, size[a], 1]) * 0.1) for a in (2, 1, 0)])

    def dense(xyz):
        norm = ((xyz.reshape(1, 1, 1, -1, 3) - low) / (high - low)).flip((-1,)) * 2 - 1
        return F.grid_sample(grid, norm, mode="bilinear", align_corners=True).reshape(2, -1).T

    def factorised(xyz):
        norm = (xyz.reshape(1, 1, -1, 3) - low) / (high - low) * 2 - 1
        norm = m.cat([norm, m.zeros_like(norm[..., [0]])], dim=-1)
        total = 0.0
        for plane, line, (a, b), c in zip(planes, lines, ((1, 0), (2, 0), (2, 1)), (2, 1, 0)):
            p = F.grid_sample(plane, norm[:, :, :, [a, b]], mode="bilinear", align_corners=True).flatten(0, 2).T
            q = F.grid_sample(line, norm[:, :, :, [3, c]], mode="bilinear", align_corners=True).flatten(0, 2).T
            total = total + (p * q).sum(-1)
        return total

    points, target = m.rand(30, 3) * 2 - 1, m.rand(30, 2)
    out = []
    for step in range(3):
        opt = m.optim.Adam([grid, *planes, *lines], lr=0.1)
        loss = F.mse_loss(m.sigmoid(dense(points)), target) + factorised(points).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.detach())
        if step == 0:
            grid = nn.Parameter(
                F.interpolate(grid.data, size=tuple((size.double() * 1.5).long()), mode="trilinear", align_corners=True)
            )
    volume = m.einsum("rxy,rz->xyz", planes[0][0], lines[0][0, :, :, 0]) + m.einsum(
        "rxz,ry->xyz", planes[1][0], lines[1][0, :, :, 0]
    )
    pooled = F.max_pool3d(grid.data[:, :1], kernel_size=3, padding=1, stride=1)
    alpha = 1 - m.exp(-F.softplus(pooled + math.log(1 / (1 - 1e-4) - 1)) * 0.5)
    return out + [volume.detach(), alpha, (alpha >= 1e-4).squeeze(0).squeeze(0)]


@pytest.mark.slow
def test_nerf_coarse_to_fine():
    _both(nerf_coarse_to_fine)


@pytest.mark.slow
def test_siren_derivative_losses():
    _both(siren_derivative_losses)


@pytest.mark.slow
def test_igr_eikonal():
    _both(igr_eikonal)


def test_deepsdf_latent_codes():
    _both(deepsdf_latent_codes)


@pytest.mark.slow
def test_pointnet_learned_transforms():
    _both(pointnet_learned_transforms)


def test_dgcnn_edge_convolution():
    _both(dgcnn_edge_convolution)


@pytest.mark.slow
def test_chamfer_and_sinkhorn():
    _both(chamfer_and_sinkhorn)


@pytest.mark.slow
def test_voxel_grids():
    _both(voxel_grids)
