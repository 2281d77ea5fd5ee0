"""Structured-model programs of the kinds public code holds, each written once against torch's API and run with
torch and with batched_grad from the same seed in float64: sparse normalizers as autograd.Functions (sparsemax and
1.5-entmax by sort / cumsum / gather, alpha-entmax by bisection with a gradient for alpha, their Fenchel-Young
losses), a TabNet-like attentive network (ghost batch norm over chunks, gated linear units sharing layers, a
sparsemax mask that edits its input in place), factorization machines for click prediction (embedding offsets, the
square-of-sum trick, field-aware pairs, a compressed interaction network of 1x1 convolutions) and a sparsely gated
mixture of experts (noisy top-k gates, a dispatcher built from nonzero / sort / split / index_add). The
quantization, knowledge-graph, Gumbel and vector-quantization programs are in test_fresh_programs_structured2.py."""

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default


def _ranks_like(m, x, dim):
    """1, 2, ..., n along `dim` of x, broadcastable against it."""
    shape = [1] * x.dim()
    shape[dim] = -1
    return m.arange(1, x.size(dim) + 1, dtype=x.dtype).view(shape)


def _sparsemax_backward(m, grad, support, out, dim):
    """The gradient through sparsemax: zero off the support, the support's mean taken out on it."""
    g = grad.clone()
    g[out == 0] = 0
    mean = (g.sum(dim=dim) / support.to(out.dtype).squeeze()).unsqueeze(dim)
    return m.where(out != 0, g - mean, g)


def _sparse_functions(m):
    """Sparsemax and 1.5-entmax as Functions whose forward finds the threshold from a descending sort, and
    alpha-entmax by bisection whose backward also returns d/d alpha when asked (needs_input_grad)."""

    class Sparsemax(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, dim):
            ctx.dim = dim
            x = x - x.max(dim=dim, keepdim=True).values
            ordered = m.sort(x, dim=dim, descending=True).values
            cumulative = ordered.cumsum(dim) - 1
            support = (_ranks_like(m, x, dim) * ordered > cumulative).sum(dim=dim, keepdim=True)
            tau = cumulative.gather(dim, support - 1)
            tau /= support.to(x.dtype)
            out = m.clamp(x - tau, min=0)
            ctx.save_for_backward(support, out)
            return out

        @staticmethod
        def backward(ctx, grad):
            return _sparsemax_backward(m, grad, *ctx.saved_tensors, ctx.dim), None

    class Entmax15(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, dim):
            ctx.dim = dim
            x = (x - x.max(dim=dim, keepdim=True).values) / 2
            ordered, _ = m.sort(x, descending=True, dim=dim)
            rho = _ranks_like(m, x, dim)
            mean, mean_sq = ordered.cumsum(dim) / rho, (ordered**2).cumsum(dim) / rho
            delta = (1 - rho * (mean_sq - mean**2)) / rho
            tau = mean - m.sqrt(m.clamp(delta, 0))
            support = (tau <= ordered).sum(dim).unsqueeze(dim)
            y = m.clamp(x - tau.gather(dim, support - 1), min=0) ** 2
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            (y,) = ctx.saved_tensors
            root = y.sqrt()
            dx = dy * root
            dx -= (dx.sum(ctx.dim) / root.sum(ctx.dim)).unsqueeze(ctx.dim) * root
            return dx, None

    class EntmaxBisect(m.autograd.Function):
        @classmethod
        def forward(cls, ctx, x, alpha, dim=-1, n_iter=30):
            if not isinstance(alpha, m.Tensor):
                alpha = m.tensor(alpha, dtype=x.dtype)
            shape = list(x.shape)
            shape[dim] = 1
            alpha = alpha.expand(*shape)
            ctx.alpha, ctx.dim = alpha, dim
            x = x * (alpha - 1)
            top = x.max(dim=dim, keepdim=True).values
            lo, hi = top - 1, top - (1 / x.shape[dim]) ** (alpha - 1)
            f_lo = (m.clamp(x - lo, min=0) ** (1 / (alpha - 1))).sum(dim) - 1
            width = hi - lo
            for _ in range(n_iter):
                width /= 2
                mid = lo + width
                p = m.clamp(x - mid, min=0) ** (1 / (alpha - 1))
                lo = m.where(((p.sum(dim) - 1) * f_lo >= 0).unsqueeze(dim), mid, lo)
            p /= p.sum(dim=dim).unsqueeze(dim=dim)
            ctx.save_for_backward(p)
            return p

        @classmethod
        def backward(cls, ctx, dy):
            (y,) = ctx.saved_tensors
            g = m.where(y > 0, y ** (2 - ctx.alpha), y.new_zeros(1))
            dx = dy * g
            dx -= (dx.sum(ctx.dim) / g.sum(ctx.dim)).unsqueeze(ctx.dim) * g
            d_alpha = None
            if ctx.needs_input_grad[1]:
                s = m.where(y > 0, y * m.log(y), y.new_zeros(1))
                skewed = g / g.sum(ctx.dim).unsqueeze(ctx.dim)
                d_alpha = dy * (y - skewed) / ((ctx.alpha - 1) ** 2)
                d_alpha -= dy * (s - skewed * s.sum(ctx.dim).unsqueeze(ctx.dim)) / (ctx.alpha - 1)
                d_alpha = d_alpha.sum(ctx.dim).unsqueeze(ctx.dim)
            return dx, d_alpha, None, None

    return Sparsemax, Entmax15, EntmaxBisect


