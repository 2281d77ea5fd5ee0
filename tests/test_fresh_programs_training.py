"""Training scaffolding of the kinds public repositories wrap around their models, each written once against
torch's API and run with torch and with batched_grad from the same seed (float64 where the program allows): a
pytorch-template style trainer (validation split by SubsetRandomSampler, metric tracking, monitor-based early stop,
checkpoint resume with optimizer and scheduler state), the data-loading pieces (weighted, batch and distributed
samplers, random_split, dict/namedtuple collation through torch.utils.data._utils.collate, iterable datasets),
every lr scheduler with mid-run resumption plus warmup wrappers subclassing _LRScheduler, SWA and EMA averaging,
gradient accumulation with clipping, weight/spectral norm and pruning, full-state checkpoints with RNG states,
CPU autocast with a disabled GradScaler, fine-tuning parameter groups and checkpoint averaging."""

import collections
import importlib
import io
import math
from functools import partial

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

F64 = dict(rtol=1e-9, atol=1e-11)


def _both(program, tolerance=F64, **kwargs):
    expected, actual = program(torch, **kwargs), program(bg, **kwargs)
    assert_same(actual, expected, **tolerance)


def _float64(m, seed=0):
    m.manual_seed(seed)
    np.random.seed(seed)
    m.set_default_dtype(m.float64)


def _restore(m):
    m.set_default_dtype(m.float32)


def template_trainer(m):
    """An MNIST-shaped conv net trained by a trainer class: the validation indices split off by a NumPy shuffle and
    served by SubsetRandomSampler, running averages per metric, a 'min val_loss' monitor, a checkpoint per epoch
    (model, optimizer, scheduler, monitor best) and a second trainer resuming from it."""
    nn, F, data = m.nn, m.nn.functional, m.utils.data
    _float64(m, 3)
    try:
        g = m.Generator().manual_seed(7)
        dataset = data.TensorDataset(m.rand(40, 1, 28, 28, generator=g), m.randint(0, 10, (40,), generator=g))
        order = np.arange(40)
        np.random.seed(0)
        np.random.shuffle(order)
        train_loader = data.DataLoader(dataset, 8, sampler=data.SubsetRandomSampler(order[8:]))
        valid_loader = data.DataLoader(dataset, 8, sampler=data.SubsetRandomSampler(order[:8]))

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1, self.conv2 = nn.Conv2d(1, 10, 5), nn.Conv2d(10, 20, 5)
                self.drop, self.fc1, self.fc2 = nn.Dropout2d(), nn.Linear(320, 50), nn.Linear(50, 10)

            def forward(self, x):
                x = F.relu(F.max_pool2d(self.conv1(x), 2))
                x = F.relu(F.max_pool2d(self.drop(self.conv2(x)), 2)).view(-1, 320)
                x = F.dropout(F.relu(self.fc1(x)), training=self.training)
                return F.log_softmax(self.fc2(x), dim=1)

        def top3(output, target):
            with m.no_grad():
                pred = m.topk(output, 3, dim=1)[1]
                return sum(m.sum(pred[:, i] == target).item() for i in range(3)) / len(target)

        def run(epochs, checkpoint=None):
            model = Net()
            opt = m.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-3, amsgrad=True)
            sched = m.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
            start, best, log = 1, math.inf, []
            if checkpoint is not None:
                state = m.load(io.BytesIO(checkpoint))
                model.load_state_dict(state["state_dict"])
                opt.load_state_dict(state["optimizer"])
                sched.load_state_dict(state["lr_scheduler"])
                start, best = state["epoch"] + 1, state["monitor_best"]
            for epoch in range(start, epochs + 1):
                model.train()
                totals = collections.defaultdict(float)
                for x, y in train_loader:
                    opt.zero_grad()
                    output = model(x)
                    loss = F.nll_loss(output, y)
                    loss.backward()
                    opt.step()
                    totals["loss"] += loss.item() / len(train_loader)
                    totals["top3"] += top3(output, y) / len(train_loader)
                model.eval()
                with m.no_grad():
                    val = sum(F.nll_loss(model(x), y).item() for x, y in valid_loader) / len(valid_loader)
                sched.step()
                best = min(best, val)
                log += [totals["loss"], totals["top3"], val, best]
                buffer = io.BytesIO()
                state = {"epoch": epoch, "state_dict": model.state_dict(), "optimizer": opt.state_dict()}
                m.save({**state, "lr_scheduler": sched.state_dict(), "monitor_best": best}, buffer)
                checkpoint = buffer.getvalue()
            return log, checkpoint, model

        log, checkpoint, _ = run(2)
        m.manual_seed(5)
        resumed, _, model = run(3, checkpoint)
        return log + resumed + [p.detach() for p in model.parameters()]
    finally:
        _restore(m)


