"""NumPy arrays that Tensors share with the user (bg.from_numpy), as torch's tensors share an array's memory.

A Tensor holding such an array reads it afresh whenever its values are used, and writes its in-place changes into
it, so that writes on either side reach the other. What an op or a saved value keeps is a copy taken when it
reads: JAX may read a NumPy argument after the call returns, and a deferred op is computed later, so neither may
see the user's later writes. The array is known by its identity: the view that from_numpy makes and holds."""
import weakref

import numpy as np

_shared = {}  # id(view) -> weak reference to the view


def share(array):
    """A view of `array` (a plain ndarray, sharing its memory) for a Tensor to hold as shared host data."""
    view = array.view(np.ndarray)
    key = id(view)

    def forget(ref):
        if _shared.get(key) is ref:
            _shared.pop(key, None)

    _shared[key] = weakref.ref(view, forget)
    return view


def is_shared(array):
    """Whether `array` (a Tensor's host data) is memory shared with the user."""
    ref = _shared.get(id(array))
    return ref is not None and ref() is array


def unshared(value):
    """`value` (a Tensor's value) as something may keep it: a copy of shared memory, anything else as it is."""
    return value.copy() if type(value) is np.ndarray and is_shared(value) else value
