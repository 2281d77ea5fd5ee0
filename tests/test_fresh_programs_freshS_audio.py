"""Audio front ends as public code writes them from scratch, run with torch and with batched_grad in float64 and
compared number for number: an STFT module with a conv1d fallback kernel made from the STFT of diracs, a
triangular mel filterbank and a DCT for MFCCs (Jan Schlüter's mel filterbank layer), open-unmix's STFT/ISTFT pair
(sigsep/open-unmix-pytorch), a spectral mask trained through istft, and Kaldi-compatible spectrogram, fbank and
MFCC features (torchaudio's compliance module as GPT-SoVITS copies it: as_strided frames, pre-emphasis by a
replicate pad, several windows, VTLN warping by boolean-mask assignment) with gradients reaching a learnt gain, and
a HiFi-GAN step under the weight_norm and spectral_norm hooks of torch.nn.utils (jik876/hifi-gan)."""

import math

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both


def _create_dct(m, n_mfcc, n_mels):
    """torchaudio.functional.create_dct(n_mfcc, n_mels, "ortho"), written out."""
    n = m.arange(float(n_mels))
    k = m.arange(float(n_mfcc)).unsqueeze(1)
    dct = m.cos(math.pi / float(n_mels) * (n + 0.5) * k)
    dct[0] *= 1.0 / math.sqrt(2.0)
    dct *= math.sqrt(2.0 / float(n_mels))
    return dct.t()


