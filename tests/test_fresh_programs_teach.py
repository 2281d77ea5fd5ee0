"""Programs from the "from scratch" and "concise" sections of Dive into Deep Learning (d2l.ai, PyTorch tab), as
its readers copy them, run with torch and with batched_grad from the same seed in float64 and compared number for
number: linear and softmax regression and weight decay, dropout and the CNN chapter's blocks (a kernel learnt by
hand, LeNet with lazy layers, NiN, residual and dense blocks, batch norm written out), the optimizers of the
optimization chapter written by hand, the computational-performance chapter's CPU parts and the builders' guide
(the sequence chapters are in test_fresh_programs_teach_seq.py). The `d2l` package's few helpers are written here;
data is synthetic."""

import contextlib
import inspect
import io
import math
import random

import pytest

from test_fresh_programs_dl2 import F64, _both


@contextlib.contextmanager
def float64_default(m, seed=0):
    m.manual_seed(seed)
    m.set_default_dtype(m.float64)
    try:
        yield
    finally:
        m.set_default_dtype(m.float32)


def sgd_by_hand(m, params, lr, batch_size):
    with m.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


def linear_softmax_and_weight_decay(m):
    """Linear regression on synthetic data with shuffled index minibatches and a hand SGD step, the concise one with
    a LazyLinear, softmax regression with its hand cross-entropy (y_hat[range(n), y]) and accuracy, and the weight
    decay section's L2 penalty by hand and as a per-group weight_decay."""
    nn = m.nn
    out = []
    with float64_default(m):
        order = random.Random(0)
        w_true = m.tensor([2.0, -3.4])
        X = m.normal(0, 1, (60, 2))
        y = (X @ w_true + 4.2 + m.normal(0, 0.01, (60,))).reshape(-1, 1)
        w, b = m.normal(0, 0.01, size=(2, 1), requires_grad=True), m.zeros(1, requires_grad=True)
        for _ in range(2):
            idx = list(range(60))
            order.shuffle(idx)
            for i in range(0, 60, 10):
                rows = m.tensor(idx[i : i + 10])
                (((X[rows] @ w + b) - y[rows]) ** 2 / 2).sum().backward()
                sgd_by_hand(m, [w, b], 0.03, 10)
        out += [w.detach(), b.detach()]
        lazy = nn.LazyLinear(1)
        loader = m.utils.data.DataLoader(m.utils.data.TensorDataset(X, y), 10, shuffle=True)
        lazy(X[:1])
        lazy.weight.data.normal_(0, 0.01)
        lazy.bias.data.fill_(0)
        trainer = m.optim.SGD(lazy.parameters(), lr=0.03)
        for xb, yb in loader:
            loss = nn.MSELoss()(lazy(xb), yb)
            trainer.zero_grad()
            loss.backward()
            trainer.step()
        out.append(loss.detach())

        images, labels = m.rand(24, 1, 6, 6), m.randint(0, 4, (24,))
        W = m.normal(0, 0.01, size=(36, 4), requires_grad=True)
        bias = m.zeros(4, requires_grad=True)
        for xb, yb in m.utils.data.DataLoader(m.utils.data.TensorDataset(images, labels), 8, shuffle=True):
            e = m.exp(xb.reshape((-1, W.shape[0])) @ W + bias)
            y_hat = e / e.sum(1, keepdim=True)
            (-m.log(y_hat[range(len(y_hat)), yb])).sum().backward()
            sgd_by_hand(m, [W, bias], 0.1, xb.shape[0])
            accuracy = float((y_hat.argmax(axis=1).type(yb.dtype) == yb).type(yb.dtype).sum())
            out.append(accuracy)

        Xw, yw = m.normal(0, 1, (10, 30)), m.normal(0, 1, (10, 1))
        for wd in (0.0, 3.0):
            wl, bl = m.normal(0, 1, size=(30, 1), requires_grad=True), m.zeros(1, requires_grad=True)
            concise = nn.Sequential(nn.Linear(30, 1))
            for p in concise.parameters():
                p.data.normal_()
            opt = m.optim.SGD([{"params": concise[0].weight, "weight_decay": wd}, {"params": concise[0].bias}], lr=3e-3)
            for _ in range(5):
                ((Xw @ wl + bl - yw) ** 2 / 2 + wd * m.sum(wl.pow(2)) / 2).sum().backward()
                sgd_by_hand(m, [wl, bl], 0.003, 10)
                opt.zero_grad()
                nn.MSELoss(reduction="none")(concise(Xw), yw).mean().backward()
                opt.step()
            out += [m.norm(wl).item(), concise[0].weight.norm().item()]
    return out


