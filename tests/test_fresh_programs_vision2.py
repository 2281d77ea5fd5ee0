"""Vision programs as public code writes them, run with torch and with batched_grad from the same seed in float64
and compared number for number (the GAN, U-Net and segmentation ones are in test_fresh_programs_vision.py): SSD's
box matching, hard negative mining and hand-written NMS (amdegroot/ssd.pytorch), YOLOv5's target building with
CIoU and focal BCE (ultralytics/yolov5), Grad-CAM with forward hooks, tensor hooks and full backward hooks
(jacobgil/pytorch-grad-cam), guided backprop through module backward hooks, integrated gradients and deep dream
(utkuozbulak/pytorch-cnn-visualizations), SE / CBAM / MobileNetV2 / EfficientNet MBConv blocks with a custom swish
Function, drop connect and timm's DropPath, and mixup, cutmix, label smoothing, distillation and test-time
augmentation."""

import math

import numpy as np
import pytest

from test_fresh_programs_vision import _both, _float64


def _jaccard(m, a, b):
    n, k = a.size(0), b.size(0)
    hi = m.min(a[:, 2:].unsqueeze(1).expand(n, k, 2), b[:, 2:].unsqueeze(0).expand(n, k, 2))
    lo = m.max(a[:, :2].unsqueeze(1).expand(n, k, 2), b[:, :2].unsqueeze(0).expand(n, k, 2))
    wh = m.clamp(hi - lo, min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    area_a = ((a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])).unsqueeze(1).expand_as(inter)
    area_b = ((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])).unsqueeze(0).expand_as(inter)
    return inter / (area_a + area_b - inter)


def _hand_nms(m, boxes, scores, overlap, top_k):
    """ssd.pytorch's NMS: index_select into reused out= buffers, resize_as_, clamps against the kept box."""
    keep = scores.new(scores.size(0)).zero_().long()
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    area = m.mul(x2 - x1, y2 - y1)
    _, idx = scores.sort(0)
    idx = idx[-top_k:]
    xx1, yy1, xx2, yy2, w, h = (boxes.new() for _ in range(6))
    count = 0
    while idx.numel() > 0:
        i = idx[-1]
        keep[count] = i
        count += 1
        if idx.size(0) == 1:
            break
        idx = idx[:-1]
        for src, dst in ((x1, xx1), (y1, yy1), (x2, xx2), (y2, yy2)):
            m.index_select(src, 0, idx, out=dst)
        xx1, yy1 = m.clamp(xx1, min=x1[i]), m.clamp(yy1, min=y1[i])
        xx2, yy2 = m.clamp(xx2, max=x2[i]), m.clamp(yy2, max=y2[i])
        w.resize_as_(xx2)
        h.resize_as_(yy2)
        w, h = m.clamp(xx2 - xx1, min=0.0), m.clamp(yy2 - yy1, min=0.0)
        inter = w * h
        iou = inter / ((m.index_select(area, 0, idx) - inter) + area[i])
        idx = idx[iou.le(overlap)]
    return keep, count


