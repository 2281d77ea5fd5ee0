"""snnTorch's rate encoding and spike losses as its package writes them (jeshraghian/snntorch: spikegen.rate with
Bernoulli draws, ce_rate/ce_count (population-coded)/mse_count/mse_membrane losses, the first-spike-time autograd
Function kept as a @staticmethod-wrapped class attribute with a tolerance Function, mse/ce temporal losses), each
training a two-layer leaky network for three steps; run with torch and with batched_grad in float64 (spikes as
doubles) and compared number for number."""

import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_freshS import _surrogates


def _losses(m):
    nn = m.nn

    def one_hot(targets, classes, on, off):
        hot = m.zeros([len(targets), classes], dtype=m.float64).scatter(1, targets.unsqueeze(-1), 1)
        return hot * on + (1 - hot) * off

    def ce_rate(spk, targets):
        log_p = nn.LogSoftmax(dim=-1)(spk)
        loss = m.zeros((1), dtype=m.float64)
        for step in range(spk.size(0)):
            loss += nn.NLLLoss()(log_p[step], targets)
        return loss / spk.size(0)

    def ce_count_population(spk, targets, classes=3):
        outputs = spk.size(-1)
        code = m.zeros(tuple([spk.size(1)] + [classes]), dtype=m.float64)
        for idx in range(classes):
            code[:, idx] = spk[:, :, int(outputs * idx / classes) : int(outputs * (idx + 1) / classes)].sum(-1).sum(0)
        return nn.NLLLoss()(nn.LogSoftmax(dim=-1)(code), targets)

    def mse_count(spk, targets):
        steps = spk.size(0)
        wanted = one_hot(targets, spk.size(-1), int(steps * 0.8), int(steps * 0.2))
        return nn.MSELoss()(m.sum(spk, 0), wanted) / steps

    def mse_membrane(mem, targets):
        loss = m.zeros((1), dtype=m.float64)
        for step in range(mem.size(0)):
            loss += nn.MSELoss()(mem[step], one_hot(targets, mem.size(-1), 1.2, -0.2))
        return loss / mem.size(0)

    class SpikeTime(nn.Module):
        def __init__(self, on_target=0, off_target=-1, tolerance=0):
            super().__init__()
            self.on_target, self.off_target, self.tolerance = on_target, off_target, tolerance
            self.first_spike_fn, self.tolerance_fn = self.FirstSpike.apply, self.Tolerance.apply

        def forward(self, spk, targets):
            targets = one_hot(targets, spk.size(-1), self.on_target, self.off_target)
            targets[targets < 0] = spk.size(0) + targets[targets < 0]
            times = self.first_spike_fn(spk)
            return (self.tolerance_fn(times, targets, self.tolerance) if self.tolerance else times), targets

        @staticmethod
        class FirstSpike(m.autograd.Function):
            @staticmethod
            def forward(ctx, spk):
                times = (spk.transpose(0, -1) * (m.arange(0, spk.size(0)).detach() + 1)).transpose(0, -1)
                first = m.zeros_like(times[0])
                for step in range(times.size(0)):
                    first += times[step] * ~first.bool()
                first += ~first.bool() * times.size(0)
                first -= 1
                ctx.save_for_backward(first, spk)
                return first

            @staticmethod
            def backward(ctx, grad_output):
                first, spk = ctx.saved_tensors
                grad = m.zeros_like(spk)
                for i in range(first.size(0)):
                    for j in range(first.size(1)):
                        grad[first[i, j].long(), i, j] = 1.0
                return -grad_output * grad

        @staticmethod
        class Tolerance(m.autograd.Function):
            @staticmethod
            def forward(ctx, times, target, tolerance):
                close = m.abs(times - target) < tolerance
                out = times.clone()
                out[close] = (m.ones_like(times) * target)[close]
                return out

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output, None, None

    def mse_temporal(spk, targets):
        times, wanted = SpikeTime(on_target=2, off_target=-1, tolerance=2)(spk, targets)
        return nn.MSELoss()(times / spk.size(0), wanted / spk.size(0))

    def ce_temporal(spk, targets):
        times, _ = SpikeTime()(spk, targets)
        return nn.CrossEntropyLoss()(-times, targets)

    return {
        "ce_rate": (ce_rate, 3, 0),
        "ce_count_population": (ce_count_population, 6, 0),
        "mse_count": (mse_count, 3, 0),
        "mse_membrane": (mse_membrane, 3, 1),
        "mse_temporal": (mse_temporal, 3, 0),
        "ce_temporal": (ce_temporal, 3, 0),
    }


def snntorch_losses(m, loss_name):
    nn = m.nn

    FastSigmoid, _ = _surrogates(m)

    def leaky(mem, current):
        reset = FastSigmoid.apply(mem - 1.0, 25).detach()
        mem = 0.9 * mem + current - reset
        return FastSigmoid.apply(mem - 1.0, 25), mem

    m.manual_seed(0)
    images, targets = m.rand(6, 10, dtype=m.float64), m.randint(0, 3, (6,))
    steps = images.repeat(tuple([8] + m.ones(len(images.size()), dtype=int).tolist())) * 0.8
    spikes = m.bernoulli(m.clamp(steps, min=0, max=1))
    spikes[0:1] = 0
    loss_fn, outputs, use_membrane = _losses(m)[loss_name]
    m.manual_seed(1)
    fc1, fc2 = nn.Linear(10, 12).double(), nn.Linear(12, outputs).double()
    opt = m.optim.Adam([*fc1.parameters(), *fc2.parameters()], lr=2e-2)
    out = [spikes.sum()]
    for _ in range(3):
        mem1, mem2 = m.zeros(6, 12, dtype=m.float64), m.zeros(6, outputs, dtype=m.float64)
        spk_rec, mem_rec = [], []
        for step in range(spikes.shape[0]):
            spk1, mem1 = leaky(mem1, fc1(spikes[step] * 2.0))
            spk2, mem2 = leaky(mem2, fc2(spk1))
            spk_rec.append(spk2)
            mem_rec.append(mem2)
        spk, mem = m.stack(spk_rec), m.stack(mem_rec)
        loss = loss_fn(mem if use_membrane else spk, targets.clone())
        opt.zero_grad()
        loss.backward()
        opt.step()
        accuracy = m.mean((targets == spk[:, :, :3].sum(dim=0).max(1)[1]).double()).item()
        out += [loss.detach(), accuracy, fc1.weight.grad]
    return out


@pytest.mark.parametrize(
    "loss_name",
    [
        pytest.param(name, marks=pytest.mark.slow) if name != "mse_membrane" else name
        for name in ("ce_rate", "ce_count_population", "mse_count", "mse_membrane", "mse_temporal", "ce_temporal")
    ],
)
def test_snntorch_losses(loss_name):
    _both(snntorch_losses, F64, loss_name=loss_name)
