"""Graph-network programs of public repositories, each run with torch and with batched_grad from the same seed in
float64 and compared number for number: an E(n)-equivariant GNN (vgsatorras/egnn, models/egnn_clean) on a full and a
cdist/nonzero radius graph, the Gilmer MPNN with a Set2Vec readout (lrjconan/LanczosNetwork, model/mpnn.py), a GIN
layer whose eps is learnt (zengkaipeng/UAlign, GINConv.py) under add/mean/max/cumsum-offset pooling, link prediction
with a GraphSAGE encoder (yjiao1022/cora: torch_geometric's SAGEConv and RandomLinkSplit written in plain torch,
negatives by randint/unique/isin) and the sampled-neighbour GraphSAGE of twjiang/graphSAGE-pytorch."""

import random

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

F64 = dict(rtol=1e-9, atol=1e-11)
F32 = dict(rtol=2e-5, atol=1e-6)  # float32 programs: sums may round in another order than torch's


def _both(program, tolerance):
    assert_same(program(bg), program(torch), **tolerance)


def _seeded(m, seed=0):
    m.manual_seed(seed)
    m.set_default_dtype(m.float64)


def _segment_sum(m, data, ids, count):
    out = data.new_full((count, data.size(1)), 0)
    return out.scatter_add_(0, ids.unsqueeze(-1).expand(-1, data.size(1)), data)


def _egnn_layer(m, hidden, edge_dim, attention, normalize, tanh, mean):
    nn = m.nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            act = nn.SiLU()
            self.edge_mlp = nn.Sequential(
                nn.Linear(2 * hidden + 1 + edge_dim, hidden), act, nn.Linear(hidden, hidden), act
            )
            self.node_mlp = nn.Sequential(nn.Linear(2 * hidden, hidden), act, nn.Linear(hidden, hidden))
            last = nn.Linear(hidden, 1, bias=False)
            nn.init.xavier_uniform_(last.weight, gain=0.001)
            self.coord_mlp = nn.Sequential(nn.Linear(hidden, hidden), act, last, *([nn.Tanh()] if tanh else []))
            self.att_mlp = nn.Sequential(nn.Linear(hidden, 1), nn.Sigmoid()) if attention else None

        def forward(self, h, edges, x, edge_attr):
            row, col = edges
            diff = x[row] - x[col]
            radial = m.sum(diff**2, 1).unsqueeze(1)
            if normalize:
                diff = diff / (m.sqrt(radial).detach() + 1e-8)
            parts = [h[row], h[col], radial] + ([] if edge_attr is None else [edge_attr])
            feat = self.edge_mlp(m.cat(parts, dim=1))
            if self.att_mlp is not None:
                feat = feat * self.att_mlp(feat)
            trans = diff * self.coord_mlp(feat)
            agg = _segment_sum(m, trans, row, x.size(0))
            if mean:
                count = _segment_sum(m, m.ones_like(trans), row, x.size(0))
                agg = agg / count.clamp(min=1)
            x = x + agg
            return h + self.node_mlp(m.cat([h, _segment_sum(m, feat, row, h.size(0))], dim=1)), x

    return Layer()


def egnn(m):
    """Two equivariant layers (edge MLP with attention, coordinate MLP with a tiny xavier gain, scatter_add_ segment
    sums and means) on three batched 4-node graphs trained by Adam; then normalised, tanh, sum-aggregated layers on a
    radius graph from cdist and nonzero, with every parameter's gradient."""
    _seeded(m)
    nn = m.nn
    h = m.ones(12, 1)
    x = m.randn(12, 3)
    pairs = [(i, j) for i in range(4) for j in range(4) if i != j]
    rows = m.cat([m.LongTensor([p[0] for p in pairs]) + 4 * g for g in range(3)])
    cols = m.cat([m.LongTensor([p[1] for p in pairs]) + 4 * g for g in range(3)])
    edge_attr = m.ones(rows.numel(), 1)

    def network(hidden, out, edge_dim, **kind):
        layers = nn.ModuleList([_egnn_layer(m, hidden, edge_dim, **kind) for _ in range(2)])
        return nn.ModuleList([nn.Linear(1, hidden), layers, nn.Linear(hidden, out)])

    def run(net, edges, attr):
        hh, xx = net[0](h), x
        for layer in net[1]:
            hh, xx = layer(hh, edges, xx, attr)
        return net[2](hh), xx

    net = network(16, 1, 1, attention=True, normalize=False, tanh=False, mean=True)
    opt = m.optim.Adam(net.parameters(), lr=1e-3)
    target, out = m.randn(12, 3), []
    for _ in range(3):
        opt.zero_grad()
        h_out, x_out = run(net, [rows, cols], edge_attr)
        loss = ((x_out - target) ** 2).mean() + h_out.pow(2).mean()
        loss.backward()
        opt.step()
        out.append(loss.detach())
    near = (m.cdist(x, x) < 1.5) & ~m.eye(12, dtype=m.bool)
    row, col = near.nonzero(as_tuple=True)
    net2 = network(8, 2, 0, attention=False, normalize=True, tanh=True, mean=False)
    h2, x2 = run(net2, [row, col], None)
    (h2.sum() + x2.pow(2).sum()).backward()
    out += [row, col, h2.detach(), x2.detach()] + [p.grad for p in net2.parameters()] + list(net.parameters())
    m.set_default_dtype(m.float32)
    return [t.detach() for t in out]


