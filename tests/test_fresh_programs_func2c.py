"""Physics, curvature and custom-Function programs of the kinds public code holds (the third part of
test_fresh_programs_func2.py's round), each run with torch and with batched_grad in its place (seeded alike, float64,
compared to round-off): elasticity and Navier-Stokes residuals, autograd.functional across its strategies, Lipschitz
and equivariance checks, an implicit layer as a Function with setup_context, jvp and a vmap staticmethod, a
last-layer Laplace approximation, a continuous normalizing flow under a hand-written RK4, natural-gradient descent
and third-order PINN residuals."""

import math

import pytest

from ported._harness import float64_program, mlp, run_with_each_library

TOLERANCE = {"rtol": 1e-8, "atol": 1e-10}


@float64_program
def elasticity_navier_stokes(torch):
    """Physics residuals: linear elasticity from a displacement network (strain by vmap(jacrev), divergence of stress
    by vmap(jacfwd(jacrev))), and a Navier-Stokes PINN from a stream function by nested autograd.grad."""
    func = torch.func
    displacement = mlp(torch, [2, 16, 2], torch.nn.Tanh)
    lam, mu = 1.0, 0.5
    points = torch.rand(30, 2)
    body_force = torch.stack([torch.sin(points[:, 0]), torch.cos(points[:, 1])], 1)
    optimizer = torch.optim.Adam(displacement.parameters(), lr=1e-2)

    def stress_of_gradient(grad_u):
        strain = 0.5 * (grad_u + grad_u.transpose(-1, -2))
        trace = strain.diagonal(dim1=-2, dim2=-1).sum(-1)
        return lam * trace[..., None, None] * torch.eye(2) + 2 * mu * strain

    def stress(x):
        return stress_of_gradient(func.jacrev(displacement)(x))

    elastic = []
    for _ in range(3):
        second = func.vmap(func.jacfwd(func.jacrev(displacement)))(points)
        divergence = torch.einsum("bijj->bi", func.vmap(func.jacfwd(stress))(points))
        by_hessian = torch.stack(
            [
                (lam + mu) * (second[:, 0, 0, 0] + second[:, 1, 1, 0]) + mu * (second[:, 0, 0, 0] + second[:, 0, 1, 1]),
                (lam + mu) * (second[:, 0, 0, 1] + second[:, 1, 1, 1]) + mu * (second[:, 1, 0, 0] + second[:, 1, 1, 1]),
            ],
            1,
        )
        loss = ((divergence + body_force) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        elastic.append((loss.item(), (divergence - by_hessian).abs().max().item() < 1e-10))

    flow = mlp(torch, [3, 20, 20, 2], torch.nn.Tanh)
    nu = torch.nn.Parameter(torch.tensor(0.05))
    optimizer = torch.optim.Adam(list(flow.parameters()) + [nu], lr=1e-2)
    x, y, t = (torch.rand(25, 1, requires_grad=True) for _ in range(3))

    def d(out, inp):
        return torch.autograd.grad(out, inp, grad_outputs=torch.ones_like(out), create_graph=True)[0]

    fluid = []
    for _ in range(3):
        psi_p = flow(torch.cat([x, y, t], 1))
        psi, p = psi_p[:, :1], psi_p[:, 1:]
        u, v = d(psi, y), -d(psi, x)
        u_t, u_x, u_y = d(u, t), d(u, x), d(u, y)
        v_t, v_x, v_y = d(v, t), d(v, x), d(v, y)
        u_xx, u_yy, v_xx, v_yy = d(u_x, x), d(u_y, y), d(v_x, x), d(v_y, y)
        f = u_t + u * u_x + v * u_y + d(p, x) - nu * (u_xx + u_yy)
        g = v_t + u * v_x + v * v_y + d(p, y) - nu * (v_xx + v_yy)
        loss = (f**2).mean() + (g**2).mean() + ((u - torch.sin(y)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        fluid.append(loss.item())
    return [elastic, fluid, nu.detach(), [p.detach() for p in displacement.parameters()]]


@float64_program
def functional_suite(torch):
    """torch.autograd.functional across its strategies: hessian with a forward-mode outer Jacobian over three inputs,
    a create_graph Jacobian fed to backward, hvp/vhp/jvp/vjp, and the refusals of unsupported combinations."""
    AF = torch.autograd.functional

    def f(x, y, z):
        return ((x.relu() * x) @ y.sin() @ z).sum()

    x, y, z = torch.randn(2, 3), torch.randn(3, 5), torch.randn(5, 5)
    forward = AF.hessian(f, (x, y, z), outer_jacobian_strategy="forward-mode", vectorize=True)
    reverse = AF.hessian(f, (x, y, z))
    w = torch.randn(3, 3, requires_grad=True)

    def g(a):
        return torch.tanh(a @ w).pow(2)

    a = torch.randn(4, 3)
    jac = AF.jacobian(g, a, create_graph=True, vectorize=True)
    jac.pow(2).sum().backward()
    hv = AF.hvp(lambda a: g(a).sum(), a, torch.ones(4, 3))
    vh = AF.vhp(lambda a: g(a).sum(), a, torch.ones(4, 3))
    jv = AF.jvp(g, a, torch.ones(4, 3), create_graph=False)
    vj = AF.vjp(g, a, torch.ones(4, 3))
    refusals = []
    for kwargs in (
        {"strategy": "forward-mode", "create_graph": True, "vectorize": True},
        {"strategy": "forward-mode", "vectorize": False},
        {"strategy": "sideways"},
        {"strategy": "forward-mode", "strict": True, "vectorize": True},
    ):
        try:
            AF.jacobian(g, a, **kwargs)
            refusals.append(None)
        except (AssertionError, ValueError, RuntimeError, NotImplementedError) as error:
            refusals.append((type(error).__name__, str(error)))
    try:
        AF.jacobian(lambda a: a.detach() * 2, a, strict=True)
        refusals.append(None)
    except RuntimeError as error:
        refusals.append(str(error))
    unused = AF.jacobian(lambda a, b: a * 2, (a, torch.ones(2)))
    return [forward, reverse, jac.detach(), w.grad, hv, vh, jv, vj, refusals, unused]


@float64_program
def lipschitz_equivariance(torch):
    """Local Lipschitz estimates by power iteration on J^T J through linearize (jvp) and vjp, per-point spectral
    norms through vmap(jacrev), and a rotation-equivariance check of a vector field's Jacobian."""
    func = torch.func
    net = mlp(torch, [4, 12, 12, 4], torch.nn.GELU)
    x0 = torch.randn(4)
    out, jvp_fn = func.linearize(net, x0)
    _, vjp_fn = func.vjp(net, x0)
    v = torch.randn(4)
    estimates = []
    for _ in range(30):
        u = vjp_fn(jvp_fn(v))[0]
        estimates.append(u.norm().sqrt().item())
        v = u / u.norm()
    points = torch.randn(7, 4)
    jacobians = func.vmap(func.jacrev(net))(points)
    spectral = torch.linalg.matrix_norm(jacobians, ord=2)

    def field(p):
        r = p.norm()
        return p * torch.exp(-(r**2)) + torch.stack([-p[1], p[0]]) * torch.tanh(r)

    angle = torch.tensor(0.4)
    rot = torch.stack([torch.stack([angle.cos(), -angle.sin()]), torch.stack([angle.sin(), angle.cos()])])
    q = torch.randn(5, 2)
    rotated = func.vmap(func.jacrev(field))(q @ rot.T)
    conjugated = rot @ func.vmap(func.jacrev(field))(q) @ rot.T
    forward = func.vmap(func.jacfwd(field))(q)
    layer = torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(4, 4))
    layer(points)
    layer.eval()
    normed = func.vmap(func.jacrev(layer))(points)
    return [
        out,
        estimates,
        spectral,
        (rotated - conjugated).abs().max().item() < 1e-12,
        forward,
        torch.linalg.matrix_norm(normed, ord=2),
    ]


@float64_program
def implicit_layer_function(torch):
    """A custom Function solving z = tanh(W z + x) by Newton iterations in forward, differentiated implicitly: a
    setup_context, backward by a linear solve, jvp by the same solve, and an explicit vmap staticmethod; used under
    grad, jacrev, jacfwd and vmap, next to a generate_vmap_rule twin."""
    func = torch.func

    def solve(x, w):
        z = torch.zeros_like(x)
        for _ in range(30):
            residual = z - torch.tanh(z @ w.T + x)
            s = 1 - torch.tanh(z @ w.T + x) ** 2
            jac = torch.eye(x.shape[-1]) - s[..., :, None] * w
            z = z - torch.linalg.solve(jac, residual.unsqueeze(-1)).squeeze(-1)
        return z

    def system(z, x, w):
        s = 1 - torch.tanh(z @ w.T + x) ** 2
        return torch.eye(x.shape[-1]) - s[..., :, None] * w, s

    class Equilibrium(torch.autograd.Function):
        @staticmethod
        def forward(x, w):
            return solve(x, w)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, w = inputs
            ctx.save_for_backward(output, x, w)
            ctx.save_for_forward(output, x, w)

        @staticmethod
        def backward(ctx, grad_z):
            z, x, w = ctx.saved_tensors
            jac, s = system(z, x, w)
            adjoint = torch.linalg.solve(jac.transpose(-1, -2), grad_z.unsqueeze(-1)).squeeze(-1) * s
            return adjoint, adjoint.unsqueeze(-1) * z.unsqueeze(-2) if z.dim() == 1 else adjoint.T @ z

        @staticmethod
        def jvp(ctx, x_dot, w_dot):
            z, x, w = ctx.saved_tensors
            jac, s = system(z, x, w)
            rhs = s * (x_dot + (z @ w_dot.T if w_dot is not None else 0))
            return torch.linalg.solve(jac, rhs.unsqueeze(-1)).squeeze(-1)

        @staticmethod
        def vmap(info, in_dims, x, w):
            x_dim, w_dim = in_dims
            x = x.movedim(x_dim, 0) if x_dim is not None else x.expand(info.batch_size, *x.shape)
            w = w.movedim(w_dim, 0) if w_dim is not None else w.expand(info.batch_size, *w.shape)
            return torch.stack([Equilibrium.apply(xi, wi) for xi, wi in zip(x, w)]), 0

    class GeneratedEquilibrium(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x, w):
            return solve(x, w)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output, *inputs)

        @staticmethod
        def backward(ctx, grad_z):
            z, x, w = ctx.saved_tensors
            jac, s = system(z, x, w)
            adjoint = torch.linalg.solve(jac.T, grad_z) * s
            return adjoint, torch.outer(adjoint, z)

    w = 0.3 * torch.randn(3, 3)
    x = torch.randn(3)
    xs = torch.randn(5, 3)
    results = [Equilibrium.apply(x, w)]
    results.append(func.grad(lambda x, w: Equilibrium.apply(x, w).pow(2).sum(), argnums=(0, 1))(x, w))
    results.append(func.jacrev(Equilibrium.apply)(x, w))
    results.append(func.jacfwd(Equilibrium.apply, argnums=(0, 1))(x, w))
    results.append(func.vmap(Equilibrium.apply, in_dims=(0, None))(xs, w))
    results.append(func.vmap(func.jacrev(Equilibrium.apply), in_dims=(0, None))(xs, w))
    results.append(func.vmap(GeneratedEquilibrium.apply, in_dims=(0, None))(xs, w))
    results.append(
        func.vmap(func.grad(lambda x, w: GeneratedEquilibrium.apply(x, w).sum(), argnums=1), in_dims=(0, None))(xs, w)
    )
    leaf = w.clone().requires_grad_()
    torch.stack([Equilibrium.apply(xi, leaf) for xi in xs]).sum().backward()
    results.append(leaf.grad)
    return results


@float64_program
def last_layer_laplace(torch):
    """Last-layer Laplace approximation for a classifier: features from a forward hook, the exact GGN of the last
    layer from per-sample Jacobians (vmap(jacrev)) and softmax Hessians, its diagonal and Kronecker (KFAC) forms,
    prior precision tuned by the marginal likelihood's gradient, and a probit / MC predictive."""
    func = torch.func
    net = torch.nn.Sequential(torch.nn.Linear(2, 10), torch.nn.Tanh(), torch.nn.Linear(10, 3))
    x, y = torch.randn(40, 2), torch.randint(0, 3, (40,))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(20):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y, reduction="sum").backward()
        optimizer.step()
    captured = {}
    handle = net[1].register_forward_hook(lambda module, inp, out: captured.__setitem__("phi", out.detach()))
    logits = net(x).detach()
    handle.remove()
    phi = captured["phi"]
    last = net[2]
    theta = torch.cat([last.weight.detach().flatten(), last.bias.detach()])

    def head(theta, feature):
        weight, bias = theta[:30].view(3, 10), theta[30:]
        return weight @ feature + bias

    jacobians = func.vmap(func.jacrev(head), in_dims=(None, 0))(theta, phi)
    probs = logits.softmax(-1)
    lam = torch.diag_embed(probs) - probs[:, :, None] * probs[:, None, :]
    ggn = torch.einsum("nkp,nkl,nlq->pq", jacobians, lam, jacobians)
    diagonal = torch.einsum("nkp,nkl,nlp->p", jacobians, lam, jacobians)
    features = torch.cat([phi, torch.ones(40, 1)], 1)
    kfac_a, kfac_g = features.T @ features / 40, lam.sum(0)
    log_prior = torch.tensor(0.0, requires_grad=True)
    prior_opt = torch.optim.Adam([log_prior], lr=0.1)
    nll = torch.nn.functional.cross_entropy(logits, y, reduction="sum")
    margliks = []
    for _ in range(10):
        prior_opt.zero_grad()
        precision = log_prior.exp()
        posterior = ggn + precision * torch.eye(33)
        marglik = -nll - 0.5 * precision * theta.pow(2).sum() - 0.5 * (torch.logdet(posterior) - 33 * log_prior)
        (-marglik).backward()
        prior_opt.step()
        margliks.append(marglik.item())
    posterior = ggn + log_prior.detach().exp() * torch.eye(33)
    covariance = torch.linalg.inv(posterior)
    test = torch.randn(6, 2)
    test_phi = net[1](net[0](test)).detach()
    test_jac = func.vmap(func.jacrev(head), in_dims=(None, 0))(theta, test_phi)
    mean = func.vmap(head, in_dims=(None, 0))(theta, test_phi)
    variance = torch.einsum("nkp,pq,nkq->nk", test_jac, covariance, test_jac)
    probit = (mean / torch.sqrt(1 + math.pi / 8 * variance)).softmax(-1)
    sampler = torch.distributions.MultivariateNormal(theta, precision_matrix=posterior)
    samples = sampler.sample((50,))
    mc = func.vmap(func.vmap(head, in_dims=(None, 0)), in_dims=(0, None))(samples, test_phi).softmax(-1).mean(0)
    return [ggn, diagonal, kfac_a, kfac_g, margliks, probit, mc, samples[:3]]


