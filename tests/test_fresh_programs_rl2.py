"""SAC's squashed Normal with a learnt temperature, C51's projection with noisy layers, a mixture density network
(pytorch-mdn's) and Bayes by Backprop's scale-mixture prior, written once against torch's API and run with torch and
with batched_grad from the same seeds in float64 (the environments and helpers are test_fresh_programs_rl.py's)."""

import copy
import math
import random

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_rl import CartPole, Pendulum, _batch, _params, _quiet, _soft_update
from test_fresh_programs_teach import float64_default


@_quiet
def sac_with_a_squashed_normal(m):
    """SAC: Normal(mu, softplus(.)).rsample() squashed by tanh with the log-prob correction
    log(1 - tanh(a)^2 + 1e-7), twin Q targets under no_grad, an entropy temperature log_alpha made from
    np.log (a float64 tensor) that requires grad, its own Adam, and the target critics' soft updates."""
    nn, F = m.nn, m.nn.functional
    out = []
    with float64_default(m):
        rng = random.Random(6)
        fc1, fc_mu, fc_std = nn.Linear(3, 32), nn.Linear(32, 1), nn.Linear(32, 1)
        pi_opt = m.optim.Adam([*fc1.parameters(), *fc_mu.parameters(), *fc_std.parameters()], lr=5e-4)
        log_alpha = m.tensor(np.log(0.01))
        log_alpha.requires_grad = True
        alpha_opt = m.optim.Adam([log_alpha], lr=1e-3)

        def policy(x):
            h = F.relu(fc1(x))
            dist = m.distributions.Normal(fc_mu(h), F.softplus(fc_std(h)))
            action = dist.rsample()
            log_prob = dist.log_prob(action) - m.log(1 - m.tanh(action).pow(2) + 1e-7)
            return m.tanh(action), log_prob

        def critic():
            return nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))

        q1, q2 = critic(), critic()
        q1_t, q2_t = copy.deepcopy(q1), copy.deepcopy(q2)
        q_opts = [m.optim.Adam(q.parameters(), lr=1e-3) for q in (q1, q2)]
        env, buffer = Pendulum(6), []
        for _ in range(3):
            s, done = env.reset(), False
            while not done:
                a, _ = policy(m.from_numpy(s).double())
                s_prime, r, done, _ = env.step([2.0 * a.item()])
                buffer.append((s, a.item(), r / 10.0, s_prime, 0.0 if done else 1.0))
                s = s_prime
            for _ in range(3):
                s_b, a_b, r_b, n_b, d_b = _batch(m, rng, buffer, 16)
                with m.no_grad():
                    a_next, lp_next = policy(n_b)
                    both = m.cat([q1_t(m.cat([n_b, a_next], 1)), q2_t(m.cat([n_b, a_next], 1))], dim=1)
                    target = r_b + 0.98 * d_b * (m.min(both, 1, keepdim=True)[0] - log_alpha.exp() * lp_next)
                for q, q_opt in zip((q1, q2), q_opts):
                    loss = F.smooth_l1_loss(q(m.cat([s_b, a_b], 1)), target)
                    q_opt.zero_grad()
                    loss.mean().backward()
                    q_opt.step()
                a_new, lp = policy(s_b)
                both = m.cat([q1(m.cat([s_b, a_new], 1)), q2(m.cat([s_b, a_new], 1))], dim=1)
                pi_loss = (-m.min(both, 1, keepdim=True)[0] + log_alpha.exp() * lp).mean()
                pi_opt.zero_grad()
                pi_loss.backward()
                pi_opt.step()
                alpha_loss = -(log_alpha.exp() * (lp - 1.0).detach()).mean()
                alpha_opt.zero_grad()
                alpha_loss.backward()
                alpha_opt.step()
                _soft_update(q1, q1_t, 0.01)
                _soft_update(q2, q2_t, 0.01)
            out += [pi_loss.detach(), float(f"{log_alpha.exp():.4f}")]
        out += [log_alpha.detach()] + _params(fc_mu) + _params(q2_t)
    return out


