"""torch.nn's core: Module, Parameter, the containers, the common layers and losses, `functional`, `init` and
`utils`."""
from . import functional, init, utils
from . import activation as _activation, loss as _loss, pooling as _pooling
from .batchnorm import BatchNorm1d
from .containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .module import Module
from .modules import (GELU, Conv2d, CrossEntropyLoss, Dropout, Embedding, Flatten, LayerNorm, Linear, MSELoss, ReLU,
                      Sigmoid, Softplus, Tanh)
from .parameter import Parameter


def _classes(module):
    return {name: value for name, value in vars(module).items() if isinstance(value, type) and name[0] != "_"
            and value.__module__ == module.__name__}


globals().update(_classes(_activation))
globals().update(_classes(_loss))
globals().update(_classes(_pooling))

__all__ = ["BatchNorm1d", "GELU", "Conv2d", "CrossEntropyLoss", "Dropout", "Embedding", "Flatten",
           "LayerNorm", "Linear", "MSELoss", "Module", "ModuleDict", "ModuleList", "Parameter",
           "ParameterDict", "ParameterList", "ReLU", "Sequential", "Sigmoid", "Softplus", "Tanh", "functional", "init",
           "utils", *_classes(_activation), *_classes(_loss), *_classes(_pooling)]
