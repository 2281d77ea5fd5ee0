"""torch.nn's core: Module, Parameter, the common layers and losses, `functional` and `init`."""
from . import functional, init
from .module import Module
from .modules import (GELU, AvgPool2d, Conv2d, CrossEntropyLoss, Dropout, Embedding, Flatten, LayerNorm, Linear,
                      MaxPool2d, MSELoss, ReLU, Sequential, Sigmoid, Tanh)
from .parameter import Parameter

__all__ = ["GELU", "AvgPool2d", "Conv2d", "CrossEntropyLoss", "Dropout", "Embedding", "Flatten", "LayerNorm", "Linear",
           "MaxPool2d", "MSELoss", "Module", "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh", "functional", "init"]
