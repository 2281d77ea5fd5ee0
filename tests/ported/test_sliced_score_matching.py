"""Sliced score matching (Song et al., 2019): a network s(x) models the score of 2-D data, trained with the loss
v^T (ds/dx) v + (v^T s)^2 / 2 for random projection directions v; the first term is autograd.grad of (s * v).sum()
with respect to x with create_graph=True. Data, projections and weights come from NumPy; batches from a
DataLoader."""

import numpy as np

from ._harness import load_state, mlp_state, parameters_of, run_both


def sliced_score_matching_program(torch, nn, F, optim, data, state, points, projections):
    score = nn.Sequential(nn.Linear(2, 32), nn.Softplus(), nn.Linear(32, 2)).double()
    load_state(torch, score, state)
    optimizer = optim.SGD(score.parameters(), lr=0.05, momentum=0.5)
    loader = data.DataLoader(data.TensorDataset(torch.tensor(points), torch.tensor(projections)), batch_size=16)

    def sliced_loss(x, v):
        x = x.requires_grad_(True)
        s = score(x)
        sv = (s * v).sum()
        (grad_sv,) = torch.autograd.grad(sv, x, create_graph=True)
        first = (grad_sv * v).sum(dim=-1)
        second = 0.5 * (s * v).sum(dim=-1) ** 2
        return (first + second).mean()

    losses = []
    for _epoch in range(3):
        for x, v in loader:
            optimizer.zero_grad()
            loss = sliced_loss(x.clone(), v)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
    probe = torch.tensor(points[:4])
    return {"losses": torch.stack(losses), "params": parameters_of(score), "scores": score(probe).detach()}


def test_sliced_score_matching_matches_torch():
    rng = np.random.default_rng(7)
    state = mlp_state(rng, [2, 32, 2])
    points = rng.normal(size=(48, 2)) @ np.array([[1.0, 0.6], [0.0, 0.5]])
    projections = rng.normal(size=(48, 2))
    projections /= np.linalg.norm(projections, axis=1, keepdims=True)
    run_both(sliced_score_matching_program, state, points, projections)
