"""Reinforcement-learning programs of the kinds minimalRL and RL-Adventure hold, each written once against torch's API
and run with torch and with batched_grad from the same seeds in float64, compared number for number: REINFORCE, TD
actor-critic, PPO with GAE, PPO with an LSTM policy, DQN with a replay buffer and with prioritized replay, V-trace and
ACER's truncated importance weights, DDPG/TD3 on a pendulum (SAC, C51 and the probabilistic programs are in
test_fresh_programs_rl2.py). The gym environments they step are written here (the classic-control equations, a seeded
NumPy generator); their idioms (tensors made from lists of NumPy arrays, NumPy arithmetic on tensors, `.data.copy_`
soft updates) are kept."""

import collections
import copy
import math
import random
import warnings

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default


class CartPole:
    """Cart-pole balancing (gym's CartPole-v1 equations, Euler steps of 0.02 s); reset draws from `seed`."""

    def __init__(self, seed, limit=200):
        self.rng, self.limit = np.random.RandomState(seed), limit

    def reset(self):
        self.state, self.t = self.rng.uniform(-0.05, 0.05, 4), 0
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if int(action) == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot**2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        self.state = np.array(
            [x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc]
        )
        self.t += 1
        done = abs(self.state[0]) > 2.4 or abs(self.state[2]) > 12 * math.pi / 180 or self.t >= self.limit
        return self.state.astype(np.float32), 1.0, bool(done), {}


class Pendulum:
    """Torque-driven pendulum swing-up (gym's Pendulum equations), episodes of `limit` steps."""

    def __init__(self, seed, limit=40):
        self.rng, self.limit = np.random.RandomState(seed), limit

    def reset(self):
        self.th, self.thdot = self.rng.uniform([-np.pi, -1.0], [np.pi, 1.0])
        self.t = 0
        return self._observation()

    def _observation(self):
        return np.array([np.cos(self.th), np.sin(self.th), self.thdot], dtype=np.float32)

    def step(self, u):
        u = float(np.clip(np.asarray(u, dtype=np.float64).reshape(-1)[0], -2.0, 2.0))
        angle = (self.th + np.pi) % (2 * np.pi) - np.pi
        cost = angle**2 + 0.1 * self.thdot**2 + 0.001 * u**2
        self.thdot = np.clip(self.thdot + (15.0 * np.sin(self.th) + 3.0 * u) * 0.05, -8, 8)
        self.th = self.th + self.thdot * 0.05
        self.t += 1
        return self._observation(), -float(cost), self.t >= self.limit, {}


def _quiet(program):
    """The program with the warnings both libraries give alike (a list of arrays copied, NumPy's arithmetic on a
    tensor) silenced."""

    def run(m):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Creating a tensor from a list of numpy.ndarrays")
            warnings.filterwarnings("ignore", message="__array_wrap__ must accept context")  # NumPy's, on both
            return program(m)

    run.__name__ = program.__name__
    return run


def _params(module):
    return [p.detach().clone() for p in module.parameters()]


