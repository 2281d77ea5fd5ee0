"""Sequence and image programs in the style of 2017-2020 PyTorch code, run with torch and with batched_grad from the
same seed and compared: spro/practical-pytorch's character RNNs (generation sampled with torch.multinomial, name
classification updated by p.data.add_(-lr, p.grad.data)) and its attention seq2seq, the word language model, MNIST
and DCGAN of pytorch/examples as they were written with Variable (volatile evaluation, repackage_hidden,
clip_grad_norm, buffers refilled with resize_ and fill_), and MorvanZhou's CNN, LSTM classifier, RNN regressor and
autoencoder. Data is random or built in; sizes are small."""

import string

import numpy as np
import pytest

from test_fresh_programs_legacy import F32, F64, same_results


def character_rnns(m):
    """A GRU generator over string.printable fed one character at a time (char_tensor filled element by element,
    the target index unsqueezed to one element), sampled with multinomial at a temperature and the sample used to
    index the alphabet; then a two-Linear RNN cell classifying names from one-hot letters with NLLLoss, updated with
    the deprecated p.data.add_(-lr, p.grad.data), predicted with topk and summarised in a row-normalised confusion
    matrix."""
    nn, Variable = m.nn, m.autograd.Variable
    m.manual_seed(0)
    rng = np.random.RandomState(0)
    chars = string.printable
    text = "the quick brown fox jumps over the lazy dog; pack my box with five dozen jugs. " * 2

    def char_tensor(s):
        tensor = m.zeros(len(s)).long()
        for c in range(len(s)):
            tensor[c] = chars.index(s[c])
        return Variable(tensor)

    class Generator(nn.Module):
        def __init__(self, size, hidden):
            super().__init__()
            self.hidden = hidden
            self.encoder, self.gru, self.decoder = (
                nn.Embedding(size, hidden),
                nn.GRU(hidden, hidden),
                nn.Linear(hidden, size),
            )

        def forward(self, input, hidden):
            output, hidden = self.gru(self.encoder(input.view(1, -1)).view(1, 1, -1), hidden)
            return self.decoder(output.view(1, -1)), hidden

    gen = Generator(len(chars), 24)
    optimizer = m.optim.Adam(gen.parameters(), lr=0.005)
    out = []
    for _ in range(4):
        start = rng.randint(0, len(text) - 13)
        inp, target = char_tensor(text[start : start + 12]), char_tensor(text[start + 1 : start + 13])
        hidden, loss = Variable(m.zeros(1, 1, 24)), 0
        gen.zero_grad()
        for c in range(12):
            output, hidden = gen(inp[c], hidden)
            loss += nn.CrossEntropyLoss()(output, target[c].unsqueeze(0))
        loss.backward()
        optimizer.step()
        out.append(loss.item() / 12)
    hidden, inp, predicted = Variable(m.zeros(1, 1, 24)), char_tensor("T")[-1], "T"
    for _ in range(15):
        output, hidden = gen(inp, hidden)
        top_i = m.multinomial(output.data.view(-1).div(0.8).exp(), 1)[0]
        predicted += chars[top_i]
        inp = char_tensor(chars[top_i])
    out.append(predicted)

    letters = string.ascii_letters + " .,;'-"
    names = {"English": ["Smith", "Jones", "Brown"], "French": ["Dubois", "Moreau"], "Japanese": ["Tanaka", "Ito"]}
    categories = list(names)

    def line_tensor(line):
        tensor = m.zeros(len(line), 1, len(letters))
        for li, letter in enumerate(line):
            tensor[li][0][letters.find(letter)] = 1
        return Variable(tensor)

    class Cell(nn.Module):
        def __init__(self, size, hidden, classes):
            super().__init__()
            self.i2h, self.i2o = nn.Linear(size + hidden, hidden), nn.Linear(size + hidden, classes)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, input, hidden):
            combined = m.cat((input, hidden), 1)
            return self.softmax(self.i2o(combined)), self.i2h(combined)

    cell = Cell(len(letters), 16, len(categories))

    def classify(tensor):
        hidden = Variable(m.zeros(1, 16))
        for i in range(tensor.size()[0]):
            output, hidden = cell(tensor[i], hidden)
        return output

    for _ in range(12):
        category = categories[rng.randint(0, 3)]
        line = names[category][rng.randint(0, len(names[category]))]
        cell.zero_grad()
        loss = nn.NLLLoss()(classify(line_tensor(line)), Variable(m.LongTensor([categories.index(category)])))
        loss.backward()
        for p in cell.parameters():
            p.data.add_(-0.005, p.grad.data)
        out.append(loss.item())
    confusion = m.zeros(3, 3)
    for category in categories:
        for line in names[category]:
            top_n, top_i = classify(line_tensor(line)).data.topk(1)
            confusion[categories.index(category)][top_i[0][0]] += 1
    for i in range(3):
        confusion[i] = confusion[i] / confusion[i].sum()
    topv, topi = classify(line_tensor("Satoshi")).data.topk(2, 1, True)
    return out + [confusion, topv, categories[topi[0][0]]]


