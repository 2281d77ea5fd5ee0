"""Implicit MAML (Rajeswaran et al., 2019) on sine-regression tasks: each task adapts a copy of the meta-parameters
by gradient steps on its training loss plus a proximal term, then the implicit meta-gradient solves
(I + H / lambda) v = grad of the test loss by conjugate gradient, where each Hessian-vector product H v is
autograd.grad of the training gradients (taken with create_graph=True) with grad_outputs=v. The meta-gradients are
written into .grad and an Adam meta-optimizer steps. Tasks and weights come from NumPy."""

import numpy as np

from ._harness import load_state, mlp_state, parameters_of, run_both


def imaml_program(torch, nn, F, optim, data, state, tasks):
    from_func = torch.func
    model = load_state(torch, nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1)).double(), state)
    meta_optimizer = optim.Adam(model.parameters(), lr=1e-2)
    proximal, inner_lr, inner_steps, cg_steps = 2.0, 0.1, 3, 5

    def loss_of(params, x, y):
        return F.mse_loss(from_func.functional_call(model, params, (x,)), y)

    def adapt(meta, x, y):
        fast = {name: p.detach().clone().requires_grad_(True) for name, p in meta.items()}
        for _step in range(inner_steps):
            loss = loss_of(fast, x, y) + proximal / 2 * sum(((fast[n] - meta[n]) ** 2).sum() for n in fast)
            grads = torch.autograd.grad(loss, list(fast.values()))
            fast = {n: (p - inner_lr * g).detach().requires_grad_(True) for (n, p), g in zip(fast.items(), grads)}
        return fast

    def conjugate_gradient(hvp, b):
        x = [torch.zeros_like(t) for t in b]
        r = [t.clone() for t in b]
        p = [t.clone() for t in b]
        rr = sum((t * t).sum() for t in r)
        for _step in range(cg_steps):
            hp = hvp(p)
            alpha = rr / sum((u * v).sum() for u, v in zip(p, hp))
            x = [u + alpha * v for u, v in zip(x, p)]
            r = [u - alpha * v for u, v in zip(r, hp)]
            rr_next = sum((t * t).sum() for t in r)
            p = [u + (rr_next / rr) * v for u, v in zip(r, p)]
            rr = rr_next
        return x

    def implicit_meta_gradient(fast, x_train, y_train, x_test, y_test):
        params = list(fast.values())
        train_grads = torch.autograd.grad(loss_of(fast, x_train, y_train), params, create_graph=True)
        test_grads = torch.autograd.grad(loss_of(fast, x_test, y_test), params)

        def damped_hvp(v):
            hv = torch.autograd.grad(train_grads, params, grad_outputs=v, retain_graph=True)
            return [u + w / proximal for u, w in zip(v, hv)]

        return conjugate_gradient(damped_hvp, list(test_grads)), test_grads

    meta_losses, residual_norms = [], []
    for _meta_step in range(2):
        meta = dict(model.named_parameters())
        totals = [torch.zeros_like(p) for p in model.parameters()]
        for x_train, y_train, x_test, y_test in tasks:
            x_train, y_train, x_test, y_test = (torch.tensor(a) for a in (x_train, y_train, x_test, y_test))
            fast = adapt(meta, x_train, y_train)
            meta_grad, test_grads = implicit_meta_gradient(fast, x_train, y_train, x_test, y_test)
            totals = [t + g / len(tasks) for t, g in zip(totals, meta_grad)]
            meta_losses.append(loss_of(fast, x_test, y_test).detach())
            residual_norms.append(torch.stack([(g - t).norm() for g, t in zip(meta_grad, test_grads)]))
        meta_optimizer.zero_grad()
        for p, g in zip(model.parameters(), totals):
            p.grad = g
        meta_optimizer.step()
    return {
        "meta_losses": torch.stack(meta_losses),
        "meta_grad_minus_test_grad": torch.stack(residual_norms),
        "params": parameters_of(model),
    }


def sine_task(rng, shots=10):
    amplitude, phase = rng.uniform(0.5, 2.0), rng.uniform(0, np.pi)
    x = rng.uniform(-3, 3, (2 * shots, 1))
    y = amplitude * np.sin(x + phase)
    return x[:shots], y[:shots], x[shots:], y[shots:]


def test_imaml_conjugate_gradient_matches_torch():
    rng = np.random.default_rng(6)
    state = mlp_state(rng, [1, 16, 1])
    tasks = [sine_task(rng) for _ in range(2)]
    run_both(imaml_program, state, tasks)
