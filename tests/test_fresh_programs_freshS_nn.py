"""torch.nn.utils and uncertainty programs of the kinds public code holds, run with torch and with batched_grad from
the same seed in float64 and compared number for number: pruning (random/L1/Ln-structured/global pruning, a custom
BasePruningMethod, the weight_orig/weight_mask reparametrization and its pre-hook, fine-tuning, prune.remove),
parametrizations (a weight-standardization module, spectral_norm, orthogonal and weight_norm of the new API,
cached(), right_inverse, stacked parametrizations, remove_parametrizations), model surgery with hooks (activation
capture, full backward hooks, gradient-flow numbers, pre-hooks, kwargs hooks, truncated feature extractors), deep
ensembles vmapped over stack_module_state (Rprop on the stacked leaves, grad of predictive entropy w.r.t. inputs,
pytree in_dims), SWAG's running moments and low-rank samples with bn_update, and MC dropout."""

import copy

import numpy as np
import pytest
import torch.nn.utils.prune  # noqa: F401  (torch loads the module on import only)

from test_fresh_programs_dl2 import F64, _both


def _small_cnn(m):
    nn, F = m.nn, m.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = nn.Conv2d(1, 4, 3), nn.Conv2d(4, 6, 3)
            self.fc1, self.fc2 = nn.Linear(6 * 4, 8), nn.Linear(8, 3)

        def forward(self, x):
            x = F.relu(self.conv2(F.max_pool2d(F.relu(self.conv1(x)), 2)))
            return self.fc2(F.relu(self.fc1(x.view(-1, int(x.nelement() / x.shape[0])))))

    return Net().double()


def pruning(m):
    nn, F, prune = m.nn, m.nn.functional, m.nn.utils.prune

    class EveryOther(prune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t, default_mask):
            mask = default_mask.clone()
            mask.view(-1)[::2] = 0
            return mask

    m.manual_seed(0)
    model = _small_cnn(m)
    x, y = m.randn(8, 1, 10, 10, dtype=m.float64), m.randint(0, 3, (8,))
    prune.random_unstructured(model.conv1, name="weight", amount=0.3)
    prune.l1_unstructured(model.conv1, name="bias", amount=2)
    prune.ln_structured(model.conv1, name="weight", amount=0.5, n=2, dim=0)
    EveryOther.apply(model.fc2, "bias")
    hooks = list(model.conv1._forward_pre_hooks.values())
    weight_hook = next(h for h in hooks if h._tensor_name == "weight")
    out = [model.conv1.weight_mask, model.conv1.bias_mask, model.fc2.bias_mask, len(hooks), len(list(weight_hook))]
    opt = m.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    targets = [(module, "weight") for module in model.modules() if isinstance(module, (nn.Conv2d, nn.Linear))]
    for _ in range(2):
        prune.global_unstructured(targets, pruning_method=prune.L1Unstructured, amount=0.2)
        for module in model.modules():
            if isinstance(module, nn.Conv2d):
                prune.ln_structured(module, name="weight", amount=0.1, n=2, dim=0)
        for _ in range(2):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        zeros = sum(float(m.sum(getattr(mod, name) == 0)) for mod, name in targets)
        out += [loss.detach(), zeros, model.fc1.weight_orig.grad * (1 - model.fc1.weight_mask)]
    out.append(len(model.state_dict()))
    for module, name in targets:
        prune.remove(module, name)
    prune.remove(model.conv1, "bias")
    out += [len(list(model.buffers())), model(x[:2]), prune.is_pruned(model)]
    return out


@pytest.mark.slow
def test_pruning():
    _both(pruning, F64)


