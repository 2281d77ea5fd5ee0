"""Programs of two teaching repositories that many users start from, run with torch and with batched_grad from the
same seeds (torch's and NumPy's) and compared in float64: yunjey/pytorch-tutorial (logistic regression and a
feedforward net, a CNN and a ResNet fed through hand-written transforms, LSTM/BiLSTM classifiers, an LSTM language
model with clip_grad_norm_ and multinomial sampling, a GAN and a VAE, the image-captioning encoder/decoder with
pack_padded_sequence) and eriklindernoren/PyTorch-GAN (InfoGAN, BEGAN, EBGAN, WGAN with clipping, WGAN-GP,
WGAN-div, DRAGAN, softmax GAN, BGAN, relativistic GAN, LSGAN, CGAN, pix2pix's U-Net and CycleGAN with its replay
buffer and LambdaLR), each at toy sizes with random data in place of MNIST/CIFAR/COCO. The GAN programs keep their
legacy idioms: Variable, Tensor(np_array), Tensor(n, 1).fill_(1.0), `.data`, nn.Softmax() without a dim."""

import itertools
import warnings

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default


def tutorial_classifiers(m):
    """Logistic regression and a one-hidden-layer net on flattened images, a CNN with batch norm, and a small ResNet
    whose batches pass Pad/RandomHorizontalFlip/RandomCrop written with torch's random draws, its lr divided by 3
    through param_groups after each epoch."""
    nn = m.nn

    class Augmented(m.utils.data.Dataset):
        def __init__(self, x, y, augment):
            self.x, self.y, self.augment = x, y, augment

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            img = self.x[i]
            if self.augment:
                img = nn.functional.pad(img, (2,) * 4)
                if m.rand(1) < 0.5:
                    img = img.flip(-1)
                top, left = (m.randint(0, 5, size=(1,)).item() for _ in range(2))
                img = img[..., top : top + 8, left : left + 8]
            return img, self.y[i]

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1, self.relu = nn.BatchNorm2d(cout), nn.ReLU(inplace=True)
            self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            out += self.downsample(x) if self.downsample else x
            return self.relu(out)

    out = []
    with float64_default(m):
        images, labels = m.rand(24, 1, 8, 8), m.randint(0, 5, (24,))
        loader = m.utils.data.DataLoader(m.utils.data.TensorDataset(images, labels), batch_size=8, shuffle=True)
        flat = nn.Linear(64, 5)
        hidden = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 5))
        cnn = nn.Sequential(nn.Conv2d(1, 4, 5, 1, 2), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten())
        cnn.append(nn.Linear(4 * 4 * 4, 5))
        for model, make in ((flat, m.optim.SGD), (hidden, m.optim.Adam), (cnn, m.optim.Adam)):
            opt = make(model.parameters(), lr=1e-3)
            for batch, target in loader:
                batch = batch if model is cnn else batch.reshape(-1, 64)
                loss = nn.CrossEntropyLoss()(model(batch), target)
                opt.zero_grad()
                loss.backward()
                opt.step()
            model.eval()
            with m.no_grad():
                _, predicted = m.max(model(images if model is cnn else images.reshape(-1, 64)).data, 1)
            out += [loss.detach(), (predicted == labels).sum().item()]
        augmented = m.utils.data.DataLoader(Augmented(m.rand(8, 3, 8, 8), labels[:8], True), batch_size=4, shuffle=True)
        resnet = nn.Sequential(Block(3, 4, 1), Block(4, 8, 2), nn.AvgPool2d(4), nn.Flatten(), nn.Linear(8, 5))
        opt, lr = m.optim.Adam(resnet.parameters(), lr=1e-3), 1e-3
        for _ in range(2):
            for batch, target in augmented:
                loss = nn.CrossEntropyLoss()(resnet(batch), target)
                opt.zero_grad()
                loss.backward()
                opt.step()
            lr /= 3
            for group in opt.param_groups:
                group["lr"] = lr
            out.append(loss.detach())
    return out


@pytest.mark.slow
def test_tutorial_classifiers():
    _both(tutorial_classifiers, F64)


