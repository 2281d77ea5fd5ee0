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
import torch

import batched_grad as bg
from oracle import assert_same

F64 = dict(rtol=1e-9, atol=1e-11)


def _both(program, tolerance=F64):
    expected, actual = program(torch), program(bg)
    assert_same(actual, expected, **tolerance)


def _float64(m, seed=0):
    m.manual_seed(seed)
    m.set_default_dtype(m.float64)


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
