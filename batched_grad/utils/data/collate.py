"""default_collate and default_convert: turn the samples of a batch into batched Tensors, through dicts, tuples,
lists and namedtuples, as torch.utils.data does (Python floats become float64, ints int64, NumPy data keeps its
dtype; strings and bytes stay lists).

A dataset from a torch-based library (torchvision's transforms end in torch tensors) yields torch.Tensors: they are
data at this boundary, so they are converted, keeping their dtype, like NumPy arrays. One that requires grad is a
torch graph's value, not data, and is refused."""

import collections.abc
import copy
import re

import numpy as np

from ... import _dtypes
from ..._factories import as_tensor, tensor
from ..._foreign import TORCH_TENSOR_PASSED, is_torch_tensor
from ..._ops import stack
from ..._tensor import Tensor

np_str_obj_array_pattern = re.compile(r"[SaUO]")  # NumPy dtype codes of strings and objects: not collated
default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def _is_numpy_data(data):
    kind = type(data)
    return kind.__module__ == "numpy" and kind.__name__ not in ("str_", "string_")


def _rebuild_mapping(sample, values):
    """A mapping of `sample`'s type holding `values` (a copy updated in place for mutable ones), or a dict."""
    try:
        if isinstance(sample, collections.abc.MutableMapping):
            clone = copy.copy(sample)
            clone.update(values)
            return clone
        return type(sample)(values)
    except TypeError:
        return values


def _rebuild_sequence(sample, values):
    """A sequence of `sample`'s type holding `values`, or a list."""
    try:
        if isinstance(sample, collections.abc.MutableSequence):
            clone = copy.copy(sample)
            for i, value in enumerate(values):
                clone[i] = value
            return clone
        return type(sample)(values)
    except TypeError:
        return values


def _from_torch(t):
    """A torch.Tensor of a dataset as a Tensor of the same dtype and values."""
    if t.requires_grad:
        raise TypeError(TORCH_TENSOR_PASSED)
    return as_tensor(t.detach().cpu().numpy())


def default_convert(data):
    """Convert the NumPy arrays and scalars (and torch.Tensors) inside `data` (nested in mappings and sequences) to
    Tensors; tuples become lists, as torch; everything else is left as it is."""
    if isinstance(data, Tensor):
        return data
    if is_torch_tensor(data):
        return _from_torch(data)
    if _is_numpy_data(data):
        if isinstance(data, np.ndarray) and np_str_obj_array_pattern.search(data.dtype.str):
            return data
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def collate_tensor_fn(batch, *, collate_fn_map=None):
    return stack(batch, 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    if np_str_obj_array_pattern.search(batch[0].dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(batch[0].dtype))
    return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return as_tensor(np.asarray(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    return tensor(batch, dtype=_dtypes.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


def _collate_fields(batch, collate_fn_map):
    """Collate a batch of sequences field by field (namedtuples keep their type, tuples become lists)."""
    sample = batch[0]
    if isinstance(sample, tuple) and hasattr(sample, "_fields"):
        return type(sample)(*(collate(field, collate_fn_map=collate_fn_map) for field in zip(*batch)))
    size = len(sample)
    if any(len(other) != size for other in batch):
        raise RuntimeError("each element in list of batch should be of equal size")
    fields = [collate(field, collate_fn_map=collate_fn_map) for field in zip(*batch)]
    return fields if isinstance(sample, tuple) else _rebuild_sequence(sample, fields)


def collate(batch, *, collate_fn_map=None):
    """Collate `batch` (a list of samples of one structure): the first entry of `collate_fn_map` whose type the
    first sample is (exactly, then by isinstance, in insertion order) collates it; mappings and sequences recurse."""
    sample = batch[0]
    if collate_fn_map is not None:
        if type(sample) in collate_fn_map:
            return collate_fn_map[type(sample)](batch, collate_fn_map=collate_fn_map)
        for kind, collate_fn in collate_fn_map.items():
            if isinstance(sample, kind):
                return collate_fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(sample, collections.abc.Mapping):
        values = {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in sample}
        return _rebuild_mapping(sample, values)
    if isinstance(sample, collections.abc.Sequence):
        return _collate_fields(batch, collate_fn_map)
    if is_torch_tensor(sample):
        return collate([_from_torch(b) for b in batch], collate_fn_map=collate_fn_map)
    raise TypeError(default_collate_err_msg_format.format(type(sample)))


default_collate_fn_map = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch):
    """Stack a list of samples into a batch: Tensors and NumPy arrays gain a leading batch dimension, Python
    numbers become a float64 / int64 Tensor, strings stay a list, and mappings, namedtuples and other sequences
    are collated field by field (tuples become lists)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)