@pytest.mark.slow
def test_template_trainer():
    _both(template_trainer)


def data_pipeline(m):
    """Class-balancing weights for a WeightedRandomSampler, a named ConcatDataset, dicts with nested lists and
    namedtuples through default_collate (imported from torch.utils.data._utils.collate), a BatchSampler, a seeded
    random_split, the shuffle order of the default generator across epochs, an iterable dataset sharded by
    get_worker_info and a DistributedSampler's shares."""
    data = m.utils.data
    collate = importlib.import_module(m.__name__ + ".utils.data._utils.collate").default_collate
    m.manual_seed(0)
    out = []
    target = m.tensor([0] * 18 + [1] * 2)
    weights = (1.0 / m.bincount(target))[target]
    sampler = data.WeightedRandomSampler(weights.double(), len(weights))
    for x, t in data.DataLoader(data.TensorDataset(m.arange(20.0), target), batch_size=5, sampler=sampler):
        out += [x, t]
    out.append(m.tensor(list(data.WeightedRandomSampler(weights, 6, False, m.Generator().manual_seed(3)))))

    class Named(data.ConcatDataset):
        def __init__(self, parts):
            self.names = list(parts)
            super().__init__(list(parts.values()))

        def __getitem__(self, i):
            return self.names.index(
                self.names[int(np.searchsorted(self.cumulative_sizes, i, "right"))]
            ), super().__getitem__(i)

    rows = [{"x": m.full((2,), float(i)), "y": i, "w": i / 4, "meta": {"tags": [i, i * 2]}} for i in range(7)]
    named = Named({"a": rows[:3], "b": rows[3:]})
    batch = collate([named[i][1] for i in (0, 4, 6)])
    out += [named[5][0], batch["x"], batch["y"], batch["w"], *batch["meta"]["tags"]]
    Sample = collections.namedtuple("Sample", "image label")
    samples = [Sample(m.ones(2) * i, [i, np.float64(i) / 3]) for i in range(9)]
    loader = data.DataLoader(samples, 4, shuffle=True, drop_last=True, generator=m.Generator().manual_seed(11))
    for b in loader:
        out += [b.image, *b.label]
    split = data.random_split(range(20), [12, 5, 3], generator=m.Generator().manual_seed(42))
    out += [m.tensor(s.indices) for s in split]
    batches = data.BatchSampler(data.SubsetRandomSampler(range(0, 20, 2), m.Generator().manual_seed(5)), 3, False)
    out += [m.tensor(b) for b in batches]
    m.manual_seed(1234)
    shuffled = data.DataLoader(range(10), batch_size=4, shuffle=True)
    out += [b for _ in range(2) for b in shuffled] + [m.rand(2)]

    class Stream(data.IterableDataset):
        def __iter__(self):
            info = data.get_worker_info()
            return iter(range(3, 14) if info is None else range(info.id, 14, info.num_workers))

    out += list(data.DataLoader(Stream(), batch_size=4, drop_last=True, worker_init_fn=lambda worker: None))
    for rank in range(3):
        shares = data.DistributedSampler(range(10), num_replicas=3, rank=rank, seed=2)
        shares.set_epoch(1)
        out.append(m.tensor(list(shares)))
    return out


