"""A Tensor's data on the host: NumPy arrays, of two kinds, each known by its identity (arrays are mutable, so not
hashable; a registry holds them weakly by id).

Host data of bg.tensor (or of a Tensor made from a NumPy result) is moved to the device lazily: an op reading it
for the first time (a fresh input) passes it to its program as it is, which moves it in passing; one reading it
again (a weight) moves it to the device for good, rather than once per program that reads it.

Memory shared with the user (bg.from_numpy), as torch's tensors share an array's memory, stays on the host: a
Tensor holding it reads it afresh whenever its values are used and writes its in-place changes into it, so that
writes on either side reach the other. What an op or a saved value keeps is a copy taken when it reads: JAX may
read a NumPy argument after the call returns, and a deferred op is computed later, so neither may see the user's
later writes. The array registered is the view that from_numpy makes and the Tensor holds."""

import functools
import math
import weakref

import jax
import numpy as np

from ._float_errors import ignore as ignore_float_errors
from ._float_errors import restore as restore_float_errors
from ._numpy_eval import derived, out_avals
from ._tracing import _outside_every_trace, compiling, eagerly, tracing
from ._x64 import scoped

HOST_ELEMENTS = 1 << 16  # operands larger than this run as kernels (host forms of small float operands)
HOST_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


class _ArraysById:
    """A set of NumPy arrays known by identity, held weakly: an array leaves it when it dies."""

    __slots__ = ("_refs",)

    def __init__(self):
        self._refs = {}  # id(array) -> weak reference to it

    def __contains__(self, array):
        ref = self._refs.get(id(array))
        return ref is not None and ref() is array

    def add(self, array):
        key, refs = id(array), self._refs

        def forget(ref):
            if refs.get(key) is ref:
                refs.pop(key, None)

        refs[key] = weakref.ref(array, forget)


_shared = _ArraysById()  # from_numpy's views of the user's arrays
_read = _ArraysById()  # the other host arrays that an op has read


def share(array):
    """A view of `array` (a plain ndarray, sharing its memory) for a Tensor to hold as shared host data."""
    view = array.view(np.ndarray)
    _shared.add(view)
    return view


def is_shared(array):
    """Whether `array` (a Tensor's host data) is memory shared with the user."""
    ref = _shared._refs.get(id(array))
    return ref is not None and ref() is array


def unshared(value):
    """`value` (a Tensor's value) as something may keep it: a copy of shared memory, anything else as it is."""
    return value.copy() if type(value) is np.ndarray and is_shared(value) else value


def fits(array, value):
    """Whether `value` can be written into the shared `array`: concrete, of its shape and dtype, and writable."""
    return (
        array.flags.writeable
        and isinstance(value, (jax.Array, np.ndarray))
        and not isinstance(value, jax.core.Tracer)
        and value.shape == array.shape
        and value.dtype == array.dtype
    )


def read_before(array, record=True):
    """Whether an op already read this (unshared) host array, and with `record`, note that one reads it now."""
    if array in _read:
        return True
    if record:
        _read.add(array)
    return False


# rewritten(id(array), None): `array` (unshared host data, written into in place) holds new values, which no op
# has read yet, so that its next read is a first one (read_before), as a new array's would be (a C call)
rewritten = _read._refs.pop


def host_read(tensor, array):
    """What an op reads of the host array `tensor` holds: memory shared with NumPy as a copy taken now; other host
    data as it is on its first read, and moved to the device for good on the second."""
    if is_shared(array):
        copy = array.copy()
        if compiling.name is not None:  # bg.compile finds the Tensor this constant of its trace is read from
            compiling.copies[id(copy)] = tensor
        return copy
    if read_before(array):
        tensor._v = array = to_device(array)
        if compiling.name is not None:
            compiling.copies[id(array)] = tensor
    return array


def to_device(array):
    """A NumPy array moved to the default device: jax.device_put, as jnp.asarray compiles a small program for every
    new shape (about 20 ms here). A concrete array even inside a trace: the moved array is kept (_tracing.py)."""
    put = _put_on_first_device()
    if put is not None and array.dtype in _DEVICE_DTYPES and jax.config.jax_default_device is None:
        return put(array)
    return _device_put(array)


@scoped
def _device_put(array):
    with eagerly():
        return jax.device_put(array)


_DEVICE_DTYPES = frozenset(
    np.dtype(t)
    for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16")
    + ("float32", "float64", "complex64", "complex128", jax.numpy.bfloat16)
)


