"""Training machinery as public programs use it, run with torch and with batched_grad from the same seed: every lr
scheduler with a checkpoint resumed through torch.save/torch.load, parametrizations, an EmbeddingBag text classifier
fed by a DataLoader, style transfer by LBFGS, a BiLSTM-CRF tagger, a tabular model with weighted/smoothed losses,
weighted sampling and torch's metric functions, and a spatial transformer beside stft log-mel features."""

import io
import math

import numpy as np
import pytest
import torch

import batched_grad as bg
from test_fresh_programs_dl2 import F64, _both

LBFGS_F64 = dict(rtol=1e-6, atol=1e-9)  # LBFGS's line search amplifies float64 rounding over its iterations


SCHEDULERS = {
    "lambda": lambda S, o: S.LambdaLR(o, lambda epoch: 0.9**epoch),
    "multiplicative": lambda S, o: S.MultiplicativeLR(o, lambda epoch: 0.95),
    "multistep": lambda S, o: S.MultiStepLR(o, milestones=[2, 4], gamma=0.3),
    "polynomial": lambda S, o: S.PolynomialLR(o, total_iters=5, power=1.5),
    "cosine": lambda S, o: S.CosineAnnealingLR(o, T_max=4, eta_min=1e-3),
    "warm_restarts": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=1e-4),
    "cyclic": lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2, mode="triangular2"),
    "cyclic_exp": lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=1, step_size_down=2, mode="exp_range", gamma=0.9),
    "one_cycle": lambda S, o: S.OneCycleLR(o, max_lr=0.2, total_steps=6, anneal_strategy="linear", three_phase=True),
    "sequential": lambda S, o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.1, total_iters=2), S.ExponentialLR(o, gamma=0.8)], milestones=[2]
    ),
    "chained": lambda S, o: S.ChainedScheduler([S.ConstantLR(o, factor=0.5, total_iters=2), S.StepLR(o, 2, 0.5)]),
}


def scheduled_training(m, name):
    """SGD with momentum on two parameter groups under one scheduler (or ReduceLROnPlateau on a validation loss);
    halfway the model, optimizer and scheduler states go through torch.save/torch.load into fresh objects, and the
    resumed run must continue exactly as the unbroken one."""
    nn, S = m.nn, m.optim.lr_scheduler
    m.manual_seed(1)
    x, y = m.randn(16, 3, dtype=m.float64), m.randn(16, 1, dtype=m.float64)

    def build():
        m.manual_seed(2)
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
        opt = m.optim.SGD(
            [{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 0.05}], lr=0.1, momentum=0.9
        )
        sched = S.ReduceLROnPlateau(opt, factor=0.5, patience=1, threshold=0.05) if name == "plateau" else None
        return model, opt, sched or SCHEDULERS[name](S, opt)

    def epoch(model, opt, sched):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step(loss.item()) if name == "plateau" else sched.step()
        return loss.detach(), [group["lr"] for group in opt.param_groups]

    model, opt, sched = build()
    record = [epoch(model, opt, sched) for _ in range(3)]
    buffer = io.BytesIO()
    m.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()}, buffer)
    unbroken = [epoch(model, opt, sched) for _ in range(3)]
    model, opt, sched = build()
    state = m.load(io.BytesIO(buffer.getvalue()), weights_only=False)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    sched.load_state_dict(state["sched"])
    resumed = [epoch(model, opt, sched) for _ in range(3)]
    assert all(a[1] == b[1] and a[0].item() == b[0].item() for a, b in zip(resumed, unbroken))
    return record, resumed, [p.detach() for p in model.parameters()]


@pytest.mark.parametrize("name", [*SCHEDULERS, "plateau"])
def test_scheduled_training(name):
    _both(scheduled_training, F64, name=name)