def tutorial_sequences(m):
    """Image rows as sequences through a two-layer LSTM and a bidirectional one (zero initial states given), then a
    word-level LSTM language model over a corpus cut into batch columns, states detached between windows,
    clip_grad_norm_ before each step, and words sampled with torch.multinomial from exp(logits)."""
    nn = m.nn
    out = []
    with float64_default(m):
        images, labels = m.rand(12, 6, 6), m.randint(0, 3, (12,))
        for bidirectional in (False, True):
            lstm = nn.LSTM(6, 5, 2, batch_first=True, bidirectional=bidirectional)
            head = nn.Linear(5 * (2 if bidirectional else 1), 3)
            opt = m.optim.Adam([*lstm.parameters(), *head.parameters()], lr=0.003)
            for i in range(0, 12, 4):
                h0 = m.zeros(2 * (2 if bidirectional else 1), 4, 5)
                seq, _ = lstm(images[i : i + 4], (h0, m.zeros_like(h0)))
                loss = nn.CrossEntropyLoss()(head(seq[:, -1, :]), labels[i : i + 4])
                opt.zero_grad()
                loss.backward()
                opt.step()
            out.append(loss.detach())
        words = np.random.RandomState(0).randint(0, 12, 84)
        ids = m.LongTensor(len(words))
        for position, word in enumerate(words):
            ids[position] = int(word)
        ids = ids.view(4, -1)
        embed, lstm, linear = nn.Embedding(12, 6), nn.LSTM(6, 8, 1, batch_first=True), nn.Linear(8, 12)
        params = [*embed.parameters(), *lstm.parameters(), *linear.parameters()]
        opt = m.optim.Adam(params, lr=0.002)
        states = (m.zeros(1, 4, 8), m.zeros(1, 4, 8))
        for i in range(0, ids.size(1) - 5, 5):
            states = [state.detach() for state in states]
            hidden, states = lstm(embed(ids[:, i : i + 5]), states)
            loss = nn.CrossEntropyLoss()(linear(hidden.reshape(-1, 8)), ids[:, i + 1 : i + 6].reshape(-1))
            opt.zero_grad()
            loss.backward()
            out.append(nn.utils.clip_grad_norm_(params, 0.5))
            opt.step()
        with m.no_grad():
            state, word = (m.zeros(1, 1, 8), m.zeros(1, 1, 8)), m.multinomial(m.ones(12), num_samples=1).unsqueeze(1)
            sampled = []
            for _ in range(10):
                hidden, state = lstm(embed(word), state)
                word_id = m.multinomial(linear(hidden.reshape(-1, 8)).exp(), num_samples=1).item()
                word.fill_(word_id)
                sampled.append(word_id)
        out.append(sampled)
    return out


@pytest.mark.slow
def test_tutorial_sequences():
    _both(tutorial_sequences, F64)


def tutorial_gan_vae_captioning(m):
    """The tutorial's MLP GAN (BCELoss, Sigmoid discriminator), its VAE (binary_cross_entropy with the deprecated
    size_average=False, KL term by hand), and the captioning model: an encoder cut from a classifier with
    list(children())[:-1] (its head also kept as `.fc`), a decoder over pack_padded_sequence of length-sorted captions
    padded by a collate_fn, and greedy sampling."""
    nn, F = m.nn, m.nn.functional
    out = []
    with float64_default(m), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        D = nn.Sequential(nn.Linear(16, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1), nn.Sigmoid())
        G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 16), nn.Tanh())
        d_opt, g_opt = m.optim.Adam(D.parameters(), lr=2e-4), m.optim.Adam(G.parameters(), lr=2e-4)
        real = m.rand(6, 16) * 2 - 1
        for _ in range(3):
            ones, zeros = m.ones(6, 1), m.zeros(6, 1)
            d_loss = nn.BCELoss()(D(real), ones) + nn.BCELoss()(D(G(m.randn(6, 4))), zeros)
            d_opt.zero_grad(), g_opt.zero_grad()
            d_loss.backward()
            d_opt.step()
            g_loss = nn.BCELoss()(D(G(m.randn(6, 4))), ones)
            d_opt.zero_grad(), g_opt.zero_grad()
            g_loss.backward()
            g_opt.step()
            out += [d_loss.detach(), g_loss.detach()]
        enc, mu_layer, var_layer, dec = nn.Linear(16, 8), nn.Linear(8, 3), nn.Linear(8, 3), nn.Linear(3, 16)
        opt = m.optim.Adam([*enc.parameters(), *mu_layer.parameters(), *var_layer.parameters(), *dec.parameters()])
        x = m.rand(6, 16)
        for _ in range(3):
            h = F.relu(enc(x))
            mu, log_var = mu_layer(h), var_layer(h)
            recon = F.sigmoid(dec(mu + m.randn_like(mu) * m.exp(log_var / 2)))
            reconst = F.binary_cross_entropy(recon, x, size_average=False)
            kl = -0.5 * m.sum(1 + log_var - mu.pow(2) - log_var.exp())
            opt.zero_grad()
            (reconst + kl).backward()
            opt.step()
            out += [reconst.detach(), kl.detach()]

        classifier = nn.Sequential(nn.Conv2d(3, 4, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d((1, 1)), nn.Linear(1, 1))
        classifier.fc = classifier[-1]
        trunk = nn.Sequential(*list(classifier.children())[:-1])
        project, norm = nn.Linear(4, 6), nn.BatchNorm1d(6, momentum=0.01)
        embed, lstm, vocab_head = nn.Embedding(10, 6), nn.LSTM(6, 8, 1, batch_first=True), nn.Linear(8, 10)
        captions = [m.Tensor([1] + m.randint(3, 10, (int(m.randint(2, 6, (1,))),)).tolist() + [2]) for _ in range(6)]
        pairs = sorted(zip(m.rand(6, 3, 8, 8), captions), key=lambda pair: len(pair[1]), reverse=True)
        lengths = [len(c) for _, c in pairs]
        targets = m.zeros(6, max(lengths)).long()
        for i, (_, cap) in enumerate(pairs):
            targets[i, : lengths[i]] = cap[: lengths[i]]
        images = m.stack([img for img, _ in pairs], 0)
        params = [*project.parameters(), *norm.parameters(), *embed.parameters(), *lstm.parameters()]
        opt = m.optim.Adam([*params, *vocab_head.parameters()], lr=0.001)
        for _ in range(2):
            with m.no_grad():
                features = trunk(images).reshape(6, -1)
            features = norm(project(features))
            packed = nn.utils.rnn.pack_padded_sequence(
                m.cat((features.unsqueeze(1), embed(targets)), 1), lengths, batch_first=True
            )
            hiddens, _ = lstm(packed)
            wanted = nn.utils.rnn.pack_padded_sequence(targets, lengths, batch_first=True)[0]
            loss = nn.CrossEntropyLoss()(vocab_head(hiddens[0]), wanted)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.detach())
        norm.eval()
        inputs, states, sampled = norm(project(trunk(images[:1]).reshape(1, -1))).unsqueeze(1), None, []
        for _ in range(6):
            hiddens, states = lstm(inputs, states)
            predicted = vocab_head(hiddens.squeeze(1)).max(1)[1]
            sampled.append(predicted)
            inputs = embed(predicted).unsqueeze(1)
        out.append(m.stack(sampled, 1))
    return out


