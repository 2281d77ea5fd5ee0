"""Self-supervised learning programs of the kinds public code holds (sthalles/SimCLR, lucidrains/byol-pytorch,
facebookresearch's moco, barlowtwins, vicreg and dino), each written once against torch's API and run with torch and
with batched_grad from the same seed in float64, compared number for number: contrastive logits built by boolean
masks, an EMA target network found through a forward hook and deep-copied, a momentum encoder with a key queue
written by slices, cross-correlation and covariance losses with the flatten/view off-diagonal trick and a LARS
optimizer, and DINO's multi-crop loss with a centering buffer and a weight-normed head. The recommender and
Kolmogorov-Arnold programs are in test_fresh_programs_freshR2.py."""

import copy
import math

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both


def _float64(m, seed=0):
    m.manual_seed(seed)
    m.set_default_dtype(m.float64)


def _restore(m):
    m.set_default_dtype(m.float32)


def _topk_accuracy(m, logits, target, ks):
    with m.no_grad():
        _, pred = logits.topk(max(ks), 1, True, True)
        hit = pred.t().eq(target.view(1, -1).expand_as(pred.t()))
        return [hit[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / target.size(0)) for k in ks]


def _off_diagonal(x):
    n, _ = x.shape
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


def simclr(m):
    """InfoNCE over two views: labels from an equality outer product, the diagonal dropped from labels and
    similarities by a ~eye boolean mask, positives and negatives picked by label masks, cross-entropy against class
    0, GradScaler/autocast disabled, Adam with CosineAnnealingLR and top-1/top-5 accuracy."""
    nn, F = m.nn, m.nn.functional
    _float64(m)
    try:
        batch, views = 4, 2
        encoder = nn.Sequential(
            nn.Conv2d(3, 6, 3, padding=1),
            nn.BatchNorm2d(6),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 8)),
        )
        opt = m.optim.Adam(encoder.parameters(), 3e-4, weight_decay=1e-4)
        sched = m.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2, eta_min=0)
        scaler = m.amp.GradScaler("cpu", enabled=False)
        images = m.rand(batch, 3, 6, 6)
        out = []
        for _ in range(3):
            x = m.cat([images + 0.1 * m.randn_like(images) for _ in range(views)], dim=0)
            with m.autocast("cpu", enabled=False):
                feats = F.normalize(encoder(x), dim=1)
                labels = m.cat([m.arange(batch) for _ in range(views)], dim=0)
                labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
                sim = m.matmul(feats, feats.T)
                mask = m.eye(labels.shape[0], dtype=m.bool)
                labels = labels[~mask].view(labels.shape[0], -1)
                sim = sim[~mask].view(sim.shape[0], -1)
                positives = sim[labels.bool()].view(labels.shape[0], -1)
                negatives = sim[~labels.bool()].view(sim.shape[0], -1)
                logits = m.cat([positives, negatives], dim=1) / 0.07
                target = m.zeros(logits.shape[0], dtype=m.long)
                loss = nn.CrossEntropyLoss()(logits, target)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sched.step()
            out += [loss.detach(), *_topk_accuracy(m, logits, target, (1, 5)), sched.get_last_lr()[0]]
        return out + [p.detach() for p in encoder.parameters()]
    finally:
        _restore(m)


