"""Optimization programs of the kinds public libraries built on torch's autograd hold, each written once against
torch's API and run with torch and with batched_grad from the same seed in float64: pytorch-minimize's closures
(gradient with create_graph, Hessian-vector products by double backward, the dense Hessian from the prototype vmap
over the identity) driving BFGS with an in-place inverse-Hessian update, nonlinear CG with a strong-Wolfe line
search from torch.optim.lbfgs and a trust-region step that falls back on cholesky_ex's partial factor;
torch-optimizer's optimizers over torch.optim.Optimizer (a Shampoo preconditioner built on in-place transposes of
.data, a Lamb trust ratio, a Lookahead wrapper, a required learning rate); hessian-eigenthings' deflated power
iteration and Lanczos over HVPs of a model holding SyncBatchNorm; torch.optim.LBFGS with strong_wolfe."""

import pytest

from test_fresh_programs_dl2 import F64, _both


def _rosen(x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def _closure(m, fun):
    """f, gradient, Hessian-vector product and dense Hessian at x, as a minimizer's scalar-function wrapper."""
    internals = __import__(f"{m.__name__}._vmap_internals", fromlist=["_vmap"])

    def evaluate(x):
        x = x.detach().requires_grad_(True)
        with m.enable_grad():
            f = fun(x)
            (grad,) = m.autograd.grad(f, x, create_graph=True)

        def hessp(v):
            return m.autograd.grad(grad, x, v, retain_graph=True)[0]

        hess = internals._vmap(hessp)(m.eye(x.numel(), dtype=x.dtype))
        return f.detach(), grad.detach(), hessp, hess

    return evaluate


def quasi_newton_and_cg(m):
    """BFGS keeping the inverse Hessian updated in place through addr(out=) with a tensor step, and Fletcher-Reeves
    CG whose gradient norm is written with norm(out=), both stepping with torch's strong-Wolfe search."""
    lbfgs = __import__(f"{m.__name__}.optim.lbfgs", fromlist=["_strong_wolfe"])
    evaluate = _closure(m, _rosen)

    def along(x, t, d):
        f, g, _, _ = evaluate(x + t * d)
        return float(f), g

    out = []
    x = m.tensor([-1.2, 1.0, 0.5])
    f, g, _, _ = evaluate(x)
    H, eye = m.eye(3), m.eye(3)
    for _ in range(12):
        d = -(H @ g)
        f, g_next, t, _ = lbfgs._strong_wolfe(along, x, 1.0, d, float(f), g, g.dot(d))
        s, y = t * d, g_next - g
        rho = y.dot(s).reciprocal()
        R = m.addr(eye, s, y, alpha=-rho)
        m.addr(m.linalg.multi_dot((R, H, R.t())), s, s, alpha=rho, out=H)
        x, g = x + s, g_next
    out += [x, H]

    x = m.tensor([-1.2, 1.0, 0.5])
    f, g, _, _ = evaluate(x)
    d, norm = -g, m.empty(())
    for _ in range(10):
        f, g_next, t, _ = lbfgs._strong_wolfe(along, x, 1e-3, d, float(f), g, g.dot(d))
        x = x + t * d
        beta = g_next.dot(g_next) / g.dot(g)
        d, g = -g_next + beta * d, g_next
        m.norm(g, p=float("inf"), out=norm)
        out.append(norm.clone())
    return out + [x]


def newton_and_trust_region(m):
    """Newton steps from the dense Hessian (Cholesky where it is positive-definite), and the exact trust-region
    subproblem's damping search that reads cholesky_ex's partial factor where the shifted Hessian is not."""
    evaluate = _closure(m, _rosen)
    x, out = m.tensor([-1.2, 1.0, 0.5]), []
    for _ in range(4):
        f, g, hessp, hess = evaluate(x)
        out.append(hessp(m.ones(3)))
        L, info = m.linalg.cholesky_ex(hess)
        step = m.cholesky_solve(-g.unsqueeze(1), L).squeeze(1) if info == 0 else -g
        x = x + step
    for shift in (0.0, -60.0, -400.0):
        U, info = m.linalg.cholesky_ex(hess + shift * m.eye(3), upper=True)
        k = int(info)
        if k:  # the direction that makes the leading k x k block singular, from the failed pivot's row
            v = m.zeros(3)
            v[k - 1] = 1
            if k > 1:
                v[: k - 1] = m.linalg.solve_triangular(U[: k - 1, : k - 1], -U[: k - 1, k - 1 : k], upper=True)[:, 0]
            out += [U.diagonal()[k - 1], v]
        out.append(info)
    return out + [x, m.finfo(float).eps * m.ones(1)]


def torch_optimizer_style(m):
    """A Shampoo preconditioner (in-place transposes of .data, eye(out=), svd matrix powers), a Lamb trust ratio, a
    Lookahead wrapper over it and an optimizer whose lr is `required`, each a few closure steps on an MLP."""
    nn = m.nn
    required = __import__(f"{m.__name__}.optim.optimizer", fromlist=["required"]).required

    def matrix_power(matrix, power):
        u, s, v = m.svd(matrix)
        return u @ s.pow_(power).diag() @ v.t()

    class Shampoo(m.optim.Optimizer):
        def __init__(self, params, lr=required, epsilon=1e-4):
            super().__init__(params, dict(lr=lr, epsilon=epsilon))

        @m.no_grad()
        def step(self, closure=None):
            with m.enable_grad():
                loss = closure() if closure is not None else None
            for group in self.param_groups:
                for p in group["params"]:
                    grad, state = p.grad.data, self.state[p]
                    order, size = grad.ndimension(), grad.size()
                    if not state:
                        for i, dim in enumerate(size):
                            state[f"precond_{i}"] = group["epsilon"] * m.eye(dim, out=grad.new(dim, dim))
                    for i, dim in enumerate(grad.size()):
                        precond = state[f"precond_{i}"]
                        grad = grad.transpose_(0, i).contiguous()
                        transposed = grad.size()
                        grad = grad.view(dim, -1)
                        precond.add_(grad @ grad.t())
                        inverse = matrix_power(precond, -1 / order)
                        grad = (grad.t() @ inverse).view(size) if i == order - 1 else (inverse @ grad).view(transposed)
                    p.data.add_(grad, alpha=-group["lr"])
            return loss

    class Lamb(m.optim.Optimizer):
        def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-6):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

        @m.no_grad()
        def step(self, closure=None):
            with m.enable_grad():
                loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]
                    if not state:
                        state.update(step=0, exp_avg=m.zeros_like(p), exp_avg_sq=m.zeros_like(p))
                    state["step"] += 1
                    b1, b2 = group["betas"]
                    state["exp_avg"].mul_(b1).add_(p.grad, alpha=1 - b1)
                    state["exp_avg_sq"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                    update = state["exp_avg"] / state["exp_avg_sq"].sqrt().add(group["eps"])
                    weight_norm = p.data.pow(2).sum().sqrt().clamp(0, 10)
                    trust = 1 if weight_norm == 0 or update.norm() == 0 else weight_norm / update.norm()
                    p.data.add_(update, alpha=-group["lr"] * trust)
            return loss

    class Lookahead:
        def __init__(self, inner, k=3, alpha=0.5):
            self.inner, self.k, self.alpha, self.count = inner, k, alpha, 0
            self.slow = [[p.clone().detach() for p in g["params"]] for g in inner.param_groups]

        def step(self, closure):
            loss = self.inner.step(closure)
            self.count += 1
            if self.count % self.k == 0:
                for group, slow in zip(self.inner.param_groups, self.slow):
                    for p, q in zip(group["params"], slow):
                        q.add_(p.data - q, alpha=self.alpha)
                        p.data.copy_(q)
            return loss

    m.manual_seed(0)
    X, Y = m.randn(24, 4), m.randn(24, 2)
    out = []
    for make in (lambda ps: Shampoo(ps, lr=0.05), Lamb, lambda ps: Lookahead(Lamb(ps)), lambda ps: Shampoo(ps)):
        m.manual_seed(1)
        model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
        try:
            opt = make(model.parameters())
        except ValueError as error:  # the last one leaves its required lr out
            out.append(m.tensor(float(str(error).endswith("required optimization parameter lr"))))
            continue
        for _ in range(5):

            def closure():
                model.zero_grad()
                loss = nn.functional.mse_loss(model(X), Y)
                loss.backward()
                return loss

            out.append(opt.step(closure).detach())
        out += [p.detach() for p in model.parameters()]
    return out


def curvature_spectrum(m):
    """Deflated power iteration and a reorthogonalized Lanczos run on the loss Hessian of a model with
    SyncBatchNorm (converted from BatchNorm1d), each product a double backward over the parameters."""
    nn = m.nn
    m.manual_seed(0)
    model = nn.SyncBatchNorm.convert_sync_batchnorm(
        nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.Tanh(), nn.Linear(5, 2))
    )
    X, Y = m.randn(16, 3), m.randint(0, 2, (16,))
    params = list(model.parameters())
    loss = nn.functional.cross_entropy(model(X), Y)
    grads = m.autograd.grad(loss, params, create_graph=True)

    def hvp(v):
        pieces, start = [], 0
        for p in params:
            pieces.append(v[start : start + p.numel()].view_as(p))
            start += p.numel()
        return m.cat([h.reshape(-1) for h in m.autograd.grad(grads, params, pieces, retain_graph=True)])

    n = sum(p.numel() for p in params)
    found, vectors = [], []
    for _ in range(2):
        v = m.randn(n)
        for _ in range(30):
            w = hvp(v)
            for value, u in zip(found, vectors):
                w = w - value * u.dot(v) * u
            v = w / w.norm()
        found.append(v.dot(hvp(v)))
        vectors.append(v)
    basis, alphas, betas = [m.randn(n)], [], []
    basis[0] = basis[0] / basis[0].norm()
    for j in range(8):
        w = hvp(basis[j]) - (betas[-1] * basis[j - 1] if j else 0)
        alphas.append(w.dot(basis[j]))
        w = w - alphas[-1] * basis[j]
        for b in basis:
            w = w - w.dot(b) * b
        betas.append(w.norm())
        basis.append(w / betas[-1])
    T = m.diag(m.stack(alphas)) + m.diag(m.stack(betas[:-1]), 1) + m.diag(m.stack(betas[:-1]), -1)
    return [m.stack(found), m.linalg.eigvalsh(T), type(model[1]).__name__ == "SyncBatchNorm"]