def stft_mel_front_ends(m):
    nn, F = m.nn, m.nn.functional

    class STFT(nn.Module):
        def __init__(self, winsize, hopsize):
            super().__init__()
            self.winsize, self.hopsize = winsize, hopsize
            self.register_buffer("window", m.hann_window(winsize, periodic=False), persistent=False)

        def kernel(self):
            diracs = m.eye(self.winsize)
            w = m.stft(diracs, self.winsize, self.winsize, window=self.window, center=False, return_complex=False)
            return w.flatten(1).T[:, np.newaxis]

        def forward(self, x, by_conv=False):
            batch, channels = x.shape[:2]
            x = x.reshape((-1,) + x.shape[2:])
            if by_conv:
                x = F.conv1d(x[:, None], self.kernel(), stride=self.hopsize)
                x = x.reshape((batch * channels, -1, 2, x.shape[-1])).transpose(-1, -2)
            else:
                x = m.stft(x, self.winsize, self.hopsize, window=self.window, center=False, return_complex=False)
            return x.norm(p=2, dim=-1).reshape((batch, channels, -1) + x.shape[2:-1])

    def mel_filterbank(sample_rate, frame_len, num_bands, min_freq, max_freq):
        peaks_mel = m.linspace(1127 * np.log1p(min_freq / 700.0), 1127 * np.log1p(max_freq / 700.0), num_bands + 2)
        peaks_bin = 700 * m.expm1(peaks_mel / 1127) * frame_len / sample_rate
        bins = min(frame_len // 2 + 1, int(np.ceil(max_freq * frame_len / float(sample_rate))))
        x = m.arange(bins, dtype=peaks_bin.dtype)[:, np.newaxis]
        left, center, right = peaks_bin[0:-2], peaks_bin[1:-1], peaks_bin[2:]
        bank = m.clamp(m.min((x - left) / (center - left), (x - right) / (center - right)), min=0)
        bank /= bank.sum(0)
        return bank

    m.manual_seed(0)
    m.set_default_dtype(m.float64)
    try:
        t = m.arange(512) / 8000
        audio = m.stack([m.sin(2 * math.pi * 440 * t), 0.5 * m.sin(2 * math.pi * 1000 * t + 0.3)])
        audio = (audio + 0.05 * m.randn(2, 512)).reshape(1, 2, 512).repeat(2, 1, 1)
        stft = STFT(64, 16)
        mag = stft(audio)
        bank = mel_filterbank(8000, 64, 8, 50, 3800)
        mel = mag.transpose(-1, -2)[..., : bank.shape[0]].matmul(bank).transpose(-1, -2)
        mfcc = m.matmul(m.log(mel.clamp(min=1e-8)).transpose(-1, -2), _create_dct(m, 5, 8)).transpose(-1, -2)
        out = [mag.sum(), stft(audio, by_conv=True) - mag, bank, mfcc[0, 0]]

        window = nn.Parameter(m.hann_window(64), requires_grad=False)
        spec = m.view_as_real(m.stft(audio.view(-1, 512), 64, 16, window=window, center=True, return_complex=True))
        spec = spec.view(audio.shape[:-1] + spec.shape[-3:])
        back = m.istft(m.view_as_complex(spec.reshape(-1, *spec.shape[-3:])), 64, 16, window=window, length=512)
        out += [m.abs(m.view_as_complex(spec)).mean(1, keepdim=True).sum(), back.reshape(audio.shape) - audio]

        mask = nn.Parameter(m.ones(33, 1))
        gain = nn.Parameter(m.ones(1))
        opt = m.optim.Adam([mask, gain], lr=0.05)
        for _ in range(3):
            S = m.stft(audio[0, 0] * gain, 64, 16, window=m.hann_window(64), return_complex=True)
            rec = m.istft(S * mask, 64, 16, window=m.hann_window(64), length=512)
            feats = stft(rec.view(1, 1, -1))
            loss = (rec - 0.5 * audio[0, 0]).pow(2).mean() + 1e-3 * feats.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            out += [loss.detach(), mask.grad.abs().sum(), gain.grad]
    finally:
        m.set_default_dtype(m.float32)
    return out


@pytest.mark.slow
def test_stft_mel_front_ends():
    _both(stft_mel_front_ends, F64)


def _frames(m, wave, size, shift, snip_edges):
    if snip_edges:
        count = 1 + (wave.size(0) - size) // shift
    else:
        flipped = m.flip(wave, [0])
        count = (wave.size(0) + shift // 2) // shift
        pad = size // 2 - shift // 2
        wave = m.cat((flipped[-pad:], wave, flipped), dim=0)
    return wave.as_strided((count, size), (shift * wave.stride(0), wave.stride(0)))


def _window(m, kind, size):
    if kind == "povey":
        return m.hann_window(size, periodic=False, dtype=m.float64).pow(0.85)
    if kind == "hamming":
        return m.hamming_window(size, periodic=False, alpha=0.54, beta=0.46, dtype=m.float64)
    a = 2 * math.pi / (size - 1)
    n = m.arange(size, dtype=m.float64)
    return 0.42 - 0.5 * m.cos(a * n) + 0.08 * m.cos(2 * a * n)


def _framed_power(m, wave, kind, snip_edges, dither):
    eps = m.tensor(m.finfo(m.float).eps).to(dtype=wave.dtype)
    frames = _frames(m, wave, 200, 80, snip_edges)
    if dither:
        frames = frames + m.randn(frames.shape, dtype=frames.dtype) * dither
    frames = frames - m.mean(frames, dim=1).unsqueeze(1)
    energy = m.max(m.max(frames.pow(2).sum(1), eps).log(), m.tensor(0.0, dtype=wave.dtype))
    shifted = F_pad(m, frames.unsqueeze(0), (1, 0), mode="replicate").squeeze(0)
    frames = (frames - 0.97 * shifted[:, :-1]) * _window(m, kind, 200).unsqueeze(0)
    frames = F_pad(m, frames.unsqueeze(0), (0, 56), mode="constant", value=0).squeeze(0)
    return m.fft.rfft(frames).abs().pow(2.0), energy, eps


def F_pad(m, *args, **kwargs):
    return m.nn.functional.pad(*args, **kwargs)


def _mel_banks(m, bins, warp):
    mel = lambda f: 1127.0 * (1.0 + f / 700.0).log()  # noqa: E731
    inv = lambda x: 700.0 * ((x / 1127.0).exp() - 1.0)  # noqa: E731
    lo, hi = 1127.0 * math.log(1 + 20 / 700), 1127.0 * math.log(1 + 4000 / 700)
    delta = (hi - lo) / (bins + 1)
    b = m.arange(bins).unsqueeze(1)
    edges = [lo + (b + k) * delta for k in (0.0, 1.0, 2.0)]
    if warp != 1.0:
        low, high = 200.0 * max(1.0, warp), 3400.0 * min(1.0, warp)
        scale = 1.0 / warp
        left, right = (scale * low - 20) / (low - 20), (4000 - scale * high) / (4000 - high)
        for i, edge in enumerate(edges):
            freq = inv(edge)
            res = m.empty_like(freq)
            res[m.ge(freq, high)] = 4000 + right * (freq[m.ge(freq, high)] - 4000)
            res[m.lt(freq, high)] = scale * freq[m.lt(freq, high)]
            res[m.lt(freq, low)] = 20 + left * (freq[m.lt(freq, low)] - 20)
            outside = m.lt(freq, 20) | m.gt(freq, 4000)
            res[outside] = freq[outside]
            edges[i] = mel(res)
    left_mel, center_mel, right_mel = edges
    grid = mel(8000 / 256 * m.arange(128.0)).unsqueeze(0)
    up, down = (grid - left_mel) / (center_mel - left_mel), (right_mel - grid) / (right_mel - center_mel)
    if warp == 1.0:
        return m.max(m.zeros(1), m.min(up, down))
    banks = m.zeros_like(up)
    rising, falling = m.gt(grid, left_mel) & m.le(grid, center_mel), m.gt(grid, center_mel) & m.lt(grid, right_mel)
    banks[rising] = up[rising]
    banks[falling] = down[falling]
    return banks


def kaldi_features(m):
    m.set_default_dtype(m.float64)
    try:
        return _kaldi_features(m)
    finally:
        m.set_default_dtype(m.float32)


def _kaldi_features(m):
    m.manual_seed(0)
    t = m.arange(1600, dtype=m.float64) / 8000
    wave = 0.5 * m.sin(2 * math.pi * 300 * t) + 0.2 * m.sin(2 * math.pi * 1200 * t) + 0.02 * m.randn(1600).double()
    power, energy, eps = _framed_power(m, wave, "hamming", False, 0.0)
    spectrogram = m.max(power, eps).log()
    spectrogram[:, 0] = energy
    out = [spectrogram.sum(), spectrogram[3, :6]]
    for kind, warp in (("povey", 1.0), ("blackman", 1.1)):
        power, energy, eps = _framed_power(m, wave, kind, True, 0.1)
        banks = F_pad(m, _mel_banks(m, 10, warp).to(dtype=m.float64), (0, 1))
        fbank = m.cat((energy.unsqueeze(1), m.max(m.mm(power, banks.T), eps).log()), dim=1)
        out += [fbank.sum(), fbank[0]]

    gain = m.nn.Parameter(m.tensor(0.5, dtype=m.float64))
    dct = _create_dct(m, 10, 10).double()
    dct[:, 0] = math.sqrt(1 / 10.0)
    lifter = 1.0 + 0.5 * 22.0 * m.sin(math.pi * m.arange(6) / 22.0)

    def mfcc(signal):
        power, _, eps = _framed_power(m, signal, "povey", True, 0.0)
        feature = m.max(m.mm(power, F_pad(m, _mel_banks(m, 10, 1.0).double(), (0, 1)).T), eps).log()
        feature = feature.matmul(dct[:, :6])
        feature *= lifter.unsqueeze(0).double()
        return m.cat((feature[:, 1:], feature[:, 0].unsqueeze(1) * math.sqrt(2)), dim=1)

    target = mfcc(wave * 1.5)
    opt = m.optim.Adam([gain], lr=0.05)
    for _ in range(3):
        loss = m.nn.functional.mse_loss(mfcc(wave * gain), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [loss.detach(), gain.grad]
    return out


@pytest.mark.slow
def test_kaldi_features():
    _both(kaldi_features, F64)


def hifigan_steps(m):
    """HiFi-GAN (jik876/hifi-gan), channels divided down: a weight-normed generator (transposed-conv upsampling,
    dilated residual blocks, init_weights writing into the computed weight's .data as the original does) against a
    period discriminator (reflect pad, 1d to 2d view) under spectral_norm and a scale discriminator (grouped
    convs, average pooling) under weight_norm; least-squares, feature-matching and mel L1 losses, AdamW with
    ExponentialLR; then remove_weight_norm leaves the generator's output unchanged."""
    nn, F, utils = m.nn, m.nn.functional, m.nn.utils

    def init_weights(module):
        if module.__class__.__name__.find("Conv") != -1:
            module.weight.data.normal_(0.0, 0.01)

    def conv(k, d, ch):
        return utils.weight_norm(nn.Conv1d(ch, ch, k, 1, dilation=d, padding=int((k * d - d) / 2)))

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv_pre = utils.weight_norm(nn.Conv1d(6, 8, 7, 1, padding=3))
            self.ups = nn.ModuleList(
                [utils.weight_norm(nn.ConvTranspose1d(8 // 2**i, 4 // 2**i, 4, 2, padding=1)) for i in range(2)]
            )
            self.blocks = nn.ModuleList([nn.ModuleList([conv(3, d, 4 // 2**i) for d in (1, 3)]) for i in range(2)])
            self.conv_post = utils.weight_norm(nn.Conv1d(2, 1, 7, 1, padding=3))
            self.ups.apply(init_weights)
            self.conv_post.apply(init_weights)

        def forward(self, x):
            x = self.conv_pre(x)
            for up, block in zip(self.ups, self.blocks):
                x = up(F.leaky_relu(x, 0.1))
                for c in block:
                    x = c(F.leaky_relu(x, 0.1)) + x
            return m.tanh(self.conv_post(F.leaky_relu(x)))

    class DiscriminatorP(nn.Module):
        def __init__(self, period, norm):
            super().__init__()
            self.period = period
            self.convs = nn.ModuleList(
                [
                    norm(nn.Conv2d(1, 4, (5, 1), (3, 1), padding=(2, 0))),
                    norm(nn.Conv2d(4, 4, (5, 1), 1, padding=(2, 0))),
                ]
            )
            self.conv_post = norm(nn.Conv2d(4, 1, (3, 1), 1, padding=(1, 0)))

        def forward(self, x):
            b, c, t = x.shape
            if t % self.period:
                x = F.pad(x, (0, self.period - t % self.period), "reflect")
            x = x.view(b, c, x.shape[-1] // self.period, self.period)
            fmap = []
            for layer in self.convs:
                x = F.leaky_relu(layer(x), 0.1)
                fmap.append(x)
            x = self.conv_post(x)
            return m.flatten(x, 1, -1), fmap + [x]

    class DiscriminatorS(nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = nn.AvgPool1d(4, 2, padding=2)
            self.convs = nn.ModuleList(
                [
                    utils.weight_norm(nn.Conv1d(1, 8, 15, 1, padding=7)),
                    utils.weight_norm(nn.Conv1d(8, 8, 41, 2, groups=4, padding=20)),
                ]
            )
            self.conv_post = utils.weight_norm(nn.Conv1d(8, 1, 3, 1, padding=1))

        def forward(self, x):
            x, fmap = self.pool(x), []
            for layer in self.convs:
                x = F.leaky_relu(layer(x), 0.1)
                fmap.append(x)
            x = self.conv_post(x)
            return m.flatten(x, 1, -1), fmap + [x]

    def mel(y):
        spec = m.stft(
            F.pad(y.unsqueeze(1), (6, 6), mode="reflect").squeeze(1),
            16,
            4,
            16,
            m.hann_window(16),
            center=False,
            return_complex=True,
        )
        bank = m.clamp(
            m.min(
                m.linspace(0, 1, 9) - m.linspace(0, 1, 8)[:6, None], m.linspace(0, 1, 8)[2:, None] - m.linspace(0, 1, 9)
            ),
            min=0,
        )
        return m.log(m.clamp(m.matmul(bank, m.sqrt(spec.real.pow(2) + spec.imag.pow(2) + 1e-9)), min=1e-5))

    m.manual_seed(0)
    m.set_default_dtype(m.float64)
    try:
        gen, discs = Generator(), nn.ModuleList([DiscriminatorP(3, utils.spectral_norm), DiscriminatorS()])
        optim_g, optim_d = (m.optim.AdamW(net.parameters(), 2e-3, betas=[0.8, 0.99]) for net in (gen, discs))
        schedulers = [m.optim.lr_scheduler.ExponentialLR(opt, gamma=0.99) for opt in (optim_g, optim_d)]
        y = m.randn(2, 1, 48) * 0.3
        x = mel(y.squeeze(1))
        out = [x]
        for _ in range(2):
            y_hat = gen(x)
            optim_d.zero_grad()
            loss_d = sum(m.mean((1 - d(y)[0]) ** 2) + m.mean(d(y_hat.detach())[0] ** 2) for d in discs)
            loss_d.backward()
            optim_d.step()
            optim_g.zero_grad()
            loss_g = F.l1_loss(x, mel(y_hat.squeeze(1))) * 45
            for d in discs:
                (_, fmap_r), (score, fmap_g) = d(y), d(y_hat)
                loss_g = (
                    loss_g + m.mean((1 - score) ** 2) + 2 * sum(m.mean(m.abs(r - g)) for r, g in zip(fmap_r, fmap_g))
                )
            loss_g.backward()
            optim_g.step()
            for scheduler in schedulers:
                scheduler.step()
            out += [loss_d.detach(), loss_g.detach(), discs[0].convs[0].weight_u, gen.ups[0].weight_v.grad]
        gen.eval()
        with m.no_grad():
            before = gen(x)
            for module in gen.modules():
                if hasattr(module, "weight_g"):
                    utils.remove_weight_norm(module)
            names = sorted(name for name, _ in gen.conv_pre.named_parameters())
            out += [before, gen(x) - before, names == ["bias", "weight"]]
    finally:
        m.set_default_dtype(m.float32)
    return out


@pytest.mark.slow
def test_hifigan_steps():
    _both(hifigan_steps, F64)
