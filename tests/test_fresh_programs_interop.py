"""Model code that mixes torch with the libraries it is usually imported with, written once against torch's API and
run with torch and with batched_grad from the same seed in float64: einops (rearrange, reduce, repeat, einsum,
pack/unpack and its Rearrange/Reduce/EinMix layers, taken from einops.layers.torch or batched_grad.einops_layers) in
the shapes of vit-pytorch's ViT/CaiT/Cross-ViT/MaxViT, perceiver-pytorch, a Swin window attention, lucidrains'
MLP-Mixer, einops' ResMLP written with EinMix, denoising-diffusion-pytorch's 1-d Unet pieces and x-transformers'
Attend; and NumPy, matplotlib and scipy.optimize handed tensors."""

import math
from functools import partial

import numpy as np
import pytest

pytest.importorskip("einops")
import einops  # noqa: E402
import einops.layers.torch  # noqa: E402
import torch  # noqa: E402
from einops import pack, rearrange, reduce, repeat, unpack  # noqa: E402

import batched_grad as bg  # noqa: E402
import batched_grad.einops_layers  # noqa: E402
from test_fresh_programs_dl2 import F64, _both  # noqa: E402


def _layers(m):
    return bg.einops_layers if m is bg else einops.layers.torch


def _train(m, model, loss_of, steps=3, lr=1e-2):
    """A few Adam steps; the losses and the trained parameters."""
    opt = m.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = loss_of()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses + [p.detach() for p in model.parameters()]