@pytest.mark.slow
def test_linear_softmax_and_weight_decay():
    _both(linear_softmax_and_weight_decay, F64)


class HyperParameters:
    """d2l's save_hyperparameters: the caller's arguments become attributes, read from its frame."""

    def save_hyperparameters(self, ignore=()):
        frame = inspect.currentframe().f_back
        _, _, _, local_vars = inspect.getargvalues(frame)
        self.hparams = {k: v for k, v in local_vars.items() if k not in (*ignore, "self") and not k.startswith("_")}
        for k, v in self.hparams.items():
            setattr(self, k, v)


def cnn_blocks(m):
    """Dropout by hand, a 1x2 kernel learnt with weight.data[:] -= lr * grad, LeNet of lazy layers initialised by
    apply after a dummy forward, a NiN block, residual blocks with lazy batch norms, a dense block, and batch norm
    written out (moving statistics as plain tensors, `torch.is_grad_enabled()` choosing the branch)."""
    nn, F = m.nn, m.nn.functional
    out = []

    def dropout_layer(X, p):
        return m.zeros_like(X) if p == 1 else (m.rand(X.shape) > p).float() * X / (1.0 - p)

    def init_cnn(module):
        if type(module) in (nn.Linear, nn.Conv2d):
            nn.init.xavier_uniform_(module.weight)

    def batch_norm(X, gamma, beta, moving_mean, moving_var, eps, momentum):
        if not m.is_grad_enabled():
            return gamma * (X - moving_mean) / m.sqrt(moving_var + eps) + beta, moving_mean, moving_var
        dims = (0,) if X.dim() == 2 else (0, 2, 3)
        mean = X.mean(dim=dims, keepdim=X.dim() == 4)
        var = ((X - mean) ** 2).mean(dim=dims, keepdim=X.dim() == 4)
        moving_mean = (1.0 - momentum) * moving_mean + momentum * mean
        moving_var = (1.0 - momentum) * moving_var + momentum * var
        return gamma * (X - mean) / m.sqrt(var + eps) + beta, moving_mean.data, moving_var.data

    class BatchNorm(nn.Module):
        def __init__(self, num_features, num_dims):
            super().__init__()
            shape = (1, num_features) if num_dims == 2 else (1, num_features, 1, 1)
            self.gamma, self.beta = nn.Parameter(m.ones(shape)), nn.Parameter(m.zeros(shape))
            self.moving_mean, self.moving_var = m.zeros(shape), m.ones(shape)

        def forward(self, X):
            Y, self.moving_mean, self.moving_var = batch_norm(
                X, self.gamma, self.beta, self.moving_mean, self.moving_var, eps=1e-5, momentum=0.1
            )
            return Y

    class Residual(nn.Module):
        def __init__(self, channels, use_1x1conv=False, strides=1):
            super().__init__()
            self.conv1 = nn.LazyConv2d(channels, kernel_size=3, padding=1, stride=strides)
            self.conv2 = nn.LazyConv2d(channels, kernel_size=3, padding=1)
            self.conv3 = nn.LazyConv2d(channels, kernel_size=1, stride=strides) if use_1x1conv else None
            self.bn1, self.bn2 = nn.LazyBatchNorm2d(), nn.LazyBatchNorm2d()

        def forward(self, X):
            Y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(X)))))
            if self.conv3:
                X = self.conv3(X)
            Y += X
            return F.relu(Y)

    class DenseBlock(nn.Module):
        def __init__(self, num_convs, channels):
            super().__init__()
            self.net = nn.Sequential(
                *[
                    nn.Sequential(nn.LazyBatchNorm2d(), nn.ReLU(), nn.LazyConv2d(channels, kernel_size=3, padding=1))
                    for _ in range(num_convs)
                ]
            )

        def forward(self, X):
            for blk in self.net:
                X = m.cat((X, blk(X)), dim=1)
            return X

    class Classifier(nn.Module, HyperParameters):
        def __init__(self, body, lr=0.1, num_classes=4):
            super().__init__()
            self.save_hyperparameters(ignore=("body",))
            self.net = nn.Sequential(*body, nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.LazyLinear(num_classes))

        def forward(self, X):
            return self.net(X)

    with float64_default(m):
        out.append(dropout_layer(m.arange(16.0).reshape(2, 8), 0.5))
        X = m.ones((6, 8))
        X[:, 2:6] = 0
        Y = (X[:, :-1] - X[:, 1:]).reshape(1, 1, 6, 7)
        conv2d = nn.LazyConv2d(1, kernel_size=(1, 2), bias=False)
        for _ in range(6):
            loss = ((conv2d(X.reshape(1, 1, 6, 8)) - Y) ** 2).sum()
            conv2d.zero_grad()
            loss.backward()
            conv2d.weight.data[:] -= 3e-2 * conv2d.weight.grad
        out.append(conv2d.weight.data.reshape(1, 2))
        images, labels = m.rand(8, 1, 12, 12), m.randint(0, 4, (8,))
        bodies = {
            "lenet": [nn.LazyConv2d(3, kernel_size=5, padding=2), BatchNorm(3, 4), nn.Sigmoid(), nn.AvgPool2d(2, 2)],
            "nin": [
                nn.LazyConv2d(4, 3, 1, 1),
                nn.ReLU(),
                nn.LazyConv2d(4, kernel_size=1),
                nn.ReLU(),
                nn.MaxPool2d(3, 2),
            ],
            "resnet": [Residual(3), Residual(4, use_1x1conv=True, strides=2)],
            "densenet": [DenseBlock(2, 3), nn.LazyBatchNorm2d(), nn.ReLU(), nn.LazyConv2d(4, 1), nn.AvgPool2d(2, 2)],
        }
        for body in bodies.values():
            model = Classifier(body, lr=0.05)
            model(images[:2])
            model.net.apply(init_cnn)
            opt = m.optim.SGD(model.parameters(), lr=model.lr)
            for i in range(0, 8, 4):
                loss = F.cross_entropy(model(images[i : i + 4]), labels[i : i + 4])
                opt.zero_grad()
                loss.backward()
                opt.step()
            model.eval()
            with m.no_grad():
                out += [loss.detach(), model(images).sum(), model.hparams["num_classes"]]
        out.append(bodies["lenet"][1].moving_var.flatten())
    return out


