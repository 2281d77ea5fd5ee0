"""More of eriklindernoren/PyTorch-GAN run with torch and with batched_grad from the same seeds in float64: the MLP
GANs that differ by their losses and updates (WGAN with weight clipping and RMSprop, WGAN-GP and DRAGAN gradient
penalties through autograd.grad(create_graph=True), WGAN-div, softmax GAN, whose generator backward after the
discriminator's step raises torch's in-place error, BGAN, the relativistic average GAN, LSGAN and the label-embedding
CGAN), pix2pix's U-Net with a patch discriminator beside CycleGAN's residual generators, replay buffers and
LambdaLR schedule, and the context encoder's inpainting beside ACGAN, at toy sizes on random images."""

import itertools
import random

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default
from test_fresh_programs_teach_gan import weights_init_normal


def mlp_gan_losses(m):
    """Each GAN variant trains a fresh generator (Linear + BatchNorm1d(c, 0.8) blocks, Tanh) and discriminator for
    three batches; the losses, the penalties and the error are compared."""
    nn, autograd = m.nn, m.autograd
    Variable, Tensor, LongTensor = autograd.Variable, m.DoubleTensor, m.LongTensor
    rng = np.random.RandomState(0)

    def generator(classes=0):
        blocks = [nn.Linear(4 + classes, 8), nn.LeakyReLU(0.2, inplace=True)]
        for cin, cout in ((8, 16), (16, 32)):
            blocks += [nn.Linear(cin, cout), nn.BatchNorm1d(cout, 0.8), nn.LeakyReLU(0.2, inplace=True)]
        return nn.Sequential(*blocks, nn.Linear(32, 16), nn.Tanh(), nn.Unflatten(1, (1, 4, 4)))

    def discriminator(sigmoid=False, classes=0):
        layers = [nn.Flatten(), nn.Linear(16 + classes, 8), nn.LeakyReLU(0.2, inplace=True), nn.Linear(8, 1)]
        return nn.Sequential(*layers, *([nn.Sigmoid()] if sigmoid else []))

    def noise():
        return Variable(Tensor(rng.normal(0, 1, (6, 4))))

    def input_gradient(d, x, penalty_of):
        out = d(x)
        ones = Variable(Tensor(x.shape[0], 1).fill_(1.0), requires_grad=False)
        grad = autograd.grad(outputs=out, inputs=x, grad_outputs=ones, create_graph=True, retain_graph=True)[0]
        return out, penalty_of(grad.view(grad.size(0), -1))

    results = []
    with float64_default(m):
        batches = [m.rand(6, 1, 4, 4) * 2 - 1 for _ in range(3)]
        for variant in ("wgan", "wgan_gp", "wgan_div", "dragan", "softmax", "bgan", "relativistic", "lsgan", "cgan"):
            classes = 3 if variant == "cgan" else 0
            g, d = generator(classes), discriminator(variant in ("dragan", "bgan"), classes)
            if variant == "cgan":
                g_embed, d_embed = nn.Embedding(3, 3), nn.Embedding(3, 3)
                g_in, d_in = g, d
                g = lambda z, y: g_in(m.cat((g_embed(y), z), -1))  # noqa: E731
                d = lambda img, y: d_in(m.cat((img.view(6, -1), d_embed(y)), -1))  # noqa: E731
                g_params, d_params = (
                    [*g_in.parameters(), *g_embed.parameters()],
                    [*d_in.parameters(), *d_embed.parameters()],
                )
            else:
                g_params, d_params = list(g.parameters()), list(d.parameters())
            make = (
                (lambda p: m.optim.RMSprop(p, lr=5e-5))
                if variant == "wgan"
                else (lambda p: m.optim.Adam(p, lr=2e-4, betas=(0.5, 0.999)))
            )
            opt_g, opt_d = make(g_params), make(d_params)
            valid, fake = Tensor(6, 1).fill_(1.0), Tensor(6, 1).fill_(0.0)
            for i, real in enumerate(batches):
                z = noise()
                if variant in ("wgan", "wgan_gp", "wgan_div"):
                    opt_d.zero_grad()
                    real_in = Variable(real.type(Tensor), requires_grad=variant == "wgan_div")
                    fakes = g(z)
                    d_loss = -m.mean(d(real_in)) + m.mean(d(fakes.detach() if variant == "wgan" else fakes))
                    if variant == "wgan_gp":
                        alpha = Tensor(rng.random_sample((6, 1, 1, 1)))
                        mixed = (alpha * real.data + (1 - alpha) * fakes.data).requires_grad_(True)
                        _, penalty = input_gradient(d, mixed, lambda grad: ((grad.norm(2, dim=1) - 1) ** 2).mean())
                        d_loss = d_loss + 10 * penalty
                    elif variant == "wgan_div":
                        power = lambda grad: grad.pow(2).sum(1) ** 3  # noqa: E731
                        _, real_norm = input_gradient(d, real_in, power)
                        _, fake_norm = input_gradient(d, fakes, power)
                        d_loss = d_loss + m.mean(real_norm + fake_norm) * 2 / 2
                    d_loss.backward()
                    opt_d.step()
                    if variant == "wgan":
                        for p in d.parameters():
                            p.data.clamp_(-0.01, 0.01)
                    opt_g.zero_grad()
                    if i % 2 == 0:
                        g_loss = -m.mean(d(g(z)))
                        g_loss.backward()
                        opt_g.step()
                    results += [d_loss.detach(), g_loss.detach()]
                elif variant == "softmax":
                    opt_g.zero_grad()
                    opt_d.zero_grad()
                    d_real, d_fake = d(real), d(g(z))
                    partition = m.sum(m.exp(-d_real)) + m.sum(m.exp(-d_fake))
                    d_loss = m.sum(d_real) / 6 + m.log(partition + 1e-8)
                    d_loss.backward(retain_graph=True)
                    opt_d.step()
                    g_loss = (m.sum(d_real) + m.sum(d_fake)) / 12 + m.log(partition + 1e-8)
                    with pytest.raises(RuntimeError, match="modified by an inplace operation") as error:
                        g_loss.backward()
                    assert "is at version" in str(error.value)
                    break
                else:
                    labels = LongTensor(rng.randint(0, 3, 6)) if classes else None
                    gen_labels = LongTensor(rng.randint(0, 3, 6)) if classes else None
                    judge = (lambda x, y: d(x, y)) if classes else (lambda x, y: d(x))
                    opt_g.zero_grad()
                    gen = g(z, gen_labels) if classes else g(z)
                    loss_fn = {"dragan": nn.BCELoss(), "bgan": nn.BCELoss(), "relativistic": nn.BCEWithLogitsLoss()}
                    adversarial = loss_fn.get(variant, nn.MSELoss())
                    if variant == "bgan":
                        pred = judge(gen, gen_labels)
                        g_loss = 0.5 * m.mean((m.log(pred) - m.log(1 - pred)) ** 2)
                    elif variant == "relativistic":
                        g_loss = adversarial(judge(gen, None) - judge(real, None).detach().mean(0, keepdim=True), valid)
                    else:
                        g_loss = adversarial(judge(gen, gen_labels), valid)
                    g_loss.backward()
                    opt_g.step()
                    opt_d.zero_grad()
                    real_pred, fake_pred = judge(real, labels), judge(gen.detach(), gen_labels)
                    if variant == "relativistic":
                        real_loss = adversarial(real_pred - fake_pred.mean(0, keepdim=True), valid)
                        fake_loss = adversarial(fake_pred - real_pred.mean(0, keepdim=True), fake)
                    else:
                        real_loss, fake_loss = adversarial(real_pred, valid), adversarial(fake_pred, fake)
                    d_loss = (real_loss + fake_loss) / 2
                    d_loss.backward()
                    if variant == "dragan":
                        x = real.data
                        alpha = Tensor(rng.random_sample(size=x.shape))
                        mixed = Variable(
                            alpha * x + (1 - alpha) * (x + 0.5 * x.std() * m.rand(x.size())), requires_grad=True
                        )
                        _, penalty = input_gradient(d, mixed, lambda grad: 10 * ((grad.norm(2, dim=1) - 1) ** 2).mean())
                        penalty.backward()
                        results.append(penalty.detach())
                    opt_d.step()
                    results += [d_loss.detach(), g_loss.detach()]
    return results