@pytest.mark.slow
def test_character_rnns():
    same_results(character_rnns, F32)


def attention_seq2seq(m):
    """A two-layer GRU encoder and a decoder whose 'general' attention scores each encoder output in a Python loop
    into a zeros Variable, softmax without dim, the last context concatenated to the input, teacher forcing by a
    coin, greedy decoding fed back as LongTensor([[ni]]) with ni a 0-dim tensor, clip_grad_norm, and attention
    rows accumulated into a matrix in evaluation."""
    nn, F, Variable = m.nn, m.nn.functional, m.autograd.Variable
    m.manual_seed(3)
    rng = np.random.RandomState(3)
    pairs = [(s, [2 + (w * 3) % 8 for w in s]) for s in ([3, 5, 7], [4, 4, 9, 2], [10, 6], [8, 3, 5, 11])]
    hidden_size = 12

    def variable(indexes):
        return Variable(m.LongTensor(indexes + [1]).view(-1, 1))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding, self.gru = nn.Embedding(12, hidden_size), nn.GRU(hidden_size, hidden_size, 2)

        def forward(self, words, hidden):
            return self.gru(self.embedding(words).view(len(words), 1, -1), hidden)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(10, hidden_size)
            self.gru = nn.GRU(hidden_size * 2, hidden_size, 2, dropout=0.05)
            self.out, self.attn = nn.Linear(hidden_size * 2, 10), nn.Linear(hidden_size, hidden_size)

        def forward(self, word, context, hidden, encoder_outputs):
            rnn_input = m.cat((self.embedding(word).view(1, 1, -1), context.unsqueeze(0)), 2)
            rnn_output, hidden = self.gru(rnn_input, hidden)
            energies = Variable(m.zeros(len(encoder_outputs)))
            for i in range(len(encoder_outputs)):
                energies[i] = rnn_output.squeeze(0).view(-1).dot(self.attn(encoder_outputs[i]).view(-1))
            weights = F.softmax(energies).unsqueeze(0).unsqueeze(0)
            context = weights.bmm(encoder_outputs.transpose(0, 1)).squeeze(1)
            output = F.log_softmax(self.out(m.cat((rnn_output.squeeze(0), context), 1)))
            return output, context, hidden, weights

    encoder, decoder = Encoder(), Decoder()
    opt_e, opt_d = m.optim.Adam(encoder.parameters(), lr=1e-3), m.optim.Adam(decoder.parameters(), lr=1e-3)

    def run(source, target=None, steps=6):
        encoder_outputs, hidden = encoder(variable(source), Variable(m.zeros(2, 1, hidden_size)))
        word, context = Variable(m.LongTensor([[0]])), Variable(m.zeros(1, hidden_size))
        loss, words, attentions = 0, [], m.zeros(steps, len(encoder_outputs))
        forcing = target is not None and rng.rand() < 0.5
        for di in range(steps if target is None else len(target)):
            output, context, hidden, weights = decoder(word, context, hidden, encoder_outputs)
            attentions[di] += weights.squeeze(0).squeeze(0).data
            if target is not None:
                loss += nn.NLLLoss()(output, target[di])
            topv, topi = output.data.topk(1)
            ni = topi[0][0]
            word = target[di] if forcing else Variable(m.LongTensor([[ni]]))
            words.append(int(ni))
            if not forcing and ni == 1:
                break
        return loss, words, attentions[: di + 1]

    out = []
    for _ in range(6):
        source, target = pairs[rng.randint(0, 4)]
        opt_e.zero_grad()
        opt_d.zero_grad()
        loss, _, _ = run(source, variable(target))
        loss.backward()
        m.nn.utils.clip_grad_norm(encoder.parameters(), 5.0)
        m.nn.utils.clip_grad_norm(decoder.parameters(), 5.0)
        opt_e.step()
        opt_d.step()
        out.append(loss.item())
    decoder.eval()
    _, words, attentions = run(pairs[0][0])
    return out + [str(words), attentions]


