"""Autograd-centric programs of the kinds public code holds, each written once against torch's API and run with
torch and with batched_grad in its place (seeded alike, float64, compared to round-off): PyHessian's deflated power
iteration, Hutchinson trace and Lanczos density; a Hessian filled row by row into a preallocated matrix and
differentiated again; Jacobians from autograd.grad under vmap and with is_grads_batched; a bounded
Levenberg-Marquardt fit over autograd.functional's forward-mode Jacobian; Lennard-Jones normal modes; Stein
variational gradient descent; Hessian-free optimisation by the double-backward R-op; an empirical tangent kernel from
one batched grad call; and hyperparameter gradients through unrolled SGD steps. test_fresh_programs_func2b.py and
test_fresh_programs_func2c.py hold the rest of this round."""

import math

import pytest

from ported._harness import float64_program, mlp, run_with_each_library

TOLERANCE = {"rtol": 1e-8, "atol": 1e-10}


@float64_program
def pyhessian_spectrum(torch):
    """PyHessian: top eigenvalues by deflated power iteration, Hutchinson trace to a tolerance, SLQ density."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.Tanh(), torch.nn.Linear(6, 3))
    model.train()
    model(torch.randn(16, 4))
    model.eval()
    inputs, targets = torch.randn(24, 4), torch.randint(0, 3, (24,))
    params = [p for p in model.parameters() if p.requires_grad]
    loss = torch.nn.CrossEntropyLoss()(model(inputs), targets)
    grads = torch.autograd.grad(loss, params, create_graph=True)

    def dot(xs, ys):
        return sum(torch.sum(x * y) for x, y in zip(xs, ys))

    def normalized(vs):
        norm = torch.sqrt(dot(vs, vs)).item()
        return [v / (norm + 1e-6) for v in vs]

    def orthogonal_to(w, basis):
        for v in basis:
            w = [wi - dot(w, v) * vi for wi, vi in zip(w, v)]
        return normalized(w)

    def hvp(vs):
        return torch.autograd.grad(grads, params, grad_outputs=vs, only_inputs=True, retain_graph=True)

    eigenvalues, eigenvectors = [], []
    for _ in range(2):
        v = normalized([torch.randn(p.size()) for p in params])
        value = None
        for _ in range(60):
            v = orthogonal_to(v, eigenvectors)
            hv = hvp(v)
            new_value = dot(hv, v).item()
            v = normalized(hv)
            if value is not None and abs(value - new_value) / (abs(value) + 1e-6) < 1e-9:
                value = new_value
                break
            value = new_value
        eigenvalues.append(value)
        eigenvectors.append(v)

    estimates, previous = [], 0.0
    for i in range(50):
        v = [torch.randint_like(p, high=2) for p in params]
        for vi in v:
            vi[vi == 0] = -1
        estimates.append(dot(hvp(v), v).item())
        mean = sum(estimates) / len(estimates)
        if i > 2 and abs(mean - previous) / (abs(previous) + 1e-6) < 1e-3:
            break
        previous = mean

    def lanczos(v, steps=12):
        """Nodes and weights of the quadrature that `steps` Lanczos steps from v give (full reorthogonalization)."""
        basis, alphas, betas = [v], [], []
        w = hvp(v)
        for step in range(steps):
            if step > 0:
                beta = torch.sqrt(dot(w, w))
                betas.append(beta.item())
                v = (
                    orthogonal_to([wi / beta for wi in w], basis)
                    if beta != 0.0
                    else normalized([torch.randn(p.size()) for p in params])
                )
                basis.append(v)
                w = [wi - beta * vp for wi, vp in zip(hvp(v), basis[-2])]
            alpha = dot(w, v)
            alphas.append(alpha.item())
            w = [wi - alpha * vi for wi, vi in zip(w, v)]
        tridiagonal = torch.zeros(steps, steps)
        for i in range(steps):
            tridiagonal[i, i] = alphas[i]
            if i < steps - 1:
                tridiagonal[i + 1, i] = betas[i]
                tridiagonal[i, i + 1] = betas[i]
        values, vectors = torch.linalg.eigh(tridiagonal)
        return values, vectors[0, :] ** 2

    starts = [normalized([torch.randint_like(p, high=2) * 2.0 - 1 for p in params]) for _ in range(2)]
    nodes, weights = map(list, zip(*[lanczos(v) for v in starts]))
    grid = torch.linspace(-1, 1, 9)
    density = sum(
        (w[:, None] * torch.exp(-((grid[None] - n[:, None]) ** 2) / 0.02)).sum(0) for n, w in zip(nodes, weights)
    )
    return {
        "eigenvalues": eigenvalues,
        "vectors": [torch.cat([t.flatten() for t in v]).abs() for v in eigenvectors],
        "trace": estimates,
        "nodes": nodes,
        "weights": weights,
        "density": density,
    }


@float64_program
def hessian_by_rows(torch):
    """hessian_pytorch: a Hessian filled row by row into a preallocated matrix (in-place adds into views),
    differentiable with create_graph so that a second call takes the Hessian of its sum."""

    def gradient(output, inputs, retain_graph=None, create_graph=False):
        grads = torch.autograd.grad(
            output, inputs, allow_unused=True, retain_graph=retain_graph, create_graph=create_graph
        )
        return torch.cat(
            [(torch.zeros_like(x) if g is None else g).contiguous().view(-1) for x, g in zip(inputs, grads)]
        )

    def hessian(output, inputs, create_graph=False):
        inputs = [inputs] if torch.is_tensor(inputs) else list(inputs)
        n = sum(p.numel() for p in inputs)
        out = output.new_zeros(n, n)
        row_index = 0
        for i, inp in enumerate(inputs):
            [first] = torch.autograd.grad(output, inp, create_graph=True, allow_unused=True)
            first = torch.zeros_like(inp) if first is None else first
            first = first.contiguous().view(-1)
            for j in range(inp.numel()):
                if first[j].requires_grad:
                    row = gradient(first[j], inputs[i:], retain_graph=True, create_graph=create_graph)[j:]
                else:
                    row = first[j].new_zeros(sum(x.numel() for x in inputs[i:]) - j)
                out[row_index, row_index:].add_(row.type_as(out))
                if row_index + 1 < n:
                    out[row_index + 1 :, row_index].add_(row[1:].type_as(out))
                row_index += 1
        return out

    x = torch.tensor([1.5, 2.5], requires_grad=True)
    h = hessian(x.pow(2).prod(), x, create_graph=True)
    h2 = hessian(h.sum(), x)
    layer = torch.nn.Linear(3, 2)
    data = torch.randn(5, 3)
    loss = torch.nn.functional.softplus(layer(data)).pow(2).mean()
    full = hessian(loss, list(layer.parameters()))
    linear_only = torch.zeros(2, requires_grad=True)
    mixed = hessian((x * x).sum() + linear_only.sum(), [x, linear_only])
    return [h.detach(), h.grad_fn is not None, h2, full, torch.linalg.eigvalsh(full), mixed]


@float64_program
def vmapped_vjp_jacobian(torch):
    """Batched Jacobians: torch.autograd.grad under vmap over the rows of an identity, and the same with
    is_grads_batched; a physics-style velocity Jacobian for each sample of a batch."""
    net = mlp(torch, [3, 10, 4], torch.nn.Tanh)
    x = torch.randn(6, 3, requires_grad=True)
    y = net(x)

    def jacobian(y, x):
        def get_vjp(v):
            return torch.autograd.grad(y, x, v.repeat(y.shape[0], 1), create_graph=True, retain_graph=True)[0]

        return torch.vmap(get_vjp)(torch.eye(y.shape[1])).transpose(0, 1)

    jac = jacobian(y, x)
    batched = torch.autograd.grad(
        y, x, torch.eye(4)[:, None, :].expand(4, 6, 4), retain_graph=True, is_grads_batched=True
    )[0].transpose(0, 1)
    divergence_penalty = jac[:, :3, :3].diagonal(dim1=-2, dim2=-1).sum(-1).pow(2).mean()
    rows = torch.autograd.grad(y.sum(0), x, torch.eye(4), is_grads_batched=True, retain_graph=True)[0]
    weight_grads = torch.autograd.grad(divergence_penalty, [net[0].weight, net[0].bias, net[2].weight])
    reference = torch.func.vmap(torch.func.jacrev(net))(x.detach())
    return [jac.detach(), batched, weight_grads, rows, reference]


@float64_program
def ring_fit_forward_jacobian(torch):
    """Levenberg-Marquardt fit of a blurred elliptical ring with bounds, its Jacobian from
    autograd.functional.jacobian(vectorize=True, strategy='forward-mode'), free-parameter masking in the solve."""
    size = 24
    rows, cols = torch.meshgrid(torch.arange(size) - size / 2, torch.arange(size) - size / 2, indexing="ij")
    truth = torch.tensor([2.0, 0.6, 0.2, -0.3, 7.0, 5.0, 0.3, 1.5, 0.1])

    def model(p):
        amp, width, r0, c0, a, b, theta, background, bump = p
        dr, dc = rows - r0, cols - c0
        u = dc * torch.cos(theta) + dr * torch.sin(theta)
        v = -dc * torch.sin(theta) + dr * torch.cos(theta)
        radius = torch.sqrt(torch.clamp((u / a) ** 2 + (v / b) ** 2, min=1e-12))
        offset = radius - 1
        sigma = torch.where(offset < 0, width, width * 1.5)
        return amp * torch.exp(-(offset**2) / (2 * sigma**2)) + background + bump * radius

    observed = model(truth) + 0.01 * torch.randn(size, size)
    keep = (observed > observed.mean() - 0.5 * observed.std()).flatten()

    def residuals(p):
        return (model(p) - observed).flatten()[keep]

    lower = torch.tensor([0.0, 0.05, -3, -3, 3, 3, -1.5, 0.0, -1.0])
    upper = torch.tensor([10.0, 3.0, 3, 3, 11, 11, 1.5, 5.0, 1.0])
    x = torch.tensor([1.5, 0.8, 0.0, 0.0, 6.0, 6.0, 0.1, 1.2, 0.0])
    res = residuals(x)
    cost, lam = res @ res, 1e-3
    scale = torch.full_like(x, 1e-12)
    history = []
    for _ in range(6):
        J = torch.autograd.functional.jacobian(residuals, x, vectorize=True, strategy="forward-mode")
        scale = torch.maximum(scale, J.norm(dim=0))
        J = J / scale
        JtJ, Jtr = J.T @ J, J.T @ res
        free = ~(((x <= lower) & (Jtr > 0)) | ((x >= upper) & (Jtr < 0)))
        for _ in range(20):
            A = JtJ + lam * torch.eye(len(x))
            step = torch.zeros_like(x)
            step[free] = torch.linalg.solve(A[free][:, free], Jtr[free])
            x_new = (x - step / scale).clamp(lower, upper)
            res_new = residuals(x_new)
            cost_new = res_new @ res_new
            if cost_new < cost:
                break
            lam *= 3.0
        if not cost_new < cost:
            break
        x, res, cost, lam = x_new, res_new, cost_new, lam * 0.3
        history.append(cost.item())
    reverse = torch.autograd.functional.jacobian(residuals, x, vectorize=True)
    forward = torch.autograd.functional.jacobian(residuals, x, vectorize=True, strategy="forward-mode")
    return {"x": x, "history": history, "forward": forward, "reverse": reverse}


@float64_program
def molecular_normal_modes(torch):
    """Normal modes of a Lennard-Jones cluster: forces by autograd.grad with create_graph, the Hessian from the
    forces in one grad call over the rows of an identity (is_grads_batched), mass weighting and eigh; frequencies of
    a batch of perturbed clusters by vmap(hessian)."""
    base = torch.tensor([[0.0, 0.0, 0.0], [1.12, 0.0, 0.0], [0.56, 0.97, 0.0], [0.56, 0.32, 0.91]])
    masses = torch.tensor([1.0, 2.0, 1.5, 1.0])

    def energy(positions):
        diff = positions[:, None, :] - positions[None, :, :]
        i, j = torch.triu_indices(len(positions), len(positions), offset=1)
        r2 = (diff[i, j] ** 2).sum(-1)
        inv6 = r2.reciprocal() ** 3
        return (4 * (inv6**2 - inv6)).sum()

    x = base.clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS([x], lr=0.5, max_iter=20, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        e = energy(x)
        e.backward()
        return e

    optimizer.step(closure)
    e = energy(x)
    forces = -torch.autograd.grad(e, x, create_graph=True)[0]
    flat = forces.flatten()
    hessian = -torch.autograd.grad(flat, x, torch.eye(12), is_grads_batched=True)[0].reshape(12, 12)
    weights = masses.repeat_interleave(3).rsqrt()
    values, vectors = torch.linalg.eigh(weights[:, None] * hessian * weights[None, :])
    frequencies = values.clamp(min=0).sqrt()
    batch = x.detach() + 0.01 * torch.randn(5, 4, 3)
    batched = torch.func.vmap(torch.func.hessian(energy))(batch).reshape(5, 12, 12)
    lowest = torch.linalg.eigvalsh(batched)[:, -3:]
    return [e.item(), forces.detach(), hessian, frequencies[6:], vectors[:, 6:].abs(), lowest]


@float64_program
def stein_variational(torch):
    """Stein variational gradient descent on a banana-shaped density: scores from autograd.grad of the log density,
    the repulsive term from autograd.grad of the RBF kernel's sum, the median-heuristic bandwidth; the Fisher
    information of a Normal from autograd.functional.hessian of its log_prob."""

    def log_density(z):
        a, b = z[:, 0], z[:, 1]
        return -0.5 * a**2 / 4 - 0.5 * (b - 0.25 * a**2) ** 2

    particles = torch.randn(24, 2)
    history = []
    for _ in range(15):
        x = particles.detach().requires_grad_(True)
        score = torch.autograd.grad(log_density(x).sum(), x)[0]
        y = particles.detach().requires_grad_(True)
        distances = torch.cdist(y, y) ** 2
        bandwidth = distances.detach().median() / math.log(24 + 1)
        kernel = torch.exp(-distances / bandwidth)
        repulsion = -torch.autograd.grad(kernel.sum(), y)[0]
        phi = (kernel.detach() @ score + repulsion) / 24
        particles = particles + 0.2 * phi
        history.append(log_density(particles).mean().item())

    def negative_log_likelihood(mu, log_sigma):
        return -torch.distributions.Normal(mu, log_sigma.exp()).log_prob(torch.tensor([0.3, -0.1, 0.8])).sum()

    fisher = torch.autograd.functional.hessian(negative_log_likelihood, (torch.tensor(0.2), torch.tensor(-0.5)))
    return [history, particles, fisher]


@float64_program
def hessian_free_rop(torch):
    """Hessian-free optimisation: Gauss-Newton products J^T H J v with J v by the double-backward R-op trick
    (autograd.grad of a vjp with respect to a dummy cotangent), truncated CG, Levenberg damping by the reduction
    ratio."""
    net = mlp(torch, [3, 10, 2], torch.nn.Tanh)
    params = list(net.parameters())
    x, y = torch.randn(40, 3), torch.randn(40, 2)

    def rop(out, vectors):
        dummy = torch.zeros_like(out, requires_grad=True)
        grads = torch.autograd.grad(out, params, dummy, create_graph=True)
        return torch.autograd.grad(grads, dummy, vectors, retain_graph=True)[0]

    damping, losses = 1.0, []
    for _ in range(4):
        out = net(x)
        loss = 0.5 * ((out - y) ** 2).sum() / 40
        grads = torch.autograd.grad(loss, params, retain_graph=True)

        def gnvp(vs):
            jv = rop(out, vs)
            jtjv = torch.autograd.grad(out, params, jv / 40, retain_graph=True)
            return [a + damping * v for a, v in zip(jtjv, vs)]

        step = [torch.zeros_like(p) for p in params]
        r = [-g for g in grads]
        d = [ri.clone() for ri in r]
        rr = sum((ri * ri).sum() for ri in r)
        for _ in range(8):
            Ad = gnvp(d)
            alpha = rr / sum((di * ai).sum() for di, ai in zip(d, Ad))
            step = [s + alpha * di for s, di in zip(step, d)]
            r = [ri - alpha * ai for ri, ai in zip(r, Ad)]
            new_rr = sum((ri * ri).sum() for ri in r)
            d = [ri + (new_rr / rr) * di for ri, di in zip(r, d)]
            rr = new_rr
        predicted = sum((g * s).sum() for g, s in zip(grads, step)) + 0.5 * sum(
            (s * a).sum() for s, a in zip(step, gnvp(step))
        )
        with torch.no_grad():
            for p, s in zip(params, step):
                p += s
            new_loss = 0.5 * ((net(x) - y) ** 2).sum() / 40
        ratio = (new_loss - loss) / predicted
        damping = damping * 1.5 if ratio < 0.25 else damping * (2 / 3 if ratio > 0.75 else 1.0)
        losses.append((loss.item(), ratio.item(), damping))
    return [losses, [p.detach() for p in params]]


@float64_program
def tangent_kernel_batched_grads(torch):
    """Empirical NTK from the Jacobian of all outputs with respect to all parameters, built in one
    autograd.grad(is_grads_batched=True) call against rows of an identity, then kernel regression with it."""
    net = mlp(torch, [3, 32, 2], torch.nn.Softplus)
    params = list(net.parameters())

    def jacobian(x):
        out = net(x).flatten()
        rows = torch.autograd.grad(out, params, torch.eye(out.numel()), is_grads_batched=True)
        return torch.cat([r.flatten(1) for r in rows], 1).view(x.shape[0], 2, -1)

    train, test = torch.randn(8, 3), torch.randn(4, 3)
    j_train, j_test = jacobian(train), jacobian(test)
    k_train = torch.einsum("iap,jbp->iajb", j_train, j_train).reshape(16, 16)
    k_test = torch.einsum("iap,jbp->iajb", j_test, j_train).reshape(8, 16)
    targets = torch.randn(8, 2).flatten()
    residual = targets - net(train).detach().flatten()
    prediction = net(test).detach().flatten() + k_test @ torch.linalg.solve(k_train + 1e-3 * torch.eye(16), residual)
    trace_by_vmap = torch.func.vmap(
        lambda row: torch.autograd.grad(net(train).flatten(), params, row, retain_graph=True)[0].pow(2).sum()
    )(torch.eye(16))
    return [k_train, k_test, prediction, trace_by_vmap]


@float64_program
def unrolled_lr_hypergradient(torch):
    """Learning-rate and weight-decay hypergradients by differentiating through unrolled SGD steps written over
    functional_call (the weights stay in the graph), with the hyperparameters in log space."""
    func = torch.func
    model = mlp(torch, [4, 8, 1], torch.nn.Tanh)
    x_train, y_train = torch.randn(32, 4), torch.randn(32, 1)
    x_val, y_val = torch.randn(16, 4), torch.randn(16, 1)
    log_lr = torch.tensor(-2.0, requires_grad=True)
    log_wd = torch.tensor(-4.0, requires_grad=True)
    hyper_opt = torch.optim.Adam([log_lr, log_wd], lr=0.05)
    history = []
    for _ in range(4):
        hyper_opt.zero_grad()
        weights = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}
        for step in range(5):
            rows = slice(8 * (step % 4), 8 * (step % 4) + 8)
            pred = func.functional_call(model, weights, (x_train[rows],))
            loss = ((pred - y_train[rows]) ** 2).mean() + log_wd.exp() * sum((w**2).sum() for w in weights.values())
            grads = torch.autograd.grad(loss, list(weights.values()), create_graph=True)
            weights = {k: w - log_lr.exp() * g for (k, w), g in zip(weights.items(), grads)}
        val = ((func.functional_call(model, weights, (x_val,)) - y_val) ** 2).mean()
        val.backward()
        history.append((val.item(), log_lr.grad.item(), log_wd.grad.item()))
        hyper_opt.step()
    return [history, log_lr.detach(), log_wd.detach()]


PROGRAMS = [
    pyhessian_spectrum,
    hessian_by_rows,
    vmapped_vjp_jacobian,
    ring_fit_forward_jacobian,
    molecular_normal_modes,
    stein_variational,
    hessian_free_rop,
    tangent_kernel_batched_grads,
    unrolled_lr_hypergradient,
]
# the programs whose two runs take under ~2 s from a cold compilation cache
FAST = {"molecular_normal_modes", "tangent_kernel_batched_grads"}


@pytest.mark.parametrize(
    "program",
    [pytest.param(p, id=p.__name__, marks=[] if p.__name__ in FAST else [pytest.mark.slow]) for p in PROGRAMS],
)
def test_program_matches_torch(program):
    run_with_each_library(program, TOLERANCE)
