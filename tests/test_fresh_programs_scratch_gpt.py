"""The language models of Karpathy's makemore.py (RNN and GRU cells, the causal bag of words, the transformer
block) trained through its InfiniteDataLoader, and build-nanogpt's GPT-2 training loop at a toy config (weight
tying, scaled init, parameter groups with the fused flag probed by inspect, gradient accumulation, clipping, cosine
learning rate, top-k sampling with a Generator), compared number for number with torch in float64."""

import inspect
import math

import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default


def _makemore_models(m, vocab, block, n_embd=12):
    nn, F = m.nn, m.nn.functional

    class RNNCell(nn.Module):
        def __init__(self):
            super().__init__()
            self.xh_to_h = nn.Linear(2 * n_embd, n_embd)

        def forward(self, xt, hprev):
            return F.tanh(self.xh_to_h(m.cat([xt, hprev], dim=1)))

    class GRUCell(nn.Module):
        def __init__(self):
            super().__init__()
            self.xh_to_z, self.xh_to_r = nn.Linear(2 * n_embd, n_embd), nn.Linear(2 * n_embd, n_embd)
            self.xh_to_hbar = nn.Linear(2 * n_embd, n_embd)

        def forward(self, xt, hprev):
            xh = m.cat([xt, hprev], dim=1)
            hbar = F.tanh(self.xh_to_hbar(m.cat([xt, F.sigmoid(self.xh_to_r(xh)) * hprev], dim=1)))
            z = F.sigmoid(self.xh_to_z(xh))
            return (1 - z) * hprev + z * hbar

    class RNN(nn.Module):
        def __init__(self, cell):
            super().__init__()
            self.start = nn.Parameter(m.zeros(1, n_embd))
            self.wte, self.cell, self.lm_head = nn.Embedding(vocab, n_embd), cell(), nn.Linear(n_embd, vocab)

        def forward(self, idx):
            emb, hprev, hiddens = self.wte(idx), self.start.expand((idx.size(0), -1)), []
            for i in range(idx.size(1)):
                hprev = self.cell(emb[:, i, :], hprev)
                hiddens.append(hprev)
            return self.lm_head(m.stack(hiddens, 1))

    class BoW(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block, n_embd)
            self.register_buffer("bias", m.tril(m.ones(block, block)).view(1, block, block))
            self.c_fc, self.c_proj = nn.Linear(n_embd, 2 * n_embd), nn.Linear(2 * n_embd, n_embd)
            self.lm_head = nn.Linear(n_embd, vocab)

        def forward(self, idx):
            B, T = idx.size()
            x = self.wte(idx) + self.wpe(m.arange(0, T, dtype=m.long).unsqueeze(0))
            att = m.zeros((B, T, T)).masked_fill(self.bias[:, :T, :T] == 0, float("-inf"))
            x = x + F.softmax(att, dim=-1) @ x
            return self.lm_head(x + self.c_proj(F.tanh(self.c_fc(x))))

    return {"rnn": lambda: RNN(RNNCell), "gru": lambda: RNN(GRUCell), "bow": BoW}


def makemore_models(m):
    """Each model trained a few AdamW steps on padded words (targets -1 past the end, ignore_index=-1) drawn by a
    RandomSampler with replacement, then evaluated under inference_mode and sampled with top-k."""
    F, data = m.nn.functional, m.utils.data
    with float64_default(m, seed=3407):
        words = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper", "evelyn", "abigail"]
        chars = sorted(set("".join(words)))
        stoi, length = {ch: i + 1 for i, ch in enumerate(chars)}, max(len(w) for w in words) + 1

        class CharDataset(data.Dataset):
            def __len__(self):
                return len(words)

            def __getitem__(self, idx):
                ix = m.tensor([stoi[c] for c in words[idx]], dtype=m.long)
                x, y = m.zeros(length, dtype=m.long), m.zeros(length, dtype=m.long)
                x[1 : 1 + len(ix)] = ix
                y[: len(ix)] = ix
                y[len(ix) + 1 :] = -1
                return x, y

        dataset, out = CharDataset(), []
        for make in _makemore_models(m, len(chars) + 1, length).values():
            m.manual_seed(3407)
            model = make()
            opt = m.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)
            sampler = data.RandomSampler(dataset, replacement=True, num_samples=int(1e10))
            batches = iter(data.DataLoader(dataset, sampler=sampler, batch_size=4))
            for _ in range(5):
                X, Y = next(batches)
                logits = model(X)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), Y.view(-1), ignore_index=-1)
                model.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            with m.inference_mode():
                X, Y = dataset[0]
                evaluated = F.cross_entropy(model(X[None]).view(-1, len(chars) + 1), Y, ignore_index=-1)
            with m.no_grad():
                idx = m.zeros(3, 1, dtype=m.long)
                for _ in range(5):
                    logits = model(idx)[:, -1, :]
                    v, _ = m.topk(logits, 4)
                    logits[logits < v[:, [-1]]] = -float("Inf")
                    idx = m.cat((idx, m.multinomial(F.softmax(logits, dim=-1), num_samples=1)), dim=1)
            out.append([loss, evaluated, idx.tolist()])
        return out