def _set2vec_step(m, gates, w1, w2, hidden, memory, items):
    f, i, o, c = (gate(hidden) for gate in gates)
    memory = f * memory + i * c
    hidden = o * m.tanh(memory)
    energy = m.tanh(m.mm(hidden, w1) + items).mm(w2)
    read = (items * m.softmax(energy, dim=0)).sum(dim=0, keepdim=True)
    return m.cat([hidden, read], dim=1), memory


def mpnn(m, msg_func, aggregate, loss_kind):
    """Gilmer's MPNN: embedded atoms, per-edge-type messages (an embedded D x D matrix applied with mm and bmm over
    0/1 adjacencies set in place by L[L != 0] = 1, or an MLP over all node pairs from a NumPy meshgrid aggregated by
    matmul), a GRUCell update, dropout, and a Set2Vec readout per molecule (masked by a boolean row)."""
    _seeded(m)
    nn, F = m.nn, m.nn.functional
    B, N, T, D = 3, 5, 2, 8
    out_dim = 3 if loss_kind == "ce" else 2
    embed, lin_in = nn.Embedding(4, 6), nn.Linear(6, D)
    gru = nn.GRUCell(D * (T + 1), D)
    edge_em = nn.Embedding(T + 1, D * D)
    edge_mlps = nn.ModuleList([nn.Sequential(nn.Linear(2 * D, 16), nn.ReLU(), nn.Linear(16, D)) for _ in range(T + 1)])
    gates = nn.ModuleList([nn.Sequential(nn.Linear(2 * D, D), act) for act in (nn.Sigmoid(),) * 3 + (nn.Tanh(),)])
    w1, w2 = nn.Parameter(m.ones(D, D)), nn.Parameter(m.ones(D, 1))
    head = nn.Linear(2 * D, out_dim)
    for w in (w1, w2, lin_in.weight, head.weight, gru.weight_ih, gru.weight_hh):
        nn.init.xavier_uniform_(w.data)
    modules = nn.ModuleList([embed, lin_in, gru, edge_em, edge_mlps, gates, head])
    params = list(modules.parameters()) + [w1, w2]
    loss_fn = {"mse": nn.MSELoss(), "l1": nn.L1Loss(), "ce": nn.CrossEntropyLoss()}[loss_kind]
    opt = m.optim.Adam(params, lr=1e-3)
    atoms = m.randint(0, 4, (B, N))
    L0 = (m.rand(B, N, N, T + 1) > 0.6).double() * m.rand(B, N, N, T + 1)
    keep = m.ones(B, N, dtype=m.bool)
    keep[1, 3:] = False
    label = m.randint(0, 3, (B,)) if loss_kind == "ce" else m.randn(B, out_dim)
    rows, cols = (a.flatten().astype(np.int64) for a in np.meshgrid(range(N), range(N)))

    def forward(L, mask):
        L[L != 0] = 1.0
        state = lin_in(embed(atoms))
        for _ in range(2):
            msg = []
            for k in range(T + 1):
                if msg_func == "embedding":
                    em = edge_em(m.Tensor([k]).long()).view(D, D)
                    part = state.view(B * N, -1).mm(em).view(B, N, -1)
                    adj = L[:, :, :, k]
                    if aggregate == "avg":
                        adj = adj / (m.sum(adj, dim=2, keepdim=True) + 1e-7)
                    msg.append(m.bmm(adj, part))
                else:
                    pair = m.cat([state[:, rows, :], state[:, cols, :]], dim=2).view(B * N * N, -1)
                    part = edge_mlps[k](pair).view(B, N, N, -1)
                    msg.append(m.matmul(part.permute(0, 1, 3, 2), L[:, :, :, k].unsqueeze(dim=3)).squeeze())
            state = gru(m.cat(msg, dim=2).view(B * N, -1), state.view(B * N, -1)).view(B, N, -1)
            state = F.dropout(state, 0.1, training=True)
        read = []
        for b in range(B):
            items = state[b, mask[b], :] if mask is not None else state[b]
            hidden, memory = m.zeros(1, 2 * D), m.zeros(1, D)
            for _ in range(2):
                hidden, memory = _set2vec_step(m, gates, w1, w2, hidden, memory, items)
            read.append(hidden)
        return head(m.cat(read, dim=0))

    out = []
    for step in range(2):
        opt.zero_grad()
        score = forward(L0.clone(), keep if step else None)
        loss = loss_fn(score, label)
        loss.backward()
        opt.step()
        out += [loss.detach(), score.detach()]
    m.set_default_dtype(m.float32)
    return out + [p.detach() for p in params]