def byol(m):
    """BYOL: the online encoder's representation read by a forward hook on the net's penultimate child, a projector
    made lazily on first use, the target a deepcopy with requires_grad off, targets under no_grad detached in place,
    the normalized-MSE loss both ways and the EMA written by assigning .data."""
    nn, F = m.nn, m.nn.functional
    _float64(m)
    try:
        net = nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)
        )
        hidden = {}
        list(net.children())[-2].register_forward_hook(lambda mod, inp, outp: hidden.update(h=outp.flatten(1)))

        def mlp(dim, size, width):
            return nn.Sequential(
                nn.Linear(dim, width), nn.BatchNorm1d(width), nn.ReLU(inplace=True), nn.Linear(width, size)
            )

        class Online(nn.Module):
            def __init__(self):
                super().__init__()
                self.net, self.projector = net, None

            def forward(self, x):
                self.net(x)
                if self.projector is None:
                    self.projector = mlp(hidden["h"].shape[1], 6, 10)
                return self.projector(hidden["h"])

        def loss_fn(a, b):
            return 2 - 2 * (F.normalize(a, dim=-1) * F.normalize(b, dim=-1)).sum(dim=-1)

        online = Online()
        online(m.rand(2, 3, 5, 5))
        predictor = mlp(6, 6, 10)
        target = copy.deepcopy(online)
        for p in target.parameters():
            p.requires_grad = False
        opt = m.optim.Adam(list(online.parameters()) + list(predictor.parameters()), lr=1e-3)
        images, out = m.rand(4, 3, 5, 5), []
        for _ in range(3):
            one, two = images, images.flip(-1)
            p1, p2 = predictor(online(one)), predictor(online(two))
            with m.no_grad():
                t1, t2 = target(one), target(two)
                t1.detach_()
                t2.detach_()
            loss = (loss_fn(p1, t2.detach()) + loss_fn(p2, t1.detach())).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            for cur, ema in zip(online.parameters(), target.parameters()):
                ema.data = ema.data * 0.99 + (1 - 0.99) * cur.data
            out.append(loss.detach())
        return out + [p.detach() for p in target.parameters()]
    finally:
        _restore(m)


def moco(m):
    """MoCo v2: key encoder copied from the query encoder then updated by mul_/add_ under no_grad, keys computed on a
    randperm-shuffled batch and unshuffled by argsort (the shuffle-BN stand-in of one process), einsum logits
    against a cloned queue, logits /= T, and the queue written by a slice assignment with the pointer in a buffer."""
    nn, F = m.nn, m.nn.functional
    _float64(m)
    try:

        def encoder():
            return nn.Sequential(
                nn.Conv2d(3, 4, 3, padding=1),
                nn.BatchNorm2d(4),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(4, 4),
                nn.ReLU(),
                nn.Linear(4, 6),
            )

        class MoCo(nn.Module):
            def __init__(self, K=12, mom=0.99, T=0.2):
                super().__init__()
                self.K, self.mom, self.T = K, mom, T
                self.encoder_q, self.encoder_k = encoder(), encoder()
                for pq, pk in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
                    pk.data.copy_(pq.data)
                    pk.requires_grad = False
                self.register_buffer("queue", F.normalize(m.randn(6, K), dim=0))
                self.register_buffer("queue_ptr", m.zeros(1, dtype=m.long))

            def forward(self, im_q, im_k):
                q = F.normalize(self.encoder_q(im_q), dim=1)
                with m.no_grad():
                    for pq, pk in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
                        pk.mul_(self.mom).add_(pq.mul(1.0 - self.mom))
                    shuffle = m.randperm(im_k.shape[0])
                    k = F.normalize(self.encoder_k(im_k[shuffle]), dim=1)[m.argsort(shuffle)]
                logits = m.cat(
                    [
                        m.einsum("nc,nc->n", [q, k]).unsqueeze(-1),
                        m.einsum("nc,ck->nk", [q, self.queue.clone().detach()]),
                    ],
                    dim=1,
                )
                logits /= self.T
                with m.no_grad():
                    ptr = int(self.queue_ptr)
                    self.queue[:, ptr : ptr + k.shape[0]] = k.T
                    self.queue_ptr[0] = (ptr + k.shape[0]) % self.K
                return logits, m.zeros(logits.shape[0], dtype=m.long)

        model = MoCo()
        opt = m.optim.SGD(model.parameters(), 0.03, momentum=0.9, weight_decay=1e-4)
        out = []
        for _ in range(3):
            logits, labels = model(m.rand(4, 3, 5, 5), m.rand(4, 3, 5, 5))
            loss = nn.CrossEntropyLoss()(logits, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out += [loss.detach(), *_topk_accuracy(m, logits, labels, (1, 5)), int(model.queue_ptr)]
        return out + [model.queue, *[p.detach() for p in model.encoder_k.parameters()]]
    finally:
        _restore(m)


class _Lars:
    """The LARS step of barlowtwins/vicreg as an Optimizer subclass of the given library: weight decay and trust
    ratio skipped for 1-D parameters, a momentum buffer created in self.state."""

    def __new__(cls, m, params, lr):
        class LARS(m.optim.Optimizer):
            def __init__(self, params, lr, weight_decay=1e-6, momentum=0.9, eta=0.001):
                super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, eta=eta))

            @m.no_grad()
            def step(self):
                for g in self.param_groups:
                    for p in g["params"]:
                        dp = p.grad
                        if dp is None:
                            continue
                        if p.ndim != 1:
                            dp = dp.add(p, alpha=g["weight_decay"])
                            param_norm, update_norm = m.norm(p), m.norm(dp)
                            one = m.ones_like(param_norm)
                            q = m.where(
                                param_norm > 0.0,
                                m.where(update_norm > 0, (g["eta"] * param_norm / update_norm), one),
                                one,
                            )
                            dp = dp.mul(q)
                        if "mu" not in self.state[p]:
                            self.state[p]["mu"] = m.zeros_like(p)
                        mu = self.state[p]["mu"]
                        mu.mul_(g["momentum"]).add_(dp)
                        p.add_(mu, alpha=-g["lr"])

        return LARS(params, lr)


