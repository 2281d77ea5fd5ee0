"""Programs in the style of rasbt's deeplearning-models collection (pytorch_ipynb: softmax regression, MLPs with
batch norm and dropout, LeNet-5 and a small ConvNet, autoencoders, RNN/LSTM classifiers over packed sequences),
run with torch and with batched_grad from the same seed in float64 and compared number for number; MNIST and IMDB
are replaced by random images and token ids of the same kinds."""

import pytest

from test_fresh_programs_dl2 import F64, _both
from test_fresh_programs_teach import float64_default


def _fake_images(m, n, seed, size=28):
    g = m.Generator().manual_seed(seed)
    images, labels = m.rand(n, 1, size, size, generator=g), m.randint(0, 10, (n,), generator=g)
    images[m.arange(n), 0, labels, labels] = 1.0
    return m.utils.data.TensorDataset(images, labels)


def _accuracy(m, model, loader, flat):
    correct, count = 0, 0
    for features, targets in loader:
        logits, probas = model(features.view(-1, 28 * 28) if flat else features)
        _, predicted = m.max(probas, 1)
        count += targets.size(0)
        correct += (predicted == targets).sum()
    return correct.float() / count * 100


def model_zoo_classifiers(m):
    """deeplearning-models' softmax regression (weights zeroed through .detach().zero_()), MLPs with batch norm
    before the activation and with dropout in a Sequential, LeNet-5 with tanh and a same-padded ConvNet with weights
    drawn through .data.normal_(), each returning (logits, probas) and trained with SGD or Adam; the costs are
    printed with '%.4f' % cost and the accuracies from torch.max(probas, 1)."""
    nn, F, out = m.nn, m.nn.functional, []

    class Softmax(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(784, 10)
            self.linear.weight.detach().zero_()
            self.linear.bias.detach().zero_()

        def forward(self, x):
            logits = self.linear(x)
            return logits, F.softmax(logits, dim=1)

    class BatchNormMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.bn1, self.l2, self.bn2 = (
                nn.Linear(784, 32),
                nn.BatchNorm1d(32),
                nn.Linear(32, 16),
                nn.BatchNorm1d(16),
            )
            self.out = nn.Linear(16, 10)

        def forward(self, x):
            logits = self.out(F.relu(self.bn2(self.l2(F.relu(self.bn1(self.l1(x)))))))
            return logits, F.softmax(logits, dim=1)

    class DropoutMLP(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [nn.Flatten(), nn.Linear(784, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 10)]
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            logits = self.net(x)
            return logits, F.softmax(logits, dim=1)

    class LeNet5(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 6, 5), nn.Tanh(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.Tanh(), nn.MaxPool2d(2)
            )
            self.classifier = nn.Sequential(nn.Linear(16 * 4 * 4, 32), nn.Tanh(), nn.Linear(32, 10))

        def forward(self, x):
            logits = self.classifier(m.flatten(self.features(x), 1))
            return logits, F.softmax(logits, dim=1)

    class ConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv_1, self.conv_2 = nn.Conv2d(1, 4, (3, 3), (1, 1), 1), nn.Conv2d(4, 8, (3, 3), (1, 1), 1)
            self.pool = nn.MaxPool2d((2, 2), (2, 2), 0)
            self.linear_1 = nn.Linear(7 * 7 * 8, 10)
            for module in self.modules():
                if isinstance(module, (nn.Conv2d, nn.Linear)):
                    module.weight.data.normal_(0.0, 0.01)
                    module.bias.data.zero_()

        def forward(self, x):
            x = self.pool(F.relu(self.conv_2(self.pool(F.relu(self.conv_1(x))))))
            logits = self.linear_1(x.view(-1, 7 * 7 * 8))
            return logits, F.softmax(logits, dim=1)

    with float64_default(m, seed=123):
        train = m.utils.data.DataLoader(_fake_images(m, 64, 0), batch_size=16, shuffle=True)
        for make, flat, adam in [
            (Softmax, True, False),
            (BatchNormMLP, True, False),
            (DropoutMLP, True, False),
            (LeNet5, False, True),
            (ConvNet, False, True),
        ]:
            m.manual_seed(1)
            model = make()
            opt = m.optim.Adam(model.parameters(), lr=1e-3) if adam else m.optim.SGD(model.parameters(), lr=0.1)
            model.train()
            for features, targets in train:
                logits, _ = model(features.view(-1, 784) if flat else features)
                cost = F.cross_entropy(logits, targets)
                opt.zero_grad()
                cost.backward()
                opt.step()
                out.append(float("%.4f" % cost))  # noqa: UP031  (the notebooks' formatting of a Tensor)
            model.eval()
            with m.set_grad_enabled(False):
                out.append(_accuracy(m, model, train, flat))
            out.append(list(model.parameters())[0])
    return out


@pytest.mark.slow
def test_model_zoo_classifiers():
    _both(model_zoo_classifiers, F64)


def model_zoo_autoencoders_and_lstm(m):
    """A fully connected autoencoder (leaky ReLU, sigmoid, binary cross-entropy) and a convolutional one decoding
    by nearest-neighbour interpolate (binary_cross_entropy_with_logits), then an LSTM classifier over padded token
    ids packed by length (pack_padded_sequence, the final hidden state to a linear layer) and a plain RNN one."""
    nn, F, out = m.nn, m.nn.functional, []
    with float64_default(m, seed=123):
        images = m.utils.data.DataLoader(_fake_images(m, 32, 0), batch_size=16, shuffle=True)
        dense = nn.Sequential(nn.Linear(784, 16), nn.LeakyReLU(), nn.Linear(16, 784))
        dense[0].weight.detach().normal_(0.0, 0.1)
        conv_1, conv_2 = nn.Conv2d(1, 4, 3, padding=1), nn.Conv2d(4, 1, 3, padding=1)
        opt = m.optim.Adam([*dense.parameters(), *conv_1.parameters(), *conv_2.parameters()], lr=5e-3)
        for features, _ in images:
            flat = features.view(-1, 784)
            cost = F.binary_cross_entropy(m.sigmoid(dense(flat)), flat)
            logits = conv_2(
                F.interpolate(F.max_pool2d(F.leaky_relu(conv_1(features)), 2), scale_factor=2, mode="nearest")
            )
            cost = cost + F.binary_cross_entropy_with_logits(logits, features)
            opt.zero_grad()
            cost.backward()
            opt.step()
            out.append(cost)

        class Recurrent(nn.Module):
            def __init__(self, kind):
                super().__init__()
                self.embedding, self.rnn = nn.Embedding(30, 8), getattr(nn, kind)(8, 6)
                self.fc = nn.Linear(6, 1)

            def forward(self, text, lengths):
                embedded = self.embedding(text)
                if isinstance(self.rnn, nn.LSTM):
                    _, (hidden, _) = self.rnn(nn.utils.rnn.pack_padded_sequence(embedded, lengths))
                else:
                    _, hidden = self.rnn(embedded)
                return self.fc(hidden.squeeze(0)).view(-1)

        g = m.Generator().manual_seed(5)
        batches = []
        for _ in range(3):
            lengths = m.sort(m.randint(2, 8, (4,), generator=g), descending=True)[0]
            text = m.randint(2, 30, (7, 4), generator=g)
            for j, n in enumerate(lengths.tolist()):
                text[n:, j] = 1
            batches.append((text, lengths, (text[0] > 15).to(m.get_default_dtype())))
        for kind in ("LSTM", "RNN"):
            m.manual_seed(123)
            model = Recurrent(kind)
            opt = m.optim.Adam(model.parameters(), lr=1e-2)
            for text, lengths, labels in batches:
                cost = F.binary_cross_entropy_with_logits(model(text, lengths), labels)
                opt.zero_grad()
                cost.backward()
                opt.step()
                out.append(float(f"{cost:.6f}"))
            with m.no_grad():
                out.append(((m.sigmoid(model(text, lengths)) > 0.5).long() == labels.long()).sum().float())
            out.append(model.fc.weight.data)
    return out


@pytest.mark.slow
def test_model_zoo_autoencoders_and_lstm():
    _both(model_zoo_autoencoders_and_lstm, F64)
