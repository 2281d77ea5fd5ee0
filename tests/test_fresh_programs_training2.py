"""More training scaffolding run with torch and with batched_grad from the same seed (see
test_fresh_programs_training.py): weight averaging (swa_utils and EMA helpers over whole state dicts), early
stopping with gradient accumulation and clipping, weight/spectral norm and pruning in training loops, full-state
checkpoints with RNG states resumed to identical numbers, CPU autocast with a disabled GradScaler, fine-tuning
parameter groups, and a detector's warmup/EMA utilities with checkpoint averaging."""

import collections
import copy
import io
import math
import random

import numpy as np
import pytest
import torch
import torch.nn.utils.prune  # noqa: F401  (a submodule torch.nn.utils does not import)

import batched_grad as bg
import batched_grad.nn.utils.prune  # noqa: F401
from oracle import assert_same
from test_fresh_programs_training import F64, _both, _float64, _restore


def _classifier_data(m):
    x = m.randn(48, 4)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    return x, y, m.utils.data.DataLoader(m.utils.data.TensorDataset(x, y), batch_size=16, shuffle=True)


def weight_averaging(m):
    """SGD on a BatchNorm classifier with AveragedModel for SWA (after a start epoch, with SWALR), for EMA through
    get_ema_multi_avg_fn with buffers and through a hand avg_fn; a deep-copied module updated in place over its
    state dict (floating entries only, as EMA helpers do); update_bn at the end."""
    nn, swa = m.nn, m.optim.swa_utils
    _float64(m)
    try:
        x, y, loader = _classifier_data(m)
        model = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 3))
        opt = m.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        averaged = [
            swa.AveragedModel(model),
            swa.AveragedModel(model, multi_avg_fn=swa.get_ema_multi_avg_fn(0.9), use_buffers=True),
            swa.AveragedModel(model, avg_fn=lambda avg, new, n: 0.8 * avg + 0.2 * new),
        ]
        shadow = copy_of(model).eval()
        cosine, swa_lr = m.optim.lr_scheduler.CosineAnnealingLR(opt, 10), swa.SWALR(opt, 0.05, anneal_epochs=3)
        out = []
        for epoch in range(6):
            for xb, yb in loader:
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
                averaged[1].update_parameters(model)
                averaged[2].update_parameters(model)
                with m.no_grad():
                    new = model.state_dict()
                    for k, v in shadow.state_dict().items():
                        if v.dtype.is_floating_point:
                            v *= 0.95
                            v += 0.05 * new[k].detach()
            if epoch > 2:
                averaged[0].update_parameters(model)
                swa_lr.step()
            else:
                cosine.step()
            out += [loss.item(), opt.param_groups[0]["lr"], averaged[0].n_averaged.item()]
        swa.update_bn(loader, averaged[0])
        with m.no_grad():
            for net in (*averaged, shadow):
                net.eval()
                out.append(net(x[:8]))
        return out + [averaged[0].module[1].running_var, averaged[0].module[1].num_batches_tracked.item()]
    finally:
        _restore(m)


def copy_of(module):
    return copy.deepcopy(module)


@pytest.mark.slow
def test_weight_averaging():
    _both(weight_averaging, dict(rtol=1e-9, atol=1e-10))