@pytest.mark.slow
def test_cnn_blocks():
    _both(cnn_blocks, F64)


def optimizers_by_hand(m):
    """The optimization chapter: momentum, Adagrad, RMSProp, Adadelta, Adam and Yogi written as in-place updates of
    state tensors (v[:] = ..., p[:] -= ...), next to torch.optim's versions, on a linear model; a learning-rate
    schedule given either as a torch scheduler or as a function of the epoch, told apart by its __module__."""
    nn = m.nn

    def momentum(params, states, hp):
        for p, v in zip(params, states):
            with m.no_grad():
                v[:] = hp["momentum"] * v + p.grad
                p[:] -= hp["lr"] * v
            p.grad.data.zero_()

    def adagrad(params, states, hp):
        for p, s in zip(params, states):
            with m.no_grad():
                s[:] += m.square(p.grad)
                p[:] -= hp["lr"] * p.grad / m.sqrt(s + 1e-6)
            p.grad.data.zero_()

    def rmsprop(params, states, hp):
        for p, s in zip(params, states):
            with m.no_grad():
                s[:] = hp["gamma"] * s + (1 - hp["gamma"]) * m.square(p.grad)
                p[:] -= hp["lr"] * p.grad / m.sqrt(s + 1e-6)
            p.grad.data.zero_()

    def adadelta(params, states, hp):
        for p, (s, delta) in zip(params, states):
            with m.no_grad():
                s[:] = hp["rho"] * s + (1 - hp["rho"]) * m.square(p.grad)
                g = (m.sqrt(delta + 1e-5) / m.sqrt(s + 1e-5)) * p.grad
                p[:] -= g
                delta[:] = hp["rho"] * delta + (1 - hp["rho"]) * g * g
            p.grad.data.zero_()

    def adam(params, states, hp, yogi=False):
        for p, (v, s) in zip(params, states):
            with m.no_grad():
                v[:] = 0.9 * v + 0.1 * p.grad
                if yogi:
                    s[:] = s + 0.001 * m.sign(m.square(p.grad) - s) * m.square(p.grad)
                else:
                    s[:] = 0.999 * s + 0.001 * m.square(p.grad)
                v_hat, s_hat = v / (1 - 0.9 ** hp["t"]), s / (1 - 0.999 ** hp["t"])
                p[:] -= hp["lr"] * v_hat / (m.sqrt(s_hat) + (1e-3 if yogi else 1e-6))
            p.grad.data.zero_()
        hp["t"] += 1

    out = []
    with float64_default(m):
        data = m.randn(60, 6)
        data = (data - data.mean(axis=0)) / data.std(axis=0)
        loader = m.utils.data.DataLoader(m.utils.data.TensorDataset(data[:, :-1], data[:, -1]), 10, shuffle=True)
        pair = lambda: (m.zeros((5, 1)), m.zeros(1))  # noqa: E731
        runs = [
            (momentum, pair(), {"lr": 0.02, "momentum": 0.5}),
            (adagrad, pair(), {"lr": 0.1}),
            (rmsprop, pair(), {"lr": 0.01, "gamma": 0.9}),
            (adadelta, list(zip(pair(), pair())), {"rho": 0.9}),
            (adam, list(zip(pair(), pair())), {"lr": 0.01, "t": 1}),
            (lambda *a: adam(*a, yogi=True), list(zip(pair(), pair())), {"lr": 0.01, "t": 1}),
        ]
        for trainer, states, hp in runs:
            w, b = m.normal(mean=0.0, std=0.01, size=(5, 1), requires_grad=True), m.zeros((1), requires_grad=True)
            for X, y in loader:
                ((X @ w + b - y.reshape(-1, 1)) ** 2 / 2).mean().backward()
                trainer([w, b], states, hp)
            out += [w.detach(), b.detach()]
        optimizers = [(m.optim.SGD, {"lr": 0.005, "momentum": 0.9}), (m.optim.Adagrad, {"lr": 0.1})]
        optimizers += [(m.optim.RMSprop, {"lr": 0.01, "alpha": 0.9}), (m.optim.Adadelta, {"rho": 0.9})]
        for make, settings in optimizers:
            net = nn.Sequential(nn.Linear(5, 1))
            nn.init.normal_(net[0].weight, std=0.01)
            opt = make(net.parameters(), **settings)
            for X, y in loader:
                opt.zero_grad()
                nn.MSELoss(reduction="none")(net(X), y.reshape(-1, 1)).mean().backward()
                opt.step()
            out.append(net[0].weight.detach())
        for schedule in ("cosine", "multistep"):
            net = nn.Sequential(nn.Linear(5, 1))
            opt = m.optim.SGD(net.parameters(), lr=0.3)
            if schedule == "multistep":
                scheduler = m.optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 2], gamma=0.5)
            else:
                scheduler = lambda epoch: 0.01 + 0.29 * (1 + math.cos(math.pi * epoch / 3)) / 2  # noqa: E731
            for epoch in range(3):
                for X, y in loader:
                    opt.zero_grad()
                    nn.functional.mse_loss(net(X), y.reshape(-1, 1)).backward()
                    opt.step()
                if scheduler.__module__ == m.optim.lr_scheduler.__name__:
                    scheduler.step()
                else:
                    for group in opt.param_groups:
                        group["lr"] = scheduler(epoch)
                out.append(opt.param_groups[0]["lr"])
    return out


