"""Programs in the style of 2017-2020 PyTorch code, which torch 2.13 still runs (with its deprecation warnings),
run with torch and with batched_grad from the same seed and compared number for number: Variable(..., volatile=),
the typed constructors (torch.FloatTensor(n), torch.LongTensor(list or ndarray)), .type() strings and classes,
`.data` updates (p.data -= lr * p.grad.data, p.data.add_(-lr, p.grad.data)), x.new(...), size_average=, init.normal
and clip_grad_norm without underscores, F.sigmoid/F.tanh, softmax without dim, set_default_tensor_type. Modelled on
jcjohnson/pytorch-examples, MorvanZhou/PyTorch-Tutorial and L1aoXingyu/pytorch-beginner (the sequence and image
programs of spro/practical-pytorch and old pytorch/examples are in test_fresh_programs_legacy_seq.py); data is
random, sizes are small."""

import io
import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

F32 = dict(rtol=2e-5, atol=1e-6)
F64 = dict(rtol=1e-9, atol=1e-11)


def same_results(program, tolerance, **kwargs):
    """program(torch) and program(batched_grad) with deprecation warnings silenced; strings and ints must be equal,
    numbers and tensors close."""

    def run(m):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return program(m, **kwargs)

    expected, actual = run(torch), run(bg)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        if isinstance(e, (str, bool, int)):
            assert a == e and type(a) is type(e), (i, a, e)
        else:
            assert_same(a, e, **tolerance)
    return expected


