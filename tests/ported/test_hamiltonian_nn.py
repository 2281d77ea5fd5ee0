"""A Hamiltonian neural network (Greydanus et al., 2019) on an ideal spring: an MLP gives a scalar H(q, p) and the
predicted time derivatives are its symplectic gradient (dH/dp, -dH/dq), from autograd.grad(H.sum(), x,
create_graph=True); the loss compares them with the true derivatives of noisy phase-space samples. After training
the learnt field is rolled out with a few Euler steps. Weights and samples come from NumPy."""

import numpy as np

from ._harness import load_state, mlp_state, parameters_of, run_both


def hnn_program(torch, nn, F, optim, data, state, coords, derivatives, start):
    hamiltonian = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))
    hamiltonian = load_state(torch, hamiltonian.double(), state)

    def time_derivative(x):
        x = x.detach().requires_grad_(True) if not x.requires_grad else x
        energy = hamiltonian(x)
        (dh,) = torch.autograd.grad(energy.sum(), x, create_graph=True)
        dh_dq, dh_dp = dh.split(1, dim=1)
        return torch.cat([dh_dp, -dh_dq], dim=1)

    dataset = data.TensorDataset(torch.tensor(coords), torch.tensor(derivatives))
    loader = data.DataLoader(dataset, batch_size=16)
    optimizer = optim.Adam(hamiltonian.parameters(), lr=1e-2, weight_decay=1e-4)
    losses = []
    for _epoch in range(3):
        for x, dxdt in loader:
            optimizer.zero_grad()
            loss = (time_derivative(x) - dxdt).pow(2).mean()
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
    point, rollout = torch.tensor(start), []
    for _step in range(5):
        point = (point + 0.1 * time_derivative(point)).detach()
        rollout.append(point)
    return {"losses": torch.stack(losses), "params": parameters_of(hamiltonian), "rollout": torch.cat(rollout)}


def spring_samples(rng, count, noise=0.1):
    """Phase-space points of H = (q^2 + p^2) / 2 on circles of random radius, with dq/dt = p and dp/dt = -q."""
    radius = rng.uniform(0.2, 1.0, count)
    angle = rng.uniform(0, 2 * np.pi, count)
    coords = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    derivatives = np.stack([coords[:, 1], -coords[:, 0]], axis=1)
    return coords + noise * rng.normal(size=coords.shape), derivatives


def test_hamiltonian_nn_on_a_spring_matches_torch():
    rng = np.random.default_rng(4)
    state = mlp_state(rng, [2, 16, 16, 1])
    coords, derivatives = spring_samples(rng, 48)
    expected, _ = run_both(hnn_program, state, coords, derivatives, np.array([[0.5, 0.0]]))
    assert float(expected["losses"][-1]) < float(expected["losses"][0])