def gin_pooling(m):
    """GIN layers (index_select messages plus bond embeddings, scatter_add_ sums, an MLP with LayerNorm, a learnt
    eps) on three chain molecules; readout by index_add_ sums, bincount means, scatter_reduce('amax',
    include_self=False) maxima and segment sums from cumsum offsets; Adam on cross-entropy."""
    _seeded(m)
    nn = m.nn
    sizes = m.tensor([4, 6, 5])
    ptr = m.cat([m.zeros(1, dtype=m.long), sizes.cumsum(0)])
    batch = m.repeat_interleave(m.arange(3), sizes)
    chains = [m.stack([m.arange(int(n) - 1), m.arange(1, int(n))]) + ptr[g] for g, n in enumerate(sizes)]
    edges = m.cat([m.cat([c, c.flip(0)], 1) for c in chains], 1)
    atoms, bonds, y = m.randint(0, 5, (15,)), m.randint(0, 3, (edges.size(1),)), m.tensor([0, 1, 1])
    D = 8
    mlps = nn.ModuleList(
        [nn.Sequential(nn.Linear(D, 2 * D), nn.LayerNorm(2 * D), nn.ReLU(), nn.Linear(2 * D, D)) for _ in range(2)]
    )
    eps = nn.ParameterList([nn.Parameter(m.Tensor([0])) for _ in range(2)])
    atom_em, bond_em = nn.Embedding(5, D), nn.ModuleList([nn.Embedding(3, D) for _ in range(2)])
    head = nn.Linear(3 * D, 2)
    params = [*mlps.parameters(), *eps, *atom_em.parameters(), *bond_em.parameters(), *head.parameters()]
    opt = m.optim.Adam(params, lr=0.01)
    out = []
    for _ in range(3):
        opt.zero_grad()
        h = atom_em(atoms)
        for mlp, e, em in zip(mlps, eps, bond_em):
            message = m.relu(m.index_select(input=h, dim=0, index=edges[1]) + em(bonds))
            summed = m.zeros(15, D).to(message)
            summed.scatter_add_(dim=0, index=edges[0].unsqueeze(-1).repeat(1, D), src=message)
            h = m.relu(mlp((1 + e) * h + summed)) + h
        total = m.zeros(3, D).index_add_(0, batch, h)
        mean = total / m.bincount(batch, minlength=3).clamp(min=1).unsqueeze(-1)
        top = m.full((3, D), float("-inf")).scatter_reduce(
            0, batch.unsqueeze(-1).expand_as(h), h, "amax", include_self=False
        )
        running = m.cat([m.zeros(1, D), h.cumsum(0)])
        segments = running[ptr[1:]] - running[ptr[:-1]]
        logits = head(m.cat([total, mean, top], 1))
        loss = m.nn.functional.cross_entropy(logits, y) + 1e-3 * segments.pow(2).mean()
        loss.backward()
        opt.step()
        out += [loss.detach(), logits.detach(), segments.detach()]
    m.set_default_dtype(m.float32)
    return out + [e.grad for e in eps] + [p.detach() for p in params]


