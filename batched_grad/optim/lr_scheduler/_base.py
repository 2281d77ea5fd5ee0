"""LRScheduler: torch.optim.lr_scheduler's base class. It records each group's starting lr as "initial_lr", steps
`last_epoch`, writes the lrs its subclass computes into the optimizer's param groups, and warns, as torch does, when
`scheduler.step()` comes before the first `optimizer.step()`."""

import contextlib
import functools
import types
import warnings
import weakref

from ..._tensor import Tensor
from ..optimizer import Optimizer

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available. "
    "Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose."
)
_ORDER_HELP = "See more details at https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate"
STEP_OVERRIDDEN_WARNING = (
    "Seems like `optimizer.step()` has been overridden after learning rate scheduler initialization. Please, make "
    f"sure to call `optimizer.step()` before `lr_scheduler.step()`. {_ORDER_HELP}"
)
STEP_ORDER_WARNING = (
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you should call "
    "them in the opposite order: `optimizer.step()` before `lr_scheduler.step()`.  Failure to do this will result "
    f"in PyTorch skipping the first value of the learning rate schedule. {_ORDER_HELP}"
)


def check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def copied(value):
    """A hyperparameter as a scheduler keeps it: a Tensor is cloned, a number is immutable already."""
    return value.clone() if isinstance(value, Tensor) else value


def group_values(optimizer, key):
    """Each param group's `key` (Tensors cloned)."""
    return [copied(group[key]) for group in optimizer.param_groups]


def set_group_value(group, key, value):
    """Write a hyperparameter: a Tensor-valued one is filled in place, a number replaced."""
    if isinstance(group[key], Tensor):
        group[key].fill_(float(value))
    else:
        group[key] = value


def per_group(name, optimizer, value):
    """`value` once per param group: a list or tuple must have one entry per group, anything else is repeated."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. "
                f"{name} has {len(value)} values, param_groups has {len(optimizer.param_groups)}."
            )
        return [copied(v) for v in value]
    return [copied(value)] * len(optimizer.param_groups)


def _count_optimizer_steps(optimizer):
    """Wrap the optimizer instance's `step` so that it marks `_opt_called` (once per optimizer)."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    owner = weakref.ref(optimizer)
    step = optimizer.step.__func__

    @functools.wraps(step)
    def counted_step(*args, **kwargs):
        opt = owner()
        opt._opt_called = True
        return step.__get__(opt, type(opt))(*args, **kwargs)

    counted_step._wrapped_by_lr_sched = True
    optimizer.step = counted_step


@contextlib.contextmanager
def _flag(scheduler, name):
    setattr(scheduler, name, True)
    try:
        yield
    finally:
        setattr(scheduler, name, False)


class LRScheduler:
    """Adjusts the optimizer's learning rates once per `step()`; subclasses give `get_lr()` (the chainable form,
    from the groups' current lrs) and may give `_get_closed_form_lr()` (from `base_lrs`, used with an epoch)."""

    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", copied(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming scheduler with "
                        "last_epoch >= 0.\nThis typically happens when:\n1. You're trying to resume training from a "
                        "checkpoint but haven't properly loaded the optimizer state\n2. You're using last_epoch >= 0 "
                        "for a fresh training run (not recommended)"
                    )
        self.base_lrs = group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _count_optimizer_steps(optimizer)
        self._initial_step()

    def _initial_step(self):
        """The step the constructor takes: last_epoch -1 -> 0, the lrs set to the schedule's first values."""
        self._step_count = 0
        with _flag(self, "_is_initial"):
            self.step()

    def state_dict(self):
        """Every attribute but the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def get_last_lr(self):
        """The lrs the last step() set, one per param group."""
        return self._last_lr

    def get_lr(self):
        raise NotImplementedError

    def _warn_unless_stepping(self):
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                UserWarning,
                stacklevel=3,
            )

    def _warn_step_order(self):
        if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
            warnings.warn(STEP_OVERRIDDEN_WARNING, UserWarning, stacklevel=3)
        elif not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(STEP_ORDER_WARNING, UserWarning, stacklevel=3)

    def step(self, epoch=None):
        """Advance one epoch (or, deprecated, jump to `epoch` by the closed form) and set the new lrs."""
        if self._step_count == 1:
            self._warn_step_order()
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        with _flag(self, "_get_lr_called_within_step"):
            if epoch is None:
                self.last_epoch += 1
                lrs = self.get_lr()
            else:
                self.last_epoch = epoch
                lrs = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr()
        self._set_lrs(lrs)

    def _set_lrs(self, lrs):
        for group, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            set_group_value(group, "lr", lr)
        self._last_lr = group_values(self.optimizer, "lr")


class _LRScheduler(LRScheduler):
    """The old name of LRScheduler, kept as torch keeps it."""


def callables_state(functions):
    """A state_dict entry for user functions: None for a plain function, a copy of a callable object's __dict__."""
    return [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy() for fn in functions]


def load_callables_state(functions, saved):
    for fn, state in zip(functions, saved):
        if state is not None:
            fn.__dict__.update(state)
