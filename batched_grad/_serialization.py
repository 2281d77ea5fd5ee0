"""bg.save / bg.load: tensors and the containers state dicts are made of, in a file that loads without running code.

The file is a zip: `structure.json` describes the object (dicts, OrderedDicts, Counters, lists, tuples, sets,
numbers, strings, bytes, None, dtypes, devices, sizes, and tensors by index: what torch's weights_only loader
accepts) and `tensors/<index>.npy` holds each tensor's values (read with
NumPy's allow_pickle=False). A tensor saved twice is stored once and loads as one tensor, as torch's shared storages
do. An object holding anything else is saved as `data.pkl`, a pickle, which only `weights_only=False` loads.
load also reads what torch.save wrote (_torch_checkpoint.py)."""

import collections
import io
import json
import os
import pickle
import zipfile

import numpy as np

from . import _dtypes
from ._map_location import relocated
from ._tensor import Size, Tensor, device
from ._torch_checkpoint import is_torch_archive, load_torch_archive

_STRUCTURE, _PICKLE = "structure.json", "data.pkl"
_FORMAT = "batched_grad.save/1"


_MAPPING_KINDS = {dict: "dict", collections.OrderedDict: "ordered_dict", collections.Counter: "counter"}


class _NotPlain(Exception):
    """The object holds something the JSON structure cannot describe."""


def _dtype_by_name(name):
    d = getattr(_dtypes, name, None)
    if not isinstance(d, _dtypes.dtype):
        raise pickle.UnpicklingError(f"Weights only load failed: unknown dtype {name!r}")
    return d


class _Writer:
    """The JSON description of an object, and the arrays of the tensors in it."""

    def __init__(self):
        self.arrays, self.index = [], {}

    def tensor(self, t):
        from .nn.parameter import Parameter

        k = self.index.get(id(t))
        if k is None:
            k = self.index[id(t)] = len(self.arrays)
            a = np.asarray(t.detach().numpy(force=True))
            self.arrays.append(a.view(np.uint16) if t.dtype is _dtypes.bfloat16 else a)
        kind = "parameter" if isinstance(t, Parameter) else "tensor"
        return {kind: k, "dtype": t.dtype.name, "requires_grad": bool(t.requires_grad), "device": str(t.device)}

    def describe(self, obj):
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj if not isinstance(obj, float) or np.isfinite(obj) else {"float": repr(obj)}
        if isinstance(obj, Tensor):
            return self.tensor(obj)
        if isinstance(obj, complex):
            return {"complex": [obj.real, obj.imag]}
        if isinstance(obj, _dtypes.dtype):
            return {"dtype": obj.name}
        if isinstance(obj, device):
            return {"device": str(obj)}
        if isinstance(obj, Size):
            return {"size": list(obj)}
        if type(obj) in _MAPPING_KINDS:
            return {_MAPPING_KINDS[type(obj)]: [[self.describe(k), self.describe(v)] for k, v in obj.items()]}
        if type(obj) in (list, tuple, set):
            return {type(obj).__name__: [self.describe(v) for v in obj]}
        if type(obj) in (bytes, bytearray):
            return {type(obj).__name__: obj.hex()}
        raise _NotPlain(type(obj).__name__)


