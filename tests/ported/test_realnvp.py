"""A small RealNVP normalizing flow (Dinh et al., 2017) on 2-D two-moons-like data: affine coupling layers that
alternately transform one coordinate with a scale and shift computed from the other, the log-determinant of the
Jacobian summed over layers, the log-density under a standard normal base distribution, and maximum-likelihood
training with Adam under a StepLR schedule. Weights and data come from NumPy."""

import numpy as np

from ._harness import run_both


def realnvp_program(torch, nn, F, optim, data, state, points):
    class AffineCoupling(nn.Module):
        def __init__(self, mask):
            super().__init__()
            self.register_buffer("mask", torch.tensor(mask))
            self.net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 4))

        def forward(self, x):
            kept = x * self.mask
            log_scale, shift = self.net(kept).chunk(2, dim=-1)
            log_scale = torch.tanh(log_scale) * (1 - self.mask)
            shift = shift * (1 - self.mask)
            y = kept + (1 - self.mask) * (x * torch.exp(log_scale) + shift)
            return y, log_scale.sum(-1)

        def inverse(self, y):
            kept = y * self.mask
            log_scale, shift = self.net(kept).chunk(2, dim=-1)
            log_scale = torch.tanh(log_scale) * (1 - self.mask)
            shift = shift * (1 - self.mask)
            return kept + (1 - self.mask) * (y - shift) * torch.exp(-log_scale)

    class RealNVP(nn.Module):
        def __init__(self, layers):
            super().__init__()
            masks = [np.array([1.0, 0.0]) if i % 2 == 0 else np.array([0.0, 1.0]) for i in range(layers)]
            self.couplings = nn.ModuleList([AffineCoupling(mask) for mask in masks])
            base = torch.distributions.MultivariateNormal(torch.zeros(2, dtype=torch.float64), torch.eye(2).double())
            self.base = base

        def forward(self, x):
            log_det = torch.zeros(x.shape[0], dtype=x.dtype)
            for coupling in self.couplings:
                x, layer_log_det = coupling(x)
                log_det = log_det + layer_log_det
            return x, log_det

        def log_prob(self, x):
            z, log_det = self(x)
            return self.base.log_prob(z) + log_det

        def inverse(self, z):
            for coupling in reversed(self.couplings):
                z = coupling.inverse(z)
            return z

    flow = RealNVP(4).double()
    flow.load_state_dict({name: torch.tensor(value) for name, value in state.items()}, strict=False)
    optimizer = optim.Adam(flow.parameters(), lr=5e-3)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    loader = data.DataLoader(data.TensorDataset(torch.tensor(points)), batch_size=16)
    losses = []
    for _epoch in range(3):
        for (x,) in loader:
            optimizer.zero_grad()
            loss = -flow.log_prob(x).mean()
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        scheduler.step()
    x_all = torch.tensor(points)
    with torch.no_grad():
        z, log_det = flow(x_all)
        reconstructed = flow.inverse(z)
        per_coordinate = torch.distributions.Normal(torch.zeros(2).double(), 1.0).log_prob(z).sum(-1) + log_det
    return {
        "losses": torch.stack(losses),
        "latents": z,
        "log_det": log_det,
        "reconstruction_error": (reconstructed - x_all).abs().max(),
        "log_prob_mvn": flow.log_prob(x_all).detach(),
        "log_prob_normal": per_coordinate,
        "params": {name: p.detach().clone() for name, p in flow.named_parameters()},
        "lr": optimizer.param_groups[0]["lr"],
    }


def coupling_state(rng, layers):
    state = {}
    for i in range(layers):
        for index, (fan_in, fan_out) in ((0, (2, 16)), (2, (16, 4))):
            bound = 1 / np.sqrt(fan_in)
            state[f"couplings.{i}.net.{index}.weight"] = rng.uniform(-bound, bound, (fan_out, fan_in))
            state[f"couplings.{i}.net.{index}.bias"] = rng.uniform(-bound, bound, (fan_out,))
    return state


def two_moons(rng, count):
    angles = rng.uniform(0, np.pi, count)
    upper = rng.integers(0, 2, count).astype(bool)
    x = np.where(upper, np.cos(angles), 1 - np.cos(angles))
    y = np.where(upper, np.sin(angles), 0.5 - np.sin(angles))
    return np.stack([x, y], axis=1) + 0.1 * rng.normal(size=(count, 2))


def test_realnvp_flow_matches_torch():
    rng = np.random.default_rng(9)
    expected, _ = run_both(realnvp_program, coupling_state(rng, 4), two_moons(rng, 48))
    assert float(expected["reconstruction_error"]) < 1e-12
