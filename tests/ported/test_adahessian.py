"""AdaHessian (Yao et al., 2021): an Adam-like optimizer whose second moment is a running average of squared
Hutchinson estimates of the Hessian diagonal, z * (H z) with Rademacher z, from a double backward through the
gradients. Ported as a torch.optim.Optimizer subclass training a small MLP regressor from a DataLoader, with a
StepLR schedule; the Rademacher probes come from a fixed NumPy array so that both runs draw the same ones."""

import math

import numpy as np
import pytest

from ._harness import load_state, mlp_state, parameters_of, run_both


def adahessian_program(torch, nn, F, optim, data, state, inputs, targets, probes):
    class AdaHessian(optim.Optimizer):
        def __init__(self, params, lr=0.1, betas=(0.9, 0.999), eps=1e-4, weight_decay=0.0, hessian_power=1.0):
            defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, hessian_power=hessian_power)
            super().__init__(params, defaults)
            self.probe_draws = 0

        def _params(self):
            return [p for group in self.param_groups for p in group["params"] if p.grad is not None]

        def hessian_diagonal(self, params, probe_arrays):
            # Hutchinson: E[z * Hz] is diag(H) for Rademacher z; Hz is the VJP of the gradients with z.
            zs = [torch.tensor(a, dtype=p.dtype) for a, p in zip(probe_arrays, params)]
            grads = [p.grad for p in params]
            hzs = torch.autograd.grad(grads, params, grad_outputs=zs, retain_graph=True)
            return [(hz * z).abs() for hz, z in zip(hzs, zs)]

        def step(self, probe_arrays):
            params = self._params()
            diagonals = self.hessian_diagonal(params, probe_arrays)
            with torch.no_grad():
                for p, diagonal in zip(params, diagonals):
                    self._update(p, diagonal)

        def _group_of(self, p):
            return next(g for g in self.param_groups if any(q is p for q in g["params"]))

        def _update(self, p, diagonal):
            group = self._group_of(p)
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p)
                state["exp_hessian_diag_sq"] = torch.zeros_like(p)
            beta1, beta2 = group["betas"]
            state["step"] += 1
            state["exp_avg"].mul_(beta1).add_(p.grad.detach(), alpha=1 - beta1)
            state["exp_hessian_diag_sq"].mul_(beta2).addcmul_(diagonal, diagonal, value=1 - beta2)
            correction1 = 1 - beta1 ** state["step"]
            correction2 = 1 - beta2 ** state["step"]
            k = group["hessian_power"]
            denom = (state["exp_hessian_diag_sq"].sqrt() ** k) / math.sqrt(correction2) ** k + group["eps"]
            p.sub_(group["lr"] * (state["exp_avg"] / correction1 / denom + group["weight_decay"] * p))

    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)).double()
    load_state(torch, model, state)
    loader = data.DataLoader(data.TensorDataset(torch.tensor(inputs), torch.tensor(targets)), batch_size=8)
    optimizer = AdaHessian(model.parameters(), lr=0.05, weight_decay=1e-3)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    losses, lrs, step = [], [], 0
    for _epoch in range(4):
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward(create_graph=True)
            optimizer.step(probes[step])
            step += 1
            losses.append(loss.detach())
        scheduler.step()
        lrs.append(scheduler.get_last_lr()[0])
    second_moments = [optimizer.state[p]["exp_hessian_diag_sq"].clone() for p in model.parameters()]
    return {
        "losses": torch.stack(losses),
        "lrs": torch.tensor(lrs),
        "params": parameters_of(model),
        "second_moments": second_moments,
    }


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_adahessian_trains_an_mlp_like_torch():
    rng = np.random.default_rng(0)
    state = mlp_state(rng, [3, 8, 1])
    inputs = rng.normal(size=(24, 3))
    targets = np.sin(inputs.sum(axis=1, keepdims=True))
    shapes = [value.shape for value in state.values()]
    probes = [[rng.choice([-1.0, 1.0], size=shape) for shape in shapes] for _ in range(12)]
    expected, _ = run_both(adahessian_program, state, inputs, targets, probes)
    assert float(expected["losses"][-1]) < float(expected["losses"][0])
