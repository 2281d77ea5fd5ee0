"""More structured-model programs (the first ones are in test_fresh_programs_structured.py), run with torch and
with batched_grad from the same seed in float64: quantization-aware training with straight-through estimators
(sign binarization as an InplaceFunction whose forward is not static, weight copies kept in a `.org` attribute,
learned per-channel step sizes by the detach trick in a conv layer that calls _conv_forward), knowledge-graph
embeddings (translation, bilinear and rotation scores over head- and tail-corrupted batches, self-adversarial
weights, an L3 penalty; complex scores through view_as_complex / conj / polar), a Gumbel-softmax VAE with a hand
straight-through sample and F.gumbel_softmax, and a vector quantizer whose codebook moves by exponential averages
written through .data."""

import warnings

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default


def binarized_network(m):
    """Weights and hidden activations binarized by sign in the forward with the gradient passed straight through,
    the biases' `.org` copies restored before the step and clamped to [-1, 1] after it, batch norm and hardtanh
    between layers; a hinge loss that zeroes its satisfied margins by a masked assignment."""
    nn = m.nn

    class Binarize(m.autograd.function.InplaceFunction):
        def forward(ctx, x, scaled=False):
            scale = x.abs().max() if scaled else 1
            return x.clone().div(scale).sign().mul(scale)

        def backward(ctx, grad):
            return grad, None

    class BinaryLinear(nn.Linear):
        def forward(self, x):
            x = x if x.size(1) == 12 else Binarize.apply(x)
            out = nn.functional.linear(x, Binarize.apply(self.weight))
            self.bias.org = self.bias.data.clone()
            out += self.bias.view(1, -1).expand_as(out)
            return out

    def hinge(output, target):
        margins = 1.0 - output.mul(target)
        margins[margins.le(0)] = 0
        return margins.mean()

    out = []
    with float64_default(m):
        x, labels = m.randn(10, 12), m.randint(0, 4, (10,))
        signs = -m.ones(10, 4)
        signs.scatter_(1, labels.view(-1, 1), 1.0)
        model = nn.Sequential(
            BinaryLinear(12, 8), nn.BatchNorm1d(8), nn.Hardtanh(), BinaryLinear(8, 4), nn.BatchNorm1d(4)
        )
        opt = m.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(3):
            loss = hinge(model(x), signs)
            opt.zero_grad()
            loss.backward()
            for p in model.parameters():
                if hasattr(p, "org"):
                    p.data.copy_(p.org)
            opt.step()
            for p in model.parameters():
                if hasattr(p, "org"):
                    p.org.copy_(p.data.clamp_(-1, 1))
            out.append(loss.detach())
        out += [p.detach() for p in model.parameters()]
        w = m.randn(3, 4, requires_grad=True)
        out.append(m.autograd.grad((Binarize.apply(w, True) * m.arange(12.0).view(3, 4)).sum(), w)[0])
    return out


@pytest.mark.slow
def test_binarized_network():
    _both(binarized_network, F64)


