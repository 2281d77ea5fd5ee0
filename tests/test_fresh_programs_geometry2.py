"""More 3-D and geometry programs of the kinds public code holds, run with torch and with batched_grad from the same
seed and compared number for number (the first part is test_fresh_programs_geometry.py): rotation conversions and
so(3) maps, a homography by DLT with SVD, lstsq and solve and image warps through affine_grid and grid_sample,
spherical harmonics, PointNet++ sampling and grouping, a multiresolution hash grid, and a Gaussian splatting tile
renderer."""

import math

import pytest

from test_fresh_programs_vision import _both, _float64


def rotation_conversions(m):
    """Axis-angle to matrix by Rodrigues with a Taylor branch chosen by a mask and written into repeated identities,
    matrix to quaternion by torch.where over the four trace branches, quaternion to axis-angle with atan2 and
    in-place column updates, so(3) exp and log maps with a hat operator filled by setitem, and an LBFGS fit."""
    _float64(m)

    def rodrigues(aa):
        theta2 = m.matmul(aa.unsqueeze(1), aa.unsqueeze(1).transpose(1, 2)).squeeze(1)
        theta = m.sqrt(theta2)
        wx, wy, wz = m.chunk(aa / (theta + 1e-6), 3, dim=1)
        c, s = m.cos(theta), m.sin(theta)
        rx, ry, rz = m.chunk(aa, 3, dim=1)
        one = m.ones_like(rx)
        normal = m.cat(
            [
                c + wx * wx * (1 - c),
                wx * wy * (1 - c) - wz * s,
                wy * s + wx * wz * (1 - c),
                wz * s + wx * wy * (1 - c),
                c + wy * wy * (1 - c),
                -wx * s + wy * wz * (1 - c),
                -wy * s + wx * wz * (1 - c),
                wx * s + wy * wz * (1 - c),
                c + wz * wz * (1 - c),
            ],
            dim=1,
        ).view(-1, 3, 3)
        taylor = m.cat([one, -rz, ry, rz, one, -rx, -ry, rx, one], dim=1).view(-1, 3, 3)
        mask = (theta2 > 1e-6).view(-1, 1, 1)
        out = m.eye(3).type_as(aa).view(1, 3, 3).repeat(aa.shape[0], 1, 1)
        out[..., :3, :3] = mask.type_as(theta2) * normal + (mask == False).type_as(theta2) * taylor  # noqa: E712
        return out

    def to_quaternion(r):
        m00, m01, m02, m10, m11, m12, m20, m21, m22 = m.chunk(r.view(*r.shape[:-2], 9), chunks=9, dim=-1)
        trace = m00 + m11 + m22

        def safe(a, b):
            return a / m.clamp(b, min=m.finfo(a.dtype).tiny)

        def branch(sq, w, x, y, z):
            return m.cat((w, x, y, z), dim=-1)

        sq0 = m.sqrt(trace + 1.0) * 2.0
        q0 = branch(sq0, 0.25 * sq0, safe(m21 - m12, sq0), safe(m02 - m20, sq0), safe(m10 - m01, sq0))
        sq1 = m.sqrt(1.0 + m00 - m11 - m22 + 1e-8) * 2.0
        q1 = branch(sq1, safe(m21 - m12, sq1), 0.25 * sq1, safe(m01 + m10, sq1), safe(m02 + m20, sq1))
        sq2 = m.sqrt(1.0 + m11 - m00 - m22 + 1e-8) * 2.0
        q2 = branch(sq2, safe(m02 - m20, sq2), safe(m01 + m10, sq2), 0.25 * sq2, safe(m12 + m21, sq2))
        sq3 = m.sqrt(1.0 + m22 - m00 - m11 + 1e-8) * 2.0
        q3 = branch(sq3, safe(m10 - m01, sq3), safe(m02 + m20, sq3), safe(m12 + m21, sq3), 0.25 * sq3)
        rest = m.where((m00 > m11) & (m00 > m22), q1, m.where(m11 > m22, q2, q3))
        return m.where(trace > 0.0, q0, rest)

    def to_axis_angle(q):
        cos, q1, q2, q3 = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
        sin2 = q1 * q1 + q2 * q2 + q3 * q3
        sin = m.sqrt(sin2)
        two_theta = 2.0 * m.where(cos < 0.0, m.atan2(-sin, -cos), m.atan2(sin, cos))
        k = m.where(sin2 > 0.0, two_theta / sin, 2.0 * m.ones_like(sin))
        aa = m.zeros_like(q)[..., :3]
        aa[..., 0] += q1 * k
        aa[..., 1] += q2 * k
        aa[..., 2] += q3 * k
        return aa

    def hat(v):
        h = v.new_zeros(v.shape[0], 3, 3)
        x, y, z = v.unbind(1)
        h[:, 0, 1], h[:, 0, 2], h[:, 1, 0], h[:, 1, 2], h[:, 2, 0], h[:, 2, 1] = -z, y, z, -x, -y, x
        return h

    def so3_exp(v):
        angle = m.clamp((v * v).sum(1), 1e-4).sqrt()
        skew = hat(v)
        fac1, fac2 = angle.sin() / angle, (1.0 - angle.cos()) / angle**2
        return fac1[:, None, None] * skew + fac2[:, None, None] * m.bmm(skew, skew) + m.eye(3, dtype=v.dtype)[None]

    def so3_log(r):
        trace = m.clamp(r[:, 0, 0] + r[:, 1, 1] + r[:, 2, 2], -1.0, 3.0)
        phi = (0.5 * (trace - 1.0)).acos()
        phi = m.clamp(phi.abs(), 1e-4) * phi.sign()
        skew = (phi / (2.0 * phi.sin()))[:, None, None] * (r - r.permute(0, 2, 1))
        return m.stack((skew[:, 2, 1], skew[:, 0, 2], skew[:, 1, 0]), dim=1)

    aa = m.randn(5, 3) * 0.8
    aa[1] = m.tensor([1e-4, 0.0, 0.0])
    aa.requires_grad_(True)
    rot = rodrigues(aa)
    quat = to_quaternion(rot)
    back = to_axis_angle(quat)
    (back.pow(2).sum() + quat.sum() + so3_log(so3_exp(aa)).sum()).backward()
    src = m.randn(20, 3)
    dst = src @ so3_exp(m.tensor([[0.3, -0.5, 0.9]]))[0].T
    omega = m.full((1, 3), 0.1, requires_grad=True)
    opt = m.optim.LBFGS([omega], lr=0.5, max_iter=8, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((src @ rodrigues(omega)[0].T - dst) ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return [rot.detach(), quat.detach(), back.detach(), aa.grad, omega.detach()]


def homography_and_warps(m):
    """Hartley-normalised DLT solved by torch.svd of A^T W A (weights by diag_embed), iteratively reweighted by the
    symmetric transfer error, the same system by linalg.lstsq, linalg.solve and linalg.svd, then warps by
    affine_grid + grid_sample and by a homography-mapped meshgrid, and an affine fit through the sampler."""
    F = m.nn.functional
    _float64(m)

    def to_h(p):
        return F.pad(p, [0, 1], "constant", 1.0)

    def from_h(p, eps=1e-8):
        z = p[..., -1:]
        return m.where(m.abs(z) > eps, 1.0 / (z + eps), m.ones_like(z)) * p[..., :-1]

    def transform(h, p):
        shape = list(p.shape)
        p = p.reshape(-1, p.shape[-2], p.shape[-1])
        h = m.repeat_interleave(h.reshape(-1, 3, 3), repeats=p.shape[0] // h.reshape(-1, 3, 3).shape[0], dim=0)
        return from_h(m.bmm(to_h(p), h.permute(0, 2, 1))).reshape(shape)

    def normalise(p):
        mean = m.mean(p, dim=1, keepdim=True)
        scale = math.sqrt(2.0) / ((p - mean).norm(dim=-1, p=2).mean(dim=-1) + 1e-8)
        one, zero = m.ones_like(scale), m.zeros_like(scale)
        t = m.stack([scale, zero, -scale * mean[..., 0, 0], zero, scale, -scale * mean[..., 0, 1], zero, zero, one], -1)
        t = t.view(-1, 3, 3)
        return transform(t, p), t

    def dlt(p1, p2, weights):
        (n1, t1), (n2, t2) = normalise(p1), normalise(p2)
        x1, y1 = m.chunk(n1, dim=-1, chunks=2)
        x2, y2 = m.chunk(n2, dim=-1, chunks=2)
        one, zero = m.ones_like(x1), m.zeros_like(x1)
        ax = m.cat([zero, zero, zero, -x1, -y1, -one, y2 * x1, y2 * y1, y2], dim=-1)
        ay = m.cat([x1, y1, one, zero, zero, zero, -x2 * x1, -x2 * y1, -x2], dim=-1)
        a = m.cat((ax, ay), dim=-1).reshape(ax.shape[0], -1, ax.shape[-1])
        w = m.diag_embed(weights.unsqueeze(dim=-1).repeat(1, 1, 2).reshape(weights.shape[0], -1))
        _, _, v = m.svd(a.transpose(-2, -1) @ w @ a)
        h = t2.inverse() @ (v[..., -1].view(-1, 3, 3) @ t1)
        return h / (h[..., -1:, -1:] + 1e-8)

    def transfer_error(p1, p2, h):
        return (transform(h, p1) - p2).pow(2).sum(-1) + (transform(m.inverse(h), p2) - p1).pow(2).sum(-1)

    true_h = m.eye(3).repeat(2, 1, 1) + 0.05 * m.randn(2, 3, 3)
    true_h = true_h / true_h[:, 2:, 2:]
    p1 = m.rand(2, 10, 2) * 32
    p2 = transform(true_h, p1) + 0.2 * m.randn(2, 10, 2)
    p2[:, 0] += 15.0
    h = dlt(p1, p2, m.ones(2, 10))
    for _ in range(3):
        h = dlt(p1, p2, m.exp(-(transfer_error(p1, p2, h) + 1e-8).sqrt() / 2.0))
    (n1, t1), (n2, t2) = normalise(p1), normalise(transform(true_h, p1))
    x1, y1, x2, y2 = n1[..., 0], n1[..., 1], n2[..., 0], n2[..., 1]
    o, z = m.ones_like(x1), m.zeros_like(x1)
    rows = m.cat(
        [m.stack([x1, y1, o, z, z, z, -x2 * x1, -x2 * y1], -1), m.stack([z, z, z, x1, y1, o, -y2 * x1, -y2 * y1], -1)],
        1,
    )
    h8 = m.linalg.lstsq(rows, m.cat([x2, y2], 1).unsqueeze(-1)).solution.squeeze(-1)
    h_ls = m.linalg.solve(t2, m.cat([h8, m.ones(2, 1)], -1).view(2, 3, 3) @ t1)
    singular = m.linalg.svd(rows)[1]

    image = F.avg_pool2d(F.pad(m.rand(2, 3, 12, 12), (1, 1, 1, 1), mode="reflect"), 3, stride=1)
    to_norm = m.tensor([[2.0 / 11, 0.0, -1.0], [0.0, 2.0 / 11, -1.0], [0.0, 0.0, 1.0]]).unsqueeze(0)

    def warp_affine(img, affine):
        full = F.pad(affine, [0, 0, 0, 1], "constant", value=0.0)
        full[..., -1, -1] += 1.0
        src_from_dst = m.inverse(to_norm @ full @ m.inverse(to_norm))
        grid = F.affine_grid(src_from_dst[:, :2, :], [img.shape[0], 3, 12, 12], align_corners=True)
        return F.grid_sample(img, grid, align_corners=True)

    xs = m.linspace(-1, 1, 12)
    base = m.stack(m.meshgrid([xs, xs], indexing="ij")).transpose(1, 2).unsqueeze(0).permute(0, 2, 3, 1)
    mapped = transform(m.inverse(to_norm @ true_h @ m.inverse(to_norm))[:, None, None], base.repeat(2, 1, 1, 1))
    perspective = F.grid_sample(image, mapped, align_corners=True, padding_mode="border")
    target = warp_affine(image, m.tensor([[[1.0, 0.1, 1.5], [-0.05, 0.95, -0.5]]]).repeat(2, 1, 1))
    theta = m.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]).repeat(2, 1, 1).requires_grad_(True)
    opt = m.optim.Adam([theta], lr=0.02)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.l1_loss(warp_affine(image, theta), target)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [h, h_ls, singular, perspective, theta.detach()] + losses


def spherical_harmonics(m):
    """Real SH evaluated up to degree 4 from hard-coded constants (sh[..., k] slices), the encoder that writes each
    basis function into an empty tensor's last-axis slices, and per-point DC and higher coefficients fitted to
    colours seen from moving cameras with clamp_min, the active degree raised as in 3DGS training."""
    _float64(m)
    c0, c1 = 0.28209479177387814, 0.4886025119029199
    c2 = [1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396]
    c3 = [-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154, -0.4570457994644658]
    c3 += [1.445305721320277, -0.5900435899266435]
    c4 = [2.5033429417967046, -1.7701307697799304, 0.9461746957575601, -0.6690465435572892, 0.10578554691520431]
    c4 += [-0.6690465435572892, 0.47308734787878004, -1.7701307697799304, 0.6258357354491761]

    def basis(d):
        x, y, z = d.unbind(-1)
        xx, yy, zz, xy, yz, xz = x * x, y * y, z * z, x * y, y * z, x * z
        values = [m.full_like(x, c0), -c1 * y, c1 * z, -c1 * x]
        values += [c2[0] * xy, c2[1] * yz, c2[2] * (2.0 * zz - xx - yy), c2[3] * xz, c2[4] * (xx - yy)]
        values += [c3[0] * y * (3 * xx - yy), c3[1] * xy * z, c3[2] * y * (4 * zz - xx - yy)]
        values += [c3[3] * z * (2 * zz - 3 * xx - 3 * yy), c3[4] * x * (4 * zz - xx - yy), c3[5] * z * (xx - yy)]
        values += [c3[6] * x * (xx - 3 * yy), c4[0] * xy * (xx - yy), c4[1] * yz * (3 * xx - yy)]
        values += [c4[2] * xy * (7 * zz - 1), c4[3] * yz * (7 * zz - 3), c4[4] * (zz * (35 * zz - 30) + 3)]
        values += [c4[5] * xz * (7 * zz - 3), c4[6] * (xx - yy) * (7 * zz - 1), c4[7] * xz * (xx - 3 * yy)]
        values += [c4[8] * (xx * (xx - 3 * yy) - yy * (3 * xx - yy))]
        return values

    def evaluate(degree, sh, d):
        values = basis(d[..., None, :].expand(*sh.shape[:-1], 3))
        result = 0.0
        for k in range((degree + 1) ** 2):
            result = result + values[k] * sh[..., k]
        return result

    def encoder(d, degree=4):
        out = m.empty((*d.shape[:-1], degree**2), dtype=d.dtype)
        for k, value in enumerate(basis(d)[: degree**2]):
            out[..., k] = value
        return out

    xyz, cameras, targets = m.randn(24, 3), m.randn(4, 3) * 3, m.rand(4, 24, 3)
    dc = m.nn.Parameter(((m.rand(24, 3) - 0.5) / c0)[:, None, :].contiguous())
    rest = m.nn.Parameter(m.zeros(24, 15, 3))
    opt = m.optim.Adam([{"params": [dc], "lr": 0.0025}, {"params": [rest], "lr": 0.0025 / 20.0}], lr=0.0, eps=1e-15)
    out, degree = [], 0
    for step in range(1, 7):
        degree = min(degree + (step % 2 == 0), 3)
        shs = m.cat((dc, rest), dim=1).transpose(1, 2).view(-1, 3, 16)
        direction = xyz - cameras[step % 4].repeat(24, 1)
        colour = m.clamp_min(evaluate(degree, shs, direction / direction.norm(dim=1, keepdim=True)) + 0.5, 0.0)
        loss = m.abs(colour - targets[step % 4]).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        out.append(loss.detach())
    d = m.nn.functional.normalize(m.randn(6, 3), dim=-1).requires_grad_()
    coeffs = m.randn(6, 2, 25)
    full = evaluate(4, coeffs, d)
    grad = m.autograd.grad(full.pow(2).sum() + encoder(d).sum(), d)[0]
    return out + [full.detach(), encoder(d.detach()), grad, dc.detach(), rest.detach()]


def pointnet2_grouping(m):
    """Farthest point sampling (a loop writing centroids and updating distances through a boolean mask), ball
    query (indices past the radius set to N, sorted, refilled from the first), points gathered with an expanded
    batch index, set abstraction with Conv2d + max, and inverse-distance feature propagation from sorted distances."""
    nn = m.nn
    _float64(m)

    def square_distance(src, dst):
        dist = -2 * m.matmul(src, dst.permute(0, 2, 1))
        dist += m.sum(src**2, -1).view(src.shape[0], src.shape[1], 1)
        return dist + m.sum(dst**2, -1).view(src.shape[0], 1, dst.shape[1])

    def gather_points(points, idx):
        view = [idx.shape[0]] + [1] * (idx.dim() - 1)
        repeat = [1] + list(idx.shape[1:])
        return points[m.arange(points.shape[0], dtype=m.long).view(view).repeat(repeat), idx, :]

    def farthest(xyz, n):
        b, count, _ = xyz.shape
        centroids = m.zeros(b, n, dtype=m.long)
        distance = m.ones(b, count) * 1e10
        far = m.randint(0, count, (b,), dtype=m.long)
        rows = m.arange(b, dtype=m.long)
        for i in range(n):
            centroids[:, i] = far
            dist = m.sum((xyz - xyz[rows, far, :].view(b, 1, 3)) ** 2, -1)
            mask = dist < distance
            distance[mask] = dist[mask]
            far = m.max(distance, -1)[1]
        return centroids

    def ball(radius, k, xyz, centres):
        b, count, _ = xyz.shape
        idx = m.arange(count, dtype=m.long).view(1, 1, count).repeat([b, centres.shape[1], 1])
        idx[square_distance(centres, xyz) > radius**2] = count
        idx = idx.sort(dim=-1)[0][:, :, :k]
        first = idx[:, :, 0].view(b, centres.shape[1], 1).repeat([1, 1, k])
        mask = idx == count
        idx[mask] = first[mask]
        return idx

    abstraction = nn.Sequential(nn.Conv2d(6, 16, 1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 16, 1))
    propagate = nn.Sequential(nn.Conv1d(19, 8, 1), nn.BatchNorm1d(8), nn.ReLU())
    params = list(abstraction.parameters()) + list(propagate.parameters())
    opt = m.optim.Adam(params, lr=0.001, weight_decay=1e-4)
    clouds, feats = m.rand(3, 40, 3), m.rand(3, 40, 3)
    out = []
    for _ in range(2):
        centres_idx = farthest(clouds, 8)
        centres = gather_points(clouds, centres_idx)
        group = ball(0.4, 6, clouds, centres)
        local = gather_points(clouds, group) - centres.view(3, 8, 1, 3)
        grouped = m.cat([local, gather_points(feats, group)], dim=-1).permute(0, 3, 2, 1)
        summary = m.max(abstraction(grouped), 2)[0]
        dists, idx = square_distance(clouds, centres).sort(dim=-1)
        recip = 1.0 / (dists[:, :, :3] + 1e-8)
        weight = recip / m.sum(recip, dim=2, keepdim=True)
        interpolated = m.sum(gather_points(summary.permute(0, 2, 1), idx[:, :, :3]) * weight.view(3, 40, 3, 1), dim=2)
        per_point = propagate(m.cat([feats, interpolated], dim=-1).permute(0, 2, 1))
        loss = per_point.pow(2).mean() - summary.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [centres_idx, group, loss.detach()]
    return out + [abstraction[0].weight.detach()]


def hash_grid_encoding(m):
    """A multiresolution hash grid: voxel corners from floor().int(), hashed by XOR of int32 products with the
    instant-NGP primes (wrapping around), masked to the table size by & with a tensor, Embedding lookups and
    trilinear interpolation, a total-variation term over a cube drawn by randint with tensor bounds, Adam with a
    per-group eps."""
    nn = m.nn
    _float64(m)
    primes = [1, 2654435761, 805459861]
    offsets = m.tensor([[[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)]])

    def hashed(coords, log2_size):
        xor = m.zeros_like(coords)[..., 0]
        for i in range(coords.shape[-1]):
            xor ^= coords[..., i] * primes[i]
        return m.tensor((1 << log2_size) - 1) & xor

    low, high = m.tensor([-1.5] * 3), m.tensor([1.5] * 3)
    tables = nn.ModuleList([nn.Embedding(2**8, 2) for _ in range(3)])
    for table in tables:
        nn.init.uniform_(table.weight, a=-1e-4, b=1e-4)
    growth = m.exp((m.log(m.tensor(16)) - m.log(m.tensor(4))) / 2)
    head = nn.Sequential(nn.Linear(6, 16, bias=False), nn.ReLU(), nn.Linear(16, 1, bias=False))

    def encode(x):
        features = []
        for level, table in enumerate(tables):
            size = (high - low) / m.floor(4 * growth**level)
            corner = m.floor((m.clamp(x, min=low, max=high) - low) / size).int()
            v_min = corner * size + low
            w = (x - v_min) / size
            e = table(hashed(corner.unsqueeze(1) + offsets, 8))
            c00 = e[:, 0] * (1 - w[:, 0][:, None]) + e[:, 4] * w[:, 0][:, None]
            c01 = e[:, 1] * (1 - w[:, 0][:, None]) + e[:, 5] * w[:, 0][:, None]
            c10 = e[:, 2] * (1 - w[:, 0][:, None]) + e[:, 6] * w[:, 0][:, None]
            c11 = e[:, 3] * (1 - w[:, 0][:, None]) + e[:, 7] * w[:, 0][:, None]
            c0 = c00 * (1 - w[:, 1][:, None]) + c10 * w[:, 1][:, None]
            c1 = c01 * (1 - w[:, 1][:, None]) + c11 * w[:, 1][:, None]
            features.append(c0 * (1 - w[:, 2][:, None]) + c1 * w[:, 2][:, None])
        return m.cat(features, dim=-1)

    def total_variation(table, resolution):
        cube = m.floor(m.clip(resolution / 10.0, 3, 50)).int()
        start = m.randint(0, resolution - cube, (3,))
        idx = start + m.stack([m.arange(cube + 1) for _ in range(3)], dim=-1)
        e = table(hashed(m.stack(m.meshgrid(idx[:, 0], idx[:, 1], idx[:, 2], indexing="ij"), dim=-1), 8))
        tv = m.pow(e[1:] - e[:-1], 2).sum() + m.pow(e[:, 1:] - e[:, :-1], 2).sum()
        return (tv + m.pow(e[:, :, 1:] - e[:, :, :-1], 2).sum()) / cube

    opt = m.optim.Adam(
        [{"params": head.parameters(), "weight_decay": 1e-6}, {"params": tables.parameters(), "eps": 1e-15}], lr=0.01
    )
    points, target = m.rand(32, 3) * 3.2 - 1.6, m.rand(32, 1)
    out = [hashed(m.tensor([[40000, 50000, 60000]], dtype=m.int32), 19)]
    for _ in range(3):
        loss = ((head(encode(points)) - target) ** 2).mean()
        loss = loss + 1e-6 * sum(total_variation(tables[k], m.tensor(8 + 8 * k)) for k in range(3))
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.detach())
    return out + [tables[2].weight.detach(), head[0].weight.detach()]