@_quiet
def reinforce_and_actor_critic(m):
    """REINFORCE backpropagating each step's -log(prob[a]) * return into one Adam step per episode, then a TD
    actor-critic gathering per-step losses with unsqueeze(0) and cat: scores and parameters."""
    nn, F = m.nn, m.nn.functional
    out = []
    with float64_default(m):
        fc1, fc2 = nn.Linear(4, 32), nn.Linear(32, 2)
        opt = m.optim.Adam(list(fc1.parameters()) + list(fc2.parameters()), lr=2e-3)
        env = CartPole(0)
        for _ in range(4):
            s, done, memory = env.reset(), False, []
            while not done:
                prob = F.softmax(fc2(F.relu(fc1(m.from_numpy(s).float().double()))), dim=0)
                a = m.distributions.Categorical(prob).sample()
                s, r, done, _ = env.step(a.item())
                memory.append((r, prob[a]))
            opt.zero_grad()
            ret = 0.0
            for r, p in memory[::-1]:
                ret = r + 0.98 * ret
                (-m.log(p) * ret).backward()
            opt.step()
            out.append(float(len(memory)))
        body, pi_head, v_head = nn.Linear(4, 32), nn.Linear(32, 2), nn.Linear(32, 1)
        opt = m.optim.Adam([*body.parameters(), *pi_head.parameters(), *v_head.parameters()], lr=2e-3)
        for _ in range(3):
            obs, losses = env.reset(), []
            for _ in range(60):
                h = F.relu(body(m.from_numpy(obs).double()))
                pi, v = F.softmax(pi_head(h), dim=0), v_head(h)
                action = m.distributions.Categorical(pi).sample()
                obs, r, done, _ = env.step(action.item())
                next_v = v_head(F.relu(body(m.from_numpy(obs).double())))
                delta = r + 0.99 * next_v - v
                losses.append((-m.log(pi[action]) * delta.item() + delta * delta).unsqueeze(0))
                if done:
                    break
            loss = m.cat(losses).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.detach())
        out += _params(fc2) + _params(v_head)
    return out


def _gae(m, delta, gamma, lmbda):
    advantages, running = [], 0.0
    for d in delta[::-1]:
        running = gamma * lmbda * running + d[0]
        advantages.append([running])
    return m.tensor(advantages[::-1], dtype=m.float64)


@_quiet
def ppo_with_gae(m):
    """PPO on cart-pole: batches made by torch.tensor from lists of NumPy states, GAE computed on delta.numpy(),
    the clipped surrogate with smooth_l1 value loss, K epochs per rollout of 20 steps."""
    nn, F = m.nn, m.nn.functional
    out = []
    with float64_default(m):
        fc1, fc_pi, fc_v = nn.Linear(4, 32), nn.Linear(32, 2), nn.Linear(32, 1)
        opt = m.optim.Adam([*fc1.parameters(), *fc_pi.parameters(), *fc_v.parameters()], lr=5e-4)

        def pi(x, dim):
            return F.softmax(fc_pi(F.relu(fc1(x))), dim=dim)

        def v(x):
            return fc_v(F.relu(fc1(x)))

        env = CartPole(1, limit=60)
        for _ in range(3):
            s, done = env.reset(), False
            while not done:
                data = []
                for _ in range(20):
                    prob = pi(m.from_numpy(s).double(), 0)
                    a = m.distributions.Categorical(prob).sample().item()
                    s_prime, r, done, _ = env.step(a)
                    data.append((s, a, r / 100.0, s_prime, prob[a].item(), 0 if done else 1))
                    s = s_prime
                    if done:
                        break
                states, actions, rewards, nexts, probs, masks = zip(*data)
                st, nx = m.tensor(list(states), dtype=m.float64), m.tensor(list(nexts), dtype=m.float64)
                a_t = m.tensor([[a] for a in actions])
                r_t, old = m.tensor([[r] for r in rewards]), m.tensor([[p] for p in probs])
                mask = m.tensor([[k] for k in masks], dtype=m.float64)
                for _ in range(2):
                    td_target = r_t + 0.98 * v(nx) * mask
                    advantage = _gae(m, (td_target - v(st)).detach().numpy(), 0.98, 0.95)
                    ratio = m.exp(m.log(pi(st, 1).gather(1, a_t)) - m.log(old))
                    surrogate = m.min(ratio * advantage, m.clamp(ratio, 0.9, 1.1) * advantage)
                    loss = -surrogate + F.smooth_l1_loss(v(st), td_target.detach())
                    opt.zero_grad()
                    loss.mean().backward()
                    opt.step()
                out.append(loss.mean().detach())
        out += _params(fc_pi)
    return out


