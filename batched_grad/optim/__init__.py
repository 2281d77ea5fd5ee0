"""torch.optim's SGD, Adam and AdamW, each step one compiled update per parameter group."""
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Adam", "AdamW", "Optimizer", "SGD"]