def early_stopping_with_accumulation(m, patience=2):
    """Adam on an MLP with the loss divided over two accumulated batches, clip_grad_norm_ then clip_grad_value_
    before each step, an early stopper saving the best state dict on validation loss and restoring it at the end;
    then clip_grad_norm_ on a non-finite gradient (refused with error_if_nonfinite), inf and 1 norms, foreach, and
    get_total_norm with clip_grads_with_norm_."""
    nn, F = m.nn, m.nn.functional
    _float64(m, 4)
    try:
        x, y = m.randn(60, 20), m.randint(0, 4, (60,))
        train = m.utils.data.DataLoader(m.utils.data.TensorDataset(x[:48], y[:48]), 8, shuffle=True)
        model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 4))
        opt = m.optim.Adam(model.parameters(), lr=0.02)
        best, waited, saved, out = None, 0, None, []
        for _ in range(10):
            model.train()
            opt.zero_grad(set_to_none=True)
            for i, (xb, yb) in enumerate(train, 1):
                (F.cross_entropy(model(xb), yb) / 2).backward()
                if i % 2 == 0:
                    out.append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0))
                    nn.utils.clip_grad_value_(model.parameters(), clip_value=0.05)
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            model.eval()
            val = F.cross_entropy(model(x[48:]), y[48:]).item()
            out.append(val)
            if best is None or val < best:
                best, waited, saved = val, 0, io.BytesIO()
                m.save(model.state_dict(), saved)
            else:
                waited += 1
                if waited >= patience:
                    break
        saved.seek(0)
        model.load_state_dict(m.load(saved))
        out.append(F.cross_entropy(model(x[48:]), y[48:]).item())
        p = nn.Parameter(m.tensor([1.0, 2.0]))
        p.grad = m.tensor([math.inf, 1.0])
        try:
            nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
        except RuntimeError as e:
            out.append(str(e).startswith("The total norm of order 2.0 for gradients from `parameters` is non-finite"))
        out += [nn.utils.clip_grad_norm_([p], 1.0), p.grad]
        q = nn.Parameter(m.ones(3))
        for norm_type, foreach in (("inf", True), (1, None), (2.0, False)):
            q.grad = m.tensor([3.0, -4.0, 12.0])
            out += [nn.utils.clip_grad_norm_(q, 2.0, norm_type=norm_type, foreach=foreach), q.grad.clone()]
        q.grad = m.tensor([3.0, -4.0, 12.0])
        total = nn.utils.get_total_norm([q.grad], 2.0)
        nn.utils.clip_grads_with_norm_([q], 5.0, total)
        return out + [total, q.grad]
    finally:
        _restore(m)


@pytest.mark.slow
def test_early_stopping_with_accumulation():
    _both(early_stopping_with_accumulation)