@pytest.mark.slow
def test_mlp_gan_losses():
    _both(mlp_gan_losses, F64)


def image_translation(m):
    """pix2pix: a U-Net of strided convolutions (InstanceNorm2d, Dropout) and transposed ones joined by skip
    concatenations, ending in Upsample + ZeroPad2d((1, 0, 1, 0)) + Conv2d, against a patch discriminator on image
    pairs; CycleGAN: ReflectionPad2d residual generators both ways, identity and cycle L1 losses, discriminators fed
    through replay buffers (random.uniform choosing stored fakes), and LambdaLR decaying linearly after epoch 1."""
    nn = m.nn
    Variable, Tensor = m.autograd.Variable, m.DoubleTensor
    chooser = random.Random(0)

    def down(cin, cout, normalize=True, dropout=0.0):
        layers = [nn.Conv2d(cin, cout, 4, 2, 1, bias=False)] + ([nn.InstanceNorm2d(cout)] if normalize else [])
        return nn.Sequential(*layers, nn.LeakyReLU(0.2), *([nn.Dropout(dropout)] if dropout else []))

    def up(cin, cout, dropout=0.0):
        layers = [nn.ConvTranspose2d(cin, cout, 4, 2, 1, bias=False), nn.InstanceNorm2d(cout), nn.ReLU(inplace=True)]
        return nn.Sequential(*layers, *([nn.Dropout(dropout)] if dropout else []))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.downs = nn.ModuleList([down(3, 4, normalize=False), down(4, 8), down(8, 8, dropout=0.5)])
            self.ups = nn.ModuleList([up(8, 8, dropout=0.5), up(16, 4)])
            self.final = nn.Sequential(
                nn.Upsample(scale_factor=2), nn.ZeroPad2d((1, 0, 1, 0)), nn.Conv2d(8, 3, 4, padding=1), nn.Tanh()
            )

        def forward(self, x):
            skips = []
            for layer in self.downs:
                x = layer(x)
                skips.append(x)
            for layer, skip in zip(self.ups, reversed(skips[:-1])):
                x = m.cat((layer(x), skip), 1)
            return self.final(x)

    def patch_discriminator(cin, depth):
        layers, width = [], 4
        for level in range(depth):
            layers += [nn.Conv2d(cin if level == 0 else width // 2, width, 4, stride=2, padding=1)]
            layers += ([nn.InstanceNorm2d(width)] if level else []) + [nn.LeakyReLU(0.2, inplace=True)]
            width *= 2
        return nn.Sequential(*layers, nn.ZeroPad2d((1, 0, 1, 0)), nn.Conv2d(width // 2, 1, 4, padding=1))

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.block = nn.Sequential(
                nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c), nn.ReLU(inplace=True)
            )
            self.block.extend([nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c)])

        def forward(self, x):
            return x + self.block(x)

    def resnet_generator():
        layers = [nn.ReflectionPad2d(3), nn.Conv2d(3, 4, 7), nn.InstanceNorm2d(4), nn.ReLU(inplace=True)]
        layers += [nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.InstanceNorm2d(8), nn.ReLU(inplace=True), Residual(8)]
        layers += [nn.Upsample(scale_factor=2), nn.Conv2d(8, 4, 3, 1, 1), nn.InstanceNorm2d(4), nn.ReLU(inplace=True)]
        return nn.Sequential(*layers, nn.ReflectionPad2d(3), nn.Conv2d(4, 3, 7), nn.Tanh())

    def push_and_pop(buffer, batch):
        chosen = []
        for element in batch.data:
            element = m.unsqueeze(element, 0)
            if len(buffer) < 3:
                buffer.append(element)
                chosen.append(element)
            elif chooser.uniform(0, 1) > 0.5:
                i = chooser.randint(0, 2)
                chosen.append(buffer[i].clone())
                buffer[i] = element
            else:
                chosen.append(element)
        return Variable(m.cat(chosen))

    out = []
    with float64_default(m):
        init = lambda module: weights_init_normal(m, module)  # noqa: E731
        pairs = [{"A": m.rand(3, 16, 16) * 2 - 1, "B": m.rand(3, 16, 16) * 2 - 1} for _ in range(4)]
        loader = m.utils.data.DataLoader(pairs, batch_size=2, shuffle=True)
        generator, judge = UNet().apply(init), patch_discriminator(6, 3).apply(init)
        opt_g, opt_d = m.optim.Adam(generator.parameters(), lr=2e-4), m.optim.Adam(judge.parameters(), lr=2e-4)
        for batch in loader:
            real_a, real_b = Variable(batch["B"].type(Tensor)), Variable(batch["A"].type(Tensor))
            valid, fake = Tensor(np.ones((2, 1, 2, 2))), Tensor(np.zeros((2, 1, 2, 2)))
            opt_g.zero_grad()
            fake_b = generator(real_a)
            loss_g = nn.MSELoss()(judge(m.cat((fake_b, real_a), 1)), valid) + 100 * nn.L1Loss()(fake_b, real_b)
            loss_g.backward()
            opt_g.step()
            opt_d.zero_grad()
            pred_real, pred_fake = judge(m.cat((real_b, real_a), 1)), judge(m.cat((fake_b.detach(), real_a), 1))
            loss_d = 0.5 * (nn.MSELoss()(pred_real, valid) + nn.MSELoss()(pred_fake, fake))
            loss_d.backward()
            opt_d.step()
            out += [loss_g.detach(), loss_d.detach()]

        g_ab, g_ba = resnet_generator().apply(init), resnet_generator().apply(init)
        d_a, d_b = patch_discriminator(3, 3).apply(init), patch_discriminator(3, 3).apply(init)
        opt_g = m.optim.Adam(itertools.chain(g_ab.parameters(), g_ba.parameters()), lr=2e-4, betas=(0.5, 0.999))
        opt_da, opt_db = (m.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999)) for d in (d_a, d_b))
        decay = lambda epoch: 1.0 - max(0, epoch - 1) / (3 - 1)  # noqa: E731
        schedulers = [m.optim.lr_scheduler.LambdaLR(o, lr_lambda=decay) for o in (opt_g, opt_da, opt_db)]
        buffers = ([], [])
        l1 = nn.L1Loss()
        for _ in range(2):
            for batch in loader:
                real_a, real_b = batch["A"].type(Tensor), batch["B"].type(Tensor)
                valid, fake = Tensor(np.ones((2, 1, 2, 2))), Tensor(np.zeros((2, 1, 2, 2)))
                opt_g.zero_grad()
                identity = (l1(g_ba(real_a), real_a) + l1(g_ab(real_b), real_b)) / 2
                fake_b, fake_a = g_ab(real_a), g_ba(real_b)
                adversarial = (nn.MSELoss()(d_b(fake_b), valid) + nn.MSELoss()(d_a(fake_a), valid)) / 2
                cycle = (l1(g_ba(fake_b), real_a) + l1(g_ab(fake_a), real_b)) / 2
                loss_g = adversarial + 10.0 * cycle + 5.0 * identity
                loss_g.backward()
                opt_g.step()
                for d, opt, real, fakes, buffer in (
                    (d_a, opt_da, real_a, fake_a, buffers[0]),
                    (d_b, opt_db, real_b, fake_b, buffers[1]),
                ):
                    opt.zero_grad()
                    replayed = push_and_pop(buffer, fakes)
                    loss_d = (nn.MSELoss()(d(real), valid) + nn.MSELoss()(d(replayed.detach()), fake)) / 2
                    loss_d.backward()
                    opt.step()
                    out.append(loss_d.detach())
                out += [loss_g.detach(), cycle.detach()]
            for scheduler in schedulers:
                scheduler.step()
            out.append(schedulers[0].get_last_lr())
    return out