@pytest.mark.slow
def test_optimizers_by_hand():
    _both(optimizers_by_hand, F64)


def performance_chapter(m):
    """The computational-performance chapter on one CPU: torch.jit.script of an nn.Sequential (the same values as
    the module), a LeNet of explicit parameters copied to two "devices" with per-shard losses, allreduce by in-place
    slice assignment (data[0][:] += ...) and a hand SGD step on each copy."""
    F = m.nn.functional
    with float64_default(m):
        net = m.nn.Sequential(m.nn.Linear(16, 8), m.nn.ReLU(), m.nn.Linear(8, 2))
        x = m.randn(size=(1, 16))
        out = [net(x), m.jit.script(net)(x)]
        shapes = [(4, 1, 3, 3), (4,), (4 * 5 * 5, 10), (10,)]
        params = [m.randn(size=s) * 0.1 for s in shapes]

        def lenet(X, p):
            h = F.avg_pool2d(F.relu(F.conv2d(input=X, weight=p[0], bias=p[1])), kernel_size=(2, 2), stride=(2, 2))
            return m.mm(h.reshape(h.shape[0], -1), p[2]) + p[3]

        def allreduce(data):
            for i in range(1, len(data)):
                data[0][:] += data[i].to(data[0].device)
            for i in range(1, len(data)):
                data[i][:] = data[0].to(data[i].device)

        copies = [[p.to("cpu").requires_grad_() for p in params] for _ in range(2)]
        for p in copies[1]:
            p.data = p.data.clone()
        images, labels = m.rand(8, 1, 12, 12), m.randint(0, 10, (8,))
        loss = m.nn.CrossEntropyLoss(reduction="none")
        for _ in range(2):
            for X, y, p in zip(images.chunk(2), labels.chunk(2), copies):
                loss(lenet(X, p), y).sum().backward()
            with m.no_grad():
                for i in range(len(shapes)):
                    allreduce([copies[c][i].grad for c in range(2)])
            for p in copies:
                sgd_by_hand(m, p, 0.2, 8)
            out.append(loss(lenet(images, copies[0]), labels).mean())
        out.append([p.detach() for p in copies[1]])
    return out