def _heads_attention(m, nn, dim, heads, talking_heads=False):
    """Multi-head attention whose heads are split and merged with rearrange; optional CaiT-style talking heads
    (einsum over the head axis before and after the softmax); keys may include a context (Cross-ViT)."""

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.to_q, self.to_kv = (
                nn.LayerNorm(dim),
                nn.Linear(dim, dim, bias=False),
                nn.Linear(dim, 2 * dim),
            )
            self.mix = nn.Parameter(m.randn(heads, heads)) if talking_heads else None
            self.out = nn.Sequential(nn.Linear(dim, dim), nn.Dropout(0.1))

        def forward(self, x, context=None):
            x = self.norm(x)
            kv_in = x if context is None else m.cat((x, context), dim=1)
            q, k, v = (self.to_q(x), *self.to_kv(kv_in).chunk(2, dim=-1))
            q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=heads) for t in (q, k, v))
            dots = m.einsum("b h i d, b h j d -> b h i j", q, k) * (dim // heads) ** -0.5
            if self.mix is not None:
                dots = m.einsum("b h i j, h g -> b g i j", dots, self.mix)
            attn = dots.softmax(dim=-1)
            return self.out(rearrange(attn @ v, "b h n d -> b n (h d)"))

    return Attention()


def vit_family(m):
    """A ViT (patches by a Rearrange layer, a cls token repeated over the batch, learnt positions) whose blocks
    are plain, talking-heads and context attention; a cross-entropy loss on random images."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    dim, patches = 16, 16

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Sequential(
                _layers(m).Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2), nn.Linear(12, dim)
            )
            self.cls = nn.Parameter(m.randn(1, 1, dim))
            self.pos = nn.Parameter(m.randn(1, patches + 1, dim))
            self.blocks = nn.ModuleList([_heads_attention(m, nn, dim, 4, talking) for talking in (False, True)])
            self.cross = _heads_attention(m, nn, dim, 2)
            self.head = nn.Linear(dim, 3)

        def forward(self, img):
            x = self.embed(img)
            x = m.cat((repeat(self.cls, "1 n d -> b n d", b=x.shape[0]), x), dim=1)
            x += self.pos[:, : x.shape[1]]
            for block in self.blocks:
                x = block(x) + x
            cls = self.cross(x[:, :1], context=x[:, 1:]) + x[:, :1]
            return self.head(rearrange(cls, "b 1 d -> b d"))

    model = ViT()
    images, labels = m.randn(4, 3, 8, 8), m.randint(0, 3, (4,))
    return _train(m, model, lambda: F.cross_entropy(model(images), labels))


def perceiver(m):
    """Perceiver-style cross attention: Fourier-encoded positions repeated over the batch and flattened into the
    input with rearrange('b ... d -> b (...) d'), learnt latents repeated, heads folded into the batch
    ('(b h) n d'), and a key mask repeated per head and applied with masked_fill_."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    heads, latent_dim = 2, 8

    def fourier(pos, bands=3):
        pos = pos.unsqueeze(-1)
        scales = m.logspace(0.0, math.log(4.0) / math.log(2), bands, base=2, dtype=pos.dtype)
        x = pos * scales[(*((None,) * (pos.dim() - 1)), Ellipsis)] * math.pi
        return m.cat([x.sin(), x.cos(), pos], dim=-1)

    class Perceiver(nn.Module):
        def __init__(self):
            super().__init__()
            self.latents = nn.Parameter(m.randn(4, latent_dim))
            self.to_q, self.to_kv = nn.Linear(latent_dim, 8, bias=False), nn.Linear(2 + 2 * 7, 16, bias=False)
            self.out = nn.Linear(8, latent_dim)
            self.head = nn.Sequential(nn.LayerNorm(latent_dim), nn.Linear(latent_dim, 3))

        def forward(self, data, mask):
            b, *axes, _ = data.shape
            grid = m.stack(m.meshgrid(*(m.linspace(-1.0, 1.0, steps=n) for n in axes), indexing="ij"), dim=-1)
            enc = repeat(rearrange(fourier(grid), "... n d -> ... (n d)"), "... -> b ...", b=b)
            data = rearrange(m.cat((data, enc), dim=-1), "b ... d -> b (...) d")
            x = repeat(self.latents, "n d -> b n d", b=b)
            q, k, v = self.to_q(x), *self.to_kv(data).chunk(2, dim=-1)
            q, k, v = (rearrange(t, "b n (h d) -> (b h) n d", h=heads) for t in (q, k, v))
            sim = m.einsum("b i d, b j d -> b i j", q, k) * 0.5
            sim.masked_fill_(~repeat(rearrange(mask, "b ... -> b (...)"), "b j -> (b h) () j", h=heads), -1e9)
            out = rearrange(
                m.einsum("b i j, b j d -> b i d", sim.softmax(dim=-1), v), "(b h) n d -> b n (h d)", h=heads
            )
            return self.head((self.out(out) + x).mean(dim=-2))

    model = Perceiver()
    data, labels = m.randn(3, 4, 5, 2), m.randint(0, 3, (3,))
    mask = m.rand(3, 4, 5) > 0.2
    return _train(m, model, lambda: F.cross_entropy(model(data, mask), labels))


def swin_windows(m):
    """Swin window attention: a cyclic shift by torch.roll, windows cut and merged by rearrange, relative position
    bias gathered with two index tensors, and the shifted-window masks built by writing -inf into a rearranged
    view and added in place to strided slices of the scores."""
    nn = m.nn
    m.manual_seed(0)
    w, heads, dim = 2, 2, 8

    def shift_mask(upper_lower):
        mask = m.zeros(w * w, w * w)
        if upper_lower:
            mask[-w:, :-w] = float("-inf")
            mask[:-w, -w:] = float("-inf")
        else:
            mask = rearrange(mask, "(h1 w1) (h2 w2) -> h1 w1 h2 w2", h1=w, h2=w)
            mask[:, -1:, :, :-1] = float("-inf")
            mask[:, :-1, :, -1:] = float("-inf")
            mask = rearrange(mask, "h1 w1 h2 w2 -> (h1 w1) (h2 w2)")
        return mask

    cells = m.tensor(np.array([[i, j] for i in range(w) for j in range(w)]))
    rel = (cells[None, :, :] - cells[:, None, :]) + w - 1
    to_qkv, to_out = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim)
    pos_bias = nn.Parameter(m.randn(2 * w - 1, 2 * w - 1))
    masks = shift_mask(True), shift_mask(False)
    model = nn.ModuleList([to_qkv, to_out])
    model.register_parameter("pos_bias", pos_bias)

    def attend(x):
        x = m.roll(x, shifts=(-1, -1), dims=(1, 2))
        nw = x.shape[2] // w
        q, k, v = (
            rearrange(t, "b (nh wh) (nw ww) (h d) -> b h (nh nw) (wh ww) d", h=heads, wh=w, ww=w)
            for t in to_qkv(x).chunk(3, dim=-1)
        )
        dots = m.einsum("b h w i d, b h w j d -> b h w i j", q, k) * 0.5
        dots += pos_bias[rel[:, :, 0], rel[:, :, 1]]
        dots[:, :, -nw:] += masks[0]
        dots[:, :, nw - 1 :: nw] += masks[1]
        out = m.einsum("b h w i j, b h w j d -> b h w i d", dots.softmax(dim=-1), v)
        out = rearrange(out, "b h (nh nw) (wh ww) d -> b (nh wh) (nw ww) (h d)", h=heads, wh=w, ww=w, nw=nw)
        return m.roll(to_out(out), shifts=(1, 1), dims=(1, 2))

    x, target = m.randn(2, 4, 4, dim), m.randn(2, 4, 4, dim)
    return _train(m, model, lambda: ((attend(x) - target) ** 2).mean())


