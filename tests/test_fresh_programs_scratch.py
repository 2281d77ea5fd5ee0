"""Programs from the "from scratch" lectures of Andrej Karpathy's Neural Networks: Zero to Hero (the makemore
notebooks, makemore.py's models and build-nanogpt's training loop), as their readers run them, compared number for
number with torch from the same seed (float64 where the lecture allows it). Names are synthetic and the corpus is a
small random one; the fastai "from the foundations" notebooks are in test_fresh_programs_scratch_fastai.py."""

import random

import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default


def _names(count, seed=7):
    rng = random.Random(seed)
    common, letters = "aeinorlsmth", "abcdefghijklmnopqrstuvwxyz"
    return [
        "".join(rng.choice(common if rng.random() < 0.6 else letters) for _ in range(rng.randint(3, 7)))
        for _ in range(count)
    ]


def _context_windows(m, words, stoi, block_size):
    X, Y = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + ".":
            X.append(context)
            Y.append(stoi[ch])
            context = context[1:] + [stoi[ch]]
    return m.tensor(X), m.tensor(Y)


def _vocabulary(words):
    stoi = {s: i + 1 for i, s in enumerate(sorted(set("".join(words))))}
    stoi["."] = 0
    return stoi, {i: s for s, i in stoi.items()}


def bigram_counts_and_net(m):
    """int32 bigram counts filled one pair at a time, smoothed rows normalized by broadcasting, names sampled with a
    seeded Generator, the average negative log likelihood, then the one-hot linear model trained by hand."""
    words = _names(60)
    stoi, _ = _vocabulary(words)
    N = m.zeros((27, 27), dtype=m.int32)
    pairs = [(stoi[a], stoi[b]) for w in words for a, b in zip("." + w, w + ".")]
    for ix1, ix2 in pairs:
        N[ix1, ix2] += 1
    P = (N + 1).double()
    P /= P.sum(1, keepdims=True)
    g = m.Generator().manual_seed(2147483647)
    names = []
    for _ in range(4):
        ix = None
        while ix != 0:
            ix = m.multinomial(P[ix or 0], num_samples=1, replacement=True, generator=g).item()
            names.append(ix)
    log_likelihood = sum(m.log(P[a, b]) for a, b in pairs)
    xs, ys = m.tensor([a for a, _ in pairs]), m.tensor([b for _, b in pairs])
    W = m.randn((27, 27), generator=g, dtype=m.float64, requires_grad=True)
    losses = []
    for _ in range(8):
        probs = (m.nn.functional.one_hot(xs, num_classes=27).double() @ W).exp()
        probs = probs / probs.sum(1, keepdims=True)
        loss = -probs[m.arange(xs.nelement()), ys].log().mean() + 0.01 * (W**2).mean()
        W.grad = None
        loss.backward()
        W.data += -50 * W.grad
        losses.append(loss.item())
    return [N, P, names, -log_likelihood / len(pairs), losses, W]


@pytest.mark.slow
def test_bigram_counts_and_net():
    _both(bigram_counts_and_net, F64)


