"""torch.nn.modules' file layout: `batched_grad.nn.modules.<file>.<Class>` names the class torch keeps in
torch/nn/modules/<file>.py (`nn.modules.batchnorm._BatchNorm`, `nn.modules.linear.Linear`, ...), for programs that
import from there or test isinstance against the private bases. The classes live where batched_grad defines them;
each submodule here is made from the table below and registered as importable."""

from ..._file_layout import register_file_module
from .. import (
    _module_hooks,
    activation,
    adaptive,
    attention,
    basic,
    batchnorm,
    containers,
    layers,
    lazy,
    loss,
    losses,
    module,
    normalization,
    padding,
    pooling,
    rnn,
    sparse,
    transformer,
)

_DEFINED_IN = (
    activation,
    adaptive,
    attention,
    basic,
    batchnorm,
    containers,
    layers,
    lazy,
    loss,
    losses,
    module,
    normalization,
    padding,
    pooling,
    rnn,
    sparse,
    transformer,
)

# torch's file -> the classes it defines that batched_grad has
TORCH_FILES = {
    "adaptive": "AdaptiveLogSoftmaxWithLoss",
    "activation": """Threshold ReLU RReLU Hardtanh ReLU6 Sigmoid Hardsigmoid Tanh SiLU Mish Hardswish ELU CELU SELU
        GLU GELU Hardshrink LeakyReLU LogSigmoid Softplus Softshrink MultiheadAttention PReLU Softsign Tanhshrink
        Softmin Softmax Softmax2d LogSoftmax""",
    "batchnorm": """_NormBase _BatchNorm BatchNorm1d BatchNorm2d BatchNorm3d LazyBatchNorm1d LazyBatchNorm2d
        LazyBatchNorm3d""",
    "channelshuffle": "ChannelShuffle",
    "container": "Container Sequential ModuleList ModuleDict ParameterList ParameterDict",
    "conv": """_ConvNd Conv1d Conv2d Conv3d _ConvTransposeNd ConvTranspose1d ConvTranspose2d ConvTranspose3d LazyConv1d
        LazyConv2d LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d""",
    "distance": "PairwiseDistance CosineSimilarity",
    "dropout": "_DropoutNd Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout",
    "flatten": "Flatten Unflatten",
    "fold": "Fold Unfold",
    "instancenorm": """_InstanceNorm InstanceNorm1d InstanceNorm2d InstanceNorm3d LazyInstanceNorm1d LazyInstanceNorm2d
        LazyInstanceNorm3d""",
    "lazy": "LazyModuleMixin",
    "linear": "Identity Linear NonDynamicallyQuantizableLinear Bilinear LazyLinear",
    "loss": """_Loss _WeightedLoss CTCLoss L1Loss NLLLoss NLLLoss2d PoissonNLLLoss GaussianNLLLoss KLDivLoss MSELoss
        BCELoss BCEWithLogitsLoss HingeEmbeddingLoss MultiLabelMarginLoss SmoothL1Loss HuberLoss SoftMarginLoss
        CrossEntropyLoss MultiLabelSoftMarginLoss CosineEmbeddingLoss MarginRankingLoss MultiMarginLoss
        TripletMarginLoss TripletMarginWithDistanceLoss""",
    "module": "Module",
    "normalization": "LocalResponseNorm LayerNorm GroupNorm RMSNorm",
    "padding": """CircularPad1d CircularPad2d CircularPad3d ConstantPad1d ConstantPad2d ConstantPad3d ReflectionPad1d
        ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d ReplicationPad3d ZeroPad1d ZeroPad2d
        ZeroPad3d""",
    "pixelshuffle": "PixelShuffle PixelUnshuffle",
    "pooling": """_MaxPoolNd MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d _AvgPoolNd AvgPool1d
        AvgPool2d AvgPool3d LPPool1d LPPool2d LPPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d
        _AdaptiveAvgPoolNd AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d""",
    "rnn": "RNNBase RNN LSTM GRU RNNCellBase RNNCell LSTMCell GRUCell",
    "sparse": "Embedding EmbeddingBag",
    "transformer": """Transformer TransformerEncoder TransformerDecoder TransformerEncoderLayer
        TransformerDecoderLayer""",
    "upsampling": "Upsample UpsamplingNearest2d UpsamplingBilinear2d",
}


def _class_named(name):
    for source in _DEFINED_IN:
        found = vars(source).get(name)
        if isinstance(found, type):
            return found
    raise ImportError(f"batched_grad.nn defines no class {name}")


def _submodule(file, names):
    members = {name: _class_named(name) for name in names.split()}
    return register_file_module(
        __name__, file, members, f"torch.nn.modules.{file}'s classes, as batched_grad has them."
    )


for _file, _names in TORCH_FILES.items():
    globals()[_file] = _submodule(_file, _names)
    for _name in globals()[_file].__all__:
        globals()[_name] = getattr(globals()[_file], _name)
del _file, _names, _name

# torch.nn.modules.module's functions that register hooks of every module
for _name in _module_hooks.GLOBAL_REGISTRATIONS:
    setattr(module, _name, getattr(_module_hooks, _name))
del _name

from . import utils  # noqa: E402  (torch.nn.modules.utils: _single, _pair, ...)