def gaussian_splatting(m):
    """3-D Gaussians (scales by exp, quaternions normalised, opacity by sigmoid) projected with a view and
    projection matrix, covariances built by setitem into zeros and taken to the screen by the EWA Jacobian, then
    composited per tile: sort by depth, invert 2x2 conics, exclusive cumprod of transmittance, slices written back."""
    nn, F = m.nn, m.nn.functional
    _float64(m)

    def rotation(q):
        q = q / m.sqrt((q * q).sum(1))[:, None]
        r, x, y, z = q.unbind(1)
        out = m.zeros((q.size(0), 3, 3))
        out[:, 0, 0], out[:, 0, 1], out[:, 0, 2] = 1 - 2 * (y * y + z * z), 2 * (x * y - r * z), 2 * (x * z + r * y)
        out[:, 1, 0], out[:, 1, 1], out[:, 1, 2] = 2 * (x * y + r * z), 1 - 2 * (x * x + z * z), 2 * (y * z - r * x)
        out[:, 2, 0], out[:, 2, 1], out[:, 2, 2] = 2 * (x * z - r * y), 2 * (y * z + r * x), 1 - 2 * (x * x + y * y)
        return out

    def covariance(s, q):
        scale = m.zeros((s.shape[0], 3, 3))
        scale[:, 0, 0], scale[:, 1, 1], scale[:, 2, 2] = s[:, 0], s[:, 1], s[:, 2]
        lower = rotation(q) @ scale
        return lower @ lower.transpose(1, 2)

    fov, size = math.radians(60), 16
    focal = size / (2 * math.tan(fov / 2))
    view = m.eye(4)
    view[3, 2] = 3.0
    proj = m.zeros(4, 4)
    proj[0, 0] = proj[1, 1] = 1 / math.tan(fov / 2)
    proj[2, 3], proj[2, 2], proj[3, 2] = 1.0, 100.0 / 99.9, -10.0 / 99.9
    means = nn.Parameter(m.rand(20, 3) * 2 - 1)
    log_scales = nn.Parameter(m.log(m.rand(20, 3) * 0.1 + 0.05))
    quats = nn.Parameter(F.normalize(m.randn(20, 4), dim=-1))
    logits = nn.Parameter(m.log(m.full((20, 1), 0.1) / 0.9))
    colours = nn.Parameter(m.rand(20, 3))
    pixels = m.stack(m.meshgrid(m.arange(size), m.arange(size), indexing="xy"), dim=-1)
    opt = m.optim.Adam([means, log_scales, quats, logits, colours], lr=0.01)
    target, out = m.rand(size, size, 3), []
    for _ in range(2):
        homogeneous = m.cat([means, m.ones_like(means[..., :1])], dim=-1)
        screen = homogeneous @ view @ proj
        ndc = screen * (1.0 / (screen[..., -1:] + 1e-6))
        depths = (homogeneous @ view)[:, 2]
        t = (means @ view[:3, :3]) + view[-1:, :3]
        tx = (t[..., 0] / t[..., 2]).clip(min=-0.75, max=0.75) * t[..., 2]
        ty = (t[..., 1] / t[..., 2]).clip(min=-0.75, max=0.75) * t[..., 2]
        jac = m.zeros(20, 3, 3).to(means)
        jac[..., 0, 0], jac[..., 0, 2] = focal / t[..., 2], -tx / (t[..., 2] ** 2) * focal
        jac[..., 1, 1], jac[..., 1, 2] = focal / t[..., 2], -ty / (t[..., 2] ** 2) * focal
        w = view[:3, :3].T
        cov2d = (jac @ w @ covariance(m.exp(log_scales), quats) @ w.T @ jac.permute(0, 2, 1))[:, :2, :2]
        cov2d = cov2d + m.eye(2, 2).to(cov2d)[None] * 0.3
        centres = m.stack([((ndc[..., 0] + 1) * size - 1.0) * 0.5, ((ndc[..., 1] + 1) * size - 1.0) * 0.5], -1)
        opacity, image = m.sigmoid(logits), m.ones(size, size, 3)
        for row in range(0, size, 8):
            for col in range(0, size, 8):
                order = m.sort(depths)[1]
                conic = cov2d[order].inverse()
                dx = pixels[row : row + 8, col : col + 8].flatten(0, -2)[:, None, :] - centres[order][None]
                power = dx[:, :, 0] ** 2 * conic[:, 0, 0] + dx[:, :, 1] ** 2 * conic[:, 1, 1]
                power = power + dx[:, :, 0] * dx[:, :, 1] * (conic[:, 0, 1] + conic[:, 1, 0])
                alpha = (m.exp(-0.5 * power)[..., None] * opacity[order][None]).clip(max=0.99)
                trans = m.cat([m.ones_like(alpha[:, :1]), 1 - alpha[:, :-1]], dim=1).cumprod(dim=1)
                tile = (trans * alpha * colours[order][None]).sum(dim=1) + (1 - (alpha * trans).sum(dim=1))
                image[row : row + 8, col : col + 8] = tile.reshape(8, 8, -1)
        loss = F.l1_loss(image, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [loss.detach(), image.detach()]
    return out + [means.detach(), quats.grad]


@pytest.mark.slow
def test_rotation_conversions():
    _both(rotation_conversions, dict(rtol=1e-7, atol=1e-9))


@pytest.mark.slow
def test_homography_and_warps():
    _both(homography_and_warps, dict(rtol=1e-7, atol=1e-9))


def test_spherical_harmonics():
    _both(spherical_harmonics)


def test_pointnet2_grouping():
    _both(pointnet2_grouping)


@pytest.mark.slow
def test_hash_grid_encoding():
    _both(hash_grid_encoding)


@pytest.mark.slow
def test_gaussian_splatting():
    _both(gaussian_splatting)