def test_data_pipeline():
    _both(data_pipeline, dict(rtol=0, atol=0))


SCHEDULERS = {
    "LambdaLR": lambda s, o: s.LambdaLR(o, [lambda e: 0.9**e, lambda e: 1 / (e + 1)]),
    "MultiplicativeLR": lambda s, o: s.MultiplicativeLR(o, lambda e: 0.95),
    "StepLR": lambda s, o: s.StepLR(o, step_size=2, gamma=0.1),
    "MultiStepLR": lambda s, o: s.MultiStepLR(o, milestones=[3, 6, 6], gamma=0.5),
    "ExponentialLR": lambda s, o: s.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda s, o: s.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
    "CosineAnnealingWarmRestarts": lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=1e-3),
    "CyclicLR": lambda s, o: s.CyclicLR(o, 1e-3, 0.1, step_size_up=2, step_size_down=3, mode="triangular2"),
    "CyclicLR_exp": lambda s, o: s.CyclicLR(o, 1e-3, 0.1, step_size_up=4, mode="exp_range", gamma=0.85),
    "OneCycleLR": lambda s, o: s.OneCycleLR(o, max_lr=[0.1, 0.05], total_steps=16, three_phase=True),
    "OneCycleLR_linear": lambda s, o: s.OneCycleLR(o, 0.1, epochs=4, steps_per_epoch=4, anneal_strategy="linear"),
    "PolynomialLR": lambda s, o: s.PolynomialLR(o, total_iters=6, power=2.0),
    "LinearLR": lambda s, o: s.LinearLR(o, start_factor=0.25, total_iters=4),
    "ConstantLR": lambda s, o: s.ConstantLR(o, factor=0.5, total_iters=3),
    "SequentialLR": lambda s, o: s.SequentialLR(o, [s.LinearLR(o, 0.1, total_iters=3), s.CosineAnnealingLR(o, 8)], [3]),
    "ChainedScheduler": lambda s, o: s.ChainedScheduler([s.ConstantLR(o, 0.1, total_iters=2), s.ExponentialLR(o, 0.9)]),
    "ReduceLROnPlateau": lambda s, o: s.ReduceLROnPlateau(o, factor=0.5, patience=1, cooldown=1, min_lr=[0.02, 0.0]),
}


def scheduled_resumption(m, name):
    """16 steps of SGD with momentum on two parameter groups under the scheduler, the learning rates and momenta of
    every step; a fresh model, optimizer and scheduler loaded at step 8 from a saved checkpoint continue to the same
    losses and rates."""
    _float64(m, 1)
    try:
        x, y = m.randn(16, 2), m.randn(16, 1)

        def build():
            m.manual_seed(2)
            model = m.nn.Linear(2, 1)
            groups = [{"params": [model.weight]}, {"params": [model.bias], "lr": 0.01}]
            opt = m.optim.SGD(groups, lr=0.05, momentum=0.9)
            return model, opt, SCHEDULERS[name](m.optim.lr_scheduler, opt)

        def steps(model, opt, sched, start, stop):
            trace = []
            for step in range(start, stop):
                opt.zero_grad()
                loss = m.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                sched.step(1.0 if step % 5 else 2.0) if name == "ReduceLROnPlateau" else sched.step()
                trace += [loss.item(), *(g["lr"] for g in opt.param_groups), opt.param_groups[0]["momentum"]]
            return trace

        model, opt, sched = build()
        first = steps(model, opt, sched, 0, 8)
        buffer = io.BytesIO()
        m.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()}, buffer)
        rest = steps(model, opt, sched, 8, 16)
        model2, opt2, sched2 = build()
        buffer.seek(0)
        state = m.load(buffer)
        model2.load_state_dict(state["model"])
        opt2.load_state_dict(state["opt"])
        sched2.load_state_dict(state["sched"])
        resumed = steps(model2, opt2, sched2, 8, 16)
        assert resumed == rest
        return first + rest
    finally:
        _restore(m)