@_quiet
def c51_projection_with_noisy_layers(m):
    """Categorical DQN: factorised noisy layers (sign * sqrt(|x|) noise, epsilon_out.ger(epsilon_in) copied into
    buffers), softmax over atoms, the Bellman projection by index_add_ into proj.view(-1) at l + offset and
    u + offset (offset from a long linspace), dist.data.clamp_ before the log, legacy FloatTensor/LongTensor batches."""
    nn, F = m.nn, m.nn.functional
    out = []
    with float64_default(m):
        rng, atoms, v_min, v_max = random.Random(7), 11, -5, 5

        class Noisy(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.weight_mu, self.weight_sigma = (
                    nn.Parameter(m.empty(n_out, n_in)),
                    nn.Parameter(m.empty(n_out, n_in)),
                )
                self.bias_mu, self.bias_sigma = nn.Parameter(m.empty(n_out)), nn.Parameter(m.empty(n_out))
                self.register_buffer("weight_epsilon", m.empty(n_out, n_in))
                self.register_buffer("bias_epsilon", m.empty(n_out))
                bound = 1 / math.sqrt(n_in)
                self.weight_mu.data.uniform_(-bound, bound)
                self.bias_mu.data.uniform_(-bound, bound)
                self.weight_sigma.data.fill_(0.4 / math.sqrt(n_in))
                self.bias_sigma.data.fill_(0.4 / math.sqrt(n_out))
                self.reset_noise()

            @staticmethod
            def _scaled(size):
                x = m.randn(size)
                return x.sign().mul(x.abs().sqrt())

            def reset_noise(self):
                self.weight_epsilon.copy_(
                    self._scaled(self.weight_mu.size(0)).ger(self._scaled(self.weight_mu.size(1)))
                )
                self.bias_epsilon.copy_(self._scaled(self.bias_mu.size(0)))

            def forward(self, x):
                weight = self.weight_mu + self.weight_sigma.mul(self.weight_epsilon)
                return F.linear(x, weight, self.bias_mu + self.bias_sigma.mul(self.bias_epsilon))

        def model():
            return nn.Sequential(nn.Linear(4, 32), nn.ReLU(), Noisy(32, 32), nn.ReLU(), Noisy(32, 2 * atoms))

        def dist_of(net, x):
            return F.softmax(net(x).view(-1, atoms), dim=1).view(-1, 2, atoms)

        current, target = model(), model()
        target.load_state_dict(current.state_dict())
        opt, env, buffer = m.optim.Adam(current.parameters(), lr=1e-3), CartPole(7, limit=40), []
        support = m.linspace(v_min, v_max, atoms)
        for _ in range(5):
            s, done = env.reset(), False
            while not done:
                with m.no_grad():
                    a = (dist_of(current, m.DoubleTensor(s).unsqueeze(0)) * support).sum(2).max(1)[1].numpy()[0]
                s_prime, r, done, _ = env.step(a)
                buffer.append((s, a, r, s_prime, float(done)))
                s = s_prime
            if len(buffer) < 16:
                continue
            s_b, a_b, r_b, n_b, d_b = (np.array(x) for x in zip(*rng.sample(buffer, 16)))
            state, next_state = m.DoubleTensor(np.float32(s_b)), m.DoubleTensor(np.float32(n_b))
            action, reward, done_b = m.LongTensor(a_b), m.DoubleTensor(r_b), m.DoubleTensor(np.float32(d_b))
            next_dist = dist_of(target, next_state).data * support
            best = next_dist.sum(2).max(1)[1].unsqueeze(1).unsqueeze(1).expand(16, 1, atoms)
            next_dist = next_dist.gather(1, best).squeeze(1)
            tz = (reward.unsqueeze(1) + (1 - done_b.unsqueeze(1)) * 0.99 * support.unsqueeze(0)).clamp(v_min, v_max)
            b = (tz - v_min) / ((v_max - v_min) / (atoms - 1))
            lower, upper = b.floor().long(), b.ceil().long()
            offset = m.linspace(0, (16 - 1) * atoms, 16).long().unsqueeze(1).expand(16, atoms)
            proj = m.zeros(next_dist.size())
            proj.view(-1).index_add_(0, (lower + offset).view(-1), (next_dist * (upper.double() - b)).view(-1))
            proj.view(-1).index_add_(0, (upper + offset).view(-1), (next_dist * (b - lower.double())).view(-1))
            chosen = dist_of(current, state).gather(1, action.unsqueeze(1).unsqueeze(1).expand(16, 1, atoms)).squeeze(1)
            chosen.data.clamp_(0.01, 0.99)
            loss = -(proj * chosen.log()).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            for net in (current, target):
                for layer in net:
                    if isinstance(layer, Noisy):
                        layer.reset_noise()
            out += [proj, loss.detach()]
        out += _params(current)
    return out


@_quiet
def mixture_density_network_and_bayes_by_backprop(m):
    """pytorch-mdn's network (softmax weights, exp sigmas) trained on three translated clusters with its
    product-of-Gaussians NLL and sampled through Categorical(pi) and gather; then Bayes by Backprop's layers with
    softplus-parametrized posteriors, the scale-mixture prior from two Normal(0, sigma) log_probs and a sample ELBO
    over outputs written into preallocated zeros."""
    nn, F = m.nn, m.nn.functional
    out = []
    with float64_default(m):
        clusters = [m.randn((30, 3)) / 4 for _ in range(3)]
        for cluster, (dim, amount) in zip(clusters, [(1, 1.2), (0, -1.2), (2, -1.2)]):
            cluster.transpose(0, 1)[dim].add_(m.ones(cluster.size(0)) * amount)
        data = m.cat(clusters)
        trunk, pi_head = nn.Sequential(nn.Linear(2, 5), nn.Tanh()), nn.Sequential(nn.Linear(5, 4), nn.Softmax(dim=1))
        sigma_head, mu_head = nn.Linear(5, 4), nn.Linear(5, 4)
        heads = [trunk, pi_head, sigma_head, mu_head]
        opt = m.optim.Adam([p for h in heads for p in h.parameters()])
        for _ in range(40):
            h = trunk(data[:, :2])
            pi, sigma, mu = pi_head(h), m.exp(sigma_head(h)).view(-1, 4, 1), mu_head(h).view(-1, 4, 1)
            target = data[:, 2:].unsqueeze(1).expand_as(sigma)
            density = m.prod(1 / math.sqrt(2 * math.pi) * m.exp(-0.5 * ((target - mu) / sigma) ** 2) / sigma, 2)
            loss = m.mean(-m.log(m.sum(pi * density, dim=1)))
            opt.zero_grad()
            loss.backward()
            opt.step()
        pick = m.distributions.Categorical(pi).sample().view(pi.size(0), 1, 1)
        noise = m.randn((sigma.size(2), sigma.size(0)), requires_grad=False)
        samples = (noise * sigma.gather(1, pick).detach().squeeze() + mu.detach().gather(1, pick).squeeze()).transpose(
            0, 1
        )
        out += [loss.detach(), samples]

        prior1, prior2 = (
            m.distributions.Normal(0, m.DoubleTensor([1.0])),
            m.distributions.Normal(0, m.DoubleTensor([math.exp(-6)])),
        )

        def log_prior(w):
            return m.log(0.5 * m.exp(prior1.log_prob(w)) + 0.5 * m.exp(prior2.log_prob(w))).sum()

        class Bayesian(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.w_mu = nn.Parameter(m.Tensor(n_out, n_in).uniform_(-0.2, 0.2))
                self.w_rho = nn.Parameter(m.Tensor(n_out, n_in).uniform_(-5, -4))
                self.standard = m.distributions.Normal(0, 1)

            def forward(self, x):
                sigma = m.log1p(m.exp(self.w_rho))
                w = self.w_mu + sigma * self.standard.sample(self.w_rho.size())
                posterior = (
                    -math.log(math.sqrt(2 * math.pi)) - m.log(sigma) - (w - self.w_mu) ** 2 / (2 * sigma**2)
                ).sum()
                self.kl = posterior - log_prior(w)
                return F.linear(x, w)

        l1, l2 = Bayesian(8, 16), Bayesian(16, 3)
        opt = m.optim.Adam([*l1.parameters(), *l2.parameters()])
        x, y = m.rand(10, 8), m.randint(0, 3, (10,))
        for batch in range(3):
            outputs, kls = m.zeros(2, 10, 3), m.zeros(2)
            for i in range(2):
                outputs[i] = F.log_softmax(l2(F.relu(l1(x))), dim=1)
                kls[i] = l1.kl + l2.kl
            weight = (2**batch - 1) / (2**3 - 1)
            loss = kls.mean() * weight + F.nll_loss(outputs.mean(0), y, reduction="sum")
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.detach())
        out += _params(l2)
    return out


@pytest.mark.slow  # each a few seconds with both libraries
@pytest.mark.parametrize(
    "program",
    [sac_with_a_squashed_normal, c51_projection_with_noisy_layers, mixture_density_network_and_bayes_by_backprop],
    ids=lambda p: p.__name__,
)
def test_program(program):
    _both(program, F64)