@_quiet
def ppo_with_an_lstm_policy(m):
    """PPO-LSTM: the LSTM's (h, c) carried step by step and stored with each transition, the first hidden state
    detached for the update, backward(retain_graph=True) across K epochs."""
    nn, F = m.nn, m.nn.functional
    out = []
    with float64_default(m):
        fc1, lstm, fc_pi, fc_v = nn.Linear(4, 16), nn.LSTM(16, 8), nn.Linear(8, 2), nn.Linear(8, 1)
        opt = m.optim.Adam([*fc1.parameters(), *lstm.parameters(), *fc_pi.parameters(), *fc_v.parameters()], lr=5e-4)

        def run(x, hidden):
            y, hidden = lstm(F.relu(fc1(x)).view(-1, 1, 16), hidden)
            return y, hidden

        env = CartPole(2, limit=30)
        for _ in range(2):
            hidden = (m.zeros([1, 1, 8]), m.zeros([1, 1, 8]))
            s, done, data = env.reset(), False, []
            while not done:
                y, new_hidden = run(m.from_numpy(s).double(), hidden)
                prob = F.softmax(fc_pi(y), dim=2).view(-1)
                a = m.distributions.Categorical(prob).sample().item()
                s_prime, r, done, _ = env.step(a)
                data.append((s, a, r / 100.0, s_prime, prob[a].item(), hidden, 0.0 if done else 1.0))
                s, hidden = s_prime, new_hidden
            states, actions, rewards, nexts, probs, hiddens, masks = zip(*data)
            st, nx = m.tensor(list(states), dtype=m.float64), m.tensor(list(nexts), dtype=m.float64)
            a_t, old = m.tensor([[a] for a in actions]), m.tensor([[p] for p in probs])
            r_t, mask = m.tensor([[r] for r in rewards]), m.tensor([[k] for k in masks])
            first = (hiddens[0][0].detach(), hiddens[0][1].detach())
            for _ in range(2):
                v_prime = fc_v(run(nx, first)[0]).squeeze(1)
                td_target = r_t + 0.98 * v_prime * mask
                v_s = fc_v(run(st, first)[0]).squeeze(1)
                advantage = _gae(m, (td_target - v_s).detach().numpy(), 0.98, 0.95)
                pi_a = F.softmax(fc_pi(run(st, first)[0]), dim=2).squeeze(1).gather(1, a_t)
                ratio = m.exp(m.log(pi_a) - m.log(old))
                loss = -m.min(ratio * advantage, m.clamp(ratio, 0.9, 1.1) * advantage)
                loss = loss + F.smooth_l1_loss(v_s, td_target.detach())
                opt.zero_grad()
                loss.mean().backward(retain_graph=True)
                opt.step()
            out.append(loss.mean().detach())
        out += _params(lstm)
    return out


@_quiet
def dqn_with_a_replay_buffer(m):
    """DQN: epsilon-greedy argmax().item(), a deque replay sampled by random.sample, q.gather(1, a) against
    r + gamma * target.max(1)[0].unsqueeze(1) * mask, the target network synced by load_state_dict."""
    nn, F = m.nn, m.nn.functional
    out = []
    with float64_default(m):
        rng = random.Random(0)
        q = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
        q_target = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
        q_target.load_state_dict(q.state_dict())
        buffer, opt, env = collections.deque(maxlen=500), m.optim.Adam(q.parameters(), lr=5e-4), CartPole(3)
        for episode in range(8):
            s, done = env.reset(), False
            while not done:
                out_q = q(m.from_numpy(s).double())
                a = rng.randint(0, 1) if rng.random() < 0.1 else out_q.argmax().item()
                s_prime, r, done, _ = env.step(a)
                buffer.append((s, a, r / 100.0, s_prime, 0.0 if done else 1.0))
                s = s_prime
            if len(buffer) > 64:
                for _ in range(3):
                    s_b, a_b, r_b, n_b, d_b = zip(*rng.sample(buffer, 32))
                    q_a = q(m.tensor(s_b, dtype=m.float64)).gather(1, m.tensor([[a] for a in a_b]))
                    max_next = q_target(m.tensor(n_b, dtype=m.float64)).max(1)[0].unsqueeze(1)
                    target = m.tensor([[r] for r in r_b]) + 0.98 * max_next * m.tensor([[d] for d in d_b])
                    loss = F.smooth_l1_loss(q_a, target)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                out.append(loss.detach())
            if episode % 3 == 2:
                q_target.load_state_dict(q.state_dict())
        out += _params(q)
    return out


