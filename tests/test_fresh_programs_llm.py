"""Programs in the style of "Build a Large Language Model From Scratch" (rasbt/LLMs-from-scratch: the chapter
code, appendices D and E, the KV-cache, grouped-query attention and Llama bonus pieces), run with torch and with
batched_grad from the same seed in float64 and compared number for number (rasbt's deeplearning-models collection
is in test_fresh_programs_llm_zoo.py). Text is byte-tokenized here (no tiktoken)."""

import io
import math

import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default

TEXT = "Every effort moves you forward, and every day holds a lesson for the patient painter. " * 4


def _windows(m, ids, length, stride):
    """The sliding-window dataset of chapter 2: inputs and next-token targets as a Dataset."""

    class Windows(m.utils.data.Dataset):
        def __init__(self):
            starts = range(0, len(ids) - length, stride)
            self.inputs = [m.tensor(ids[s : s + length]) for s in starts]
            self.targets = [m.tensor(ids[s + 1 : s + length + 1]) for s in starts]

        def __len__(self):
            return len(self.inputs)

        def __getitem__(self, i):
            return self.inputs[i], self.targets[i]

    return Windows()


def _gpt(m, vocab=257, context=24, emb=16, heads=2, layers=2, drop=0.1, qkv_bias=False):
    """The chapter-4 GPT: causal multi-head attention with a registered triangular mask filled in place, LayerNorm
    and the tanh GELU written out, pre-norm residual blocks, tied-size output head."""
    nn = m.nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads, self.dim = heads, emb // heads
            self.q, self.k, self.v = (nn.Linear(emb, emb, bias=qkv_bias) for _ in range(3))
            self.proj, self.drop = nn.Linear(emb, emb), nn.Dropout(drop)
            self.register_buffer("mask", m.triu(m.ones(context, context), diagonal=1))

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = (f(x).view(b, n, self.heads, self.dim).transpose(1, 2) for f in (self.q, self.k, self.v))
            scores = q @ k.transpose(2, 3)
            scores.masked_fill_(self.mask.bool()[:n, :n], -m.inf)
            weights = self.drop(m.softmax(scores / k.shape[-1] ** 0.5, dim=-1))
            return self.proj((weights @ v).transpose(1, 2).contiguous().view(b, n, emb))

    class Norm(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale, self.shift = nn.Parameter(m.ones(emb)), nn.Parameter(m.zeros(emb))

        def forward(self, x):
            centered = x - x.mean(dim=-1, keepdim=True)
            return self.scale * centered / m.sqrt(x.var(dim=-1, keepdim=True, unbiased=False) + 1e-5) + self.shift

    class Gelu(nn.Module):
        def forward(self, x):
            return 0.5 * x * (1 + m.tanh(m.sqrt(m.tensor(2.0 / m.pi)) * (x + 0.044715 * m.pow(x, 3))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.att, self.norm1, self.norm2 = Attention(), Norm(), Norm()
            self.ff = nn.Sequential(nn.Linear(emb, 4 * emb), Gelu(), nn.Linear(4 * emb, emb))
            self.drop = nn.Dropout(drop)

        def forward(self, x):
            x = x + self.drop(self.att(self.norm1(x)))
            return x + self.drop(self.ff(self.norm2(x)))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb, self.pos_emb = nn.Embedding(vocab, emb), nn.Embedding(context, emb)
            self.drop_emb = nn.Dropout(drop)
            self.trf_blocks = nn.Sequential(*[Block() for _ in range(layers)])
            self.final_norm, self.out_head = Norm(), nn.Linear(emb, vocab, bias=False)

        def forward(self, idx):
            x = self.tok_emb(idx) + self.pos_emb(m.arange(idx.shape[1], device=idx.device))
            return self.out_head(self.final_norm(self.trf_blocks(self.drop_emb(x))))

    return GPT()


def _sample(m, model, idx, steps, context, temperature=0.0, top_k=None, eos_id=None):
    """Chapter 5's generate: crop the context, keep the top-k logits, scale by the temperature and draw with
    multinomial (greedy argmax at temperature 0); stop where the drawn token is eos_id."""
    for _ in range(steps):
        with m.no_grad():
            logits = model(idx[:, -context:])[:, -1, :]
        if top_k is not None:
            kth = m.topk(logits, top_k)[0][:, -1]
            logits = m.where(logits < kth, m.tensor(float("-inf")).to(logits.device), logits)
        if temperature > 0.0:
            nxt = m.multinomial(m.softmax(logits / temperature, dim=-1), num_samples=1)
        else:
            nxt = m.argmax(logits, dim=-1, keepdim=True)
        if nxt == eos_id:
            break
        idx = m.cat((idx, nxt), dim=1)
    return idx


def gpt_pretraining(m):
    """Sliding-window loader over byte tokens, the GPT trained with AdamW (dropout on), loss over flattened logits,
    evaluation under no_grad, greedy, top-k and temperature sampling (an eos_id of None never stops it), the
    perplexity of a batch, and a state dict saved to a buffer and loaded into a fresh model."""
    out = []
    with float64_default(m, seed=123):
        ids = list(TEXT.encode())
        loader = m.utils.data.DataLoader(_windows(m, ids, 16, 16), batch_size=2, shuffle=True, drop_last=True)
        model = _gpt(m)
        opt = m.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.1)
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            loss = m.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
            loss.backward()
            opt.step()
            if step % 3 == 0:
                model.eval()
                with m.no_grad():
                    out.append(m.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).item())
                model.train()
        model.eval()
        prompt = m.tensor(list(b"Every effort")).unsqueeze(0)
        out.append(_sample(m, model, prompt, 6, 24).tolist())
        out.append(_sample(m, model, prompt, 6, 24, temperature=1.4, top_k=25, eos_id=None).tolist())
        with m.no_grad():
            probas = m.softmax(model(x), dim=-1)
        picked = probas[0, [0, 1, 2], y[0, :3]]
        out.append(m.exp(-m.mean(m.log(picked))))
        buffer = io.BytesIO()
        m.save(model.state_dict(), buffer)
        buffer.seek(0)
        fresh = _gpt(m)
        fresh.load_state_dict(m.load(buffer, weights_only=True))
        out.append(fresh.out_head.weight)
    return out


@pytest.mark.slow
def test_gpt_pretraining():
    _both(gpt_pretraining, F64)


def _schedule(step, warmup, total, peak, initial, floor):
    if step < warmup:
        return initial + step * (peak - initial) / warmup
    progress = (step - warmup) / (total - warmup)
    return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_cosine_and_lora(m):
    """Appendix D's loop (linear warmup, cosine decay written into each param_group, clip_grad_norm_ after the
    warmup, the largest gradient found over .grad.data) and appendix E's LoRA: every nn.Linear of a frozen GPT
    classifier replaced through named_children/setattr by a Linear plus a low-rank update, only A and B trained."""
    nn, out = m.nn, []
    with float64_default(m, seed=123):
        ids = list(TEXT.encode())
        loader = m.utils.data.DataLoader(_windows(m, ids, 12, 12), batch_size=2, shuffle=True, drop_last=True)
        model = _gpt(m, context=12)
        opt = m.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
        total, warmup = 2 * len(loader), 3
        for step in range(total):
            x, y = list(loader)[step % len(loader)]
            opt.zero_grad()
            for group in opt.param_groups:
                group["lr"] = _schedule(step, warmup, total, 1e-3, 1e-5, 1e-6)
            m.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
            if step >= warmup:
                out.append(m.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0))
            opt.step()
        out.append(max(p.grad.data.flatten().max() for p in model.parameters() if p.grad is not None))

        class LoRA(nn.Module):
            def __init__(self, linear, rank, alpha):
                super().__init__()
                self.linear = linear
                self.A = nn.Parameter(m.empty(linear.in_features, rank))
                nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
                self.B = nn.Parameter(m.zeros(rank, linear.out_features))
                self.scale = alpha / rank

            def forward(self, x):
                return self.linear(x) + self.scale * (x @ self.A @ self.B)

        def replace(module):
            for name, child in module.named_children():
                if isinstance(child, nn.Linear):
                    setattr(module, name, LoRA(child, 2, 4))
                else:
                    replace(child)

        model.out_head = nn.Linear(16, 2)
        for p in model.parameters():
            p.requires_grad = False
        replace(model)
        out.append(sum(p.numel() for p in model.parameters() if p.requires_grad))
        opt = m.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.1)
        labels = m.tensor([0, 1])
        for x, _ in list(loader)[:3]:
            opt.zero_grad()
            loss = m.nn.functional.cross_entropy(model(x)[:, -1, :], labels)
            loss.backward()
            opt.step()
            out.append(loss)
        out.append(model.out_head.B)
    return out


