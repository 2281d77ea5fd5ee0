"""Differentially private SGD (Abadi et al., 2016): per-sample gradients by torch.func.vmap over grad of a
functional_call, each sample's gradient clipped to an L2 norm bound across all parameters, the clipped gradients
summed, Gaussian noise (read from a NumPy array instead of drawn) scaled by the noise multiplier times the bound
added, the sum averaged over the batch, written into .grad and applied by SGD. Weights, data and noise come from
NumPy."""

import numpy as np

from ._harness import load_state, mlp_state, parameters_of, run_both


def dp_sgd_program(torch, nn, F, optim, data, state, inputs, labels, noise):
    from_func = torch.func
    model = load_state(torch, nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3)).double(), state)
    optimizer = optim.SGD(model.parameters(), lr=0.5)
    loader = data.DataLoader(data.TensorDataset(torch.tensor(inputs), torch.tensor(labels)), batch_size=8)
    clip_bound, noise_multiplier = 1.0, 0.8

    def sample_loss(params, buffers, x, y):
        logits = from_func.functional_call(model, (params, buffers), (x.unsqueeze(0),))
        return F.cross_entropy(logits, y.unsqueeze(0))

    per_sample_grads = from_func.vmap(from_func.grad(sample_loss), in_dims=(None, None, 0, 0))

    def clipped_sum(grads):
        flat = torch.cat([g.flatten(start_dim=1) for g in grads.values()], dim=1)
        norms = flat.norm(dim=1)
        factors = (clip_bound / (norms + 1e-6)).clamp(max=1.0)
        clipped = {name: torch.einsum("i,i...->...", factors, g) for name, g in grads.items()}
        return clipped, norms

    step_losses, sample_norms = [], []
    for step, (x, y) in enumerate(loader):
        params = {name: p.detach() for name, p in model.named_parameters()}
        buffers = {name: b.detach() for name, b in model.named_buffers()}
        grads = per_sample_grads(params, buffers, x, y)
        summed, norms = clipped_sum(grads)
        offset = 0
        for name, p in model.named_parameters():
            count = p.numel()
            step_noise = torch.tensor(noise[step, offset : offset + count]).reshape(p.shape)
            p.grad = (summed[name] + noise_multiplier * clip_bound * step_noise) / x.shape[0]
            offset += count
        optimizer.step()
        with torch.no_grad():
            step_losses.append(F.cross_entropy(model(x), y))
        sample_norms.append(norms)
    return {
        "losses": torch.stack(step_losses),
        "per_sample_norms": torch.cat(sample_norms),
        "params": parameters_of(model),
    }


def test_dp_sgd_matches_torch():
    rng = np.random.default_rng(10)
    state = mlp_state(rng, [5, 8, 3])
    inputs = rng.normal(size=(32, 5))
    labels = (inputs[:, 0] + inputs[:, 1] > 0).astype(np.int64) + (inputs[:, 2] > 1).astype(np.int64)
    parameter_count = sum(value.size for value in state.values())
    noise = rng.normal(size=(4, parameter_count))
    expected, _ = run_both(dp_sgd_program, state, inputs, labels, noise)
    assert float(expected["per_sample_norms"].max()) > 1.0
