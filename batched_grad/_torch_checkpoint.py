"""Checkpoints written by torch.save (its zip format, torch 1.6 and later) read without torch: `<folder>/data.pkl`
is a pickle whose tensors are rebuilt from the raw storages in `<folder>/data/<key>` (a storage shared by several
tensors is read once). With weights_only=True (the default) only what state dicts and checkpoints are made of
unpickles, as torch's weights-only loader allows: containers, numbers, strings, tensors, parameters, dtypes, sizes
and devices."""

import codecs
import collections
import pickle

import numpy as np

from . import _dtypes
from ._map_location import relocated
from ._tensor import Size, Tensor, device

# torch's legacy storage classes, which name the element type of a saved storage
_STORAGES = {
    "FloatStorage": "float32",
    "DoubleStorage": "float64",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
}
_BUILTINS = {"set": set, "frozenset": frozenset, "complex": complex, "slice": slice, "bytearray": bytearray}


def is_torch_archive(names):
    """Whether a zip's entries are torch.save's layout (one folder holding data.pkl)."""
    return any(n.endswith("/data.pkl") and n.count("/") == 1 for n in names)


class _StorageKind:
    """A saved storage's element type (torch.FloatStorage and its kin, as the pickle names them)."""

    def __init__(self, dtype):
        self.dtype = dtype


class _Storage:
    """A saved storage's elements, the location torch.save recorded for it, and load's map_location."""

    def __init__(self, array, location, map_location):
        self.array, self.location, self.map_location = array, location, map_location


def _rebuild_tensor(storage, offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
    """torch._utils._rebuild_tensor_v2: the tensor of `size` and `stride` (in elements) at `offset` of the storage,
    placed by map_location."""
    itemsize = storage.array.dtype.itemsize
    window = np.lib.stride_tricks.as_strided(
        storage.array[offset:], shape=tuple(size), strides=tuple(s * itemsize for s in stride), writeable=False
    )
    values = relocated(Tensor._wrap(np.array(window)), storage.location, storage.map_location)
    return values.requires_grad_() if requires_grad else values


def _rebuild_parameter(data, requires_grad, backward_hooks, state=None):
    """torch._utils._rebuild_parameter (and _with_state: the attributes a Parameter subclass set)."""
    from .nn.parameter import Parameter

    parameter = Parameter(data, requires_grad)
    for name, value in (state or {}).items():
        setattr(parameter, name, value)
    return parameter


_ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "Counter"): collections.Counter,
    ("_codecs", "encode"): codecs.encode,  # how pickle protocol 2 writes bytes
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch", "Size"): Size,
    ("torch", "device"): device,
}


# (module, name) -> object: the globals torch.serialization.add_safe_globals allowed besides _ALLOWED
SAFE_GLOBALS = {}


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, archive, folder, weights_only, map_location, **pickle_load_args):
        super().__init__(file, **pickle_load_args)
        self.archive, self.folder, self.weights_only, self.storages = archive, folder, weights_only, {}
        self.map_location = map_location
        order = f"{folder}/byteorder"
        self.big_endian = order in archive.namelist() and archive.read(order).strip() == b"big"

    def find_class(self, module, name):
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if (module, name) in SAFE_GLOBALS:
            return SAFE_GLOBALS[(module, name)]
        if module == "torch" and name in _STORAGES:
            return _StorageKind(getattr(_dtypes, _STORAGES[name]))
        if module == "torch" and isinstance(getattr(_dtypes, name, None), _dtypes.dtype):
            return getattr(_dtypes, name)
        if module in ("builtins", "__builtin__") and name in _BUILTINS:  # protocol 2 names Python 2's module
            return _BUILTINS[name]
        if self.weights_only:
            raise pickle.UnpicklingError(
                f"Weights only load failed: the checkpoint holds {module}.{name}, which is neither a tensor nor a "
                "plain container; load it with weights_only=False only if you trust its source (it can run code)."
            )
        return super().find_class(module, name)

    def persistent_load(self, pid):
        _, kind, key, location, _numel = pid
        if key not in self.storages:
            dtype = np.dtype(kind.dtype.np)
            stored = dtype.newbyteorder(">") if self.big_endian and dtype.itemsize > 1 else dtype
            raw = np.frombuffer(self.archive.read(f"{self.folder}/data/{key}"), dtype=stored)
            self.storages[key] = _Storage(raw.astype(dtype, copy=False), location, self.map_location)
        return self.storages[key]


def load_torch_archive(archive, weights_only, map_location, pickle_load_args):
    """The object torch.save wrote into `archive`, its tensors placed by map_location."""
    folder = next(n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1)[: -len("/data.pkl")]
    with archive.open(f"{folder}/data.pkl") as data:
        return _Unpickler(data, archive, folder, weights_only, map_location, **pickle_load_args).load()