def parametrized_layers(m):
    """register_parametrization with custom modules (a symmetric map with right_inverse, skew then matrix_exp for an
    orthogonal weight, a Cayley map through linalg.solve, a fixed pruning mask), assignment through right_inverse,
    cached(), remove_parametrizations both ways; then the built-in orthogonal (three maps), spectral_norm and
    weight_norm trained a few Adam steps."""
    nn, P = m.nn, m.nn.utils.parametrize
    m.manual_seed(0)

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    class Skew(nn.Module):
        def forward(self, X):
            return X.triu(1) - X.triu(1).transpose(-1, -2)

    class Exp(nn.Module):
        def forward(self, X):
            return m.matrix_exp(X)

    class Cayley(nn.Module):
        def forward(self, X):
            eye = m.eye(X.shape[0], dtype=X.dtype)
            return m.linalg.solve(eye - X, eye + X)

    class Prune(nn.Module):
        def __init__(self, X):
            super().__init__()
            self.mask = m.bernoulli(m.full_like(X, 0.7))

        def forward(self, X):
            return X * self.mask

    out = []
    for maps in ([Symmetric()], [Skew(), Exp()], [Skew(), Cayley()], [Prune(m.ones(3, 3))]):
        layer = nn.Linear(3, 3).double()
        for mapping in maps:
            P.register_parametrization(layer, "weight", mapping.double())
        out.append(layer.weight)
    layer = nn.Linear(3, 3).double()
    P.register_parametrization(layer, "weight", Symmetric())
    target = m.rand(3, 3, dtype=m.float64)
    layer.weight = target + target.T
    with P.cached():
        out += [layer.weight @ layer.weight, layer.parametrizations.weight.original]
    P.remove_parametrizations(layer, "weight", leave_parametrized=False)
    out.append(layer.weight)
    x, y = m.randn(12, 4, dtype=m.float64), m.randn(12, 4, dtype=m.float64)
    for kind in ["matrix_exp", "cayley", "householder", "spectral", "weight_norm"]:
        m.manual_seed(4)
        model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4)).double()
        if kind == "spectral":
            nn.utils.parametrizations.spectral_norm(model[0], n_power_iterations=2)
        elif kind == "weight_norm":
            nn.utils.parametrizations.weight_norm(model[2])
        else:
            nn.utils.parametrizations.orthogonal(model[0], orthogonal_map=kind)
        opt = m.optim.Adam(model.parameters(), lr=0.05)
        for _ in range(3):
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        out += [loss.detach(), model[0].weight.detach(), model(x[:2]).detach()]
    return out


@pytest.mark.slow
def test_parametrized_layers():
    _both(parametrized_layers, F64)


def embedding_bag_classifier(m):
    """Token ids of variable-length texts concatenated with offsets (the cumsum of the lengths) in a collate_fn,
    nn.EmbeddingBag (mean) + Linear, random_split of the data, DataLoader shuffling, SGD with lr 5, gradient clipping
    at 0.1, StepLR stepped when validation accuracy drops; predictions by argmax."""
    nn, data = m.nn, m.utils.data
    m.manual_seed(0)
    rng = np.random.RandomState(1)
    rows = [(int(rng.randint(4)), rng.randint(1, 20, size=rng.randint(2, 8))) for _ in range(48)]

    def collate(batch):
        labels = m.tensor([label for label, _ in batch], dtype=m.int64)
        texts = [m.tensor(ids, dtype=m.int64) for _, ids in batch]
        offsets = m.tensor([0] + [t.size(0) for t in texts[:-1]]).cumsum(dim=0)
        return labels, m.cat(texts), offsets

    bag, fc = nn.EmbeddingBag(20, 8).double(), nn.Linear(8, 4).double()
    bag.weight.data.uniform_(-0.5, 0.5)
    fc.weight.data.uniform_(-0.5, 0.5)
    fc.bias.data.zero_()
    params = [*bag.parameters(), *fc.parameters()]
    opt = m.optim.SGD(params, lr=5)
    sched = m.optim.lr_scheduler.StepLR(opt, 1.0, gamma=0.1)
    train, valid = data.random_split(rows, [40, 8])
    best, record = None, []
    for _ in range(3):
        for labels, text, offsets in data.DataLoader(train, batch_size=8, shuffle=True, collate_fn=collate):
            loss = nn.functional.cross_entropy(fc(bag(text, offsets)), labels)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, 0.1)
            opt.step()
        with m.no_grad():
            labels, text, offsets = collate(list(valid))
            accuracy = (fc(bag(text, offsets)).argmax(1) == labels).sum().item() / len(labels)
        if best is not None and best > accuracy:
            sched.step()
        else:
            best = accuracy
        record.append((loss.detach(), accuracy, sched.get_last_lr()))
    return record, list(train.indices), bag.weight.detach()