def parametrizations(m):
    nn, F, P = m.nn, m.nn.functional, m.nn.utils.parametrize
    from_api = m.nn.utils.parametrizations

    class Standardization(nn.Module):
        def forward(self, weight):
            dims = tuple(range(1, weight.ndim))
            return (weight - weight.mean(dim=dims, keepdim=True)) / (weight.std(dim=dims, keepdim=True) + 1e-5)

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    m.manual_seed(5)
    x, y = m.randn(6, 1, 6, 6, dtype=m.float64), m.randint(0, 3, (6,))
    out = []
    for kind in ("standardize", "spectral", "orthogonal"):
        m.manual_seed(0)
        net = nn.Sequential(
            nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3),
        ).double()  # fmt: skip
        if kind == "standardize":
            P.register_parametrization(net[0], "weight", Standardization())
        elif kind == "spectral":
            from_api.spectral_norm(net[0], "weight", n_power_iterations=2)
        else:
            from_api.orthogonal(net[0], "weight", orthogonal_map="householder")
        from_api.orthogonal(net[4], "weight")
        from_api.weight_norm(net[6], "weight", dim=0)
        opt = m.optim.Adam(net.parameters(), lr=1e-2)
        for _ in range(2):
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            out.append(loss.detach())
        net.eval()
        with P.cached():
            out += [net(x), net[4].weight is net[4].weight]
        out += [net[4].weight.T @ net[4].weight, net[6].parametrizations.weight.original0, len(net.state_dict())]
        P.remove_parametrizations(net[0], "weight", leave_parametrized=True)
        out += [net[0].weight, P.is_parametrized(net[0]), P.is_parametrized(net[4], "bias")]

    layer = nn.Linear(3, 3).double()
    P.register_parametrization(layer, "weight", Symmetric())
    A = m.randn(3, 3, dtype=m.float64)
    layer.weight = A + A.T
    P.register_parametrization(layer, "weight", Standardization())
    opt = m.optim.SGD(layer.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        layer(m.randn(4, 3, dtype=m.float64)).pow(2).sum().backward()
        opt.step()
    out += [layer.weight, layer.parametrizations.weight.original]
    P.remove_parametrizations(layer, "weight", leave_parametrized=False)
    return out + [layer.weight]


@pytest.mark.slow
def test_parametrizations():
    _both(parametrizations, F64)


def hooks_and_surgery(m):
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(2),
        nn.Flatten(), nn.Linear(16, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 3),
    ).double()  # fmt: skip
    x, y = m.randn(5, 2, 6, 6, dtype=m.float64), m.randint(0, 3, (5,))
    captured, stats, grads = {}, {}, {}

    def capture(name):
        def hook(module, inputs, output):
            captured[name] = output.detach()
            stats[name] = (output.mean().item(), output.std().item(), (output <= 0).float().mean().item())

        return hook

    def gradient(name):
        def hook(module, grad_input, grad_output):
            grads[name] = [g.norm().item() for g in grad_input if g is not None] + [grad_output[0].norm().item()]

        return hook

    handles = []
    for name, module in model.named_modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            handles += [module.register_forward_hook(capture(name)), module.register_full_backward_hook(gradient(name))]
    handles.append(model[5].register_forward_pre_hook(lambda module, args: (args[0] * 0.5,)))
    opt = m.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    out = []
    for _ in range(2):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        flow = [
            (p.grad.abs().mean().cpu(), p.grad.abs().max().item())
            for n, p in model.named_parameters()
            if "bias" not in n
        ]
        out += [loss.detach(), np.array([f[0] for f in flow]), [f[1] for f in flow], captured["0"]]
        out += [value for _, value in sorted(stats.items())] + [value for _, value in sorted(grads.items())]
        opt.step()
    for handle in handles:
        handle.remove()
    model.eval()
    with m.no_grad():
        out.append(nn.Sequential(*list(model.children())[:4])(x))
    model[-1] = nn.Linear(8, 2).double()
    model[2] = nn.LeakyReLU(0.1)
    for p in model[:2].parameters():
        p.requires_grad_(False)
    seen = []
    model[5].register_forward_hook(lambda mod, args, kwargs, output: seen.append(len(kwargs)), with_kwargs=True)
    model.train()
    opt = m.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(2):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y % 2)
        loss.backward()
        opt.step()
        out += [loss.detach(), model[-1].weight.grad]
    return out + [seen, model[1].running_mean]


def test_hooks_and_surgery():
    _both(hooks_and_surgery, F64)