def _cosine_lr(step, steps, warmup, base):
    if step < warmup:
        return base * step / warmup
    q = 0.5 * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup)))
    return base * q + base * 0.001 * (1 - q)


def barlow_twins_and_vicreg(m):
    """Barlow Twins (affine-free BatchNorm of both projections, c.div_, diagonal().add_(-1).pow_(2), off-diagonal
    by flatten()[:-1].view(n - 1, n + 1)[:, 1:]) with LARS over weight and bias groups whose learning rates are set
    per step, and VICReg's invariance, variance (sqrt of var + eps under relu) and covariance terms."""
    nn, F = m.nn, m.nn.functional
    _float64(m)
    try:
        out = []
        for kind in ("barlow", "vicreg"):
            backbone = nn.Sequential(
                nn.Conv2d(3, 5, 3, padding=1), nn.BatchNorm2d(5), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
            )
            projector = nn.Sequential(
                nn.Linear(5, 8, bias=kind == "vicreg"), nn.BatchNorm1d(8), nn.ReLU(True), nn.Linear(8, 8, bias=False)
            )
            bn = nn.BatchNorm1d(8, affine=False)
            params = list(backbone.parameters()) + list(projector.parameters())
            groups = [{"params": [p for p in params if p.ndim != 1]}, {"params": [p for p in params if p.ndim == 1]}]
            opt = _Lars(m, groups, lr=0)
            for step in range(3):
                lr = _cosine_lr(step, 3, 1, 6 / 256)
                opt.param_groups[0]["lr"], opt.param_groups[1]["lr"] = lr * 0.2, lr * 0.0048
                y1, y2 = m.rand(6, 3, 5, 5), m.rand(6, 3, 5, 5)
                z1, z2 = projector(backbone(y1)), projector(backbone(y2))
                if kind == "barlow":
                    c = bn(z1).T @ bn(z2)
                    c.div_(6)
                    loss = m.diagonal(c).add_(-1).pow_(2).sum() + 0.0051 * _off_diagonal(c).pow_(2).sum()
                else:
                    repr_loss = F.mse_loss(z1, z2)
                    x, y = z1 - z1.mean(dim=0), z2 - z2.mean(dim=0)
                    std_x, std_y = m.sqrt(x.var(dim=0) + 0.0001), m.sqrt(y.var(dim=0) + 0.0001)
                    std_loss = m.mean(F.relu(1 - std_x)) / 2 + m.mean(F.relu(1 - std_y)) / 2
                    cov_x, cov_y = (x.T @ x) / 5, (y.T @ y) / 5
                    cov_loss = _off_diagonal(cov_x).pow_(2).sum().div(8) + _off_diagonal(cov_y).pow_(2).sum().div(8)
                    loss = 25.0 * repr_loss + 25.0 * std_loss + cov_loss
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.detach())
            out += [p.detach() for p in params] + [opt.state[params[0]]["mu"]]
        return out
    finally:
        _restore(m)