@pytest.mark.slow
def test_embedding_bag_classifier():
    _both(embedding_bag_classifier, F64)


def style_transfer(m):
    """Content and style losses (Gram matrices of detached targets) inserted by add_module into a Sequential rebuilt
    from a conv stack, trimmed after the last loss module; LBFGS over the image with a closure that clamps it in
    place under no_grad."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    content, style = m.rand(1, 3, 10, 10, dtype=m.float64), m.rand(1, 3, 10, 10, dtype=m.float64)
    cnn = (
        nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3, padding=1), nn.ReLU()
        )
        .double()
        .eval()
    )

    def gram(x):
        a, b, c, d = x.size()
        features = x.view(a * b, c * d)
        return m.mm(features, features.t()).div(a * b * c * d)

    class Loss(nn.Module):
        def __init__(self, target, style):
            super().__init__()
            self.style, self.target = style, (gram(target) if style else target).detach()

        def forward(self, x):
            self.loss = F.mse_loss(gram(x) if self.style else x, self.target)
            return x

    model, losses, i = nn.Sequential(), [], 0
    for layer in cnn.children():
        i += isinstance(layer, nn.Conv2d)
        model.add_module(
            f"{type(layer).__name__}_{len(model)}", nn.ReLU(inplace=False) if isinstance(layer, nn.ReLU) else layer
        )
        if isinstance(layer, nn.Conv2d):
            for is_style, image in ((True, style), (False, content) if i == 2 else (None, None)):
                if is_style is not None:
                    losses.append(Loss(model(image), is_style))
                    model.add_module(f"loss_{len(model)}", losses[-1])
    last = max(j for j, layer in enumerate(model) if isinstance(layer, Loss))
    model = model[: last + 1]
    image = content.clone().requires_grad_(True)
    model.requires_grad_(False)
    opt = m.optim.LBFGS([image])
    scores = []

    def closure():
        with m.no_grad():
            image.clamp_(0, 1)
        opt.zero_grad()
        model(image)
        loss = sum(term.loss * (1000.0 if term.style else 1.0) for term in losses)
        loss.backward()
        scores.append(loss.detach())
        return loss

    for _ in range(2):
        opt.step(closure)
    return scores, image.detach()


@pytest.mark.slow
def test_style_transfer():
    _both(style_transfer, LBFGS_F64)


def crf_tagger(m):
    """A bidirectional LSTM's emissions under a CRF: transition scores with forbidden start/stop entries, the forward
    algorithm's log-sum-exp over per-tag lists of tensors, the gold path's score, the negative log likelihood trained
    by SGD with weight decay, and Viterbi decoding with backpointers (the decoded path compared too)."""
    nn = m.nn
    m.manual_seed(1)
    tags, start, stop = 4, 2, 3

    def log_sum_exp(vec):
        top = vec[0, vec.argmax(1).item()]
        return top + m.log(m.sum(m.exp(vec - top.view(1, -1).expand(1, vec.size(1)))))

    emb, lstm, out = (
        nn.Embedding(9, 4).double(),
        nn.LSTM(4, 3, bidirectional=True).double(),
        nn.Linear(6, tags).double(),
    )
    transitions = nn.Parameter(m.randn(tags, tags, dtype=m.float64))
    transitions.data[start, :] = -10000
    transitions.data[:, stop] = -10000

    def features(sentence):
        state = (m.randn(2, 1, 3, dtype=m.float64), m.randn(2, 1, 3, dtype=m.float64))
        return out(lstm(emb(sentence).view(len(sentence), 1, -1), state)[0].view(len(sentence), 6))

    def nll(sentence, gold):
        feats = features(sentence)
        alpha = m.full((1, tags), -10000.0, dtype=m.float64)
        alpha[0][start] = 0.0
        for feat in feats:
            alpha = m.cat(
                [
                    log_sum_exp(alpha + transitions[t].view(1, -1) + feat[t].view(1, -1).expand(1, tags)).view(1)
                    for t in range(tags)
                ]
            ).view(1, -1)
        total = log_sum_exp(alpha + transitions[stop])
        path = m.cat([m.tensor([start]), gold])
        score = m.zeros(1, dtype=m.float64)
        for i, feat in enumerate(feats):
            score = score + transitions[path[i + 1], path[i]] + feat[path[i + 1]]
        return total - (score + transitions[stop, path[-1]])

    def viterbi(sentence):
        viterbi_vars = m.full((1, tags), -10000.0, dtype=m.float64)
        viterbi_vars[0][start] = 0
        pointers = []
        for feat in features(sentence):
            step = [viterbi_vars + transitions[t] for t in range(tags)]
            best = [s.argmax(1).item() for s in step]
            pointers.append(best)
            viterbi_vars = (m.cat([s[0][b].view(1) for s, b in zip(step, best)]) + feat).view(1, -1)
        final = viterbi_vars + transitions[stop]
        path = [final.argmax(1).item()]
        for best in reversed(pointers):
            path.append(best[path[-1]])
        return final.max(), path[::-1][1:]

    data = [(m.tensor([0, 1, 2, 3, 4]), m.tensor([0, 1, 1, 0, 1])), (m.tensor([5, 6, 7, 8]), m.tensor([0, 1, 0, 1]))]
    params = [*emb.parameters(), *lstm.parameters(), *out.parameters(), transitions]
    opt = m.optim.SGD(params, lr=0.05, weight_decay=1e-4)
    losses = []
    for _ in range(3):
        for sentence, gold in data:
            loss = nll(sentence, gold)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    with m.no_grad():
        return losses, viterbi(data[0][0]), transitions.detach()


@pytest.mark.slow
def test_crf_tagger():
    _both(crf_tagger, F64)


def tabular_model(m, loss_kind):
    """Embeddings per categorical column with embedding dropout, BatchNorm1d on the numerical columns, blocks of
    Linear/ReLU(inplace)/BatchNorm1d/Dropout; cross entropy plain, class-weighted from bincount, label-smoothed
    (summed) or with ignore_index; a confusion matrix by bincount. Then WeightedRandomSampler over a Subset with a
    seeded Generator, top-k, argsort, unique (with counts, with rows) and searchsorted buckets."""
    nn, data = m.nn, m.utils.data
    rng = np.random.RandomState(0)
    categorical = m.tensor(np.stack([rng.randint(0, k, 64) for k in (3, 2, 4)], 1))
    numerical = m.tensor(rng.randn(64, 3))
    y = m.tensor(((numerical[:, 0] - 0.4 * categorical[:, 0]).numpy() > -0.3).astype(np.int64))
    m.manual_seed(0)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = nn.ModuleList([nn.Embedding(k, (k + 1) // 2) for k in (3, 2, 4)])
            self.drop, self.norm = nn.Dropout(0.3), nn.BatchNorm1d(3)
            self.layers = nn.Sequential(
                nn.Linear(8, 16), nn.ReLU(inplace=True), nn.BatchNorm1d(16), nn.Dropout(0.3), nn.Linear(16, 2)
            )

        def forward(self, cat, num):
            x = self.drop(m.cat([e(cat[:, i]) for i, e in enumerate(self.embeddings)], 1))
            return self.layers(m.cat([x, self.norm(num)], 1))

    model = Model().double()
    counts = m.bincount(y, minlength=2)
    loss_fn = {
        "plain": nn.CrossEntropyLoss(),
        "weighted": nn.CrossEntropyLoss(weight=counts.sum() / (2.0 * counts.double())),
        "smoothing": nn.CrossEntropyLoss(label_smoothing=0.1, reduction="sum"),
        "ignore": nn.CrossEntropyLoss(ignore_index=-100, weight=m.tensor([1.0, 2.0], dtype=m.float64)),
    }[loss_kind]
    opt = m.optim.Adam(model.parameters(), lr=0.01)
    target = y.clone()
    target[::5] = -100 if loss_kind == "ignore" else target[::5]
    losses = []
    for _ in range(4):
        loss = loss_fn(model(categorical[:48], numerical[:48]), target[:48])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    model.eval()
    with m.no_grad():
        logits = model(categorical[48:], numerical[48:])
    confusion = m.bincount(y[48:] * 2 + logits.argmax(1), minlength=4).reshape(2, 2)
    train = data.Subset(data.TensorDataset(categorical, numerical, y), range(48))
    weights = (1.0 / counts.double())[y[:48]]
    sampler = data.WeightedRandomSampler(weights, 48, replacement=True, generator=m.Generator().manual_seed(3))
    drawn = [batch[2] for batch in data.DataLoader(train, batch_size=16, sampler=sampler)]
    probs = logits.softmax(1)
    values, counts_of = m.unique(probs.topk(1, dim=1)[1], return_counts=True)
    rows, inverse = m.unique(categorical[48:], dim=0, return_inverse=True)
    buckets = m.searchsorted(m.linspace(0, 1, 5, dtype=m.float64), probs[:, 1].contiguous())
    return losses, confusion, drawn, probs.argsort(0, descending=True), values, counts_of, rows, inverse, buckets


@pytest.mark.slow
@pytest.mark.parametrize("loss_kind", ["plain", "weighted", "smoothing", "ignore"])
def test_tabular_model(loss_kind):
    _both(tabular_model, F64, loss_kind=loss_kind)


def test_float_features_or_class_weights_with_a_double_model_are_refused_as_by_torch():
    for m in (torch, bg):
        with pytest.raises(RuntimeError, match=r"mixed dtype \(CPU\): expect parameter to have scalar type of Float"):
            m.nn.BatchNorm1d(3).double()(m.randn(4, 3))
        counts = m.tensor([3, 5])
        with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
            m.nn.CrossEntropyLoss(weight=counts.sum() / (2.0 * counts))(
                m.randn(4, 2, dtype=m.float64), m.ones(4).long()
            )


def spatial_transformer_and_log_mel(m):
    """A spatial transformer: a localization net regressing 2x3 affine parameters from an identity start
    (weight.data.zero_(), bias.data.copy_), F.affine_grid + F.grid_sample, a classifier with Dropout2d, SGD and
    nll_loss, the test loss with the deprecated size_average=False. Then log-mel features: torch.stft with a
    hann_window (reflect padding), a triangular mel filterbank from clamp(minimum(...)), and istft back."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    localization = nn.Sequential(nn.Conv2d(1, 4, 5), nn.MaxPool2d(2, stride=2), nn.ReLU(True)).double()
    fc_loc = nn.Sequential(nn.Linear(4 * 4 * 4, 8), nn.ReLU(True), nn.Linear(8, 6)).double()
    fc_loc[2].weight.data.zero_()
    fc_loc[2].bias.data.copy_(m.tensor([1, 0, 0, 0, 1, 0], dtype=m.float))
    classifier = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.Dropout2d(), nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 5 * 5, 3)
    ).double()
    params = [*localization.parameters(), *fc_loc.parameters(), *classifier.parameters()]
    opt = m.optim.SGD(params, lr=0.05)
    images, labels = m.rand(8, 1, 12, 12, dtype=m.float64), m.randint(0, 3, (8,))

    def forward(x):
        theta = fc_loc(localization(x).view(-1, 64)).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        return F.log_softmax(classifier(F.grid_sample(x, grid, align_corners=False)), dim=1)

    record = []
    for _ in range(3):
        loss = F.nll_loss(forward(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        record.append(loss.detach())
    classifier.eval()
    with m.no_grad():
        record.append(F.nll_loss(forward(images), labels, size_average=False))
    rate, n_fft, hop = 4000, 64, 16
    wave = m.sin(2 * math.pi * 300 * m.arange(800, dtype=m.float64) / rate) + 0.1 * m.randn(800, dtype=m.float64)
    window = m.hann_window(n_fft, dtype=m.float64)
    spec = m.stft(wave, n_fft, hop_length=hop, window=window, return_complex=True, center=True, pad_mode="reflect")
    mel_points = m.linspace(0, 2595 * math.log10(1 + rate / 2 / 700), 10, dtype=m.float64)
    points = 700 * (10 ** (mel_points / 2595) - 1)
    freqs = m.linspace(0, rate / 2, n_fft // 2 + 1, dtype=m.float64)
    lower = (freqs[None, :] - points[:-2, None]) / (points[1:-1, None] - points[:-2, None])
    upper = (points[2:, None] - freqs[None, :]) / (points[2:, None] - points[1:-1, None])
    log_mel = m.log(m.clamp(m.minimum(lower, upper), min=0) @ spec.abs().pow(2) + 1e-6)
    back = m.istft(spec, n_fft, hop_length=hop, window=window, length=800)
    return record, fc_loc[2].bias.detach(), log_mel, back


@pytest.mark.slow
def test_spatial_transformer_and_log_mel():
    _both(spatial_transformer_and_log_mel, F64)
