"""Lean fronts of the commonest eager calls: small ops on host data (x * y, x + 1.0, x.tanh()) and in-place updates
(p.add_(g), p.mul_(c), p -= u, p.add_(g, alpha=a), p.zero_(), p.copy_(g)). Each is one Python call in front of the
method's full path (NumPy keywords, deprecated signatures, sparse forms, promotion, the op table's apply, the in-place
lane, _inplace.py), which takes every call the front does not, unchanged. A front goes ahead only where the full path
would compute the same values with the same NumPy function: nothing rare going on (no profiler, operator log or
forward-mode level; for a write no capturing transform), operands outside the graph (grad mode off or none
requiring grad), host data of one float dtype (a sparse tensor's value is none) or Python numbers, outside every
trace on the CPU backend; a write only into host data the tensor alone holds (exclusive_host_value)."""

import numpy as np

from .. import _host
from .._dual import LEVELS as DUAL_LEVELS
from .._float_errors import ignore as ignore_float_errors
from .._float_errors import restore as restore_float_errors
from .._grad_mode import _state as GRAD_MODE
from .._host import HOST_FLOATS, cpu_device_set
from .._profiling import PROFILING
from .._tensor import Tensor
from .._tracing import _outside_every_trace as outside_every_trace
from .._transform_levels import GUARDING, guards_captures
from ._core import OP_LOGS, exclusive_host_value

_EXACT_INTS = 2**53  # the ints float64 holds exactly, which NumPy casts to the dtype once, as the kernel


def _operand(other, dtype):
    """What the ufunc takes for `other`: a Python float, or an int float64 holds exactly, as it is; a Tensor's host
    data of `dtype` (not shared with NumPy) where it is outside the graph; else None."""
    kind = type(other)
    if kind is float or kind is int and -_EXACT_INTS <= other <= _EXACT_INTS:
        return other
    if not isinstance(other, Tensor) or (other._requires_grad or other._node is not None) and GRAD_MODE.enabled:
        return None
    w = other._v
    if type(w) is not np.ndarray or w.base is not None or w.dtype != dtype or w.size > _host.HOST_ELEMENTS:
        return None
    return w


def _host_value(tensor):
    """`tensor`'s host data where a front computes with it: a NumPy array of a float dtype NumPy computes as the
    kernel (float32, float64), not a view of other memory nor shared with NumPy, of at most HOST_ELEMENTS, the
    tensor outside the graph; else None."""
    v = tensor._v
    if type(v) is not np.ndarray or v.base is not None or v.dtype not in HOST_FLOATS or v.size > _host.HOST_ELEMENTS:
        return None
    return None if (tensor._requires_grad or tensor._node is not None) and GRAD_MODE.enabled else v


def binary(forms, full):
    """The method `full` (self.op(other), self op other; other op self for a commutative op's reflected operator,
    which the full path also computes as self op other) with a lean front computing the op by its row's ufuncs
    `forms` (with a Tensor operand, with a number) into a new Tensor."""
    tensor_form, number_form = forms

    def method(*args, **kwargs):
        if len(args) == 2 and not kwargs and not (PROFILING.on or OP_LOGS or DUAL_LEVELS.tangents is not None):
            v = _host_value(args[0])
            value = None if v is None else _operand(args[1], v.dtype)
            if value is not None and outside_every_trace() and cpu_device_set() is not None:
                token = ignore_float_errors()
                try:
                    out = np.asarray((tensor_form if type(value) is np.ndarray else number_form)(v, value))
                except ValueError:  # shapes that do not broadcast: the full path says so in torch's words
                    out = None
                finally:
                    restore_float_errors(token)
                if out is not None and out.dtype == v.dtype:  # else NumPy before 2.0 promoted for a number's value
                    return Tensor._wrap(out)
        return full(*args, **kwargs)

    method.__name__, method.__qualname__, method.__doc__ = full.__name__, full.__qualname__, full.__doc__
    return method