@_quiet
def prioritized_replay_dqn(m):
    """RL-Adventure's prioritized replay: priorities in a float32 array, np.random.choice drawing indices with
    p = prios**alpha / sum, importance weights, actions stored as either Python ints or 0-d tensors from
    q.max(1)[1].data[0] and batched by LongTensor, dones (bools) by DoubleTensor, Variable(..., volatile=True) for
    acting, new priorities read back by prios.data.cpu().numpy()."""
    nn = m.nn
    out = []
    with float64_default(m), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="volatile was removed")
        rng, draws = random.Random(8), np.random.RandomState(8)
        q = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
        q_target = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
        q_target.load_state_dict(q.state_dict())
        opt, env = m.optim.Adam(q.parameters(), lr=1e-3), CartPole(8, limit=50)
        buffer, priorities = [], np.zeros(400, dtype=np.float32)
        state = env.reset()
        for frame in range(1, 121):
            if rng.random() > 0.3:
                q_value = q(m.autograd.Variable(m.DoubleTensor(state).unsqueeze(0), volatile=True))
                action = q_value.max(1)[1].data[0]
            else:
                action = rng.randrange(2)
            next_state, reward, done, _ = env.step(action)
            priorities[len(buffer)] = priorities.max() if buffer else 1.0
            buffer.append((np.expand_dims(state, 0), action, reward, np.expand_dims(next_state, 0), done))
            state = env.reset() if done else next_state
            if len(buffer) > 32:
                probs = priorities[: len(buffer)] ** 0.6
                probs /= probs.sum()
                indices = draws.choice(len(buffer), 32, p=probs)
                weights = (len(buffer) * probs[indices]) ** -0.5
                weights = np.array(weights / weights.max(), dtype=np.float32)
                s_b, a_b, r_b, n_b, d_b = zip(*[buffer[i] for i in indices])
                q_a = q(m.DoubleTensor(np.concatenate(s_b))).gather(1, m.LongTensor(a_b).unsqueeze(1)).squeeze(1)
                next_q = q_target(m.DoubleTensor(np.concatenate(n_b))).max(1)[0]
                expected = m.DoubleTensor(r_b) + 0.99 * next_q * (1 - m.DoubleTensor(d_b))
                loss = (q_a - expected.detach()).pow(2) * m.DoubleTensor(weights)
                prios = loss + 1e-5
                opt.zero_grad()
                loss.mean().backward()
                for i, p in zip(indices, prios.data.cpu().numpy()):
                    priorities[i] = p
                opt.step()
            if frame % 40 == 0:
                q_target.load_state_dict(q.state_dict())
                out += [loss.mean().detach(), float(priorities.sum())]
        out += _params(q)
    return out