def mlp_with_learning_rate_sweep(m):
    """Bengio et al.'s MLP: embeddings by indexing C[X], tanh layer, F.cross_entropy, a learning rate swept over
    10**linspace(-3, 0), then the dev loss, the hand softmax agreeing with cross_entropy, and sampling."""
    F = m.nn.functional
    with float64_default(m):
        words = _names(80)
        stoi, _ = _vocabulary(words)
        Xtr, Ytr = _context_windows(m, words[:64], stoi, 3)
        Xdev, Ydev = _context_windows(m, words[64:], stoi, 3)
        g = m.Generator().manual_seed(2147483647)
        C, W1, b1 = m.randn((27, 10), generator=g), m.randn((30, 64), generator=g), m.randn(64, generator=g)
        W2, b2 = m.randn((64, 27), generator=g), m.randn(27, generator=g)
        parameters = [C, W1, b1, W2, b2]
        for p in parameters:
            p.requires_grad = True
        lrs = 10 ** m.linspace(-3, 0, 40)
        lossi = []
        for i in range(40):
            ix = m.randint(0, Xtr.shape[0], (32,), generator=g)
            logits = m.tanh(C[Xtr[ix]].view(-1, 30) @ W1 + b1) @ W2 + b2
            loss = F.cross_entropy(logits, Ytr[ix])
            for p in parameters:
                p.grad = None
            loss.backward()
            for p in parameters:
                p.data += -lrs[i] * p.grad
            lossi.append(loss.log10().item())
        logits = m.tanh(C[Xdev].view(-1, 30) @ W1 + b1) @ W2 + b2
        counts = logits.exp()
        by_hand = -(counts / counts.sum(1, keepdims=True))[m.arange(len(Ydev)), Ydev].log().mean()
        samples, context = [], [0, 0, 0]
        for _ in range(8):
            probs = F.softmax(m.tanh(C[m.tensor([context])].view(1, -1) @ W1 + b1) @ W2 + b2, dim=1)
            ix = m.multinomial(probs, num_samples=1, generator=g).item()
            context = context[1:] + [ix]
            samples.append(ix)
        return [lossi, F.cross_entropy(logits, Ydev), by_hand, samples]


@pytest.mark.slow
def test_mlp_with_learning_rate_sweep():
    _both(mlp_with_learning_rate_sweep, F64)


class _Linear:
    def __init__(self, m, fan_in, fan_out, g, bias=True):
        self.weight = m.randn((fan_in, fan_out), generator=g) / fan_in**0.5
        self.bias = m.zeros(fan_out) if bias else None

    def __call__(self, x):
        self.out = x @ self.weight
        if self.bias is not None:
            self.out += self.bias
        return self.out

    def parameters(self):
        return [self.weight] + ([] if self.bias is None else [self.bias])


class _BatchNorm1d:
    def __init__(self, m, dim, eps=1e-5, momentum=0.1):
        self.m, self.eps, self.momentum, self.training = m, eps, momentum, True
        self.gamma, self.beta = m.ones(dim), m.zeros(dim)
        self.running_mean, self.running_var = m.zeros(dim), m.ones(dim)

    def __call__(self, x):
        dims = 0 if x.ndim == 2 else (0, 1)
        xmean = x.mean(dims, keepdim=True) if self.training else self.running_mean
        xvar = x.var(dims, keepdim=True) if self.training else self.running_var
        self.out = self.gamma * (x - xmean) / self.m.sqrt(xvar + self.eps) + self.beta
        if self.training:
            with self.m.no_grad():
                self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * xmean
                self.running_var = (1 - self.momentum) * self.running_var + self.momentum * xvar
        return self.out

    def parameters(self):
        return [self.gamma, self.beta]


class _Tanh:
    def __init__(self, m):
        self.m = m

    def __call__(self, x):
        self.out = self.m.tanh(x)
        return self.out

    def parameters(self):
        return []


