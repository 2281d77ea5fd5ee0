"""Sequence models as public code writes them, run with torch and with batched_grad from the same seed in float64 and
compared number for number: johnma2006/mamba-minimal (selective scan by einops.einsum in a Python loop, RMSNorm,
depthwise causal conv1d), state-spaces/s4's S4D kernel and example.py's training (complex parameters viewed as
real, Vandermonde kernel, rfft/irfft long convolution, DropoutNd, per-parameter optimizer groups) and its HiPPO
initialisation in normal-plus-low-rank form (linalg.eig, opt_einsum.contract), HazyResearch/safari's standalone
Hyena operator (implicit filter of a complex-exponential positional embedding, FFT convolution, torch.jit.script),
BlinkDL's RWKV-v3 (time and channel mixing with a ZeroPad2d token shift, its RWKV_Init) and
locuslab/TCN (weight_norm, Chomp1d, dilated causal convolutions) on the adding problem. RWKV-4's RNN sampler and the
forecasting programs are in test_fresh_programs_sequence_forecast.py, the attention forecasters in
test_fresh_programs_sequence_attention.py."""

import math

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default

einops = pytest.importorskip("einops")


def mamba_minimal(m):
    """A two-layer Mamba LM with tied embedding: in_proj split into x and the gate, a depthwise conv1d padded by
    d_conv - 1 and cut back to length, softplus step sizes, the selective scan as a loop of einsums, three AdamW
    steps and a greedy continuation."""
    nn, F = m.nn, m.nn.functional
    with float64_default(m):
        d_model, d_state, d_conv, vocab = 8, 4, 4, 16
        d_inner, dt_rank = 2 * d_model, math.ceil(d_model / 16)

        class RMSNorm(nn.Module):
            def __init__(self, d, eps=1e-5):
                super().__init__()
                self.eps, self.weight = eps, nn.Parameter(m.ones(d))

            def forward(self, x):
                return x * m.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

        class MambaBlock(nn.Module):
            def __init__(self):
                super().__init__()
                self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
                self.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, padding=d_conv - 1)
                self.x_proj = nn.Linear(d_inner, dt_rank + 2 * d_state, bias=False)
                self.dt_proj = nn.Linear(dt_rank, d_inner)
                self.A_log = nn.Parameter(m.log(einops.repeat(m.arange(1, d_state + 1), "n -> d n", d=d_inner)))
                self.D = nn.Parameter(m.ones(d_inner))
                self.out_proj = nn.Linear(d_inner, d_model, bias=False)

            def forward(self, x):
                length = x.shape[1]
                x, res = einops.rearrange(self.in_proj(x), "b l x -> b x l").split(split_size=[d_inner] * 2, dim=1)
                x = F.silu(self.conv1d(x)[:, :, :length])
                delta, B, C = self.x_proj(einops.rearrange(x, "b d l -> b l d")).split([dt_rank, d_state, d_state], -1)
                delta = F.softplus(self.dt_proj(delta))
                A = -m.exp(self.A_log.float())  # float32, as the program has it: einsum promotes the pair
                dA = m.exp(einops.einsum(delta, A, "b l d, d n -> b d l n"))
                dBu = einops.einsum(delta, B, x, "b l d, b l n, b d l -> b d l n")
                state, ys = m.zeros((x.shape[0], d_inner, d_state)), []
                for i in range(length):
                    state = dA[:, :, i] * state + dBu[:, :, i]
                    ys.append(einops.einsum(state, C[:, i, :], "b d n, b n -> b d"))
                y = (m.stack(ys, dim=2) + x * einops.rearrange(self.D.float(), "d -> d 1")) * F.silu(res)
                return self.out_proj(einops.rearrange(y, "b d l -> b l d"))

        class Mamba(nn.Module):
            def __init__(self):
                super().__init__()
                self.embedding = nn.Embedding(vocab, d_model)
                self.layers = nn.ModuleList(
                    nn.ModuleDict({"mixer": MambaBlock(), "norm": RMSNorm(d_model)}) for _ in range(2)
                )
                self.norm_f = RMSNorm(d_model)
                self.lm_head = nn.Linear(d_model, vocab, bias=False)
                self.lm_head.weight = self.embedding.weight

            def forward(self, ids):
                x = self.embedding(ids)
                for layer in self.layers:
                    x = layer["mixer"](layer["norm"](x)) + x
                return self.lm_head(self.norm_f(x))

        model = Mamba()
        opt = m.optim.AdamW(model.parameters(), lr=1e-2)
        tokens, out = m.randint(0, vocab, (2, 7)), []
        for _ in range(3):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        with m.no_grad():
            ids = tokens[:1, :3]
            for _ in range(3):
                ids = m.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
        return out + [ids.tolist(), [p.detach() for p in model.parameters()]]