@pytest.mark.slow
def test_tutorial_gan_vae_captioning():
    _both(tutorial_gan_vae_captioning, F64)


def weights_init_normal(m, module):
    """The PyTorch-GAN initialisation, by class name."""
    name = module.__class__.__name__
    if name.find("Conv") != -1:
        m.nn.init.normal_(module.weight.data, 0.0, 0.02)
        if getattr(module, "bias", None) is not None:
            m.nn.init.constant_(module.bias.data, 0.0)
    elif name.find("BatchNorm") != -1:
        m.nn.init.normal_(module.weight.data, 1.0, 0.02)
        m.nn.init.constant_(module.bias.data, 0.0)


def conv_gans(m):
    """InfoGAN (upsampling generator with BatchNorm2d(c, 0.8), Dropout2d discriminator with three heads, one of them
    nn.Softmax() without a dim, an information loss through both networks' parameters chained into one Adam),
    BEGAN (an autoencoder discriminator, the k balance term, and the script's `.data[0]` on a 0-dim loss, which
    raises) and EBGAN (a pull-away term on the embeddings, a margin hinge decided by .item())."""
    nn = m.nn
    Variable, Tensor = m.autograd.Variable, m.DoubleTensor
    rng = np.random.RandomState(0)

    def generator(latent, first_bn=True):
        blocks = [nn.BatchNorm2d(16)] if first_bn else []
        blocks += [nn.Upsample(scale_factor=2), nn.Conv2d(16, 16, 3, 1, 1), nn.BatchNorm2d(16, 0.8)]
        blocks += [nn.LeakyReLU(0.2, inplace=True), nn.Upsample(scale_factor=2), nn.Conv2d(16, 1, 3, 1, 1), nn.Tanh()]
        return nn.Sequential(nn.Linear(latent, 16 * 4 * 4), nn.Unflatten(1, (16, 4, 4)), *blocks)

    def autoencoder():
        return nn.ModuleDict(
            {
                "down": nn.Sequential(nn.Conv2d(1, 4, 3, 2, 1), nn.ReLU(), nn.Flatten()),
                "code": nn.Linear(4 * 8 * 8, 6),
                "fc": nn.Sequential(nn.BatchNorm1d(6, 0.8), nn.ReLU(inplace=True), nn.Linear(6, 256), nn.ReLU()),
                "up": nn.Sequential(nn.Unflatten(1, (4, 8, 8)), nn.Upsample(scale_factor=2), nn.Conv2d(4, 1, 3, 1, 1)),
            }
        )

    out = []
    with float64_default(m), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = m.rand(6, 1, 16, 16) * 2 - 1
        g = generator(8 + 4 + 2)
        trunk = nn.Sequential(nn.Conv2d(1, 8, 3, 2, 1), nn.LeakyReLU(0.2, inplace=True), nn.Dropout2d(0.25))
        trunk.extend([nn.Conv2d(8, 16, 3, 2, 1), nn.LeakyReLU(0.2, inplace=True), nn.Dropout2d(0.25)])
        trunk.extend([nn.BatchNorm2d(16, 0.8), nn.AvgPool2d(4), nn.Flatten()])
        heads = nn.ModuleList([nn.Linear(16, 1), nn.Sequential(nn.Linear(16, 4), nn.Softmax()), nn.Linear(16, 2)])
        for net in (g, trunk):
            net.apply(lambda module: weights_init_normal(m, module))
        d_params = [*trunk.parameters(), *heads.parameters()]
        opt_g, opt_d = m.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999)), m.optim.Adam(d_params, lr=2e-4)
        opt_info = m.optim.Adam(itertools.chain(g.parameters(), d_params), lr=2e-4, betas=(0.5, 0.999))
        for _ in range(2):
            valid = Variable(Tensor(6, 1).fill_(1.0), requires_grad=False)
            labels = rng.randint(0, 4, 6)
            one_hot = np.zeros((6, 4))
            one_hot[range(6), labels] = 1.0
            code = Variable(Tensor(rng.uniform(-1, 1, (6, 2))))
            gen = g(m.cat((Tensor(rng.normal(0, 1, (6, 8))), Tensor(one_hot), code), -1))
            opt_g.zero_grad()
            g_loss = nn.MSELoss()(heads[0](trunk(gen)), valid)
            g_loss.backward()
            opt_g.step()
            opt_d.zero_grad()
            fake_pred = heads[0](trunk(gen.detach()))
            d_loss = (nn.MSELoss()(heads[0](trunk(real)), valid) + nn.MSELoss()(fake_pred, 0 * valid)) / 2
            d_loss.backward()
            opt_d.step()
            opt_info.zero_grad()
            features = trunk(g(m.cat((Tensor(rng.normal(0, 1, (6, 8))), Tensor(one_hot), code), -1)))
            info = nn.CrossEntropyLoss()(heads[1](features), m.LongTensor(labels))
            info = info + 0.1 * nn.MSELoss()(heads[2](features), code)
            info.backward()
            opt_info.step()
            out += [g_loss.detach(), d_loss.detach(), info.detach()]

        for kind in ("began", "ebgan"):
            g, d = generator(8, first_bn=kind == "began"), autoencoder()
            for net in (g, d):
                net.apply(lambda module: weights_init_normal(m, module))
            opt_g, opt_d = m.optim.Adam(g.parameters(), lr=2e-4), m.optim.Adam(d.parameters(), lr=2e-4)

            def discriminate(img, d=d):
                code = d["code"](d["down"](img))
                return d["up"](d["fc"](code)), code

            k = 0.0
            for _ in range(2):
                opt_g.zero_grad()
                gen = g(Variable(Tensor(rng.normal(0, 1, (6, 8)))))
                recon, code = discriminate(gen)
                if kind == "began":
                    g_loss = m.mean(m.abs(recon - gen))
                else:
                    unit = code / m.sqrt(m.sum(code**2, -1, keepdim=True))
                    pull_away = (m.sum(m.matmul(unit, unit.transpose(1, 0))) - 6) / (6 * 5)
                    g_loss = nn.MSELoss()(recon, gen.detach()) + 0.1 * pull_away
                g_loss.backward()
                opt_g.step()
                opt_d.zero_grad()
                real_loss = m.mean(m.abs(discriminate(real)[0] - real))
                fake_loss = m.mean(m.abs(discriminate(gen.detach())[0] - gen.detach()))
                if kind == "began":
                    d_loss = real_loss - k * fake_loss
                    diff = m.mean(0.75 * real_loss - fake_loss)
                    k = min(max(k + 0.001 * diff.item(), 0), 1)
                    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
                        (real_loss + m.abs(diff)).data[0]
                else:
                    d_loss = real_loss
                    if (1 - fake_loss.data).item() > 0:
                        d_loss += 1 - fake_loss
                d_loss.backward()
                opt_d.step()
                out += [g_loss.detach(), d_loss.detach(), k]
    return out


@pytest.mark.slow
def test_conv_gans():
    _both(conv_gans, F64)
