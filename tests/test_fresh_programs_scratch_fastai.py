"""Programs from fastai's "from the foundations" course (course22p2 notebooks, their plain-torch parts), compared
number for number with torch from the same seed in float64: matrix products by loops, broadcasting and einsum, the
forward and backward passes written by hand, accelerated SGD written by hand with torch's schedulers, layer
statistics through forward hooks with LSUV and a hand BatchNorm, a DDPM sampling loop, and the miniai Learner with
its callbacks written out. Data is random, of the notebooks' shapes."""

import math
from functools import partial
from operator import attrgetter

import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default


def matmul_three_ways(m):
    """The triple loop accumulating into t1[i, j], a row-times-column sum, a broadcast row product, einsum and @."""
    with float64_default(m, seed=1):
        a, b = m.rand(4, 30), m.randn(30, 5)
        t1 = m.zeros(4, 5)
        for i in range(4):
            for j in range(5):
                for k in range(30):
                    t1[i, j] += a[i, k] * b[k, j]
        by_row = m.zeros(4, 5)
        for i in range(4):
            by_row[i] = (a[i, :, None] * b).sum(dim=0)
        c = m.tensor([10.0, 20, 30])
        return [
            t1,
            by_row,
            m.einsum("ik,kj->ij", a, b),
            a.matmul(b),
            m.allclose(t1, a @ b),
            c[None, :] * c[:, None],
            c.expand_as(m.ones(3, 3)),
            m.einsum("ik,kj->ikj", a, b).sum(1),
        ]


def test_matmul_three_ways():
    _both(matmul_three_ways, F64)


def forward_backward_by_hand(m):
    """Lin/ReLU/MSE modules each with a backward that stores .g on its input, checked against autograd."""

    class Module:
        def __call__(self, *args):
            self.args = args
            self.out = self.forward(*args)
            return self.out

        def backward(self):
            self.bwd(self.out, *self.args)

    class Relu(Module):
        def forward(self, inp):
            return inp.clamp_min(0.0)

        def bwd(self, out, inp):
            inp.g = (inp > 0).double() * out.g

    class Lin(Module):
        def __init__(self, w, b):
            self.w, self.b = w, b

        def forward(self, inp):
            return inp @ self.w + self.b

        def bwd(self, out, inp):
            inp.g = out.g @ self.w.t()
            self.w.g = inp.t() @ out.g
            self.b.g = out.g.sum(0)

    class Mse(Module):
        def forward(self, inp, targ):
            return (inp.squeeze() - targ).pow(2).mean()

        def bwd(self, out, inp, targ):
            inp.g = 2 * (inp.squeeze() - targ).unsqueeze(-1) / targ.shape[0]

    with float64_default(m, seed=42):
        x, y = m.rand(32, 20), m.randint(0, 10, (32,)).double()
        w1, b1, w2, b2 = m.randn(20, 16), m.zeros(16), m.randn(16, 1), m.zeros(1)
        layers, loss_fn = [Lin(w1, b1), Relu(), Lin(w2, b2)], Mse()
        out = x
        for layer in layers:
            out = layer(out)
        loss = loss_fn(out, y)
        loss_fn.backward()
        for layer in reversed(layers):
            layer.backward()
        leaves = [t.clone().requires_grad_(True) for t in (w1, b1, w2, b2, x)]
        hidden = (leaves[4] @ leaves[0] + leaves[1]).clamp_min(0.0)
        m.nn.functional.mse_loss(hidden @ leaves[2] + leaves[3], y[:, None]).backward()
        return [loss, [t.g for t in (w1, b1, w2, b2, x)], [t.grad for t in leaves]]


def test_forward_backward_by_hand():
    _both(forward_backward_by_hand, F64)


