"""Signal and spiking programs of the kinds public code holds, each written once against torch's API and run with
torch and with batched_grad from the same seed in float64: evidential regression and classification losses
(teddykoker/evidential-learning-pytorch), spiking networks with surrogate-gradient autograd Functions as snnTorch
and SpikingJelly write them (leaky integrate-and-fire over time, reset by subtraction, detached resets,
@torch.jit.script charge functions), a DDSP harmonic-plus-noise synthesizer trained on a multiscale STFT loss
(acids-ircam/ddsp_pytorch), a WaveNet of dilated causal convolutions on mu-law classes with queue-based generation
(vincentherrmann/pytorch-wavenet). The siblings test_fresh_programs_freshS_audio.py and
test_fresh_programs_freshS_nn.py hold the audio front ends and the torch.nn.utils and uncertainty programs."""

import math

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both


def evidential_losses(m):
    """Normal-Inverse-Gamma head (softplus evidence) trained on x**3 + noise with the NIG NLL plus the evidence
    regularizer, and a Dirichlet head trained with the expected-MSE loss plus the KL to the uniform Dirichlet."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)

    def nig_loss(gamma, v, alpha, beta, y, lamb):
        two_blambda = 2 * beta * (1 + v)
        nll = (
            0.5 * (m.pi / v).log()
            - alpha * two_blambda.log()
            + (alpha + 0.5) * (v * (y - gamma) ** 2 + two_blambda).log()
            + alpha.lgamma()
            - (alpha + 0.5).lgamma()
        )
        return nll.mean() + lamb * ((y - gamma).abs() * (2 * v + alpha)).mean()

    def dirichlet_loss(alpha, y, lamb):
        y = F.one_hot(y, alpha.shape[-1])
        total = alpha.sum(-1, keepdims=True)
        p = alpha / total
        mse = ((y - p).pow(2).sum(-1) + (p * (1 - p) / (total + 1)).sum(-1)).mean()
        a = y + (1 - y) * alpha
        ones = m.ones_like(a)
        kl = a.sum(-1).lgamma() - ones.sum(-1).lgamma() - (a.lgamma() - ones.lgamma()).sum(-1)
        kl = kl + ((a - ones) * (a.digamma() - a.sum(-1).digamma().unsqueeze(-1))).sum(-1)
        return mse + lamb * kl.mean()

    class NormalInvGamma(nn.Module):
        def __init__(self, fan_in):
            super().__init__()
            self.dense = nn.Linear(fan_in, 4)

        def forward(self, x):
            mu, logv, logalpha, logbeta = m.split(self.dense(x), 1, dim=-1)
            return mu, F.softplus(logv), F.softplus(logalpha) + 1, F.softplus(logbeta)

    x = m.linspace(-4, 4, 60, dtype=m.float64).unsqueeze(-1)
    y = x**3 + m.normal(m.zeros_like(x), 3 * m.ones_like(x))
    net = nn.Sequential(nn.Linear(1, 8), nn.ReLU(), NormalInvGamma(8)).double()
    opt = m.optim.Adam(net.parameters(), lr=5e-3)
    out = []
    for xb, yb in m.utils.data.DataLoader(m.utils.data.TensorDataset(x, y), batch_size=20, shuffle=True):
        loss = nig_loss(*net(xb), yb, lamb=1e-2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.detach())
    with m.no_grad():
        mu, v, alpha, beta = (t.squeeze() for t in net(x[::10]))
    out += [mu, m.sqrt(beta / (v * (alpha - 1)))]
    images, labels = m.rand(16, 6, dtype=m.float64), m.randint(0, 3, (16,))
    clf = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double()
    opt = m.optim.SGD(clf.parameters(), lr=0.5)
    for epoch in range(3):
        alpha = F.softplus(clf(images)) + 1
        loss = dirichlet_loss(alpha, labels, lamb=min(1, epoch / 2))
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [loss.detach(), (3 / alpha.sum(-1)).detach()]
    return out


@pytest.mark.slow
def test_evidential_losses():
    _both(evidential_losses, F64)


def _surrogates(m):
    class FastSigmoid(m.autograd.Function):
        @staticmethod
        def forward(ctx, input_, slope):
            ctx.save_for_backward(input_)
            ctx.slope = slope
            return (input_ > 0).double()

        @staticmethod
        def backward(ctx, grad_output):
            (input_,) = ctx.saved_tensors
            return grad_output.clone() / (ctx.slope * m.abs(input_) + 1.0) ** 2, None

    class ATan(m.autograd.Function):
        @staticmethod
        def forward(ctx, input_, alpha):
            ctx.save_for_backward(input_)
            ctx.alpha = alpha
            return (input_ > 0).double()

        @staticmethod
        def backward(ctx, grad_output):
            (input_,) = ctx.saved_tensors
            return ctx.alpha / 2 / (1 + (m.pi / 2 * ctx.alpha * input_).pow_(2)) * grad_output.clone(), None

    return FastSigmoid, ATan


def snntorch_leaky(m):
    """snnTorch's Leaky neuron written out: the reset term is the detached spike of the previous membrane, the
    membrane decays by a clamped (here learnable, per-neuron) beta and loses the threshold on reset; a two-layer
    network unrolled over time, cross-entropy summed over the membrane trace, and the init_hidden form trained by
    truncated BPTT with detach_ on the stored membranes."""
    nn, F = m.nn, m.nn.functional
    FastSigmoid, ATan = _surrogates(m)

    class Leaky(nn.Module):
        def __init__(self, beta, spike, learn_beta=False, init_hidden=False):
            super().__init__()
            beta = m.as_tensor(beta, dtype=m.float64)
            if learn_beta:
                self.beta = nn.Parameter(beta)
            else:
                self.register_buffer("beta", beta)
            self.spike, self.init_hidden, self.mem = spike, init_hidden, m.zeros(0)

        def forward(self, input_, mem=None):
            mem = self.mem if mem is None else mem
            if mem.shape != input_.shape:
                mem = m.zeros_like(input_)
            reset = self.spike(mem - 1.0).clone().detach()
            mem = self.beta.clamp(0, 1) * mem + input_ - reset
            spk = self.spike(mem - 1.0)
            if self.init_hidden:
                self.mem = mem
            return spk, mem

    m.manual_seed(0)
    fc1, fc2 = nn.Linear(10, 12).double(), nn.Linear(12, 4).double()
    lif1 = Leaky(0.95, lambda x: FastSigmoid.apply(x, 25))
    lif2 = Leaky(m.rand(4, dtype=m.float64), lambda x: ATan.apply(x, 2.0), learn_beta=True)
    params = [*fc1.parameters(), *fc2.parameters(), *lif2.parameters()]
    opt = m.optim.Adam(params, lr=5e-2)
    data, targets = m.rand(5, 6, 10, dtype=m.float64) * 3, m.randint(0, 4, (6,))
    out = []
    for _ in range(3):
        mem1, mem2 = m.zeros(0), m.zeros(0)
        spikes, mems = [], []
        for step in range(5):
            spk1, mem1 = lif1(fc1(data[step]), mem1)
            spk2, mem2 = lif2(fc2(spk1), mem2)
            spikes.append(spk2)
            mems.append(mem2)
        loss = m.zeros(1, dtype=m.float64)
        for mem in mems:
            loss += F.cross_entropy(mem, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [loss.detach(), m.stack(spikes).sum(0).max(1)[1], fc1.weight.grad.abs().sum()]
    out.append(lif2.beta.detach())

    net = nn.Sequential(nn.Linear(6, 8), Leaky(0.8, lambda x: FastSigmoid.apply(x, 10), init_hidden=True)).double()
    opt = m.optim.SGD(net.parameters(), lr=0.5)
    x, target = m.rand(6, 3, 6, dtype=m.float64) * 2, m.rand(3, 8, dtype=m.float64)
    for chunk in range(2):
        trace = [net(x[3 * chunk + t])[1] for t in range(3)]
        loss = F.mse_loss(m.stack(trace).mean(0), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        net[1].mem.detach_()
        out.append(loss.detach())
    return out


def test_snntorch_leaky():
    _both(snntorch_leaky, F64)


def spikingjelly_lif(m):
    """SpikingJelly's multi-step LIF node: membrane state kept in a memory dict behind __getattr__/__setattr__,
    charge and reset as @torch.jit.script static methods, a sigmoid surrogate, soft reset with detach_reset, the
    sequence folded into the batch for the stateless layers, firing rates trained by MSE and reset_net between
    samples."""
    nn, F = m.nn, m.nn.functional

    class SigmoidSurrogate(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            if x.requires_grad:
                ctx.save_for_backward(x)
                ctx.alpha = alpha
            return (x >= 0).to(x)

        @staticmethod
        def backward(ctx, grad_output):
            sg = (ctx.saved_tensors[0] * ctx.alpha).sigmoid_()
            return grad_output * (1.0 - sg) * sg * ctx.alpha, None

    class LIFNode(nn.Module):
        def __init__(self, tau, v_threshold, v_reset, detach_reset):
            super().__init__()
            self._memories = {"v": 0.0}
            self.tau, self.v_threshold, self.v_reset, self.detach_reset = tau, v_threshold, v_reset, detach_reset

        def __getattr__(self, name):
            if name in self.__dict__.get("_memories", {}):
                return self.__dict__["_memories"][name]
            return super().__getattr__(name)

        def __setattr__(self, name, value):
            if name in self.__dict__.get("_memories", {}):
                self._memories[name] = value
            else:
                super().__setattr__(name, value)

        @staticmethod
        @m.jit.script
        def charge(x, v, tau: float):  # unannotated arguments are Tensors to TorchScript
            return v + (x - v) / tau

        @staticmethod
        @m.jit.script
        def soft_reset(v, spike, v_threshold: float):
            return v - spike * v_threshold

        def forward(self, x_seq):
            spikes = []
            for x in x_seq:
                if isinstance(self.v, float):
                    self.v = m.full_like(x.data, self.v)
                self.v = self.charge(x, self.v, self.tau)
                spike = SigmoidSurrogate.apply(self.v - self.v_threshold, 4.0)
                spike_d = spike.detach() if self.detach_reset else spike
                if self.v_reset is None:
                    self.v = self.soft_reset(self.v, spike_d, self.v_threshold)
                else:
                    self.v = (1.0 - spike_d) * self.v + spike_d * self.v_reset
                spikes.append(spike)
            return m.stack(spikes)

        def reset(self):
            self._memories["v"] = 0.0

    class SeqToANN(nn.Module):
        def __init__(self, *layers):
            super().__init__()
            self.module = nn.Sequential(*layers)

        def forward(self, x_seq):
            y = self.module(x_seq.flatten(0, 1))
            return y.view([x_seq.shape[0], x_seq.shape[1], *y.shape[1:]])

    m.manual_seed(2)
    net = nn.Sequential(
        SeqToANN(nn.Conv2d(1, 3, 3, padding=1, bias=False), nn.BatchNorm2d(3)),
        LIFNode(2.0, 1.0, None, True),
        SeqToANN(nn.MaxPool2d(2), nn.Flatten(), nn.Linear(27, 4)),
        LIFNode(2.0, 0.1, 0.0, False),
    ).double()
    opt = m.optim.Adam(net.parameters(), lr=1e-2)
    img, label = m.rand(5, 1, 6, 6, dtype=m.float64) * 6, m.randint(0, 4, (5,))
    out = []
    for _ in range(3):
        rate = net(img.unsqueeze(0).repeat(4, 1, 1, 1, 1)).mean(0)
        loss = F.mse_loss(rate, F.one_hot(label, 4).double())
        opt.zero_grad()
        loss.backward()
        opt.step()
        for module in net.modules():
            if hasattr(module, "reset"):
                module.reset()
        out += [loss.detach(), rate.detach()]
    out.append(net[0].module[0].weight.grad)
    return out


def test_spikingjelly_lif():
    _both(spikingjelly_lif, F64)


def ddsp_synth(m):
    """DDSP: a GRU over pitch/loudness MLP features predicts harmonic amplitudes (nyquist-masked, normalized) and a
    noise filter; harmonics come from a cumulative phase (cumsum, sin), noise is shaped by an impulse response made
    with irfft of view_as_complex, roll and a hann window and applied by FFT convolution, a learnable reverb (its
    first tap written in place) follows; the loss is multiscale STFT magnitude distance, lin and log."""
    nn, F = m.nn, m.nn.functional

    def mlp(in_size, hidden):
        layers = []
        for i in range(2):
            layers += [nn.Linear(in_size if i == 0 else hidden, hidden), nn.LayerNorm(hidden), nn.LeakyReLU()]
        return nn.Sequential(*layers)

    def scale_function(x):
        return 2 * m.sigmoid(x) ** math.log(10) + 1e-7

    def upsample(signal, factor):
        return F.interpolate(signal.permute(0, 2, 1), size=signal.shape[1] * factor).permute(0, 2, 1)

    def fft_convolve(signal, kernel):
        signal = F.pad(signal, (0, signal.shape[-1]))
        kernel = F.pad(kernel, (kernel.shape[-1], 0))
        output = m.fft.irfft(m.fft.rfft(signal) * m.fft.rfft(kernel))
        return output[..., output.shape[-1] // 2 :]

    def impulse_response(amp, target_size):
        amp = m.fft.irfft(m.view_as_complex(m.stack([amp, m.zeros_like(amp)], -1)))
        size = amp.shape[-1]
        amp = m.roll(amp, size // 2, -1) * m.hann_window(size, dtype=amp.dtype)
        return m.roll(F.pad(amp, (0, int(target_size) - int(size))), -size // 2, -1)

    class DDSP(nn.Module):
        def __init__(self, hidden, n_harmonic, n_bands, sampling_rate, block_size):
            super().__init__()
            self.register_buffer("sampling_rate", m.tensor(sampling_rate))
            self.register_buffer("block_size", m.tensor(block_size))
            self.in_mlps = nn.ModuleList([mlp(1, hidden)] * 2)
            self.gru = nn.GRU(2 * hidden, hidden, batch_first=True)
            self.out_mlp = mlp(hidden + 2, hidden)
            self.proj = nn.ModuleList([nn.Linear(hidden, n_harmonic + 1), nn.Linear(hidden, n_bands)])
            self.noise = nn.Parameter((m.rand(sampling_rate) * 2 - 1).unsqueeze(-1))
            self.wet = nn.Parameter(m.tensor(0.0))
            self.register_buffer("t", (m.arange(sampling_rate) / sampling_rate).reshape(1, -1, 1))

        def forward(self, pitch, loudness):
            hidden = m.cat([self.in_mlps[0](pitch), self.in_mlps[1](loudness)], -1)
            hidden = self.out_mlp(m.cat([self.gru(hidden)[0], pitch, loudness], -1))
            param = scale_function(self.proj[0](hidden))
            total_amp, amplitudes = param[..., :1], param[..., 1:]
            harmonics = pitch * m.arange(1, amplitudes.shape[-1] + 1).to(pitch)
            amplitudes = amplitudes * ((harmonics < self.sampling_rate / 2).float() + 1e-4)
            amplitudes /= amplitudes.sum(-1, keepdim=True)
            amplitudes *= total_amp
            amplitudes, pitch = upsample(amplitudes, self.block_size), upsample(pitch, self.block_size)
            omega = m.cumsum(2 * math.pi * pitch / self.sampling_rate, 1)
            harmonic = (m.sin(omega * m.arange(1, amplitudes.shape[-1] + 1).to(omega)) * amplitudes).sum(-1, True)
            impulse = impulse_response(scale_function(self.proj[1](hidden) - 5), self.block_size)
            noise = m.rand(impulse.shape[0], impulse.shape[1], self.block_size).to(impulse) * 2 - 1
            noise = fft_convolve(noise, impulse).contiguous().reshape(impulse.shape[0], -1, 1)
            signal = harmonic + noise
            reverb = self.noise * m.exp(-F.softplus(m.tensor(-5.0)) * self.t * 500) * m.sigmoid(self.wet)
            reverb[:, 0] = 1
            reverb = F.pad(reverb, (0, 0, 0, signal.shape[1] - reverb.shape[1]))
            return fft_convolve(signal.squeeze(-1), reverb.squeeze(-1))

    def multiscale(signal):
        return [
            m.stft(signal, s, s // 4, s, m.hann_window(s).to(signal), True, normalized=True, return_complex=True).abs()
            for s in (32, 16)
        ]

    m.manual_seed(0)
    m.set_default_dtype(m.float64)
    try:
        model = DDSP(8, 6, 5, 256, 8)
        opt = m.optim.Adam(model.parameters(), lr=1e-3)
        pitch, loudness = 40 + 60 * m.rand(2, 8, 1), m.randn(2, 8, 1)
        target = m.randn(2, 64) * 0.1
        out = []
        for _ in range(2):
            y = model(pitch, (loudness - loudness.mean()) / loudness.std())
            loss = 0
            for s_x, s_y in zip(multiscale(target), multiscale(y)):
                loss = loss + (s_x - s_y).abs().mean() + (m.log(s_x + 1e-7) - m.log(s_y + 1e-7)).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            out += [loss.detach(), y.detach()[:, ::8]]
        out += [model.wet.grad, model.noise.grad.abs().sum()]
    finally:
        m.set_default_dtype(m.float32)
    return out


@pytest.mark.slow
def test_ddsp_synth():
    _both(ddsp_synth, F64)


def wavenet_mu_law(m):
    """WaveNet on mu-law classes: dilate() folds time into the batch by permute/view, gated tanh*sigmoid units
    with residual and skip 1x1 convolutions, one-hot inputs by scatter_, cross-entropy on the last outputs with
    clip_grad_norm_; then fast generation with per-layer circular queues (setitem of a column, strided dequeues
    that wrap around with a cat)."""
    nn, F = m.nn, m.nn.functional
    classes, layers, channels, out_len = 12, 3, 5, 6

    def dilate(x, dilation, init_dilation):
        n, c, length = x.size()
        factor = dilation / init_dilation
        if factor == 1:
            return x
        new_l = int(np.ceil(length / factor) * factor)
        if new_l != length:
            x = F.pad(x, (new_l - length, 0))
        length, n = math.ceil(new_l * init_dilation / dilation), math.ceil(n * dilation / init_dilation)
        return x.permute(1, 2, 0).contiguous().view(c, length, n).permute(2, 0, 1).contiguous()

    class Queue:
        def __init__(self, size):
            self.data, self.pos, self.size = m.zeros(channels, size, dtype=m.float64), 0, size

        def step(self, column, dilation):
            self.data[:, self.pos] = column
            start = self.pos - dilation
            if start < 0:
                t = m.cat(
                    (self.data[:, start::dilation], self.data[:, self.pos % dilation : self.pos + 1 : dilation]), 1
                )
            else:
                t = self.data[:, start : self.pos + 1 : dilation]
            self.pos = (self.pos + 1) % self.size
            return t.unsqueeze(0)

    class WaveNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.dilations = [(2**i, 2 ** max(i - 1, 0)) for i in range(layers)]
            self.start = nn.Conv1d(classes, channels, 1, bias=False)
            self.filters, self.gates, self.residuals, self.skips = (
                nn.ModuleList([nn.Conv1d(channels, channels, k, bias=False) for _ in range(layers)])
                for k in (2, 2, 1, 1)
            )
            self.end = nn.Sequential(nn.ReLU(), nn.Conv1d(channels, 8, 1), nn.ReLU(), nn.Conv1d(8, classes, 1))
            self.receptive_field = 2**layers

        def wavenet(self, x, dilate_fn):
            x, skip = self.start(x), 0
            for i, (dilation, init_dilation) in enumerate(self.dilations):
                residual = dilate_fn(x, dilation, init_dilation, i)
                x = m.tanh(self.filters[i](residual)) * m.sigmoid(self.gates[i](residual))
                s = self.skips[i](dilate(x, 1, dilation) if x.size(2) != 1 else x)
                skip = s + (skip[:, :, -s.size(2) :] if i else 0)
                x = self.residuals[i](x) + residual[:, :, 1:]
            return self.end(skip)

        def forward(self, x):
            x = self.wavenet(x, lambda x, d, i_d, _: dilate(x, d, i_d))[:, :, -out_len:]
            return x.transpose(1, 2).contiguous().view(-1, classes)

    m.manual_seed(0)
    t = np.linspace(0, 1, 200)
    audio = 0.6 * np.sin(2 * np.pi * 5 * t) + 0.05 * np.random.RandomState(0).randn(200)
    mu = np.sign(audio) * np.log1p(classes * np.abs(audio)) / np.log1p(classes)
    q = np.digitize(mu, np.linspace(-1, 1, classes)) - 1
    model = WaveNet().double()
    opt = m.optim.Adam(model.parameters(), lr=1e-2)
    length = model.receptive_field + out_len - 1
    out = []
    for step in range(2):
        xs, ts = [], []
        for s in (3 + 29 * step, 70 + 31 * step):
            sample = m.from_numpy(q[s : s + length + 1]).long()
            xs.append(m.zeros(classes, length, dtype=m.float64).scatter_(0, sample[:length].unsqueeze(0), 1.0))
            ts.append(sample[-out_len:])
        loss = F.cross_entropy(model(m.stack(xs)), m.cat(ts))
        opt.zero_grad()
        loss.backward()
        m.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        out.append(loss.detach())
    queues = [Queue(d + 1) for d, _ in model.dilations]
    model.eval()
    one_hot = m.zeros(1, classes, 1, dtype=m.float64)
    generated = []
    with m.no_grad():
        for i in range(12):
            one_hot.zero_()
            one_hot[0, int(q[i]) if i < 6 else generated[-1], 0] = 1.0
            logits = model.wavenet(one_hot, lambda x, d, _, i: queues[i].step(x.data[0, :, 0], d)).squeeze()
            out.append(logits)
            generated.append(int(m.max(logits, 0)[1]))
    return out + [generated]


@pytest.mark.slow
def test_wavenet_mu_law():
    _both(wavenet_mu_law, F64)
