"""Vision building blocks as public code writes them, each run with torch and with batched_grad from the same seed in
float64 and compared number for number: CycleGAN / pix2pix networks and steps (junyanz/pytorch-CycleGAN-and-pix2pix:
ResNet and U-Net generators, PatchGAN and pixel discriminators, the lsgan/vanilla/wgangp losses, the gradient
penalty, the image pool, init_weights and the schedulers), milesial/Pytorch-UNet with its dice loss, the Lovasz
and focal segmentation losses; detection (SSD matching and NMS, YOLOv5 targets), saliency, attention and mobile
blocks and training tricks are in test_fresh_programs_vision2.py.
torchvision is not used: the few pieces taken from it are written here; data is random and small."""

import functools
import itertools
import random

import pytest
import torch

import batched_grad as bg
from oracle import assert_same

F64 = dict(rtol=1e-9, atol=1e-11)
# a conv bias ahead of an instance norm has a zero gradient up to rounding, which Adam's step normalizes: its sum
# after a few steps is float64 noise (about 1e-9) on either side
GAN_F64 = dict(rtol=1e-9, atol=1e-8)


def _both(program, tolerance=F64):
    expected, actual = program(torch), program(bg)
    assert_same(actual, expected, **tolerance)


def _float64(m, seed=0):
    m.manual_seed(seed)
    m.set_default_dtype(m.float64)


def _state_sums(*modules):
    return [v.detach().double().abs().sum() for net in modules for v in net.state_dict().values()]