@functools.cache
def _put_on_first_device():
    """jax.device_put(array) for a NumPy array of a dtype JAX has, where no default device is set: the batched copy
    it ends in, 3-6 us against about 30 us of Python around it. None where JAX's private entry point is missing.
    The device is this process's first (jax.devices()[0] is process 0's under jax.distributed)."""
    try:
        from jax._src import core
        from jax._src.lib import xla_client

        device = jax.local_devices()[0]
        sharding = jax.sharding.SingleDeviceSharding(device)
        put = xla_client.batched_device_put
    except (ImportError, AttributeError):  # pragma: no cover - depends on the JAX version
        return None

    def put_array(array):
        aval = core.ShapedArray(array.shape, array.dtype)
        return put(aval, sharding, [array], [device], False, enable_x64=True)  # keeps 64-bit dtypes

    return put_array


@functools.cache
def cpu_device_set():
    """The default device, as Array.devices() gives it, where JAX's default backend is the CPU; else None."""
    return {jax.local_devices()[0]} if jax.default_backend() == "cpu" else None


def host_arrays(arrays, in_trace=False):
    """The operands of an op as NumPy arrays sharing their memory, where the op may run on the host instead of in a
    kernel: on the CPU backend, outside any trace (or inside one, with `in_trace`, for values kept after it), each a
    NumPy array or a concrete JAX array on the default device (not a deferred, traced, meta or sharded value). Else
    None."""
    if cpu_device_set() is None or not (in_trace or _outside_every_trace()):
        return None
    host = []
    for a in arrays:
        if type(a) is not np.ndarray:
            a = device_array_on_host(a)
            if a is None:
                return None
        host.append(a)
    return host


def ops_run_on_host():
    """Whether an op on concrete operands runs on the host now: on the CPU backend, outside any trace."""
    return cpu_device_set() is not None and _outside_every_trace()


def host_array(value):
    """A Tensor's value as a NumPy array where an op may read it so on the host: host data not shared with NumPy as
    it is, a concrete array on the default CPU device as a NumPy array sharing its memory; else None."""
    if type(value) is np.ndarray:
        return None if is_shared(value) else value
    return device_array_on_host(value)


def device_array_on_host(a):
    """A concrete JAX array on the default CPU device as a NumPy array sharing its memory; None for anything else (a
    deferred, traced, meta or sharded value)."""
    if not isinstance(a, jax.Array) or isinstance(a, jax.core.Tracer) or a.devices() != cpu_device_set():
        return None
    return np.asarray(a)


def on_host(op, arrays, static):
    """The outputs (a tuple of NumPy arrays) of `op` (an _ops._core.Op) computed on the host, by its `host` form or,
    where it has none, the form derived from its function (_numpy_eval.py); or None where it runs as a kernel: off
    the CPU backend, in a trace, or where its host form does not apply."""
    host = host_arrays(arrays)
    if host is None:
        return None
    out = computed_on_host(op, host, dict(static))
    if out is None or op.multi:
        return out
    return (out,)


def computed_on_host(op, host, static):
    """The output of `op` (a tuple of them for a multi-output op) on operands already on the host (host_arrays'
    answer), its static params given as a dict: a NumPy array for a NumPy scalar (x[i]); None where the host form
    does not apply to them. Inf and nan come as the kernel gives them, without NumPy's warnings."""
    form = op.host
    token = ignore_float_errors()
    try:
        out = None if form is None else form(*host, **static)
        if out is None:  # no hand-written form, or one for other operands (small floats): the derived one
            out = derived(op, host, static)
    finally:
        restore_float_errors(token)
    if out is None:
        return None
    if not op.multi:
        return out if type(out) is np.ndarray else np.asarray(out)
    return tuple([np.asarray(o) for o in out])


def host_out_avals(op, static, avals):
    """ShapeDtypeStructs of the outputs of `op` on operands of `avals` where ops run on the host (the CPU backend,
    outside a trace), from the jaxpr its derived form traced once per pattern of shapes: no trace for a new size.
    Else, or where it has no derived form, None."""
    if cpu_device_set() is None or tracing():
        return None
    return _numpy_out_avals(op, static, avals) or out_avals(op, static, avals)


def _numpy_out_avals(op, static, avals):
    """ShapeDtypeStructs of the outputs of an op whose host form is a NumPy function of small floats (Op.numpy:
    arithmetic, tanh, matrix products, whose output shape depends on the operands' shapes only), from that form run
    on zeros of `avals`: no trace. None for other ops or operands, or where NumPy refuses them (the trace then
    raises the op's own error)."""
    if op.numpy is None:
        return None
    for shape, dtype in avals:
        if dtype not in HOST_FLOATS or math.prod(shape) > HOST_ELEMENTS:
            return None
    token = ignore_float_errors()
    try:
        out = op.host(*[np.zeros(shape, dtype) for shape, dtype in avals], **dict(static))
    except Exception:  # operands that do not broadcast or multiply: the trace says so in the op's words
        return None
    finally:
        restore_float_errors(token)
    return None if out is None else [jax.ShapeDtypeStruct(np.shape(out), np.asarray(out).dtype)]