@pytest.mark.slow
def test_image_translation():
    _both(image_translation, F64)


def inpainting_and_auxiliary_classifier(m):
    """The context encoder: random square holes cut with masked[i, :, y1:y2, x1:x2] = 1 (the cut parts cloned and
    concatenated as targets), an encoder-decoder generator (ConvTranspose2d, BatchNorm2d(c, 0.8)) trained with a
    weighted adversarial + L1 loss, and a centre hole filled in place with the generator's output; then ACGAN's
    generator of an embedding multiplied into the noise, with a Sigmoid validity head and a Softmax() class head."""
    nn = m.nn
    Variable, Tensor, LongTensor = m.autograd.Variable, m.DoubleTensor, m.LongTensor
    rng = np.random.RandomState(0)
    init = lambda module: weights_init_normal(m, module)  # noqa: E731

    def down(cin, cout, normalize=True):
        norm = [nn.BatchNorm2d(cout, 0.8)] if normalize else []
        return [nn.Conv2d(cin, cout, 4, stride=2, padding=1), *norm, nn.LeakyReLU(0.2, inplace=True)]

    def up(cin, cout):
        return [nn.ConvTranspose2d(cin, cout, 4, stride=2, padding=1), nn.BatchNorm2d(cout, 0.8), nn.ReLU(inplace=True)]

    out = []
    with float64_default(m), pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        generator = nn.Sequential(*down(3, 4, False), *down(4, 8), nn.Conv2d(8, 16, 1), *up(16, 4))
        generator.extend([nn.Conv2d(4, 3, 3, 1, 1), nn.Tanh()])
        layers = [nn.Conv2d(3, 4, 3, 2, 1), nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(4, 8, 3, 2, 1)]
        discriminator = nn.Sequential(*layers, nn.InstanceNorm2d(8), nn.LeakyReLU(0.2, True), nn.Conv2d(8, 1, 3, 1, 1))
        generator.apply(init), discriminator.apply(init)
        opt_g, opt_d = (
            m.optim.Adam(net.parameters(), lr=2e-4, betas=(0.5, 0.999)) for net in (generator, discriminator)
        )
        images = m.rand(4, 3, 16, 16) * 2 - 1
        for _ in range(2):
            masked, parts = images.clone(), None
            for i, (y1, x1) in enumerate(rng.randint(0, 8, (4, 2))):
                part = masked[i : i + 1, :, y1 : y1 + 8, x1 : x1 + 8].clone()
                parts = part if parts is None else m.cat((parts, part), 0)
                masked[i, :, y1 : y1 + 8, x1 : x1 + 8] = 1
            valid, fake = Tensor(4, 1, 2, 2).fill_(1.0), Tensor(4, 1, 2, 2).fill_(0.0)
            opt_g.zero_grad()
            filled = generator(Variable(masked.type(Tensor)))
            g_adv, g_pixel = nn.MSELoss()(discriminator(filled), valid), nn.L1Loss()(filled, parts)
            (0.001 * g_adv + 0.999 * g_pixel).backward()
            opt_g.step()
            opt_d.zero_grad()
            d_loss = 0.5 * (
                nn.MSELoss()(discriminator(parts), valid) + nn.MSELoss()(discriminator(filled.detach()), fake)
            )
            d_loss.backward()
            opt_d.step()
            out += [g_adv.detach(), g_pixel.detach(), d_loss.detach()]
        centre = images.clone()
        centre[:, :, 4:12, 4:12] = 1
        centre[:, :, 4:12, 4:12] = generator(centre)
        out.append(centre)

        label_emb = nn.Embedding(3, 6)
        g_body = nn.Sequential(nn.Linear(6, 8 * 4 * 4), nn.Unflatten(1, (8, 4, 4)), nn.BatchNorm2d(8))
        g_body.extend([nn.Upsample(scale_factor=2), nn.Conv2d(8, 1, 3, 1, 1), nn.Tanh()])
        trunk = nn.Sequential(nn.Conv2d(1, 4, 3, 2, 1), nn.LeakyReLU(0.2, inplace=True), nn.Dropout(0.25), nn.Flatten())
        validity_head, class_head = (
            nn.Sequential(nn.Linear(64, 1), nn.Sigmoid()),
            nn.Sequential(nn.Linear(64, 3), nn.Softmax()),
        )
        for net in (g_body, trunk):
            net.apply(init)
        opt_g = m.optim.Adam([*label_emb.parameters(), *g_body.parameters()], lr=2e-4, betas=(0.5, 0.999))
        opt_d = m.optim.Adam([*trunk.parameters(), *validity_head.parameters(), *class_head.parameters()], lr=2e-4)
        real, labels = m.rand(6, 1, 8, 8) * 2 - 1, m.randint(0, 3, (6,))
        for _ in range(2):
            valid, fake = Variable(Tensor(6, 1).fill_(1.0), requires_grad=False), Tensor(6, 1).fill_(0.0)
            gen_labels = Variable(LongTensor(rng.randint(0, 3, 6)))
            opt_g.zero_grad()
            gen = g_body(m.mul(label_emb(gen_labels), Tensor(rng.normal(0, 1, (6, 6)))))
            features = trunk(gen)
            g_loss = 0.5 * (
                nn.BCELoss()(validity_head(features), valid) + nn.CrossEntropyLoss()(class_head(features), gen_labels)
            )
            g_loss.backward()
            opt_g.step()
            opt_d.zero_grad()
            real_f, fake_f = trunk(real), trunk(gen.detach())
            d_loss = (
                nn.BCELoss()(validity_head(real_f), valid) + nn.CrossEntropyLoss()(class_head(real_f), labels)
            ) / 4
            d_loss = (
                d_loss
                + (nn.BCELoss()(validity_head(fake_f), fake) + nn.CrossEntropyLoss()(class_head(fake_f), gen_labels))
                / 4
            )
            pred = np.concatenate([class_head(real_f).data.numpy(), class_head(fake_f).data.numpy()], axis=0)
            accuracy = float(np.mean(np.argmax(pred, axis=1) == np.concatenate([labels.numpy(), gen_labels.numpy()])))
            d_loss.backward()
            opt_d.step()
            out += [g_loss.detach(), d_loss.detach(), accuracy]
    return out


@pytest.mark.slow
def test_inpainting_and_auxiliary_classifier():
    _both(inpainting_and_auxiliary_classifier, F64)
