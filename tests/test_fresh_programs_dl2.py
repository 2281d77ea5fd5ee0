"""Deep-learning programs of the kinds public code holds, each written once against torch's API and run with torch
and with batched_grad from the same seed (this file and its two siblings, test_fresh_programs_dl2_*.py): graph
networks (a sparse-adjacency GCN, a GAT whose sparse product is an autograd.Function, message passing by
index_add_/scatter_add_/scatter_reduce/sparse.mm), normalizing flows (affine coupling, MADE-masked autoregressive,
LU-parametrized 1x1 mixing with actnorm) and a MADE mask ensemble."""

import io
import itertools
import math

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

F64 = dict(rtol=1e-9, atol=1e-11)
LBFGS_F64 = dict(rtol=1e-6, atol=1e-9)  # LBFGS's line search amplifies float64 rounding over its iterations


def _both(program, tolerance, **kwargs):
    expected, actual = program(torch, **kwargs), program(bg, **kwargs)
    assert_same(actual, expected, **tolerance)


def _random_graph(m, nodes, edges, seed):
    g = m.Generator().manual_seed(seed)
    pairs = m.randint(0, nodes, (2, edges), generator=g)
    return m.cat([pairs, pairs.flip(0)], 1)


def sparse_gcn(m):
    """Two graph convolutions over the symmetrically normalized adjacency (self loops added) held as a sparse COO
    tensor and applied with torch.spmm; dropout, log_softmax, nll_loss on a training split, Adam with weight decay,
    evaluation accuracy on a held-out split."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    n = 24
    edges = m.cat([_random_graph(m, n, 40, 1), m.arange(n).repeat(2, 1)], 1)
    adj = m.sparse_coo_tensor(edges, m.ones(edges.shape[1], dtype=m.float64), (n, n)).coalesce()
    deg = m.sparse.sum(adj, 1).to_dense()
    scale = deg.pow(-0.5)
    idx = adj.indices()
    adj = m.sparse_coo_tensor(idx, adj.values() * scale[idx[0]] * scale[idx[1]], (n, n))
    x, labels = m.rand(n, 7, dtype=m.float64), m.randint(0, 3, (n,))

    class GraphConvolution(nn.Module):
        def __init__(self, fan_in, fan_out):
            super().__init__()
            self.weight = nn.Parameter(m.empty(fan_in, fan_out, dtype=m.float64).uniform_(-0.4, 0.4))
            self.bias = nn.Parameter(m.zeros(fan_out, dtype=m.float64))

        def forward(self, h, a):
            return m.spmm(a, h @ self.weight) + self.bias

    layers = nn.ModuleList([GraphConvolution(7, 8), GraphConvolution(8, 3)])
    opt = m.optim.Adam(layers.parameters(), lr=0.02, weight_decay=5e-4)
    train, test = m.arange(0, 16), m.arange(16, n)
    losses = []
    for _ in range(5):
        layers.train()
        h = F.dropout(F.relu(layers[0](x, adj)), 0.5, training=True)
        out = F.log_softmax(layers[1](h, adj), dim=1)
        loss = F.nll_loss(out[train], labels[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    layers.eval()
    out = layers[1](F.relu(layers[0](x, adj)), adj)
    return losses, out.max(1)[1].eq(labels)[test].double().mean(), [p.detach() for p in layers.parameters()]


@pytest.mark.slow
def test_sparse_gcn():
    _both(sparse_gcn, F64)


def graph_attention(m):
    """Multi-head graph attention in the dense form (masked softmax over an adjacency) and the sparse form (edge
    scores exponentiated, row sums and the weighted sum through an autograd.Function that builds a sparse_coo_tensor
    and scatters its values' gradient from the dense product); the best epoch's state dict saved and loaded back."""
    nn, F = m.nn, m.nn.functional

    class EdgeProduct(m.autograd.Function):
        @staticmethod
        def forward(ctx, indices, values, shape, b):
            a = m.sparse_coo_tensor(indices, values, shape)
            ctx.save_for_backward(a, b)
            ctx.rows = shape[0]
            return m.matmul(a, b)

        @staticmethod
        def backward(ctx, grad_output):
            a, b = ctx.saved_tensors
            grad_values = grad_b = None
            if ctx.needs_input_grad[1]:
                flat = a._indices()[0, :] * ctx.rows + a._indices()[1, :]
                grad_values = grad_output.matmul(b.t()).view(-1)[flat]
            if ctx.needs_input_grad[3]:
                grad_b = a.t().matmul(grad_output)
            return None, grad_values, None, grad_b

    class Head(nn.Module):
        def __init__(self, fan_in, fan_out, sparse):
            super().__init__()
            self.W = nn.Parameter(nn.init.xavier_uniform_(m.empty(fan_in, fan_out, dtype=m.float64), gain=1.414))
            self.a = nn.Parameter(nn.init.xavier_uniform_(m.empty(2 * fan_out, 1, dtype=m.float64), gain=1.414))
            self.sparse, self.fan_out = sparse, fan_out

        def forward(self, x, adj):
            h = x @ self.W
            if not self.sparse:
                e = F.leaky_relu(h @ self.a[: self.fan_out] + (h @ self.a[self.fan_out :]).T, 0.2)
                att = F.softmax(m.where(adj > 0, e, -9e15 * m.ones_like(e)), dim=1)
                return F.elu(F.dropout(att, 0.3, self.training) @ h)
            edge = adj.nonzero().t()
            pair = m.cat((h[edge[0]], h[edge[1]]), dim=1).t()
            score = m.exp(-F.leaky_relu(self.a.t().mm(pair).squeeze(), 0.2))
            size = m.Size([x.shape[0], x.shape[0]])
            rowsum = EdgeProduct.apply(edge, score, size, m.ones(x.shape[0], 1, dtype=m.float64))
            return F.elu(EdgeProduct.apply(edge, F.dropout(score, 0.3, self.training), size, h).div(rowsum))

    results = []
    for sparse in (False, True):
        m.manual_seed(5)
        n = 12
        adj = m.zeros(n, n, dtype=m.float64)
        pairs = _random_graph(m, n, 20, 3)
        adj[pairs[0], pairs[1]] = 1.0
        adj += m.eye(n, dtype=m.float64)
        x, y = m.rand(n, 5, dtype=m.float64), m.randint(0, 2, (n,))
        heads = nn.ModuleList([Head(5, 4, sparse) for _ in range(2)])
        out = Head(8, 2, sparse)
        params = [*heads.parameters(), *out.parameters()]
        opt = m.optim.Adam(params, lr=0.01, weight_decay=5e-4)
        best, best_state, losses = math.inf, None, []
        for _ in range(4):
            logits = out(m.cat([head(x, adj) for head in heads], 1), adj)
            loss = F.nll_loss(F.log_softmax(logits, 1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
            if loss.item() < best:
                best, buffer = loss.item(), io.BytesIO()
                m.save(heads.state_dict(), buffer)
                best_state = buffer.getvalue()
        heads.load_state_dict(m.load(io.BytesIO(best_state)))
        results.append((losses, [p.detach() for p in heads.parameters()]))
    return results


@pytest.mark.slow
def test_graph_attention():
    _both(graph_attention, F64)


def message_passing(m, kind):
    """Graph classification with hand-written message passing: GCN normalization from scatter_add_ degrees and an
    index_add_ aggregation, GraphSAGE means (scatter_add_ sums over bincount degrees), attention with an edge softmax
    through scatter_reduce('amax'), GIN sums by torch.sparse.mm; a batch vector and global mean pooling."""
    nn, F = m.nn, m.nn.functional

    def with_loops(edges, n):
        return m.cat([edges, m.arange(n).repeat(2, 1)], 1)

    class Conv(nn.Module):
        def __init__(self, fan_in, fan_out):
            super().__init__()
            self.lin, self.root = nn.Linear(fan_in, fan_out), nn.Linear(fan_in, fan_out, bias=False)
            self.att = nn.Parameter(m.randn(2, fan_out, dtype=m.float64) * 0.3)

        def forward(self, x, edges):
            n = x.shape[0]
            if kind == "gcn":
                src, dst = with_loops(edges, n)
                deg = m.zeros(n, dtype=x.dtype).scatter_add_(0, dst, m.ones(dst.shape[0], dtype=x.dtype))
                norm = deg.pow(-0.5)[src] * deg.pow(-0.5)[dst]
                return m.zeros(n, self.lin.out_features, dtype=x.dtype).index_add_(
                    0, dst, norm[:, None] * self.lin(x)[src]
                )
            if kind == "sage":
                src, dst = edges
                sums = m.zeros_like(x).scatter_add_(0, dst[:, None].expand(-1, x.shape[1]), x[src])
                return self.lin(sums / m.bincount(dst, minlength=n).clamp(min=1)[:, None]) + self.root(x)
            if kind == "gat":
                src, dst = with_loops(edges, n)
                h = self.lin(x)
                score = F.leaky_relu((h * self.att[0]).sum(-1)[src] + (h * self.att[1]).sum(-1)[dst], 0.2)
                top = m.full((n,), -math.inf, dtype=x.dtype).scatter_reduce(0, dst, score, reduce="amax")
                weight = (score - top[dst]).exp()
                weight = weight / m.zeros(n, dtype=x.dtype).index_add_(0, dst, weight)[dst]
                return m.zeros_like(h).index_add_(0, dst, weight[:, None] * h[src])
            adj = m.sparse_coo_tensor(edges.flip(0), m.ones(edges.shape[1], dtype=x.dtype), (n, n)).coalesce()
            return self.lin(x + m.sparse.mm(adj, x))

    m.manual_seed(7)
    graphs = []
    for i in range(6):
        n = 4 + i % 3
        graphs.append((m.randn(n, 3, dtype=m.float64), _random_graph(m, n, n + 2, i), i % 2))
    convs = nn.ModuleList([Conv(3, 6), Conv(6, 6)]).double()
    head = nn.Linear(6, 2).double()
    opt = m.optim.Adam([*convs.parameters(), *head.parameters()], lr=0.02)
    offsets = list(itertools.accumulate([0] + [g[0].shape[0] for g in graphs]))
    x = m.cat([g[0] for g in graphs])
    edges = m.cat([g[1] + offset for g, offset in zip(graphs, offsets)], 1)
    batch = m.cat([m.full((g[0].shape[0],), i) for i, g in enumerate(graphs)])
    y = m.tensor([g[2] for g in graphs])
    losses = []
    for _ in range(4):
        h = x
        for conv in convs:
            h = F.relu(conv(h, edges))
        pooled = m.zeros(len(graphs), 6, dtype=h.dtype).index_add_(0, batch, h) / m.bincount(batch)[:, None]
        loss = F.cross_entropy(head(pooled), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses, [p.detach() for p in convs.parameters()]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gcn", "sage", "gat", "gin"])
def test_message_passing(kind):
    _both(message_passing, F64, kind=kind)


def _made_masks(m, nin, hidden, nout, seed, natural):
    """MADE connectivity: each hidden unit gets a degree; a unit sees inputs of lower or equal degree, outputs see
    strictly lower ones (replicated when nout is a multiple of nin)."""
    rng = np.random.RandomState(seed)
    degrees = [np.arange(nin) if natural else rng.permutation(nin)]
    for size in hidden:
        degrees.append(rng.randint(degrees[-1].min(), nin - 1, size=size))
    masks = [degrees[i][:, None] <= degrees[i + 1][None, :] for i in range(len(hidden))]
    masks.append(np.concatenate([degrees[-1][:, None] < degrees[0][None, :]] * (nout // nin), axis=1))
    return [m.from_numpy(mask.astype(np.uint8).T) for mask in masks]


def _masked_net(m, nin, hidden, nout):
    nn = m.nn

    class MaskedLinear(nn.Linear):
        def __init__(self, fan_in, fan_out):
            super().__init__(fan_in, fan_out)
            self.register_buffer("mask", m.ones(fan_out, fan_in))

        def forward(self, x):
            return nn.functional.linear(x, self.mask * self.weight, self.bias)

    sizes = [nin, *hidden, nout]
    layers = []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        layers += [MaskedLinear(fan_in, fan_out), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def made_ensemble(m):
    """A MADE over binary vectors with an ensemble of mask orderings, resampled every step and averaged over at test
    time; binary_cross_entropy_with_logits with the deprecated size_average=False, StepLR stepped with an epoch."""
    m.manual_seed(3)
    m.set_default_dtype(m.float64)
    try:
        net = _masked_net(m, 6, [12, 12], 6)
        opt = m.optim.Adam(net.parameters(), 1e-2, weight_decay=1e-4)
        sched = m.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
        data = (m.rand(40, 6) < m.linspace(0.2, 0.8, 6)).double()
        seed, record = 0, []
        for epoch in range(3):
            sched.step(epoch)
            for batch in data.split(10):
                for layer, mask in zip(net[::2], _made_masks(m, 6, [12, 12], 6, seed % 3, False)):
                    layer.mask.data.copy_(mask)
                seed += 1
                loss = m.nn.functional.binary_cross_entropy_with_logits(net(batch), batch, size_average=False) / 10
                opt.zero_grad()
                loss.backward()
                opt.step()
            record.append((loss.detach(), sched.get_last_lr()))
        with m.no_grad():
            logits = m.zeros_like(data)
            for s in range(3):
                for layer, mask in zip(net[::2], _made_masks(m, 6, [12, 12], 6, s, False)):
                    layer.mask.data.copy_(mask)
                logits += net(data)
        return record, logits / 3
    finally:
        m.set_default_dtype(m.float32)


@pytest.mark.slow
def test_made_ensemble():
    _both(made_ensemble, F64)


def coupling_flows(m, kind):
    """Density estimation on two moons: RealNVP's affine coupling of alternating halves (strided-slice writes into a
    zeros tensor), a MAF whose MADE net gives shift and log-scale (sampled back one dim at a time), and Glow's actnorm
    (data-dependent init by .data assignment) with an LU-parametrized 1x1 mixing (lu_unpack of Tensor.lu). Logistic
    prior as a TransformedDistribution of a Uniform by SigmoidTransform().inv, or a MultivariateNormal."""
    nn, D = m.nn, m.distributions
    m.manual_seed(2)
    m.set_default_dtype(m.float64)
    try:

        def mlp():
            return nn.Sequential(nn.Linear(1, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))

        class Coupling(nn.Module):
            def __init__(self, parity):
                super().__init__()
                self.parity, self.s, self.t = parity, mlp(), mlp()

            def forward(self, x):
                x0, x1 = (x[:, 1::2], x[:, ::2]) if self.parity else (x[:, ::2], x[:, 1::2])
                s = self.s(x0)
                z1 = m.exp(s) * x1 + self.t(x0)
                z0, z1 = (z1, x0) if self.parity else (x0, z1)
                z = m.zeros(x.shape[0], 2)
                z[:, ::2], z[:, 1::2] = z0, z1
                return z, s.sum(1)

        class Autoregressive(nn.Module):
            def __init__(self, parity):
                super().__init__()
                self.net, self.parity = _masked_net(m, 2, [8, 8], 4), parity
                for layer, mask in zip(self.net[::2], _made_masks(m, 2, [8, 8], 4, 0, True)):
                    layer.mask.data.copy_(mask)

            def forward(self, x):
                s, t = self.net(x).split(2, dim=1)
                z = x * m.exp(s) + t
                return (z.flip(dims=(1,)) if self.parity else z), s.sum(1)

            def inverse(self, z):
                x = m.zeros_like(z)
                z = z.flip(dims=(1,)) if self.parity else z
                for i in range(2):
                    s, t = self.net(x.clone()).split(2, dim=1)
                    x[:, i] = (z[:, i] - t[:, i]) * m.exp(-s[:, i])
                return x

        class ActNorm(nn.Module):
            def __init__(self):
                super().__init__()
                self.s, self.t, self.ready = nn.Parameter(m.randn(1, 2)), nn.Parameter(m.randn(1, 2)), False

            def forward(self, x):
                if not self.ready:
                    self.s.data = (-m.log(x.std(dim=0, keepdim=True))).detach()
                    self.t.data = (-(x * m.exp(self.s)).mean(dim=0, keepdim=True)).detach()
                    self.ready = True
                return x * m.exp(self.s) + self.t, self.s.sum(1)

        class Mixing(nn.Module):
            def __init__(self):
                super().__init__()
                P, L, U = m.lu_unpack(*nn.init.orthogonal_(m.randn(2, 2)).lu())
                self.P, self.L, self.S = P, nn.Parameter(L), nn.Parameter(U.diag())
                self.U = nn.Parameter(m.triu(U, diagonal=1))

            def forward(self, x):
                L = m.tril(self.L, diagonal=-1) + m.diag(m.ones(2))
                W = self.P @ L @ (m.triu(self.U, diagonal=1) + m.diag(self.S))
                return x @ W, m.log(m.abs(self.S)).sum()

        if kind == "realnvp":
            flows = [Coupling(i % 2) for i in range(4)]
            prior = D.TransformedDistribution(D.Uniform(m.zeros(2), m.ones(2)), D.SigmoidTransform().inv)
        elif kind == "maf":
            flows = [Autoregressive(i % 2) for i in range(2)]
            prior = D.MultivariateNormal(m.zeros(2), m.eye(2))
        else:
            flows = [f for _ in range(2) for f in (ActNorm(), Mixing(), Coupling(0))]
            prior = D.MultivariateNormal(m.zeros(2), m.eye(2))
        model = nn.ModuleList(flows)
        opt = m.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-5)
        rng = np.random.RandomState(0)
        losses = []
        for _ in range(4):
            angle = rng.rand(32) * np.pi
            moons = np.stack([np.cos(angle), np.sin(angle)], 1) * np.where(rng.rand(32) < 0.5, 1, -1)[:, None]
            z, log_det = m.from_numpy(moons + 0.05 * rng.randn(32, 2)), m.zeros(32)
            for flow in model:
                z, ld = flow(z)
                log_det = log_det + ld
            loss = -(prior.log_prob(z).view(32, -1).sum(1) + log_det).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        extra = []
        if kind == "maf":
            with m.no_grad():
                sample = prior.sample((5,))
                for flow in reversed(flows):
                    sample = flow.inverse(sample)
                extra = [sample]
        return losses, [p.detach() for p in model.parameters()], extra
    finally:
        m.set_default_dtype(m.float32)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["realnvp", "maf", "glow"])
def test_coupling_flows(kind):
    _both(coupling_flows, F64, kind=kind)