def vmapped_ensembles(m):
    nn, F = m.nn, m.nn.functional
    func, pytree = m.func, m.utils._pytree

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.hid, self.dec, self.act = (
                nn.Linear(2, 6),
                nn.ModuleList([nn.Linear(6, 6)]),
                nn.Linear(6, 2),
                nn.Mish(),
            )

        def forward(self, X):
            Z = self.enc(X)
            for linear in self.hid:
                Z = self.act(linear(Z)) + Z
            return self.dec(Z)

    m.manual_seed(0)
    members = [MLP().double() for _ in range(3)]
    base = copy.deepcopy(members[0]).to(device="meta")
    params, buffers = func.stack_module_state(members)

    def forward(X):
        return func.vmap(lambda p, b, x: func.functional_call(base, (p, b), (x,)), in_dims=(0, 0, None))(
            params, buffers, X
        )

    def entropy(X):
        p, _ = F.softmax(forward(X), dim=2).mean(dim=0).max(dim=1)
        return -(m.nan_to_num(p * m.log(p)) + m.nan_to_num((1 - p) * m.log(1 - p)))

    X = m.rand(10, 2, dtype=m.float64) * 2 - 1
    Y = F.one_hot(((X**2).sum(1) < 0.5).long(), 2).double()
    opt = m.optim.Rprop(params.values(), lr=0.01)
    out = [base.enc.weight.device.type == "meta"]
    for _ in range(2):
        opt.zero_grad()
        loss = func.vmap(lambda pred: F.cross_entropy(input=pred, target=Y))(forward(X)).mean()
        loss.backward()
        opt.step()
        step = m.sign(func.grad(lambda X: entropy(X).mean())(X.detach().requires_grad_(True)))
        moved = X + 0.1 * step
        inside = m.bitwise_and(input=(X.min(0).values < moved), other=(moved < X.max(0).values))
        out += [loss.detach(), m.where(condition=inside, input=moved, other=X), entropy(moved).detach()]

    modules = [
        nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 1)).double().eval() for _ in range(3)
    ]
    stacked_params, stacked_buffers = func.stack_module_state(modules)
    leaves, p_spec = pytree.tree_flatten(stacked_params)
    holder = nn.ParameterList([nn.Parameter(p) for p in leaves])
    b_leaves, b_spec = pytree.tree_flatten(stacked_buffers)
    dims = (pytree.tree_map(lambda _: 0, stacked_params), pytree.tree_map(lambda _: 0, stacked_buffers), None)

    def ensemble(x):
        call = lambda p, b, x: func.functional_call(modules[0], (p, b), x)  # noqa: E731
        trees = pytree.tree_unflatten(list(holder), p_spec), pytree.tree_unflatten(b_leaves, b_spec)
        return func.vmap(call, in_dims=dims, out_dims=0)(*trees, x).permute(1, 0, 2)

    x, y = m.randn(5, 4, dtype=m.float64), m.randn(5, 1, 1, dtype=m.float64)
    out.append(ensemble(x) - m.stack([mod(x) for mod in modules], 1))
    opt = m.optim.Adam(holder.parameters(), lr=1e-2)
    for _ in range(2):
        opt.zero_grad()
        loss = ((ensemble(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        out += [loss.detach(), holder[0].grad]
    return out


@pytest.mark.slow
def test_vmapped_ensembles():
    _both(vmapped_ensembles, F64)


def swag_and_mc_dropout(m):
    """SWAG: the posterior module pops each parameter of its own copy of the net into mean, square-mean and
    deviation buffers, collects running moments from the trained net, draws full-rank samples (diagonal plus
    low-rank covariance, flattened and unflattened), refreshes batch-norm statistics with cumulative momenta and
    reloads its state dict; then MC dropout averages softmax predictions with dropout left on."""
    nn, F = m.nn, m.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.bn, self.drop, self.fc2 = (
                nn.Linear(5, 8),
                nn.BatchNorm1d(8),
                nn.Dropout(0.3),
                nn.Linear(8, 3),
            )

        def forward(self, x):
            return self.fc2(self.drop(F.relu(self.bn(self.fc1(x)))))

    def is_bn(module):
        return issubclass(module.__class__, m.nn.modules.batchnorm._BatchNorm)

    class SWAG(nn.Module):
        def __init__(self, rank):
            super().__init__()
            self.register_buffer("n_models", m.zeros([1], dtype=m.long))
            self.params, self.rank, self.base = [], rank, Net().double()
            self.base.apply(self.swag_parameters)

        def swag_parameters(self, module):
            for name in list(module._parameters.keys()):
                data = module._parameters.pop(name).data
                module.register_buffer(f"{name}_mean", data.new(data.size()).zero_())
                module.register_buffer(f"{name}_sq_mean", data.new(data.size()).zero_())
                module.register_buffer(f"{name}_cov_mat_sqrt", data.new_empty((0, data.numel())).zero_())
                self.params.append((module, name))

        def forward(self, x):
            return self.base(x)

        def collect_model(self, model):
            n = self.n_models.item()
            for (module, name), param in zip(self.params, model.parameters()):
                mean = getattr(module, f"{name}_mean") * n / (n + 1.0) + param.data / (n + 1.0)
                sq_mean = getattr(module, f"{name}_sq_mean") * n / (n + 1.0) + param.data**2 / (n + 1.0)
                dev = (param.data - mean).view(-1, 1)
                cov = m.cat((getattr(module, f"{name}_cov_mat_sqrt"), dev.t()), dim=0)
                module.__setattr__(f"{name}_cov_mat_sqrt", cov[1:, :] if n + 1 > self.rank else cov)
                module.__setattr__(f"{name}_mean", mean)
                module.__setattr__(f"{name}_sq_mean", sq_mean)
            self.n_models.add_(1)

        def sample(self, scale, seed):
            m.manual_seed(seed)
            means = [getattr(mod, f"{name}_mean") for mod, name in self.params]
            mean = m.cat([t.contiguous().view(-1, 1) for t in means]).view(-1)
            sq_mean = m.cat([getattr(mod, f"{name}_sq_mean").view(-1, 1) for mod, name in self.params]).view(-1)
            cov = m.cat([getattr(mod, f"{name}_cov_mat_sqrt") for mod, name in self.params], dim=1)
            var_sample = m.clamp(sq_mean - mean**2, 1e-30).sqrt() * m.randn_like(mean, requires_grad=False)
            cov_sample = cov.t().matmul(cov.new_empty((cov.size(0),), requires_grad=False).normal_())
            cov_sample /= (self.rank - 1) ** 0.5
            sample = (mean + scale**0.5 * (var_sample + cov_sample)).unsqueeze(0)
            start = 0
            for (module, name), like in zip(self.params, means):
                module.__setattr__(name, sample[:, start : start + like.numel()].view(like.shape))
                start += like.numel()

    def bn_update(loader, model):
        model.train()
        momenta = {}
        for module in model.modules():
            if is_bn(module):
                module.running_mean = m.zeros_like(module.running_mean)
                module.running_var = m.ones_like(module.running_var)
                momenta[module] = module.momentum
        seen = 0
        for inputs, _ in loader:
            for module in momenta:
                module.momentum = inputs.size(0) / (seen + inputs.size(0))
            model(inputs)
            seen += inputs.size(0)
        for module, momentum in momenta.items():
            module.momentum = momentum

    m.manual_seed(0)
    X, Y = m.randn(24, 5, dtype=m.float64), m.randint(0, 3, (24,))
    loader = m.utils.data.DataLoader(m.utils.data.TensorDataset(X, Y), batch_size=8, shuffle=True)
    model, swag = Net().double(), SWAG(rank=2)
    out = [len(list(swag.parameters())), len(list(swag.buffers()))]
    opt = m.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    for epoch in range(3):
        model.train()
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if epoch >= 1:
            swag.collect_model(model)
        out.append(loss.detach())
    out += [swag.base.fc1.weight_mean, swag.base.fc1.weight_cov_mat_sqrt, swag.n_models]
    for seed in range(2):
        swag.sample(0.5, seed)
        bn_update(loader, swag)
        swag.eval()
        with m.no_grad():
            out += [F.softmax(swag(X[:6]), dim=1), swag.base.bn.running_var]
    clone = SWAG(rank=2)
    for module, name in clone.params:
        module.__setattr__(f"{name}_cov_mat_sqrt", m.zeros(2, getattr(module, f"{name}_mean").numel()))
    clone.load_state_dict(swag.state_dict())
    out.append(clone.base.fc2.weight_cov_mat_sqrt)

    model.eval()
    model.apply(lambda module: module.train() if type(module) is m.nn.modules.dropout.Dropout else None)
    total = np.zeros((6, 3))
    with m.no_grad():
        for i in range(3):
            m.manual_seed(100 + i)
            probs = F.softmax(model(X[:6]), dim=1).cpu().data.numpy()
            total += probs
            out.append(F.nll_loss(m.tensor(total / (i + 1)).log(), Y[:6]))
    return out


@pytest.mark.slow
def test_swag_and_mc_dropout():
    _both(swag_and_mc_dropout, F64)