def mixers(m):
    """lucidrains' MLP-Mixer (token mixing by Conv1d with kernel 1, a Rearrange patcher and a Reduce mean head) and
    the ResMLP block of einops' EinMix tutorial (per-channel affine and token-mixing EinMix layers, initialised
    by writing into .data[:]), trained together; EinMix draws its weights from the generator as torch's does."""
    nn, F = m.nn, m.nn.functional
    layers = _layers(m)
    m.manual_seed(0)

    def set_to(layer, scale):
        layer.weight.data[:] = scale
        if layer.bias is not None:
            layer.bias.data[:] = 0
        return layer

    def pre_norm_residual(dim, fn):
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm, self.fn = nn.LayerNorm(dim), fn

            def forward(self, x):
                return self.fn(self.norm(x)) + x

        return Block()

    token_mlp = partial(nn.Conv1d, kernel_size=1)
    model = nn.Sequential(
        layers.Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2),
        nn.Linear(12, 8),
        pre_norm_residual(8, nn.Sequential(token_mlp(4, 8), nn.GELU(), nn.Dropout(0.1), token_mlp(8, 4))),
        set_to(layers.EinMix("b t c -> b t c", weight_shape="c", bias_shape="c", c=8), 1.0),
        layers.EinMix("b t c -> b t0 c", weight_shape="t t0", bias_shape="t0", t=4, t0=4),
        set_to(layers.EinMix("b t c -> b t c", weight_shape="c", c=8), 0.5),
        nn.LayerNorm(8),
        layers.Reduce("b n c -> b c", "mean"),
        nn.Linear(8, 3),
    )
    images, labels = m.randn(5, 3, 4, 4), m.randint(0, 3, (5,))
    return _train(m, model, lambda: F.cross_entropy(model(images), labels))