def learned_step_quantization(m):
    """Per-channel and per-tensor step sizes learnt with their gradients scaled by the detach trick, rounding
    passed straight through; the step Parameter replaced after construction from the trained float weight; the
    quantized conv calls _conv_forward with its own weight, the linear layer F.linear; SGD with a cosine schedule."""
    nn = m.nn

    def scaled_grad(x, scale):
        return (x - x * scale).detach() + x * scale

    def round_through(x):
        return (x.round() - x).detach() + x

    class Step(nn.Module):
        def __init__(self, bits, positive, per_channel):
            super().__init__()
            self.low, self.high = (0, 2**bits - 1) if positive else (-(2 ** (bits - 1)) + 1, 2 ** (bits - 1) - 1)
            self.per_channel, self.s = per_channel, nn.Parameter(m.ones(1))

        def init_from(self, x):
            dims = list(range(1, x.dim())) if self.per_channel else list(range(x.dim()))
            self.s = nn.Parameter(x.detach().abs().mean(dim=dims, keepdim=self.per_channel) * 2 / self.high**0.5)

        def forward(self, x):
            s = scaled_grad(self.s, 1.0 / (self.high * x.numel()) ** 0.5)
            return round_through(m.clamp(x / s, self.low, self.high)) * s

    class QuantConv(nn.Conv2d):
        def __init__(self, conv):
            super().__init__(conv.in_channels, conv.out_channels, conv.kernel_size, padding=conv.padding)
            self.weight, self.bias = nn.Parameter(conv.weight.detach()), nn.Parameter(conv.bias.detach())
            self.qw, self.qa = Step(3, False, True), Step(3, True, False)
            self.qw.init_from(conv.weight)
            self.qa.init_from(m.ones(1))

        def forward(self, x):
            return self._conv_forward(self.qa(x), self.qw(self.weight), self.bias)

    out = []
    with float64_default(m):
        images, labels = m.randn(8, 3, 6, 6), m.randint(0, 4, (8,))
        model = nn.Sequential(nn.Conv2d(3, 5, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        model.append(nn.Linear(5, 4))
        nn.functional.cross_entropy(model(images), labels).backward()
        model[0] = QuantConv(model[0])
        opt = m.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        schedule = m.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
        for _ in range(3):
            loss = nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            schedule.step()
            out += [loss.detach(), model[0].qw.s.grad.flatten(), model[0].qa.s.detach()]
        out.append(m.tensor([p.numel() for _, p in sorted(model.named_parameters())]))
    return out


def test_learned_step_quantization():
    _both(learned_step_quantization, F64)


def knowledge_graph_embeddings(m):
    """TransE (L1 distance), DistMult and RotatE (relation phases as cos / sin, the complex difference's modulus by
    a norm over a stacked dim) scoring corrupted heads or tails by index_select; logsigmoid losses weighted by a
    detached softmax over the negatives, subsampling weights, an L3 penalty; then filtered tail ranks by argsort and
    nonzero."""
    F = m.nn.functional

    class Model(m.nn.Module):
        def __init__(self, kind, entities=9, relations=3, dim=4, gamma=6.0):
            super().__init__()
            self.kind, self.gamma = kind, m.nn.Parameter(m.Tensor([gamma]), requires_grad=False)
            self.bound = (gamma + 2.0) / dim
            self.entity = m.nn.Parameter(m.zeros(entities, 2 * dim if kind == "RotatE" else dim))
            self.relation = m.nn.Parameter(m.zeros(relations, dim))
            for p in (self.entity, self.relation):
                m.nn.init.uniform_(tensor=p, a=-self.bound, b=self.bound)

        def forward(self, known, candidates, mode):
            n, k = candidates.shape
            pick = lambda i: m.index_select(self.entity, 0, i.reshape(-1)).view(n, -1, self.entity.shape[1])
            head = pick(candidates) if mode == "head" else pick(known[:, 0])
            tail = pick(candidates) if mode == "tail" else pick(known[:, 2])
            rel = m.index_select(self.relation, dim=0, index=known[:, 1]).unsqueeze(1)
            if self.kind == "TransE":
                return self.gamma.item() - m.norm(head + rel - tail, p=1, dim=2)
            if self.kind == "DistMult":
                return (head * rel * tail).sum(dim=2)
            (re_h, im_h), (re_t, im_t) = m.chunk(head, 2, dim=2), m.chunk(tail, 2, dim=2)
            phase = rel / (self.bound / 3.141592653589793)
            re_s = re_h * m.cos(phase) - im_h * m.sin(phase) - re_t
            im_s = re_h * m.sin(phase) + im_h * m.cos(phase) - im_t
            return self.gamma.item() - m.stack([re_s, im_s], dim=0).norm(dim=0).sum(dim=2)

    out = []
    with float64_default(m):
        rng = np.random.default_rng(1)
        triples = m.tensor(np.stack([rng.integers(0, 9, 24), rng.integers(0, 3, 24), rng.integers(0, 9, 24)], 1))
        weight = m.sqrt(1 / m.tensor(rng.integers(4, 8, 24).astype(np.float64)))
        for kind in ("TransE", "DistMult", "RotatE"):
            model = Model(kind)
            opt = m.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
            for step in range(4):
                mode = ("head", "tail")[step % 2]
                rows = m.tensor(rng.permutation(24)[:8])
                negatives = m.tensor(rng.integers(0, 9, (8, 5)))
                neg = model(triples[rows], negatives, mode)
                neg = (F.softmax(neg, dim=1).detach() * F.logsigmoid(-neg)).sum(dim=1)
                own = triples[rows][:, 2:] if mode == "tail" else triples[rows][:, :1]
                pos = F.logsigmoid(model(triples[rows], own, mode)).squeeze(dim=1)
                w = weight[rows]
                loss = (-(w * pos).sum() / w.sum() - (w * neg).sum() / w.sum()) / 2
                loss = loss + 1e-3 * (model.entity.norm(p=3) ** 3 + model.relation.norm(p=3).norm(p=3) ** 3)
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.item())
            with m.no_grad():
                scores = model(triples[:6], m.arange(9).expand(6, 9), "tail")
                order = m.argsort(scores, dim=1, descending=True)
                out.append([1 + (order[i, :] == triples[i, 2]).nonzero().item() for i in range(6)])
    return out


@pytest.mark.slow
def test_knowledge_graph_embeddings():
    _both(knowledge_graph_embeddings, F64)


def complex_embeddings(m):
    """ComplEx as the real part of h * r * conj(t) on view_as_complex'd embeddings, RotatE with unit relations
    drawn by polar (kept on the circle by normalizing real / imaginary pairs through .data) rotating the tail by
    conj(r) and scored by the modulus; margin ranking against corrupted triples; angle / abs / real / imag read
    back."""
    nn = m.nn

    def complex_view(x):
        return m.view_as_complex(x.view(*x.shape[:-1], -1, 2))

    def complex_score(h, r, t):
        return m.real((complex_view(h) * complex_view(r) * m.conj(complex_view(t))).sum(dim=-1))

    def rotate_score(h, r, t):
        return -(complex_view(h) - complex_view(t) * m.conj(complex_view(r))).abs().pow(2).sum(dim=-1).sqrt()

    out = []
    with float64_default(m):
        triples = m.stack([m.randint(8, (30,)), m.randint(3, (30,)), m.randint(8, (30,))], dim=1)
        for score in (complex_score, rotate_score):
            entity, relation = nn.Embedding(8, 6), nn.Embedding(3, 6)
            nn.init.xavier_uniform_(entity.weight)
            phases = 2 * np.pi * m.rand(3, 3)
            relation.weight.data = m.view_as_real(m.polar(m.ones_like(phases), phases)).view(3, 6)
            opt = m.optim.Adam([*entity.parameters(), *relation.parameters()], lr=0.02)
            for batch in triples.split(10):
                bad = batch.repeat_interleave(2, dim=0)
                column = m.randint(2, size=(bad.shape[0],)) * 2
                bad[m.arange(bad.shape[0]), column] = m.randint(8, size=(bad.shape[0],))

                def scores(t):
                    return score(entity(t[:, 0]), relation(t[:, 1]), entity(t[:, 2]))

                pos, neg = scores(batch).repeat_interleave(2), scores(bad)
                loss = nn.MarginRankingLoss(margin=1.0)(pos, neg, m.ones_like(pos))
                opt.zero_grad()
                loss.backward()
                opt.step()
                if score is rotate_score:
                    pairs = nn.functional.normalize(relation.weight.data.view(3, 3, 2), p=2, dim=-1)
                    relation.weight.data = pairs.view(3, 6)
                out.append(loss.detach())
            z = complex_view(relation.weight)
            out += [z.abs(), z.real, z.imag, m.angle(z)]
    return out


@pytest.mark.slow
def test_complex_embeddings():
    _both(complex_embeddings, F64)


def gumbel_vae_and_codebook(m):
    """A categorical VAE: Gumbel noise from rand, softmax at a temperature annealed by np.maximum, the hard one-hot
    by scatter_ with (hard - soft).detach() + soft, BCE summed (size_average=False) plus KL to the uniform prior;
    F.gumbel_softmax soft and hard; then a vector quantizer over conv features: nearest code by an expanded
    distance, one_hot counts and sums moving the EMA buffers through .data, the codebook read by F.embedding of the
    transposed buffer, the straight-through output and the commitment difference."""
    nn, F = m.nn, m.nn.functional
    out = []
    with float64_default(m):
        images = (m.rand(8, 36) > 0.6).double()
        enc, dec = nn.Sequential(nn.Linear(36, 16), nn.ReLU(), nn.Linear(16, 12)), nn.Linear(12, 36)
        opt = m.optim.Adam([*enc.parameters(), *dec.parameters()], lr=1e-2)
        temp = 1.0
        for step in range(3):
            q = nn.ReLU()(enc(images)).view(8, 3, 4)
            y = F.softmax((q - m.log(-m.log(m.rand(q.size()) + 1e-20) + 1e-20)) / temp, dim=-1)
            hard = m.zeros_like(y).view(-1, 4)
            hard.scatter_(1, y.max(dim=-1)[1].view(-1, 1), 1)
            z = ((hard.view(*y.shape) - y).detach() + y).view(-1, 12)
            qy = F.softmax(q, dim=-1).reshape(8, 12)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # size_average's deprecation, as in the original program
                bce = F.binary_cross_entropy(m.sigmoid(dec(z)), images, size_average=False) / 8
            loss = bce + m.sum(qy * m.log(qy * 4 + 1e-20), dim=-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            temp = np.maximum(temp * np.exp(-0.03 * (step + 1)), 0.5)
            out.append(loss.detach())
        logits = m.randn(3, 5, requires_grad=True)
        for hard_sample in (False, True):
            g = F.gumbel_softmax(logits, tau=0.7, hard=hard_sample)
            out += [g, m.autograd.grad((g * m.arange(5.0)).sum(), logits)[0]]

        embed = m.randn(4, 6)
        buffers = {"embed": embed, "size": m.zeros(6), "avg": embed.clone()}
        conv = nn.Conv2d(3, 4, 3, padding=1)
        opt = m.optim.Adam(conv.parameters(), lr=3e-3)
        for _ in range(3):
            x = conv(m.rand(2, 3, 4, 4)).permute(0, 2, 3, 1)
            flat = x.reshape(-1, 4)
            dist = flat.pow(2).sum(1, keepdim=True) - 2 * flat @ buffers["embed"] + buffers["embed"].pow(2).sum(0)
            _, index = (-dist).max(1)
            onehot = F.one_hot(index, 6).type(flat.dtype)
            buffers["size"].data.mul_(0.9).add_(onehot.sum(0), alpha=0.1)
            buffers["avg"].data.mul_(0.9).add_(flat.transpose(0, 1) @ onehot, alpha=0.1)
            n = buffers["size"].sum()
            sizes = (buffers["size"] + 1e-5) / (n + 6e-5) * n
            buffers["embed"].data.copy_(buffers["avg"] / sizes.unsqueeze(0))
            code = F.embedding(index.view(*x.shape[:-1]), buffers["embed"].transpose(0, 1))
            diff = (code.detach() - x).pow(2).mean()
            quantized = x + (code - x).detach()
            loss = quantized.pow(2).mean() + 0.25 * diff
            opt.zero_grad()
            loss.backward()
            opt.step()
            out += [loss.detach(), index, buffers["embed"].clone()]
    return out


@pytest.mark.slow
def test_gumbel_vae_and_codebook():
    _both(gumbel_vae_and_codebook, F64)
