"""torch.optim's optimizers, each step one compiled update per parameter group: SGD, Adam, AdamW, RMSprop,
Adagrad, Adadelta, Adamax, NAdam, RAdam, Rprop and ASGD."""
from .adam import Adam, AdamW
from .adaptive import ASGD, Adadelta, Adagrad, Adamax, NAdam, RAdam, RMSprop, Rprop
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["ASGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "NAdam", "Optimizer", "RAdam", "RMSprop", "Rprop",
           "SGD"]