class _Reader:
    """The object a JSON description gives, with its tensors made from the stored arrays."""

    def __init__(self, archive, map_location):
        self.archive, self.map_location, self.tensors = archive, map_location, {}

    def array(self, k):
        with self.archive.open(f"tensors/{k}.npy") as f:
            return np.load(io.BytesIO(f.read()), allow_pickle=False)

    def tensor(self, desc, kind):
        from ._factories import tensor
        from .nn.parameter import Parameter

        k = desc[kind]
        if k not in self.tensors:
            d = _dtype_by_name(desc["dtype"])
            a = self.array(k)
            if d is _dtypes.bfloat16:
                a = a.view(d.np)
            t = relocated(tensor(a, dtype=d), desc.get("device", "cpu"), self.map_location)
            t = Parameter(t, requires_grad=desc["requires_grad"]) if kind == "parameter" else t
            if kind == "tensor" and desc["requires_grad"]:
                t.requires_grad_(True)
            self.tensors[k] = t
        return self.tensors[k]

    def build(self, desc):
        if not isinstance(desc, dict):
            return desc
        kind = next((k for k in ("tensor", "parameter") if k in desc), None) or next(iter(desc))
        value = desc[kind]
        builders = {
            "tensor": lambda: self.tensor(desc, "tensor"),
            "parameter": lambda: self.tensor(desc, "parameter"),
            "float": lambda: float(value),
            "complex": lambda: complex(*value),
            "dtype": lambda: _dtype_by_name(value),
            "device": lambda: device(value),
            "size": lambda: Size(value),
            "dict": lambda: {self.build(k): self.build(v) for k, v in value},
            "ordered_dict": lambda: collections.OrderedDict((self.build(k), self.build(v)) for k, v in value),
            "counter": lambda: collections.Counter({self.build(k): self.build(v) for k, v in value}),
            "list": lambda: [self.build(v) for v in value],
            "tuple": lambda: tuple(self.build(v) for v in value),
            "set": lambda: {self.build(v) for v in value},
            "bytes": lambda: bytes.fromhex(value),
            "bytearray": lambda: bytearray.fromhex(value),
        }
        if kind not in builders:
            raise pickle.UnpicklingError(f"Weights only load failed: unknown entry {kind!r}")
        return builders[kind]()


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True):
    """Save `obj` to `f` (a path or a binary file object): tensors and state dicts as arrays plus a JSON structure
    that loads without running code; any other object as a pickle (loaded only with weights_only=False)."""
    writer = _Writer()
    try:
        structure = {"format": _FORMAT, "object": writer.describe(obj)}
    except _NotPlain:
        structure = None
    with zipfile.ZipFile(_path_or_file(f), "w", zipfile.ZIP_STORED) as archive:
        if structure is None:
            archive.writestr(_PICKLE, pickle.dumps(obj, protocol=max(pickle_protocol, 2)))
            return
        archive.writestr(_STRUCTURE, json.dumps(structure))
        for k, a in enumerate(writer.arrays):
            buffer = io.BytesIO()
            np.save(buffer, a, allow_pickle=False)
            archive.writestr(f"tensors/{k}.npy", buffer.getvalue())


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args):
    """Load what save() wrote to `f` (a path or a binary file object). With weights_only=True (the default, as
    torch 2.6+) only tensors and plain containers load; weights_only=False also loads pickled objects.
    `map_location` places the tensors (a device, a {saved: wanted} dict of locations, or a function of
    (storage, location), called with each loaded tensor); without it they load on the default device."""
    with zipfile.ZipFile(_path_or_file(f), "r") as archive:
        names = set(archive.namelist())
        if _STRUCTURE in names:
            structure = json.loads(archive.read(_STRUCTURE))
            if structure.get("format") != _FORMAT:
                raise pickle.UnpicklingError(f"Weights only load failed: not a file of {_FORMAT}")
            return _Reader(archive, map_location).build(structure["object"])
        if is_torch_archive(names):
            return load_torch_archive(archive, weights_only, map_location, pickle_load_args)
        if _PICKLE not in names:
            raise RuntimeError("load: the file was written neither by batched_grad.save nor by torch.save")
        if weights_only:
            raise pickle.UnpicklingError(
                "Weights only load failed. The file holds objects other than tensors and plain containers, saved "
                "as a pickle; load it with weights_only=False only if you trust its source (it can run code)."
            )
        return pickle.loads(archive.read(_PICKLE), **pickle_load_args)


def _path_or_file(f):
    return os.fspath(f) if isinstance(f, (str, os.PathLike)) else f