def dino(m):
    """DINO: a head ending in weight_norm(Linear) with weight_g frozen at 1, crops of two resolutions grouped by
    unique_consecutive counts and cumsum, the teacher temperature schedule from np.linspace, the loss summed over
    teacher/student crop pairs but the same view, the center buffer's EMA, per-parameter gradient clipping,
    the last layer's gradient cancelled in the first epoch, cosine schedules and the teacher's mul_/add_ EMA."""
    nn, F = m.nn, m.nn.functional
    _float64(m)
    try:

        class Head(nn.Module):
            def __init__(self, norm_last_layer):
                super().__init__()
                self.mlp = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4))
                for layer in self.mlp:
                    if isinstance(layer, nn.Linear):
                        nn.init.trunc_normal_(layer.weight, std=0.02)
                        nn.init.constant_(layer.bias, 0)
                self.last_layer = nn.utils.weight_norm(nn.Linear(4, 10, bias=False))
                self.last_layer.weight_g.data.fill_(1)
                if norm_last_layer:
                    self.last_layer.weight_g.requires_grad = False

            def forward(self, x):
                return self.last_layer(F.normalize(self.mlp(x), dim=-1, p=2))

        class MultiCrop(nn.Module):
            def __init__(self, norm_last_layer):
                super().__init__()
                self.backbone = nn.Sequential(
                    nn.Conv2d(3, 4, 3, padding=1), nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
                )
                self.head = Head(norm_last_layer)

            def forward(self, crops):
                ends = m.cumsum(m.unique_consecutive(m.tensor([c.shape[-1] for c in crops]), return_counts=True)[1], 0)
                start, feats = 0, m.empty(0)
                for end in ends:
                    feats = m.cat((feats, self.backbone(m.cat(crops[start:end]))))
                    start = end
                return self.head(feats)

        student, teacher = MultiCrop(False), MultiCrop(True)
        teacher.load_state_dict(student.state_dict())
        for p in teacher.parameters():
            p.requires_grad = False
        center = m.zeros(1, 10)
        temps = np.concatenate((np.linspace(0.04, 0.07, 1), np.ones(1) * 0.07))
        regularized = [p for n, p in student.named_parameters() if p.requires_grad and p.ndim > 1]
        plain = [p for n, p in student.named_parameters() if p.requires_grad and p.ndim <= 1]
        opt = m.optim.AdamW([{"params": regularized}, {"params": plain, "weight_decay": 0.0}])
        iters = np.arange(4)
        lr_schedule = 1e-6 + 0.5 * (1e-3 - 1e-6) * (1 + np.cos(np.pi * iters / len(iters)))
        momentum_schedule = 1 + 0.5 * (0.996 - 1) * (1 + np.cos(np.pi * iters / len(iters)))
        out = []
        for it in range(4):
            epoch = it // 2
            for i, group in enumerate(opt.param_groups):
                group["lr"] = lr_schedule[it]
                if i == 0:
                    group["weight_decay"] = 0.04
            crops = [m.rand(3, 3, 6, 6), m.rand(3, 3, 6, 6), m.rand(3, 3, 3, 3), m.rand(3, 3, 3, 3)]
            t_out = teacher(crops[:2])
            s_out = (student(crops) / 0.1).chunk(4)
            q_out = F.softmax((t_out - center) / temps[epoch], dim=-1).detach().chunk(2)
            total, terms = 0, 0
            for iq, q in enumerate(q_out):
                for v in range(len(s_out)):
                    if v != iq:
                        total += m.sum(-q * F.log_softmax(s_out[v], dim=-1), dim=-1).mean()
                        terms += 1
            loss = total / terms
            with m.no_grad():
                center = center * 0.9 + m.sum(t_out, dim=0, keepdim=True) / len(t_out) * 0.1
            opt.zero_grad()
            loss.backward()
            for p in student.parameters():
                if p.grad is not None:
                    coef = 3.0 / (p.grad.data.norm(2) + 1e-6)
                    if coef < 1:
                        p.grad.data.mul_(coef)
            if epoch < 1:
                for n, p in student.named_parameters():
                    if "last_layer" in n:
                        p.grad = None
            opt.step()
            with m.no_grad():
                for pq, pk in zip(student.parameters(), teacher.parameters()):
                    pk.data.mul_(momentum_schedule[it]).add_((1 - momentum_schedule[it]) * pq.detach().data)
            out += [loss.detach(), center.sum()]
        return out + [p.detach() for p in teacher.parameters()]
    finally:
        _restore(m)


@pytest.mark.slow
@pytest.mark.parametrize("program", [simclr, byol, moco, barlow_twins_and_vicreg, dino], ids=lambda p: p.__name__)
def test_self_supervised_program_matches_torch(program):
    _both(program, F64)