def _sgd_family(m):
    class SGD:
        def __init__(self, params, lr, wd=0.0):
            self.params, self.lr, self.wd, self.i = list(params), lr, wd, 0

        def step(self):
            with m.no_grad():
                for p in self.params:
                    if self.wd != 0:
                        p *= 1 - self.lr * self.wd
                    self.opt_step(p)
            self.i += 1

        def opt_step(self, p):
            p -= p.grad * self.lr

        def zero_grad(self):
            for p in self.params:
                p.grad.data.zero_()

    class Momentum(SGD):
        def opt_step(self, p):
            if not hasattr(p, "grad_avg"):
                p.grad_avg = m.zeros_like(p.grad)
            p.grad_avg = p.grad_avg * 0.9 + p.grad * 0.1
            p -= self.lr * p.grad_avg

    class RMSProp(SGD):
        def opt_step(self, p):
            if not hasattr(p, "sqr_avg"):
                p.sqr_avg = p.grad**2
            p.sqr_avg = p.sqr_avg * 0.99 + p.grad**2 * 0.01
            p -= self.lr * p.grad / (p.sqr_avg.sqrt() + 1e-5)

    class Adam(SGD):
        def opt_step(self, p):
            if not hasattr(p, "avg"):
                p.avg, p.sqr_avg = m.zeros_like(p.grad.data), m.zeros_like(p.grad.data)
            p.avg = 0.9 * p.avg + 0.1 * p.grad
            p.sqr_avg = 0.99 * p.sqr_avg + 0.01 * p.grad**2
            unbiased = (p.sqr_avg / (1 - 0.99 ** (self.i + 1)) + 1e-5).sqrt()
            p -= self.lr * p.avg / (1 - 0.9 ** (self.i + 1)) / unbiased

    return [(SGD, dict(lr=0.4, wd=0.01)), (Momentum, dict(lr=0.1)), (RMSProp, dict(lr=3e-3)), (Adam, dict(lr=6e-3))]


def accelerated_sgd_and_schedulers(m):
    """SGD with weight decay, momentum, RMSProp and Adam written by hand, then torch's OneCycleLR (cosine and
    three-phase linear), CosineAnnealingLR built through functools.partial, stepped per batch."""
    nn, F, sched = m.nn, m.nn.functional, m.optim.lr_scheduler
    with float64_default(m, seed=42):
        x, y = m.randn(48, 12), m.randint(0, 4, (48,))

        def model():
            m.manual_seed(1)
            return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.BatchNorm1d(16), nn.Linear(16, 4))

        def train(net, opt, scheduler=None):
            losses, lrs = [], []
            for _ in range(2):
                for i in range(0, 48, 8):
                    loss = F.cross_entropy(net(x[i : i + 8]), y[i : i + 8])
                    loss.backward()
                    opt.step()
                    if scheduler is not None:
                        lrs.append(scheduler.get_last_lr()[0])
                        scheduler.step()
                    opt.zero_grad()
                    losses.append(loss.item())
            return [losses, lrs, list(net.parameters())]

        out = []
        for cls, kwargs in _sgd_family(m):
            net = model()
            out.append(train(net, cls(net.parameters(), **kwargs)))
        makers = [
            lambda o: sched.OneCycleLR(o, 6e-2, total_steps=12),
            lambda o: sched.OneCycleLR(
                o, 6e-2, epochs=2, steps_per_epoch=6, anneal_strategy="linear", three_phase=True
            ),
            partial(sched.CosineAnnealingLR, T_max=12),
        ]
        for make in makers:
            net = model()
            opt = m.optim.AdamW(net.parameters(), lr=6e-2, eps=1e-5)
            out.append(train(net, opt, make(opt)) + [opt.param_groups[0]["betas"]])
        return out


@pytest.mark.slow
def test_accelerated_sgd_and_schedulers():
    _both(accelerated_sgd_and_schedulers, F64)


