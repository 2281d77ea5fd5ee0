"""batched_grad: PyTorch's autograd API (grad, backward, is_grads_batched) on JAX arrays."""

import gc
import importlib.util

from . import _xla_flags

_xla_flags.apply()  # before JAX starts its CPU backend

from . import _cache  # noqa: E402

_cache.setup()  # the persistent compilation cache, before the first compile

from math import e, inf, nan, pi  # noqa: E402  (torch's constants)

from . import (  # noqa: E402
    _C,
    _ops,  # noqa: E402
    _vmap_internals,  # torch._vmap_internals: reached as an attribute of the module, as torch's
    accelerator,
    amp,
    autograd,
    backends,
    cpu,
    cuda,
    distributed,
    fft,
    func,  # noqa: E402
    hub,
    jit,
    library,
    linalg,
    multiprocessing,
    nn,
    onnx,
    ops,
    optim,
    overrides,
    profiler,
    random,
    serialization,
    sparse,
    special,
    testing,
    torch_version,
    utils,
    version,
    xpu,
)
from ._budget import set_cache_limit
from ._cache import set_compilation_cache
from ._compile import compile  # noqa: A004  (torch.compile's name)
from ._devices import get_default_device, set_default_device
from ._dtypes import (
    bfloat16,
    bool,
    cdouble,
    cfloat,
    complex64,
    complex128,
    double,
    dtype,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    int8,
    int16,
    int32,
    int64,
    long,
    set_default_dtype,
    uint8,
)
from ._dtypes import float32 as float  # noqa: A001  (torch's aliases)
from ._dtypes import int16 as short
from ._dtypes import int32 as int
from ._factories import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_jax,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from ._foreach import FUNCTIONS as _FOREACH
from ._format import set_printoptions
from ._fusion import get_fusion, set_fusion
from ._generator import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from ._grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from ._info import finfo, iinfo
from ._layout_types import (
    _mkldnn,  # noqa: F401  (torch's, private)
    jagged,
    layout,
    sparse_bsc,
    sparse_bsr,
    sparse_coo,
    sparse_csc,
    sparse_csr,
    strided,
)
from ._lazy import set_fuse_after
from ._legacy_constructors import TYPED as _TYPED
from ._legacy_constructors import set_default_tensor_type
from ._lobpcg import lobpcg
from ._lowrank import pca_lowrank, svd_lowrank
from ._memory_format import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format
from ._ops import *  # noqa: F401,F403  (every op of the table, under torch's name)
from ._ops import clone, compile_count, jax_function, set_background_compile, to, wait_for_compiles
from ._ops._out_rules import OUT_RULES as _OUT_RULES
from ._ops._public import with_out as _with_out
from ._ops.legacy import range_ as range  # noqa: A004  (torch's name)
from ._ops.unique import _unique, _unique2  # noqa: F401  (torch's, private)
from ._serialization import load, save
from ._settings import (
    are_deterministic_algorithms_enabled,
    get_deterministic_debug_mode,
    get_float32_matmul_precision,
    get_num_interop_threads,
    get_num_threads,
    init_num_threads,
    is_deterministic_algorithms_warn_only_enabled,
    set_deterministic_debug_mode,
    set_float32_matmul_precision,
    set_flush_denormal,
    set_num_interop_threads,
    set_num_threads,
    use_deterministic_algorithms,
)
from ._tensor import Size, Tensor, device, is_warn_always_enabled, set_warn_always
from .amp import autocast
from .amp.autocast_mode import (
    autocast_decrement_nesting,
    autocast_increment_nesting,
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_cpu_dtype,
    set_autocast_cpu_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
    set_autocast_gpu_dtype,
)
from .autograd import grad
from .autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled
from .func import vmap  # vmap.vmap, as torch.vmap is torch.func.vmap
from .sparse import sparse_coo_tensor, spmm
from .utils.dlpack import from_dlpack, to_dlpack

globals().update(_TYPED)  # FloatTensor, LongTensor, ...: torch's legacy typed constructors
_FACTORIES = ("arange", "empty", "eye", "full", "linspace", "ones", "rand", "randint", "randn", "range", "zeros")
globals().update(_with_out({name: globals()[name] for name in _FACTORIES}, _OUT_RULES["torch"]))
globals().update(_FOREACH)  # torch._foreach_add, ...: an op over each tensor of a list
newaxis = None  # as torch.newaxis, for x[:, newaxis]
__version__ = version.__version__

from . import distributions  # noqa: E402  (last: it is written with the public names above)

# torch's samplers behind Gamma and Dirichlet, which code also calls directly (mixup's Beta draws)
_standard_gamma = distributions.utils.standard_gamma
_sample_dirichlet = distributions.utils.sample_dirichlet

if importlib.util.find_spec("einops") is not None:  # einops knows batched_grad tensors once its backend class exists
    from . import _einops_backend  # noqa: E402,F401
if importlib.util.find_spec("opt_einsum") is not None:  # opt_einsum.contract finds batched_grad's functions by alias
    from . import _opt_einsum_backend  # noqa: E402,F401

# Importing JAX and batched_grad leaves ~130k long-lived objects. Recorded graphs make many small objects that outlive
# the young generations, so full collections come every few thousand ops, each traversing all of those (tens of ms).
# They live as long as the process: the collector's permanent generation keeps them out of its traversals.
gc.freeze()
