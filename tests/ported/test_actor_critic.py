"""Advantage actor-critic on a cart-pole (the pattern of PyTorch's reinforcement-learning examples): a shared body
with a softmax policy head and a value head; actions are drawn from distributions.Categorical after
torch.manual_seed, so both libraries must draw the same actions for the episodes to agree; the loss sums
-log_prob * advantage and smooth_l1 value losses over the normalized discounted returns. The environment's
dynamics are computed in NumPy from the actions; weights come from NumPy."""

import math

import numpy as np

from ._harness import load_state, mlp_state, parameters_of, run_both


def cart_pole_step(state, action, tau=0.02):
    """One step of the classic cart-pole dynamics; (next state, done)."""
    x, x_dot, theta, theta_dot = state
    force = 10.0 if action == 1 else -10.0
    total_mass, pole_mass_length = 1.1, 0.05
    cos, sin = math.cos(theta), math.sin(theta)
    temp = (force + pole_mass_length * theta_dot**2 * sin) / total_mass
    theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / total_mass))
    x_acc = temp - pole_mass_length * theta_acc * cos / total_mass
    state = np.array([x + tau * x_dot, x_dot + tau * x_acc, theta + tau * theta_dot, theta_dot + tau * theta_acc])
    return state, abs(state[0]) > 2.4 or abs(state[2]) > 12 * 2 * math.pi / 360


def actor_critic_program(torch, nn, F, optim, data, state, starts):
    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 32), nn.ReLU())
            self.action_head = nn.Linear(32, 2)
            self.value_head = nn.Linear(32, 1)

        def forward(self, x):
            h = self.body(x)
            return F.softmax(self.action_head(h), dim=-1), self.value_head(h)

    policy = load_state(torch, Policy().double(), state)
    optimizer = optim.Adam(policy.parameters(), lr=3e-2)
    torch.manual_seed(543)
    lengths, losses = [], []
    for start in starts:
        observation, log_probs, values, rewards = start, [], [], []
        for _t in range(60):
            probs, value = policy(torch.tensor(observation))
            dist = torch.distributions.Categorical(probs)
            action = dist.sample()
            log_probs.append(dist.log_prob(action))
            values.append(value)
            observation, done = cart_pole_step(observation, action.item())
            rewards.append(1.0)
            if done:
                break
        returns, running = [], 0.0
        for r in reversed(rewards):
            running = r + 0.99 * running
            returns.insert(0, running)
        returns = torch.tensor(returns, dtype=torch.float64)
        returns = (returns - returns.mean()) / (returns.std() + 1e-7)
        policy_terms = [-lp * (ret - v.item()) for lp, v, ret in zip(log_probs, values, returns)]
        value_terms = [F.smooth_l1_loss(v, ret.reshape(1)) for v, ret in zip(values, returns)]
        loss = torch.stack(policy_terms).sum() + torch.stack(value_terms).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        lengths.append(len(rewards))
        losses.append(loss.detach())
    return {"lengths": lengths, "losses": torch.stack(losses), "params": parameters_of(policy)}


def test_actor_critic_on_a_cart_pole_matches_torch():
    rng = np.random.default_rng(2)
    state = {}
    state.update(mlp_state(rng, [4, 32], prefix="body."))
    state.update({k.replace("0.", "action_head.", 1): v for k, v in mlp_state(rng, [32, 2]).items()})
    state.update({k.replace("0.", "value_head.", 1): v for k, v in mlp_state(rng, [32, 1]).items()})
    starts = [rng.uniform(-0.05, 0.05, 4) for _ in range(4)]
    expected, _ = run_both(actor_critic_program, state, starts)
    assert all(length > 1 for length in expected["lengths"])