def diffusion_unet_pieces(m):
    """denoising-diffusion-pytorch's 1-d pieces: a weight-standardized convolution whose variance is an einops
    reduce with a callable (partial(torch.var, unbiased=False)), linear attention with heads split by rearrange,
    sinusoidal time embeddings put in by rearrange('b c -> b c 1'), q_sample with gathered schedule coefficients
    and the per-sample loss reduce('b ... -> b (...)', 'mean')."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)

    class StandardizedConv(nn.Conv1d):
        def forward(self, x):
            mean = reduce(self.weight, "o ... -> o 1 1", "mean")
            var = reduce(self.weight, "o ... -> o 1 1", partial(m.var, unbiased=False))
            weight = (self.weight - mean) * var.clamp(min=1e-3).rsqrt()
            return F.conv1d(x, weight, self.bias, self.stride, self.padding)

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.norm = StandardizedConv(2, 8, 3, padding=1), nn.GroupNorm(4, 8)
            self.time = nn.Sequential(nn.Linear(8, 16), nn.SiLU())
            self.to_qkv, self.to_out = nn.Conv1d(8, 24, 1, bias=False), nn.Conv1d(8, 2, 1)

        def forward(self, x, t):
            freqs = m.exp(m.arange(4) * -(math.log(10000) / 3))
            emb = t[:, None] * freqs[None, :]
            scale, shift = rearrange(self.time(m.cat((emb.sin(), emb.cos()), dim=-1)), "b c -> b c 1").chunk(2, dim=1)
            h = F.silu(self.norm(self.conv(x)) * (scale + 1) + shift)
            q, k, v = (rearrange(a, "b (h c) n -> b h c n", h=2) for a in self.to_qkv(h).chunk(3, dim=1))
            context = m.einsum("b h d n, b h e n -> b h d e", k.softmax(dim=-1), v)
            out = m.einsum("b h d e, b h d n -> b h e n", context, q.softmax(dim=-2) * 0.5)
            return self.to_out(rearrange(out, "b h c n -> b (h c) n") + h)

    steps = 10
    alphas_cumprod = m.cumprod(1 - m.linspace(1e-3, 0.2, steps, dtype=m.float64), dim=0)
    model = Denoiser()
    x0, t, noise = m.rand(4, 2, 8) * 2 - 1, m.randint(0, steps, (4,)), m.randn(4, 2, 8)

    def loss():
        a = alphas_cumprod.gather(-1, t).reshape(4, 1, 1)
        x_t = a.sqrt() * x0 + (1 - a).sqrt() * noise
        per_sample = reduce(F.mse_loss(model(x_t, t.double()), noise, reduction="none"), "b ... -> b (...)", "mean")
        return per_sample.mean()

    return _train(m, model, loss)


def register_tokens(m):
    """Register tokens (vit-pytorch's SimpleViT with registers): packed after the patches with pack('b * d'),
    unpacked after the encoder; a 2-d sine-cosine position table built with meshgrid."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    y, x = m.meshgrid(m.arange(2), m.arange(2), indexing="ij")
    omega = 1.0 / (10000 ** (m.arange(2) / 1))
    y, x = y.flatten()[:, None] * omega[None, :], x.flatten()[:, None] * omega[None, :]
    positions = m.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1)
    embed = nn.Sequential(_layers(m).Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2), nn.Linear(12, 8))
    registers = nn.Parameter(m.randn(3, 8))
    encoder, head = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), nn.Linear(8, 2)
    model = nn.ModuleList([embed, encoder, head])
    model.register_parameter("registers", registers)

    def logits(img):
        tokens = embed(img) + positions
        packed, shapes = pack([tokens, repeat(registers, "n d -> b n d", b=img.shape[0])], "b * d")
        tokens, _ = unpack(encoder(packed), shapes, "b * d")
        return head(tokens.mean(dim=1))

    images, labels = m.randn(3, 3, 4, 4), m.randint(0, 2, (3,))
    return _train(m, model, lambda: F.cross_entropy(logits(images), labels))