@pytest.mark.parametrize("name", SCHEDULERS)
def test_scheduled_resumption(name):
    _both(scheduled_resumption, name=name)


def warmup_wrappers(m):
    """A warmup scheduler subclassing _LRScheduler that hands over to StepLR, a cosine-with-restarts subclass that
    overrides step, LambdaLR over a functools.partial (its state saved and loaded) and a Lookahead optimizer
    wrapper keeping slow weights in its own state."""
    sched_mod = m.optim.lr_scheduler
    _float64(m, 2)
    try:

        class Warmup(sched_mod._LRScheduler):
            def __init__(self, optimizer, multiplier, total_epoch, after):
                self.multiplier, self.total_epoch, self.after, self.finished = multiplier, total_epoch, after, False
                super().__init__(optimizer)

            def get_lr(self):
                if self.last_epoch > self.total_epoch:
                    if not self.finished:
                        self.after.base_lrs = [lr * self.multiplier for lr in self.base_lrs]
                        self.finished = True
                    return self.after.get_last_lr()
                scale = (self.multiplier - 1.0) * self.last_epoch / self.total_epoch + 1.0
                return [lr * scale for lr in self.base_lrs]

            def step(self, epoch=None):
                if self.finished:
                    self.after.step()
                    self._last_lr = self.after.get_last_lr()
                else:
                    super().step(epoch)

        class CosineWarmRestarts(sched_mod._LRScheduler):
            def __init__(self, optimizer, cycle, warmup, max_lr, min_lr):
                self.cycle, self.warmup, self.max_lr, self.min_lr, self.position = cycle, warmup, max_lr, min_lr, -1
                super().__init__(optimizer)

            def get_lr(self):
                if self.position < self.warmup:
                    return [self.min_lr + (self.max_lr - self.min_lr) * max(self.position, 0) / self.warmup]
                phase = (self.position - self.warmup) / (self.cycle - self.warmup)
                return [self.min_lr + (self.max_lr - self.min_lr) * (1 + math.cos(math.pi * phase)) / 2]

            def step(self, epoch=None):
                self.position = (self.position + 1) % self.cycle
                self.last_epoch += 1
                for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
                    group["lr"] = lr
                self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

        def linear_warmup(step, warmup, total):
            return step / max(1, warmup) if step < warmup else max(0.0, (total - step) / max(1, total - warmup))

        model = m.nn.Sequential(m.nn.Linear(3, 8), m.nn.Tanh(), m.nn.Linear(8, 1))
        x = m.randn(24, 3)
        y = x.sum(1, keepdim=True).sin()
        out = []
        opt = m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        for sched in (Warmup(opt, 8, 3, sched_mod.StepLR(opt, 2, 0.5)), CosineWarmRestarts(opt, 6, 2, 0.1, 1e-3)):
            for _ in range(12):
                opt.step()
                sched.step()
                out.append(opt.param_groups[0]["lr"])
        opt = m.optim.AdamW(model.parameters(), lr=0.02)
        lam = sched_mod.LambdaLR(opt, partial(linear_warmup, warmup=3, total=12))
        for _ in range(6):
            opt.zero_grad()
            m.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            lam.step()
        state = lam.state_dict()
        again = sched_mod.LambdaLR(
            m.optim.AdamW(model.parameters(), lr=0.02), partial(linear_warmup, warmup=3, total=12)
        )
        again.load_state_dict(state)
        out += [*lam.get_last_lr(), again.last_epoch, *again.get_last_lr(), len(state["lr_lambdas"])]

        base = m.optim.Adam(model.parameters(), lr=0.05)
        slow = {}
        for step in range(9):
            base.zero_grad()
            loss = m.nn.functional.mse_loss(model(x), y)
            loss.backward()
            base.step()
            if step % 3 == 0:
                with m.no_grad():
                    for p in model.parameters():
                        s = slow.setdefault(p, p.detach().clone())
                        s += 0.5 * (p - s)
                        p.copy_(s)
            out.append(loss.item())
        return out + [base.state_dict()["state"][0]["exp_avg_sq"]]
    finally:
        _restore(m)