def sparse_normalizers_and_losses(m):
    """Each normalizer along either dim with its weighted-sum gradient, alpha's gradient through the bisection,
    then a linear classifier trained by a loss Function whose forward adds -1 at the targets with scatter_add_
    and whose backward hands back the (projected - one-hot) direction."""
    Sparsemax, Entmax15, EntmaxBisect = _sparse_functions(m)
    out = []
    with float64_default(m):
        x = m.randn(5, 6, requires_grad=True)
        weights = m.arange(30.0).view(5, 6)
        for fn in (
            lambda v: Sparsemax.apply(v, 1),
            lambda v: Sparsemax.apply(v, 0),
            lambda v: Entmax15.apply(v, -1),
            lambda v: EntmaxBisect.apply(v, 1.4),
        ):
            y = fn(x)
            out += [y, (y == 0).sum(), m.autograd.grad((y * weights).sum(), x)[0]]
        alpha = m.full((5, 1), 1.6, requires_grad=True)
        out += list(m.autograd.grad((EntmaxBisect.apply(x, alpha) * weights).sum(), [alpha, x]))

        class FenchelYoung(m.autograd.Function):
            @staticmethod
            def forward(ctx, scores, target, project, omega):
                p = project(scores)
                loss = omega(p)
                p.scatter_add_(1, target.unsqueeze(1), m.full_like(p, -1))
                loss += m.einsum("ij,ij->i", p, scores)
                ctx.save_for_backward(p)
                return loss

            @staticmethod
            def backward(ctx, grad):
                (p,) = ctx.saved_tensors
                return grad.unsqueeze(1) * p, None, None, None

        data, target = m.randn(12, 4), m.randint(0, 3, (12,))
        losses = [
            (lambda s: Sparsemax.apply(s, -1), lambda p: (1 - (p**2).sum(dim=1)) / 2),
            (lambda s: Entmax15.apply(s, -1), lambda p: (1 - (p * m.sqrt(p)).sum(dim=1)) / 0.75),
        ]
        for project, omega in losses:
            model = m.nn.Linear(4, 3)
            opt = m.optim.Adam(model.parameters(), lr=0.05)
            for _ in range(3):
                opt.zero_grad()
                loss = FenchelYoung.apply(model(data), target, project, omega).sum() / 12
                loss.backward()
                opt.step()
                out.append(loss.detach())
            out += [p.detach() for p in model.parameters()]
    return out


