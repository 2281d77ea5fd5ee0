"""torch.nn's core: Module, Parameter, the common layers and losses, `functional` and `init`."""
from . import functional, init
from .module import Module
from .modules import (GELU, Conv2d, CrossEntropyLoss, Dropout, Embedding, Flatten, LayerNorm, Linear, MSELoss, ReLU,
                      Sequential, Sigmoid, Tanh)
from .parameter import Parameter

__all__ = ["GELU", "Conv2d", "CrossEntropyLoss", "Dropout", "Embedding", "Flatten", "LayerNorm", "Linear", "MSELoss",
           "Module", "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh", "functional", "init"]
