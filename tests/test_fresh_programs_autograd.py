"""Autograd-centric programs of the kinds public code holds (create_graph, grad_outputs, custom Functions), each run
with torch and with batched_grad in its place (seeded alike, float64, compared to round-off): Hessian power iteration
with a Hutchinson trace, a continuous normalizing flow's exact and stochastic trace, Jacobian regularization by random
projections, a WGAN gradient penalty, LiSSA influence scores, sharpness-aware minimization, an adjoint-method ODE
Function, a Laplace GP classifier by Newton steps on torch.func Hessians and Function extras (non-differentiable
outputs, unmaterialized grads, once_differentiable) with hooks under create_graph."""

import numpy as np
import pytest

from ported._harness import float64_program, mlp, run_with_each_library

TOLERANCE = {"rtol": 1e-8, "atol": 1e-10}


@float64_program
def hessian_spectrum(torch):
    model = mlp(torch, [5, 8, 3], torch.nn.Tanh)
    x, y = torch.randn(20, 5), torch.randint(0, 3, (20,))
    weights = list(model.parameters())
    grads = torch.autograd.grad(torch.nn.functional.cross_entropy(model(x), y), weights, create_graph=True)
    flat_grad = torch.cat([g.reshape(-1) for g in grads])
    vector = torch.randn_like(flat_grad)
    vector = vector / vector.norm()
    eigenvalues = []
    for _ in range(15):
        hv = torch.cat([h.reshape(-1) for h in torch.autograd.grad(flat_grad @ vector, weights, retain_graph=True)])
        eigenvalues.append(torch.dot(hv, vector).item())
        vector = hv / hv.norm()
    traces = []
    for _ in range(4):
        signs = [torch.randint_like(w, high=2) * 2 - 1 for w in weights]
        products = torch.autograd.grad(grads, weights, grad_outputs=signs, retain_graph=True)
        traces.append(sum((p * s).sum() for p, s in zip(products, signs)).item())
    return {"eigenvalues": eigenvalues, "vector": vector, "traces": traces}


@float64_program
def continuous_flow(torch):
    def exact_trace(out, inp, noise):
        return sum(torch.autograd.grad(out[:, i].sum(), inp, create_graph=True)[0][:, i] for i in range(inp.shape[1]))

    def hutchinson_trace(out, inp, noise):
        return torch.einsum("bi,bi->b", torch.autograd.grad(out, inp, noise, create_graph=True)[0], noise)

    net = mlp(torch, [3, 12, 2], torch.nn.Tanh)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    data = torch.randn(12, 2) @ torch.tensor([[1.0, 0.3], [0.0, 0.5]])
    prior = torch.distributions.MultivariateNormal(torch.zeros(2), torch.eye(2))
    losses = []
    for trace in (exact_trace, hutchinson_trace):
        for _ in range(2):
            noise = torch.randn(12, 2)

            def dynamics(t, state):
                with torch.enable_grad():
                    z = state[:, 1:].requires_grad_(True)
                    velocity = net(torch.cat([z, t.expand(z.shape[0], 1)], 1))
                    return torch.cat([-trace(velocity, z, noise)[:, None], velocity], 1)

            state, t, h = torch.cat([torch.zeros(12, 1), data], 1), torch.zeros(1, 1), 0.25
            for _ in range(4):
                k1 = dynamics(t, state)
                k2 = dynamics(t + h / 2, state + h / 2 * k1)
                state, t = state + h * k2, t + h
            optimizer.zero_grad()
            loss = -(prior.log_prob(state[:, 1:]) - state[:, 0]).mean()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