@pytest.mark.slow
def test_sparse_normalizers_and_losses():
    _both(sparse_normalizers_and_losses, F64)


def attentive_tabular_network(m):
    """A TabNet-like step loop: batch norm over ghost batches (chunk then cat), gated linear units whose first
    layers are shared between steps, a sparsemax mask (its Function subtracts the row max from its input in place)
    scaled by a prior that the used features shrink, the mask entropy as a sparsity loss, clip_grad_norm_, then the
    explanation pass under no_grad and the running statistics."""
    nn = m.nn

    class SparsemaxInPlace(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x -= x.max(dim=-1, keepdim=True).values
            ordered = m.sort(x, descending=True, dim=-1).values
            cumulative = ordered.cumsum(-1) - 1
            support = (_ranks_like(m, x, -1) * ordered > cumulative).sum(dim=-1).unsqueeze(-1)
            out = m.clamp(x - cumulative.gather(-1, support - 1) / support.to(x.dtype), min=0)
            ctx.save_for_backward(support, out)
            return out

        @staticmethod
        def backward(ctx, grad):
            return _sparsemax_backward(m, grad, *ctx.saved_tensors, -1)

    class Ghost(nn.Module):
        def __init__(self, width, virtual=4):
            super().__init__()
            self.virtual, self.bn = virtual, nn.BatchNorm1d(width, momentum=0.02)

        def forward(self, x):
            return m.cat([self.bn(c) for c in x.chunk(int(np.ceil(x.shape[0] / self.virtual)), 0)], dim=0)

    class Glu(nn.Module):
        def __init__(self, fc, width):
            super().__init__()
            self.fc, self.bn, self.width = fc, Ghost(2 * width), width

        def forward(self, x):
            x = self.bn(self.fc(x))
            return m.mul(x[:, : self.width], m.sigmoid(x[:, self.width :]))

    class Net(nn.Module):
        def __init__(self, features, width, steps):
            super().__init__()
            shared = nn.ModuleList([nn.Linear(features, 2 * width, bias=False), nn.Linear(width, 2 * width, False)])
            self.bn0, self.steps = nn.BatchNorm1d(features, momentum=0.01), steps
            self.blocks = nn.ModuleList(
                [nn.ModuleList([Glu(shared[0], width), Glu(shared[1], width)]) for _ in range(steps)]
            )
            self.attend = nn.ModuleList([nn.Sequential(nn.Linear(width, features, False), Ghost(features))])
            self.attend.extend([nn.Sequential(nn.Linear(width, features, False), Ghost(features))])
            self.head = nn.Linear(width, 3, bias=False)

        def block(self, step, x):
            first, second = self.blocks[step]
            x = first(x)
            return m.add(x, second(x)) * m.sqrt(m.tensor([0.5]))

        def forward(self, x, explain=False):
            x = self.bn0(x)
            prior, total, entropy = m.ones(x.shape), 0, 0
            att = self.block(0, x)
            explanation = m.zeros(x.shape)
            for step in range(self.steps):
                mask = SparsemaxInPlace.apply(m.mul(self.attend[step](att), prior))
                entropy += m.mean(m.sum(m.mul(mask, m.log(mask + 1e-15)), dim=1))
                prior = m.mul(1.3 - mask, prior)
                att = self.block(step, m.mul(mask, x))
                total = m.add(total, nn.ReLU()(att))
                explanation += m.mul(mask, att.sum(dim=1).unsqueeze(1))
            return (explanation if explain else self.head(total)), entropy / self.steps

    out = []
    with float64_default(m):
        x, y = m.randn(12, 5), m.randint(0, 3, (12,))
        net = Net(5, 4, 2)
        opt = m.optim.Adam(net.parameters(), lr=0.02)
        for batch in m.utils.data.DataLoader(m.utils.data.TensorDataset(x, y), batch_size=6, shuffle=True):
            for p in net.parameters():
                p.grad = None
            logits, entropy = net(batch[0])
            loss = nn.functional.cross_entropy(logits, batch[1]) - 1e-3 * entropy
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            out += [loss.detach(), entropy.detach()]
        net.eval()
        with m.no_grad():
            out += [net(x, explain=True)[0], net.bn0.running_mean, net.bn0.running_var]
    return out


@pytest.mark.slow
def test_attentive_tabular_network():
    _both(attentive_tabular_network, F64)


def factorization_machines(m):
    """Click-through models over fields of categorical ids: ids shifted by NumPy offsets into one embedding, the
    linear part as a 1-wide embedding, FM by (sum)^2 - sum of squares, FFM by one embedding table per field and
    pairwise products, a compressed interaction network of 1x1 Conv1d layers split in half, an MLP with batch norm
    and dropout; BCELoss on sigmoid outputs, Adam with weight decay, model.zero_grad()."""
    nn = m.nn
    dims = [5, 7, 3, 4]
    offsets = np.array((0, *np.cumsum(dims)[:-1]), dtype=np.int64)

    class Model(nn.Module):
        def __init__(self, kind):
            super().__init__()
            self.kind, n = kind, sum(dims)
            self.linear, self.bias = nn.Embedding(n, 1), nn.Parameter(m.zeros((1,)))
            self.embedding = nn.Embedding(n, 4)
            self.fields = nn.ModuleList([nn.Embedding(n, 4) for _ in dims])
            for e in [self.embedding, *self.fields]:
                nn.init.xavier_uniform_(e.weight.data)
            self.cin = nn.ModuleList([nn.Conv1d(len(dims) * len(dims), 6, 1), nn.Conv1d(len(dims) * 3, 6, 1)])
            self.cin_fc = nn.Linear(3 + 6, 1)
            self.mlp = nn.Sequential(nn.Linear(16, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 1))

        def interactions(self, e):
            if self.kind == "fm":
                return 0.5 * (m.sum(e, dim=1) ** 2 - m.sum(e**2, dim=1)).sum(dim=1, keepdim=True)
            if self.kind == "ffm":
                xs = [table(self.ids) for table in self.fields]
                pairs = [xs[j][:, i] * xs[i][:, j] for i in range(len(dims) - 1) for j in range(i + 1, len(dims))]
                return m.sum(m.sum(m.stack(pairs, dim=1), dim=1), dim=1, keepdim=True)
            kept, h, x0 = [], e, e.unsqueeze(2)
            for i, conv in enumerate(self.cin):
                z = x0 * h.unsqueeze(1)
                b, f0, f1, d = z.shape
                z = nn.functional.relu(conv(z.view(b, f0 * f1, d)))
                if i == 0:
                    z, h = m.split(z, z.shape[1] // 2, dim=1)
                kept.append(z)
            return self.cin_fc(m.sum(m.cat(kept, dim=1), 2)) + self.mlp(e.view(-1, 16))

        def forward(self, ids):
            self.ids = ids + ids.new_tensor(offsets).unsqueeze(0)
            e = self.embedding(self.ids)
            return m.sigmoid((m.sum(self.linear(self.ids), dim=1) + self.bias + self.interactions(e)).squeeze(1))

    out = []
    with float64_default(m):
        rng = np.random.default_rng(0)
        ids = m.tensor(np.stack([rng.integers(0, d, 48) for d in dims], axis=1))
        clicks = m.tensor(rng.integers(0, 2, 48).astype(np.float64))
        for kind in ("fm", "ffm", "xdeepfm"):
            model = Model(kind)
            opt = m.optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-6)
            loader = m.utils.data.DataLoader(m.utils.data.TensorDataset(ids, clicks), batch_size=16, shuffle=True)
            for fields, target in loader:
                loss = nn.BCELoss()(model(fields), target.to(m.get_default_dtype()))
                model.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.item())
            model.eval()
            with m.no_grad():
                out.append(model(ids))
    return out


