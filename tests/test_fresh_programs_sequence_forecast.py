"""Recurrent sampling and forecasting programs as public code writes them, run with torch and with batched_grad from
the same seed and compared: RWKV-4's RNN form from BlinkDL/ChatRWKV's RWKV_in_150_lines.py (a torch.jit.ScriptModule
updating its state rows in place, a top-p sampler writing into Tensor.numpy()), ServiceNow/N-BEATS (generic and
interpretable stacks with polynomial and Fourier bases, divide_no_nan by masked assignment, its sMAPE/MAPE/MASE
losses and trainer), zhykoties/TimeSeries' DeepAR (an LSTM whose forget-gate biases are set through _all_weights,
missing values replaced by the last mu, Normal log-likelihood, a WeightedSampler by torch.multinomial, ancestral
sampling with median and std) and the distribution heads of huggingface/transformers' time_series_utils.py (StudentT,
Normal and NegativeBinomial outputs with squareplus domain maps, AffineTransformed scaling, Independent)."""

import types

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default


def rwkv_rnn_sampler(m, tmp_path):
    """RWKV-4 in RNN form as RWKV_in_150_lines.py writes it: weights saved as half, loaded and regrouped into
    SimpleNamespaces, a torch.jit.ScriptModule whose script_methods update the state rows in place (the max trick
    on exp), and top-p sampling that zeroes Tensor.numpy()'s probabilities in place before np.random.choice."""
    F = m.nn.functional
    m.manual_seed(1)
    n_layer, C, V = 2, 8, 12
    w = {
        "emb.weight": m.randn(V, C),
        "head.weight": m.randn(V, C),
        "ln_out.weight": m.ones(C),
        "ln_out.bias": m.zeros(C),
    }
    w.update({"blocks.0.ln0.weight": 1 + 0.1 * m.randn(C), "blocks.0.ln0.bias": 0.1 * m.randn(C)})
    for i in range(n_layer):
        p = f"blocks.{i}."
        for ln in ("ln1", "ln2"):
            w[p + ln + ".weight"], w[p + ln + ".bias"] = 1 + 0.1 * m.randn(C), 0.1 * m.randn(C)
        for name in ("att.time_mix_k", "att.time_mix_v", "att.time_mix_r", "ffn.time_mix_k", "ffn.time_mix_r"):
            w[p + name] = m.rand(1, 1, C)
        w[p + "att.time_decay"], w[p + "att.time_first"] = m.randn(C), m.randn(C)
        for name in ("att.key", "att.value", "att.receptance", "att.output", "ffn.receptance"):
            w[p + name + ".weight"] = 0.3 * m.randn(C, C)
        w[p + "ffn.key.weight"], w[p + "ffn.value.weight"] = 0.3 * m.randn(4 * C, C), 0.3 * m.randn(C, 4 * C)
    path = str(tmp_path / f"rwkv_{m.__name__}.pth")
    m.save({k: v.half() if "weight" in k and "ln" not in k else v for k, v in w.items()}, path)

    class RNN(m.jit.ScriptModule):
        def __init__(self):
            super().__init__()
            self.eval()
            w = m.load(path, map_location="cpu")
            for k in w.keys():
                w[k] = w[k].squeeze() if ".time_" in k else w[k]
                w[k] = -m.exp(w[k].float()) if ".time_decay" in k else w[k].float()
            self.w = types.SimpleNamespace(blocks={})
            for k, value in w.items():
                *parts, last = k.split(".")
                here = self.w
                for part in parts:
                    if part.isdigit():
                        here = here.setdefault(int(part), types.SimpleNamespace())
                    else:
                        if not hasattr(here, part):
                            setattr(here, part, types.SimpleNamespace())
                        here = getattr(here, part)
                setattr(here, last, value)

        @m.jit.script_method
        def time_mixing(self, x, state, i: int, mix_k, mix_v, mix_r, first, decay, kw, vw, rw, ow):
            xk = x * mix_k + state[5 * i + 1] * (1 - mix_k)
            xv = x * mix_v + state[5 * i + 1] * (1 - mix_v)
            xr = x * mix_r + state[5 * i + 1] * (1 - mix_r)
            state[5 * i + 1] = x
            r, k, v = m.sigmoid(rw @ xr), kw @ xk, vw @ xv
            aa, bb, pp = state[5 * i + 2], state[5 * i + 3], state[5 * i + 4]
            ww = first + k
            qq = m.maximum(pp, ww)
            e1, e2 = m.exp(pp - qq), m.exp(ww - qq)
            wkv = (e1 * aa + e2 * v) / (e1 * bb + e2)
            ww = pp + decay
            qq = m.maximum(ww, k)
            e1, e2 = m.exp(ww - qq), m.exp(k - qq)
            state[5 * i + 2], state[5 * i + 3], state[5 * i + 4] = e1 * aa + e2 * v, e1 * bb + e2, qq
            return ow @ (r * wkv)

        @m.jit.script_method
        def channel_mixing(self, x, state, i: int, mix_k, mix_r, kw, vw, rw):
            xk = x * mix_k + state[5 * i] * (1 - mix_k)
            xr = x * mix_r + state[5 * i] * (1 - mix_r)
            state[5 * i] = x
            return m.sigmoid(rw @ xr) * (vw @ m.square(m.relu(kw @ xk)))

        def forward(self, token, state):
            with m.no_grad():
                if state is None:
                    state = m.zeros(n_layer * 5, C)
                    for i in range(n_layer):
                        state[5 * i + 4] = -1e30
                ln = lambda x, p: F.layer_norm(x, (C,), weight=p.weight, bias=p.bias)  # noqa: E731
                x = ln(self.w.emb.weight[token], self.w.blocks[0].ln0)
                for i in range(n_layer):
                    b = self.w.blocks[i]
                    a, f = b.att, b.ffn
                    x = x + self.time_mixing(
                        ln(x, b.ln1), state, i, a.time_mix_k, a.time_mix_v, a.time_mix_r, a.time_first,
                        a.time_decay, a.key.weight, a.value.weight, a.receptance.weight, a.output.weight,
                    )  # fmt: skip
                    x = x + self.channel_mixing(
                        ln(x, b.ln2), state, i, f.time_mix_k, f.time_mix_r, f.key.weight, f.value.weight,
                        f.receptance.weight,
                    )  # fmt: skip
                return (self.w.head.weight @ ln(x, self.w.ln_out)).float(), state

    def sample(out, rng, top_p=0.85):
        probs = F.softmax(out, dim=-1).numpy()
        sorted_probs = np.sort(probs)[::-1]
        probs[probs < float(sorted_probs[np.argmax(np.cumsum(sorted_probs) > top_p)])] = 0
        return rng.choice(a=len(probs), p=probs / np.sum(probs))

    model, state, rng = RNN(), None, np.random.default_rng(0)
    for token in [3, 1, 4, 1, 5]:
        out, state = model(token, state)
    tokens = []
    for _ in range(6):
        tokens.append(int(sample(out, rng)))
        out, state = model(tokens[-1], state)
    return [tokens, out, state]