@pytest.mark.slow
def test_attention_seq2seq():
    same_results(attention_seq2seq, F32)


def word_language_models(m):
    """LSTM, tied GRU and tanh RNN language models over batchified random word ids in float64: the hidden state
    made with weight.data.new(...).zero_(), carried between batches by repackage_hidden (Variable(h.data), the
    isinstance test old code needs since Variable and Tensor merged), gradients clipped with clip_grad_norm and
    applied with p.data.add_(-lr, p.grad.data), volatile evaluation, the learning rate quartered when validation
    stops improving."""
    nn, Variable = m.nn, m.autograd.Variable
    m.manual_seed(1111)
    m.set_default_dtype(m.float64)
    try:
        ntokens, bptt = 30, 5
        train = m.LongTensor(150).random_(0, ntokens).narrow(0, 0, 150).view(5, -1).t().contiguous()
        valid = m.LongTensor(48).random_(0, ntokens).view(4, -1).t().contiguous()

        class RNNModel(nn.Module):
            def __init__(self, rnn_type, tie):
                super().__init__()
                self.drop, self.encoder = nn.Dropout(0.2), nn.Embedding(ntokens, 12)
                if rnn_type == "RNN_TANH":
                    self.rnn = nn.RNN(12, 12, 2, nonlinearity="tanh", dropout=0.2)
                else:
                    self.rnn = getattr(nn, rnn_type)(12, 12, 2, dropout=0.2)
                self.decoder, self.rnn_type = nn.Linear(12, ntokens), rnn_type
                if tie:
                    self.decoder.weight = self.encoder.weight
                self.encoder.weight.data.uniform_(-0.1, 0.1)
                self.decoder.bias.data.fill_(0)
                self.decoder.weight.data.uniform_(-0.1, 0.1)

            def forward(self, input, hidden):
                output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
                output = self.drop(output)
                decoded = self.decoder(output.view(output.size(0) * output.size(1), output.size(2)))
                return decoded.view(output.size(0), output.size(1), decoded.size(1)), hidden

            def init_hidden(self, bsz):
                weight = next(self.parameters()).data
                if self.rnn_type == "LSTM":
                    return (Variable(weight.new(2, bsz, 12).zero_()), Variable(weight.new(2, bsz, 12).zero_()))
                return Variable(weight.new(2, bsz, 12).zero_())

        def repackage_hidden(h):
            return Variable(h.data) if isinstance(h, Variable) else tuple(repackage_hidden(v) for v in h)

        def batches(source, evaluation=False):
            for i in range(0, source.size(0) - 1, bptt):
                seq_len = min(bptt, len(source) - 1 - i)
                yield (
                    Variable(source[i : i + seq_len], volatile=evaluation),
                    Variable(source[i + 1 : i + 1 + seq_len].view(-1)),
                )

        out = []
        for rnn_type, tie in (("LSTM", False), ("GRU", True), ("RNN_TANH", False)):
            model, lr, best = RNNModel(rnn_type, tie), 20.0, None
            for _ in range(2):
                model.train()
                hidden, total = model.init_hidden(5), 0
                for data, targets in batches(train):
                    hidden = repackage_hidden(hidden)
                    model.zero_grad()
                    output, hidden = model(data, hidden)
                    loss = nn.CrossEntropyLoss()(output.view(-1, ntokens), targets)
                    loss.backward()
                    m.nn.utils.clip_grad_norm(model.parameters(), 0.25)
                    for p in model.parameters():
                        p.data.add_(-lr, p.grad.data)
                    total += loss.data
                model.eval()
                hidden, val = model.init_hidden(4), 0
                for data, targets in batches(valid, evaluation=True):
                    output, hidden = model(data, hidden)
                    val += len(data) * nn.CrossEntropyLoss()(output.view(-1, ntokens), targets).data
                    hidden = repackage_hidden(hidden)
                val = val.item() / len(valid)
                out += [total.item(), val, lr]
                if best is None or val < best:
                    best = val
                else:
                    lr /= 4.0
            out.append(model.decoder.weight is model.encoder.weight)
        return out
    finally:
        m.set_default_dtype(m.float32)