def xtransformers_attend(m):
    """x-transformers' Attend in its main branches: a key padding mask rearranged to 'b 1 1 j', causal masks from
    triu, grouped key/value heads repeated ('b kvh n d -> b (r kvh) n d'), l2-distance scores through pack('* i d')
    and cdist, sparse top-k, talking heads as 1x1 convolutions, and the fused path: scaled_dot_product_attention
    inside sdpa_kernel with a bias filled with -finfo.max // 2 (its gradients were nan); outputs and gradients."""
    nn, F = m.nn, m.nn.functional
    attention = m.nn.attention
    m.manual_seed(0)
    b, h, n, d = 2, 4, 5, 3
    q, k, v = (m.randn(b, h, n, d, requires_grad=True) for _ in range(3))
    kv_grouped = [m.randn(b, 2, n, d, requires_grad=True) for _ in range(2)]
    padding = m.rand(b, n) > 0.3
    padding[:, 0] = True
    bias = m.randn(h, n, n)
    talk = nn.Conv2d(h, h, 1, bias=False)
    causal = m.ones((n, n), dtype=m.bool).triu(1)
    neg = -m.finfo(q.dtype).max

    def scores(q, k, variant):
        if variant == "l2":
            packed_q, shapes = pack([q], "* i d")
            packed_k, _ = pack([k], "* j d")
            return -unpack(m.cdist(packed_q, packed_k) ** 2, shapes, "* i j")[0]
        return m.einsum("b h i d, b h j d -> b h i j", q, k) * d**-0.5

    def attend(q, k, v, variant):
        if k.shape[1] < h:
            k, v = (repeat(t, "b kvh n d -> b (r kvh) n d", r=h // k.shape[1]) for t in (k, v))
        if variant == "fused":
            masked_bias = rearrange(bias, "h i j -> 1 h i j").expand(b, h, -1, -1).masked_fill(causal, neg // 2)
            with attention.sdpa_kernel([attention.SDPBackend.MATH, attention.SDPBackend.FLASH_ATTENTION]):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=masked_bias)
        sim = scores(q, k, variant)
        if variant == "talking":
            sim = talk(sim)
        sim = sim.masked_fill(~rearrange(padding, "b j -> b 1 1 j"), neg).masked_fill(causal, neg)
        if variant == "topk":
            top, _ = sim.topk(2, dim=-1)
            sim = sim.masked_fill(~((sim >= top[..., -1:]) & (sim > neg)), neg)
        return m.einsum("b h i j, b h j d -> b h i d", F.softmax(sim, dim=-1), v)

    out = []
    for variant in ("plain", "l2", "topk", "talking", "fused"):
        for keys in ((k, v), kv_grouped):
            o = attend(q, *keys, variant)
            out += [o.detach(), *m.autograd.grad((o * o).sum(), (q, *keys))]
    return out


# each compiles many programs (attention over several shapes, a transformer encoder layer): over 2 s
SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "program",
    [
        pytest.param(vit_family, marks=SLOW),
        pytest.param(perceiver, marks=SLOW),
        pytest.param(swin_windows, marks=SLOW),
        pytest.param(mixers, marks=SLOW),
        pytest.param(diffusion_unet_pieces, marks=SLOW),
        pytest.param(register_tokens, marks=SLOW),
        pytest.param(xtransformers_attend, marks=SLOW),
    ],
    ids=lambda program: program.__name__,
)
def test_einops_model_code(program):
    torch.set_default_dtype(torch.float64)
    bg.set_default_dtype(bg.float64)
    try:
        _both(program, F64)
    finally:
        torch.set_default_dtype(torch.float32)
        bg.set_default_dtype(bg.float32)


def numpy_scipy_matplotlib(m):
    """Tensors handed to NumPy (np.array, np.asarray, ufuncs, indexing by NumPy integers and arrays), to
    matplotlib (plot and imshow of tensors, read back from the artists) and to scipy.optimize.minimize with a
    closure that returns a loss and its gradient computed by backward."""
    optimize = pytest.importorskip("scipy.optimize")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m.manual_seed(0)
    t = m.linspace(0, 1, 5, dtype=m.float64)
    image = m.rand(3, 4, dtype=m.float64)
    out = [np.array(t), np.asarray(t), np.sin(t), t[np.int64(2)], t[np.array([0, 3])], np.float64(2.0) * t]
    fig, ax = plt.subplots()
    out.append(np.asarray(ax.plot(t, t**2)[0].get_ydata(), dtype=np.float64))
    out.append(np.asarray(ax.imshow(image).get_array(), dtype=np.float64))
    plt.close(fig)
    target = m.tensor([1.0, -2.0, 0.5], dtype=m.float64)

    def loss_and_grad(x):
        xt = m.tensor(x, requires_grad=True)
        loss = ((xt - target) ** 2).sum() + 0.1 * (xt**4).sum()
        loss.backward()
        return loss.item(), xt.grad.numpy()

    result = optimize.minimize(loss_and_grad, np.zeros(3), jac=True, method="L-BFGS-B")
    return out + [result.x, result.fun, int(result.nit)]


def test_numpy_scipy_matplotlib_take_tensors():
    _both(numpy_scipy_matplotlib, F64)
