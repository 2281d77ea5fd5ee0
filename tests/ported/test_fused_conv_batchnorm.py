"""A convolution fused with a training-mode batch norm as one torch.autograd.Function (the memory-saving pattern of
PyTorch's custom-Function tutorial): forward saves only the input and the kernel, backward recomputes the
convolution and applies hand-written batch-norm and convolution backward formulas (conv2d and conv_transpose2d of
the cotangent, in-place accumulation into the input gradient). Checked by gradcheck, then a small network of two
fused layers trained with Adadelta and a StepLR schedule on images from NumPy."""

import math

import numpy as np

from ._harness import parameters_of, run_both


def fused_program(torch, nn, F, optim, data, images, labels, probe):
    def per_channel(t):
        return t[None, :, None, None]

    def batch_norm_backward(grad_out, x, total, root_var, n, eps):
        tmp = -((x - per_channel(total) / n) * grad_out).sum(dim=(0, 2, 3))
        d_var = tmp / (root_var + eps) ** 2 / (2 * root_var)
        d_mean = per_channel(-(grad_out / per_channel(root_var + eps)).sum(dim=(0, 2, 3)) / n)
        grad_in = x * per_channel(d_var * n)
        grad_in += per_channel(-d_var * total)
        grad_in *= 2 / ((n - 1) * n)
        grad_in += d_mean
        grad_in *= per_channel(root_var + eps)
        grad_in += grad_out
        grad_in /= per_channel(root_var + eps)
        return grad_in

    class FusedConvBN(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, eps=1e-3):
            ctx.save_for_backward(x, weight)
            y = F.conv2d(x, weight)
            total, n = y.sum(dim=(0, 2, 3)), y.numel() / y.size(1)
            root_var = torch.sqrt(y.var(unbiased=True, dim=(0, 2, 3)))
            ctx.eps, ctx.total, ctx.n, ctx.root_var = eps, total, n, root_var
            out = y - per_channel(total / n)
            out /= per_channel(root_var + eps)
            return out

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, grad_out):
            x, weight = ctx.saved_tensors
            y = F.conv2d(x, weight)
            grad_y = batch_norm_backward(grad_out, y, ctx.total, ctx.root_var, ctx.n, ctx.eps)
            grad_x = F.conv_transpose2d(grad_y, weight)
            grad_w = F.conv2d(x.transpose(0, 1), grad_y.transpose(0, 1)).transpose(0, 1)
            return grad_x, grad_w, None

    class FusedLayer(nn.Module):
        def __init__(self, cin, cout, k):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(cout, cin, k, k, dtype=torch.float64))
            nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))

        def forward(self, x):
            return FusedConvBN.apply(x, self.weight)

    x, w = torch.tensor(probe[0], requires_grad=True), torch.tensor(probe[1], requires_grad=True)
    checked = torch.autograd.gradcheck(FusedConvBN.apply, (x, w))
    torch.manual_seed(0)
    net = nn.Sequential(FusedLayer(1, 4, 3), nn.ReLU(), FusedLayer(4, 6, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
    net.append(nn.Linear(6 * 3 * 3, 3).double())
    optimizer = optim.Adadelta(net.parameters(), lr=1.0)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    loader = data.DataLoader(data.TensorDataset(torch.tensor(images), torch.tensor(labels)), batch_size=8)
    losses = []
    for _epoch in range(2):
        for batch, target in loader:
            optimizer.zero_grad()
            loss = F.nll_loss(F.log_softmax(net(batch), dim=1), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        scheduler.step()
    return {"gradcheck": checked, "losses": torch.stack(losses), "params": parameters_of(net)}


def test_fused_conv_batch_norm_function_trains_as_torch():
    rng = np.random.default_rng(5)
    images = rng.normal(size=(16, 1, 10, 10))
    labels = rng.integers(0, 3, 16)
    probe = (rng.uniform(size=(2, 2, 5, 5)), rng.uniform(size=(3, 2, 3, 3)))
    expected, _ = run_both(fused_program, images, labels, probe)
    assert expected["gradcheck"] is True