@float64_program
def hutchinson_flow_rk4(torch):
    """A continuous normalizing flow in torch.func style: the augmented state (z, log p) integrated by a hand-written
    RK4, the divergence by vmap(jacrev) trace or a Hutchinson estimate through vjp, trained by maximum likelihood."""
    func = torch.func
    net = mlp(torch, [3, 16, 2], torch.nn.Tanh)

    def velocity(t, z):
        return net(torch.cat([z, t.expand(1)]))

    def exact_divergence(t, z):
        return torch.trace(func.jacrev(velocity, argnums=1)(t, z))

    def hutchinson_divergence(t, z, noise):
        _, pull = func.vjp(lambda z: velocity(t, z), z)
        return pull(noise)[0] @ noise

    def augmented(t, state, noise, exact):
        z = state[:, :2]
        v = func.vmap(velocity, in_dims=(None, 0))(t, z)
        if exact:
            div = func.vmap(exact_divergence, in_dims=(None, 0))(t, z)
        else:
            div = func.vmap(hutchinson_divergence, in_dims=(None, 0, 0))(t, z, noise)
        return torch.cat([v, -div[:, None]], 1)

    def rk4(state, noise, exact, steps=4):
        h = torch.tensor(1.0 / steps)
        t = torch.tensor(0.0)
        for _ in range(steps):
            k1 = augmented(t, state, noise, exact)
            k2 = augmented(t + h / 2, state + h / 2 * k1, noise, exact)
            k3 = augmented(t + h / 2, state + h / 2 * k2, noise, exact)
            k4 = augmented(t + h, state + h * k3, noise, exact)
            state = state + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            t = t + h
        return state

    data = torch.randn(16, 2) * torch.tensor([0.5, 1.5]) + 0.3
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    losses = []
    for exact in (True, False, True):
        noise = torch.randn(16, 2)
        optimizer.zero_grad()
        final = rk4(torch.cat([data, torch.zeros(16, 1)], 1), noise, exact)
        prior = -0.5 * final[:, :2].pow(2).sum(1) - math.log(2 * math.pi)
        loss = -(prior - final[:, 2]).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@float64_program