def _gan_parts(m):
    """The networks of the CycleGAN repository's networks.py, shortened but with its structure."""
    nn = m.nn

    def norm_layer(kind):
        if kind == "instance":
            return functools.partial(nn.InstanceNorm2d, affine=False, track_running_stats=False)
        return functools.partial(nn.BatchNorm2d, affine=True, track_running_stats=True)

    def uses_bias(norm):
        return norm.func == nn.InstanceNorm2d

    class ResBlock(nn.Module):
        def __init__(self, dim, norm, pad):
            super().__init__()
            layers = []
            for last in (False, True):
                layers += [pad(1), nn.Conv2d(dim, dim, 3, bias=uses_bias(norm)), norm(dim)]
                layers += [] if last else [nn.ReLU(True), nn.Dropout(0.5)]
            self.block = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.block(x)

    def resnet_generator(ngf, norm, pad=nn.ReflectionPad2d):
        layers = [nn.ReflectionPad2d(3), nn.Conv2d(3, ngf, 7, bias=uses_bias(norm)), norm(ngf), nn.ReLU(True)]
        for i in range(2):
            c = ngf * 2**i
            layers += [nn.Conv2d(c, 2 * c, 3, 2, 1, bias=uses_bias(norm)), norm(2 * c), nn.ReLU(True)]
        layers += [ResBlock(4 * ngf, norm, pad) for _ in range(2)]
        for i in range(2):
            c = ngf * 2 ** (2 - i)
            layers += [nn.ConvTranspose2d(c, c // 2, 3, 2, 1, output_padding=1, bias=uses_bias(norm))]
            layers += [norm(c // 2), nn.ReLU(True)]
        layers += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, 3, 7), nn.Tanh()]
        return nn.Sequential(*layers)

    def patch_discriminator(inputs, ndf, n_layers, norm):
        layers, mult = [nn.Conv2d(inputs, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True)], 1
        for n in range(1, n_layers + 1):
            prev, mult = mult, min(2**n, 8)
            stride = 2 if n < n_layers else 1
            layers += [nn.Conv2d(ndf * prev, ndf * mult, 4, stride, 1, bias=uses_bias(norm)), norm(ndf * mult)]
            layers += [nn.LeakyReLU(0.2, True)]
        return nn.Sequential(*layers, nn.Conv2d(ndf * mult, 1, 4, 1, 1))

    def pixel_discriminator(ndf, norm):
        return nn.Sequential(
            nn.Conv2d(3, ndf, 1),
            nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf, 2 * ndf, 1, bias=uses_bias(norm)),
            norm(2 * ndf),
            nn.LeakyReLU(0.2, True),
            nn.Conv2d(2 * ndf, 1, 1, bias=uses_bias(norm)),
        )

    def init_weights(net, kind, gain=0.02):
        def visit(mod):
            name = mod.__class__.__name__
            if hasattr(mod, "weight") and ("Conv" in name or "Linear" in name):
                {
                    "normal": lambda w: nn.init.normal_(w, 0.0, gain),
                    "xavier": lambda w: nn.init.xavier_normal_(w, gain=gain),
                    "kaiming": lambda w: nn.init.kaiming_normal_(w, a=0, mode="fan_in"),
                    "orthogonal": lambda w: nn.init.orthogonal_(w, gain=gain),
                }[kind](mod.weight.data)
                if getattr(mod, "bias", None) is not None:
                    nn.init.constant_(mod.bias.data, 0.0)
            elif "BatchNorm2d" in name:
                nn.init.normal_(mod.weight.data, 1.0, gain)
                nn.init.constant_(mod.bias.data, 0.0)

        net.apply(visit)
        return net

    class GANLoss(nn.Module):
        def __init__(self, mode):
            super().__init__()
            self.register_buffer("real_label", m.tensor(1.0))
            self.register_buffer("fake_label", m.tensor(0.0))
            self.mode = mode
            self.loss = {"lsgan": nn.MSELoss(), "vanilla": nn.BCEWithLogitsLoss(), "wgangp": None}[mode]

        def __call__(self, prediction, real):
            if self.mode == "wgangp":
                return -prediction.mean() if real else prediction.mean()
            return self.loss(prediction, (self.real_label if real else self.fake_label).expand_as(prediction))

    def gradient_penalty(net, real, fake, weight=10.0):
        alpha = m.rand(real.shape[0], 1)
        alpha = alpha.expand(real.shape[0], real.nelement() // real.shape[0]).contiguous().view(*real.shape)
        mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        out = net(mixed)
        (grads,) = m.autograd.grad(out, mixed, m.ones(out.size()), create_graph=True, retain_graph=True)
        grads = grads.view(real.size(0), -1)
        return (((grads + 1e-16).norm(2, dim=1) - 1.0) ** 2).mean() * weight

    return dict(
        norm_layer=norm_layer,
        resnet_generator=resnet_generator,
        patch_discriminator=patch_discriminator,
        pixel_discriminator=pixel_discriminator,
        init_weights=init_weights,
        GANLoss=GANLoss,
        gradient_penalty=gradient_penalty,
    )


class ImagePool:
    """Half the time a query returns an image generated earlier, stored in its place (CycleGAN's history buffer)."""

    def __init__(self, m, size, rng):
        self.m, self.size, self.rng, self.images = m, size, rng, []

    def query(self, images):
        out = []
        for image in images:
            image = self.m.unsqueeze(image.data, 0)
            if len(self.images) < self.size:
                self.images.append(image)
                out.append(image)
            elif self.rng.uniform(0, 1) > 0.5:
                slot = self.rng.randint(0, self.size - 1)
                out.append(self.images[slot].clone())
                self.images[slot] = image
            else:
                out.append(image)
        return self.m.cat(out, 0)


def cyclegan_steps(m):
    """Two generators and two discriminators (PatchGAN with instance norm, pixel with batch norm), the cycle and
    identity L1 losses, discriminators frozen by requires_grad during the generator step, image pools, Adam with
    LambdaLR's linear decay."""
    _float64(m)
    parts, rng = _gan_parts(m), random.Random(0)
    inorm, bnorm = parts["norm_layer"]("instance"), parts["norm_layer"]("batch")
    g_ab = parts["init_weights"](parts["resnet_generator"](4, inorm), "normal")
    g_ba = parts["init_weights"](parts["resnet_generator"](4, inorm, m.nn.ReplicationPad2d), "xavier")
    d_b = parts["init_weights"](parts["patch_discriminator"](3, 4, 3, inorm), "kaiming")
    d_a = parts["init_weights"](parts["pixel_discriminator"](4, bnorm), "orthogonal")
    gan, l1 = parts["GANLoss"]("lsgan"), m.nn.L1Loss()
    opt_g = m.optim.Adam(itertools.chain(g_ab.parameters(), g_ba.parameters()), lr=2e-4, betas=(0.5, 0.999))
    opt_d = m.optim.Adam(itertools.chain(d_a.parameters(), d_b.parameters()), lr=2e-4, betas=(0.5, 0.999))
    decay = [m.optim.lr_scheduler.LambdaLR(o, lambda e: 1.0 - max(0, e - 1) / 4.0) for o in (opt_g, opt_d)]
    pools, out = (ImagePool(m, 1, rng), ImagePool(m, 1, rng)), []
    for _ in range(2):
        real_a, real_b = m.rand(2, 3, 32, 32) * 2 - 1, m.rand(2, 3, 32, 32) * 2 - 1
        fake_b, fake_a = g_ab(real_a), g_ba(real_b)
        for p in itertools.chain(d_a.parameters(), d_b.parameters()):
            p.requires_grad = False
        opt_g.zero_grad()
        loss_g = gan(d_b(fake_b), True) + gan(d_a(fake_a), True)
        loss_g = loss_g + 10 * (l1(g_ba(fake_b), real_a) + l1(g_ab(fake_a), real_b))
        loss_g = loss_g + 5 * (l1(g_ab(real_b), real_b) + l1(g_ba(real_a), real_a))
        loss_g.backward()
        opt_g.step()
        for p in itertools.chain(d_a.parameters(), d_b.parameters()):
            p.requires_grad = True
        opt_d.zero_grad()
        for net, real, fake, pool in ((d_b, real_b, fake_b, pools[0]), (d_a, real_a, fake_a, pools[1])):
            loss_d = (gan(net(real), True) + gan(net(pool.query(fake).detach()), False)) * 0.5
            loss_d.backward()
            out.append(loss_d.detach())
        opt_d.step()
        for s in decay:
            s.step()
        out += [loss_g.detach(), opt_g.param_groups[0]["lr"]]
    return out + _state_sums(g_ab, g_ba, d_a, d_b)


def pix2pix_steps(m):
    """pix2pix: the recursive U-Net generator (skip blocks concatenating their input, dropout in the inner ones),
    a conditional PatchGAN on (input, output) pairs with batch norm, vanilla GAN + 100 * L1, a WGAN-GP penalty
    and critic terms, StepLR, CosineAnnealingLR and ReduceLROnPlateau."""
    _float64(m, 1)
    nn, parts = m.nn, _gan_parts(m)
    norm = parts["norm_layer"]("batch")

    class SkipBlock(nn.Module):
        def __init__(self, outer, inner, inputs=None, sub=None, outermost=False, innermost=False, dropout=False):
            super().__init__()
            self.outermost, inputs = outermost, inputs or outer
            down = nn.Conv2d(inputs, inner, 4, 2, 1, bias=False)
            if outermost:
                layers = [down, sub, nn.ReLU(True), nn.ConvTranspose2d(2 * inner, outer, 4, 2, 1), nn.Tanh()]
            elif innermost:
                layers = [nn.LeakyReLU(0.2, True), down, nn.ReLU(True)]
                layers += [nn.ConvTranspose2d(inner, outer, 4, 2, 1, bias=False), norm(outer)]
            else:
                layers = [nn.LeakyReLU(0.2, True), down, norm(inner), sub, nn.ReLU(True)]
                layers += [nn.ConvTranspose2d(2 * inner, outer, 4, 2, 1, bias=False), norm(outer)]
                layers += [nn.Dropout(0.5)] if dropout else []
            self.model = nn.Sequential(*layers)

        def forward(self, x):
            return self.model(x) if self.outermost else m.cat([x, self.model(x)], 1)

    block = SkipBlock(32, 32, innermost=True)
    for outer, inner in ((16, 32), (8, 16), (4, 8)):
        block = SkipBlock(outer, inner, sub=block, dropout=inner == 32)
    gen = parts["init_weights"](SkipBlock(3, 4, inputs=3, sub=block, outermost=True), "normal")
    disc = parts["init_weights"](parts["patch_discriminator"](6, 4, 2, norm), "normal")
    vanilla, critic = parts["GANLoss"]("vanilla"), parts["GANLoss"]("wgangp")
    opt_g = m.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = m.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    step, cosine = m.optim.lr_scheduler.StepLR(opt_g, 1, gamma=0.1), m.optim.lr_scheduler.CosineAnnealingLR(opt_d, 2)
    plateau = m.optim.lr_scheduler.ReduceLROnPlateau(opt_g, mode="min", factor=0.2, threshold=0.01, patience=0)
    out = []
    for _ in range(3):
        a, b = m.rand(2, 3, 32, 32) * 2 - 1, m.rand(2, 3, 32, 32) * 2 - 1
        fake = gen(a)
        opt_d.zero_grad()
        fake_pair, real_pair = m.cat((a, fake), 1), m.cat((a, b), 1)
        pred_fake, pred_real = disc(fake_pair.detach()), disc(real_pair)
        penalty = parts["gradient_penalty"](disc, real_pair, fake_pair.detach())
        loss_d = (vanilla(pred_fake, False) + vanilla(pred_real, True)) * 0.5 + penalty
        loss_d = loss_d + 0.1 * (critic(pred_fake, False) + critic(pred_real, True))
        loss_d.backward()
        opt_d.step()
        for p in disc.parameters():
            p.requires_grad_(False)
        opt_g.zero_grad()
        loss_g = vanilla(disc(m.cat((a, fake), 1)), True) + m.nn.L1Loss()(fake, b) * 100.0
        loss_g.backward()
        opt_g.step()
        for p in disc.parameters():
            p.requires_grad_(True)
        step.step()
        cosine.step()
        plateau.step(loss_g.item())
        out += [loss_d.detach(), penalty.detach(), loss_g.detach(), opt_g.param_groups[0]["lr"]]
    return out + _state_sums(gen, disc)


@pytest.mark.slow
def test_cyclegan_steps():
    _both(cyclegan_steps, GAN_F64)


@pytest.mark.slow
def test_pix2pix_steps():
    _both(pix2pix_steps)


def unet_dice_steps(m):
    """milesial's U-Net (double convs, max-pool downs, transposed-conv or bilinear ups padded to the skip's size),
    cross entropy or BCE plus the dice loss, RMSprop with foreach, gradient clipping, ReduceLROnPlateau on the
    evaluation dice of argmax / thresholded masks under inference_mode, channels_last inputs."""
    _float64(m)
    nn, F = m.nn, m.nn.functional

    def double_conv(cin, cout, mid=None):
        mid = mid or cout
        return nn.Sequential(
            nn.Conv2d(cin, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        )  # fmt: skip

    class Up(nn.Module):
        def __init__(self, cin, cout, bilinear):
            super().__init__()
            if bilinear:
                self.up, self.conv = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), None
                self.conv = double_conv(cin, cout, cin // 2)
            else:
                self.up, self.conv = nn.ConvTranspose2d(cin, cin // 2, 2, stride=2), double_conv(cin, cout)

        def forward(self, low, skip):
            low = self.up(low)
            dy, dx = skip.size()[2] - low.size()[2], skip.size()[3] - low.size()[3]
            low = F.pad(low, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
            return self.conv(m.cat([skip, low], dim=1))

    class UNet(nn.Module):
        def __init__(self, classes, bilinear, base=4):
            super().__init__()
            self.classes, factor = classes, 2 if bilinear else 1
            widths = [base, 2 * base, 4 * base, 8 * base, 16 * base // factor]
            self.inc = double_conv(3, base)
            self.downs = nn.ModuleList(
                nn.Sequential(nn.MaxPool2d(2), double_conv(a, b)) for a, b in zip(widths, widths[1:])
            )
            ups = [(16 * base, 8 * base // factor), (8 * base, 4 * base // factor), (4 * base, 2 * base // factor)]
            self.ups = nn.ModuleList(Up(a, b, bilinear) for a, b in ups + [(2 * base, base)])
            self.outc = nn.Conv2d(base, classes, 1)

        def forward(self, x):
            skips = [self.inc(x)]
            for down in self.downs:
                skips.append(down(skips[-1]))
            x = skips.pop()
            for up in self.ups:
                x = up(x, skips.pop())
            return self.outc(x)

    def dice_coeff(pred, target, reduce_batch_first=False, eps=1e-6):
        dims = (-1, -2) if pred.dim() == 2 or not reduce_batch_first else (-1, -2, -3)
        inter = 2 * (pred * target).sum(dim=dims)
        sets = pred.sum(dim=dims) + target.sum(dim=dims)
        sets = m.where(sets == 0, inter, sets)
        return ((inter + eps) / (sets + eps)).mean()

    def multiclass_dice(pred, target, reduce_batch_first=False):
        return dice_coeff(pred.flatten(0, 1), target.flatten(0, 1), reduce_batch_first)

    out = []
    for classes, bilinear in ((3, False), (1, True)):
        net = UNet(classes, bilinear).to(memory_format=m.channels_last)
        opt = m.optim.RMSprop(net.parameters(), lr=1e-3, weight_decay=1e-8, momentum=0.999, foreach=True)
        plateau = m.optim.lr_scheduler.ReduceLROnPlateau(opt, "max", patience=0)
        images = m.randn(2, 3, 32, 30).to(memory_format=m.channels_last)
        masks = m.randint(0, max(classes, 2), (2, 32, 30))
        for _ in range(2):
            logits = net(images)
            if classes == 1:
                loss = F.binary_cross_entropy_with_logits(logits.squeeze(1), masks.double())
                loss = loss + 1 - dice_coeff(F.sigmoid(logits.squeeze(1)), masks.double(), True)
            else:
                one_hot = F.one_hot(masks, classes).permute(0, 3, 1, 2).double()
                loss = F.cross_entropy(logits, masks) + 1 - multiclass_dice(F.softmax(logits, dim=1), one_hot, True)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            net.eval()
            with m.inference_mode():
                pred = net(images)
                if classes == 1:
                    score = dice_coeff((F.sigmoid(pred.squeeze(1)) > 0.5).double(), masks)
                else:
                    hard = F.one_hot(pred.argmax(dim=1), classes).permute(0, 3, 1, 2).double()
                    score = multiclass_dice(hard[:, 1:], F.one_hot(masks, classes).permute(0, 3, 1, 2)[:, 1:].double())
            net.train()
            plateau.step(score)
            out += [loss.detach(), norm, score, opt.param_groups[0]["lr"]]
        out += _state_sums(net)
    return out


def _mean(values):
    values = list(values)
    return sum(values[1:], values[0]) / len(values)


def _lovasz_grad(gt_sorted):
    gts = gt_sorted.sum()
    intersection = gts - gt_sorted.double().cumsum(0)
    union = gts + (1 - gt_sorted).double().cumsum(0)
    jaccard = 1.0 - intersection / union
    jaccard[1:] = jaccard[1:] - jaccard[:-1]
    return jaccard


def segmentation_losses(m):
    """The Lovasz hinge per image and over the batch, with an ignore label (sort of the errors, the Jaccard
    gradient from cumsums, a dot with relu of the sorted errors) and the Lovasz softmax over present classes; the
    focal loss with a per-class alpha gathered by target; gradients of each."""
    _float64(m)
    F = m.nn.functional

    def hinge_flat(logits, labels):
        errors = 1.0 - logits * (2.0 * labels.double() - 1.0)
        errors_sorted, perm = m.sort(errors, dim=0, descending=True)
        return m.dot(F.relu(errors_sorted), _lovasz_grad(labels[perm.data]))

    def hinge(logits, labels, per_image, ignore):
        def flat(scores, lab):
            scores, lab = scores.view(-1), lab.view(-1)
            keep = lab != ignore
            return scores[keep], lab[keep]

        if per_image:
            return _mean(hinge_flat(*flat(x.unsqueeze(0), y.unsqueeze(0))) for x, y in zip(logits, labels))
        return hinge_flat(*flat(logits, labels))

    def lovasz_softmax(probas, labels, ignore):
        classes = probas.size(1)
        probas, labels = probas.permute(0, 2, 3, 1).contiguous().view(-1, classes), labels.view(-1)
        keep = labels != ignore
        probas, labels = probas[keep.nonzero().squeeze()], labels[keep]
        losses = []
        for c in range(classes):
            fg = (labels == c).double()
            if fg.sum() == 0:
                continue
            errors_sorted, perm = m.sort((fg - probas[:, c]).abs(), 0, descending=True)
            losses.append(m.dot(errors_sorted, _lovasz_grad(fg[perm.data])))
        return _mean(losses)

    def focal(x, target, gamma, alpha):
        x = x.view(x.size(0), x.size(1), -1).transpose(1, 2).contiguous().view(-1, x.size(1))
        target = target.view(-1, 1)
        logpt = F.log_softmax(x, dim=1).gather(1, target).view(-1)
        pt = logpt.data.exp()
        logpt = logpt * alpha.type_as(x.data).gather(0, target.data.view(-1))
        return (-1 * (1 - pt) ** gamma * logpt).mean()

    logits = m.randn(2, 8, 8, requires_grad=True)
    labels = (m.rand(2, 8, 8) > 0.5).long()
    labels[0, 0, :3] = 255
    out = []
    for per_image in (True, False):
        loss = hinge(logits, labels, per_image, 255)
        out += [loss, *m.autograd.grad(loss, logits)]
    scores = m.randn(2, 4, 8, 8, requires_grad=True)
    classes = m.randint(0, 3, (2, 8, 8))
    classes[1, :2] = 255
    loss = lovasz_softmax(F.softmax(scores, dim=1), classes, 255)
    out += [loss, *m.autograd.grad(loss, scores)]
    for gamma, alpha in ((0, [1.0, 1.0, 1.0, 1.0]), (2, [0.1, 0.2, 0.3, 0.4])):
        x = m.randn(2, 4, 5, 5, requires_grad=True)
        loss = focal(x, m.randint(0, 4, (2, 5, 5)), gamma, m.Tensor(alpha))
        out += [loss, *m.autograd.grad(loss, x)]
    return [t.detach() for t in out]


@pytest.mark.slow
def test_unet_dice_steps():
    _both(unet_dice_steps)


@pytest.mark.slow
def test_segmentation_losses():
    _both(segmentation_losses)
