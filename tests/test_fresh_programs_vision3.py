"""Vision training tricks and detection targets as public code writes them, run with torch and with batched_grad
from the same seed in float64 and compared number for number (siblings: test_fresh_programs_vision.py and
test_fresh_programs_vision2.py): mixup with NumPy's beta draw and randperm (facebookresearch/mixup-cifar10), cutmix
with a NumPy-integer box (clovaai/CutMix-PyTorch), a torch.distributions.Beta mixing weight with timm's soft one-hot
targets, label smoothing by hand and built in, distillation's temperature KL (haitongli/knowledge-distillation-
pytorch), test-time augmentation by flips and rot90 with an antialiased resize, and YOLOv5's target building, CIoU
and focal BCE (ultralytics/yolov5)."""

import math

import numpy as np
import pytest

from test_fresh_programs_vision import _both, _float64


def training_tricks(m):
    nn, F = m.nn, m.nn.functional
    _float64(m)
    rng = np.random.RandomState(0)

    def net(width):
        return nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Dropout(0.1), nn.Linear(2 * width, 5),
        )  # fmt: skip

    teacher, student = net(8), net(4)
    X, Y = m.rand(8, 3, 16, 16), m.randint(0, 5, (8,))
    opt = m.optim.SGD(teacher.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    ce, out = nn.CrossEntropyLoss(), []
    for i in range(0, 8, 4):
        lam = rng.beta(1.0, 1.0)
        perm = m.randperm(4)
        mixed = lam * X[i : i + 4] + (1 - lam) * X[i : i + 4][perm, :]
        logits = teacher(mixed)
        loss = lam * ce(logits, Y[i : i + 4]) + (1 - lam) * ce(logits, Y[i : i + 4][perm])
        opt.zero_grad()
        loss.backward()
        opt.step()
        _, predicted = m.max(logits.data, 1)
        correct = (
            lam * predicted.eq(Y[i : i + 4]).sum().float() + (1 - lam) * predicted.eq(Y[i : i + 4][perm]).sum().float()
        )
        out += [loss.detach(), correct]
    beta = m.distributions.Beta(m.tensor(0.4), m.tensor(0.4))
    for i in range(0, 8, 4):
        batch, target = X[i : i + 4].clone(), Y[i : i + 4]
        lam, perm = rng.beta(1.0, 1.0), m.randperm(4)
        cut = np.sqrt(1.0 - lam)
        cx, cy = rng.randint(16), rng.randint(16)
        x1, x2 = np.clip(cx - int(16 * cut) // 2, 0, 16), np.clip(cx + int(16 * cut) // 2, 0, 16)
        y1, y2 = np.clip(cy - int(16 * cut) // 2, 0, 16), np.clip(cy + int(16 * cut) // 2, 0, 16)
        batch[:, :, x1:x2, y1:y2] = batch[perm, :, x1:x2, y1:y2]
        lam = 1 - ((x2 - x1) * (y2 - y1) / (batch.size()[-1] * batch.size()[-2]))
        logits = teacher(batch)
        loss = ce(logits, target) * lam + ce(logits, target[perm]) * (1.0 - lam)
        opt.zero_grad()
        loss.backward()
        opt.step()
        weight = beta.sample()
        off = 0.1 / 5
        hot = m.full((4, 5), off).scatter_(1, target.view(-1, 1), 1.0 - 0.1 + off)
        soft = hot * float(weight) + hot.flip(0) * (1.0 - float(weight))
        soft_loss = m.sum(-soft * F.log_softmax(teacher(batch), dim=-1), dim=-1).mean()
        out += [loss.detach(), weight, soft_loss.detach()]
    s_opt, T, alpha = m.optim.Adam(student.parameters(), lr=1e-3), 4, 0.9
    teacher.eval()
    for _ in range(3):
        with m.no_grad():
            soft_targets = F.softmax(teacher(X) / T, dim=1)
        logits = student(X)
        kd = nn.KLDivLoss()(F.log_softmax(logits / T, dim=1), soft_targets) * (alpha * T * T)
        logprobs = F.log_softmax(logits, dim=-1)
        smoothed = (
            0.9 * -logprobs.gather(dim=-1, index=Y.unsqueeze(1)).squeeze(1) - 0.1 * logprobs.mean(dim=-1)
        ).mean()
        loss = kd + F.cross_entropy(logits, Y) * (1.0 - alpha) + 0.1 * smoothed
        s_opt.zero_grad()
        loss.backward()
        s_opt.step()
        out += [loss.detach(), nn.CrossEntropyLoss(label_smoothing=0.1)(logits, Y).detach()]
    student.eval()
    with m.no_grad():
        views = [X, m.flip(X, dims=[3]), X.flip(2), m.rot90(X, 1, (2, 3))]
        out.append(m.stack([F.softmax(student(v), dim=1) for v in views]).mean(0))
        small = F.interpolate(X, size=(11, 11), mode="bilinear", antialias=True)
        features = teacher[:3]
        maps = [m.rot90(features(m.rot90(small, k, dims=(2, 3))), -k, dims=(2, 3)) for k in range(4)]
        maps += [features(small.flip(d)).flip(d) for d in (2, 3)]
        out += [m.stack(maps).mean(0), m.stack(maps).amax(0)]
    return out


@pytest.mark.slow
def test_training_tricks():
    _both(training_tricks)


def _ciou(m, box1, box2, eps=1e-7):
    (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
    b1x1, b1x2, b1y1, b1y2 = x1 - w1 / 2, x1 + w1 / 2, y1 - h1 / 2, y1 + h1 / 2
    b2x1, b2x2, b2y1, b2y2 = x2 - w2 / 2, x2 + w2 / 2, y2 - h2 / 2, y2 + h2 / 2
    inter = (b1x2.minimum(b2x2) - b1x1.maximum(b2x1)).clamp(0) * (b1y2.minimum(b2y2) - b1y1.maximum(b2y1)).clamp(0)
    iou = inter / (w1 * h1 + w2 * h2 - inter + eps)
    cw, ch = b1x2.maximum(b2x2) - b1x1.minimum(b2x1), b1y2.maximum(b2y2) - b1y1.minimum(b2y1)
    rho2 = ((b2x1 + b2x2 - b1x1 - b1x2) ** 2 + (b2y1 + b2y2 - b1y1 - b1y2) ** 2) / 4
    v = (4 / math.pi**2) * (m.atan(w2 / h2) - m.atan(w1 / h1)).pow(2)
    with m.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return iou - (rho2 / (cw**2 + ch**2 + eps) + v * alpha)


def yolo_targets_and_loss(m):
    """YOLOv5's training loss: targets repeated per anchor with the anchor index appended, filtered by the
    width/height ratio, spread to neighbouring cells by offset masks (the .T unpacking of boolean pairs, a stacked
    5-way mask), predictions gathered at (image, anchor, row, col), CIoU box loss, objectness targets written by
    index, smoothed class targets through t[range(n), cls], focal BCE with pos_weight, autobalanced layer weights."""
    _float64(m)
    nn = m.nn
    na, nc, strides = 3, 3, (8.0, 16.0)
    anchors = m.tensor([[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119]]).float().view(2, -1, 2)
    anchors = anchors / m.tensor(strides).view(-1, 1, 1)
    b1 = nn.Sequential(*[layer for i in range(3) for layer in (nn.Conv2d(3 if i == 0 else 8, 8, 3, 2, 1), nn.SiLU())])
    b2 = nn.Sequential(nn.Conv2d(8, 8, 3, 2, 1), nn.SiLU())
    heads = nn.ModuleList(nn.Conv2d(8, na * (nc + 5), 1) for _ in strides)
    for head, s in zip(heads, strides):
        bias = head.bias.view(na, -1)
        bias.data[:, 4] += math.log(8 / (640 / s) ** 2)
        bias.data[:, 5:] += math.log(0.6 / (nc - 0.99999))
        head.bias = nn.Parameter(bias.view(-1), requires_grad=True)

    def focal(loss_fn, pred, true, gamma=1.5, alpha=0.25):
        loss = loss_fn(pred, true)
        prob = m.sigmoid(pred)
        p_t = true * prob + (1 - true) * (1 - prob)
        loss *= (true * alpha + (1 - true) * (1 - alpha)) * (1.0 - p_t) ** gamma
        return loss.mean()

    bce = nn.BCEWithLogitsLoss(pos_weight=m.tensor([1.0]), reduction="none")
    balance, positive, negative = [4.0, 1.0, 0.25, 0.06, 0.02], 1.0 - 0.05, 0.05

    def build_targets(preds, targets):
        nt, found = targets.shape[0], []
        gain = m.ones(7)
        ai = m.arange(na).float().view(na, 1).repeat(1, nt)
        targets = m.cat((targets.repeat(na, 1, 1), ai[..., None]), 2)
        off = m.tensor([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]]).float() * 0.5
        for i, p in enumerate(preds):
            gain[2:6] = m.tensor(p.shape)[[3, 2, 3, 2]]
            t = targets * gain
            r = t[..., 4:6] / anchors[i][:, None]
            t = t[m.max(r, 1 / r).max(2)[0] < 4.0]
            gxy = t[:, 2:4]
            gxi = gain[[2, 3]] - gxy
            left, top = ((gxy % 1 < 0.5) & (gxy > 1)).T
            right, bottom = ((gxi % 1 < 0.5) & (gxi > 1)).T
            cells = m.stack((m.ones_like(left), left, top, right, bottom))
            t = t.repeat((5, 1, 1))[cells]
            offsets = (m.zeros_like(gxy)[None] + off[:, None])[cells]
            bc, gxy, gwh, a = t.chunk(4, 1)
            a, (b, c) = a.long().view(-1), bc.long().T
            gij = (gxy - offsets).long()
            gi, gj = gij.T
            where = (b, a, gj.clamp_(0, p.shape[2] - 1), gi.clamp_(0, p.shape[3] - 1))
            found.append((c, m.cat((gxy - gij, gwh), 1), where, anchors[i][a]))
        return found

    params = [*b1.parameters(), *b2.parameters(), *heads.parameters()]
    opt, out = m.optim.SGD(params, lr=0.01, momentum=0.937, nesterov=True), []
    for _ in range(3):
        f1 = b1(m.rand(2, 3, 64, 64))
        preds = []
        for head, f in zip(heads, (f1, b2(f1))):
            p = head(f)
            bs, _, ny, nx = p.shape
            preds.append(p.view(bs, na, nc + 5, ny, nx).permute(0, 1, 3, 4, 2).contiguous())
        targets = m.cat(
            [
                m.randint(0, 2, (6, 1)).double(),
                m.randint(0, 3, (6, 1)).double(),
                m.rand(6, 2) * 0.8 + 0.1,
                m.rand(6, 2) * 0.4 + 0.05,
            ],
            1,
        )
        lbox, lobj, lcls = m.zeros(1), m.zeros(1), m.zeros(1)
        for i, (p, (cls, box, where, anc)) in enumerate(zip(preds, build_targets(preds, targets))):
            tobj = m.zeros(p.shape[:4], dtype=p.dtype)
            if where[0].shape[0]:
                pxy, pwh, _, pcls = p[where].split((2, 2, 1, nc), 1)
                pbox = m.cat((pxy.sigmoid() * 2 - 0.5, (pwh.sigmoid() * 2) ** 2 * anc), 1)
                iou = _ciou(m, pbox, box).squeeze()
                lbox += (1.0 - iou).mean()
                tobj[where] = iou.detach().clamp(0).type(tobj.dtype)
                t = m.full_like(pcls, negative)
                t[range(where[0].shape[0]), cls] = positive
                lcls += focal(bce, pcls, t)
            obj = focal(bce, p[..., 4], tobj)
            lobj += obj * balance[i]
            balance[i] = balance[i] * 0.9999 + 0.0001 / obj.detach().item()
        balance = [x / balance[0] for x in balance]
        loss = (lbox * 0.05 + lobj + lcls * 0.5) * 2
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, max_norm=10.0)
        opt.step()
        out += [loss.detach(), m.cat((lbox, lobj, lcls)).detach(), balance[:2]]
    return out + [p.detach() for p in params]


@pytest.mark.slow
def test_yolo_targets_and_loss():
    _both(yolo_targets_and_loss)