def nbeats(m):
    """Generic and interpretable N-BEATS trained by the repository's trainer: residuals flipped in time, each block's
    backcast taken off and forecast added, trend and seasonality bases as float64 einsum templates, losses through
    divide_no_nan (NaN and inf zeroed by masked assignment), clipping, and the halving learning rate."""
    nn = m.nn
    with float64_default(m):

        def divide_no_nan(a, b):
            result = a / b
            result[result != result] = 0.0
            result[result == np.inf] = 0.0
            return result

        losses = {
            "SMAPE": lambda x, f, y, mask: (
                200 * m.mean(divide_no_nan(m.abs(f - y), m.abs(f.data) + m.abs(y.data)) * mask)
            ),
            "MAPE": lambda x, f, y, mask: m.mean(m.abs((f - y) * divide_no_nan(mask, y))),
            "MASE": lambda x, f, y, mask: m.mean(
                m.abs(y - f) * divide_no_nan(mask, m.mean(m.abs(x[:, 2:] - x[:, :-2]), dim=1)[:, None])
            ),
        }

        class Block(nn.Module):
            def __init__(self, n_in, theta, basis):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(n_in, 12), nn.Linear(12, 12)])
                self.basis_parameters, self.basis = nn.Linear(12, theta), basis

            def forward(self, x):
                for layer in self.layers:
                    x = m.relu(layer(x))
                return self.basis(self.basis_parameters(x))

        class Generic(nn.Module):
            def forward(self, theta):
                return theta[:, :10], theta[:, -5:]

        class Trend(nn.Module):
            def __init__(self, degree=2):
                super().__init__()
                self.p = degree + 1
                grid = lambda n: m.tensor(np.stack([(np.arange(n) / n) ** i for i in range(self.p)]))  # noqa: E731
                self.back, self.fore = (
                    nn.Parameter(grid(10), requires_grad=False),
                    nn.Parameter(grid(5), requires_grad=False),
                )

            def forward(self, theta):
                return m.einsum("bp,pt->bt", theta[:, self.p :], self.back), m.einsum(
                    "bp,pt->bt", theta[:, : self.p], self.fore
                )

        class Seasonality(nn.Module):
            def __init__(self):
                super().__init__()
                freq = np.append(np.zeros(1), np.arange(1, 1 / 2 * 5) / 1)[None, :]
                back, fore = (
                    -2 * np.pi * (np.arange(10)[:, None] / 5) * freq,
                    2 * np.pi * (np.arange(5)[:, None] / 5) * freq,
                )
                for name, grid in (("back", back), ("fore", fore)):
                    for f in ("cos", "sin"):
                        setattr(
                            self, f"{name}_{f}", nn.Parameter(m.tensor(getattr(np, f)(grid).T), requires_grad=False)
                        )

            def forward(self, theta):
                q = theta.shape[1] // 4
                part = lambda k, t: m.einsum("bp,pt->bt", theta[:, k * q : (k + 1) * q], t)  # noqa: E731
                return part(2, self.back_cos) + part(3, self.back_sin), part(0, self.fore_cos) + part(1, self.fore_sin)

        def forward(blocks, x, mask):
            residuals, mask, forecast = x.flip(dims=(1,)), mask.flip(dims=(1,)), x[:, -1:]
            for block in blocks:
                backcast, block_forecast = block(residuals)
                residuals, forecast = (residuals - backcast) * mask, forecast + block_forecast
            return forecast

        rng, out = np.random.default_rng(0), []
        trend, seasonal = Block(10, 6, Trend()), Block(10, 4 * 3, Seasonality())
        models = {
            "generic": nn.ModuleList([Block(10, 15, Generic()) for _ in range(2)]),
            "interpretable": nn.ModuleList([trend, trend, seasonal, seasonal]),
        }
        for loss_fn in losses.values():
            for blocks in models.values():
                opt = m.optim.Adam(blocks.parameters(), lr=1e-3)
                for i in range(1, 4):
                    series = rng.uniform(5, 10, (4, 1)) + np.cumsum(rng.normal(0, 1, (4, 15)), axis=1)
                    series[:, 0] = 0.0
                    x, y = m.tensor(series[:, :10]), m.tensor(series[:, 10:])
                    mask = m.tensor((rng.uniform(size=(4, 10)) > 0.1).astype(np.float64))
                    loss = loss_fn(x, forward(blocks, x, mask), y, m.ones_like(y))
                    if np.isnan(float(loss)):
                        break
                    opt.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(blocks.parameters(), 1.0)
                    opt.step()
                    for group in opt.param_groups:
                        group["lr"] = 1e-3 * 0.5 ** (i // 1)
                    out.append(float(loss))
        return out + [[p.detach() for p in ms.parameters()] for ms in models.values()]


def deepar(m):
    """DeepAR's Net: embedding of the series id, a two-layer LSTM with dropout whose forget-gate biases are filled
    through _all_weights, softplus sigma, a loss over the non-zero labels; training replaces missing inputs by the
    previous mu in place and draws batches from a WeightedSampler; Net.test decodes with and without sampling."""
    nn = m.nn
    with float64_default(m, 230):

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embedding = nn.Embedding(3, 2)
                self.lstm = nn.LSTM(input_size=4, hidden_size=6, num_layers=2, dropout=0.1)
                for names in self.lstm._all_weights:
                    for name in filter(lambda n: "bias" in n, names):
                        bias = getattr(self.lstm, name)
                        bias.data[bias.size(0) // 4 : bias.size(0) // 2].fill_(1.0)
                self.mu, self.presigma, self.sigma = nn.Linear(12, 1), nn.Linear(12, 1), nn.Softplus()

            def forward(self, x, idx, hidden, cell):
                output, (hidden, cell) = self.lstm(m.cat((x, self.embedding(idx)), dim=2), (hidden, cell))
                h = hidden.permute(1, 2, 0).contiguous().view(hidden.shape[1], -1)
                return m.squeeze(self.mu(h)), m.squeeze(self.sigma(self.presigma(h))), hidden, cell

        def loss_fn(mu, sigma, labels):
            keep = labels != 0
            return -m.mean(m.distributions.normal.Normal(mu[keep], sigma[keep]).log_prob(labels[keep]))

        class WeightedSampler(m.utils.data.Sampler):
            def __init__(self, v):
                self.weights = m.as_tensor(np.abs(v) / np.sum(np.abs(v)), dtype=m.double)

            def __iter__(self):
                return iter(m.multinomial(self.weights, len(self.weights), True).tolist())

            def __len__(self):
                return len(self.weights)

        rng = np.random.default_rng(0)
        series = np.abs(rng.normal(2, 1, (8, 7)))
        series[:, 2] = 0.0
        data = np.concatenate(
            [
                series[:, :-1, None],
                rng.normal(0, 1, (8, 6, 1)),
                (np.arange(8) % 3)[:, None, None] + np.zeros((8, 6, 1)),
            ],
            2,
        )
        dataset = [(m.tensor(data[i, :, :-1]), int(data[i, 0, -1]), m.tensor(series[i, 1:])) for i in range(8)]
        loader = m.utils.data.DataLoader(dataset, batch_size=4, sampler=WeightedSampler(series.mean(1) + 1))
        model, out = Net(), []
        opt = m.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(2):
            model.train()
            for batch, idx, labels in loader:
                opt.zero_grad()
                batch, labels, idx = batch.permute(1, 0, 2).clone(), labels.permute(1, 0), idx.unsqueeze(0)
                loss, hidden, cell = m.zeros(1), m.zeros(2, 4, 6), m.zeros(2, 4, 6)
                for t in range(6):
                    missing = batch[t, :, 0] == 0
                    if t > 0 and m.sum(missing) > 0:
                        batch[t, missing, 0] = mu[missing]  # noqa: F821  (the previous step's mu)
                    mu, sigma, hidden, cell = model(batch[t].unsqueeze_(0).clone(), idx, hidden, cell)
                    loss += loss_fn(mu, sigma, labels[t])
                loss.backward()
                opt.step()
                out.append(loss.item() / 6)
        model.eval()
        with m.no_grad():
            x = m.tensor(data[:4, :, :-1]).permute(1, 0, 2).contiguous()
            ids, scale = m.tensor(data[:4, 0, -1]).long().unsqueeze(0), m.tensor(series[:4, :2])
            hidden, cell = m.zeros(2, 4, 6), m.zeros(2, 4, 6)
            for t in range(4):
                _, _, hidden, cell = model(x[t].unsqueeze(0), ids, hidden, cell)
            for sampling in (False, True):
                samples, xs = m.zeros(5, 4, 2), x.clone()
                for j in range(5 if sampling else 1):
                    h, c = hidden, cell
                    for t in range(2):
                        mu, sigma, h, c = model(xs[4 + t].unsqueeze(0), ids, h, c)
                        draw = m.distributions.normal.Normal(mu, sigma).sample() if sampling else mu
                        samples[j, :, t] = draw * scale[:, 0] + scale[:, 1]
                        if t < 1:
                            xs[5, :, 0] = mu
                out += [m.median(samples[: j + 1], dim=0)[0], samples[: j + 1].std(dim=0) if sampling else None]
        return out


def distribution_heads(m):
    """The time-series distribution outputs: a ParameterProjection of Linear layers through a LambdaLayer domain map
    (squareplus, clamp_min at finfo.eps), the distribution scaled by AffineTransformed (or, for the negative
    binomial, its logits shifted by log(scale) in place), Independent for a 3-dimensional target; a GRU forecaster
    trained on the negative log-likelihood, then mean, variance and rsample or sample."""
    nn, dist = m.nn, m.distributions
    with float64_default(m):
        squareplus = lambda x: (x + m.sqrt(m.square(x) + 4.0)) / 2.0  # noqa: E731

        class AffineTransformed(dist.TransformedDistribution):
            def __init__(self, base, loc=None, scale=None, event_dim=0):
                self.scale, self.loc = 1.0 if scale is None else scale, 0.0 if loc is None else loc
                super().__init__(base, [dist.AffineTransform(loc=self.loc, scale=self.scale, event_dim=event_dim)])

            @property
            def mean(self):
                return self.base_dist.mean * self.scale + self.loc

            @property
            def variance(self):
                return self.base_dist.variance * self.scale**2

        class LambdaLayer(nn.Module):
            def __init__(self, function):
                super().__init__()
                self.function = function

            def forward(self, x, *args):
                return self.function(x, *args)

        def student_t(df, loc, scale):
            return (
                2.0 + squareplus(df).squeeze(-1),
                loc.squeeze(-1),
                squareplus(scale).clamp_min(m.finfo(scale.dtype).eps).squeeze(-1),
            )

        def normal(loc, scale):
            return loc.squeeze(-1), squareplus(scale).clamp_min(m.finfo(scale.dtype).eps).squeeze(-1)

        def negative_binomial(total_count, logits):
            return squareplus(total_count).squeeze(-1), logits.squeeze(-1)

        heads = [
            (dist.StudentT, student_t, 3, 1),
            (dist.Normal, normal, 2, 1),
            (dist.NegativeBinomial, negative_binomial, 2, 1),
            (dist.StudentT, student_t, 3, 3),
        ]
        past, future, out = m.poisson(m.full((4, 12), 5.0)), m.poisson(m.full((4, 3), 5.0)), []
        for family, domain_map, n_args, dim in heads:
            rnn, proj = nn.GRU(1, 6, batch_first=True), nn.ModuleList([nn.Linear(6, dim) for _ in range(n_args)])
            mapping = LambdaLayer(domain_map)
            opt = m.optim.Adam(list(rnn.parameters()) + list(proj.parameters()), lr=1e-2)
            scale = past.abs().mean(1, keepdim=True).clamp_min(1e-10)
            for _ in range(3):
                _, h = rnn((past / scale).unsqueeze(-1))
                features = h[-1] if dim > 1 else h[-1].unsqueeze(1).expand(-1, 3, -1)
                args = mapping(*[p(features) for p in proj])
                if family is dist.NegativeBinomial:
                    total_count, logits = args
                    logits += scale.log()
                    d = family(total_count=total_count, logits=logits)
                else:
                    d = family(*args) if dim == 1 else dist.Independent(family(*args), 1)
                    d = AffineTransformed(
                        d, scale=scale if dim == 1 else scale.expand(-1, 3), event_dim=0 if dim == 1 else 1
                    )
                loss = -d.log_prob(future).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.item())
            with m.no_grad():
                draws = d.rsample((2,)) if d.has_rsample else d.sample((2,))
                out += [d.mean, d.variance, draws, tuple(d.event_shape), tuple(d.batch_shape)]
        return out


SLOW = pytest.mark.slow


def test_rwkv_rnn_sampler(tmp_path):
    _both(rwkv_rnn_sampler, dict(rtol=1e-5, atol=1e-6), tmp_path=tmp_path)  # float32: the program casts with .float()


@pytest.mark.parametrize("program", [pytest.param(p, marks=SLOW) for p in (nbeats, deepar, distribution_heads)])
def test_forecaster(program):
    _both(program, F64)