def two_layer_nets(m):
    """A ReLU net trained four ways: tensors with backprop written out (in-place updates, h < 0 masks), Variables
    with `.data` updates and zeroed `.grad.data`, a static Function whose backward masks a cloned gradient, and a
    Module whose forward repeats a middle layer a random number of times, with SGD momentum."""
    Variable = m.autograd.Variable
    m.manual_seed(0)
    dtype = m.DoubleTensor
    x, y = m.randn(8, 12).type(dtype), m.randn(8, 3).type(dtype)
    w1, w2 = m.randn(12, 6).type(dtype), m.randn(6, 3).type(dtype)
    out = [x.type(), w1.type()]
    for _ in range(5):
        h = x.mm(w1)
        h_relu = h.clamp(min=0)
        y_pred = h_relu.mm(w2)
        grad_y_pred = 2.0 * (y_pred - y)
        grad_h = grad_y_pred.mm(w2.t()).clone()
        grad_h[h < 0] = 0
        w1 -= 1e-3 * x.t().mm(grad_h)
        w2 -= 1e-3 * h_relu.t().mm(grad_y_pred)
    out += [w1, w2]

    class Relu(m.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return input.clamp(min=0)

        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors
            grad_input = grad_output.clone()
            grad_input[input < 0] = 0
            return grad_input

    v1 = Variable(m.randn(12, 6).type(dtype), requires_grad=True)
    v2 = Variable(m.randn(6, 3).type(dtype), requires_grad=True)
    out.append(v1.grad is None)
    for step in range(6):
        act = Relu.apply if step % 2 else (lambda t: t.clamp(min=0))
        loss = (act(Variable(x).mm(v1)).mm(v2) - Variable(y)).pow(2).sum()
        loss.backward()
        v1.data -= 1e-3 * v1.grad.data
        v2.data -= 1e-3 * v2.grad.data
        v1.grad.data.zero_()
        v2.grad.data.zero_()
        out.append(loss.item())
    out += [v1.data, v2.data, loss.data.dim(), v1.data.requires_grad]

    class Dynamic(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.middle, self.last = m.nn.Linear(12, 6), m.nn.Linear(6, 6), m.nn.Linear(6, 3)

        def forward(self, x, repeats):
            h = self.first(x).clamp(min=0)
            for _ in range(repeats):
                h = self.middle(h).clamp(min=0)
            return self.last(h)

    net = Dynamic().double()
    criterion = m.nn.MSELoss(size_average=False)
    optimizer = m.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
    for repeats in (0, 2, 1, 3, 0):
        loss = criterion(net(Variable(x), repeats), Variable(y, requires_grad=False))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        out.append(loss.item())
    return out + [p.data for p in net.parameters()]


@pytest.mark.slow
def test_two_layer_nets():
    same_results(two_layer_nets, F64)


def test_instance_method_function_is_refused_as_torch_refuses_it():
    def program(m):
        class OldRelu(m.autograd.Function):
            def forward(self, input):
                return input.clamp(min=0)

            def backward(self, grad_output):
                return grad_output

        with pytest.raises(RuntimeError) as error:
            OldRelu()(m.ones(2, requires_grad=True))
        return str(error.value).split("\n")[0]

    assert program(bg) == program(torch)


def regression_classification_save_reload(m):
    """A 1-10-1 regression on linspace data in float64, a two-blob classifier (torch.normal(2 * ones, 1),
    .type(torch.LongTensor) labels, torch.max(F.softmax(out, dim=1), 1)[1] accuracy), the same net rebuilt as a
    Sequential through .data copies and assignment, F.sigmoid/F.tanh, and a model saved whole and as a state dict
    and loaded back."""
    nn, F, Variable = m.nn, m.nn.functional, m.autograd.Variable
    m.manual_seed(1)
    x = Variable(m.unsqueeze(m.linspace(-1, 1, 40), dim=1).double())
    y = Variable(x.data.pow(2) + 0.2 * m.rand(x.size()).double())

    class Net(nn.Module):
        def __init__(self, n_feature, n_hidden, n_output):
            super().__init__()
            self.hidden = nn.Linear(n_feature, n_hidden)
            self.predict = nn.Linear(n_hidden, n_output)

        def forward(self, x):
            return self.predict(F.relu(self.hidden(x)))

    net = Net(1, 10, 1).double()
    optimizer = m.optim.SGD(net.parameters(), lr=0.2)
    out = []
    for _ in range(15):
        loss = nn.MSELoss()(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        out.append(float(loss.data.numpy()))
    n_data = m.ones(30, 2)
    xs = m.cat((m.normal(2 * n_data, 1), m.normal(-2 * n_data, 1)), 0).type(m.FloatTensor)
    ys = m.cat((m.zeros(30), m.ones(30))).type(m.LongTensor)
    out += [xs.type(), ys.type()]
    xs, ys = Variable(xs), Variable(ys)
    net = Net(2, 10, 2)
    optimizer = m.optim.SGD(net.parameters(), lr=0.02)
    for _ in range(10):
        logits = net(xs)
        loss = nn.CrossEntropyLoss()(logits, ys)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        prediction = m.max(F.softmax(logits, dim=1), 1)[1]
        out.append(float(sum(prediction.data.numpy().squeeze() == ys.data.numpy())) / 60.0)
    seq = nn.Sequential(nn.Linear(2, 10), nn.ReLU(), nn.Linear(10, 2))
    seq[0].weight.data.copy_(net.hidden.weight.data)
    seq[0].bias.data = net.hidden.bias.data.clone()
    seq[2].weight.data.copy_(net.predict.weight.data)
    seq[2].bias.data.copy_(net.predict.bias.data)
    out += [m.equal(seq(xs).data, net(xs).data), F.sigmoid(xs[:3]).data, F.tanh(xs[:3]).data]
    whole, params = io.BytesIO(), io.BytesIO()
    m.save(seq, whole)
    m.save(seq.state_dict(), params)
    whole.seek(0)
    params.seek(0)
    restored = nn.Sequential(nn.Linear(2, 10), nn.ReLU(), nn.Linear(10, 2))
    restored.load_state_dict(m.load(params))
    return out + [m.load(whole, weights_only=False)(xs[:4]).data, restored(xs[:4]).data]


@pytest.mark.slow
def test_regression_classification_save_reload():
    same_results(regression_classification_save_reload, F32)


def batches_and_optimizers(m):
    """TensorDataset and a shuffling DataLoader printed batch by batch, then four copies of a net trained side by
    side on the same batches with SGD, momentum SGD, RMSprop(alpha=0.9) and Adam(betas=(0.9, 0.99)), losses kept as
    loss.data.numpy()."""
    Data, Variable = m.utils.data, m.autograd.Variable
    m.manual_seed(1)
    out = []
    loader = Data.DataLoader(Data.TensorDataset(m.linspace(1, 10, 10), m.linspace(10, 1, 10)), 5, shuffle=True)
    for _ in range(2):
        for batch_x, batch_y in loader:
            out += [batch_x, batch_y]
    x = m.unsqueeze(m.linspace(-1, 1, 64), dim=1)
    y = x.pow(2) + 0.1 * m.normal(m.zeros(*x.size()))
    loader = Data.DataLoader(Data.TensorDataset(x, y), batch_size=16, shuffle=True)
    nets = [m.nn.Sequential(m.nn.Linear(1, 20), m.nn.ReLU(), m.nn.Linear(20, 1)) for _ in range(4)]
    optimizers = [
        m.optim.SGD(nets[0].parameters(), lr=0.01),
        m.optim.SGD(nets[1].parameters(), lr=0.01, momentum=0.8),
        m.optim.RMSprop(nets[2].parameters(), lr=0.01, alpha=0.9),
        m.optim.Adam(nets[3].parameters(), lr=0.01, betas=(0.9, 0.99)),
    ]
    for _ in range(2):
        for b_x, b_y in loader:
            for net, opt in zip(nets, optimizers):
                loss = m.nn.MSELoss()(net(Variable(b_x)), Variable(b_y))
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(float(loss.data.numpy()))
    return out


@pytest.mark.slow
def test_batches_and_optimizers():
    same_results(batches_and_optimizers, F32)


def dqn_on_a_hand_written_cart_pole(m):
    """A DQN whose nets are initialised through weight.data.normal_, actions chosen from
    Variable(torch.unsqueeze(torch.FloatTensor(state), 0)) with torch.max(q, 1)[1].data.numpy()[0], a replay memory
    in a NumPy array sampled into FloatTensor/LongTensor(ndarray) batches, gather/detach/max(1)[0] targets and a
    target net refreshed through load_state_dict; the environment is a few lines of cart-pole physics."""
    nn, F, Variable = m.nn, m.nn.functional, m.autograd.Variable
    m.manual_seed(0)
    rng = np.random.RandomState(0)
    n_states, n_actions, capacity, batch = 4, 2, 40, 8

    def physics(state, action):
        x, x_dot, theta, theta_dot = state
        force = 10.0 if action == 1 else -10.0
        temp = (force + 0.05 * theta_dot**2 * np.sin(theta)) / 1.1
        theta_acc = (9.8 * np.sin(theta) - np.cos(theta) * temp) / (0.5 * (4 / 3 - 0.1 * np.cos(theta) ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * np.cos(theta) / 1.1
        new = np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc])
        return new, bool(abs(new[0]) > 2.4 or abs(new[2]) > 0.21)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(n_states, 10)
            self.fc1.weight.data.normal_(0, 0.1)
            self.out = nn.Linear(10, n_actions)
            self.out.weight.data.normal_(0, 0.1)

        def forward(self, x):
            return self.out(F.relu(self.fc1(x)))

    eval_net, target_net = Net(), Net()
    optimizer = m.optim.Adam(eval_net.parameters(), lr=0.01)
    memory, counter, learned, out = np.zeros((capacity, n_states * 2 + 2)), 0, 0, []
    for _ in range(6):
        state = rng.uniform(-0.05, 0.05, 4)
        for _ in range(200):
            if rng.uniform() < 0.9:
                q = eval_net(Variable(m.unsqueeze(m.FloatTensor(state), 0)))
                action = int(m.max(q, 1)[1].data.numpy()[0])
            else:
                action = rng.randint(0, n_actions)
            new_state, done = physics(state, action)
            reward = (2.4 - abs(new_state[0])) / 2.4 - 0.8 + (0.21 - abs(new_state[2])) / 0.21 - 0.5
            memory[counter % capacity] = np.hstack((state, [action, reward], new_state))
            counter += 1
            if counter > capacity:
                if learned % 10 == 0:
                    target_net.load_state_dict(eval_net.state_dict())
                learned += 1
                sample = memory[rng.choice(capacity, batch)]
                b_s = Variable(m.FloatTensor(sample[:, :n_states]))
                b_a = Variable(m.LongTensor(sample[:, n_states : n_states + 1].astype(int)))
                b_r = Variable(m.FloatTensor(sample[:, n_states + 1 : n_states + 2]))
                q_next = target_net(Variable(m.FloatTensor(sample[:, -n_states:]))).detach()
                loss = nn.MSELoss()(eval_net(b_s).gather(1, b_a), b_r + 0.9 * q_next.max(1)[0].view(batch, 1))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                out.append(loss.item())
            if done:
                break
            state = new_state
    return out + [p.data for p in eval_net.parameters()]


@pytest.mark.slow
def test_dqn_on_a_hand_written_cart_pole():
    same_results(dqn_on_a_hand_written_cart_pole, F32)


def gans_on_parabolas(m):
    """The parabola-painting GAN in float64 (set_default_tensor_type('torch.DoubleTensor')): the old ordering that
    steps D before G's backward is refused by both libraries (a saved weight changed in place) and retried; the
    conditional GAN with labels concatenated to ideas and paintings, both backward passes before either step."""
    nn, Variable = m.nn, m.autograd.Variable
    m.manual_seed(1)
    rng = np.random.RandomState(1)
    m.set_default_tensor_type("torch.DoubleTensor")
    try:
        points = np.vstack([np.linspace(-1, 1, 15) for _ in range(16)])
        out = []
        for conditional in (False, True):
            extra = 1 if conditional else 0
            G = nn.Sequential(nn.Linear(5 + extra, 32), nn.ReLU(), nn.Linear(32, 15))
            D = nn.Sequential(nn.Linear(15 + extra, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
            opt_D, opt_G = m.optim.Adam(D.parameters(), lr=1e-4), m.optim.Adam(G.parameters(), lr=1e-4)
            for _ in range(8):
                a = rng.uniform(1, 2, size=16)[:, np.newaxis]
                paintings = Variable(m.from_numpy(a * points**2 + (a - 1)).float().double())
                labels = Variable(m.from_numpy(((a - 1) > 0.5).astype(np.float32)).double())
                ideas = Variable(m.randn(16, 5))
                g_in = m.cat((ideas, labels), 1) if conditional else ideas
                fake = G(g_in)
                prob_real = D(m.cat((paintings, labels), 1) if conditional else paintings)
                prob_fake = D(m.cat((fake, labels), 1) if conditional else fake)
                D_loss = -m.mean(m.log(prob_real) + m.log(1.0 - prob_fake))
                G_loss = m.mean(m.log(1.0 - prob_fake))
                opt_D.zero_grad()
                D_loss.backward(retain_graph=True)
                if conditional:
                    opt_G.zero_grad()
                    G_loss.backward()
                    opt_D.step()
                else:
                    opt_D.step()
                    opt_G.zero_grad()
                    try:
                        G_loss.backward()
                    except RuntimeError as error:
                        out.append(str(error).split("\n")[0])
                        m.mean(m.log(1.0 - D(G(g_in)))).backward()
                opt_G.step()
                out += [prob_real.data.numpy().mean(), -D_loss.data.numpy(), int(labels.data[0, 0])]
            out.append(
                G(m.cat((m.randn(1, 5), m.FloatTensor([[1.0]]).type(m.DoubleTensor)), 1)).data
                if conditional
                else G(m.randn(1, 5)).data
            )
        return out + [m.Tensor(2).type()]
    finally:
        m.set_default_tensor_type(m.FloatTensor)


@pytest.mark.slow
def test_gans_on_parabolas():
    same_results(gans_on_parabolas, F64)


def dropout_and_batch_norm(m):
    """An overfitting net against one with Dropout(0.5) evaluated on volatile test data in eval mode, then eight
    tanh layers (F.tanh) initialised with init.normal/init.constant, registered by setattr and kept in a plain list,
    with and without BatchNorm1d(momentum=0.5), trained on DataLoader batches. Only the training losses are compared
    for the batch-norm net: a bias feeding a batch norm has a gradient that is rounding noise, which Adam turns into
    steps that move the running mean apart (in either library, run to run of the summation order)."""
    nn, F, Variable = m.nn, m.nn.functional, m.autograd.Variable
    m.manual_seed(1)
    m.set_default_dtype(m.float64)
    try:
        rng = np.random.RandomState(1)
        x = m.unsqueeze(m.linspace(-1, 1, 16), 1)
        y = x + 0.3 * m.normal(m.zeros(16, 1), m.ones(16, 1))
        test_x = Variable(m.unsqueeze(m.linspace(-1, 1, 16), 1), volatile=True)
        test_y = Variable(test_x.data + 0.3 * m.normal(m.zeros(16, 1), m.ones(16, 1)), volatile=True)
        plain = nn.Sequential(nn.Linear(1, 50), nn.ReLU(), nn.Linear(50, 50), nn.ReLU(), nn.Linear(50, 1))
        dropped = nn.Sequential(
            nn.Linear(1, 50),
            nn.Dropout(0.5),
            nn.ReLU(),
            nn.Linear(50, 50),
            nn.Dropout(0.5),
            nn.ReLU(),
            nn.Linear(50, 1),
        )
        out = [test_x.requires_grad]
        for net in (plain, dropped):
            opt = m.optim.Adam(net.parameters(), lr=0.01)
            for _ in range(10):
                loss = nn.MSELoss()(net(Variable(x)), Variable(y))
                opt.zero_grad()
                loss.backward()
                opt.step()
            net.eval()
            out.append(nn.MSELoss()(net(test_x), test_y).item())
            net.train()

        class Net(nn.Module):
            def __init__(self, batch_normalization):
                super().__init__()
                self.do_bn, self.fcs, self.bns = batch_normalization, [], []
                self.bn_input = nn.BatchNorm1d(1, momentum=0.5)
                for i in range(8):
                    fc = nn.Linear(1 if i == 0 else 10, 10)
                    setattr(self, f"fc{i}", fc)
                    nn.init.normal(fc.weight, mean=0.0, std=0.1)
                    nn.init.constant(fc.bias, -0.2)
                    self.fcs.append(fc)
                    if self.do_bn:
                        bn = nn.BatchNorm1d(10, momentum=0.5)
                        setattr(self, f"bn{i}", bn)
                        self.bns.append(bn)
                self.predict = nn.Linear(10, 1)

            def forward(self, x):
                x = self.bn_input(x) if self.do_bn else x
                for i in range(8):
                    x = self.fcs[i](x)
                    x = F.tanh(self.bns[i](x) if self.do_bn else x)
                return self.predict(x)

        points = np.linspace(-7, 10, 96)[:, np.newaxis]
        data = m.utils.data.TensorDataset(
            m.from_numpy(points), m.from_numpy(np.square(points) - 5 + rng.normal(0, 2, points.shape))
        )
        loader = m.utils.data.DataLoader(data, batch_size=32, shuffle=True)
        nets = [Net(False), Net(True)]
        opts = [m.optim.Adam(net.parameters(), lr=0.03) for net in nets]
        for _ in range(2):
            for b_x, b_y in loader:
                for net, opt in zip(nets, opts):
                    loss = nn.MSELoss()(net(Variable(b_x)), Variable(b_y))
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    out.append(loss.item())
        nets[0].eval()
        return out + [nets[0](test_x).data, len(list(nets[1].parameters()))]
    finally:
        m.set_default_dtype(m.float32)


@pytest.mark.slow
def test_dropout_and_batch_norm():
    same_results(dropout_and_batch_norm, dict(rtol=1e-7, atol=1e-9))


def logistic_regression_and_lenet(m):
    """Logistic regression on flattened images and a small LeNet, counted the old way: running_loss +=
    loss.item() * label.size(0), `_, pred = torch.max(out, 1)`, (pred == label).sum(), volatile evaluation, guarded
    .cuda() calls, and the state dict saved."""
    nn, Variable = m.nn, m.autograd.Variable
    m.manual_seed(1)
    train = m.utils.data.TensorDataset(m.rand(32, 1, 28, 28), m.LongTensor(32).random_(0, 10))
    test = m.utils.data.TensorDataset(m.rand(16, 1, 28, 28), m.LongTensor(16).random_(0, 10))
    lenet = nn.Sequential(
        nn.Conv2d(1, 6, 3, stride=1, padding=1), nn.ReLU(True), nn.MaxPool2d(2, 2),
        nn.Conv2d(6, 16, 5), nn.ReLU(True), nn.MaxPool2d(2, 2), nn.Flatten(), nn.Linear(400, 84), nn.Linear(84, 10),
    )  # fmt: skip
    out = []
    for model, flatten, lr in ((nn.Linear(28 * 28, 10), True, 0.1), (lenet, False, 0.01)):
        if m.cuda.is_available():
            model = model.cuda()
        optimizer = m.optim.SGD(model.parameters(), lr=lr)
        running_loss = running_acc = 0.0
        for img, label in m.utils.data.DataLoader(train, batch_size=8, shuffle=True):
            img = Variable(img.view(img.size(0), -1) if flatten else img)
            logits = model(img)
            loss = nn.CrossEntropyLoss()(logits, Variable(label))
            running_loss += loss.item() * label.size(0)
            _, pred = m.max(logits, 1)
            running_acc += (pred == label).sum().item()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        img, label = test.tensors
        logits = model(Variable(img.view(16, -1) if flatten else img, volatile=True))
        num_correct = (m.max(logits, 1)[1] == label).sum()
        buffer = io.BytesIO()
        m.save(model.state_dict(), buffer)
        out += [running_loss, running_acc, logits.data, num_correct.type(), len(buffer.getvalue()) > 0]
    return out


@pytest.mark.slow
def test_logistic_regression_and_lenet():
    same_results(logistic_regression_and_lenet, F32)