def natural_gradient_fisher(torch):
    """Natural-gradient descent: the empirical Fisher from per-sample gradients (vmap(grad) over functional_call with
    grad_and_value and has_aux), damped and solved against the mean gradient; a second form by jacrev(chunk_size)."""
    func = torch.func
    net = mlp(torch, [2, 8, 1], torch.nn.Tanh)
    x = torch.randn(30, 2)
    y = (x[:, :1] * x[:, 1:]).tanh() + 0.05 * torch.randn(30, 1)
    names = [k for k, _ in net.named_parameters()]

    def loss(params, xi, yi):
        pred = func.functional_call(net, params, (xi,))
        return ((pred - yi) ** 2).sum(), pred

    history = []
    for _ in range(4):
        params = {k: v.detach() for k, v in net.named_parameters()}
        grads, (values, preds) = func.vmap(func.grad_and_value(loss, has_aux=True), in_dims=(None, 0, 0))(params, x, y)
        flat = torch.cat([grads[k].flatten(1) for k in names], 1)
        fisher = flat.T @ flat / 30 + 1e-2 * torch.eye(flat.shape[1])
        direction = torch.linalg.solve(fisher, flat.mean(0))

        def flat_outputs(vector):
            pieces = dict(
                zip(
                    names,
                    [p.view_as(params[k]) for p, k in zip(vector.split([params[k].numel() for k in names]), names)],
                )
            )
            return func.functional_call(net, pieces, (x,)).flatten()

        jac = func.jacrev(flat_outputs, chunk_size=5)(torch.cat([params[k].flatten() for k in names]))
        gauss_newton = 2 * jac.T @ jac / 30
        offset = 0
        with torch.no_grad():
            for p in net.parameters():
                p -= 0.5 * direction[offset : offset + p.numel()].view_as(p)
                offset += p.numel()
        history.append((values.mean().item(), preds.shape[0], torch.linalg.eigvalsh(gauss_newton)[-3:]))
    return history