def test_warmup_wrappers():
    _both(warmup_wrappers)


def text_stream(m):
    """Tokenised lines streamed by two chained iterable datasets, padded by a collate_fn returning a dict with the
    raw strings; a map-style copy served by a length-bucketing batch sampler to an Embedding + packed GRU
    classifier trained with Adam; StackDataset by position and by name."""
    data, rnn = m.utils.data, m.nn.utils.rnn
    _float64(m)
    try:
        lines = ["the cat sat", "a dog ran far away", "birds fly", "fish swim in the sea today", "it rains"]
        vocab = {w: i + 1 for i, w in enumerate(sorted({w for line in lines for w in line.split()}))}

        def sample(line, label):
            return {"text": line, "ids": m.tensor([vocab[w] for w in line.split()]), "label": label}

        class Stream(data.IterableDataset):
            def __init__(self, part, label):
                self.part, self.label = part, label

            def __iter__(self):
                return (sample(line, self.label) for line in self.part)

        def collate(batch):
            ids = [b["ids"] for b in batch]
            lengths, labels = m.tensor([len(x) for x in ids]), m.tensor([b["label"] for b in batch])
            padded = rnn.pad_sequence(ids, batch_first=True)
            return {"text": [b["text"] for b in batch], "ids": padded, "lengths": lengths, "label": labels}

        out = []
        for batch in data.DataLoader(
            data.ChainDataset([Stream(lines[:2], 0), Stream(lines[2:], 1)]), 3, collate_fn=collate
        ):
            out += [batch["text"] == [line for line in lines if line in batch["text"]], batch["ids"], batch["label"]]

        class Bucketed(data.Sampler):
            def __init__(self, lengths, size, generator):
                self.lengths, self.size, self.generator = lengths, size, generator

            def __iter__(self):
                order = m.randperm(len(self.lengths), generator=self.generator).tolist()
                for start in range(0, len(order), 2 * self.size):
                    chunk = sorted(order[start : start + 2 * self.size], key=lambda i: self.lengths[i])
                    yield from (chunk[i : i + self.size] for i in range(0, len(chunk), self.size))

        copies = [sample(lines[i % 5], i % 2) for i in range(15)]
        lengths = [len(c["ids"]) for c in copies]
        loader = data.DataLoader(
            copies, batch_sampler=Bucketed(lengths, 4, m.Generator().manual_seed(3)), collate_fn=collate
        )
        emb, gru, head = (
            m.nn.Embedding(len(vocab) + 1, 8, padding_idx=0),
            m.nn.GRU(8, 8, batch_first=True),
            m.nn.Linear(8, 2),
        )
        opt = m.optim.Adam([*emb.parameters(), *gru.parameters(), *head.parameters()], lr=0.01)
        for _ in range(2):
            for batch in loader:
                packed = rnn.pack_padded_sequence(emb(batch["ids"]), batch["lengths"], True, enforce_sorted=False)
                loss = m.nn.functional.cross_entropy(head(gru(packed)[1][-1]), batch["label"])
                opt.zero_grad()
                loss.backward()
                opt.step()
                out += [batch["lengths"], loss.item()]
        by_position = data.StackDataset(data.TensorDataset(m.arange(4.0)), m.tensor([1, 0, 1, 1]))
        by_name = data.StackDataset(x=m.arange(4.0), y=m.tensor([1, 0, 1, 1]))
        batch = data.default_collate([by_name[i] for i in range(3)])
        return out + [emb.weight[0], by_position[2][0][0], by_position[2][1], batch["x"], batch["y"]]
    finally:
        _restore(m)


@pytest.mark.slow
def test_text_stream():
    _both(text_stream)