def hooks_lsuv_and_batchnorm(m):
    """GeneralRelu (leaky, shifted, clamped in place), forward hooks recording means, stds and histc histograms
    of the activations during training, LSUV initialisation driven by a hook, and BatchNorm written by hand with
    lerp_ running statistics."""
    nn, F = m.nn, m.nn.functional

    class GeneralRelu(nn.Module):
        def __init__(self, leak=None, sub=None, maxv=None):
            super().__init__()
            self.leak, self.sub, self.maxv = leak, sub, maxv

        def forward(self, x):
            x = F.leaky_relu(x, self.leak) if self.leak is not None else F.relu(x)
            if self.sub is not None:
                x -= self.sub
            if self.maxv is not None:
                x.clamp_max_(self.maxv)
            return x

    class BatchNorm(nn.Module):
        def __init__(self, nf, mom=0.1, eps=1e-5):
            super().__init__()
            self.mom, self.eps = mom, eps
            self.mults, self.adds = nn.Parameter(m.ones(nf, 1, 1)), nn.Parameter(m.zeros(nf, 1, 1))
            self.register_buffer("vars", m.ones(1, nf, 1, 1))
            self.register_buffer("means", m.zeros(1, nf, 1, 1))

        def forward(self, x):
            if self.training:
                with m.no_grad():
                    mean, var = x.mean((0, 2, 3), keepdim=True), x.var((0, 2, 3), keepdim=True)
                    self.means.lerp_(mean, self.mom)
                    self.vars.lerp_(var, self.mom)
            else:
                mean, var = self.means, self.vars
            return (x - mean) / (var + self.eps).sqrt() * self.mults + self.adds

    def stats(hook, mod, inp, outp):
        hook.setdefault("stats", []).append([outp.mean(), outp.std(), outp.abs().histc(20, 0, 10)])

    def conv(ni, nf, act=True):
        layer = nn.Conv2d(ni, nf, 3, stride=2, padding=1)
        return nn.Sequential(layer, GeneralRelu(0.1, 0.4, 6.0)) if act else layer

    with float64_default(m, seed=42):
        xb, yb = m.randn(16, 1, 16, 16), m.randint(0, 10, (16,))
        m.manual_seed(1)
        model = nn.Sequential(conv(1, 4), conv(4, 8), conv(8, 10, act=False), nn.Flatten(), nn.LazyLinear(10))
        model(xb)
        model.apply(lambda mod: nn.init.kaiming_normal_(mod.weight, a=0.1) if isinstance(mod, nn.Conv2d) else None)
        records = [{} for _ in range(2)]
        relus = [mod for mod in model.modules() if isinstance(mod, GeneralRelu)]
        handles = [r.register_forward_hook(partial(stats, rec)) for r, rec in zip(relus, records)]
        opt = m.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(3):
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            opt.zero_grad()
        for handle in handles:
            handle.remove()
        lsuv = {}
        convs = [mod for mod in model.modules() if isinstance(mod, nn.Conv2d)]
        for relu, layer in zip(relus, convs):
            handle = relu.register_forward_hook(lambda mod, inp, out: lsuv.update(mean=out.mean(), std=out.std()))
            with m.no_grad():
                for _ in range(20):
                    model(xb)
                    if abs(lsuv["std"] - 1) < 1e-3 and abs(lsuv["mean"]) < 1e-3:
                        break
                    layer.bias -= lsuv["mean"]
                    layer.weight.data /= lsuv["std"]
            handle.remove()
        m.manual_seed(2)
        bn_net = nn.Sequential(nn.Conv2d(1, 4, 3, 2, 1), BatchNorm(4), GeneralRelu(0.1, 0.4), nn.AdaptiveAvgPool2d(1))
        for _ in range(2):
            bn_net(xb).sum().backward()
        return [[r["stats"] for r in records], [c.weight for c in convs], list(bn_net.buffers()), bn_net[1].mults.grad]


@pytest.mark.slow
def test_hooks_lsuv_and_batchnorm():
    _both(hooks_lsuv_and_batchnorm, F64)


