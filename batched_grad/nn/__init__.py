"""torch.nn's core: Module, Parameter, Buffer, the containers, the common layers and losses, `functional`, `init`,
`parallel` and `utils`."""

from . import activation as _activation
from . import adaptive as _adaptive
from . import functional, init, parallel, utils
from . import layers as _layers
from . import lazy as _lazy
from . import loss as _loss
from . import normalization as _normalization
from . import padding as _padding
from . import pooling as _pooling
from . import rnn as _rnn
from . import sparse as _sparse
from . import transformer as _transformer
from .attention import MultiheadAttention
from .basic import (
    GELU,
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    MSELoss,
    ReLU,
    Sigmoid,
    Softplus,
    Tanh,
)
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm
from .containers import Container, ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .module import Module
from .parallel import DataParallel
from .parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter


def _classes(module):
    return {
        name: value
        for name, value in vars(module).items()
        if isinstance(value, type) and name[0] != "_" and value.__module__ == module.__name__
    }


_LAYER_MODULES = (
    _activation,
    _adaptive,
    _layers,
    _lazy,
    _loss,
    _normalization,
    _padding,
    _pooling,
    _rnn,
    _sparse,
    _transformer,
)
_LAYERS = {name: cls for module in _LAYER_MODULES for name, cls in _classes(module).items()}
globals().update(_LAYERS)

from . import modules  # noqa: E402  (torch.nn.modules' file layout, over the classes above)

__all__ = [
    "BatchNorm1d",
    "Buffer",
    "BatchNorm2d",
    "BatchNorm3d",
    "SyncBatchNorm",
    "GELU",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "CrossEntropyLoss",
    "DataParallel",
    "Dropout",
    "Embedding",
    "Flatten",
    "LayerNorm",
    "Linear",
    "MSELoss",
    "Module",
    "MultiheadAttention",
    "ModuleDict",
    "Container",
    "ModuleList",
    "Parameter",
    "ParameterDict",
    "ParameterList",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Softplus",
    "Tanh",
    "functional",
    "init",
    "modules",
    "parallel",
    "utils",
    *_LAYERS,
]
