"""Sharpness-aware minimization (Foret et al., 2021): each step takes the gradient, moves the parameters in place
(under no_grad) to the approximate worst point of a rho-ball, takes the gradient there, moves back and lets a base
optimizer (SGD with momentum) step with that second gradient. Training stops midway at a checkpoint written with
torch.save, and a fresh model and optimizer resume from torch.load of it."""

import numpy as np
import pytest

from ._harness import load_state, mlp_state, parameters_of, run_both


def sam_program(torch, nn, F, optim, data, state, inputs, labels, checkpoint_path):
    class SAM(optim.Optimizer):
        def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
            super().__init__(params, dict(rho=rho, **kwargs))
            self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
            self.param_groups = self.base_optimizer.param_groups

        @torch.no_grad()
        def first_step(self, zero_grad=False):
            norm = self._grad_norm()
            for group in self.param_groups:
                scale = group["rho"] / (norm + 1e-12)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self.state[p]["old_p"] = p.detach().clone()
                    p.add_(p.grad * scale)
            if zero_grad:
                self.zero_grad()

        @torch.no_grad()
        def second_step(self, zero_grad=False):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.copy_(self.state[p]["old_p"])
            self.base_optimizer.step()
            if zero_grad:
                self.zero_grad()

        def _grad_norm(self):
            norms = [p.grad.norm(p=2) for group in self.param_groups for p in group["params"] if p.grad is not None]
            return torch.norm(torch.stack(norms), p=2)

        def load_state_dict(self, state_dict):
            super().load_state_dict(state_dict)
            self.base_optimizer.param_groups = self.param_groups

    def fresh_training_state():
        model = nn.Sequential(nn.Linear(5, 10), nn.ReLU(), nn.Linear(10, 2)).double()
        optimizer = SAM(model.parameters(), optim.SGD, rho=0.1, lr=0.1, momentum=0.9)
        scheduler = optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.8)
        return model, optimizer, scheduler

    def train_epoch(model, optimizer, loader):
        losses = []
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.first_step(zero_grad=True)
            F.cross_entropy(model(x), y).backward()
            optimizer.second_step(zero_grad=True)
            losses.append(loss.detach())
        return losses

    loader = data.DataLoader(data.TensorDataset(torch.tensor(inputs), torch.tensor(labels)), batch_size=8)
    model, optimizer, scheduler = fresh_training_state()
    load_state(torch, model, state)
    losses = []
    for _epoch in range(2):
        losses += train_epoch(model, optimizer, loader)
        scheduler.step()
    checkpoint = {
        "model": model.state_dict(),
        "sam": optimizer.state_dict(),
        "base": optimizer.base_optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "epoch": 2,
    }
    torch.save(checkpoint, checkpoint_path)
    at_checkpoint = parameters_of(model)

    model, optimizer, scheduler = fresh_training_state()
    restored = torch.load(checkpoint_path)
    model.load_state_dict(restored["model"])
    optimizer.load_state_dict(restored["sam"])
    optimizer.base_optimizer.load_state_dict(restored["base"])
    scheduler.load_state_dict(restored["scheduler"])
    for _epoch in range(restored["epoch"], 4):
        losses += train_epoch(model, optimizer, loader)
        scheduler.step()
    return {
        "losses": torch.stack(losses),
        "at_checkpoint": at_checkpoint,
        "params": parameters_of(model),
        "momentum": [optimizer.base_optimizer.state[p]["momentum_buffer"] for p in model.parameters()],
        "lr": optimizer.param_groups[0]["lr"],
    }


@pytest.fixture
def two_blobs():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 24)
    inputs = rng.normal(size=(24, 5)) + np.where(labels[:, None] == 1, 1.0, -1.0)
    return rng, inputs, labels


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`")
def test_sam_with_checkpoint_matches_torch(two_blobs, tmp_path):
    rng, inputs, labels = two_blobs
    state = mlp_state(rng, [5, 10, 2])
    expected, _ = run_both(sam_program, state, inputs, labels, tmp_path / "checkpoint.pt")
    assert float(expected["losses"][-3:].mean()) < float(expected["losses"][:3].mean())
