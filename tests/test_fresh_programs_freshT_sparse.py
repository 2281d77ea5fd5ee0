"""Sparse-adjacency and point-set programs of public code, run with torch and with batched_grad from the same seed
and compared: a GCN whose normalisation is built from sparse COO matrices (A + I, the sparse power D_tilde ** -0.5,
matmul of sparse and dense) and a Chebyshev convolution over the sparse scaled Laplacian 2 L / lambda_max - I (two
modules the code index returned without their repositories' names), in float64; and schnetpack's SchNet
(atomistic-machine-learning/schnetpack: its jit-scripted index_add scatter, Gaussian RBF with trainable widths
built through FloatTensor, cosine cutoff, continuous-filter interactions) on a cdist/nonzero neighbour list, trained
on energies and forces from autograd.grad(create_graph=True), in float32 as FloatTensor makes it; and an
edge-feature attention convolution (a module returned without its repository's name) whose softmax over each
node's incoming edges takes the maximum by scatter_reduce('amax', include_self=True) from a -1e9 fill, or by its
fallback, index_put_ of elementwise maxima at repeated targets."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same

F64 = dict(rtol=1e-9, atol=1e-11)
F32 = dict(rtol=1e-4, atol=1e-6)  # float32: sums may round in another order than torch's


def _identity(m, n):
    return m.sparse_coo_tensor(indices=m.LongTensor([range(n), range(n)]), values=m.ones(n), size=[n, n])


def _gcn_conv(m, fan_in, fan_out):
    nn = m.nn

    class GCNConv(nn.Module):
        def __init__(self):
            super().__init__()
            self.W = nn.Linear(fan_in, fan_out, bias=False)

        def forward(self, x, edge_index):
            n = x.shape[0]
            deg = m.zeros(n)
            for row in edge_index:  # the source's loop: over edge_index's two rows
                deg[row[0]] += 1
            adj = m.sparse_coo_tensor(indices=edge_index, values=m.ones(edge_index.shape[1]), size=[n, n])
            diag = m.sparse_coo_tensor(indices=m.LongTensor([range(n), range(n)]), values=deg, size=[n, n])
            a_tilde, d_tilde = adj + _identity(m, n), diag + _identity(m, n)
            x = m.matmul(d_tilde**-0.5, x)
            x = m.matmul(a_tilde, x)
            x = m.matmul(d_tilde**-0.5, x)
            return m.matmul(x, self.W.weight.T)

    return GCNConv()


def sparse_gcn_and_chebyshev(m):
    """Two sparse GCN layers trained by Adam with weight decay on nll_loss over a boolean split, accuracy on the
    rest; the scaled Laplacian from index_add_ degrees, pow(-0.5) with masked_fill_ of infinities, sparse scalar
    products and differences; a K=3 Chebyshev recursion (L @ x, 2 * L @ T_1 - T_0) trained by SGD."""
    m.manual_seed(0)
    m.set_default_dtype(m.float64)
    F = m.nn.functional
    n = 12
    ei = m.randint(0, n, (2, 20))
    ei = ei[:, ei[0] != ei[1]]
    ei = m.unique(m.cat([ei, ei.flip(0)], 1), dim=1)
    x, y = m.randn(n, 5), m.randint(0, 3, (n,))
    train = m.arange(n) < 8
    convs = m.nn.ModuleList([_gcn_conv(m, 5, 8), _gcn_conv(m, 8, 3)])
    opt = m.optim.Adam(convs.parameters(), lr=0.01, weight_decay=5e-4)
    out = []
    for _ in range(3):
        opt.zero_grad()
        logp = F.log_softmax(convs[1](F.relu(convs[0](x, ei)), ei), dim=1)
        loss = F.nll_loss(logp[train], y[train])
        loss.backward()
        opt.step()
        out += [loss.detach(), (logp.argmax(1)[~train] == y[~train]).float().mean()]
    row, col = ei
    deg = m.zeros(n).index_add_(0, row, m.ones(row.numel()))
    dis = deg.pow(-0.5)
    dis.masked_fill_(dis == float("inf"), 0)
    loops = m.arange(n)
    lap_index = m.cat([ei, m.stack([loops, loops])], 1)
    lap_weight = m.cat([-dis[row] * dis[col], m.ones(n)])
    lap = m.sparse_coo_tensor(indices=lap_index, values=lap_weight, size=[n, n])
    scaled = 2 * lap / 2 - _identity(m, n)
    weights = m.nn.ModuleList([m.nn.Linear(5, 3, bias=False) for _ in range(3)])
    opt = m.optim.SGD(weights.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        t0, t1 = x, scaled @ x
        result = t0 @ weights[0].weight.T + t1 @ weights[1].weight.T
        t2 = 2 * scaled @ t1 - t0
        result = result + t2 @ weights[2].weight.T
        loss = F.cross_entropy(result[train], y[train])
        loss.backward()
        opt.step()
        out += [loss.detach(), result.detach()]
    m.set_default_dtype(m.float32)
    return out + [scaled.to_dense()] + [p.detach() for p in [*convs.parameters(), *weights.parameters()]]


def _schnet_parts(m):
    nn, F = m.nn, m.nn.functional

    @m.jit.script
    def scatter_add(x: m.Tensor, idx_i: m.Tensor, dim_size: int, dim: int = 0) -> m.Tensor:
        shape = list(x.shape)
        shape[dim] = dim_size
        return m.zeros(shape, dtype=x.dtype, device=x.device).index_add(dim, idx_i, x)

    def ssp(x):
        return F.softplus(x) - m.log(m.tensor(2.0))

    class Dense(nn.Linear):
        def __init__(self, fan_in, fan_out, bias=True, activation=None):
            super().__init__(fan_in, fan_out, bias)
            self.activation = activation if activation is not None else nn.Identity()

        def forward(self, x):
            return self.activation(F.linear(x, self.weight, self.bias))

    class Interaction(nn.Module):
        def __init__(self, atoms, rbf, filters):
            super().__init__()
            self.in2f = Dense(atoms, filters, bias=False)
            self.f2out = nn.Sequential(Dense(filters, atoms, activation=ssp), Dense(atoms, atoms))
            self.filter_network = nn.Sequential(Dense(rbf, filters, activation=ssp), Dense(filters, filters))

        def forward(self, x, f_ij, idx_i, idx_j, rcut_ij):
            w = self.filter_network(f_ij) * rcut_ij[:, None]
            x = self.in2f(x)
            return self.f2out(scatter_add(x[idx_j] * w, idx_i, dim_size=x.shape[0]))

    return scatter_add, ssp, Dense, Interaction


def schnet_forces(m):
    """SchNet energies of two small molecules (neighbours within the cutoff from cdist, a same-molecule mask and
    ~eye, nonzero(as_tuple=True)), forces as minus the positions' gradient with create_graph, an energy-and-force
    loss trained by Adam through the trainable RBF offsets and widths."""
    m.manual_seed(0)
    nn = m.nn
    scatter_add, ssp, Dense, Interaction = _schnet_parts(m)
    offsets = m.linspace(0.0, 3.0, 10)
    widths = nn.Parameter(m.FloatTensor(m.abs(offsets[1] - offsets[0]) * m.ones_like(offsets)))
    offsets = nn.Parameter(offsets)
    cutoff = m.FloatTensor([3.0])
    embedding = nn.Embedding(10, 16, padding_idx=0)
    interactions = nn.ModuleList([Interaction(16, 10, 12) for _ in range(2)])
    readout = nn.Sequential(Dense(16, 8, activation=ssp), Dense(8, 1))
    params = [widths, offsets, *embedding.parameters(), *interactions.parameters(), *readout.parameters()]
    idx_m = m.repeat_interleave(m.arange(2), m.tensor([4, 5]))
    Z, R0 = m.randint(1, 6, (9,)), m.randn(9, 3) * 1.2
    e_ref, f_ref = m.tensor([-1.0, 0.5]), m.randn(9, 3) * 0.1
    opt, out = m.optim.Adam(params, lr=1e-3), []
    for _ in range(3):
        R = R0.clone().requires_grad_(True)
        near = (m.cdist(R, R) < cutoff) & (idx_m[:, None] == idx_m[None, :]) & ~m.eye(9, dtype=m.bool)
        idx_i, idx_j = near.nonzero(as_tuple=True)
        d_ij = m.norm(R[idx_j] - R[idx_i], dim=1)
        f_ij = m.exp(-0.5 / m.pow(widths, 2) * m.pow(d_ij[..., None] - offsets, 2))
        rcut = 0.5 * (m.cos(d_ij * m.pi / cutoff) + 1.0)
        rcut *= (d_ij < cutoff).float()
        q = embedding(Z)
        for block in interactions:
            q = q + block(q, f_ij, idx_i, idx_j, rcut)
        energy = scatter_add(readout(q).squeeze(-1), idx_m, dim_size=2)
        forces = -m.autograd.grad(energy.sum(), R, create_graph=True)[0]
        loss = ((energy - e_ref) ** 2).mean() + 10 * ((forces - f_ref) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [loss.detach(), energy.detach(), forces.detach(), idx_i, idx_j]
    return out + [p.detach() for p in params]


def _edge_attention(m, fan_in, fan_out, edge_dim, use_reduce):
    nn = m.nn

    class EdgeAttnConv(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin_node, self.lin_edge = (
                nn.Linear(fan_in, fan_out, bias=False),
                nn.Linear(edge_dim, fan_out, bias=False),
            )
            self.att = nn.ParameterList([nn.Parameter(m.empty(fan_out)) for _ in range(3)])
            self.act, self.dropout = nn.LeakyReLU(0.2), nn.Dropout(0.1)
            self.res = nn.Linear(fan_in, fan_out, bias=False) if fan_in != fan_out else nn.Identity()
            nn.init.xavier_uniform_(self.lin_node.weight)
            nn.init.xavier_uniform_(self.lin_edge.weight)
            for a in self.att:
                nn.init.normal_(a, std=0.02)
                a.data.mul_(50.0)  # scores large enough that the per-node maximum matters

        def forward(self, x, edge_index, edge_attr):
            src, dst = edge_index[0], edge_index[1]
            z, e = self.lin_node(x), self.lin_edge(edge_attr)
            score = self.act(
                (z[src] * self.att[0]).sum(-1) + (z[dst] * self.att[1]).sum(-1) + (e * self.att[2]).sum(-1)
            )
            top = m.full((x.shape[0],), -1e9, dtype=score.dtype)
            if use_reduce:
                top = top.scatter_reduce(0, dst, score, reduce="amax", include_self=True)
            else:  # the source's fallback: repeated targets, the last write kept, every score differentiated
                top.index_put_((dst,), m.maximum(top[dst], score), accumulate=False)
            weight = m.exp(score - top[dst])
            alpha = weight / (m.zeros(x.shape[0], dtype=score.dtype).index_add(0, dst, weight)[dst] + 1e-8)
            msg = (z[src] + e) * self.dropout(alpha).unsqueeze(-1)
            return m.zeros((x.shape[0], z.shape[1]), dtype=z.dtype).index_add(0, dst, msg) + self.res(x)

    return EdgeAttnConv()


def edge_attention(m, use_reduce):
    """Two edge-attention layers on a random multigraph with edge features, AdamW on an MSE target; the eval-mode
    output and the last gradients."""
    m.manual_seed(0)
    m.set_default_dtype(m.float64)
    edge_index, edge_attr = m.randint(0, 10, (2, 30)), m.randn(30, 3)
    x, y = m.randn(10, 4), m.randn(10, 6)
    layers = m.nn.ModuleList([_edge_attention(m, 4, 6, 3, use_reduce), _edge_attention(m, 6, 6, 3, use_reduce)])
    opt, out = m.optim.AdamW(layers.parameters(), lr=1e-2), []

    def forward():
        return layers[1](m.relu(layers[0](x, edge_index, edge_attr)), edge_index, edge_attr)

    for _ in range(3):
        loss = m.nn.functional.mse_loss(forward(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.detach())
    layers.eval()
    m.set_default_dtype(m.float32)
    return out + [forward().detach()] + [p.grad for p in layers.parameters()]


@pytest.mark.slow
@pytest.mark.parametrize("use_reduce", [True, False], ids=["scatter_reduce", "index_put_"])
def test_edge_attention(use_reduce):
    assert_same(edge_attention(bg, use_reduce), edge_attention(torch, use_reduce), **F64)


@pytest.mark.slow
def test_sparse_gcn_and_chebyshev():
    assert_same(sparse_gcn_and_chebyshev(bg), sparse_gcn_and_chebyshev(torch), **F64)


@pytest.mark.slow
def test_schnet_forces():
    assert_same(schnet_forces(bg), schnet_forces(torch), **F32)