@pytest.mark.slow
def test_factorization_machines():
    _both(factorization_machines, F64)


def sparsely_gated_experts(m):
    """Noisy top-k gating (softplus noise scale, randn_like noise, the probability of staying in the top k from a
    Normal's cdf), cv_squared load losses, and a dispatcher: nonzero(gates).sort(0), split by column, index_add of
    the gated expert outputs; the gate weights start at zero, so without noise every row ties and the experts are
    the ones torch's topk names first."""
    nn = m.nn

    class Experts(nn.Module):
        def __init__(self, noisy, k=2, count=5):
            super().__init__()
            self.noisy, self.k, self.count = noisy, k, count
            self.experts = nn.ModuleList([nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)) for _ in "abcde"])
            self.w_gate = nn.Parameter(m.zeros(6, count))
            self.w_noise = nn.Parameter(m.zeros(6, count))
            self.register_buffer("mean", m.tensor([0.0]))
            self.register_buffer("std", m.tensor([1.0]))

        def cv_squared(self, x):
            return x.var() / (x.mean() ** 2 + 1e-10)

        def gates(self, x):
            clean = x @ self.w_gate
            logits = clean
            if self.noisy and self.training:
                scale = nn.functional.softplus(x @ self.w_noise) + 1e-2
                logits = clean + m.randn_like(clean) * scale
            top, index = logits.topk(self.k + 1, dim=1)
            gates = m.zeros_like(logits, requires_grad=True).scatter(1, index[:, : self.k], top[:, : self.k].softmax(1))
            if self.noisy and self.training:
                flat, normal = top.flatten(), m.distributions.Normal(self.mean, self.std)
                where = m.arange(x.size(0)) * (self.k + 1) + self.k
                t_in, t_out = flat.gather(0, where).unsqueeze(1), flat.gather(0, where - 1).unsqueeze(1)
                inside = m.gt(logits, t_in)
                load = m.where(inside, normal.cdf((clean - t_in) / scale), normal.cdf((clean - t_out) / scale)).sum(0)
            else:
                load = (gates > 0).sum(0).to(x.dtype)
            return gates, load

        def forward(self, x):
            gates, load = self.gates(x)
            aux = (self.cv_squared(gates.sum(0)) + self.cv_squared(load)) * 1e-2
            ordered, order = m.nonzero(gates).sort(0)
            _, expert_index = ordered.split(1, dim=1)
            batch_index = m.nonzero(gates)[order[:, 1], 0]
            sizes = (gates > 0).sum(0).tolist()
            chosen = m.gather(gates[batch_index.flatten()], 1, expert_index)
            inputs = m.split(x[batch_index].squeeze(1), sizes, dim=0)
            stitched = m.cat([e(i) for e, i in zip(self.experts, inputs)], 0).mul(chosen)
            combined = m.zeros(x.size(0), 3, requires_grad=True).index_add(0, batch_index, stitched)
            return combined, aux, sizes

    out = []
    with float64_default(m):
        x, y = m.rand(10, 6), m.randint(0, 3, (10,))
        for noisy in (True, False):
            model = Experts(noisy)
            if noisy:
                with m.no_grad():
                    model.w_gate.normal_(0, 0.5)
                    model.w_noise.normal_(0, 0.5)
            opt = m.optim.Adam(model.parameters(), lr=0.01)
            for _ in range(3):
                logits, aux, sizes = model(x)
                loss = nn.functional.cross_entropy(logits, y) + aux
                opt.zero_grad()
                loss.backward()
                opt.step()
                out += [loss.detach(), sizes, model.w_gate.grad]
    return out


@pytest.mark.slow
def test_sparsely_gated_experts():
    _both(sparsely_gated_experts, F64)


@pytest.mark.parametrize("largest", [True, False])
def test_a_tied_gate_picks_torchs_experts(largest):
    """The dispatcher's view of a tie: zero gates route every row to the same k experts, torch's choice."""

    def route(m):
        logits = m.zeros(4, 6)
        return logits.topk(3, dim=1, largest=largest).indices

    _both(route, F64)