def kfac_and_sophia(m):
    """K-FAC's Kronecker factors gathered by forward-pre and (module) backward hooks on a conv net, conv inputs
    unfolded into patches with in-place transposes, eigh-preconditioned gradients written back through .data and
    a momentum step in the deprecated add_(number, tensor) spelling; then a SophiaG-style step whose diagonal
    Hessian comes from labels sampled from the model's own softmax."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.Conv2d(3, 3, 3, stride=2), nn.Flatten())
    net.append(nn.Linear(12, 4))
    X, Y = m.randn(12, 2, 6, 6), m.randint(0, 4, (12,))
    factors, collect = {}, [False]

    def with_ones(a):
        return m.cat([a, a.new(a.size(0), 1).fill_(1)], 1)

    def save_input(module, inputs):
        a = inputs[0].data
        if isinstance(module, nn.Conv2d):
            a = F.pad(a, (module.padding[1],) * 2 + (module.padding[0],) * 2).data
            a = a.unfold(2, module.kernel_size[0], module.stride[0]).unfold(3, module.kernel_size[1], module.stride[1])
            a = a.transpose_(1, 2).transpose_(2, 3).contiguous()
            a = a.view(-1, a.size(3) * a.size(4) * a.size(5))
        a = with_ones(a)
        factors.setdefault(module, [0, 0])[0] = a.t() @ (a / a.size(0))

    def save_grad_output(module, grad_input, grad_output):
        if collect[0]:
            g = grad_output[0].data
            if g.dim() == 4:
                g = g.transpose(1, 2).transpose(2, 3).contiguous().view(-1, g.size(1))
            factors[module][1] = g.t() @ (g * g.size(0))

    layers = [layer for layer in net if isinstance(layer, (nn.Conv2d, nn.Linear))]
    for layer in layers:
        layer.register_forward_pre_hook(save_input)
        layer.register_backward_hook(save_grad_output)
    out, momentum = [], {}
    for _ in range(3):
        net.zero_grad()
        logits = net(X)
        sampled = m.multinomial(F.softmax(logits.data, 1), 1).squeeze()
        collect[0] = True
        F.cross_entropy(logits, sampled).backward(retain_graph=True)
        collect[0] = False
        net.zero_grad()
        loss = F.cross_entropy(logits, Y)
        loss.backward()
        for layer in layers:
            d_a, q_a = m.linalg.eigh(factors[layer][0])
            d_g, q_g = m.linalg.eigh(factors[layer][1])
            grad = m.cat([layer.weight.grad.data.view(layer.weight.size(0), -1), layer.bias.grad.data.view(-1, 1)], 1)
            v = q_g @ ((q_g.t() @ grad @ q_a) / (d_g.unsqueeze(1) * d_a.unsqueeze(0) + 1e-3)) @ q_a.t()
            layer.weight.grad.data.copy_(v[:, :-1].reshape(layer.weight.shape))
            layer.bias.grad.data.copy_(v[:, -1])
        for p in net.parameters():
            buf = momentum.setdefault(p, m.zeros_like(p.data))
            buf.mul_(0.9).add_(1, p.grad.data)
            p.data.add_(-0.05, buf)
        out.append(loss.detach())

    hessian = {p: m.zeros_like(p) for p in net.parameters()}
    exp_avg = {p: m.zeros_like(p) for p in net.parameters()}
    for step in range(4):
        net.zero_grad()
        F.cross_entropy(net(X), Y).backward()
        with m.no_grad():
            for p in net.parameters():
                p.mul_(1 - 1e-3)
                exp_avg[p].mul_(0.965).add_(p.grad, alpha=0.035)
                ratio = (exp_avg[p].abs() / (hessian[p] + 1e-15)).clamp(None, 0.05)
                p.addcmul_(exp_avg[p].sign(), ratio, value=-2e-2)
        if step % 2 == 1:
            net.zero_grad()
            logits = net(X)
            F.cross_entropy(logits, m.distributions.Categorical(logits=logits).sample()).backward()
            with m.no_grad():
                for p in net.parameters():
                    hessian[p].mul_(0.99).addcmul_(p.grad, p.grad, value=0.01)
    return out + [p.detach() for p in net.parameters()] + [h for h in hessian.values()]


def lbfgs_logistic_regression(m):
    """torch.optim.LBFGS with strong_wolfe fitting an L2-regularized logistic regression in one step call."""
    m.manual_seed(0)
    X = m.randn(50, 4)
    y = (X @ m.tensor([1.0, -2.0, 0.5, 0.0]) > 0).to(X.dtype)
    w = m.zeros(4, requires_grad=True)
    opt = m.optim.LBFGS([w], lr=1, max_iter=40, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = m.nn.functional.binary_cross_entropy_with_logits(X @ w, y) + 1e-2 * w.square().sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    return [loss.detach(), w.detach(), opt.state[w]["func_evals"], opt.state[w]["n_iter"]]


# each takes 3-15 s (first compilations of many small programs)
PROGRAMS = [
    pytest.param(program, marks=pytest.mark.slow, id=program.__name__)
    for program in (
        quasi_newton_and_cg,
        newton_and_trust_region,
        torch_optimizer_style,
        curvature_spectrum,
        kfac_and_sophia,
    )
]


def _float64(program):
    def run(m):
        m.set_default_dtype(m.float64)
        try:
            return program(m)
        finally:
            m.set_default_dtype(m.float32)

    return run


@pytest.mark.parametrize("program", PROGRAMS)
def test_program(program):
    _both(_float64(program), F64)


def test_lbfgs_logistic_regression():
    _both(_float64(lbfgs_logistic_regression), dict(rtol=1e-7, atol=1e-9))
