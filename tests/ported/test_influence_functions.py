"""Influence functions (Koh and Liang, 2017): train an L2-regularised logistic regression with a small hidden layer,
then solve H s = grad of the test loss by conjugate gradient (as many steps as there are parameters), where every
Hessian-vector product of the training loss comes from torch.autograd.functional.hvp over the flattened parameters,
and score each training point by -grad_test^T H^-1 grad_train_i, with the per-sample training gradients from a
Python loop and, to cross-check, from torch.func.vmap over grad. Weights and data come from NumPy."""

import numpy as np

from ._harness import load_state, mlp_state, run_both


def influence_program(torch, nn, F, optim, data, state, inputs, labels, test_point):
    from_func = torch.func
    model = load_state(torch, nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1)).double(), state)
    names = [name for name, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    sizes = [p.numel() for p in model.parameters()]
    x_train, y_train = torch.tensor(inputs), torch.tensor(labels)
    x_test, y_test = (torch.tensor(v) for v in test_point)
    decay = 0.1

    def unflatten(flat):
        return {n: t.reshape(s) for n, t, s in zip(names, flat.split(sizes), shapes)}

    def loss_at(flat, x, y):
        logits = from_func.functional_call(model, unflatten(flat), (x,)).squeeze(-1)
        return F.binary_cross_entropy_with_logits(logits, y) + decay / 2 * (flat**2).sum()

    optimizer = optim.SGD(model.parameters(), lr=0.5, momentum=0.5)
    loader = data.DataLoader(data.TensorDataset(x_train, y_train), batch_size=6)
    losses = []
    for _epoch in range(3):
        for x, y in loader:
            optimizer.zero_grad()
            flat = torch.cat([p.flatten() for p in model.parameters()])
            loss = loss_at(flat, x, y)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())

    trained = torch.cat([p.detach().flatten() for p in model.parameters()])
    train_loss = lambda flat: loss_at(flat, x_train, y_train)  # noqa: E731

    def hessian_vector_product(v):
        return torch.autograd.functional.hvp(train_loss, trained, v)[1]

    def conjugate_gradient(b, steps):
        x, r, p = torch.zeros_like(b), b.clone(), b.clone()
        rr = r @ r
        for _step in range(steps):
            hp = hessian_vector_product(p)
            alpha = rr / (p @ hp)
            x, r = x + alpha * p, r - alpha * hp
            rr_next = r @ r
            p, rr = r + (rr_next / rr) * p, rr_next
        return x

    test_grad = torch.func.grad(loss_at)(trained, x_test.unsqueeze(0), y_test.unsqueeze(0))
    inverse_hvp = conjugate_gradient(test_grad, steps=16)
    residual = hessian_vector_product(inverse_hvp) - test_grad

    looped = []
    for x, y in zip(x_train, y_train):
        point = trained.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(loss_at(point, x.unsqueeze(0), y.unsqueeze(0)), point)
        looped.append(g)
    looped = torch.stack(looped)
    sample_loss = lambda flat, x, y: loss_at(flat, x.unsqueeze(0), y.unsqueeze(0))  # noqa: E731
    vmapped = from_func.vmap(from_func.grad(sample_loss), in_dims=(None, 0, 0))(trained, x_train, y_train)
    return {
        "losses": torch.stack(losses),
        "inverse_hvp": inverse_hvp,
        "cg_residual_norm": residual.norm(),
        "influence_looped": -(looped @ inverse_hvp),
        "influence_vmapped": -(vmapped @ inverse_hvp),
        "loop_minus_vmap": (looped - vmapped).abs().max(),
    }


def test_influence_functions_match_torch():
    rng = np.random.default_rng(11)
    state = mlp_state(rng, [3, 3, 1])
    inputs = rng.normal(size=(12, 3))
    labels = (inputs @ np.array([1.0, -2.0, 0.5]) + 0.3 * rng.normal(size=12) > 0).astype(np.float64)
    test_point = (rng.normal(size=3), np.float64(1.0))
    expected, _ = run_both(influence_program, state, inputs, labels, test_point)
    assert float(expected["cg_residual_norm"]) < 1e-6
    assert float(expected["loop_minus_vmap"]) < 1e-12