def ssd_matching_and_nms(m):
    """Priors from a meshgrid, each truth matched to its best prior (index_fill_, a Python loop of index writes),
    offsets encoded with variances, the MultiBox loss with smooth L1 (size_average=False) and hard negatives from
    a double sort, SGD steps; decoding, per-class thresholding and the hand NMS at inference."""
    _float64(m)
    nn, F = m.nn, m.nn.functional
    ys, xs = m.meshgrid((m.arange(8) + 0.5) / 8, (m.arange(8) + 0.5) / 8, indexing="ij")
    centers = m.stack([xs, ys], -1).reshape(-1, 1, 2)
    sizes = m.tensor([(s * math.sqrt(r), s / math.sqrt(r)) for s in (0.2, 0.4) for r in (1.0, 2.0)])
    priors = m.cat([centers.expand(-1, 4, -1), sizes.unsqueeze(0).expand(64, -1, -1)], -1).reshape(-1, 4)
    priors.clamp_(max=1, min=0)
    corners = m.cat((priors[:, :2] - priors[:, 2:] / 2, priors[:, :2] + priors[:, 2:] / 2), 1)
    body = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 2, 1), nn.ReLU())
    loc_head, conf_head = nn.Conv2d(8, 16, 3, padding=1), nn.Conv2d(8, 16, 3, padding=1)
    params = [*body.parameters(), *loc_head.parameters(), *conf_head.parameters()]
    opt = m.optim.SGD(params, lr=1e-2, momentum=0.9, weight_decay=5e-4)

    def forward(images):
        f = body(images)
        loc = loc_head(f).permute(0, 2, 3, 1).contiguous()
        conf = conf_head(f).permute(0, 2, 3, 1).contiguous()
        return loc.view(loc.size(0), -1, 4), conf.view(conf.size(0), -1, 4)

    def match(truths, labels, loc_t, conf_t, idx):
        overlaps = _jaccard(m, truths, corners)
        _, best_prior = overlaps.max(1, keepdim=True)
        best_truth_overlap, best_truth = overlaps.max(0, keepdim=True)
        best_truth.squeeze_(0)
        best_truth_overlap.squeeze_(0)
        best_prior.squeeze_(1)
        best_truth_overlap.index_fill_(0, best_prior, 2)
        for j in range(best_prior.size(0)):
            best_truth[best_prior[j]] = j
        matched = truths[best_truth]
        conf = labels[best_truth] + 1
        conf[best_truth_overlap < 0.5] = 0
        cxcy = ((matched[:, :2] + matched[:, 2:]) / 2 - priors[:, :2]) / (0.1 * priors[:, 2:])
        wh = m.log((matched[:, 2:] - matched[:, :2]) / priors[:, 2:]) / 0.2
        loc_t[idx], conf_t[idx] = m.cat([cxcy, wh], 1), conf

    out = []
    for _ in range(3):
        loc, conf = forward(m.rand(2, 3, 32, 32))
        loc_t, conf_t = m.Tensor(2, 256, 4), m.LongTensor(2, 256)
        for b in range(2):
            xy = m.rand(3, 2) * 0.6
            truths = m.cat([xy, xy + m.rand(3, 2) * 0.3 + 0.1], 1)
            match(truths, m.randint(0, 3, (3,)), loc_t, conf_t, b)
        pos = conf_t > 0
        loss_l = F.smooth_l1_loss(
            loc[pos.unsqueeze(2).expand_as(loc)].view(-1, 4),
            loc_t[pos.unsqueeze(2).expand_as(loc)].view(-1, 4),
            size_average=False,
        )
        flat = conf.view(-1, 4)
        mining = m.log(m.sum(m.exp(flat - flat.data.max()), 1, keepdim=True)) + flat.data.max()
        mining = (mining - flat.gather(1, conf_t.view(-1, 1))).view(2, -1)
        mining[pos] = 0
        _, order = mining.sort(1, descending=True)
        _, rank = order.sort(1)
        num_pos = pos.long().sum(1, keepdim=True)
        neg = rank < m.clamp(3 * num_pos, max=pos.size(1) - 1).expand_as(rank)
        chosen = (pos.unsqueeze(2).expand_as(conf) + neg.unsqueeze(2).expand_as(conf)).gt(0)
        loss_c = F.cross_entropy(conf[chosen].view(-1, 4), conf_t[(pos + neg).gt(0)], size_average=False)
        total = num_pos.data.sum()
        loss = loss_l / total + loss_c / total
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [loss_l.detach(), loss_c.detach(), total]
    with m.no_grad():
        loc, conf = forward(m.rand(1, 3, 32, 32))
        boxes = m.cat(
            (priors[:, :2] + loc[0, :, :2] * 0.1 * priors[:, 2:], priors[:, 2:] * m.exp(loc[0, :, 2:] * 0.2)), 1
        )
        boxes[:, :2] -= boxes[:, 2:] / 2
        boxes[:, 2:] += boxes[:, :2]
        scores = F.softmax(conf[0], dim=-1)
        for c in range(1, 4):
            mask = scores[:, c].gt(0.2)
            if mask.sum() == 0:
                continue
            keep, count = _hand_nms(
                m, boxes[mask.unsqueeze(1).expand_as(boxes)].view(-1, 4), scores[:, c][mask], 0.45, 20
            )
            out += [keep[:count], count]
    return out


