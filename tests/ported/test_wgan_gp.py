"""WGAN-GP (Gulrajani et al., 2017) on 2-D toy data (a ring of Gaussians): a critic trained with the Wasserstein loss
plus a penalty on the norm of its input gradient at random interpolates between real and generated points, taken by
autograd.grad(critic(interp), interp, grad_outputs=ones, create_graph=True); then generator steps. Real points,
noise and interpolation weights come from NumPy, batches from a DataLoader."""

import numpy as np

from ._harness import load_state, mlp_state, parameters_of, run_both


def wgan_gp_program(torch, nn, F, optim, data, states, real_points, noise, mixing):
    generator = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2)).double()
    critic = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)).double()
    load_state(torch, generator, states["generator"])
    load_state(torch, critic, states["critic"])
    generator_optimizer = optim.Adam(generator.parameters(), lr=1e-3, betas=(0.5, 0.9))
    critic_optimizer = optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
    loader = data.DataLoader(data.TensorDataset(torch.tensor(real_points)), batch_size=16, drop_last=True)
    penalty_weight, critic_steps = 10.0, 2

    def gradient_penalty(real, fake, alpha):
        interp = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        scores = critic(interp)
        (input_grads,) = torch.autograd.grad(
            scores, interp, grad_outputs=torch.ones_like(scores), create_graph=True, retain_graph=True
        )
        return ((input_grads.norm(2, dim=1) - 1) ** 2).mean()

    critic_losses, penalties, generator_losses, draw = [], [], [], 0
    for i, (real,) in enumerate(loader):
        z = torch.tensor(noise[draw])
        alpha = torch.tensor(mixing[draw])
        draw += 1
        fake = generator(z).detach()
        critic_optimizer.zero_grad()
        penalty = gradient_penalty(real, fake, alpha)
        loss = critic(fake).mean() - critic(real).mean() + penalty_weight * penalty
        loss.backward()
        critic_optimizer.step()
        critic_losses.append(loss.detach())
        penalties.append(penalty.detach())
        if (i + 1) % critic_steps == 0:
            for p in critic.parameters():
                p.requires_grad_(False)
            generator_optimizer.zero_grad()
            generator_loss = -critic(generator(torch.tensor(noise[draw]))).mean()
            draw += 1
            generator_loss.backward()
            generator_optimizer.step()
            generator_losses.append(generator_loss.detach())
            for p in critic.parameters():
                p.requires_grad_(True)
    return {
        "critic_losses": torch.stack(critic_losses),
        "penalties": torch.stack(penalties),
        "generator_losses": torch.stack(generator_losses),
        "generator": parameters_of(generator),
        "critic": parameters_of(critic),
    }


def ring_of_gaussians(rng, count, modes=8, radius=2.0, spread=0.05):
    angles = 2 * np.pi * rng.integers(0, modes, count) / modes
    centres = radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    return centres + spread * rng.normal(size=(count, 2))


def test_wgan_gp_matches_torch():
    rng = np.random.default_rng(1)
    states = {"generator": mlp_state(rng, [2, 16, 2]), "critic": mlp_state(rng, [2, 16, 1])}
    real_points = ring_of_gaussians(rng, 64)
    noise = rng.normal(size=(8, 16, 2))
    mixing = rng.uniform(size=(8, 16, 1))
    expected, _ = run_both(wgan_gp_program, states, real_points, noise, mixing)
    assert len(expected["generator_losses"]) == 2
