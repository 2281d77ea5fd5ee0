"""Recommender and Kolmogorov-Arnold programs of the kinds public code holds (guoyang9/NCF, facebookresearch/dlrm,
chenxijun1029/DeepFM_with_PyTorch, a two-tower retriever with logQ correction and a wide & deep ranker,
pmixer/SASRec.pytorch, Blealtan/efficient-kan, GistNoesis/FourierKAN, SynodicMonth/ChebyKAN, ZiyaoLi/fast-kan), each
written once against torch's API and run with torch and with batched_grad from the same seed in float64, compared
number for number. The self-supervised programs are in test_fresh_programs_freshR.py."""

import math

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_freshR import _float64, _restore


def neumf(m):
    """GMF and MLP towers trained alone, then NeuMF initialised from them by weight.data.copy_ (the predict layer
    from their concatenated halves), BCEWithLogits on sampled negatives and hit ratio / NDCG from topk and take."""
    nn = m.nn
    _float64(m)
    try:
        rng = np.random.default_rng(0)
        users, items = 6, 10
        pos = [(u, int(i)) for u in range(users) for i in rng.choice(items, 2, replace=False)]

        class NCF(nn.Module):
            def __init__(self, kind, gmf=None, mlp=None, factors=4, layers=2):
                super().__init__()
                self.kind = kind
                self.gmf_u, self.gmf_i = nn.Embedding(users, factors), nn.Embedding(items, factors)
                width = factors * 2 ** (layers - 1)
                self.mlp_u, self.mlp_i = nn.Embedding(users, width), nn.Embedding(items, width)
                blocks = []
                for k in range(layers):
                    size = factors * 2 ** (layers - k)
                    blocks += [nn.Dropout(0.0), nn.Linear(size, size // 2), nn.ReLU()]
                self.mlp = nn.Sequential(*blocks)
                self.predict = nn.Linear(factors * (1 if kind in ("GMF", "MLP") else 2), 1)
                if kind != "NeuMF-pre":
                    for e in (self.gmf_u, self.gmf_i, self.mlp_u, self.mlp_i):
                        nn.init.normal_(e.weight, std=0.01)
                    for layer in self.mlp:
                        if isinstance(layer, nn.Linear):
                            nn.init.xavier_uniform_(layer.weight)
                    nn.init.kaiming_uniform_(self.predict.weight, a=1, nonlinearity="sigmoid")
                    for layer in self.modules():
                        if isinstance(layer, nn.Linear) and layer.bias is not None:
                            layer.bias.data.zero_()
                else:
                    for name in ("gmf_u", "gmf_i"):
                        getattr(self, name).weight.data.copy_(getattr(gmf, name).weight)
                    for name in ("mlp_u", "mlp_i"):
                        getattr(self, name).weight.data.copy_(getattr(mlp, name).weight)
                    for a, b in zip(self.mlp, mlp.mlp):
                        if isinstance(a, nn.Linear):
                            a.weight.data.copy_(b.weight)
                            a.bias.data.copy_(b.bias)
                    self.predict.weight.data.copy_(0.5 * m.cat([gmf.predict.weight, mlp.predict.weight], dim=1))
                    self.predict.bias.data.copy_(0.5 * (gmf.predict.bias + mlp.predict.bias))

            def forward(self, u, i):
                parts = []
                if self.kind != "MLP":
                    parts.append(self.gmf_u(u) * self.gmf_i(i))
                if self.kind != "GMF":
                    parts.append(self.mlp(m.cat((self.mlp_u(u), self.mlp_i(i)), -1)))
                return self.predict(m.cat(parts, -1)).view(-1)

        def train(kind, gmf=None, mlp=None):
            model = NCF(kind, gmf, mlp)
            opt = (m.optim.SGD if kind == "NeuMF-pre" else m.optim.Adam)(model.parameters(), lr=0.01)
            out = []
            for _ in range(2):
                negatives = [(u, int(j)) for u, _ in pos for j in rng.integers(0, items, 2)]
                pairs = m.tensor(pos + negatives)
                labels = m.tensor([1.0] * len(pos) + [0.0] * len(negatives))
                loader = m.utils.data.DataLoader(m.utils.data.TensorDataset(pairs, labels), batch_size=8, shuffle=True)
                for batch, label in loader:
                    model.zero_grad()
                    loss = nn.BCEWithLogitsLoss()(model(batch[:, 0], batch[:, 1]), label)
                    loss.backward()
                    opt.step()
                model.eval()
                hits, ndcgs = [], []
                for u in range(users):
                    item = m.tensor([pos[2 * u][1], *rng.integers(0, items, 4).tolist()])
                    _, top = m.topk(model(m.full((5,), u), item), 3)
                    recommended = m.take(item, top).tolist()
                    hit = item[0].item() in recommended
                    hits.append(hit)
                    ndcgs.append(np.reciprocal(np.log2(recommended.index(item[0].item()) + 2)) if hit else 0)
                model.train()
                out += [loss.detach(), float(np.mean(hits)), float(np.mean(ndcgs))]
            return model, out

        gmf, out_gmf = train("GMF")
        mlp, out_mlp = train("MLP")
        neu, out_neu = train("NeuMF-pre", gmf, mlp)
        return out_gmf + out_mlp + out_neu + [p.detach() for p in neu.parameters()]
    finally:
        _restore(m)


def dlrm(m):
    """DLRM: numpy-initialised MLPs assigned through .data, EmbeddingBag(sparse=True) tables called with offsets
    (sum, mean, learned per-sample weights), the dot interaction Z[:, li, lj] with li/lj from list comprehensions or
    tril_indices, and SGD on sparse gradients."""
    nn = m.nn
    _float64(m)
    try:
        rng = np.random.default_rng(1)
        tables, dim = [5, 7, 4], 2

        def make_mlp(sizes, sigmoid_last):
            layers = []
            for i in range(len(sizes) - 1):
                lin = nn.Linear(sizes[i], sizes[i + 1])
                lin.weight.data = m.tensor(rng.normal(0, np.sqrt(2 / sum(sizes[i : i + 2])), (sizes[i + 1], sizes[i])))
                lin.bias.data = m.tensor(rng.normal(0, np.sqrt(1 / sizes[i + 1]), sizes[i + 1]))
                layers += [lin, nn.Sigmoid() if sigmoid_last and i == len(sizes) - 2 else nn.ReLU()]
            return nn.Sequential(*layers)

        out = []
        for op, mode, weighted in (("dot", "sum", False), ("tril", "mean", False), ("dot", "sum", True)):
            bags = nn.ModuleList([nn.EmbeddingBag(n, dim, mode=mode, sparse=True) for n in tables])
            for bag, n in zip(bags, tables):
                bag.weight.data = m.tensor(rng.uniform(-np.sqrt(1 / n), np.sqrt(1 / n), (n, dim)))
            sample_w = nn.ParameterList([nn.Parameter(m.ones(n)) for n in tables]) if weighted else None
            bottom, top = make_mlp([4, 3, dim], False), make_mlp([dim + 6, 4, 1], True)
            params = list(bags.parameters()) + list(bottom.parameters()) + list(top.parameters())
            opt = m.optim.SGD(params + (list(sample_w) if weighted else []), lr=0.1)
            for _ in range(3):
                dense = m.tensor(rng.random((4, 4)))
                ly = []
                for k, n in enumerate(tables):
                    sizes = rng.integers(1, 3, 4)
                    offsets = m.tensor(np.concatenate([[0], np.cumsum(sizes)[:-1]]))
                    idx = m.tensor(rng.integers(0, n, int(sizes.sum())))
                    psw = sample_w[k].gather(0, idx) if weighted else None
                    ly.append(bags[k](idx, offsets, per_sample_weights=psw))
                x = bottom(dense)
                T = m.cat([x] + ly, dim=1).view((4, -1, dim))
                Z = m.bmm(T, m.transpose(T, 1, 2))
                _, ni, nj = Z.shape
                if op == "dot":
                    li = m.tensor([i for i in range(ni) for j in range(i)])
                    lj = m.tensor([j for i in range(nj) for j in range(i)])
                else:
                    li, lj = m.tril_indices(ni, nj, offset=-1)
                p = top(m.cat([x, Z[:, li, lj]], dim=1))
                loss = nn.BCELoss()(p, m.tensor(rng.integers(0, 2, (4, 1)).astype(float)))
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.detach())
            out += [b.weight.grad.is_sparse for b in bags] + [p.detach() for p in params]

        return out
    finally:
        _restore(m)


def deepfm(m):
    """DeepFM: field-wise first- and second-order terms ((sum)^2 - sum of squares over normalized field embeddings),
    a BatchNorm deep part and an L1 penalty accumulated from a zeros tensor that requires grad."""
    nn, F = m.nn, m.nn.functional
    _float64(m)
    try:
        out = []
        fields = [3, 5, 4]
        first = nn.ModuleList([nn.Embedding(n, 1) for n in fields])
        second = nn.ModuleList([nn.Embedding(n, 3) for n in fields])
        deep = nn.Sequential(nn.Linear(9, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Dropout(0.2), nn.Linear(6, 6))
        bias = nn.Parameter(m.zeros(1))
        params = [*first.parameters(), *second.parameters(), *deep.parameters(), bias]
        opt = m.optim.Adam(params, lr=1e-3)
        Xi = m.stack([m.randint(0, n, (8, 1)) for n in fields], 1)
        Xv, y = m.rand(8, 3), m.randint(0, 2, (8,)).double()
        for _ in range(3):
            f1 = m.cat([(m.sum(e(Xi[:, i, :]), 1).t() * Xv[:, i]).t() for i, e in enumerate(first)], 1)
            xv = m.stack([(m.sum(e(Xi[:, i, :]), 1).t() * Xv[:, i]).t() for i, e in enumerate(second)], dim=1)
            xv = F.normalize(xv, dim=1)
            f2 = 0.5 * (m.sum(xv, dim=1).pow(2.0) - m.sum(xv.pow(2.0), dim=1))
            total = m.sum(f1, 1) + m.sum(f2, 1) + m.sum(deep(m.flatten(xv, start_dim=1)), 1) + bias
            reg = m.zeros(1, requires_grad=True)
            for p in params[:-1]:
                reg = reg + m.sum(m.abs(p))
            loss = nn.BCEWithLogitsLoss()(total, y) + 1e-6 * reg
            if not m.isnan(loss):
                opt.zero_grad()
                loss.backward()
                opt.step()
            out.append(loss.detach())
        return out + [p.detach() for p in params]
    finally:
        _restore(m)


def two_tower_and_wide_deep(m):
    """In-batch InfoNCE between user and item towers with a corrected logQ (log(1 - (1 - p)^B)), false negatives
    masked by positive_matrix[users][:, items] with fill_diagonal_, a clamped learnable temperature,
    clip_grad_norm_ and ReduceLROnPlateau in mode max; then wide & deep: a multi-hot wide part as an EmbeddingBag
    with per-sample weights beside embeddings and an MLP, trained by Adagrad with per-group learning rates."""
    nn, F = m.nn, m.nn.functional
    _float64(m)
    try:
        rng = np.random.default_rng(2)
        users, items, batch = 6, 8, 5
        examples = [(int(rng.integers(users)), int(rng.zipf(1.5) % items)) for _ in range(20)]
        freq = m.zeros(items)
        for _, i in examples:
            freq[i] += 1
        prob = freq.clamp(min=1) / freq.clamp(min=1).sum()
        log_q = m.log(1.0 - (1.0 - prob) ** batch)
        positive = m.zeros(users, items, dtype=m.bool)
        for u, i in examples:
            positive[u, i] = True
        user_emb, item_emb, item_bias = nn.Embedding(users, 4), nn.Embedding(items, 4), nn.Embedding(items, 1)
        nn.init.zeros_(item_bias.weight)
        tower = nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.Linear(6, 4))
        log_temp = nn.Parameter(m.tensor(math.log(0.1)))
        params = [
            *user_emb.parameters(),
            *item_emb.parameters(),
            *item_bias.parameters(),
            *tower.parameters(),
            log_temp,
        ]
        opt = m.optim.AdamW(params, lr=3e-3, weight_decay=1e-4)
        sched = m.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max", patience=0)
        out = []
        for _ in range(3):
            order = rng.permutation(len(examples))
            for start in range(0, len(examples) - 1, batch):
                chosen = [examples[k] for k in order[start : start + batch]]
                u, i = m.tensor([c[0] for c in chosen]), m.tensor([c[1] for c in chosen])
                uv, iv = F.normalize(tower(user_emb(u)), dim=-1), F.normalize(item_emb(i), dim=-1)
                logits = uv @ iv.T + item_bias(i).squeeze(-1).unsqueeze(0)
                false_negative = positive[u][:, i]
                false_negative.fill_diagonal_(False)
                logits = logits.masked_fill(false_negative, -1e9)
                temperature = log_temp.exp().clamp(min=0.01, max=1.0)
                loss = F.cross_entropy(logits / temperature - log_q[i].unsqueeze(0), m.arange(len(chosen)))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                m.nn.utils.clip_grad_norm_(params, max_norm=1.0)
                opt.step()
                out.append(loss.detach())
            with m.no_grad():
                scores = F.normalize(tower(user_emb.weight), dim=-1) @ F.normalize(item_emb.weight, dim=-1).T
                recall = scores.topk(3, dim=1).indices == m.tensor(rng.integers(0, items, users)).unsqueeze(1)
                sched.step(recall.any(1).double().mean().item())
            out.append(opt.param_groups[0]["lr"])

        wide, wide_bias = nn.EmbeddingBag(38, 1, mode="sum"), nn.Parameter(m.zeros(1))
        cats = nn.ModuleList([nn.Embedding(n, 3) for n in (5, 7, 3)])
        mlp = nn.Sequential(nn.Linear(11, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 1))
        cat = m.stack([m.randint(0, n, (12,)) for n in (5, 7, 3)], 1)
        dense, y = m.randn(12, 2), m.randint(0, 2, (12,)).double()
        ids = m.stack([cat[:, 0] * 7 + cat[:, 1], 35 + cat[:, 2]], 1).flatten()
        offsets, weights = m.arange(0, 24, 2), m.rand(24)
        opt = m.optim.Adagrad(
            [
                {"params": [*wide.parameters(), wide_bias], "lr": 0.1},
                {"params": [*cats.parameters(), *mlp.parameters()]},
            ],
            lr=0.05,
        )
        for _ in range(3):
            deep_in = m.cat([e(cat[:, k]) for k, e in enumerate(cats)] + [dense], dim=1)
            logit = (wide(ids, offsets, per_sample_weights=weights) + wide_bias + mlp(deep_in)).squeeze(1)
            loss = F.binary_cross_entropy_with_logits(logit, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.detach())
        return out + [p.detach() for p in params] + [wide.weight.detach()]
    finally:
        _restore(m)


def sasrec(m):
    """SASRec: numpy item sequences through LongTensor/BoolTensor, embeddings scaled by sqrt(d) plus positions, padded
    steps zeroed by ~mask, pre-norm MultiheadAttention on (T, B, C) with a causal ~tril mask, Conv1d feed-forward,
    xavier_normal_ tried on every parameter (1-D ones raise and are skipped), BCE on np.where(pos != 0) positions
    and an L2 term on the item table; evaluation ranks by argsort().argsort()."""
    nn = m.nn
    _float64(m)
    try:
        rng = np.random.default_rng(3)
        items, d, maxlen = 9, 6, 5
        item_emb, pos_emb = nn.Embedding(items + 1, d, padding_idx=0), nn.Embedding(maxlen, d)
        norms = nn.ModuleList([nn.LayerNorm(d, eps=1e-8) for _ in range(5)])
        attn = nn.ModuleList([nn.MultiheadAttention(d, 2, 0.2) for _ in range(2)])
        convs = nn.ModuleList([nn.Conv1d(d, d, kernel_size=1) for _ in range(4)])
        drop = nn.Dropout(0.2)
        modules = nn.ModuleList([item_emb, pos_emb, norms, attn, convs])
        for _, p in modules.named_parameters():
            try:
                nn.init.xavier_normal_(p.data)
            except ValueError:
                pass
        pos_emb.weight.data[0, :] = 0
        item_emb.weight.data[0, :] = 0

        def log2feats(seqs_np):
            seqs = item_emb(m.LongTensor(seqs_np)) * item_emb.embedding_dim**0.5
            seqs = drop(seqs + pos_emb(m.LongTensor(np.tile(np.arange(seqs_np.shape[1]), [seqs_np.shape[0], 1]))))
            timeline = m.BoolTensor(seqs_np == 0)
            seqs = seqs * ~timeline.unsqueeze(-1)
            causal = ~m.tril(m.ones((maxlen, maxlen), dtype=m.bool))
            for k in range(2):
                seqs = m.transpose(seqs, 0, 1)
                Q = norms[2 * k](seqs)
                mha, _ = attn[k](Q, seqs, seqs, attn_mask=causal)
                seqs = m.transpose(Q + mha, 0, 1)
                seqs = norms[2 * k + 1](seqs)
                ff = drop(convs[2 * k + 1](m.relu(drop(convs[2 * k](seqs.transpose(-1, -2))))))
                seqs = (ff.transpose(-1, -2) + seqs) * ~timeline.unsqueeze(-1)
            return norms[4](seqs)

        opt = m.optim.Adam(modules.parameters(), lr=1e-3, betas=(0.9, 0.98))
        out = []
        for _ in range(3):
            seq = np.zeros((3, maxlen), dtype=np.int64)
            for row in seq:
                n = rng.integers(2, maxlen + 1)
                row[-n:] = rng.integers(1, items + 1, n)
            pos = np.concatenate([seq[:, 1:], rng.integers(1, items + 1, (3, 1))], 1) * (seq != 0)
            neg = rng.integers(1, items + 1, seq.shape) * (pos != 0)
            feats = log2feats(seq)
            pos_logits = (feats * item_emb(m.LongTensor(pos))).sum(dim=-1)
            neg_logits = (feats * item_emb(m.LongTensor(neg))).sum(dim=-1)
            where = np.where(pos != 0)
            bce = nn.BCEWithLogitsLoss()
            loss = bce(pos_logits[where], m.ones(pos_logits.shape)[where])
            loss += bce(neg_logits[where], m.zeros(neg_logits.shape)[where])
            for p in item_emb.parameters():
                loss += 0.001 * m.norm(p)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.detach())
        modules.eval()
        with m.no_grad():
            candidates = item_emb(m.LongTensor(rng.integers(1, items + 1, (3, 4))))
            scores = -candidates.matmul(log2feats(seq)[:, -1, :].unsqueeze(-1)).squeeze(-1)
            out.append(scores.argsort().argsort()[:, 0])
        return out + [p.detach() for p in modules.parameters()]
    finally:
        _restore(m)