@pytest.mark.slow
def test_makemore_models():
    _both(makemore_models, F64)


def _gpt(m, vocab, block, n_layer, n_embd, n_head):
    nn, F = m.nn, m.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
            self.c_proj.NANOGPT_SCALE_INIT = 1

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in self.c_attn(x).split(n_embd, 2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(n_embd), Attention(), nn.LayerNorm(n_embd)
            self.c_fc, self.gelu = nn.Linear(n_embd, 4 * n_embd), nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * n_embd, n_embd)
            self.c_proj.NANOGPT_SCALE_INIT = 1

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.c_proj(self.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(vocab, n_embd),
                    wpe=nn.Embedding(block, n_embd),
                    h=nn.ModuleList([Block() for _ in range(n_layer)]),
                    ln_f=nn.LayerNorm(n_embd),
                )
            )
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.transformer.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                std = 0.02 * ((2 * n_layer) ** -0.5 if hasattr(module, "NANOGPT_SCALE_INIT") else 1)
                m.nn.init.normal_(module.weight, mean=0.0, std=std)
                if module.bias is not None:
                    m.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                m.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            x = self.transformer.wte(idx) + self.transformer.wpe(m.arange(0, idx.size(1), dtype=m.long))
            for layer in self.transformer.h:
                x = layer(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

    return GPT()


def build_nanogpt_training(m):
    """Parameter groups split by dimension (weight decay on matrices only), AdamW with fused=False after probing
    its signature, four micro-steps of accumulation per step, clip_grad_norm_'s returned norm, a warmup-then-cosine
    learning rate written into each group, and top-50 sampling through gather with a seeded Generator."""
    with float64_default(m, seed=1337):
        tokens = m.randint(0, 64, (1200,), dtype=m.long)
        model = _gpt(m, vocab=64, block=16, n_layer=2, n_embd=16, n_head=2)
        params = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
        decay = [p for p in params.values() if p.dim() >= 2]
        groups = [{"params": decay, "weight_decay": 0.1}, {"params": [p for p in params.values() if p.dim() < 2]}]
        fused = "fused" in inspect.signature(m.optim.AdamW).parameters and False
        optimizer = m.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=fused)
        max_lr, warmup, max_steps, position, log = 6e-3, 2, 6, 0, []
        for step in range(max_steps):
            optimizer.zero_grad()
            loss_accum = 0.0
            for _ in range(4):
                buf = tokens[position : position + 4 * 16 + 1]
                position = (position + 64) % 1000
                _, loss = model(buf[:-1].view(4, 16), buf[1:].view(4, 16))
                loss = loss / 4
                loss_accum += loss.detach()
                loss.backward()
            norm = m.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            ratio = (step - warmup) / (max_steps - warmup)
            lr = (
                max_lr * (step + 1) / warmup
                if step < warmup
                else max_lr * (0.1 + 0.45 * (1 + math.cos(math.pi * ratio)))
            )
            for group in optimizer.param_groups:
                group["lr"] = lr
            optimizer.step()
            log.append([loss_accum, norm, lr])
        rng = m.Generator().manual_seed(42)
        xgen = m.tensor([5, 17, 33], dtype=m.long).unsqueeze(0).repeat(2, 1)
        with m.no_grad():
            while xgen.size(1) < 8:
                probs = m.nn.functional.softmax(model(xgen)[0][:, -1, :], dim=-1)
                topk_probs, topk_indices = m.topk(probs, 50, dim=-1)
                ix = m.multinomial(topk_probs, 1, generator=rng)
                xgen = m.cat((xgen, m.gather(topk_indices, -1, ix)), dim=1)
        return [log, xgen, len(decay), model.lm_head.weight is model.transformer.wte.weight]


@pytest.mark.slow
def test_build_nanogpt_training():
    _both(build_nanogpt_training, F64)