@pytest.mark.slow
def test_ssd_matching_and_nms():
    _both(ssd_matching_and_nms)


def _small_resnet(m, width=4, classes=5):
    nn = m.nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
            self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            out += x if self.downsample is None else self.downsample(x)
            return self.relu(out)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(True))
            self.pool = nn.MaxPool2d(3, 2, 1)
            widths = [width, width, 2 * width, 4 * width]
            self.layer1, self.layer2, self.layer3 = (
                Block(a, b, 1 if a == b else 2) for a, b in zip(widths, widths[1:])
            )
            self.fc = nn.Linear(4 * width, classes)
            for mod in self.modules():
                if isinstance(mod, nn.Conv2d):
                    nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")

        def forward(self, x):
            x = self.layer3(self.layer2(self.layer1(self.pool(self.stem(x)))))
            return self.fc(m.flatten(nn.AdaptiveAvgPool2d((1, 1))(x), 1))

    return ResNet()


def grad_cam_and_saliency(m):
    """Grad-CAM over two target layers, the gradients caught once by tensor hooks registered in a forward hook and
    once by full backward hooks, the CAM as NumPy means of gradients times activations; hooks removed; forward hooks
    on named modules with retain_grad on an intermediate output; guided backprop whose ReLU backward hooks replace
    grad_input; integrated gradients; deep dream's normalized ascent on the input through .data."""
    _float64(m)
    nn, F = m.nn, m.nn.functional
    model, x, out = _small_resnet(m), m.rand(2, 3, 32, 32), []
    opt = m.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(2):
        loss = F.cross_entropy(model(x), m.tensor([1, 3]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    for full in (False, True):
        acts, grads, handles = [], [], []

        def keep_grad(grad):
            grads.insert(0, grad.detach())

        def hook_output(mod, inputs, output):
            output.register_hook(keep_grad)

        for layer in (model.layer3, model.layer2):
            handles.append(layer.register_forward_hook(lambda mod, i, o: acts.append(o.detach())))
            if full:
                handles.append(layer.register_full_backward_hook(lambda mod, gi, go: grads.insert(0, go[0].detach())))
            else:
                handles.append(layer.register_forward_hook(hook_output))
        xin = m.autograd.Variable(x, requires_grad=True)
        logits = model(xin)
        model.zero_grad()
        sum(row[c] for row, c in zip(logits, np.argmax(logits.data.numpy(), axis=-1))).backward(retain_graph=True)
        for a, g in zip(acts, grads):
            a, g = a.numpy(), g.numpy()
            cam = np.maximum((np.mean(g, axis=(2, 3))[:, :, None, None] * a).sum(axis=1), 0)
            out.append(m.tensor(cam))
        out.append(xin.grad)
        for h in handles:
            h.remove()
        out.append(len(model.layer3._forward_hooks) + len(model.layer3._backward_hooks))
    features = {}
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Conv2d):
            mod.register_forward_hook(lambda mod, i, o, name=name: features.__setitem__(name, o))
    xin = x.clone().requires_grad_()
    model(xin)[:, 0].sum().backward()
    middle = features["layer2.conv2"]
    out += [middle.retains_grad, xin.grad.data.abs().max(dim=1)[0]]

    m.manual_seed(1)
    vgg = nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1), nn.ReLU()
    )
    head = nn.Linear(32, 5)
    relu_outputs, first_grad = [], []

    def relu_backward(mod, grad_in, grad_out):
        forward_out = relu_outputs.pop()
        forward_out[forward_out > 0] = 1
        return (forward_out * m.clamp(grad_in[0], min=0.0),)

    for mod in vgg:
        if isinstance(mod, nn.ReLU):
            mod.register_backward_hook(relu_backward)
            mod.register_forward_hook(lambda mod, i, o: relu_outputs.append(o))
    vgg[0].register_backward_hook(lambda mod, gi, go: first_grad.append(gi[0]))
    image = m.rand(1, 3, 16, 16, requires_grad=True)
    scores = head(m.flatten(F.adaptive_avg_pool2d(vgg(image), 2), 1))
    one_hot = m.zeros(1, 5)
    one_hot[0][3] = 1
    scores.backward(gradient=one_hot)
    out += [first_grad[0], image.grad]
    integrated = m.zeros_like(image)
    for alpha in np.arange(5) / 4:
        scaled = (image.detach() * alpha).requires_grad_(True)
        head(m.flatten(F.adaptive_avg_pool2d(vgg(scaled), 2), 1))[0, 2].backward()
        integrated += scaled.grad / 4
    out.append(integrated)
    dream = m.autograd.Variable(m.rand(1, 3, 16, 16), requires_grad=True)
    for _ in range(3):
        vgg.zero_grad()
        loss = vgg[:4](dream).norm()
        loss.backward()
        step = 0.1 / np.abs(dream.grad.data.numpy()).mean()
        dream.data += step * dream.grad.data
        dream.data = m.max(m.min(dream, m.ones_like(dream)), m.zeros_like(dream))
        dream.grad.data.zero_()
        out.append(loss.detach())
    return out + [dream.detach()]