@_quiet
def vtrace_and_acer_corrections(m):
    """V-trace targets computed under no_grad with rhos = min(threshold tensor, ratio), cs.numpy() and NumPy
    arithmetic mixing tensors with arrays (vs_minus_v + v.numpy()), then ACER's truncated rho_bar and its bias
    correction (1 - c / rho).clamp(min=0) with q_ret built item by item."""
    nn, F = m.nn, m.nn.functional
    out = []
    with float64_default(m):
        fc1, fc_pi, fc_v = nn.Linear(4, 32), nn.Linear(32, 2), nn.Linear(32, 2)
        opt = m.optim.Adam([*fc1.parameters(), *fc_pi.parameters(), *fc_v.parameters()], lr=5e-4)
        clip = m.tensor(1.0, dtype=m.float64)

        def pi(x, dim):
            return F.softmax(fc_pi(F.relu(fc1(x))), dim=dim)

        def v(x):
            return fc_v(F.relu(fc1(x)))[..., :1]

        env = CartPole(4, limit=40)
        s, done, data = env.reset(), False, []
        while not done:
            prob = pi(m.from_numpy(s).double(), 0)
            a = m.distributions.Categorical(prob).sample().item()
            s_prime, r, done, _ = env.step(a)
            data.append((s, a, r / 100.0, s_prime, prob[a].item(), prob.detach().numpy(), 0 if done else 1))
            s = s_prime
        states, actions, rewards, nexts, mus, probs, masks = zip(*data)
        st, nx = m.tensor(list(states), dtype=m.float64), m.tensor(list(nexts), dtype=m.float64)
        a_t, mu_a = m.tensor([[a] for a in actions]), m.tensor([[p] for p in mus])
        r_t, mask = m.tensor([[r] for r in rewards]), m.tensor([[k] for k in masks], dtype=m.float64)
        with m.no_grad():
            ratio = m.exp(m.log(pi(st, 1).gather(1, a_t)) - m.log(mu_a))
            rhos, cs = m.min(clip, ratio), m.min(clip, ratio).numpy()
            delta = rhos * (r_t + 0.98 * v(nx) * mask - v(st)).numpy()
            acc, lst = 0.0, [[0.0]]
            for i in range(len(delta) - 1, -1, -1):
                acc = 0.98 * cs[i][0] * acc + delta[i][0]
                lst.append([acc])
            vs_minus_v = m.tensor(lst[::-1], dtype=m.float64)
            vs = vs_minus_v[:-1] + v(st).numpy()
            advantage = r_t + 0.98 * (vs_minus_v[1:] + v(nx).numpy()) - v(st).numpy()
        loss = (-rhos * m.log(pi(st, 1).gather(1, a_t)) * advantage + F.smooth_l1_loss(v(st), vs)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [vs, advantage, loss.detach()]

        q = fc_v(F.relu(fc1(st)))
        q_a, policy = q.gather(1, a_t), pi(st, 1)
        value = (q * policy).sum(1).unsqueeze(1).detach()
        rho = policy.detach() / m.tensor(np.array(probs), dtype=m.float64)
        rho_bar = rho.gather(1, a_t).clamp(max=1.0)
        correction = (1 - 1.0 / rho).clamp(min=0)
        q_ret, targets = value[-1] * masks[-1], []
        for i in reversed(range(len(rewards))):
            q_ret = rewards[i] + 0.98 * q_ret
            targets.append(q_ret.item())
            q_ret = rho_bar[i] * (q_ret - q_a[i]) + value[i]
        q_ret = m.tensor(targets[::-1], dtype=m.float64).unsqueeze(1)
        loss = -rho_bar * m.log(policy.gather(1, a_t)) * (q_ret - value)
        loss = loss + (-correction * policy.detach() * m.log(policy) * (q.detach() - value)).sum(1)
        loss = (loss + F.smooth_l1_loss(q_a, q_ret)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [q_ret, loss.detach()] + _params(fc_v)
    return out


def _soft_update(net, target, tau):
    for p_target, p in zip(target.parameters(), net.parameters()):
        p_target.data.copy_(p_target.data * (1.0 - tau) + p.data * tau)


def _batch(m, rng, buffer, n):
    s, a, r, s2, d = zip(*rng.sample(buffer, n))
    as_column = lambda xs: m.tensor([[x] for x in xs], dtype=m.float64)  # noqa: E731
    return m.tensor(s, dtype=m.float64), as_column(a), as_column(r), m.tensor(s2, dtype=m.float64), as_column(d)


@_quiet
def ddpg_and_td3_on_a_pendulum(m):
    """DDPG's deterministic actor (tanh * 2) and critic on cat([h_s, h_a]), Ornstein-Uhlenbeck noise from NumPy,
    soft target updates through .data.copy_; then TD3's twin critics with target smoothing noise made by
    torch.tensor(np.clip(...)) and a delayed actor update, targets made by copy.deepcopy."""
    nn, F = m.nn, m.nn.functional
    out = []
    with float64_default(m):
        noise, rng = np.random.RandomState(5), random.Random(5)

        def actor():
            return nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 1), nn.Tanh())

        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc_s, self.fc_a, self.fc_out = nn.Linear(3, 16), nn.Linear(1, 16), nn.Linear(32, 1)

            def forward(self, x, a):
                return self.fc_out(m.cat([F.relu(self.fc_s(x)), F.relu(self.fc_a(a))], dim=1))

        mu, q, q1, q2 = actor(), Critic(), Critic(), Critic()
        mu_t, q_t = copy.deepcopy(mu), copy.deepcopy(q)
        mu_opt, q_opt = m.optim.Adam(mu.parameters(), lr=5e-4), m.optim.Adam(q.parameters(), lr=1e-3)
        env, buffer, ou = Pendulum(5), [], np.zeros(1)
        for _ in range(3):
            s, done = env.reset(), False
            while not done:
                ou = ou + 0.1 * (0 - ou) * 0.01 + 0.1 * np.sqrt(0.01) * noise.normal(size=1)
                a = (mu(m.from_numpy(s).double()) * 2).item() + ou[0]
                s_prime, r, done, _ = env.step([a])
                buffer.append((s, a, r / 100.0, s_prime, 0.0 if done else 1.0))
                s = s_prime
            for _ in range(3):
                s_b, a_b, r_b, n_b, d_b = _batch(m, rng, buffer, 16)
                target = r_b + 0.99 * q_t(n_b, mu_t(n_b) * 2) * d_b
                q_loss = F.smooth_l1_loss(q(s_b, a_b), target.detach())
                q_opt.zero_grad()
                q_loss.backward()
                q_opt.step()
                mu_loss = -q(s_b, mu(s_b) * 2).mean()
                mu_opt.zero_grad()
                mu_loss.backward()
                mu_opt.step()
                _soft_update(mu, mu_t, 0.005)
                _soft_update(q, q_t, 0.005)
            out += [q_loss.detach(), mu_loss.detach()]
        twin_opt = m.optim.Adam(list(q1.parameters()) + list(q2.parameters()), lr=1e-3)
        q1_t, q2_t = copy.deepcopy(q1), copy.deepcopy(q2)
        for step in range(4):
            s_b, a_b, r_b, n_b, d_b = _batch(m, rng, buffer, 16)
            smoothed = mu_t(n_b) * 2 + m.tensor(np.clip(noise.normal(0, 0.2, 1)[0], -0.5, 0.5))
            smoothed = m.clamp(smoothed, -2, 2).detach()
            y = r_b + 0.99 * m.min(q1_t(n_b, smoothed), q2_t(n_b, smoothed))
            loss = F.mse_loss(y.detach(), q1(s_b, a_b)) + F.mse_loss(y.detach(), q2(s_b, a_b))
            twin_opt.zero_grad()
            loss.backward()
            twin_opt.step()
            if step % 2 == 1:
                mu_loss = -q1(s_b, mu(s_b) * 2).mean()
                mu_opt.zero_grad()
                mu_loss.backward()
                mu_opt.step()
                for net, target in ((q1, q1_t), (q2, q2_t), (mu, mu_t)):
                    for p, p_t in zip(net.parameters(), target.parameters()):
                        p_t.data.copy_(0.005 * p.data + (1 - 0.005) * p_t.data)
            out.append(loss.detach())
        out += _params(mu) + _params(q2_t)
    return out


FAST = [ppo_with_gae]
SLOW = [  # each a few seconds with both libraries
    reinforce_and_actor_critic,
    vtrace_and_acer_corrections,
    ppo_with_an_lstm_policy,
    dqn_with_a_replay_buffer,
    prioritized_replay_dqn,
    ddpg_and_td3_on_a_pendulum,
]


@pytest.mark.parametrize(
    "program", FAST + [pytest.param(p, marks=pytest.mark.slow) for p in SLOW], ids=lambda p: p.__name__
)
def test_program(program):
    _both(program, F64)