def _sage_conv(m, fan_in, fan_out, reduce):
    nn = m.nn

    class SAGEConv(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin_l, self.lin_r = nn.Linear(fan_in, fan_out), nn.Linear(fan_in, fan_out, bias=False)

        def forward(self, x, edge_index):
            src, dst = edge_index
            msg = x[src]
            empty = m.zeros(x.size(0), x.size(1), dtype=x.dtype)
            pooled = empty.scatter_reduce(0, dst.unsqueeze(-1).expand_as(msg), msg, reduce=reduce, include_self=False)
            return self.lin_l(pooled) + self.lin_r(x)

    return SAGEConv()


def link_prediction(m):
    """Undirected edges deduplicated by unique(dim=1) and split by randperm; negatives from randint pair codes kept
    by unique and ~isin; a two-layer GraphSAGE encoder (mean, then max, aggregation) with dropout; dot and MLP
    decoders on BCEWithLogitsLoss against .float() labels; ROC-AUC from argsort ranks written into empty_like and
    average precision from cumsum."""
    _seeded(m, 432)
    nn, F = m.nn, m.nn.functional
    N = 20
    x = m.rand(N, 6)
    x = x / x.sum(1, keepdim=True)
    ei = m.randint(0, N, (2, 50))
    ei = ei[:, ei[0] != ei[1]]
    ei = m.cat([ei, ei.flip(0)], 1)
    und = m.unique(ei[:, ei[0] < ei[1]], dim=1)
    perm = m.randperm(und.size(1))
    n_val = int(0.2 * und.size(1))
    train_pos, val_pos = und[:, perm[n_val:]], und[:, perm[:n_val]]
    train_ei = m.cat([train_pos, train_pos.flip(0)], 1)
    splits = {}
    for name, pos in (("train", train_pos), ("val", val_pos)):
        codes = m.unique(m.randint(0, N * N, (3 * pos.size(1),)))
        codes = codes[~m.isin(codes, ei[0] * N + ei[1])]
        codes = codes[codes // N != codes % N][: pos.size(1)]
        neg = m.stack([codes // N, codes % N])
        splits[name] = (m.cat([pos, neg], 1), m.cat([m.ones(pos.size(1)), m.zeros(neg.size(1))]))
    out = [train_ei, splits["train"][0], splits["val"][0]]
    for reduce, kind in (("mean", "dot"), ("amax", "mlp")):
        convs = nn.ModuleList([_sage_conv(m, 6, 8, reduce), _sage_conv(m, 8, 8, reduce)])
        drop = nn.Dropout(0.5)
        decoder = nn.Sequential(nn.Linear(24, 16), nn.ReLU(), nn.Linear(16, 1)) if kind == "mlp" else None

        def encode(graph):
            return convs[1](drop(F.relu(convs[0](x, graph))), graph)

        def decode(z, pairs):
            u, v = pairs
            if decoder is None:
                return (z[u] * z[v]).sum(dim=1)
            return decoder(m.cat([z[u], z[v], (z[u] - z[v]).abs()], dim=1)).squeeze(-1)

        params = list(convs.parameters()) + ([] if decoder is None else list(decoder.parameters()))
        opt, crit = m.optim.Adam(params, lr=0.01), nn.BCEWithLogitsLoss()
        for _ in range(3):
            convs.train()
            opt.zero_grad(set_to_none=True)
            pairs, labels = splits["train"]
            loss = crit(decode(encode(train_ei), pairs), labels.float())
            loss.backward()
            opt.step()
            out.append(loss.detach())
        convs.eval()
        with m.no_grad():
            pairs, y = splits["val"]
            s = decode(encode(train_ei), pairs)
        order = m.argsort(s, descending=True)
        hits = y[order]
        ap = (hits.cumsum(0) / m.arange(1, len(hits) + 1) * hits).sum() / hits.sum()
        ranks = m.empty_like(s)
        ranks[m.argsort(s)] = m.arange(1, len(s) + 1, dtype=s.dtype)
        npos = hits.sum()
        auc = (ranks[order][hits > 0].sum() - npos * (npos + 1) / 2) / (npos * (len(hits) - npos))
        out += [auc, ap, s]
    m.set_default_dtype(m.float32)
    return out


def sampled_graphsage(m):
    """twjiang's GraphSAGE: neighbour sets sampled with random.sample, a row-normalised 0/1 mask written by list
    indexing, its rows' nonzero() (per-row means kept as the source does), mask.mm aggregation, relu(W.mm(cat.t())).t()
    layers over the unique node lists, log_softmax classification and SGD with clip_grad_norm_, in float32 as the
    source's FloatTensor parameters make it; with and without the GCN variant."""
    nn, F = m.nn, m.nn.functional
    rng = random.Random(824)
    m.manual_seed(824)
    N, F_in, C, H = 30, 5, 3, 8
    features = m.randn(N, F_in)
    adjacent = {i: {(i + 1) % N, (i - 1) % N} for i in range(N)}
    for _ in range(70):
        a, b = rng.randrange(N), rng.randrange(N)
        if a != b:
            adjacent[a].add(b)
            adjacent[b].add(a)
    labels = m.randint(0, C, (N,))

    def neighbourhoods(nodes):
        sampled = [
            set(rng.sample(sorted(adjacent[n]), 3)) if len(adjacent[n]) >= 3 else set(adjacent[n]) for n in nodes
        ]
        sampled = [s | {nodes[i]} for i, s in enumerate(sampled)]
        return sampled, sorted(set.union(*sampled))

    def aggregate(nodes, embs, layer_nodes, sampled, gcn):
        where = {n: i for i, n in enumerate(layer_nodes)}
        sampled = sampled if gcn else [s - {nodes[i]} for i, s in enumerate(sampled)]
        matrix = embs if len(embs) == len(layer_nodes) else embs[m.LongTensor(layer_nodes)]
        mask = m.zeros(len(sampled), len(where))
        mask[[i for i, s in enumerate(sampled) for _ in s], [where[n] for s in sampled for n in s]] = 1
        means = [matrix[row.nonzero().squeeze()].mean(0) for row in mask == 1]
        return mask.div(mask.sum(1, keepdim=True)).mm(matrix), m.stack(means)

    out = []
    for gcn in (False, True):
        weights = nn.ParameterList([nn.Parameter(m.FloatTensor(H, F_in if gcn else 2 * F_in))])
        weights.append(nn.Parameter(m.FloatTensor(H, H if gcn else 2 * H)))
        classify = nn.Parameter(m.FloatTensor(H, C))
        for w in [*weights, classify]:
            nn.init.xavier_uniform_(w)
        opt = m.optim.SGD([*weights, classify], lr=0.7)
        order = list(range(N))
        rng.shuffle(order)
        for b in range(3):
            batch = order[b * 10 : (b + 1) * 10]
            layers = [(batch,)]
            for _ in range(2):
                sampled, lower = neighbourhoods(layers[0][0])
                layers.insert(0, (lower, sampled))
            embs = features
            for k in (1, 2):
                nodes, (prev_nodes, sampled) = layers[k][0], layers[k - 1]
                agg, means = aggregate(nodes, embs, prev_nodes, sampled, gcn)
                rows = nodes if k == 1 else [prev_nodes.index(n) for n in nodes]
                combined = agg if gcn else m.cat([embs[rows], agg], dim=1)
                embs = F.relu(weights[k - 1].mm(combined.t())).t()
            logits = m.log_softmax(m.mm(embs, classify), 1)
            loss = -m.sum(logits[range(logits.size(0)), labels[batch]], 0) / len(batch)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(weights.parameters(), 5)
            opt.step()
            out += [loss.detach(), means]
        out += [classify.detach(), *[w.detach() for w in weights]]
    return out


@pytest.mark.slow
def test_egnn():
    _both(egnn, F64)


@pytest.mark.slow
@pytest.mark.parametrize(
    "msg_func, aggregate, loss_kind", [("embedding", "avg", "mse"), ("MLP", "sum", "l1"), ("embedding", "sum", "ce")]
)
def test_mpnn(msg_func, aggregate, loss_kind):
    assert_same(mpnn(bg, msg_func, aggregate, loss_kind), mpnn(torch, msg_func, aggregate, loss_kind), **F64)


@pytest.mark.slow
def test_gin_pooling():
    _both(gin_pooling, F64)


@pytest.mark.slow
def test_link_prediction():
    _both(link_prediction, F32)


@pytest.mark.slow
def test_sampled_graphsage():
    _both(sampled_graphsage, F32)
