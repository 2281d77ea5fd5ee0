"""torch.optim's SGD and Adam, each step one compiled update per parameter group."""
from .adam import Adam
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Adam", "Optimizer", "SGD"]