@pytest.mark.slow
def test_word_language_models():
    same_results(word_language_models, F64)


def mnist_and_dcgan(m):
    """The old MNIST example (argparse-free): Dropout2d, F.log_softmax without dim, nll_loss(size_average=False)
    summed over volatile test batches, output.data.max(1, keepdim=True)[1] and pred.eq(target.data.view_as(pred))
    .cpu().sum(); then DCGAN on 16x16 images with weights_init applied through .apply, input and label buffers made
    as FloatTensor(n, ...) and refilled with resize_as_/copy_, resize_/fill_ and noise.resize_(...).normal_(0, 1),
    and isinstance(input.data, torch.cuda.FloatTensor) guarding data_parallel."""
    nn, F, Variable = m.nn, m.nn.functional, m.autograd.Variable
    m.manual_seed(1)
    data = m.utils.data
    train = data.TensorDataset((m.rand(32, 1, 28, 28) - 0.1307) / 0.3081, m.LongTensor(32).random_(10))
    test = data.TensorDataset((m.rand(24, 1, 28, 28) - 0.1307) / 0.3081, m.LongTensor(24).random_(10))
    net = nn.Sequential(
        nn.Conv2d(1, 10, 5), nn.MaxPool2d(2), nn.ReLU(), nn.Conv2d(10, 20, 5), nn.Dropout2d(), nn.MaxPool2d(2),
        nn.ReLU(), nn.Flatten(), nn.Linear(320, 50), nn.ReLU(), nn.Dropout(), nn.Linear(50, 10), nn.LogSoftmax(),
    )  # fmt: skip
    optimizer = m.optim.SGD(net.parameters(), lr=0.01, momentum=0.5)
    out = []
    for _ in range(2):
        net.train()
        for x, target in data.DataLoader(train, batch_size=8, shuffle=True):
            optimizer.zero_grad()
            loss = F.nll_loss(net(Variable(x)), Variable(target))
            loss.backward()
            optimizer.step()
            out.append(loss.item())
        net.eval()
        test_loss, correct = 0, 0
        for x, target in data.DataLoader(test, batch_size=12):
            output = net(Variable(x, volatile=True))
            test_loss += F.nll_loss(output, Variable(target), size_average=False).item()
            pred = output.data.max(1, keepdim=True)[1]
            correct += pred.eq(target.data.view_as(pred)).cpu().sum()
        out += [test_loss / 24, correct]

    def weights_init(module):
        if module.__class__.__name__.find("Conv") != -1:
            module.weight.data.normal_(0.0, 0.02)
        elif module.__class__.__name__.find("BatchNorm") != -1:
            module.weight.data.normal_(1.0, 0.02)
            module.bias.data.fill_(0)

    class Guarded(nn.Module):
        def __init__(self, *layers):
            super().__init__()
            self.main = nn.Sequential(*layers)

        def forward(self, input):
            if isinstance(input.data, m.cuda.FloatTensor):
                return nn.parallel.data_parallel(self.main, input, range(2))
            return self.main(input)

    netG = Guarded(
        nn.ConvTranspose2d(6, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16), nn.ReLU(True),
        nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(True),
        nn.ConvTranspose2d(8, 3, 4, 2, 1, bias=False), nn.Tanh(),
    )  # fmt: skip
    netD = Guarded(
        nn.Conv2d(3, 8, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(8, 16, 4, 2, 1, bias=False), nn.BatchNorm2d(16), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(16, 1, 4, 1, 0, bias=False), nn.Sigmoid(),
    )  # fmt: skip
    netG.apply(weights_init)
    netD.apply(weights_init)
    images = data.TensorDataset(m.rand(12, 3, 16, 16) * 2 - 1, m.zeros(12).long())
    input, noise, label = m.FloatTensor(4, 3, 16, 16), m.FloatTensor(4, 6, 1, 1), m.FloatTensor(4)
    fixed_noise = Variable(m.FloatTensor(4, 6, 1, 1).normal_(0, 1))
    optD = m.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optG = m.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for real, _ in data.DataLoader(images, batch_size=4, shuffle=True):
        netD.zero_grad()
        input.resize_as_(real).copy_(real)
        label.resize_(real.size(0)).fill_(1)
        errD_real = nn.BCELoss()(netD(Variable(input)).view(-1, 1).squeeze(1), Variable(label))
        errD_real.backward()
        noise.resize_(real.size(0), 6, 1, 1).normal_(0, 1)
        fake = netG(Variable(noise))
        errD_fake = nn.BCELoss()(netD(fake.detach()).view(-1), Variable(label.fill_(0)))
        errD_fake.backward()
        optD.step()
        netG.zero_grad()
        errG = nn.BCELoss()(netD(fake).view(-1), Variable(label.fill_(1)))
        errG.backward()
        optG.step()
        out += [(errD_real + errD_fake).item(), errG.item()]
    return out + [netG(fixed_noise).data, input.type(), label.size()]


@pytest.mark.slow
def test_mnist_and_dcgan():
    same_results(mnist_and_dcgan, F32)


def morvan_cnn_rnns_autoencoder(m):
    """A two-block CNN returning (logits, features) tested on volatile images cast with .type(torch.FloatTensor),
    an LSTM reading image rows with batch_first and a None initial state, an RNN regressor from sin to cos whose
    per-step outputs are stacked and whose state is carried as Variable(h_state.data), and a tanh autoencoder with a
    3-unit code, all scored with torch.max(out, 1)[1].data.numpy().squeeze() or .data.numpy()."""
    nn, Variable = m.nn, m.autograd.Variable
    m.manual_seed(1)
    loader = m.utils.data.DataLoader(
        m.utils.data.TensorDataset(m.rand(16, 1, 28, 28), m.LongTensor(16).random_(0, 10)), batch_size=8, shuffle=True
    )
    test_x = Variable(m.rand(6, 1, 28, 28), volatile=True).type(m.FloatTensor)
    conv = nn.Sequential(
        nn.Conv2d(1, 8, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 8, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(2)
    )
    head, lstm, lstm_out = nn.Linear(8 * 7 * 7, 10), nn.LSTM(28, 16, batch_first=True), nn.Linear(16, 10)
    opt = m.optim.Adam([*conv.parameters(), *head.parameters(), *lstm.parameters(), *lstm_out.parameters()], lr=1e-3)
    out = []
    for x, y in loader:
        features = conv(Variable(x)).view(x.size(0), -1)
        rows, _ = lstm(Variable(x.view(-1, 28, 28)), None)
        loss = nn.CrossEntropyLoss()(head(features), Variable(y)) + nn.CrossEntropyLoss()(lstm_out(rows[:, -1, :]), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    out.append(m.max(head(conv(test_x).view(6, -1)), 1)[1].data.numpy().squeeze())
    out.append(m.max(lstm_out(lstm(test_x.view(-1, 28, 28), None)[0][:, -1, :]), 1)[1].data.numpy().squeeze())

    rnn, linear = nn.RNN(1, 16, batch_first=True).double(), nn.Linear(16, 1).double()
    opt, h_state = m.optim.Adam([*rnn.parameters(), *linear.parameters()], lr=0.02), None
    for step in range(8):
        steps = np.linspace(step * np.pi, (step + 1) * np.pi, 10)
        x = Variable(m.from_numpy(np.sin(steps)[np.newaxis, :, np.newaxis]))
        r_out, h_state = rnn(x, h_state)
        h_state = Variable(h_state.data)
        prediction = m.stack([linear(r_out[:, t, :]) for t in range(r_out.size(1))], dim=1)
        loss = nn.MSELoss()(prediction, Variable(m.from_numpy(np.cos(steps)[np.newaxis, :, np.newaxis])))
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())

    encoder = nn.Sequential(nn.Linear(28 * 28, 32), nn.Tanh(), nn.Linear(32, 3)).double()
    decoder = nn.Sequential(nn.Linear(3, 32), nn.Tanh(), nn.Linear(32, 28 * 28), nn.Sigmoid()).double()
    opt = m.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=5e-3)
    for x, _ in loader:
        b_x = Variable(x.view(-1, 28 * 28).type(m.DoubleTensor))
        loss = nn.MSELoss()(decoder(encoder(b_x)), b_x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    code = encoder(Variable(test_x.data.view(-1, 28 * 28).type(m.DoubleTensor)))
    return out + [code.data[:, 0].numpy(), h_state.requires_grad]


@pytest.mark.slow
def test_morvan_cnn_rnns_autoencoder():
    same_results(morvan_cnn_rnns_autoencoder, F32)
