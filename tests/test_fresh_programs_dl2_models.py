"""Vision, audio and sequence models as public programs write them, run with torch and with batched_grad from the
same seed: a U-Net, depthwise convolutions with mixup and cutmix, a Conv1d audio net, weight averaging with gradient
accumulation, a conditional VAE with beta-VAE objectives, a packed tagger with dropout on its unpacked outputs next
to a TransformerDecoder, and nn.Transformer translation with greedy decoding."""

import math
from copy import deepcopy

import numpy as np
import pytest

from test_fresh_programs_dl2 import F64, _both


def unet(m, bilinear):
    """A three-level U-Net: double convolutions with BatchNorm, max-pool downsampling, upsampling by bilinear
    Upsample(align_corners=True) or ConvTranspose2d with F.pad to the skip's size, a 1x1 head; cross entropy plus a
    multiclass dice loss on one-hot masks (F.one_hot().permute), a PixelShuffle/PixelUnshuffle auxiliary head,
    RMSprop (foreach) with gradient clipping, ReduceLROnPlateau on the validation dice."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)

    def double_conv(fan_in, fan_out, mid=None):
        mid = mid or fan_out
        return nn.Sequential(
            nn.Conv2d(fan_in, mid, 3, padding=1, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, fan_out, 3, padding=1, bias=False),
            nn.BatchNorm2d(fan_out),
            nn.ReLU(True),
        )

    class Up(nn.Module):
        def __init__(self, fan_in, fan_out):
            super().__init__()
            if bilinear:
                self.up, self.conv = (
                    nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True),
                    double_conv(fan_in, fan_out, fan_in // 2),
                )
            else:
                self.up, self.conv = nn.ConvTranspose2d(fan_in, fan_in // 2, 2, stride=2), double_conv(fan_in, fan_out)

        def forward(self, x1, x2):
            x1 = self.up(x1)
            dy, dx = x2.size(2) - x1.size(2), x2.size(3) - x1.size(3)
            return self.conv(m.cat([x2, F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])], dim=1))

    factor = 2 if bilinear else 1
    inc, down1, down2 = (
        double_conv(3, 4),
        nn.Sequential(nn.MaxPool2d(2), double_conv(4, 8)),
        nn.Sequential(nn.MaxPool2d(2), double_conv(8, 16 // factor)),
    )
    up1, up2, outc = Up(16, 8 // factor), Up(8, 4), nn.Conv2d(4, 3, 1)
    aux = nn.Sequential(nn.Conv2d(4, 12, 3, padding=1), nn.PixelShuffle(2))
    unshuffle = nn.PixelUnshuffle(2)
    model = nn.ModuleList([inc, down1, down2, up1, up2, outc, aux]).double()

    def forward(x):
        x1 = inc(x)
        x2 = down1(x1)
        return outc(up2(up1(down2(x2), x2), x1)), x1

    def dice(pred, target, eps=1e-6):
        inter = 2 * (pred * target).sum(dim=(-1, -2, -3))
        sets = pred.sum(dim=(-1, -2, -3)) + target.sum(dim=(-1, -2, -3))
        return ((inter + eps) / (m.where(sets == 0, inter, sets) + eps)).mean()

    images = m.rand(4, 3, 10, 10, dtype=m.float64)
    masks = (images[:, 0] > 0.5).long() + (images[:, 1] > 0.7).long()
    opt = m.optim.RMSprop(model.parameters(), lr=1e-3, weight_decay=1e-8, momentum=0.9, foreach=True)
    sched = m.optim.lr_scheduler.ReduceLROnPlateau(opt, "max", patience=0)
    record = []
    for _ in range(3):
        model.train()
        logits, x1 = forward(images)
        onehot = F.one_hot(masks, 3).permute(0, 3, 1, 2).double()
        up = aux(F.avg_pool2d(x1, 2))
        loss = (
            F.cross_entropy(logits, masks)
            + 1
            - dice(F.softmax(logits, dim=1), onehot)
            + 0.1 * F.cross_entropy(up, masks)
            + 0.01 * unshuffle(up).pow(2).mean()
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model.eval()
        with m.inference_mode():
            pred = F.one_hot(forward(images)[0].argmax(dim=1), 3).permute(0, 3, 1, 2).double()
            score = dice(pred[:, 1:], onehot[:, 1:])
        sched.step(score)
        record.append((loss.detach(), norm, score, opt.param_groups[0]["lr"]))
    return record, inc[1].running_var, [p.detach() for p in model.parameters()]


@pytest.mark.slow
@pytest.mark.parametrize("bilinear", [False, True])
def test_unet(bilinear):
    _both(unet, F64, bilinear=bilinear)


def depthwise_mixup(m):
    """Inverted residual blocks (1x1 expand, 3x3 depthwise with groups=planes, 1x1 project, a shortcut conv when the
    widths differ) trained with mixup (a Beta draw from NumPy, torch.randperm partners, the loss mixed by lam) and
    accuracy bookkeeping weighted by lam; then cutmix steps pasting a random box from permuted partners."""
    nn, F = m.nn, m.nn.functional
    np.random.seed(0)
    m.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, fan_in, fan_out, expansion, stride):
            super().__init__()
            planes = expansion * fan_in
            self.stride = stride
            self.expand = nn.Sequential(nn.Conv2d(fan_in, planes, 1, bias=False), nn.BatchNorm2d(planes))
            self.depthwise = nn.Sequential(
                nn.Conv2d(planes, planes, 3, stride, 1, groups=planes, bias=False), nn.BatchNorm2d(planes)
            )
            self.project = nn.Sequential(nn.Conv2d(planes, fan_out, 1, bias=False), nn.BatchNorm2d(fan_out))
            self.shortcut = nn.Sequential()
            if stride == 1 and fan_in != fan_out:
                self.shortcut = nn.Sequential(nn.Conv2d(fan_in, fan_out, 1, bias=False), nn.BatchNorm2d(fan_out))

        def forward(self, x):
            out = self.project(F.relu(self.depthwise(F.relu(self.expand(x)))))
            return out + self.shortcut(x) if self.stride == 1 else out

    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        Block(8, 8, 1, 1),
        Block(8, 12, 4, 1),
        Block(12, 16, 4, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 5),
    ).double()
    opt = m.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    images, labels = m.rand(12, 3, 8, 8, dtype=m.float64), m.randint(0, 5, (12,))
    record, correct, total = [], 0.0, 0
    for inputs, targets in zip(images.split(4), labels.split(4)):
        lam = np.random.beta(1.0, 1.0)
        index = m.randperm(inputs.size(0))
        outputs = net(lam * inputs + (1 - lam) * inputs[index, :])
        loss = lam * F.cross_entropy(outputs, targets) + (1 - lam) * F.cross_entropy(outputs, targets[index])
        _, predicted = m.max(outputs.data, 1)
        total += targets.size(0)
        correct += (
            lam * predicted.eq(targets).cpu().sum().float() + (1 - lam) * predicted.eq(targets[index]).sum().float()
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        record.append((loss.detach(), correct / total))
    for inputs, targets in zip(images.split(4), labels.split(4)):
        inputs, lam = inputs.clone(), np.random.beta(1.0, 1.0)
        index = m.randperm(inputs.size(0))
        cut = int(8 * np.sqrt(1.0 - lam))
        cx, cy = np.random.randint(8), np.random.randint(8)
        x1, x2 = np.clip(cx - cut // 2, 0, 8), np.clip(cx + cut // 2, 0, 8)
        y1, y2 = np.clip(cy - cut // 2, 0, 8), np.clip(cy + cut // 2, 0, 8)
        inputs[:, :, x1:x2, y1:y2] = inputs[index, :, x1:x2, y1:y2]
        lam = 1 - (x2 - x1) * (y2 - y1) / 64
        outputs = net(inputs)
        loss = F.cross_entropy(outputs, targets) * lam + F.cross_entropy(outputs, targets[index]) * (1.0 - lam)
        opt.zero_grad()
        loss.backward()
        opt.step()
        record.append(loss.detach())
    return record, [p.detach() for p in net.parameters()]


@pytest.mark.slow
def test_depthwise_mixup():
    _both(depthwise_mixup, F64)


def conv1d_audio(m):
    """The M5 waveform classifier: a wide strided Conv1d, BatchNorm1d/ReLU/MaxPool1d stages, avg_pool1d over the
    remaining length, permute and log_softmax over dim 2; variable-length waveforms padded by a collate_fn
    (pad_sequence of transposed items, permuted back), nll_loss on output.squeeze(), Adam with weight decay, StepLR,
    accuracy from argmax(dim=-1)."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    g = m.Generator().manual_seed(1)
    items = []
    for i in range(12):
        n = int(m.randint(600, 700, (1,), generator=g))
        t = m.arange(n, dtype=m.float64) / 800
        items.append((m.sin(2 * math.pi * 40.0 * (i % 3 + 1) * t).unsqueeze(0), i % 3))

    def collate(batch):
        waves = m.nn.utils.rnn.pad_sequence([w.t() for w, _ in batch], batch_first=True, padding_value=0.0)
        return waves.permute(0, 2, 1), m.stack([m.tensor(label) for _, label in batch])

    net = nn.Sequential(
        nn.Conv1d(1, 8, kernel_size=40, stride=8),
        nn.BatchNorm1d(8),
        nn.ReLU(),
        nn.MaxPool1d(4),
        nn.Conv1d(8, 8, 3),
        nn.BatchNorm1d(8),
        nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Conv1d(8, 16, 3),
        nn.BatchNorm1d(16),
        nn.ReLU(),
    ).double()
    fc = nn.Linear(16, 3).double()

    def forward(x):
        x = net(x)
        return F.log_softmax(fc(F.avg_pool1d(x, x.shape[-1]).permute(0, 2, 1)), dim=2)

    opt = m.optim.Adam([*net.parameters(), *fc.parameters()], lr=0.01, weight_decay=1e-4)
    sched = m.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    loader = m.utils.data.DataLoader(items, batch_size=4, shuffle=True, collate_fn=collate)
    record = []
    for _ in range(2):
        net.train()
        for data, target in loader:
            loss = F.nll_loss(forward(data).squeeze(), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            record.append(loss.detach())
        sched.step()
        net.eval()
        data, target = collate(items)
        record.append(forward(data).argmax(dim=-1).squeeze().eq(target).sum().item())
    return record, net[1].running_mean, fc.weight.detach()


@pytest.mark.slow
def test_conv1d_audio():
    _both(conv1d_audio, F64)


def weight_averaging(m):
    """A Conv1d encoder with masked attention pooling trained with gradient accumulation (loss / steps, clipping
    every third batch) from a Generator-seeded shuffling DataLoader; an EMA copy updated by zipping state_dict values
    under no_grad (integer batch counters included), swa_utils' AveragedModel (plain and with
    get_ema_multi_avg_fn), SWALR, and update_bn recomputing the averaged model's batch statistics."""
    nn, F, swa = m.nn, m.nn.functional, m.optim.swa_utils
    m.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Sequential(nn.Conv1d(3, 8, 3, padding=1), nn.BatchNorm1d(8), nn.GELU())
            self.score, self.head = nn.Linear(8, 1), nn.Linear(8, 2)

        def forward(self, x, lengths=None):
            h = self.conv(x).transpose(1, 2)
            lengths = m.full((x.shape[0],), x.shape[-1]) if lengths is None else lengths
            keep = m.arange(x.shape[-1])[None, :] < lengths[:, None]
            weights = self.score(h).squeeze(-1).masked_fill(~keep, float("-inf")).softmax(dim=-1)
            return self.head(m.bmm(weights.unsqueeze(1), h).squeeze(1))

    x, lengths = m.randn(24, 3, 8, dtype=m.float64), m.randint(3, 9, (24,))
    y = (x[:, 0].mean(-1) > 0).long()
    model = Net().double()
    ema = deepcopy(model).eval()
    swa_model, ema_model = (
        swa.AveragedModel(model),
        swa.AveragedModel(model, multi_avg_fn=swa.get_ema_multi_avg_fn(0.9)),
    )
    opt = m.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    swa_sched = swa.SWALR(opt, swa_lr=1e-3, anneal_epochs=2, anneal_strategy="cos")
    loader = m.utils.data.DataLoader(
        m.utils.data.TensorDataset(x, lengths, y), batch_size=4, shuffle=True, generator=m.Generator().manual_seed(5)
    )
    record = []
    for epoch in range(3):
        model.train()
        for i, (xb, lb, yb) in enumerate(loader):
            (F.cross_entropy(model(xb, lb), yb, label_smoothing=0.05) / 3).backward()
            if (i + 1) % 3 == 0:
                record.append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5))
                opt.step()
                opt.zero_grad(set_to_none=True)
                with m.no_grad():
                    for e, v in zip(ema.state_dict().values(), model.state_dict().values()):
                        e.copy_(0.9 * e + 0.1 * v)
                ema_model.update_parameters(model)
        if epoch >= 1:
            swa_model.update_parameters(model)
            swa_sched.step()
        record.append(opt.param_groups[0]["lr"])
    swa.update_bn(m.utils.data.DataLoader(m.utils.data.TensorDataset(x), batch_size=8), swa_model)
    with m.no_grad():
        outputs = [net.eval()(x, lengths) for net in (model, ema, swa_model, ema_model)]
    counters = [ema.conv[1].num_batches_tracked, swa_model.n_averaged, ema_model.n_averaged]
    return record, outputs, counters, swa_model.module.conv[1].running_var


