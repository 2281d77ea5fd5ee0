"""Elastic weight consolidation (Kirkpatrick et al., 2017): train a classifier on task A, estimate the diagonal of
the Fisher information from per-sample gradients (torch.func.vmap over grad of a functional_call), then train on
task B with the quadratic EWC penalty that anchors the parameters important to task A, under a MultiStepLR
schedule. Weights and both tasks' data come from NumPy."""

import numpy as np

from ._harness import load_state, mlp_state, parameters_of, run_both


def ewc_program(torch, nn, F, optim, data, state, task_a, task_b):
    from_func = torch.func
    model = nn.Sequential(nn.Linear(4, 12), nn.Tanh(), nn.Linear(12, 3)).double()
    load_state(torch, model, state)

    def loader_of(task):
        inputs, labels = task
        return data.DataLoader(data.TensorDataset(torch.tensor(inputs), torch.tensor(labels)), batch_size=10)

    def train(loader, epochs, penalty, optimizer, scheduler=None):
        losses = []
        for _epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y) + penalty()
                loss.backward()
                optimizer.step()
                losses.append(loss.detach())
            if scheduler is not None:
                scheduler.step()
        return torch.stack(losses)

    def fisher_diagonal(loader):
        params = {name: p.detach() for name, p in model.named_parameters()}

        def sample_loss(params, x, y):
            logits = from_func.functional_call(model, params, (x.unsqueeze(0),))
            return F.cross_entropy(logits, y.unsqueeze(0))

        per_sample_grad = from_func.vmap(from_func.grad(sample_loss), in_dims=(None, 0, 0))
        totals, count = {name: torch.zeros_like(p) for name, p in params.items()}, 0
        for x, y in loader:
            grads = per_sample_grad(params, x, y)
            for name, g in grads.items():
                totals[name] += (g**2).sum(0)
            count += x.shape[0]
        return {name: total / count for name, total in totals.items()}

    no_penalty = lambda: torch.zeros((), dtype=torch.float64)  # noqa: E731
    loader_a, loader_b = loader_of(task_a), loader_of(task_b)
    losses_a = train(loader_a, 2, no_penalty, optim.SGD(model.parameters(), lr=0.2))
    fisher = fisher_diagonal(loader_a)
    anchors = {name: p.detach().clone() for name, p in model.named_parameters()}
    strength = 50.0

    def ewc_penalty():
        terms = [(fisher[name] * (p - anchors[name]) ** 2).sum() for name, p in model.named_parameters()]
        return strength / 2 * torch.stack(terms).sum()

    optimizer = optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=[1], gamma=0.3)
    losses_b = train(loader_b, 2, ewc_penalty, optimizer, scheduler)
    with torch.no_grad():
        x_a, y_a = (torch.tensor(v) for v in task_a)
        retained = F.cross_entropy(model(x_a), y_a)
    return {
        "losses_a": losses_a,
        "fisher": fisher,
        "losses_b": losses_b,
        "final_penalty": ewc_penalty().detach(),
        "task_a_loss_after_b": retained,
        "params": parameters_of(model),
        "lr": optimizer.param_groups[0]["lr"],
    }


def classification_task(rng, count, centres):
    labels = rng.integers(0, len(centres), count)
    return centres[labels] + 0.5 * rng.normal(size=(count, centres.shape[1])), labels


def test_ewc_matches_torch():
    rng = np.random.default_rng(2)
    state = mlp_state(rng, [4, 12, 3])
    task_a = classification_task(rng, 30, rng.normal(size=(3, 4)) * 2)
    task_b = classification_task(rng, 30, rng.normal(size=(3, 4)) * 2)
    expected, _ = run_both(ewc_program, state, task_a, task_b)
    assert all(float(f.min()) >= 0 for f in expected["fisher"].values())