def kans(m):
    """efficient-kan's KANLinear (B-spline bases by the Cox-de Boor recursion over a grid buffer, curve2coeff by
    torch.linalg.lstsq, update_grid from sorted inputs and linspace-picked knots, the regularization loss); the
    naive FourierKAN layer (cos/sin of k * x summed against coefficients); ChebyKAN both ways (the recurrence
    written into slices of a ones tensor with .clone(), and acos / *= arange / cos); fast-kan's RBF basis over a
    frozen Parameter grid with trunc_normal_ spline weights. Each trains a few steps."""
    nn, F = m.nn, m.nn.functional
    _float64(m)
    try:

        class KANLinear(nn.Module):
            def __init__(self, fan_in, fan_out, grid_size=4, order=3):
                super().__init__()
                self.fan_in, self.fan_out, self.grid_size, self.order = fan_in, fan_out, grid_size, order
                h = 2 / grid_size
                grid = (m.arange(-order, grid_size + order + 1) * h - 1).expand(fan_in, -1).contiguous()
                self.register_buffer("grid", grid)
                self.base_weight = nn.Parameter(m.Tensor(fan_out, fan_in))
                self.spline_weight = nn.Parameter(m.Tensor(fan_out, fan_in, grid_size + order))
                self.spline_scaler = nn.Parameter(m.Tensor(fan_out, fan_in))
                nn.init.kaiming_uniform_(self.base_weight, a=math.sqrt(5))
                with m.no_grad():
                    noise = (m.rand(grid_size + 1, fan_in, fan_out) - 0.5) * 0.1 / grid_size
                    self.spline_weight.data.copy_(self.curve2coeff(self.grid.T[order:-order], noise))
                    nn.init.kaiming_uniform_(self.spline_scaler, a=math.sqrt(5))

            def b_splines(self, x):
                g, x = self.grid, x.unsqueeze(-1)
                bases = ((x >= g[:, :-1]) & (x < g[:, 1:])).to(x.dtype)
                for k in range(1, self.order + 1):
                    bases = (x - g[:, : -(k + 1)]) / (g[:, k:-1] - g[:, : -(k + 1)]) * bases[:, :, :-1] + (
                        g[:, k + 1 :] - x
                    ) / (g[:, k + 1 :] - g[:, 1:(-k)]) * bases[:, :, 1:]
                return bases.contiguous()

            def curve2coeff(self, x, y):
                A, B = self.b_splines(x).transpose(0, 1), y.transpose(0, 1)
                return m.linalg.lstsq(A, B).solution.permute(2, 0, 1).contiguous()

            def scaled(self):
                return self.spline_weight * self.spline_scaler.unsqueeze(-1)

            def forward(self, x):
                base = F.linear(F.silu(x), self.base_weight)
                return base + F.linear(self.b_splines(x).view(x.size(0), -1), self.scaled().view(self.fan_out, -1))

            @m.no_grad()
            def update_grid(self, x, margin=0.01):
                splines = self.b_splines(x).permute(1, 0, 2)
                unreduced = m.bmm(splines, self.scaled().permute(1, 2, 0)).permute(1, 0, 2)
                x_sorted = m.sort(x, dim=0)[0]
                adaptive = x_sorted[m.linspace(0, x.size(0) - 1, self.grid_size + 1, dtype=m.int64)]
                step = (x_sorted[-1] - x_sorted[0] + 2 * margin) / self.grid_size
                uniform = m.arange(self.grid_size + 1, dtype=m.float64).unsqueeze(1) * step + x_sorted[0] - margin
                grid = 0.02 * uniform + 0.98 * adaptive
                grid = m.concatenate(
                    [
                        grid[:1] - step * m.arange(self.order, 0, -1).unsqueeze(1),
                        grid,
                        grid[-1:] + step * m.arange(1, self.order + 1).unsqueeze(1),
                    ],
                    dim=0,
                )
                self.grid.copy_(grid.T)
                self.spline_weight.data.copy_(self.curve2coeff(x, unreduced))

            def regularization(self):
                l1 = self.spline_weight.abs().mean(-1)
                p = l1 / l1.sum()
                return l1.sum() - m.sum(p * p.log())

        class Fourier(nn.Module):
            def __init__(self, fan_in, fan_out, gridsize):
                super().__init__()
                self.fan_in, self.fan_out, self.gridsize = fan_in, fan_out, gridsize
                coeffs = m.randn(2, fan_out, fan_in, gridsize) / (np.sqrt(fan_in) * np.sqrt(gridsize))
                self.coeffs, self.bias = nn.Parameter(coeffs), nn.Parameter(m.zeros(1, fan_out))

            def forward(self, x):
                k = m.reshape(m.arange(1, self.gridsize + 1), (1, 1, 1, self.gridsize))
                xr = m.reshape(x, (x.shape[0], 1, x.shape[1], 1))
                y = m.sum(m.cos(k * xr) * self.coeffs[0:1], (-2, -1))
                y += m.sum(m.sin(k * xr) * self.coeffs[1:2], (-2, -1))
                return y + self.bias

        class Cheby(nn.Module):
            def __init__(self, fan_in, fan_out, degree, recurrence):
                super().__init__()
                self.fan_in, self.degree, self.recurrence = fan_in, degree, recurrence
                self.coeffs = nn.Parameter(m.empty(fan_in, fan_out, degree + 1))
                nn.init.normal_(self.coeffs, mean=0.0, std=1 / (fan_in * (degree + 1)))
                self.register_buffer("arange", m.arange(0, degree + 1, 1))

            def forward(self, x):
                x = m.tanh(m.reshape(x, (-1, self.fan_in)))
                if self.recurrence:
                    cheby = m.ones(x.shape[0], self.fan_in, self.degree + 1)
                    cheby[:, :, 1] = x
                    for i in range(2, self.degree + 1):
                        cheby[:, :, i] = 2 * x * cheby[:, :, i - 1].clone() - cheby[:, :, i - 2].clone()
                else:
                    cheby = x.view((-1, self.fan_in, 1)).expand(-1, -1, self.degree + 1).acos()
                    cheby *= self.arange
                    cheby = cheby.cos()
                return m.einsum("bid,iod->bo", cheby, self.coeffs)

        class FastKAN(nn.Module):
            def __init__(self, fan_in, fan_out, num_grids=5):
                super().__init__()
                self.norm = nn.LayerNorm(fan_in)
                self.grid = nn.Parameter(m.linspace(-2.0, 2.0, num_grids), requires_grad=False)
                self.spline = nn.Linear(fan_in * num_grids, fan_out, bias=False)
                nn.init.trunc_normal_(self.spline.weight, mean=0, std=0.1)
                self.base = nn.Linear(fan_in, fan_out)

            def forward(self, x):
                basis = m.exp(-(((self.norm(x)[..., None] - self.grid) / 1.0) ** 2))
                return self.spline(basis.view(*basis.shape[:-2], -1)) + self.base(F.silu(x))

        x, labels = m.rand(12, 4) * 2 - 1, m.randint(0, 3, (12,))
        out = []
        nets = {
            "efficient": nn.ModuleList([KANLinear(4, 5), KANLinear(5, 3)]),
            "fourier": nn.ModuleList([Fourier(4, 5, 6), Fourier(5, 3, 6)]),
            "cheby_recurrence": nn.ModuleList([Cheby(4, 5, 4, True), nn.LayerNorm(5), Cheby(5, 3, 4, True)]),
            "cheby_acos": nn.ModuleList([Cheby(4, 5, 4, False), nn.LayerNorm(5), Cheby(5, 3, 4, False)]),
            "fast": nn.ModuleList([FastKAN(4, 5), FastKAN(5, 3)]),
        }
        for name, net in nets.items():
            opt = m.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=1e-4)
            sched = m.optim.lr_scheduler.ExponentialLR(opt, gamma=0.8)
            for step in range(3):
                h = x
                for layer in net:
                    if name == "efficient" and step == 1:
                        layer.update_grid(h)
                    h = layer(h)
                loss = F.cross_entropy(h, labels)
                if name == "efficient":
                    loss = loss + 1e-4 * sum(layer.regularization() for layer in net)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                out.append(loss.detach())
            out += [p.detach() for p in net.parameters()] + [b.clone() for b in net.buffers()]
        return out
    finally:
        _restore(m)


@pytest.mark.slow
@pytest.mark.parametrize(
    "program", [neumf, dlrm, deepfm, two_tower_and_wide_deep, sasrec, kans], ids=lambda p: p.__name__
)
def test_recommender_and_kan_program_matches_torch(program):
    _both(program, F64)
