"""A neural ODE trained through the adjoint method written by hand (the pattern of Chen et al., 2018, as tutorials
teach it): a torch.autograd.Function integrates dz/dt = f(z, t) with fixed Euler steps under no_grad, and its
backward integrates the augmented state (z, a, dL/dp, dL/dt) back in time, each step asking autograd.grad for
a^T df/dz, a^T df/dt and a^T df/dp with grad_outputs=a; the adjoint state is updated in place. The dynamics take
the time as an input; the trajectory is fitted with Adam. Weights and observations come from NumPy."""

import numpy as np

from ._harness import load_state, mlp_state, parameters_of, run_both


def adjoint_program(torch, nn, F, optim, data, state, observed, times):
    class Dynamics(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(3, 12), nn.ELU(), nn.Linear(12, 2))

        def forward(self, z, t):
            return self.net(torch.cat([z, t.expand(z.shape[0], 1)], dim=1))

        def flat_parameters(self):
            return torch.cat([p.flatten() for p in self.parameters()])

    def euler(z, t0, t1, f, steps=4):
        h = (t1 - t0) / steps
        for _ in range(steps):
            z = z + h * f(z, t0)
            t0 = t0 + h
        return z

    class Adjoint(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z0, t, flat, func):
            with torch.no_grad():
                path = torch.zeros(len(t), *z0.shape, dtype=z0.dtype)
                path[0] = z0
                for i in range(len(t) - 1):
                    path[i + 1] = euler(path[i], t[i], t[i + 1], func)
            ctx.func = func
            ctx.save_for_backward(t, path, flat)
            return path

        @staticmethod
        def backward(ctx, grad_path):
            t, path, flat = ctx.saved_tensors
            func, (batch, dim), n_params = ctx.func, path.shape[1:], flat.numel()

            def augmented(state, ti):
                z, a = state[:, :dim], state[:, dim : 2 * dim]
                with torch.enable_grad():
                    z, ti = z.detach().requires_grad_(True), ti.detach().requires_grad_(True)
                    out = func(z, ti)
                    a_dz, a_dt, *a_dp = torch.autograd.grad(out, (z, ti, *func.parameters()), grad_outputs=a)
                a_dp = torch.cat([g.flatten() for g in a_dp]).expand(batch, n_params) / batch
                return torch.cat([out, -a_dz, -a_dp, -a_dt.expand(batch, 1) / batch], dim=1)

            with torch.no_grad():
                adj_z, adj_p = torch.zeros(batch, dim, dtype=path.dtype), torch.zeros(batch, n_params, dtype=path.dtype)
                adj_t = torch.zeros(len(t), batch, 1, dtype=path.dtype)
                for i in range(len(t) - 1, 0, -1):
                    adj_z += grad_path[i]
                    f_i = func(path[i], t[i])
                    adj_t[i] -= (grad_path[i] * f_i).sum(1, keepdim=True)
                    state = torch.cat([path[i], adj_z, torch.zeros_like(adj_p), adj_t[i]], dim=1)
                    back = euler(state, t[i], t[i - 1], augmented)
                    adj_z[:] = back[:, dim : 2 * dim]
                    adj_p[:] += back[:, 2 * dim : 2 * dim + n_params]
                    adj_t[i - 1] = back[:, 2 * dim + n_params :]
                adj_z += grad_path[0]
            return adj_z, adj_t.sum((1, 2)), adj_p.sum(0), None

    func = load_state(torch, Dynamics().double(), state)
    optimizer = optim.Adam(func.parameters(), lr=0.02)
    times, observed = torch.tensor(times), torch.tensor(observed)
    losses = []
    for _step in range(3):
        optimizer.zero_grad()
        path = Adjoint.apply(observed[0], times, func.flat_parameters(), func)
        loss = F.mse_loss(path, observed)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return {"losses": torch.stack(losses), "params": parameters_of(func)}


def spiral(rng, count=6, batch=3):
    """Points of a damped spiral from `batch` starting points, at `count` times, with a little noise."""
    times = np.linspace(0.0, 1.5, count)
    angle = times[:, None] + rng.uniform(0, 2 * np.pi, batch)[None]
    radius = np.exp(-0.3 * times)[:, None]
    points = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=-1)
    return points + 0.01 * rng.normal(size=points.shape), times


def test_neural_ode_by_a_hand_written_adjoint_matches_torch():
    rng = np.random.default_rng(8)
    state = mlp_state(rng, [3, 12, 2], prefix="net.")
    observed, times = spiral(rng)
    expected, _ = run_both(adjoint_program, state, observed, times)
    assert float(expected["losses"][-1]) < float(expected["losses"][0])