def ddpm_training_and_sampling(m):
    """The DDPM notebook's linear beta schedule and cumulative alphas, noisify, a tiny conv denoiser with a
    sinusoidal time embedding trained with OneCycleLR, and the reverse sampling loop under no_grad."""
    nn, F = m.nn, m.nn.functional
    steps = 10

    def embedding(t, dim=8):
        exponent = -math.log(10000) * m.linspace(0, 1, dim // 2)
        emb = t[:, None].double() * exponent.exp()[None, :]
        return m.cat([emb.sin(), emb.cos()], dim=-1)

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Sequential(nn.Linear(8, 8), nn.SiLU(), nn.Linear(8, 4))
            self.down, self.norm = nn.Conv2d(1, 4, 3, padding=1), nn.GroupNorm(2, 4)
            self.out = nn.Conv2d(5, 1, 1)

        def forward(self, x, t):
            h = F.silu(self.norm(self.down(x) + self.emb(embedding(t * 100.0))[:, :, None, None]))
            return self.out(m.cat([h, x], dim=1))

    with float64_default(m, seed=42):
        beta = m.linspace(0.0001, 0.02, steps)
        alpha = 1.0 - beta
        alpha_bar, sigma = m.cumprod(alpha, dim=0), beta.sqrt()
        x0 = m.rand(32, 1, 6, 6) * 2 - 1
        model = Denoiser()
        opt = m.optim.Adam(model.parameters(), lr=5e-3, eps=1e-5)
        sched = m.optim.lr_scheduler.OneCycleLR(opt, max_lr=5e-3, total_steps=6)
        losses = []
        for step in range(6):
            xb = x0[(step % 2) * 16 : (step % 2 + 1) * 16]
            t = m.randint(0, steps, (16,), dtype=m.long)
            noise = m.randn(xb.shape)
            abar_t = alpha_bar[t].reshape(-1, 1, 1, 1)
            loss = F.mse_loss(model(abar_t.sqrt() * xb + (1 - abar_t).sqrt() * noise, t), noise)
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad()
            losses.append(loss.item())
        with m.no_grad():
            x_t = m.randn(3, 1, 6, 6)
            for t in reversed(range(steps)):
                z = m.randn(x_t.shape) if t > 0 else m.zeros(x_t.shape)
                abar_t1 = alpha_bar[t - 1] if t > 0 else m.tensor(1)
                bbar_t, bbar_t1 = 1 - alpha_bar[t], 1 - abar_t1
                noise = model(x_t, m.full((3,), t, dtype=m.long))
                x0_hat = ((x_t - bbar_t.sqrt() * noise) / alpha_bar[t].sqrt()).clamp(-1, 1)
                x_t = x0_hat * abar_t1.sqrt() * (1 - alpha[t]) / bbar_t + x_t * alpha[t].sqrt() * bbar_t1 / bbar_t
                x_t = x_t + sigma[t] * z
        return [alpha_bar, losses, x_t]


@pytest.mark.slow
def test_ddpm_training_and_sampling():
    _both(ddpm_training_and_sampling, F64)


class CancelFitException(Exception):
    pass


def learner_with_callbacks(m):
    """miniai's Learner: callbacks sorted by order, before/after/cleanup around fit, epoch and batch, cancellation
    by exception, a TrainCB, a metrics callback averaging accuracy and loss per epoch, and an LR finder stepping
    ExponentialLR until the loss triples."""
    nn, F = m.nn, m.nn.functional

    class Learner:
        def __init__(self, model, dls, cbs, lr):
            self.model, self.dls, self.cbs, self.lr = model, dls, cbs, lr

        def callback(self, name):
            for cb in sorted(self.cbs, key=attrgetter("order")):
                getattr(cb, name, lambda learn: None)(self)

        def fit(self, n_epochs):
            self.opt = m.optim.SGD(self.model.parameters(), self.lr)
            try:
                self.callback("before_fit")
                for self.epoch in range(n_epochs):
                    for training in (True, False):
                        self.model.train(training)
                        with m.enable_grad() if training else m.no_grad():
                            self.callback("before_epoch")
                            for batch in self.dls[0 if training else 1]:
                                self.batch = batch
                                self.callback("predict")
                                self.callback("after_batch")
                            self.callback("after_epoch")
            except CancelFitException:
                pass
            finally:
                self.callback("cleanup_fit")

    class TrainCB:
        order = 0

        def predict(self, learn):
            xb, yb = learn.batch
            learn.preds = learn.model(xb)
            learn.loss = F.cross_entropy(learn.preds, yb)
            if learn.model.training:
                learn.loss.backward()
                learn.opt.step()
                learn.opt.zero_grad()

    class MetricsCB:
        order = 1

        def __init__(self):
            self.log = []

        def before_epoch(self, learn):
            self.correct, self.loss, self.count = m.tensor(0.0), m.tensor(0.0), 0

        def after_batch(self, learn):
            xb, yb = (t.detach().cpu() for t in learn.batch)
            self.correct += (learn.preds.detach().argmax(1) == yb).double().sum()
            self.loss += learn.loss.detach() * len(xb)
            self.count += len(xb)

        def after_epoch(self, learn):
            self.log.append((learn.epoch, learn.model.training, self.correct / self.count, self.loss / self.count))

    class LRFinderCB:
        order = 2

        def before_fit(self, learn):
            self.sched = m.optim.lr_scheduler.ExponentialLR(learn.opt, 1.6)
            self.lrs, self.losses, self.min = [], [], math.inf

        def after_batch(self, learn):
            if not learn.model.training:
                raise CancelFitException()
            self.lrs.append(learn.opt.param_groups[0]["lr"])
            loss = learn.loss.item()
            self.losses.append(loss)
            self.min = min(self.min, loss)
            if math.isnan(loss) or loss > self.min * 3:
                raise CancelFitException()
            self.sched.step()

    with float64_default(m, seed=0):
        x = m.randn(80, 10)
        y = (x[:, :3].sum(1) > 0).long() + (x[:, 3] > 1).long()
        data = m.utils.data
        dls = [
            data.DataLoader(data.TensorDataset(x[:64], y[:64]), 16, shuffle=True),
            data.DataLoader(data.TensorDataset(x[64:], y[64:]), 32),
        ]

        def model():
            m.manual_seed(1)
            return nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))

        metrics = MetricsCB()
        Learner(model(), dls, [TrainCB(), metrics], lr=0.2).fit(2)
        finder = LRFinderCB()
        Learner(model(), dls, [TrainCB(), finder], lr=1e-3).fit(4)
        return [metrics.log, finder.lrs, finder.losses]


def test_learner_with_callbacks():
    _both(learner_with_callbacks, F64)