@pytest.mark.slow
def test_warmup_cosine_and_lora():
    _both(warmup_cosine_and_lora, F64)


def classifier_and_instruction_batches(m):
    """Chapter 6's frozen GPT with a new two-class head (the last block and final norm unfrozen), trained on padded
    byte sequences from the last token's logits with accuracy counted by .item(); chapter 7's collate function
    (pad, replace all but the first pad of each target by ignore_index found with nonzero, truncate) and
    cross_entropy skipping -100."""
    out = []
    with float64_default(m, seed=123):
        texts = ["win a free prize now", "see you at lunch", "claim cash today", "thanks mom", "urgent reply"] * 2
        labels = [1, 0, 1, 0, 1] * 2
        width = max(len(t) for t in texts)
        rows = [list(t.encode()) + [256] * (width - len(t)) for t in texts]
        data = m.utils.data.TensorDataset(m.tensor(rows, dtype=m.long), m.tensor(labels, dtype=m.long))
        loader = m.utils.data.DataLoader(data, batch_size=4, shuffle=True, drop_last=True)
        model = _gpt(m, context=32, drop=0.0)
        for p in model.parameters():
            p.requires_grad = False
        model.out_head = m.nn.Linear(16, 2)
        for p in [*model.trf_blocks[-1].parameters(), *model.final_norm.parameters()]:
            p.requires_grad = True
        opt = m.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.1)
        for x, y in loader:
            opt.zero_grad()
            loss = m.nn.functional.cross_entropy(model(x)[:, -1, :], y)
            loss.backward()
            opt.step()
            out.append(loss.item())
            out.append((m.argmax(model(x)[:, -1, :], dim=-1) == y).sum().item())
        out.append(model.trf_blocks[0].att.q.weight.grad is None)

        def collate(batch, pad=256, ignore_index=-100, allowed=None):
            longest = max(len(item) + 1 for item in batch)
            inputs, targets = [], []
            for item in batch:
                padded = item + [pad] * (longest - len(item))
                x, y = m.tensor(padded[:-1]), m.tensor(padded[1:])
                where = m.nonzero(y == pad).squeeze()
                if where.numel() > 1:
                    y[where[1:]] = ignore_index
                inputs.append(x[:allowed] if allowed else x)
                targets.append(y[:allowed] if allowed else y)
            return m.stack(inputs), m.stack(targets)

        x, y = collate([[0, 1, 2, 3, 4], [5, 6], [7, 8, 9]])
        out += [x, y, collate([[0, 1, 2, 3, 4], [5, 6]], allowed=3)[1]]
        logits = m.tensor([[-1.0, 1.0], [-0.5, 1.5], [-0.5, 1.5]])
        out.append(m.nn.functional.cross_entropy(logits, m.tensor([0, 1, -100])))
    return out