@pytest.mark.slow
def test_weight_averaging():
    _both(weight_averaging, F64)


def conditional_vae(m, conditional):
    """An MLP VAE, optionally conditioned on a one-hot label built with scatter_ (concatenated to encoder input and
    latent): reparameterization with randn_like, summed binary cross entropy plus KL divergence, Adam; samples from
    the prior for each label. Then beta-VAE objectives on a linear pair: beta * KLD and gamma * |KLD - C| with the
    capacity C annealed and clamped (reconstruction by bce_with_logits with the deprecated size_average)."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    protos = (m.rand(4, 16) > 0.5).double()
    labels = m.randint(0, 4, (24,))
    images = (protos[labels] + (m.rand(24, 16) < 0.1).double()) % 2

    def onehot(c):
        return m.zeros(c.size(0), 4, dtype=m.float64).scatter_(1, c.unsqueeze(1), 1)

    extra = 4 if conditional else 0
    encoder = nn.Sequential(nn.Linear(16 + extra, 12), nn.ReLU(), nn.Linear(12, 4)).double()
    decoder = nn.Sequential(nn.Linear(2 + extra, 12), nn.ReLU(), nn.Linear(12, 16), nn.Sigmoid()).double()
    opt = m.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=0.005)
    losses = []
    for x, c in zip(images.split(8), labels.split(8)):
        condition = [onehot(c)] if conditional else []
        mean, log_var = encoder(m.cat([x, *condition], -1)).chunk(2, dim=-1)
        z = mean + m.randn_like(mean) * m.exp(0.5 * log_var)
        recon = decoder(m.cat([z, *condition], -1))
        kld = -0.5 * m.sum(1 + log_var - mean.pow(2) - log_var.exp())
        loss = (F.binary_cross_entropy(recon, x, reduction="sum") + kld) / x.size(0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    c = m.arange(0, 4)
    samples = decoder(m.cat([m.randn(4, 2, dtype=m.float64), *([onehot(c)] if conditional else [])], -1))
    enc, dec = nn.Linear(16, 4).double(), nn.Linear(2, 16).double()
    opt = m.optim.Adam([*enc.parameters(), *dec.parameters()], lr=1e-3)
    c_max = m.tensor([2.0], dtype=m.float64)
    for step in range(6):
        mu, logvar = enc(images[:8]).chunk(2, dim=-1)
        z = mu + logvar.div(2).exp() * logvar.data.new(logvar.size()).normal_()
        recon = F.binary_cross_entropy_with_logits(dec(z), images[:8], size_average=False).div(8)
        total_kld = (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp())).sum(1).mean(0, True)
        capacity = m.clamp(c_max / 4 * (step + 1), 0, c_max.data[0])
        loss = recon + (4 * total_kld if step < 3 else 100 * (total_kld - capacity).abs())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses, samples.detach()


@pytest.mark.slow
@pytest.mark.parametrize("conditional", [False, True])
def test_conditional_vae(conditional):
    _both(conditional_vae, F64, conditional=conditional)


def packed_tagger_and_decoder(m, cell):
    """A two-layer bidirectional tagger (embedding with padding_idx, pack_padded_sequence(enforce_sorted=False),
    pad_packed_sequence(total_length) then dropout on the unpacked outputs), cross entropy ignoring pad tags and an
    accuracy over non-pad positions by nonzero indexing; then a decoder-only nn.TransformerDecoder (norm_first,
    gelu, a causal mask from generate_square_subsequent_mask, key padding masks) over an encoder's memory."""
    nn, rnn = m.nn, m.nn.utils.rnn
    m.manual_seed(0)
    sentences = [m.randint(1, 12, (int(n),)) for n in m.randint(2, 7, (8,))]
    tags = [s % 3 + 1 for s in sentences]
    emb, drop = nn.Embedding(12, 6, padding_idx=0).double(), nn.Dropout(0.25)
    net = getattr(nn, cell)(6, 5, num_layers=2, bidirectional=True, dropout=0.25, batch_first=True).double()
    fc = nn.Linear(10, 4).double()
    params = [*emb.parameters(), *net.parameters(), *fc.parameters()]
    opt = m.optim.Adam(params)
    record = []
    for batch in range(2):
        text = rnn.pad_sequence(sentences[batch * 4 : batch * 4 + 4], batch_first=True)
        gold = rnn.pad_sequence(tags[batch * 4 : batch * 4 + 4], batch_first=True).view(-1)
        lengths = m.tensor([len(s) for s in sentences[batch * 4 : batch * 4 + 4]])
        packed = rnn.pack_padded_sequence(drop(emb(text)), lengths, batch_first=True, enforce_sorted=False)
        outputs, _ = rnn.pad_packed_sequence(net(packed)[0], batch_first=True, total_length=text.shape[1])
        predictions = fc(drop(outputs)).view(-1, 4)
        loss = nn.functional.cross_entropy(predictions, gold, ignore_index=0)
        kept = (gold != 0).nonzero()
        accuracy = predictions.argmax(1, keepdim=True)[kept].squeeze(1).eq(gold[kept]).sum() / kept.shape[0]
        opt.zero_grad()
        loss.backward()
        opt.step()
        record.append((loss.detach(), accuracy))
    layer = nn.TransformerDecoderLayer(6, 2, 12, dropout=0.1, activation="gelu", batch_first=True, norm_first=True)
    decoder = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(6)).double()
    encoder = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(6, 2, 12, 0.1, batch_first=True), 1, enable_nested_tensor=False
    ).double()
    head = nn.Linear(6, 12).double()
    opt = m.optim.AdamW([*emb.parameters(), *decoder.parameters(), *encoder.parameters(), *head.parameters()], lr=3e-3)
    for batch in range(2):
        src = rnn.pad_sequence(sentences[batch * 4 : batch * 4 + 4], batch_first=True)
        tgt = rnn.pad_sequence([s.flip(0) for s in sentences[batch * 4 : batch * 4 + 4]], batch_first=True)
        memory = encoder(emb(src), src_key_padding_mask=src == 0)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1) - 1, dtype=m.float64)
        hidden = decoder(
            emb(tgt[:, :-1]),
            memory,
            tgt_mask=causal,
            tgt_key_padding_mask=tgt[:, :-1] == 0,
            memory_key_padding_mask=src == 0,
            tgt_is_causal=True,
        )
        loss = nn.functional.cross_entropy(head(hidden).reshape(-1, 12), tgt[:, 1:].reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        record.append(loss.detach())
    return record, [p.detach() for p in net.parameters()], head.weight.detach()


@pytest.mark.slow
@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_packed_tagger_and_decoder(cell):
    _both(packed_tagger_and_decoder, F64, cell=cell)


def transformer_translation(m):
    """nn.Transformer over sequence-first token batches: scaled token embeddings plus a sin/cos positional buffer,
    a float causal mask built by masked_fill of a transposed triu, a bool source mask and key padding masks from
    pad_sequence batches, CrossEntropyLoss(ignore_index=PAD), Adam(betas, eps); then greedy decoding through
    transformer.encoder/decoder one token at a time."""
    nn, pad = m.nn, m.nn.utils.rnn.pad_sequence
    m.manual_seed(0)
    d, vocab = 8, 10
    position = m.arange(0, 16, dtype=m.float64).reshape(16, 1)
    scale = m.exp(-m.arange(0, d, 2, dtype=m.float64) * math.log(10000) / d)
    table = m.zeros(16, d, dtype=m.float64)
    table[:, 0::2], table[:, 1::2] = m.sin(position * scale), m.cos(position * scale)
    table = table.unsqueeze(-2)
    model = nn.Transformer(d, 2, 1, 1, 16, dropout=0.1).double()
    src_emb, tgt_emb, generator = nn.Embedding(vocab, d).double(), nn.Embedding(vocab, d).double(), nn.Linear(d, vocab)
    generator = generator.double()

    def embed(table_module, tokens):
        return table_module(tokens) * math.sqrt(d) + table[: tokens.size(0)]

    def causal(n):
        mask = (m.triu(m.ones(n, n)) == 1).transpose(0, 1)
        return mask.double().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)

    pairs = [m.randint(3, vocab, (int(n),)) for n in m.randint(2, 5, (6,))]
    wrap = [m.cat([m.tensor([1]), s, m.tensor([2])]) for s in pairs]
    src, tgt = pad(wrap), pad([s.flip(0) for s in wrap])
    params = [*model.parameters(), *src_emb.parameters(), *tgt_emb.parameters(), *generator.parameters()]
    opt = m.optim.Adam(params, lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    loss_fn, losses = nn.CrossEntropyLoss(ignore_index=0), []
    for _ in range(3):
        tgt_in = tgt[:-1]
        src_mask = m.zeros(src.size(0), src.size(0)).type(m.bool)
        src_pad, tgt_pad = (src == 0).transpose(0, 1), (tgt_in == 0).transpose(0, 1)
        out = model(
            embed(src_emb, src),
            embed(tgt_emb, tgt_in),
            src_mask,
            causal(tgt_in.size(0)),
            None,
            src_pad,
            tgt_pad,
            src_pad,
        )
        loss = loss_fn(generator(out).reshape(-1, vocab), tgt[1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    model.eval()
    source = wrap[0].view(-1, 1)
    memory = model.encoder(embed(src_emb, source), m.zeros(source.size(0), source.size(0)).type(m.bool))
    ys = m.ones(1, 1).fill_(1).type(m.long)
    for _ in range(4):
        out = model.decoder(embed(tgt_emb, ys), memory, causal(ys.size(0)).type(m.bool)).transpose(0, 1)
        ys = m.cat([ys, m.ones(1, 1).type_as(source.data).fill_(generator(out[:, -1]).argmax(1).item())], dim=0)
    return losses, ys.flatten().tolist(), generator.weight.detach()


@pytest.mark.slow
def test_transformer_translation():
    _both(transformer_translation, F64)