class _FlattenConsecutive:
    def __init__(self, n):
        self.n = n

    def __call__(self, x):
        B, T, C = x.shape
        x = x.view(B, T // self.n, C * self.n)
        self.out = x.squeeze(1) if x.shape[1] == 1 else x
        return self.out

    def parameters(self):
        return []


def _trainable(embedding, layers):
    """The embedding table and the layers' parameters, made to require grad."""
    parameters = [embedding] + [p for layer in layers for p in layer.parameters()]
    for p in parameters:
        p.requires_grad = True
    return parameters


def batchnorm_activation_statistics(m):
    """The hand-written Linear/BatchNorm1d/Tanh stack with kaiming-style gains, retain_grad() on every layer's
    output, update-to-data ratios, saturation fractions, torch.histogram and torch.histc of the activations and of
    their gradients, and the eval-mode loss on the running statistics."""
    with float64_default(m):
        return _batchnorm_statistics(m)


def _batchnorm_statistics(m):
    F = m.nn.functional
    words = _names(60)
    stoi, _ = _vocabulary(words)
    Xtr, Ytr = _context_windows(m, words, stoi, 3)
    g = m.Generator().manual_seed(2147483647)
    C = m.randn((27, 10), generator=g)
    layers = [_Linear(m, 30, 32, g, bias=False), _BatchNorm1d(m, 32), _Tanh(m)]
    layers += [_Linear(m, 32, 32, g, bias=False), _BatchNorm1d(m, 32), _Tanh(m), _Linear(m, 32, 27, g)]
    with m.no_grad():
        layers[-1].weight *= 0.1
        for layer in layers[:-1]:
            if isinstance(layer, _Linear):
                layer.weight *= 5 / 3
    parameters = _trainable(C, layers)
    ud, out = [], []
    for _ in range(12):
        ix = m.randint(0, Xtr.shape[0], (32,), generator=g)
        x = C[Xtr[ix]].view(32, -1)
        for layer in layers:
            x = layer(x)
        loss = F.cross_entropy(x, Ytr[ix])
        for layer in layers:
            layer.out.retain_grad()
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -0.1 * p.grad
        with m.no_grad():
            ud.append([((0.1 * p.grad).std() / p.data.std()).log10().item() for p in parameters])
    for layer in layers[:-1]:
        if isinstance(layer, _Tanh):
            t = layer.out
            hy, hx = m.histogram(t, density=True)
            out += [t.mean(), t.std(), (t.abs() > 0.97).float().mean() * 100, hy, hx, m.histc(t, 10, -1, 1)]
            out += [layer.out.grad.std(), m.histc(layer.out.grad, 5)]
            out.append(hy.requires_grad)
    for layer in layers:
        layer.training = False
    with m.no_grad():
        x = C[Xtr].view(Xtr.shape[0], -1)
        for layer in layers:
            x = layer(x)
    return out + [m.tensor(ud), F.cross_entropy(x, Ytr), layers[1].running_var]


@pytest.mark.slow
def test_batchnorm_activation_statistics():
    _both(batchnorm_activation_statistics, F64)


def manual_backprop_against_autograd(m):
    """ "Becoming a backprop ninja": the forward pass broken into ~20 retained intermediates, each gradient worked
    out by hand and compared with autograd's (exact, approximate, max difference), then cross entropy and
    batchnorm's backward in one expression each."""
    F = m.nn.functional
    with float64_default(m):
        words = _names(40)
        stoi, _ = _vocabulary(words)
        Xtr, Ytr = _context_windows(m, words, stoi, 3)
        g = m.Generator().manual_seed(2147483647)
        C = m.randn((27, 10), generator=g)
        W1 = m.randn((30, 64), generator=g) * (5 / 3) / 30**0.5
        b1 = m.randn(64, generator=g) * 0.1
        W2, b2 = m.randn((64, 27), generator=g) * 0.1, m.randn(27, generator=g) * 0.1
        bngain, bnbias = m.randn((1, 64), generator=g) * 0.1 + 1.0, m.randn((1, 64), generator=g) * 0.1
        for p in (C, W1, b1, W2, b2, bngain, bnbias):
            p.requires_grad = True
        n = 32
        ix = m.randint(0, Xtr.shape[0], (n,), generator=g)
        Xb, Yb = Xtr[ix], Ytr[ix]
        emb = C[Xb]
        embcat = emb.view(emb.shape[0], -1)
        hprebn = embcat @ W1 + b1
        bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
        bndiff = hprebn - bnmeani
        bnvar = 1 / (n - 1) * (bndiff**2).sum(0, keepdim=True)
        bnvar_inv = (bnvar + 1e-5) ** -0.5
        bnraw = bndiff * bnvar_inv
        hpreact = bngain * bnraw + bnbias
        h = m.tanh(hpreact)
        logits = h @ W2 + b2
        norm_logits = logits - logits.max(1, keepdim=True).values
        counts = norm_logits.exp()
        counts_sum_inv = counts.sum(1, keepdims=True) ** -1
        probs = counts * counts_sum_inv
        logprobs = probs.log()
        loss = -logprobs[range(n), Yb].mean()
        for t in (logprobs, probs, counts, norm_logits, logits, h, hpreact, bnraw, hprebn, embcat, emb):
            t.retain_grad()
        loss.backward()
        dlogprobs = m.zeros_like(logprobs)
        dlogprobs[range(n), Yb] = -1.0 / n
        dprobs = (1.0 / probs) * dlogprobs
        dcounts = counts_sum_inv * dprobs - counts_sum_inv**2 * (counts * dprobs).sum(1, keepdim=True)
        dnorm_logits = counts * dcounts
        dlogits = dnorm_logits.clone()
        dlogits += F.one_hot(logits.max(1).indices, num_classes=27) * (-dnorm_logits).sum(1, keepdim=True)
        dh = dlogits @ W2.T
        dhpreact = (1.0 - h**2) * dh
        dhprebn = (
            bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
        )
        demb = (dhprebn @ W1.T).view(emb.shape)
        dC = m.zeros_like(C)
        for k in range(Xb.shape[0]):
            for j in range(Xb.shape[1]):
                dC[Xb[k, j]] += demb[k, j]
        fast = F.softmax(logits, 1)
        fast[range(n), Yb] -= 1
        fast /= n
        pairs = [
            (dlogprobs, logprobs),
            (dprobs, probs),
            (dcounts, counts),
            (dnorm_logits, norm_logits),
            (dlogits, logits),
            (dh, h),
            (dhpreact, hpreact),
            (dhprebn, hprebn),
            (demb, emb),
            (dC, C),
            (h.T @ dlogits, W2),
            (bnraw.mul(dhpreact).sum(0, keepdim=True), bngain),
            (fast, logits),
        ]
        compared = [(m.allclose(d, t.grad), (d - t.grad).abs().max().item() < 1e-12) for d, t in pairs]
        return [loss, F.cross_entropy(logits, Yb), compared, dC, fast]


@pytest.mark.slow
def test_manual_backprop_against_autograd():
    _both(manual_backprop_against_autograd, F64)


def wavenet_hierarchy(m):
    """The WaveNet lecture's hand-written Embedding, FlattenConsecutive and Sequential, its BatchNorm1d over
    (batch, time), the layer output shapes, a short training loop with a step decay and eval-mode losses."""
    F = m.nn.functional
    with float64_default(m, seed=42):
        words = _names(60)
        stoi, _ = _vocabulary(words)
        Xtr, Ytr = _context_windows(m, words, stoi, 8)
        g = m.Generator().manual_seed(42)
        emb = m.randn((27, 10), generator=g)
        layers = [_FlattenConsecutive(2), _Linear(m, 20, 24, g, bias=False), _BatchNorm1d(m, 24), _Tanh(m)]
        layers += [_FlattenConsecutive(2), _Linear(m, 48, 24, g, bias=False), _BatchNorm1d(m, 24), _Tanh(m)]
        layers += [_FlattenConsecutive(2), _Linear(m, 48, 24, g, bias=False), _BatchNorm1d(m, 24), _Tanh(m)]
        layers.append(_Linear(m, 24, 27, g))
        parameters = _trainable(emb, layers)
        lossi, shapes = [], []
        for i in range(16):
            ix = m.randint(0, Xtr.shape[0], (16,), generator=g)
            x = emb[Xtr[ix]]
            for layer in layers:
                x = layer(x)
            shapes = [tuple(layer.out.shape) for layer in layers]
            loss = F.cross_entropy(x, Ytr[ix])
            for p in parameters:
                p.grad = None
            loss.backward()
            for p in parameters:
                p.data += -(0.1 if i < 12 else 0.01) * p.grad
            lossi.append(loss.log10().item())
        for layer in layers:
            layer.training = False
        with m.no_grad():
            x = emb[Xtr]
            for layer in layers:
                x = layer(x)
        return [shapes, m.tensor(lossi).view(-1, 4).mean(1), F.cross_entropy(x, Ytr)]


@pytest.mark.slow
def test_wavenet_hierarchy():
    _both(wavenet_hierarchy, F64)