def test_classifier_and_instruction_batches():
    _both(classifier_and_instruction_batches, F64)


def kv_cache_gqa_and_llama_parts(m):
    """Grouped-query attention with a KV cache held in buffers registered as None (cached keys concatenated, kv
    groups repeat_interleave'd to the heads, a causal mask from positions), cached greedy decoding against the
    uncached one; Llama's RoPE (frequencies, rotation by halves), RMSNorm by hand against nn.RMSNorm, SwiGLU with
    silu."""
    nn, out = m.nn, []
    with float64_default(m, seed=123):
        emb, heads, groups, dim = 16, 4, 2, 4

        class GQA(nn.Module):
            def __init__(self):
                super().__init__()
                self.q, self.out = nn.Linear(emb, emb, bias=False), nn.Linear(emb, emb, bias=False)
                self.k, self.v = nn.Linear(emb, groups * dim, bias=False), nn.Linear(emb, groups * dim, bias=False)
                self.register_buffer("cache_k", None, persistent=False)
                self.register_buffer("cache_v", None, persistent=False)
                self.pos = 0

            def forward(self, x, use_cache=False):
                b, n, _ = x.shape
                q = self.q(x).view(b, n, heads, dim).transpose(1, 2)
                k = self.k(x).view(b, n, groups, dim).transpose(1, 2)
                v = self.v(x).view(b, n, groups, dim).transpose(1, 2)
                if use_cache:
                    if self.cache_k is None:
                        self.cache_k, self.cache_v = k, v
                    else:
                        self.cache_k, self.cache_v = m.cat([self.cache_k, k], 2), m.cat([self.cache_v, v], 2)
                    k, v = self.cache_k, self.cache_v
                    rows = m.arange(self.pos, self.pos + n)
                    self.pos += n
                else:
                    rows = m.arange(n)
                k, v = k.repeat_interleave(heads // groups, dim=1), v.repeat_interleave(heads // groups, dim=1)
                scores = (q @ k.transpose(2, 3)).masked_fill(rows.unsqueeze(-1) < m.arange(k.shape[-2]), -m.inf)
                return self.out((m.softmax(scores / dim**0.5, dim=-1) @ v).transpose(1, 2).reshape(b, n, emb))

        class Tiny(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb, self.pos = nn.Embedding(50, emb), nn.Embedding(32, emb)
                self.blocks, self.head = nn.ModuleList([GQA(), GQA()]), nn.Linear(emb, 50, bias=False)
                self.current = 0

            def forward(self, idx, use_cache=False):
                n = idx.shape[1]
                start = self.current if use_cache else 0
                self.current += n if use_cache else 0
                x = self.emb(idx) + self.pos(m.arange(start, start + n)).unsqueeze(0)
                for block in self.blocks:
                    x = x + block(x, use_cache=use_cache)
                return self.head(x)

        model = Tiny().eval()
        prompt = m.randint(0, 50, (1, 5))
        with m.no_grad():
            plain = prompt
            for _ in range(6):
                plain = m.cat([plain, model(plain)[:, -1].argmax(-1, keepdim=True)], 1)
            cached, logits = prompt, model(prompt, use_cache=True)
            for _ in range(6):
                nxt = logits[:, -1].argmax(-1, keepdim=True)
                cached, logits = m.cat([cached, nxt], 1), model(nxt, use_cache=True)
        out += [plain, m.equal(plain, cached), logits, model.blocks[0].cache_k.shape[2]]

        # the book's .float() made float64 here: float32 cos and sin differ from torch's in the last bit
        inv_freq = 1.0 / (10000 ** (m.arange(0, dim, 2)[: dim // 2].double() / dim))
        angles = m.arange(8).unsqueeze(1) * inv_freq.unsqueeze(0)
        angles = m.cat([angles, angles], dim=1)
        cos, sin = m.cos(angles), m.sin(angles)
        x = m.randn(2, heads, 8, dim, requires_grad=True)
        rotated = m.cat((-x[..., dim // 2 :], x[..., : dim // 2]), dim=-1)
        roped = (x * cos[None, None] + rotated * sin[None, None]).to(dtype=x.dtype)
        weight = nn.Parameter(m.ones(dim)).double()
        by_hand = x * m.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5) * weight
        builtin = nn.RMSNorm(dim, eps=1e-5)(x)
        fc1, fc2, fc3 = nn.Linear(dim, 8, bias=False), nn.Linear(dim, 8, bias=False), nn.Linear(8, dim, bias=False)
        swiglu = fc3(nn.functional.silu(fc1(roped)) * fc2(roped))
        (swiglu.sum() + by_hand.pow(2).sum()).backward()
        out += [roped, by_hand, m.allclose(by_hand, builtin), swiglu, x.grad]
    return out


def test_kv_cache_gqa_and_llama_parts():
    _both(kv_cache_gqa_and_llama_parts, F64)


def gpt_in_bfloat16(m):
    """The GPT moved with model.to(dtype=torch.bfloat16), as the grouped-query-attention script runs it: logits
    of a prompt and greedy decoding, bit for bit (hand LayerNorm, GELU's 0.044715 * x ** 3, scaled softmax)."""
    m.manual_seed(123)
    model = _gpt(m, drop=0.0).to(dtype=m.bfloat16).eval()
    prompt = m.tensor(list(b"Hello, I am")).unsqueeze(0)
    with m.no_grad():
        logits = model(prompt)
    return [logits.float(), _sample(m, model, prompt, 8, 24)]


@pytest.mark.slow
def test_gpt_in_bfloat16():
    _both(gpt_in_bfloat16, dict(rtol=0, atol=0))