@float64_program
def third_order_residuals(torch):
    """A KdV PINN (u_t + 6 u u_x + u_xxx = 0): third derivatives by nested autograd.grad and by
    vmap(jacfwd(jacfwd(jacrev))); autograd.grad with materialize_grads for an unused input."""
    func = torch.func
    net = mlp(torch, [2, 16, 16, 1], torch.nn.Tanh)
    optimizer = torch.optim.Adam(net.parameters(), lr=5e-3)
    xt = torch.rand(20, 2) * 2 - 1
    unused = torch.zeros(3, requires_grad=True)
    history = []
    for _ in range(3):
        inputs = xt.clone().requires_grad_(True)
        u = net(inputs)
        du = torch.autograd.grad(u.sum(), inputs, create_graph=True)[0]
        u_x, u_t = du[:, 0], du[:, 1]
        u_xx = torch.autograd.grad(u_x.sum(), inputs, create_graph=True)[0][:, 0]
        u_xxx = torch.autograd.grad(u_xx.sum(), inputs, create_graph=True)[0][:, 0]
        residual = u_t + 6 * u[:, 0] * u_x + u_xxx
        scalar = lambda p: net(p)[0]
        third = func.vmap(func.jacfwd(func.jacfwd(func.jacrev(scalar))))(xt)
        initial = net(torch.stack([xt[:, 0], -torch.ones(20)], 1))[:, 0] + 2 / torch.cosh(xt[:, 0]) ** 2 * -1
        loss = residual.pow(2).mean() + initial.pow(2).mean()
        extra = torch.autograd.grad(u.sum(), [inputs, unused], retain_graph=True, materialize_grads=True)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append((loss.item(), (third[:, 0, 0, 0] - u_xxx).abs().max().item() < 1e-9, extra[1]))
    return history


PROGRAMS = [
    elasticity_navier_stokes,
    functional_suite,
    lipschitz_equivariance,
    implicit_layer_function,
    last_layer_laplace,
    hutchinson_flow_rk4,
    natural_gradient_fisher,
    third_order_residuals,
]
# the programs whose two runs take under ~2 s from a cold compilation cache
FAST = set()


@pytest.mark.parametrize(
    "program",
    [pytest.param(p, id=p.__name__, marks=[] if p.__name__ in FAST else [pytest.mark.slow]) for p in PROGRAMS],
)
def test_program_matches_torch(program):
    run_with_each_library(program, TOLERANCE)