def normalized_and_pruned(m):
    """Weight-normed dilated Conv1d residual blocks trained with AdamW, then remove_weight_norm; a spectral_norm
    discriminator with a hinge loss; parametrizations' weight_norm and spectral_norm, removal keeping the
    parametrized weight; random/l1/ln-structured/global/custom-mask pruning of a LeNet fine-tuned with the masks,
    then made permanent; a flat parameter vector step through parameters_to_vector / vector_to_parameters."""
    nn, F, utils = m.nn, m.nn.functional, m.nn.utils
    _float64(m)
    try:
        out = []
        convs = nn.ModuleList(utils.weight_norm(nn.Conv1d(4, 4, 3, dilation=d, padding=d)) for d in (1, 3))
        for conv in convs:
            conv.weight.data.normal_(0.0, 0.01)
        opt = m.optim.AdamW(convs.parameters(), 0.01, betas=(0.8, 0.99))
        x = m.randn(2, 4, 16)
        forward = lambda z: z + convs[1](F.leaky_relu(convs[0](F.leaky_relu(z, 0.1)), 0.1))  # noqa: E731
        for _ in range(3):
            opt.zero_grad()
            loss = F.l1_loss(forward(x), m.zeros_like(x))
            loss.backward()
            opt.step()
            out += [loss.item(), convs[0].weight_g.grad]
        with m.no_grad():
            before = forward(x)
            for conv in convs:
                utils.remove_weight_norm(conv)
            out += [before, forward(x), len(list(convs.parameters()))]

        disc = nn.Sequential(
            utils.spectral_norm(nn.Conv2d(1, 8, 3, padding=1)), nn.LeakyReLU(0.1),
            utils.spectral_norm(nn.Conv2d(8, 8, 4, stride=2, padding=1)), nn.LeakyReLU(0.1), nn.Flatten(),
            utils.spectral_norm(nn.Linear(128, 1)),
        )  # fmt: skip
        opt = m.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.0, 0.9))
        real, fake = m.randn(4, 1, 8, 8), m.randn(4, 1, 8, 8)
        for _ in range(3):
            opt.zero_grad()
            loss = F.relu(1.0 - disc(real)).mean() + F.relu(1.0 + disc(fake)).mean()
            loss.backward()
            opt.step()
            out += [loss.item(), disc[0].weight_u, disc[5].weight_orig.grad]
        disc.eval()
        out.append(disc(real))
        snl = utils.parametrizations.spectral_norm(nn.Linear(6, 4), n_power_iterations=2)
        wn = utils.parametrizations.weight_norm(nn.Linear(5, 3), dim=1)
        opt = m.optim.SGD([*snl.parameters(), *wn.parameters()], lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            loss = snl(m.randn(3, 6)).pow(2).sum() + wn(m.randn(2, 5)).sum()
            loss.backward()
            opt.step()
            out += [loss.item(), m.linalg.matrix_norm(snl.weight, 2)]
        utils.parametrize.remove_parametrizations(snl, "weight", leave_parametrized=True)
        out += [snl.weight, wn.parametrizations.weight.original0]
        return out + pruned_lenet(m)
    finally:
        _restore(m)


def pruned_lenet(m):
    nn, F, prune = m.nn, m.nn.functional, m.nn.utils.prune
    net = nn.Sequential(
        nn.Conv2d(1, 6, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 32), nn.ReLU(), nn.Linear(32, 10),
    )  # fmt: skip
    prune.random_unstructured(net[0], name="weight", amount=0.3)
    prune.l1_unstructured(net[0], name="bias", amount=3)
    prune.ln_structured(net[3], name="weight", amount=0.5, n=2, dim=0)
    targets = [(net[i], "weight") for i in (0, 3, 7, 9)]
    prune.global_unstructured(targets, pruning_method=prune.L1Unstructured, amount=0.2)
    prune.custom_from_mask(net[9], name="bias", mask=m.arange(10) % 2 == 0)
    out = [net[0].weight_mask, net[0].bias_mask, net[3].weight_mask, prune.is_pruned(net)]
    opt = m.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    images, labels = m.randn(8, 1, 28, 28), m.randint(0, 10, (8,))
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(net(images), labels)
        loss.backward()
        opt.step()
        out += [loss.item(), net[7].weight, net[7].weight_orig.grad]
    for module, name in targets:
        prune.remove(module, name)
    vector = m.nn.utils.parameters_to_vector(net.parameters())
    grads = m.autograd.grad(F.cross_entropy(net(images), labels), list(net.parameters()))
    m.nn.utils.vector_to_parameters(vector - 0.1 * m.nn.utils.parameters_to_vector(grads), net.parameters())
    return out + [prune.is_pruned(net), F.cross_entropy(net(images), labels).item(), vector]


@pytest.mark.slow
def test_normalized_and_pruned():
    _both(normalized_and_pruned)


def resumable_run(m, amp, interrupt_at=None):
    """12 AdamW steps under OneCycleLR with a disabled GradScaler (unscale_, clip, step, update) and, with `amp`,
    a bfloat16 CPU autocast forward; batches draw from a Generator, NumPy and Python's random. Interrupted, the
    whole state (model, optimizer, scheduler, scaler, torch/generator/NumPy/Python RNG states) is saved, the RNGs
    scrambled, and everything rebuilt from the file."""
    nn, F = m.nn, m.nn.functional

    def build():
        random.seed(0)
        np.random.seed(0)
        m.manual_seed(0)
        layers = [nn.Linear(8, 32), nn.GELU(), nn.Dropout(0.2), nn.Linear(32, 4)]
        model = nn.Sequential(*layers[:3], *([] if amp else [nn.LayerNorm(32)]), layers[3])
        opt = m.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
        return model, opt, m.optim.lr_scheduler.OneCycleLR(opt, 3e-3, total_steps=12), m.amp.GradScaler(enabled=False)

    model, opt, sched, scaler = build()
    gen, out = m.Generator().manual_seed(1), []
    for step in range(12):
        if step == interrupt_at:
            buffer = io.BytesIO()
            m.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                    "scaler": scaler.state_dict(), "rng": m.get_rng_state(), "gen": gen.get_state(),
                    "np": np.random.get_state(), "py": random.getstate()}, buffer)  # fmt: skip
            model, opt, sched, scaler = build()
            buffer.seek(0)
            state = m.load(buffer, weights_only=False)
            for part, key in ((model, "model"), (opt, "opt"), (sched, "sched"), (scaler, "scaler")):
                part.load_state_dict(state[key])
            m.set_rng_state(state["rng"])
            gen = m.Generator()
            gen.set_state(state["gen"])
            np.random.set_state(state["np"])
            random.setstate(state["py"])
        x = m.randn(16, 8, generator=gen) + random.random()
        y = m.from_numpy(np.random.randint(0, 4, size=16))
        with m.autocast(device_type="cpu", dtype=m.bfloat16, enabled=amp):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        sched.step()
        out += [loss, norm, logits.dtype == m.bfloat16]
    model.eval()
    with m.inference_mode():
        out.append(model(m.randn(4, 8, generator=gen)).float())
    return out


def _numbers(values):
    return [np.asarray(v.detach().numpy()) if hasattr(v, "detach") else np.asarray(v) for v in values]