@pytest.mark.slow
def test_grad_cam_and_saliency():
    _both(grad_cam_and_saliency)


def attention_and_mobile_blocks(m):
    """Squeeze-and-excitation, CBAM (avg / max / lp / logsumexp channel pools, a 7x7 spatial gate over channel max
    and mean), depthwise-separable and inverted-residual blocks with ReLU6, EfficientNet's MBConv with the memory
    efficient swish as an autograd.Function, same padding computed per call and drop connect by floor(keep + rand),
    timm's DropPath by bernoulli_; RMSprop steps in train mode, an eval pass, gradcheck of the swish."""
    _float64(m)
    nn, F = m.nn, m.nn.functional

    class Swish(m.autograd.Function):
        @staticmethod
        def forward(ctx, i):
            ctx.save_for_backward(i)
            return i * m.sigmoid(i)

        @staticmethod
        def backward(ctx, grad_output):
            (i,) = ctx.saved_tensors
            s = m.sigmoid(i)
            return grad_output * (s * (1 + i * (1 - s)))

    class SamePadConv(nn.Conv2d):
        def forward(self, x):
            ih, iw = x.size()[-2:]
            kh, kw = self.weight.size()[-2:]
            pads = [
                max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
                for n, s, k, d in zip((ih, iw), self.stride, (kh, kw), self.dilation)
            ]
            x = F.pad(x, [pads[1] // 2, pads[1] - pads[1] // 2, pads[0] // 2, pads[0] - pads[0] // 2])
            return F.conv2d(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)

    class MBConv(nn.Module):
        def __init__(self, cin, cout, k, stride, expand, se=True):
            super().__init__()
            mid, self.skip = cin * expand, stride == 1 and cin == cout
            self.expand = (
                nn.Sequential(SamePadConv(cin, mid, 1, bias=False), nn.BatchNorm2d(mid, momentum=0.01, eps=1e-3))
                if expand != 1
                else None
            )
            self.dw = nn.Sequential(
                SamePadConv(mid, mid, k, stride, groups=mid, bias=False), nn.BatchNorm2d(mid, momentum=0.01, eps=1e-3)
            )
            self.se = (SamePadConv(mid, max(1, cin // 4), 1), SamePadConv(max(1, cin // 4), mid, 1)) if se else None
            self.se_layers = nn.ModuleList(self.se) if se else None
            self.project = nn.Sequential(
                SamePadConv(mid, cout, 1, bias=False), nn.BatchNorm2d(cout, momentum=0.01, eps=1e-3)
            )

        def forward(self, inputs, rate):
            x = inputs if self.expand is None else Swish.apply(self.expand(inputs))
            x = Swish.apply(self.dw(x))
            if self.se is not None:
                x = m.sigmoid(self.se[1](Swish.apply(self.se[0](F.adaptive_avg_pool2d(x, 1))))) * x
            x = self.project(x)
            if self.skip:
                if rate and self.training:
                    x = x / (1 - rate) * m.floor((1 - rate) + m.rand([x.shape[0], 1, 1, 1], dtype=x.dtype))
                x = x + inputs
            return x

    def drop_path(x, p, training):
        if p == 0.0 or not training:
            return x
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(1 - p)
        return x * mask.div_(1 - p)

    def inverted_residual(cin, cout, stride, expand):
        mid = cin * expand
        layers = (
            [] if expand == 1 else [nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(inplace=True)]
        )
        layers += [
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU6(inplace=True),
        ]
        return nn.Sequential(*layers, nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(inplace=True))
            self.se = nn.Sequential(
                nn.Linear(8, 2, bias=False), nn.ReLU(inplace=True), nn.Linear(2, 8, bias=False), nn.Sigmoid()
            )
            self.channel_mlp = nn.Sequential(nn.Flatten(), nn.Linear(8, 2), nn.ReLU(), nn.Linear(2, 8))
            self.spatial = nn.Sequential(nn.Conv2d(2, 1, 7, padding=3, bias=False), nn.BatchNorm2d(1, momentum=0.01))
            self.dw = nn.Sequential(
                nn.Conv2d(8, 8, 3, 1, 1, groups=8, bias=False),
                nn.BatchNorm2d(8),
                nn.ReLU(inplace=True),
                nn.Conv2d(8, 16, 1, bias=False),
            )
            self.ir = nn.ModuleList(
                [inverted_residual(16, 16, 1, 1), inverted_residual(16, 16, 1, 4), inverted_residual(16, 24, 2, 6)]
            )
            self.mb = nn.ModuleList(
                [MBConv(24, 24, 3, 1, 4), MBConv(24, 24, 5, 1, 1, se=False), MBConv(24, 32, 3, 2, 6)]
            )
            self.head = nn.Linear(32, 5)

        def forward(self, x):
            x = self.stem(x)
            b, c = x.shape[:2]
            x = x + drop_path(x * self.se(F.adaptive_avg_pool2d(x, 1).view(b, c)).view(b, c, 1, 1), 0.3, self.training)
            window = (x.size(2), x.size(3))
            flat = x.view(b, c, -1)
            top = m.max(flat, dim=2, keepdim=True)[0]
            pools = [
                F.avg_pool2d(x, window, stride=window),
                F.max_pool2d(x, window, stride=window),
                F.lp_pool2d(x, 2, window, stride=window),
            ]
            pools.append(top + (flat - top).exp().sum(dim=2, keepdim=True).log())
            x = x * F.sigmoid(sum(self.channel_mlp(p) for p in pools)).unsqueeze(2).unsqueeze(3).expand_as(x)
            x = x * F.sigmoid(self.spatial(m.cat((m.max(x, 1)[0].unsqueeze(1), m.mean(x, 1).unsqueeze(1)), dim=1)))
            x = self.dw(x)
            for i, block in enumerate(self.ir):
                x = x + block(x) if i < 2 else block(x)
            for i, block in enumerate(self.mb):
                x = block(x, 0.2 * i / len(self.mb))
            return self.head(F.dropout(F.adaptive_avg_pool2d(x, 1).flatten(1), 0.2, self.training))

    net, x, y = Net(), m.rand(2, 3, 32, 32), m.tensor([0, 4])
    opt = m.optim.RMSprop(net.parameters(), lr=1e-3, alpha=0.9, eps=1e-3, momentum=0.9, weight_decay=1e-5)
    out = []
    for _ in range(3):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.detach())
    net.eval()
    with m.no_grad():
        out.append(net(x))
    out += [v.detach().double().abs().sum() for v in net.state_dict().values()]
    return out + [m.autograd.gradcheck(Swish.apply, (m.randn(3, 4, requires_grad=True),))]


@pytest.mark.slow
def test_attention_and_mobile_blocks():
    _both(attention_and_mobile_blocks)
