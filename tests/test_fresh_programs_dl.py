"""Short deep-learning programs of the kinds public code is made of, each written once against torch's API and run
with torch and with batched_grad from the same seed (batched_grad draws torch's random stream): a GPT-style language
model, a mixed-precision loop, a padded Transformer classifier, a packed recurrent tagger, weight averaging with
foreach ops and a merging adapter layer, compiled rotary attention, a vector-quantized autoencoder and a replay-buffer
Q-learning update. Every printed-worthy number (losses, gradients' norms, parameters, samples) is compared."""

import math

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

F64 = dict(rtol=1e-9, atol=1e-11)
F32 = dict(rtol=2e-5, atol=2e-6)


def _both(program, tolerance, **kwargs):
    expected, actual = program(torch, **kwargs), program(bg, **kwargs)
    assert_same(actual, expected, **tolerance)


def gpt_language_model(m):
    """A two-block causal transformer over random characters: tied embeddings, fused attention with dropout,
    AdamW on two parameter groups, warmup-then-cosine learning rate, gradient accumulation and clipping, sampling."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(11)
    vocab, width, heads, context = 17, 16, 2, 8

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            grow, shrink = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
            self.mlp = nn.Sequential(grow, nn.GELU(), shrink, nn.Dropout(0.1))

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(c, 2))
            p = 0.1 if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
            self.blocks, self.ln = nn.ModuleList([Block(), Block()]), nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab, bias=False)
            self.tok.weight = self.head.weight

        def forward(self, idx, targets=None):
            x = self.tok(idx) + self.pos(m.arange(idx.shape[1]))
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln(x))
            loss = None if targets is None else F.cross_entropy(logits.view(-1, vocab), targets.view(-1))
            return logits, loss

    model = GPT().double()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = m.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=3e-3)
    data = m.randint(0, vocab, (400,))
    losses, norms = [], []
    for step in range(6):
        lr = 3e-3 * (step + 1) / 3 if step < 2 else 3e-4 + 0.5 * (1 + math.cos(math.pi * (step - 2) / 4)) * 2.7e-3
        for group in opt.param_groups:
            group["lr"] = lr
        for _ in range(2):
            starts = m.randint(len(data) - context, (4,))
            x = m.stack([data[s : s + context] for s in starts])
            y = m.stack([data[s + 1 : s + 1 + context] for s in starts])
            _, loss = model(x, y)
            (loss / 2).backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
    model.eval()
    idx = m.zeros(1, 1, dtype=m.long)
    with m.no_grad():
        for _ in range(6):
            logits, _ = model(idx[:, -context:])
            top, _ = m.topk(logits[:, -1], 5)
            logits = logits[:, -1].masked_fill(logits[:, -1] < top[:, [-1]], float("-inf"))
            idx = m.cat([idx, m.multinomial(F.softmax(logits, -1), 1)], 1)
    return losses, norms, idx.tolist(), model.head.weight


@pytest.mark.slow
def test_gpt_language_model():
    _both(gpt_language_model, F64)


def mixed_precision_loop(m, dtype):
    """Linear and convolution layers under CPU autocast, losses in float32, GradScaler("cpu") scaling, unscaling
    before clipping, skipping the step that overflows and backing its scale off."""
    nn = m.nn
    m.manual_seed(5)
    model = nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(24, 3))
    opt = m.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = m.amp.GradScaler("cpu", init_scale=2.0**14, growth_interval=2)
    x, y = m.randn(8, 2, 6), m.randint(0, 3, (8,))
    record = []
    for step in range(5):
        with m.autocast("cpu", dtype=getattr(m, dtype)):
            logits = model(x * (1e4 if step == 2 else 1.0))
            loss = nn.functional.cross_entropy(logits, y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        record.append((str(logits.dtype), str(loss.dtype), scaler.get_scale()))
    return record, [p.detach() for p in model.parameters()]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mixed_precision_loop(dtype):
    expected, actual = mixed_precision_loop(torch, dtype), mixed_precision_loop(bg, dtype)
    assert actual[0] == expected[0]
    assert_same(actual[1], expected[1], rtol=2e-2, atol=2e-3)


def padded_transformer_classifier(m):
    """nn.TransformerEncoder (batch_first, dropout) over padded token sequences with a key padding mask, mean pooling
    of the kept positions; training steps, then evaluation (torch's fast path zeroes the padded outputs)."""
    nn = m.nn
    m.manual_seed(2)
    emb = nn.Embedding(12, 8, padding_idx=0)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0.2, batch_first=True), 2)
    head = nn.Linear(8, 2)
    params = [*emb.parameters(), *encoder.parameters(), *head.parameters()]
    opt = m.optim.Adam(params, lr=1e-2)
    tokens = m.randint(1, 12, (5, 6))
    tokens[1, 3:] = 0
    tokens[4, 1:] = 0
    labels = m.tensor([0, 1, 1, 0, 1])

    def run():
        pad = tokens == 0
        hidden = encoder(emb(tokens), src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(hidden.dtype)
        return head((hidden * keep).sum(1) / keep.sum(1)), hidden

    losses = []
    for _ in range(3):
        loss = nn.functional.cross_entropy(run()[0], labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    encoder.eval()
    with m.no_grad():
        logits, hidden = run()
    return losses, logits, hidden


@pytest.mark.slow
def test_padded_transformer_classifier():
    _both(padded_transformer_classifier, F32)


def packed_recurrent_tagger(m, kind):
    """Variable-length sequences packed (unsorted), a two-layer bidirectional recurrent net with dropout between its
    layers, per-step tags through pad_packed_sequence, RMSprop steps."""
    nn, rnn = m.nn, m.nn.utils.rnn
    m.manual_seed(4)
    seqs = [m.randn(n, 3, dtype=m.float64) for n in (4, 2, 5)]
    tags = [m.randint(0, 3, (len(s),)) for s in seqs]
    net = getattr(nn, kind)(3, 5, num_layers=2, bidirectional=True, dropout=0.3).double()
    out_layer = nn.Linear(10, 3).double()
    opt = m.optim.RMSprop([*net.parameters(), *out_layer.parameters()], lr=1e-2)
    lengths = m.tensor([len(s) for s in seqs])
    losses = []
    for _ in range(3):
        packed = rnn.pack_padded_sequence(rnn.pad_sequence(seqs), lengths, enforce_sorted=False)
        out, _ = net(packed)
        padded, _ = rnn.pad_packed_sequence(out, padding_value=0.0)
        logits = out_layer(padded)
        target = rnn.pad_sequence(tags, padding_value=-100)
        loss = nn.functional.cross_entropy(logits.view(-1, 3), target.view(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses, [p.detach() for p in net.parameters()]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_packed_recurrent_tagger(kind):
    _both(packed_recurrent_tagger, F64, kind=kind)


def averaged_adapter_model(m):
    """A low-rank adapter layer that folds its update into the frozen weight when switched to eval (its own train
    override, reached through the parent's eval()), and an exponential moving average kept with foreach ops."""
    nn = m.nn
    m.manual_seed(9)

    class Adapter(nn.Linear):
        def __init__(self, n_in, n_out, rank):
            super().__init__(n_in, n_out)
            self.down = nn.Parameter(m.randn(rank, n_in) * 0.1)
            self.up = nn.Parameter(m.zeros(n_out, rank))
            self.weight.requires_grad_(False)
            self.folded = False

        def train(self, mode=True):
            super().train(mode)
            if mode == self.folded:
                with m.no_grad():
                    self.weight += (1 if not mode else -1) * (self.up @ self.down)
                self.folded = not mode
            return self

        def forward(self, x):
            out = super().forward(x)
            return out if self.folded else out + x @ self.down.t() @ self.up.t()

    model = nn.Sequential(Adapter(6, 6, 2), nn.Tanh(), nn.Linear(6, 1)).double()
    trainable = [p for p in model.parameters() if p.requires_grad]
    average = [p.detach().clone() for p in trainable]
    opt = m.optim.Adam(trainable, lr=0.05)
    x, y = m.randn(10, 6, dtype=m.float64), m.randn(10, 1, dtype=m.float64)
    for _ in range(4):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with m.no_grad():
            m._foreach_lerp_(average, [p.detach() for p in trainable], 0.25)
            m._foreach_mul_(average, 1.0)
    trained = model(x).detach()
    model.eval()
    folded = (model[0].folded, model(x).detach())
    model.train()
    norms = m._foreach_norm(average)
    return trained, folded, model[0].folded, model[0].weight.detach(), list(norms)


def test_averaged_adapter_model():
    _both(averaged_adapter_model, F64)


def compiled_rotary_attention(m):
    """Rotary position embeddings through complex numbers (view_as_complex, polar) in an attention module compiled
    with torch.compile: trained through the compiled module, then evaluated under no_grad by its compiled program."""
    nn = m.nn
    m.manual_seed(1)
    heads, dim, length = 2, 4, 5

    class RotaryAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k = nn.Linear(8, 8, bias=False), nn.Linear(8, 8, bias=False)
            angles = m.outer(m.arange(length, dtype=m.float32), 1.0 / 10000 ** (m.arange(0, dim, 2).float() / dim))
            self.register_buffer("rotation", m.polar(m.ones_like(angles), angles))

        def rotate(self, x):
            pairs = m.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
            return m.view_as_real(pairs * self.rotation[:, None, :]).flatten(-2)

        def forward(self, x):
            q = self.rotate(self.q(x).view(1, length, heads, dim)).transpose(1, 2)
            k = self.rotate(self.k(x).view(1, length, heads, dim)).transpose(1, 2)
            return m.softmax(q @ k.transpose(-1, -2) / 2.0, -1)

    module = RotaryAttention()
    compiled = m.compile(module)
    opt = m.optim.SGD(module.parameters(), lr=0.1)
    x, target = m.randn(1, length, 8), m.softmax(m.randn(1, heads, length, length), -1)
    losses = []
    for _ in range(3):
        loss = (compiled(x) - target).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    with m.no_grad():
        evaluated = [compiled(x * scale) for scale in (1.0, 0.5)]
    return losses, evaluated


@pytest.mark.slow
def test_compiled_rotary_attention():
    _both(compiled_rotary_attention, F32)


def quantized_autoencoder(m):
    """A vector quantizer between a convolutional encoder and decoder: nearest codes by distances, one-hot
    encodings by scatter_, the straight-through estimator, commitment loss and codebook perplexity."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(3)
    encoder = nn.Sequential(nn.Conv2d(1, 4, 4, 2, 1), nn.ReLU(), nn.Conv2d(4, 3, 1))
    decoder = nn.Sequential(nn.ConvTranspose2d(3, 4, 4, 2, 1), nn.ReLU(), nn.Conv2d(4, 1, 3, padding=1))
    codebook = nn.Embedding(6, 3)
    params = [*encoder.parameters(), *decoder.parameters(), *codebook.parameters()]
    opt = m.optim.Adam(params, lr=1e-2)
    images = m.rand(4, 1, 8, 8)
    record = []
    for _ in range(3):
        z = encoder(images).permute(0, 2, 3, 1).contiguous()
        flat = z.view(-1, 3)
        distances = (flat**2).sum(1, keepdim=True) + (codebook.weight**2).sum(1) - 2 * flat @ codebook.weight.t()
        codes = distances.argmin(1).unsqueeze(1)
        onehot = m.zeros(codes.shape[0], 6).scatter_(1, codes, 1)
        quantized = (onehot @ codebook.weight).view(z.shape)
        vq_loss = F.mse_loss(quantized, z.detach()) + 0.25 * F.mse_loss(quantized.detach(), z)
        quantized = z + (quantized - z).detach()
        recon = decoder(quantized.permute(0, 3, 1, 2))
        loss = F.mse_loss(recon, images) + vq_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        usage = onehot.mean(0)
        record.append((loss.detach(), m.exp(-(usage * m.log(usage + 1e-10)).sum())))
    return record, codes.view(-1).tolist()


@pytest.mark.slow
def test_quantized_autoencoder():
    _both(quantized_autoencoder, F32)


def replay_q_learning(m):
    """Q-learning from a replay buffer of transitions with terminal states: gather of the taken actions, targets
    from a slowly updated copy of the network (a state-dict blend), Huber loss, gradient value clipping."""
    nn = m.nn
    m.manual_seed(6)
    rng = np.random.default_rng(6)
    policy, target = nn.Linear(3, 2).double(), nn.Linear(3, 2).double()
    target.load_state_dict(policy.state_dict())
    opt = m.optim.AdamW(policy.parameters(), lr=1e-2, amsgrad=True)
    buffer = [
        (rng.standard_normal(3), int(rng.integers(2)), None if k % 4 == 3 else rng.standard_normal(3), 1.0)
        for k in range(12)
    ]
    losses = []
    for _ in range(4):
        batch = [buffer[i] for i in rng.choice(12, 6, replace=False)]
        states = m.tensor(np.stack([b[0] for b in batch]))
        actions = m.tensor([[b[1]] for b in batch])
        alive = m.tensor([b[2] is not None for b in batch])
        following = m.tensor(np.stack([b[2] for b in batch if b[2] is not None]))
        rewards = m.tensor([b[3] for b in batch], dtype=m.float64)
        chosen = policy(states).gather(1, actions)
        best_next = m.zeros(6, dtype=m.float64)
        with m.no_grad():
            best_next[alive] = target(following).max(1).values
        loss = nn.SmoothL1Loss()(chosen, (rewards + 0.9 * best_next).unsqueeze(1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(policy.parameters(), 0.5)
        opt.step()
        blended = {k: 0.1 * v + 0.9 * target.state_dict()[k] for k, v in policy.state_dict().items()}
        target.load_state_dict(blended)
        losses.append(loss.detach())
    return losses, [p.detach() for p in target.parameters()]


def test_replay_q_learning():
    _both(replay_q_learning, F64)