@pytest.mark.slow
def test_full_state_resume_gives_the_uninterrupted_numbers():
    """torch's resumed run equals its uninterrupted one bit for bit; batched_grad's to float64 rounding (a step
    recorded before and after its fused program exists can round its last bit differently)."""
    for lib, tolerance in ((torch, dict(rtol=0, atol=0)), (bg, dict(rtol=1e-13, atol=1e-15))):
        _float64(lib)
        try:
            straight, resumed = resumable_run(lib, False), resumable_run(lib, False, interrupt_at=5)
        finally:
            _restore(lib)
        for a, b in zip(_numbers(resumed), _numbers(straight), strict=True):
            np.testing.assert_allclose(a, b, **tolerance)
    _float64(torch)
    _float64(bg)
    try:
        assert_same(resumable_run(bg, False, 7), resumable_run(torch, False, 7), **F64)
    finally:
        _restore(torch)
        _restore(bg)


@pytest.mark.slow
def test_bfloat16_autocast_steps_with_a_disabled_scaler():
    """The first step's bfloat16 forward loss is torch's to the bit; later steps follow within bfloat16 rounding
    (bfloat16 matmul gradients summed in a different order)."""
    ours, theirs = resumable_run(bg, True, interrupt_at=5), resumable_run(torch, True, interrupt_at=5)
    assert_same(ours[0], theirs[0], rtol=0, atol=0)
    assert_same(ours, theirs, rtol=2e-2, atol=2e-3)


def finetuning_groups(m):
    """A pretrained backbone's state dict loaded with strict=False (missing and unexpected keys reported, a shape
    mismatch refused), no-decay groups chosen by name, the head trained on a frozen backbone with Nesterov SGD, then
    everything with per-group learning rates and label smoothing; evaluation totals weighted by batch size; the
    whole model through save / load(weights_only=False); a persistent=False buffer kept out of the state dict."""
    nn, F, data = m.nn, m.nn.functional, m.utils.data
    _float64(m)
    try:

        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed, self.LayerNorm = nn.Linear(6, 16), nn.LayerNorm(16)
                self.block = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16))
                self.register_buffer("position_ids", m.arange(16).expand((1, -1)), persistent=False)
                self.register_buffer("scale", m.tensor(0.5))

            def forward(self, x):
                h = self.LayerNorm(self.embed(x))
                return h + self.scale * self.block(h)

        model = nn.Sequential(collections.OrderedDict(backbone=Backbone(), head=nn.Linear(16, 3)))
        pretrained = {"backbone." + k: v for k, v in Backbone().state_dict().items()}
        result = model.load_state_dict({**pretrained, "extra.weight": m.ones(2)}, strict=False)
        out = [len(result.missing_keys), len(result.unexpected_keys), len(model.state_dict())]
        try:
            model.load_state_dict({"backbone.embed.weight": m.zeros(3, 3)}, strict=False)
        except RuntimeError as e:
            out.append("size mismatch for backbone.embed.weight" in str(e))
        no_decay = ("bias", "LayerNorm.weight")
        decayed = [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)]
        out.append(len(decayed))
        x, y = m.randn(40, 6), m.randint(0, 3, (40,))
        loader = data.DataLoader(data.TensorDataset(x, y), batch_size=8, shuffle=True)
        model.backbone.requires_grad_(False)
        opt = m.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1, momentum=0.9, nesterov=True)
        for stage in range(3):
            for xb, yb in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(xb), yb, label_smoothing=0.1 * (stage > 0))
                loss.backward()
                opt.step()
            out += [loss.item(), model.backbone.embed.weight.grad is None]
            model.backbone.requires_grad_(True)
            groups = [{"params": model.backbone.parameters(), "lr": 1e-3}, {"params": model.head.parameters()}]
            opt = m.optim.AdamW(groups, lr=1e-2, weight_decay=0.01) if stage == 0 else opt
        model.eval()
        total_loss, correct = 0.0, 0.0
        with m.no_grad():
            for xb, yb in data.DataLoader(data.TensorDataset(x, y), batch_size=16):
                output = model(xb)
                total_loss += F.cross_entropy(output, yb).item() * xb.shape[0]
                correct += m.sum(m.argmax(output, dim=1) == yb).item()
        buffer = io.BytesIO()
        m.save(model.head, buffer)  # a whole module, pickled (classes local to this function are not picklable)
        buffer.seek(0)
        head = m.load(buffer, weights_only=False)
        features = model.backbone(x)
        return out + [total_loss / len(x), correct / len(x), head(features), model.head(features), head.training]
    finally:
        _restore(m)