@float64_program
def jacobian_regularized_training(torch):
    def frobenius_estimate(x, out, projections):
        batch, classes = out.shape
        total = 0
        for i in range(projections or classes):
            if projections:
                v = torch.randn(batch, classes)
                v = v / v.norm(2, 1, True)
            else:
                v = torch.zeros(batch, classes)
                v[:, i] = 1
            (jv,) = torch.autograd.grad(out.reshape(-1), x, v.reshape(-1), retain_graph=True, create_graph=True)
            total = total + classes * jv.norm() ** 2 / ((projections or classes) * batch)
        return total / 2

    model = torch.nn.Sequential(torch.nn.Conv2d(1, 3, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(48, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    images, labels = torch.randn(8, 1, 6, 6, requires_grad=True), torch.randint(0, 4, (8,))
    history = []
    for _ in range(3):
        optimizer.zero_grad()
        out = model(images)
        ce = torch.nn.functional.cross_entropy(out, labels)
        exact, estimate = frobenius_estimate(images, out, 0), frobenius_estimate(images, out, 2)
        (ce + 0.01 * estimate).backward()
        optimizer.step()
        history.append([ce.item(), exact.item(), estimate.item()])
    return history


@float64_program
def gradient_penalty_gan(torch):
    generator = torch.nn.Sequential(
        torch.nn.Linear(4, 12), torch.nn.LeakyReLU(0.2, inplace=True), torch.nn.Linear(12, 6)
    )
    critic = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.LeakyReLU(0.2, inplace=True), torch.nn.Linear(12, 1))
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3, betas=(0.5, 0.999))
    opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.999))
    rng = np.random.default_rng(0)
    real = torch.randn(16, 6) * 0.5
    history = []
    for _ in range(4):
        z = torch.tensor(rng.standard_normal((16, 4)))
        fake = generator(z)
        alpha = torch.tensor(rng.random((16, 1)))
        mixed = (alpha * real.data + (1 - alpha) * fake.data).requires_grad_(True)
        ones = torch.ones(16, 1)
        slopes = torch.autograd.grad(critic(mixed), mixed, ones, create_graph=True, retain_graph=True, only_inputs=True)
        penalty = ((slopes[0].view(16, -1).norm(2, dim=1) - 1) ** 2).mean()
        opt_c.zero_grad()
        critic_loss = -critic(real).mean() + critic(fake).mean() + 10 * penalty
        critic_loss.backward()
        opt_c.step()
        opt_g.zero_grad()
        generator_loss = -critic(generator(z)).mean()
        generator_loss.backward()
        opt_g.step()
        history.append([critic_loss.item(), penalty.item(), generator_loss.item()])
    return history


@float64_program
def influence_scores(torch):
    grad, F = torch.autograd.grad, torch.nn.functional
    model = mlp(torch, [4, 6, 3], torch.nn.Tanh)
    x, labels = torch.randn(30, 4), torch.randint(0, 3, (30,))
    weights = list(model.parameters())
    optimizer = torch.optim.LBFGS(weights, max_iter=8)

    def closure():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), labels)
        loss.backward()
        return loss

    optimizer.step(closure)
    test_grad = grad(F.cross_entropy(model(x[:1]), labels[:1]), weights)
    estimate = test_grad
    for _ in range(10):
        pick = torch.randint(0, 30, (8,))
        loss = F.cross_entropy(model(x[pick]), labels[pick]) + 0.01 * sum((w**2).sum() for w in weights)
        first = grad(loss, weights, create_graph=True)
        curvature = grad(sum((g * e).sum() for g, e in zip(first, estimate)), weights)
        estimate = [v + 0.99 * e - c / 25.0 for v, e, c in zip(test_grad, estimate, curvature)]
    scores = []
    for i in range(5):
        train_grad = grad(F.cross_entropy(model(x[i : i + 1]), labels[i : i + 1]), weights)
        scores.append(-sum((a * b).sum() for a, b in zip(train_grad, estimate)).item() / 30)
    return scores


@float64_program
def sharpness_aware(torch):
    model = torch.nn.Sequential(
        torch.nn.Linear(5, 12), torch.nn.BatchNorm1d(12), torch.nn.ReLU(), torch.nn.Linear(12, 3)
    )
    base = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    x, y = torch.randn(24, 5), torch.randint(0, 3, (24,))
    history = []
    for adaptive, rho in ((False, 0.05), (True, 2.0)):
        for _ in range(2):
            base.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            with torch.no_grad():
                scaled = [(p.abs() if adaptive else 1.0) * p.grad for p in model.parameters()]
                scale = rho / (torch.stack([s.norm(p=2) for s in scaled]).norm(p=2) + 1e-12)
                saved = [p.data.clone() for p in model.parameters()]
                for p in model.parameters():
                    p.add_((p**2 if adaptive else 1.0) * p.grad * scale.to(p))
            base.zero_grad()
            criterion(model(x), y).backward()
            with torch.no_grad():
                for p, old in zip(model.parameters(), saved):
                    p.data = old
            base.step()
            history.append([loss.item()] + [p.sum().item() for p in model.parameters()])
    return history