@pytest.mark.slow
def test_performance_chapter():
    _both(performance_chapter, F64)


def builders_guide(m):
    """The preliminaries and builders' guide: in-place updates keeping a tensor's identity (X += Y, Z[:] = ...),
    reductions with axis= and keepdims=, gradients through Python control flow, a Sequential written with add_module
    and children(), a layer shared twice (one parameter, two state_dict entries), initialisation by apply (including
    weight.data *= weight.data.abs() >= 5), tensors, lists and dicts through torch.save/torch.load, and a model of
    lazy layers moved with .to(device=...) before its first input."""
    nn, F = m.nn, m.nn.functional
    out = []
    with float64_default(m):
        X, Y = m.arange(12.0).reshape((3, 4)), m.tensor([[2.0, 1, 4, 3], [1, 2, 3, 4], [4, 3, 2, 1]])
        X[1, 2], X[:2, :] = 17, 12
        before = id(X)
        X += Y
        Z = m.zeros_like(Y)
        Z[:] = X + Y
        out += [id(X) == before, Z, X.sum(axis=[0, 1]), X.sum(axis=1, keepdims=True), X.cumsum(axis=0)]
        a = m.randn(size=(), requires_grad=True)
        b = a * 2
        while b.norm() < 1000:
            b = b * 2
        c = b if b.sum() > 0 else 100 * b
        c.backward()
        out.append(a.grad == c / a)

        class MySequential(nn.Module):
            def __init__(self, *args):
                super().__init__()
                for idx, module in enumerate(args):
                    self.add_module(str(idx), module)

            def forward(self, X):
                for module in self.children():
                    X = module(X)
                return X

        class FixedHidden(nn.Module):
            def __init__(self):
                super().__init__()
                self.rand_weight, self.linear = m.rand((20, 20)), nn.LazyLinear(20)

            def forward(self, X):
                X = self.linear(F.relu(self.linear(X) @ self.rand_weight + 1))
                while X.abs().sum() > 1:
                    X /= 2
                return X.sum()

        inputs = m.rand(2, 20)
        shared = nn.LazyLinear(8)
        tied = MySequential(nn.LazyLinear(8), nn.ReLU(), shared, nn.ReLU(), shared, nn.LazyLinear(1))
        out += [FixedHidden()(inputs), tied(inputs), len(list(tied.parameters())), len(tied.state_dict())]

        def my_init(module):
            if type(module) is nn.Linear:
                nn.init.uniform_(module.weight, -10, 10)
                module.weight.data *= module.weight.data.abs() >= 5

        tied.apply(my_init)
        shared.weight.data[0, 0] = 100
        out += [getattr(tied, "4").weight.data[0], tied(inputs)]
        buffer = io.BytesIO()
        m.save({"x": m.arange(4), "pair": [m.zeros(4), tied.state_dict()]}, buffer)
        loaded = m.load(io.BytesIO(buffer.getvalue()))
        out += [loaded["x"], loaded["pair"][1]["4.weight"]]
        lazy = nn.Sequential(nn.LazyLinear(1)).to(device=m.device("cpu"))
        out.append(lazy(m.ones(2, 3)))
    return out


@pytest.mark.slow
def test_builders_guide():
    _both(builders_guide, F64)
