"""Attention forecasters as public code writes them, run with torch and with batched_grad from the same seed in
float64 and compared: zhouhaoyi/Informer2020 (ProbSparse attention: sampled keys by randint, queries chosen by topk
and gathered by advanced indexing, the cumsum context of the masked decoder written back by index assignment,
ProbMask, circular-padded token convolution, fixed temporal embeddings, the distilling ConvLayer), the temporal
fusion sub-modules of sktime/pytorch-forecasting (gated residual networks with a trainable interpolated skip,
variable selection under a static context, interpretable multi-head attention with a causal mask) and two
nn.Transformer forecasters: oliverguhr/transformer-time-series-prediction's TransAm (an encoder under a causal mask
built by masked_fill, sliding windows from FloatTensor of a list of arrays, StepLR) and KasperGroesLudvigsen/
influenza_transformer (encoder-decoder with batch_first, triu(-inf) masks and
nn.Transformer.generate_square_subsequent_mask). Informer runs without dropout here: its embedding's dropout draws
over a tensor torch lays out transposed (the sum of a transposed convolution output and the embeddings), whose mask
torch draws in that memory order, while batched_grad lays every op's result out row-major."""

import math

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default

SLOW = pytest.mark.slow


def informer(m):
    """A one-decoder Informer: ProbAttention in the encoder (unmasked: the mean context) and in the decoder's self
    attention (masked: the cumsum context, ProbMask, mix), full attention across; three Adam steps."""
    nn, F = m.nn, m.nn.functional
    with float64_default(m):

        class ProbAttention(nn.Module):
            def __init__(self, mask_flag, factor=2):
                super().__init__()
                self.mask_flag, self.factor = mask_flag, factor

            def forward(self, queries, keys, values):
                q, k, v = (t.transpose(2, 1) for t in (queries, keys, values))
                B, H, L_K, E = k.shape
                L_Q = q.shape[2]
                sample_k = min(self.factor * int(np.ceil(np.log(L_K))), L_K)
                n_top = min(self.factor * int(np.ceil(np.log(L_Q))), L_Q)
                K_sample = k.unsqueeze(-3).expand(B, H, L_Q, L_K, E)[
                    :, :, m.arange(L_Q).unsqueeze(1), m.randint(L_K, (L_Q, sample_k)), :
                ]
                QK_sample = m.matmul(q.unsqueeze(-2), K_sample.transpose(-2, -1)).squeeze(-2)
                M_top = (QK_sample.max(-1)[0] - m.div(QK_sample.sum(-1), L_K)).topk(n_top, sorted=False)[1]
                rows = (m.arange(B)[:, None, None], m.arange(H)[None, :, None], M_top)
                scores = m.matmul(q[rows[0], rows[1], M_top, :], k.transpose(-2, -1)) / math.sqrt(E)
                if self.mask_flag:
                    context = v.cumsum(dim=-2)
                    mask = m.ones(L_Q, L_K, dtype=m.bool).triu(1)[None, None, :].expand(B, H, L_Q, L_K)
                    scores.masked_fill_(mask[rows[0], rows[1], M_top, :].view(scores.shape), -np.inf)
                else:
                    context = v.mean(dim=-2).unsqueeze(-2).expand(B, H, L_Q, v.shape[-1]).clone()
                context[rows[0], rows[1], M_top, :] = m.matmul(m.softmax(scores, dim=-1), v).type_as(context)
                return context.transpose(2, 1).contiguous()

        class FullAttention(nn.Module):
            def forward(self, queries, keys, values):
                scores = m.einsum("blhe,bshe->bhls", queries, keys)
                return m.einsum(
                    "bhls,bshd->blhd", m.softmax(scores / math.sqrt(queries.shape[-1]), dim=-1), values
                ).contiguous()

        class AttentionLayer(nn.Module):
            def __init__(self, inner, d, heads, mix=False):
                super().__init__()
                self.inner, self.heads, self.mix = inner, heads, mix
                self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

            def forward(self, x, y):
                (B, L, _), S = x.shape, y.shape[1]
                out = self.inner(
                    self.q(x).view(B, L, self.heads, -1),
                    self.k(y).view(B, S, self.heads, -1),
                    self.v(y).view(B, S, self.heads, -1),
                )
                return self.o((out.transpose(2, 1).contiguous() if self.mix else out).view(B, L, -1))

        class Embedding(nn.Module):
            def __init__(self, c_in, d):
                super().__init__()
                self.token = nn.Conv1d(
                    c_in, d, kernel_size=3, padding=1 if m.__version__ >= "1.5.0" else 2, padding_mode="circular"
                )
                nn.init.kaiming_normal_(self.token.weight, mode="fan_in", nonlinearity="leaky_relu")
                position, div = m.arange(0, 64).unsqueeze(1), (m.arange(0, d, 2) * -(math.log(10000.0) / d)).exp()
                pe = m.zeros(64, d)
                pe[:, 0::2], pe[:, 1::2] = m.sin(position * div), m.cos(position * div)
                self.register_buffer("pe", pe.unsqueeze(0))
                self.temporal = nn.ModuleList()
                for size in (13, 32, 7, 24):
                    fixed = nn.Embedding(size, d)
                    fixed.weight = nn.Parameter(pe[:size].clone(), requires_grad=False)
                    self.temporal.append(fixed)

            def forward(self, x, marks):
                marks = marks.long()
                temporal = sum(emb(marks[:, :, i]) for i, emb in enumerate(self.temporal))
                return self.token(x.permute(0, 2, 1)).transpose(1, 2) + self.pe[:, : x.size(1)] + temporal.detach()

        class Layer(nn.Module):
            def __init__(self, d, cross=None):
                super().__init__()
                self.attn, self.cross = (
                    AttentionLayer(ProbAttention(cross is not None), d, 2, mix=cross is not None),
                    cross,
                )
                self.conv1, self.conv2 = nn.Conv1d(d, 2 * d, 1), nn.Conv1d(2 * d, d, 1)
                self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(3))

            def forward(self, x, memory=None):
                x = self.norms[0](x + self.attn(x, x))
                if self.cross is not None:
                    x = self.norms[2](x + self.cross(x, memory))
                y = self.conv2(F.gelu(self.conv1(x.transpose(-1, 1)))).transpose(-1, 1)
                return self.norms[1](x + y)

        d = 8
        enc_emb, dec_emb = Embedding(3, d), Embedding(3, d)
        encoder = nn.ModuleList([Layer(d), Layer(d)])
        distil = nn.Sequential(
            nn.Conv1d(d, d, 3, padding=1, padding_mode="circular"), nn.BatchNorm1d(d), nn.ELU(), nn.MaxPool1d(3, 2, 1)
        )
        decoder, norm, projection = Layer(d, AttentionLayer(FullAttention(), d, 2)), nn.LayerNorm(d), nn.Linear(d, 3)
        modules = nn.ModuleList([enc_emb, dec_emb, encoder, distil, decoder, norm, projection])
        opt, out = m.optim.Adam(modules.parameters(), lr=1e-3), []
        marks = lambda n: m.stack(
            [m.randint(1, 13, (4, n)), m.randint(1, 32, (4, n)), m.randint(0, 7, (4, n)), m.randint(0, 24, (4, n))], -1
        ).double()  # noqa: E731
        for _ in range(3):
            x, y = m.randn(4, 16, 3), m.randn(4, 12, 3)
            dec_in = m.cat([y[:, :8, :], m.zeros([4, 4, 3])], dim=1)
            h = encoder[0](enc_emb(x, marks(16)))
            h = norm(encoder[1](distil(h.permute(0, 2, 1)).transpose(1, 2)))
            pred = projection(norm(decoder(dec_emb(dec_in, marks(12)), h)))[:, -4:, :]
            loss = F.mse_loss(pred, y[:, -4:, :])
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out + [[p.detach() for p in modules.parameters()]]