def unary(form, results, full):
    """The method `full` (self.op()) with a lean front computing the op by its row's NumPy function `form` into a
    new Tensor, for an input whose dtype the op keeps (`results`: the result dtype of each input dtype met so far)."""

    def method(*args, **kwargs):
        if len(args) == 1 and not kwargs and not (PROFILING.on or OP_LOGS or DUAL_LEVELS.tangents is not None):
            v = _host_value(args[0])
            if v is not None and results.get(v.dtype) == v.dtype and outside_every_trace() and cpu_device_set():
                token = ignore_float_errors()
                try:
                    out = np.asarray(form(v))
                finally:
                    restore_float_errors(token)
                if out.dtype == v.dtype:
                    return Tensor._wrap(out)
        return full(*args, **kwargs)

    method.__name__, method.__qualname__, method.__doc__ = full.__name__, full.__qualname__, full.__doc__
    return method


def in_place(forms, full):
    """The in-place method `full` (self.op_(other)) with a lean front computing the op by its row's ufuncs `forms`
    (with a Tensor operand, with a number) into the tensor's memory."""
    tensor_form, number_form = forms

    def method(*args, **kwargs):
        if len(args) == 2 and not kwargs and not (GUARDING.count and guards_captures()):
            self, other = args
            held = exclusive_host_value(self)
            if held is not None and held.dtype in HOST_FLOATS and held.size <= _host.HOST_ELEMENTS:
                value = _operand(other, held.dtype)
                if value is not None and outside_every_trace() and cpu_device_set() is not None:
                    form = tensor_form if type(value) is np.ndarray else number_form
                    token = ignore_float_errors()
                    try:
                        form(held, value, out=held, dtype=held.dtype)
                    except ValueError:  # shapes that do not broadcast into the tensor: the full path says so
                        return full(*args, **kwargs)
                    finally:
                        restore_float_errors(token)
                    self._counter.value += 1
                    return self
        return full(*args, **kwargs)

    method.__name__, method.__qualname__, method.__doc__ = full.__name__, full.__qualname__, full.__doc__
    return method


def scaled(sign, fused, full):
    """The in-place method `full` (self.add_(other, alpha=a): `sign` 1; sub_: -1) with a lean front for a float
    alpha other than 1 and a Tensor operand of the tensor's dtype: `fused(self, other, sign * alpha)`, the host form
    of its row (scaled_sum), becomes the tensor's value."""

    def method(*args, **kwargs):
        alpha = kwargs.get("alpha") if len(kwargs) == 1 else None
        if type(alpha) is float and alpha != 1 and len(args) == 2 and not (GUARDING.count and guards_captures()):
            self, other = args
            held = exclusive_host_value(self)
            if held is not None and held.dtype in HOST_FLOATS and held.size <= _host.HOST_ELEMENTS:
                value = _operand(other, held.dtype)
                if type(value) is np.ndarray and outside_every_trace() and cpu_device_set() is not None:
                    token = ignore_float_errors()
                    try:
                        out = fused(held, value, sign * alpha)
                    finally:
                        restore_float_errors(token)
                    if out.shape == held.shape:  # else the operand broadcasts the tensor: the full path's error
                        self._v = out
                        self._counter.value += 1
                        return self
        return full(*args, **kwargs)

    method.__name__, method.__qualname__, method.__doc__ = full.__name__, full.__qualname__, full.__doc__
    return method


def zero(full):
    """Tensor.zero_ (`full`) with a lean front filling the tensor's memory with zeros."""

    def zero_(*args, **kwargs):
        if len(args) == 1 and not kwargs and not (GUARDING.count and guards_captures()):
            (self,) = args
            held = exclusive_host_value(self)
            if held is not None and outside_every_trace() and cpu_device_set() is not None:
                held.fill(0)
                self._counter.value += 1
                return self
        return full(*args, **kwargs)

    zero_.__doc__ = full.__doc__
    return zero_


def copy(full):
    """Tensor.copy_ (`full`) with a lean front giving the tensor the source's host data of its dtype and shape as its
    value (host data is never written into where another tensor holds it, exclusive_host_value)."""

    def copy_(*args, **kwargs):
        if len(args) == 2 and not kwargs and not (GUARDING.count and guards_captures()):
            self, src = args
            held = exclusive_host_value(self, replaced=True)
            source = None if held is None or not isinstance(src, Tensor) else _host_value(src)
            if source is not None and source.dtype == held.dtype and source.shape == held.shape:
                if outside_every_trace() and cpu_device_set() is not None:
                    self._v = source
                    self._counter.value += 1
                    return self
        return full(*args, **kwargs)

    copy_.__doc__ = full.__doc__
    return copy_
