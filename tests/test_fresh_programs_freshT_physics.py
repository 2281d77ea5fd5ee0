"""Differentiable-physics programs of public repositories, run with torch and with batched_grad from the same seed
in float64 and compared number for number: NVIDIA warp's PyTorch cloth benchmark (springs by index_add_ into a force
buffer, semi-implicit Euler written in place, linalg.norm with NumPy's `axis`) stepped as published and then unrolled
with learnt stiffness; Lennard-Jones velocity-Verlet dynamics with forces from autograd.grad (khegazy/transbymep's
potential, lab-cosmo/torch_spex's compute_forces) and the potential's parameters fitted through create_graph=True
forces; a Lagrangian network (magnusross/pytorch-lagrangian-nn's jacobian/hessian by grad_outputs rows and
torch.autograd.functional) whose accelerations come from the Hessian in the velocities; and a projectile with
quadratic drag whose launch is optimised through the unrolled Euler steps."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

F64 = dict(rtol=1e-9, atol=1e-11)


def _both(program):
    assert_same(program(bg), program(torch), **F64)


def _cloth(nx, ny):
    """Grid positions (jittered), inverse masses (first row pinned), spring index pairs and rest lengths."""
    grid = np.array([(x * 0.1, 0.0, y * 0.1) for y in range(ny) for x in range(nx)])
    positions = grid + np.random.default_rng(0).uniform(-0.01, 0.01, grid.shape)
    pairs = []
    for y in range(ny):
        for x in range(nx):
            k = y * nx + x
            pairs += [(k, k + 1)] * (x + 1 < nx) + [(k, k + nx)] * (y + 1 < ny)
            pairs += [(k, k + nx + 1)] * (x + 1 < nx and y + 1 < ny)
    pairs = np.array(pairs)
    inv_mass = np.ones(len(grid))
    inv_mass[:nx] = 0.0
    rest = 0.95 * np.linalg.norm(positions[pairs[:, 0]] - positions[pairs[:, 1]], axis=1)
    return positions, inv_mass, pairs, rest


def _spring_forces(m, x, v, indices, rest, ke, kd, f):
    i, j = indices[:, 0], indices[:, 1]
    xij, vij = x[i] - x[j], v[i] - v[j]
    length = m.linalg.norm(xij, axis=1)
    direction = (xij.T * (1.0 / length)).T
    fs = direction.T * (ke * (length - rest) + kd * m.sum(direction * vij, axis=1))
    f.index_add_(dim=0, index=i, source=-fs.T)
    f.index_add_(dim=0, index=j, source=fs.T)


def _integrate(x, v, f, g, w, dt):
    v += ((f.T * w).T + g * (w > 0.0)[:, None]) * dt
    x += v * dt
    f *= 0.0


def cloth(m):
    """Three frames of eight substeps of the benchmark's integrator on a 4 x 3 cloth (buffers updated in place, no
    grad), then ten substeps unrolled from fresh buffers with a stiffness vector that requires grad, SGD on the
    distance to the first run's positions."""
    m.set_default_dtype(m.float64)
    positions, inv_mass, pairs, rest = _cloth(4, 3)
    x, v = m.tensor(positions), m.zeros(len(positions), 3)
    f, w, g = m.zeros(len(positions), 3), m.tensor(inv_mass), m.tensor((0.0, -9.8, 0.0))
    idx, rest_t = m.tensor(pairs.reshape(-1), dtype=m.long).reshape((len(pairs), 2)), m.tensor(rest)
    ke_fixed, kd = m.full((len(pairs),), 1.0e3), m.ones(len(pairs))
    out = []
    for _ in range(3):
        for _ in range(8):
            _spring_forces(m, x, v, idx, rest_t, ke_fixed, kd, f)
            _integrate(x, v, f, g, w, 1.0 / 480.0)
        out.append(x.clone())
    ke = m.full((len(pairs),), 500.0, requires_grad=True)
    opt, target = m.optim.SGD([ke], lr=10.0), x.clone()
    for _ in range(3):
        xs, vs, fs = m.tensor(positions), m.zeros(len(positions), 3), m.zeros(len(positions), 3)
        for _ in range(10):
            _spring_forces(m, xs, vs, idx, rest_t, ke, kd, fs)
            _integrate(xs, vs, fs, g, w, 1.0 / 240.0)
        loss = ((xs - target) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        out += [loss.detach(), ke.grad.clone()]
        opt.step()
    m.set_default_dtype(m.float32)
    return out + [v, ke.detach()]


def _lj_energy(m, points, epsilon, sigma):
    pos = points.unflatten(-1, (-1, 3))
    dist = pos[..., None, :, :] - pos[..., :, None, :]
    upper = m.triu_indices(dist.shape[-3], dist.shape[-2], offset=1)
    inv = sigma / m.linalg.norm(dist[..., upper[0], upper[1], :], dim=-1)
    return 4 * epsilon * m.sum(inv**12 - inv**6, dim=-1)


def _forces(m, energy, positions, create_graph):
    grad = m.autograd.grad(energy, positions, m.ones_like(energy), retain_graph=create_graph, create_graph=create_graph)
    return -1 * grad[0]


def lennard_jones_md(m):
    """Eight atoms on a jittered cube: energies of a batch by the triu_indices form and by the pairwise loop,
    three velocity-Verlet steps with detached positions, then sigma and epsilon (tensors requiring grad) fitted by
    Adam to that trajectory through two steps whose forces keep their graph."""
    m.manual_seed(0)
    m.set_default_dtype(m.float64)
    axis = m.arange(2.0)
    grid = m.stack(m.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1)
    x0, v0 = grid * 1.15 + 0.02 * m.randn(24), 0.1 * m.randn(24)
    batch = m.stack([x0, x0 + 0.01]).requires_grad_(True)
    energy = _lj_energy(m, batch, 1.0, 1.0)
    pos, loop = batch.unflatten(-1, (-1, 3)), 0.0
    for i in range(8):
        for j in range(i + 1, 8):
            loop = loop + 4 * (
                (1.0 / m.linalg.norm(pos[..., i, :] - pos[..., j, :], dim=-1)) ** 12
                - (1.0 / m.linalg.norm(pos[..., i, :] - pos[..., j, :], dim=-1)) ** 6
            )
    out = [energy.detach(), loop.detach(), _forces(m, energy, batch, False)]

    def verlet(eps, sigma, x, v, steps, create_graph):
        f = _forces(m, _lj_energy(m, x, eps, sigma), x, create_graph)
        for _ in range(steps):
            x = x + v * 0.005 + 0.5 * f * 0.005**2
            x = x if create_graph else x.detach().requires_grad_(True)
            f_new = _forces(m, _lj_energy(m, x, eps, sigma), x, create_graph)
            v, f = v + 0.5 * (f + f_new) * 0.005, f_new
        return x, v

    x, v = verlet(1.0, 1.0, x0.detach().requires_grad_(True), v0, 3, False)
    out += [x.detach(), v, (_lj_energy(m, x, 1.0, 1.0) + 0.5 * (v**2).sum()).detach()]
    sigma, eps = m.tensor(1.05, requires_grad=True), m.tensor(0.9, requires_grad=True)
    opt = m.optim.Adam([sigma, eps], lr=0.01)
    for _ in range(3):
        xt, vt = verlet(eps, sigma, x0.clone().requires_grad_(True), v0, 2, True)
        loss = ((xt - x.detach()) ** 2).sum() + ((vt - v.detach()) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        out += [loss.detach(), sigma.grad.clone(), eps.grad.clone()]
        opt.step()
    m.set_default_dtype(m.float32)
    return out + [sigma.detach(), eps.detach()]


def _rows_jacobian(m, y, x, create_graph=False):
    rows, flat = [], y.reshape(-1)
    seed = m.zeros_like(flat)
    for i in range(len(flat)):
        seed[i] = 1.0
        (g,) = m.autograd.grad(flat, x, seed, retain_graph=True, create_graph=create_graph)
        rows.append(g.reshape(x.shape))
        seed[i] = 0.0
    return m.stack(rows).reshape(y.shape + x.shape)


def _spring_pendulum(m, x, g=10, k=10):
    q, qt = m.split(x, 2)
    return 0.5 * (qt[0] ** 2 + (q[0] * qt[1]) ** 2) - g * q[0] * (1 - m.cos(q[1])) - k * (q[0] - 1) ** 2


def _accelerations(m, lagrangian, x):
    grad = m.autograd.grad(lagrangian(x), x, create_graph=True)[0]
    hess = m.autograd.functional.jacobian(
        lambda z: m.autograd.grad(lagrangian(z), z, create_graph=True)[0], x, create_graph=True
    )
    return m.linalg.pinv(hess[2:, 2:]) @ (grad[:2] - hess[:2, 2:] @ x[2:])


def lagrangian_network(m):
    """The repository's jacobian (one grad_outputs row per output, written into a zeros seed in place) and hessian
    (its jacobian with create_graph) against torch.autograd.functional's; the spring pendulum's accelerations; a
    Softplus network trained by Adam so its Euler-Lagrange accelerations match them."""
    m.manual_seed(0)
    m.set_default_dtype(m.float64)
    x = m.ones(4, requires_grad=True)
    y = x * x * m.arange(4, dtype=m.float64)
    out = [_rows_jacobian(m, y, x), _rows_jacobian(m, _rows_jacobian(m, y, x, create_graph=True), x)]
    x0 = m.tensor([1.1, 0.5, 0.2, -0.3], requires_grad=True)
    pendulum = lambda z: _spring_pendulum(m, z)  # noqa: E731
    out += [m.autograd.functional.jacobian(pendulum, x0), m.autograd.functional.hessian(pendulum, x0)]
    out += [_accelerations(m, pendulum, x0).detach()]
    states = m.randn(2, 4) * 0.3 + m.tensor([1.0, 0.0, 0.0, 0.0])
    targets = m.stack([_accelerations(m, pendulum, s.clone().requires_grad_(True)) for s in states]).detach()
    nn = m.nn
    net = nn.Sequential(nn.Linear(4, 8), nn.Softplus(), nn.Linear(8, 8), nn.Softplus(), nn.Linear(8, 1))
    opt = m.optim.Adam(net.parameters(), lr=1e-2)
    learnt = lambda z: net(z).squeeze(-1)  # noqa: E731
    for _ in range(2):
        opt.zero_grad()
        predicted = m.stack([_accelerations(m, learnt, s.clone().requires_grad_(True)) for s in states])
        loss = ((predicted - targets) ** 2).mean()
        loss.backward()
        opt.step()
        out.append(loss.detach())
    m.set_default_dtype(m.float32)
    return [t.detach() for t in out] + [p.detach() for p in net.parameters()]


def _fly(m, v0, theta, mass, c, steps, dt=0.01, g=9.81):
    vx, vy = v0 * m.cos(theta), v0 * m.sin(theta)
    x, y = m.zeros(()), m.zeros(())
    for _ in range(steps):
        speed = m.sqrt(vx**2 + vy**2 + 1e-8)
        vx = vx + (-c * speed * vx) / mass * dt
        vy = vy + (-c * speed * vy - mass * g) / mass * dt
        x, y = x + vx * dt, y + vy * dt
    return x, y


def projectile(m):
    """Launch speed, angle and drag coefficient fitted by Adam to a target through 60 unrolled steps, and the
    Hessian of the landing coordinates' sum in (speed, angle) by torch.autograd.functional.hessian."""
    m.set_default_dtype(m.float64)
    v0, theta, c = (
        m.tensor(20.0, requires_grad=True),
        m.tensor(0.6, requires_grad=True),
        m.tensor(0.05, requires_grad=True),
    )
    opt, out = m.optim.Adam([v0, theta, c], lr=0.05), []
    for _ in range(3):
        x, y = _fly(m, v0, theta, 1.0, c, 60)
        loss = (x - 25.0) ** 2 + (y - 2.0) ** 2
        opt.zero_grad()
        loss.backward()
        out += [loss.detach(), v0.grad.clone(), theta.grad.clone(), c.grad.clone()]
        opt.step()
    hess = m.autograd.functional.hessian(lambda a, b: sum(_fly(m, a, b, 1.0, 0.05, 20)), (v0.detach(), theta.detach()))
    m.set_default_dtype(m.float32)
    return out + [h for row in hess for h in row]


@pytest.mark.slow
def test_cloth():
    _both(cloth)


@pytest.mark.slow
def test_lennard_jones_md():
    _both(lennard_jones_md)


@pytest.mark.slow
def test_lagrangian_network():
    _both(lagrangian_network)


@pytest.mark.slow
def test_projectile():
    _both(projectile)