def s4d_training(m):
    """S4D layers in example.py's residual backbone: the kernel from complex C (a cfloat parameter viewed as real),
    log_dt and A's parts, registered with their own learning rate and no weight decay, convolved by rfft/irfft at
    twice the length; DropoutNd, Dropout1d, GLU over a 1x1 conv, post-norm; AdamW with the extra param groups,
    cosine annealing, evaluation under no_grad."""
    nn, F = m.nn, m.nn.functional
    with float64_default(m):

        class DropoutNd(nn.Module):
            def __init__(self, p):
                super().__init__()
                self.p = p

            def forward(self, X):
                if not self.training:
                    return X
                mask = m.rand(*X.shape[:2], *(1,) * (X.ndim - 2)) < 1.0 - self.p
                return X * mask * (1.0 / (1 - self.p))

        class S4D(nn.Module):
            def __init__(self, H, N=8, dropout=0.1):
                super().__init__()
                self.D = nn.Parameter(m.randn(H))
                log_dt = m.rand(H) * (math.log(0.1) - math.log(0.001)) + math.log(0.001)
                self.C = nn.Parameter(m.view_as_real(m.randn(H, N // 2, dtype=m.cdouble)))
                for name, value in [
                    ("log_dt", log_dt),
                    ("log_A_real", m.log(0.5 * m.ones(H, N // 2))),
                    ("A_imag", math.pi * einops.repeat(m.arange(N // 2), "n -> h n", h=H)),
                ]:
                    self.register_parameter(name, nn.Parameter(value))
                    getattr(self, name)._optim = {"weight_decay": 0.0, "lr": 1e-3}
                self.dropout = DropoutNd(dropout)
                self.output_linear = nn.Sequential(nn.Conv1d(H, 2 * H, kernel_size=1), nn.GLU(dim=-2))

            def forward(self, u):
                L = u.size(-1)
                dt, C = m.exp(self.log_dt), m.view_as_complex(self.C)
                A = -m.exp(self.log_A_real) + 1j * self.A_imag
                dtA = A * dt.unsqueeze(-1)
                C = C * (m.exp(dtA) - 1.0) / A
                k = 2 * m.einsum("hn, hnl -> hl", C, m.exp(dtA.unsqueeze(-1) * m.arange(L))).real
                y = m.fft.irfft(m.fft.rfft(u, n=2 * L) * m.fft.rfft(k, n=2 * L), n=2 * L)[..., :L]
                y = self.dropout(F.gelu(y + u * self.D.unsqueeze(-1)))
                return self.output_linear(y)

        class S4Model(nn.Module):
            def __init__(self, d_model=6, n_layers=2):
                super().__init__()
                self.encoder, self.decoder = nn.Linear(1, d_model), nn.Linear(d_model, 4)
                self.layers = nn.ModuleList([S4D(d_model) for _ in range(n_layers)])
                self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(n_layers)])
                self.dropouts = nn.ModuleList([nn.Dropout1d(0.1) for _ in range(n_layers)])

            def forward(self, x):
                x = self.encoder(x).transpose(-1, -2)
                for layer, norm, dropout in zip(self.layers, self.norms, self.dropouts):
                    x = norm((dropout(layer(x)) + x).transpose(-1, -2)).transpose(-1, -2)
                return self.decoder(x.transpose(-1, -2).mean(dim=1))

        model = S4Model()
        params = list(model.parameters())
        opt = m.optim.AdamW([p for p in params if not hasattr(p, "_optim")], lr=0.01, weight_decay=0.01)
        for hp in [
            dict(s) for s in sorted(dict.fromkeys(frozenset(p._optim.items()) for p in params if hasattr(p, "_optim")))
        ]:
            opt.add_param_group({"params": [p for p in params if getattr(p, "_optim", None) == hp], **hp})
        sched = m.optim.lr_scheduler.CosineAnnealingLR(opt, 3)
        x, y, out = m.randn(8, 12, 1), m.randint(0, 4, (8,)), []
        for _ in range(3):
            model.train()
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            model.eval()
            with m.no_grad():
                out += [loss.item(), model(x).max(1)[1].eq(y).sum().item(), sched.get_last_lr()]
        return out + [[p.detach() for p in params]]


def hyena_operator(m):
    """Hyena of order 3: an implicit filter (a sine-activated MLP over [t, Re z, Im z] of z = exp(-1j f w)) with
    exponential modulation, FFT convolution normalised with norm='forward', a short depthwise filter, and the
    causality check of its __main__ (the gradient of an output reaches no later input), then AdamW steps."""
    nn, F = m.nn, m.nn.functional
    with float64_default(m):

        @m.jit.script
        def mul_sum(q, y):
            return (q * y).sum(dim=1)

        def fftconv(u, k, D):
            n = 2 * u.shape[-1]
            y = m.fft.irfft(m.fft.rfft(u, n=n) * m.fft.rfft(k, n=n) / n, n=n, norm="forward")[..., : u.shape[-1]]
            return (y + u * D.unsqueeze(-1)).to(dtype=u.dtype)

        class Sin(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.freq = nn.Parameter(m.ones(1, dim))

            def forward(self, x):
                return m.sin(self.freq * x)

        class Hyena(nn.Module):
            def __init__(self, d=4, L=12, order=3, width=8):
                super().__init__()
                self.d, self.order = d, order
                self.in_proj, self.out_proj = nn.Linear(d, d * (order + 1)), nn.Linear(d, d)
                self.short_filter = nn.Conv1d(d * (order + 1), d * (order + 1), 3, padding=2, groups=d * (order + 1))
                t = m.linspace(0, 1, L)[None, :, None]
                w = 2 * math.pi * m.linspace(0, L - 1, L)[None, :, None] / L
                z = m.exp(-1j * m.linspace(1e-4, 0, 1)[None, None] * w)
                self.register_buffer("t", t)
                self.z = nn.Parameter(m.cat([t, z.real, z.imag], dim=-1))
                act = Sin(width)
                self.filter_mlp = nn.Sequential(nn.Linear(3, width), act, nn.Linear(width, width), act)
                self.filter_mlp.append(nn.Linear(width, d * (order - 1), bias=False))
                self.register_buffer("deltas", m.linspace(math.log(1e-2) / 1.5, math.log(1e-2) / 0.3, d * (order - 1)))
                self.bias = nn.Parameter(m.randn(d * (order - 1)))

            def forward(self, u):
                L = u.size(-2)
                uc = self.short_filter(einops.rearrange(self.in_proj(u), "b l d -> b d l"))[..., :L]
                *x, v = uc.split(self.d, dim=1)
                k = self.filter_mlp(self.z[:, :L]) * m.exp(-self.t[:, :L] * self.deltas.abs())
                k = einops.rearrange(k[0], "l (o d) -> o d l", o=self.order - 1)
                bias = einops.rearrange(self.bias, "(o d) -> o d", o=self.order - 1)
                for o, x_i in enumerate(reversed(x[1:])):
                    v = fftconv(v * x_i, k[o], bias[o])
                return self.out_proj(einops.rearrange(v * x[0], "b d l -> b l d"))

        layer = Hyena()
        x = m.randn(2, 12, 4, requires_grad=True)
        grad = m.autograd.grad(layer(x)[:, 6, :].sum(), x)[0]
        out = [grad[0, 7:].abs().sum().item(), grad[0, :6].abs().sum().item(), mul_sum(x, x).sum().item()]
        opt, target = m.optim.AdamW(layer.parameters(), lr=1e-2), m.randn(2, 12, 4)
        for _ in range(3):
            loss = F.mse_loss(layer(x.detach()), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out + [[p.detach() for p in layer.parameters()]]


def rwkv_v3(m):
    """RWKV-v3's GPT: orthogonal/zero/eye initialisation by scale_init, a token shift by ZeroPad2d((0, 0, 1, -1)),
    the WKV of a clamped exp(k) against the time-decay curve (the CUDA TimeX as a causal depthwise conv1d of the
    left-padded input), squared-ReLU channel mixing, the head_q/head_k copy term through one_hot, Adam with clipping."""
    nn, F = m.nn, m.nn.functional
    with float64_default(m):
        C, T, V, n_layer = 8, 6, 12, 2

        def timex(w, k, eps):
            return F.conv1d(nn.ZeroPad2d((T - 1, 0, 0, 0))(k), w.unsqueeze(1), groups=C) + eps

        def mix(layer_id, *names):
            x = (m.arange(C) / C).reshape(1, 1, C)
            return {n: nn.Parameter(m.pow(x, 1.0 - layer_id / n_layer)) for n in names}

        class TimeMix(nn.Module):
            def __init__(self, i):
                super().__init__()
                ratio = i / (n_layer - 1)
                self.time_curve = m.tensor([-(T - 2 - j) for j in range(T - 1)]).unsqueeze(0)
                self.time_decay = nn.Parameter(
                    m.tensor([[-5 + 8 * (h / (C - 1)) ** (0.7 + 1.3 * ratio)] for h in range(C)])
                )
                self.time_first = nn.Parameter(
                    m.ones(C, 1) * math.log(0.3) + (m.tensor([(j + 1) % 3 - 1 for j in range(C)]) * 0.5).unsqueeze(1)
                )
                self.mix = nn.ParameterDict(mix(i, "k", "v", "r"))
                self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
                self.key, self.value, self.receptance, self.output = (nn.Linear(C, C, bias=False) for _ in range(4))
                self.key.scale_init = self.receptance.scale_init = self.output.scale_init = 0

            def forward(self, x):
                xx = self.time_shift(x)
                xk, xv, xr = (x * self.mix[n] + xx * (1 - self.mix[n]) for n in "kvr")
                k = m.exp(m.clamp(self.key(xk).transpose(-1, -2), max=60))
                v = self.value(xv).transpose(-1, -2)
                w = m.exp(m.cat([m.exp(self.time_decay) * self.time_curve, self.time_first], dim=-1))
                wkv = timex(w, k * v, 0) / timex(w, k, 1e-8)
                return self.output(m.sigmoid(self.receptance(xr)) * wkv.transpose(-1, -2))

        class ChannelMix(nn.Module):
            def __init__(self, i):
                super().__init__()
                self.mix = nn.ParameterDict(mix(i, "k", "r"))
                self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
                self.key, self.value = nn.Linear(C, 4 * C, bias=False), nn.Linear(4 * C, C, bias=False)
                self.receptance = nn.Linear(C, C, bias=False)
                self.value.scale_init = self.receptance.scale_init = 0

            def forward(self, x):
                xx = self.time_shift(x)
                xk, xr = (x * self.mix[n] + xx * (1 - self.mix[n]) for n in "kr")
                return m.sigmoid(self.receptance(xr)) * self.value(m.square(m.relu(self.key(xk))))

        class GPT(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb, self.ln0, self.ln_out = nn.Embedding(V, C), nn.LayerNorm(C), nn.LayerNorm(C)
                self.blocks = nn.ModuleList(
                    nn.ModuleDict(
                        {"ln1": nn.LayerNorm(C), "ln2": nn.LayerNorm(C), "att": TimeMix(i), "ffn": ChannelMix(i)}
                    )
                    for i in range(n_layer)
                )
                self.head, self.head_q, self.head_k = (nn.Linear(C, n, bias=False) for n in (V, 4, 4))
                self.head_q.scale_init, self.head_k.scale_init = 0, 0.1
                self.register_buffer("copy_mask", m.tril(m.ones(T, T)))
                for mod in self.modules():
                    if isinstance(mod, (nn.Linear, nn.Embedding)):
                        shape, gain, scale = mod.weight.shape, 1.0, 1.0
                        if isinstance(mod, nn.Embedding):
                            gain, scale = math.sqrt(max(shape)), 1e-4
                        elif shape[0] > shape[1]:
                            gain = math.sqrt(shape[0] / shape[1])
                        scale = getattr(mod, "scale_init", 0.5 if tuple(shape) == (V, C) else scale)
                        with m.no_grad():
                            if gain * scale == 0:
                                nn.init.zeros_(mod.weight)
                            else:
                                nn.init.orthogonal_(mod.weight, gain=gain * scale)

            def forward(self, idx):
                x = self.ln0(self.emb(idx))
                for b in self.blocks:
                    x = x + b["att"](b["ln1"](x))
                    x = x + b["ffn"](b["ln2"](x))
                x = self.ln_out(x)
                c = (self.head_q(x) @ self.head_k(x).transpose(-2, -1)) * (1.0 / 4)
                c = c.masked_fill(self.copy_mask == 0, 0) @ F.one_hot(idx, num_classes=V).to(x.dtype)
                return self.head(x) + c

        model = GPT()
        opt = m.optim.Adam(model.parameters(), lr=6e-3, betas=(0.9, 0.99), eps=1e-8)
        data, out = m.randint(0, V, (3, T + 1)), []
        for _ in range(3):
            logits = model(data[:, :-1].contiguous())
            loss = F.cross_entropy(logits.view(-1, V), data[:, 1:].contiguous().view(-1))
            opt.zero_grad()
            loss.backward()
            m.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            out.append(loss.item())
        return out + [[p.detach() for p in model.parameters()]]


def hippo_nplr(m):
    """S4's HiPPO initialisation (src/models/hippo/hippo.py): the LegS and LegT transition matrices from NumPy, the
    rank correction that makes A + P P^T normal, its eigendecomposition by torch.linalg.eig with one of each
    conjugate pair kept, V^* applied by opt_einsum.contract; then the bilinear discretisation by linalg.solve, the
    recurrence's convolution kernel and an rfft/irfft convolution with it."""
    contract = pytest.importorskip("opt_einsum").contract
    N, out = 6, []
    with float64_default(m):
        q = np.arange(N, dtype=np.float64)
        col, row = np.meshgrid(q, q)
        T = np.sqrt(np.diag(2 * q + 1))
        legs = (T @ -(np.where(row >= col, 2 * q + 1, 0) - np.diag(q)) @ np.linalg.inv(T), np.diag(T)[:, None])
        R = (2 * q + 1) ** 0.5
        legt = (-(R[:, None] * np.where(row < col, (-1.0) ** (row - col), 1) * R[None, :]), R[:, None])
        p_legt = m.sqrt(1 + 2 * m.arange(N, dtype=m.double))
        corrections = {"legs": m.sqrt(0.5 + m.arange(N, dtype=m.double)).unsqueeze(0)}
        corrections["legt"] = m.stack([p_legt * (m.arange(N) % 2 == 1), p_legt * (m.arange(N) % 2 == 0)])
        for name, (A, B) in (("legs", legs), ("legt", legt)):
            A, B, P = m.as_tensor(A, dtype=m.double), m.as_tensor(B, dtype=m.double)[:, 0], corrections[name]
            w, V = m.linalg.eig(A + m.sum(P.unsqueeze(-2) * P.unsqueeze(-1), dim=-3))
            w, V = w[..., 0::2].contiguous(), V[..., 0::2].contiguous()
            V_inv = V.conj().transpose(-1, -2)
            B, P = contract("ij, j -> i", V_inv, B.to(V)), contract("ij, ...j -> ...i", V_inv, P.to(V))
            C = contract(
                "ij, j -> i", V_inv, ((m.arange(N, dtype=m.double) * 2 + 1) ** 0.5 * (-1) ** m.arange(N)).to(V)
            )
            A = m.diag_embed(w) - contract("rn, rm -> nm", P, P.conj())
            eye = m.eye(w.shape[-1], dtype=w.dtype)
            dA, dB = (
                m.linalg.solve(eye - 0.05 * A, eye + 0.05 * A),
                m.linalg.solve(eye - 0.05 * A, 0.1 * B.unsqueeze(-1)),
            )
            k, x = [], dB[:, 0]
            for _ in range(10):
                k.append(2 * (C.conj() * x).sum().real)
                x = dA @ x
            k = m.stack(k)
            u = m.randn(2, 10)
            y = m.fft.irfft(m.fft.rfft(u, n=20) * m.fft.rfft(k, n=20), n=20)[..., :10]
            # the order of eig's eigenvalues is LAPACK's (torch's MKL and JAX's LAPACK order LegT's differently): the
            # kernel and norms do not depend on it; the eigenvalues and |B| are compared in order of frequency
            order = m.argsort(w.imag)
            out += [w[order], B.abs()[order], (P.abs() ** 2).sum(), k, y, m.linalg.matrix_norm(dA, ord=2)]
    return out


def tcn_adding_problem(m):
    """locuslab/TCN on the adding problem: temporal blocks of weight-normed dilated convolutions (the init's
    normal_ on the recomputed weight, which torch's weight_norm makes a no-op that still draws), Chomp1d, dropout and
    a 1x1 downsample, Adam with clip_grad_norm_, evaluation under no_grad."""
    nn, F = m.nn, m.nn.functional
    with float64_default(m, 1111):
        weight_norm = nn.utils.weight_norm

        class Chomp1d(nn.Module):
            def __init__(self, size):
                super().__init__()
                self.size = size

            def forward(self, x):
                return x[:, :, : -self.size].contiguous()

        class TemporalBlock(nn.Module):
            def __init__(self, n_in, n_out, k, dilation, dropout=0.1):
                super().__init__()
                pad = (k - 1) * dilation
                self.conv1 = weight_norm(nn.Conv1d(n_in, n_out, k, padding=pad, dilation=dilation))
                self.conv2 = weight_norm(nn.Conv1d(n_out, n_out, k, padding=pad, dilation=dilation))
                self.net = nn.Sequential(
                    self.conv1, Chomp1d(pad), nn.ReLU(), nn.Dropout(dropout),
                    self.conv2, Chomp1d(pad), nn.ReLU(), nn.Dropout(dropout),
                )  # fmt: skip
                self.downsample = nn.Conv1d(n_in, n_out, 1) if n_in != n_out else None
                self.conv1.weight.data.normal_(0, 0.01)
                self.conv2.weight.data.normal_(0, 0.01)
                if self.downsample is not None:
                    self.downsample.weight.data.normal_(0, 0.01)

            def forward(self, x):
                return F.relu(self.net(x) + (x if self.downsample is None else self.downsample(x)))

        tcn = nn.Sequential(*[TemporalBlock(2 if i == 0 else 5, 5, 3, 2**i) for i in range(3)])
        linear = nn.Linear(5, 1)
        linear.weight.data.normal_(0, 0.01)
        rng = np.random.default_rng(0)
        X_num, X_mask, Y = m.rand([24, 1, 16]), m.zeros([24, 1, 16]), m.zeros([24, 1])
        for i in range(24):
            a, b = rng.choice(16, size=2, replace=False)
            X_mask[i, 0, a] = X_mask[i, 0, b] = 1
            Y[i, 0] = X_num[i, 0, a] + X_num[i, 0, b]
        X = m.cat((X_num, X_mask), dim=1)
        params = list(tcn.parameters()) + list(linear.parameters())
        opt, out = m.optim.Adam(params, lr=4e-3), []
        for _ in range(2):
            tcn.train()
            for i in range(0, 24, 8):
                loss = F.mse_loss(linear(tcn(X[i : i + 8])[:, :, -1]), Y[i : i + 8])
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, 0.5)
                opt.step()
                out.append(loss.item())
            tcn.eval()
            with m.no_grad():
                out.append(F.mse_loss(linear(tcn(X)[:, :, -1]), Y).item())
        return out + [[p.detach() for p in params]]


SLOW = pytest.mark.slow


# mamba-minimal casts A_log and D to float32 (.float()): einsum promotes the pairs, its rounding stays in the result
FLOAT32_A = dict(rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(
    "program,tolerance",
    [
        pytest.param(mamba_minimal, FLOAT32_A, marks=SLOW),
        pytest.param(s4d_training, F64, marks=SLOW),
        pytest.param(hyena_operator, F64, marks=SLOW),
        pytest.param(hippo_nplr, F64, marks=SLOW),
        pytest.param(rwkv_v3, F64, marks=SLOW),
        pytest.param(tcn_adding_problem, F64, marks=SLOW),
    ],
    ids=lambda p: getattr(p, "__name__", ""),
)
def test_sequence_model(program, tolerance):
    _both(program, tolerance)