def temporal_fusion(m):
    """Gated residual networks (ELU, GLU gate, LayerNorm; a skip resized by linear interpolation with align_corners
    and a trainable softmax mask where the sizes differ), variable selection over three inputs under a static
    context, an LSTM, and interpretable multi-head attention (shared values, mean over heads) under a causal mask."""
    nn, F = m.nn, m.nn.functional
    with float64_default(m):

        class GLU(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.dropout, self.fc1, self.fc2 = nn.Dropout(0.1), nn.Linear(n_in, n_out), nn.Linear(n_in, n_out)

            def forward(self, x):
                x = self.dropout(x)
                return m.mul(m.sigmoid(self.fc1(x)), self.fc2(x))

        class GateAddNorm(nn.Module):
            def __init__(self, n_in, n_out=None):
                super().__init__()
                self.glu, self.norm = GLU(n_in, n_out or n_in), nn.LayerNorm(n_out or n_in)

            def forward(self, x, skip):
                return self.norm(self.glu(x) + skip)

        class GRN(nn.Module):
            def __init__(self, n_in, hidden, n_out, context=None, residual=False):
                super().__init__()
                self.n_in, self.n_out = n_in, n_out
                if n_in != n_out and not residual:
                    self.soft_mask = nn.Parameter(m.zeros(n_out))
                self.fc1, self.fc2 = nn.Linear(n_in, hidden), nn.Linear(hidden, hidden)
                self.context = nn.Linear(context, hidden, bias=False) if context else None
                self.gate_norm = GateAddNorm(hidden, n_out)

            def forward(self, x, context=None, residual=None):
                if residual is None and self.n_in != self.n_out:
                    flat = x.contiguous().view(-1, x.size(-1))
                    up = F.interpolate(flat.unsqueeze(1), self.n_out, mode="linear", align_corners=True).squeeze(1)
                    residual = (up * m.softmax(self.soft_mask, dim=-1).unsqueeze(0) * flat.size(1)).view(
                        *x.shape[:-1], -1
                    )
                elif residual is None:
                    residual = x
                x = self.fc1(x)
                if context is not None:
                    x = x + self.context(context)
                return self.gate_norm(self.fc2(F.elu(x)), residual)

        class VariableSelection(nn.Module):
            def __init__(self, sizes, hidden, context):
                super().__init__()
                self.sizes = sizes
                self.flattened = GRN(sum(sizes), min(hidden, len(sizes)), len(sizes), context, residual=True)
                self.residual_norm = nn.LayerNorm(len(sizes))
                self.single = nn.ModuleList(GRN(s, min(s, hidden), hidden) for s in sizes)

            def forward(self, x, context):
                outputs, means, start = [], [], 0
                for grn, size in zip(self.single, self.sizes):
                    part = x[..., start : start + size]
                    means.append(part.abs().mean(-1))
                    outputs.append(grn(part))
                    start += size
                residual = self.residual_norm(m.stack(means, dim=-1))
                weights = m.softmax(self.flattened(x, context, residual=residual), dim=-1).unsqueeze(-2)
                return (m.stack(outputs, axis=-1) * weights).sum(axis=-1), weights

        class InterpretableAttention(nn.Module):
            def __init__(self, heads, d):
                super().__init__()
                self.v = nn.Linear(d, d // heads, bias=False)
                self.q = nn.ModuleList(nn.Linear(d, d // heads, bias=False) for _ in range(heads))
                self.k = nn.ModuleList(nn.Linear(d, d // heads, bias=False) for _ in range(heads))
                self.w_h = nn.Linear(d // heads, d, bias=False)
                for name, p in self.named_parameters():
                    nn.init.xavier_uniform_(p) if "bias" not in name else nn.init.zeros_(p)

            def forward(self, x, mask):
                heads, attns = [], []
                for q, k in zip(self.q, self.k):
                    scores = m.bmm(q(x), k(x).permute(0, 2, 1)) / m.sqrt(
                        m.tensor(x.shape[-1] // len(self.q)).to(m.float64)
                    )
                    attn = m.softmax(scores.masked_fill(mask, -1e9), dim=2)
                    heads.append(m.bmm(attn, self.v(x)))
                    attns.append(attn)
                return self.w_h(m.mean(m.stack(heads, dim=2), dim=2)), m.stack(attns, dim=2)

        d = 8
        static_grn, vsn = GRN(3, d, d), VariableSelection([2, 1, 3], d, d)
        lstm, post_lstm, attention, post_attn, head = (
            nn.LSTM(d, d, batch_first=True),
            GateAddNorm(d),
            InterpretableAttention(2, d),
            GateAddNorm(d),
            nn.Linear(d, 1),
        )
        modules = nn.ModuleList([static_grn, vsn, lstm, post_lstm, attention, post_attn, head])
        opt, out = m.optim.Adam(modules.parameters(), lr=1e-2), []
        x, static, y = m.randn(4, 10, 6), m.randn(4, 3), m.randn(4, 10)
        mask = m.triu(m.ones(10, 10, dtype=m.bool), diagonal=1).unsqueeze(0).expand(4, -1, -1)
        for _ in range(3):
            embedding, weights = vsn(x, static_grn(static).unsqueeze(1).expand(-1, 10, -1))
            h = post_lstm(lstm(embedding)[0], embedding)
            attended, attn = attention(h, mask)
            loss = F.mse_loss(head(post_attn(attended, h)).squeeze(-1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out += [loss.item(), weights[0, 0], attn[0, -1]]
        return out + [[p.detach() for p in modules.parameters()]]


def transformer_forecasters(m):
    """TransAm: sinusoidal positions added to (S, N, 1) windows cut from a scaled sine by FloatTensor of a list of
    (input, target) array pairs, one encoder layer under a -inf/0 causal mask built with masked_fill, AdamW with
    clipping and StepLR. Then the influenza transformer: batch_first encoder-decoder, triu(ones * -inf, 1) masks for
    the target and the memory, a linear map of the flattened decoder output, evaluated with
    nn.Transformer.generate_square_subsequent_mask's mask."""
    nn, F = m.nn, m.nn.functional
    with float64_default(m):
        window, out = 8, []
        t = np.arange(0, 12, 0.1)
        amplitude = np.sin(t) + np.sin(t * 0.05) + np.sin(t * 0.12) * np.random.default_rng(0).normal(-0.2, 0.2, len(t))
        amplitude = (amplitude - amplitude.min()) / (amplitude.max() - amplitude.min()) * 2 - 1
        pairs = [
            (amplitude[i : i + window], amplitude[i + 1 : i + window + 1]) for i in range(len(amplitude) - window - 1)
        ]
        data = m.DoubleTensor(pairs)

        pe = m.zeros(64, 8)
        position = m.arange(0, 64, dtype=m.float64).unsqueeze(1)
        div = m.exp(m.arange(0, 8, 2).double() * (-math.log(10000.0) / 8))
        pe[:, 0::2], pe[:, 1::2] = m.sin(position * div), m.cos(position * div)
        pe = pe.unsqueeze(0).transpose(0, 1)
        causal = (m.triu(m.ones(window, window)) == 1).transpose(0, 1)
        causal = causal.double().masked_fill(causal == 0, float("-inf")).masked_fill(causal == 1, 0.0)
        encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.1), num_layers=1
        )
        decoder = nn.Linear(8, 1)
        decoder.bias.data.zero_()
        decoder.weight.data.uniform_(-0.1, 0.1)
        params = list(encoder.parameters()) + list(decoder.parameters())
        opt = m.optim.AdamW(params, lr=0.005)
        sched = m.optim.lr_scheduler.StepLR(opt, 1.0, gamma=0.95)
        for _ in range(2):
            encoder.train()
            for i in range(0, 60, 20):
                batch = data[i : i + 20]
                src = m.stack(m.stack([item[0] for item in batch]).chunk(window, 1))
                target = m.stack(m.stack([item[1] for item in batch]).chunk(window, 1))
                loss = F.mse_loss(decoder(encoder(src + pe[: src.size(0)], causal)), target)
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, 0.7)
                opt.step()
                out.append(loss.item())
            sched.step()
            out.append(sched.get_last_lr()[0])

        series = m.sin(m.arange(60) * 0.3) + 0.1 * m.randn(60)
        starts = range(0, 60 - 16, 6)
        src = m.stack([series[s : s + 12] for s in starts]).unsqueeze(-1)
        trg_y = m.stack([series[s + 12 : s + 16] for s in starts])
        trg = m.cat([src[:, -1:, :], trg_y[:, :-1].unsqueeze(-1)], dim=1)
        layer = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.1, batch_first=True)
        enc_in, dec_in, mapping = nn.Linear(1, 8), nn.Linear(1, 8), nn.Linear(8 * 4, 4)
        enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(**layer), num_layers=1)
        dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(**layer), num_layers=1)
        modules = nn.ModuleList([enc_in, dec_in, mapping, enc, dec])
        tgt_mask, memory_mask = (
            m.triu(m.ones(4, 4) * float("-inf"), diagonal=1),
            m.triu(m.ones(4, 12) * float("-inf"), diagonal=1),
        )
        forward = lambda mask: mapping(
            dec(dec_in(trg), enc(enc_in(src) + pe[:12].squeeze(1)), tgt_mask=mask, memory_mask=memory_mask).flatten(
                start_dim=1
            )
        )  # noqa: E731
        opt = m.optim.Adam(modules.parameters(), lr=1e-3)
        for _ in range(3):
            modules.train()
            loss = F.mse_loss(forward(tgt_mask), trg_y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        modules.eval()
        with m.no_grad():
            out += [
                m.equal(tgt_mask, nn.Transformer.generate_square_subsequent_mask(4)),
                forward(nn.Transformer.generate_square_subsequent_mask(4, dtype=m.float64)),
            ]
        return out + [[p.detach() for p in params + list(modules.parameters())]]


# a key projection's bias does not move a softmax: its gradient, and so its value after Adam, is rounding noise at 0
KEY_BIAS = dict(rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    "program,tolerance",
    [
        pytest.param(informer, KEY_BIAS, marks=SLOW),
        pytest.param(temporal_fusion, F64, marks=SLOW),
        pytest.param(transformer_forecasters, F64, marks=SLOW),
    ],
    ids=lambda p: getattr(p, "__name__", ""),
)
def test_attention_forecaster(program, tolerance):
    _both(program, tolerance)