@pytest.mark.slow
def test_finetuning_groups():
    _both(finetuning_groups)


def detector_utilities(m):
    """A detector's optimizer groups chosen by nn.__dict__'s normalization classes (BatchNorm weights undecayed,
    biases in the first group), warmup by np.interp of each group's lr and momentum (NumPy floats in
    param_groups), accumulation, a disabled GradScaler, an EMA over floating state-dict entries behind an
    is_parallel check against DataParallel/DistributedDataParallel; then checkpoints averaged (float entries
    div_, integer ones //=, a half copy promoted by an isinstance HalfTensor check, map_location as a function)."""
    nn, F = m.nn, m.nn.functional
    _float64(m)
    try:
        model = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.SiLU(),
            nn.Conv2d(8, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU(), nn.Conv2d(16, 8, 1),
        )  # fmt: skip
        norms = tuple(v for k, v in nn.__dict__.items() if "Norm" in k)
        groups = [], [], []
        for module in model.modules():
            for name, p in module.named_parameters(recurse=False):
                groups[2 if name == "bias" else 1 if isinstance(module, norms) else 0].append(p)
        opt = m.optim.SGD(groups[2], lr=0.01, momentum=0.937, nesterov=True)
        opt.add_param_group({"params": groups[0], "weight_decay": 5e-4})
        opt.add_param_group({"params": groups[1], "weight_decay": 0.0})
        lf = lambda x: ((1 - math.cos(x * math.pi / 3)) / 2) * (0.01 - 1) + 1  # noqa: E731
        sched = m.optim.lr_scheduler.LambdaLR(opt, lr_lambda=lf)
        parallel = type(model) in (nn.parallel.DataParallel, nn.parallel.DistributedDataParallel)
        ema, updates = copy.deepcopy(model).eval(), 0
        scaler = m.amp.GradScaler(enabled=False)
        images, targets = m.randn(48, 3, 16, 16), m.randn(48, 8, 4, 4)
        out, last_step, accumulate = [parallel, [len(g) for g in groups]], -1, 1
        for ni in range(12):
            epoch = ni // 4
            if ni <= 6:
                accumulate = max(1, np.interp(ni, [0, 6], [1, 2]).round())
                for j, group in enumerate(opt.param_groups):
                    group["lr"] = np.interp(ni, [0, 6], [0.1 if j == 0 else 0.0, group["initial_lr"] * lf(epoch)])
                    group["momentum"] = np.interp(ni, [0, 6], [0.8, 0.937])
            loss = F.smooth_l1_loss(model(images[4 * ni : 4 * ni + 4]), targets[4 * ni : 4 * ni + 4]) * 4
            scaler.scale(loss).backward()
            if ni - last_step >= accumulate:
                scaler.unscale_(opt)
                nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
                updates, last_step = updates + 1, ni
                d = 0.9999 * (1 - math.exp(-updates / 2000))
                current = model.state_dict()
                for k, v in ema.state_dict().items():
                    if v.dtype.is_floating_point:
                        v *= d
                        v += (1 - d) * current[k].detach()
            if ni % 4 == 3:
                sched.step()
            out += [loss.item(), *(float(g["lr"]) for g in opt.param_groups)]
        with m.no_grad():
            out += [ema(images[:2]), ema[1].num_batches_tracked.item()]
        return out + averaged_checkpoints(m, model)
    finally:
        _restore(m)


def averaged_checkpoints(m, model):
    files = []
    for k in range(3):
        with m.no_grad():
            for p in model.parameters():
                p.add_(0.01 * (k + 1))
        state = copy.deepcopy(model.state_dict())
        state["half_copy"] = model[6].weight.detach().half()
        files.append(io.BytesIO())
        m.save({"model": state, "epoch": k}, files[-1])
    total = collections.OrderedDict()
    for f in files:
        f.seek(0)
        state = m.load(f, map_location=lambda s, _: m.serialization.default_restore_location(s, "cpu"))
        for k, p in state["model"].items():
            p = p.float() if isinstance(p, m.HalfTensor) else p
            total[k] = p.clone() if k not in total else total[k] + p
    for v in total.values():
        if v.is_floating_point():
            v.div_(len(files))
        else:
            v //= len(files)
    return list(total.values())


@pytest.mark.slow
def test_detector_utilities():
    _both(detector_utilities)