@float64_program
def adjoint_ode(torch):
    def euler(field, z, start, stop, steps=10):
        h = (stop - start) / steps
        for i in range(steps):
            z = z + h * field(z, start + i * h)
        return z

    class Adjoint(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z0, field, *weights):
            with torch.no_grad():
                z1 = euler(field, z0, 0.0, 1.0)
            ctx.field = field
            ctx.save_for_backward(z1, *weights)
            return z1

        @staticmethod
        def backward(ctx, adjoint):
            z, *weights = ctx.saved_tensors
            weight_adjoints = [torch.zeros_like(w) for w in weights]
            for i in range(10):
                with torch.enable_grad():
                    state = z.detach().requires_grad_(True)
                    velocity = ctx.field(state, 1.0 - i * 0.1)
                    products = torch.autograd.grad(velocity, (state, *weights), adjoint)
                z, adjoint = z - 0.1 * velocity.detach(), adjoint + 0.1 * products[0]
                weight_adjoints = [a + 0.1 * p for a, p in zip(weight_adjoints, products[1:])]
            return (adjoint, None, *weight_adjoints)

    net = mlp(torch, [2, 12, 2], torch.nn.Tanh)

    def field(z, t):
        return net(z)

    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    z0 = torch.randn(6, 2)
    target = z0 @ torch.tensor([[0.0, 1.0], [-1.0, 0.0]])
    history = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = ((Adjoint.apply(z0, field, *net.parameters()) - target) ** 2).mean()
        loss.backward()
        direct = torch.autograd.grad(((euler(field, z0, 0.0, 1.0) - target) ** 2).mean(), list(net.parameters()))
        history.append(
            [loss.item()] + [p.grad.norm().item() for p in net.parameters()] + [d.norm().item() for d in direct]
        )
        optimizer.step()
    return history


@float64_program
def laplace_gp_classifier(torch):
    func = torch.func
    x = torch.linspace(-2, 2, 8)[:, None]
    labels = (x[:, 0] > 0).double()

    def negative_log_posterior(latent, log_scale):
        kernel = torch.exp(-0.5 * torch.cdist(x, x) ** 2 / torch.exp(log_scale) ** 2) + 1e-6 * torch.eye(8)
        factor = torch.linalg.cholesky(kernel)
        prior = 0.5 * (latent[:, None] * torch.cholesky_solve(latent[:, None], factor)).sum()
        likelihood = (labels * latent - torch.nn.functional.softplus(latent)).sum()
        return prior - likelihood + torch.log(torch.diagonal(factor)).sum()

    latent, log_scale = torch.zeros(8), torch.tensor(0.0)
    for _ in range(4):
        newton = torch.linalg.solve(
            func.hessian(negative_log_posterior)(latent, log_scale),
            func.grad(negative_log_posterior)(latent, log_scale),
        )
        latent = latent - newton
    full = func.hessian(negative_log_posterior, argnums=(0, 1))(latent, log_scale)
    return [latent, func.grad(negative_log_posterior, argnums=1)(latent, log_scale), full]


def function_extras(torch):
    class Rounded(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            winner = x.argmax(-1)
            ctx.mark_non_differentiable(winner)
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x)
            return x.round(), winner

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, grad_rounded, grad_winner):
            (x,) = ctx.saved_tensors
            return None if grad_rounded is None else grad_rounded * (x.abs() < 2)

    torch.manual_seed(0)
    x = (torch.randn(4, 5, dtype=torch.float64) * 2).requires_grad_()
    rounded, winner = Rounded.apply(x)
    (rounded * torch.arange(5.0, dtype=torch.float64)).sum().backward()
    cube_input = torch.randn(3, dtype=torch.float64, requires_grad=True)
    cube = cube_input**3
    seen = []
    cube.register_hook(lambda g: seen.append(g.detach().clone()) or g * 2)
    (first,) = torch.autograd.grad(cube.sum(), cube_input, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), cube_input)
    other = torch.randn(3, dtype=torch.float64, requires_grad=True)
    materialized = torch.autograd.grad((cube_input * 2).sum(), (cube_input, other), materialize_grads=True)
    return [winner.requires_grad, rounded.requires_grad, x.grad, first, second, seen, materialized]


PROGRAMS = [
    hessian_spectrum,
    continuous_flow,
    jacobian_regularized_training,
    gradient_penalty_gan,
    influence_scores,
    sharpness_aware,
    adjoint_ode,
    laplace_gp_classifier,
    function_extras,
]
# the programs whose two runs take under ~2 s from a cold compilation cache
FAST = {
    "hessian_spectrum",
    "continuous_flow",
    "gradient_penalty_gan",
    "influence_scores",
    "sharpness_aware",
    "adjoint_ode",
}


@pytest.mark.parametrize(
    "program",
    [pytest.param(p, id=p.__name__, marks=[] if p.__name__ in FAST else [pytest.mark.slow]) for p in PROGRAMS],
)
def test_program_matches_torch(program):
    run_with_each_library(program, TOLERANCE)
