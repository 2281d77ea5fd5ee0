"""torch.optim.swa_utils: stochastic weight averaging and exponential moving averages of a model's parameters
(AveragedModel), the SWA learning-rate schedule (SWALR), and recomputing batch-norm statistics for the averaged
weights (update_bn). As torch's on a CPU build, where the default average is the per-tensor form."""

import copy
import itertools
import math

from .._dtypes import int64
from .._factories import tensor
from .._grad_mode import no_grad
from .._tensor import Tensor
from ..nn.batchnorm import _BatchNorm
from ..nn.module import Module
from .lr_scheduler._base import LRScheduler, per_group

__all__ = [
    "SWALR",
    "AveragedModel",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def _is_inexact(tensor):
    return tensor.dtype.is_floating_point or tensor.dtype.is_complex


def get_ema_multi_avg_fn(decay=0.999):
    """An average over lists of tensors, in place: ema = lerp(ema, current, 1 - decay)."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        if _is_inexact(ema_param_list[0]):
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                p_ema.lerp_(p_model, 1 - decay)
        else:
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """The running mean over lists of tensors, in place: avg += (current - avg) / (n + 1)."""

    @no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        if _is_inexact(averaged_param_list[0]):
            weight = 1 / (num_averaged + 1)
            if isinstance(weight, Tensor):
                weight = weight.item()
            for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
                p_avg.lerp_(p_model, weight)
            return
        for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
            diff = p_model - p_avg
            if isinstance(num_averaged, Tensor):
                p_avg.addcdiv_(diff, num_averaged + 1)
            else:
                p_avg.add_(diff, alpha=1.0 / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """An average of one tensor: decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """The running mean of one tensor: avg + (current - avg) / (n + 1)."""

    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of `model` whose parameters (and buffers, with `use_buffers`) are averaged over the models given to
    update_parameters: the running mean by default, else `avg_fn(avg, current, n)` per tensor or
    `multi_avg_fn(avgs, currents, n)` over lists. `n_averaged` counts the updates."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=int64, device=device))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        """Average `model`'s parameters into this one's (the first call copies them)."""
        if self.use_buffers:
            own = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            own, theirs = self.parameters(), model.parameters()
        own_detached, theirs_detached = [], []
        first = bool(self.n_averaged == 0)
        for p_averaged, p_model in zip(own, theirs):
            current = p_model.detach().to(p_averaged.device)
            own_detached.append(p_averaged.detach())
            theirs_detached.append(current)
            if first:
                p_averaged.detach().copy_(current)
        if self.n_averaged > 0:
            if self.multi_avg_fn is not None or self.avg_fn is None:
                self._average_groups(own_detached, theirs_detached)
            else:
                for p_averaged, current in zip(own_detached, theirs_detached, strict=True):
                    p_averaged.copy_(self.avg_fn(p_averaged, current, self.n_averaged.to(p_averaged.device)))
        if not self.use_buffers:
            for b_swa, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        self.n_averaged += 1

    def _average_groups(self, own, theirs):
        """multi_avg_fn (or, by default, the per-tensor running mean) over the tensors grouped by device and dtype,
        as torch groups them."""
        groups = {}
        for p_averaged, current in zip(own, theirs, strict=True):
            pair = groups.setdefault((str(p_averaged.device), p_averaged.dtype), ([], []))
            pair[0].append(p_averaged)
            pair[1].append(current)
        for averaged, currents in groups.values():
            n_averaged = self.n_averaged.to(averaged[0].device)
            if self.multi_avg_fn:
                self.multi_avg_fn(averaged, currents, n_averaged)
            else:
                average = get_swa_avg_fn()
                for p_averaged, current in zip(averaged, currents, strict=True):
                    p_averaged.copy_(average(p_averaged, current, n_averaged))


def update_bn(loader, model, device=None):
    """Recompute the running statistics of `model`'s batch norms in one pass over `loader` (a batch, or the first
    element of a list/tuple batch, per step) with the cumulative average (momentum None), restoring the momenta and
    training mode after."""
    with no_grad():
        momenta = {}
        for module in model.modules():
            if isinstance(module, _BatchNorm):
                module.reset_running_stats()
                momenta[module] = module.momentum
        if not momenta:
            return
        was_training = model.training
        model.train()
        for module in momenta:
            module.momentum = None
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to `swa_lr` over `anneal_epochs` steps (cosine or linear), then keep it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        for value, group in zip(per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups, strict=True):
            group["swa_lr"] = value
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        self._warn_unless_stepping()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        # the lr before annealing, recovered from the current one and the previous step's mix
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev_lrs = [
            self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha) for group in self.optimizer.param_groups
        ]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [
            group["swa_lr"] * alpha + lr * (1 - alpha)
            for group, lr in zip(self.optimizer.param_groups, prev_lrs, strict=True)
        ]

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def state_dict(self):
        return {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
