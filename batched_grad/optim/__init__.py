"""torch.optim's optimizers, each step one compiled update per parameter group: SGD, Adam, AdamW, RMSprop,
Adagrad, Adadelta, Adamax, NAdam, RAdam, Rprop and ASGD; Adafactor and Muon (matrix_optimizers, torch's updates in
Tensor ops); and LBFGS, whose step runs a closure several times. The lr schedulers are in lr_scheduler, weight
averaging (SWA, EMA) in swa_utils."""

from . import lr_scheduler, swa_utils
from .adam import Adam, AdamW
from .adaptive import ASGD, Adadelta, Adagrad, Adamax, NAdam, RAdam, RMSprop, Rprop
from .lbfgs import LBFGS
from .matrix_optimizers import Adafactor, Muon
from .optimizer import Optimizer
from .sgd import SGD
from .sparse import SparseAdam

__all__ = [
    "ASGD",
    "Adadelta",
    "Adafactor",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "LBFGS",
    "Muon",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "Rprop",
    "SGD",
    "SparseAdam",
    "lr_scheduler",
    "swa_utils",
]

Adafactor.__module__ = Muon.__module__ = __name__  # torch's own module for both
