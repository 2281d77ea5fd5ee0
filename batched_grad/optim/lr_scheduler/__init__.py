"""torch.optim.lr_scheduler: schedulers that set the optimizer's learning rates (and, for the cyclical ones, its
momentum) epoch by epoch, with torch's formulas, state_dicts and warnings."""

from ._base import LRScheduler
from ._base import _LRScheduler as _LRScheduler  # the old name, importable as in torch
from ._composite import ChainedScheduler, ReduceLROnPlateau, SequentialLR
from ._cyclic import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR
from ._decay import (
    ConstantLR,
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    MultiplicativeLR,
    MultiStepLR,
    PolynomialLR,
    StepLR,
)

__all__ = [
    "ChainedScheduler",
    "ConstantLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "MultiplicativeLR",
    "OneCycleLR",
    "PolynomialLR",
    "ReduceLROnPlateau",
    "SequentialLR",
    "StepLR",
]

# torch defines every scheduler in this one module, and programs test it: d2l's training loop steps a scheduler
# whose `__module__` is `torch.optim.lr_scheduler.__name__` and calls any other as a function of the epoch
for _scheduler in (*(globals()[name] for name in __all__), _LRScheduler):
    _scheduler.__module__ = __name__
