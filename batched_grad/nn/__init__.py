"""torch.nn's core: Module, Parameter, the containers, the common layers and losses, `functional`, `init` and
`utils`."""
from . import functional, init, utils
from .batchnorm import BatchNorm1d
from .containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .module import Module
from .modules import (GELU, AvgPool2d, Conv2d, CrossEntropyLoss, Dropout, Embedding, Flatten, LayerNorm, Linear,
                      MaxPool2d, MSELoss, ReLU, Sigmoid, Softplus, Tanh)
from .parameter import Parameter

__all__ = ["BatchNorm1d", "GELU", "AvgPool2d", "Conv2d", "CrossEntropyLoss", "Dropout", "Embedding", "Flatten",
           "LayerNorm", "Linear", "MaxPool2d", "MSELoss", "Module", "ModuleDict", "ModuleList", "Parameter",
           "ParameterDict", "ParameterList", "ReLU", "Sequential", "Sigmoid", "Softplus", "Tanh", "functional", "init",
           "utils"]
