"""Lean fronts of the commonest eager calls: small ops on host data (x * y, x + 1.0, x.tanh()) and in-place updates
(p.add_(g), p.mul_(c), p -= u, p.add_(g, alpha=a), p.zero_(), p.copy_(g)). Each is one Python call in front of the
method's full path (NumPy keywords, deprecated signatures, sparse forms, promotion, the op table's apply, the in-place
lane, _inplace.py), which takes every call the front does not, unchanged. A front goes ahead only where the full path
would compute the same values with the same NumPy function: nothing rare going on (no profiler, operator log or
forward-mode level; for a write no capturing transform), operands outside the graph (grad mode off or none
requiring grad), host data of one float dtype (a sparse tensor's value is none) or Python numbers, outside every
trace on the CPU backend; a write only into host data the tensor alone holds (exclusive_host_value)."""

import math
import sys

import numpy as np

from .. import _host
from .._autocast import ENABLED as AUTOCAST
from .._dual import LEVELS as DUAL_LEVELS
from .._float_errors import ignore as ignore_float_errors
from .._float_errors import restore as restore_float_errors
from .._grad_mode import _state as GRAD_MODE
from .._host import HOST_FLOATS, cpu_device_set, rewritten
from .._inplace import forget_dead_views
from .._profiling import PROFILING
from .._tensor import Tensor
from .._tracing import _outside_every_trace as outside_every_trace
from .._transform_levels import GUARDING, guards_captures
from .._view_meta import in_graph
from .._write_watch import WATCH
from ._core import OP_LOGS
from .scaled_sum import alpha_number, scaled_sum_host

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_EXACT_INTS = 2**53  # the ints float64 holds exactly, which NumPy casts to the dtype once, as the kernel


def _operand(other, dtype):
    """What the ufunc takes for `other`: a Python float, or an int float64 holds exactly, as it is; a Tensor's host
    data of `dtype` (a view's too: it is only read) where it is outside the graph; else None."""
    kind = type(other)
    if kind is float or kind is int and -_EXACT_INTS <= other <= _EXACT_INTS:
        return other
    if not isinstance(other, Tensor) or not _outside_graph(other):
        return None
    w = other._v
    if type(w) is not np.ndarray or w.dtype != dtype or w.size > _host.HOST_ELEMENTS:
        return None
    return w


def exclusive_host_value(tensor, replaced=False):
    """The NumPy array `tensor` holds where an in-place op may write into it: host data (not memory shared with the
    user, nor a view of other memory), writable, held by nothing but `tensor` (so no saved value, deferred op,
    device array, NumPy view, view or alias tensor nor user sees the write), outside the graph (grad mode off or
    `tensor` not requiring grad), forward-mode levels and operator logs; else None. With `replaced`, held by others
    too: the caller gives the tensor a new value in its place (which those others do not see, as a write into host
    data must not be seen). Without it, a view, or a tensor with views, writes into the memory they share where
    nothing else holds it (_shared_with_views). The caller writes only where ops run on the host and then calls
    `written`."""
    if DUAL_LEVELS.tangents is not None or OP_LOGS or WATCH.callback is not None:
        return None
    if tensor._views:  # views made of it (x[i] read in a loop) that all died hold no memory of it
        forget_dead_views(tensor)
    if tensor._view is not None or tensor._views:
        return None if replaced else _shared_with_views(tensor)
    v = tensor._v
    if type(v) is not np.ndarray or v.base is not None:
        return None
    if not _outside_graph(tensor):
        return None
    if replaced:
        return v
    return v if sys.getrefcount(v) == 3 and v.flags.writeable else None  # held by tensor._v, v and the argument


def _outside_graph(tensor):
    if tensor._requires_grad or tensor._node is not None or tensor._creation is not None:  # in_graph's first reads
        return not (in_graph(tensor) and GRAD_MODE.enabled)
    return True


def _shared_with_views(tensor):
    """The array a write into `tensor` (a view, or a base with views) goes into where its base's host array is held by
    the base and by its live views' arrays alone, each a NumPy view of it held by its view alone or the array itself
    (a detached alias: `.grad`, x.detach()), none of them in the graph: the views share the base's memory, as
    torch's do, so each sees the write (`c[i, j] += x`, `w[:, k] -= u`, `p.grad.zero_()`)."""
    root = tensor if tensor._view is None else tensor._view[0]
    base = root._v
    if type(base) is not np.ndarray or base.base is not None or not _outside_graph(root):
        return None
    views = 0
    for ref in root._views or ():
        view = ref()
        if view is None:
            continue
        array = view._v
        if type(array) is not np.ndarray or not _outside_graph(view):
            return None
        if array is not base and (array.base is not base or sys.getrefcount(array) != 3):  # view._v, array, argument
            return None
        views += 1
    array = view = None
    if sys.getrefcount(base) != 3 + views:  # root._v, base, the argument and each view's array
        return None
    target = tensor._v
    return target if (target is base or target.base is base) and target.flags.writeable else None


def written(tensor, held):
    """After a write into `held`, the host array of `tensor` (exclusive_host_value's): its arrays and its views' hold
    new values, which no op has read yet (_host.read_before), and its version moves on."""
    rewritten(id(held), None)
    root = tensor if tensor._view is None else tensor._view[0]
    if root._views:
        rewritten(id(root._v), None)
        for ref in root._views:
            view = ref()
            if view is not None:
                rewritten(id(view._v), None)
    tensor._counter.value += 1


def _host_value(tensor, views=False):
    """`tensor`'s host data where a front computes with it: a NumPy array of a float dtype NumPy computes as the
    kernel (float32, float64), of at most HOST_ELEMENTS, the tensor outside the graph; else None. With `views`, a
    view's array too (an elementwise front only reads it); without, none that is a view of other memory (a front that
    gives the array itself to a tensor, or hands it to BLAS, which may sum a strided one in another order)."""
    v = tensor._v
    if type(v) is not np.ndarray or v.dtype not in HOST_FLOATS or v.size > _host.HOST_ELEMENTS:
        return None
    if v.base is not None and not views:
        return None
    return v if _outside_graph(tensor) else None


def binary(forms, full):
    """The method `full` (self.op(other), self op other; other op self for a commutative op's reflected operator,
    which the full path also computes as self op other) with a lean front computing the op by its row's ufuncs
    `forms` (with a Tensor operand, with a number) into a new Tensor."""
    tensor_form, number_form = forms

    def method(*args, **kwargs):
        if len(args) == 2 and not kwargs and not (PROFILING.on or OP_LOGS or DUAL_LEVELS.tangents is not None):
            v = _host_value(args[0], views=True)
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
            v = _host_value(args[0], views=True)
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


def product(inner, general, full, vectors_only=False):
    """The method `full` (self.dot(other), or self.matmul(other) and self @ other) with a lean front computing the
    product of host data of one float dtype by its row's NumPy function: `inner` for two vectors of one size (the
    dot product's own row), `general` otherwise (NumPy's matmul accepts the shapes torch's does; where it refuses
    them the full path gives torch's error). `vectors_only`: dot, which takes only two vectors."""

    def method(*args, **kwargs):
        if len(args) == 2 and not kwargs and not (PROFILING.on or OP_LOGS or DUAL_LEVELS.tangents is not None):
            a = _host_value(args[0]) if not AUTOCAST.ever else None  # an autocast region may cast the operands
            b = None if a is None or not isinstance(args[1], Tensor) else _host_value(args[1])
            vectors = b is not None and a.ndim == b.ndim == 1
            if b is not None and b.dtype == a.dtype and (vectors and a.shape == b.shape or not vectors_only):
                if outside_every_trace() and cpu_device_set() is not None:
                    token = ignore_float_errors()
                    try:
                        out = np.asarray(inner(a, b) if vectors else general(a, b))
                    except ValueError:  # shapes that do not match: the full path says so in torch's words
                        out = None
                    finally:
                        restore_float_errors(token)
                    if out is not None:
                        return Tensor._wrap(out)
        return full(*args, **kwargs)

    method.__name__, method.__qualname__, method.__doc__ = full.__name__, full.__qualname__, full.__doc__
    return method


def total(form, full):
    """Tensor.sum (`full`) with a lean front for x.sum() of host data of a float dtype (which it sums in): `form`,
    the NumPy reduction the full path's host form runs."""

    def sum(*args, **kwargs):  # noqa: A001  (torch's name)
        if len(args) == 1 and not kwargs and not (PROFILING.on or OP_LOGS or DUAL_LEVELS.tangents is not None):
            v = _host_value(args[0])
            if v is not None and outside_every_trace() and cpu_device_set() is not None:
                token = ignore_float_errors()
                try:
                    out = form(v)
                finally:
                    restore_float_errors(token)
                return Tensor._wrap(out)
        return full(*args, **kwargs)

    sum.__doc__ = full.__doc__
    return sum


def in_place(forms, full, sign=None):
    """The in-place method `full` (self.op_(other)) with a lean front computing the op by its row's ufuncs `forms`
    (with a Tensor operand, with a number) into the tensor's memory; for add_ and sub_ (`sign` 1 and -1) with an
    alpha keyword too (_scaled)."""
    tensor_form, number_form = forms

    def method(*args, **kwargs):
        if len(args) == 2 and not (GUARDING.count and guards_captures()):
            if kwargs:
                done = _scaled(sign, *args, kwargs) if sign is not None else None
                return done if done is not None else full(*args, **kwargs)
            self, other = args
            held = exclusive_host_value(self)
            if held is not None and held.dtype in HOST_FLOATS and held.size <= _host.HOST_ELEMENTS:
                value = _operand(other, held.dtype)
                if value is not None and outside_every_trace() and cpu_device_set() is not None:
                    token = ignore_float_errors()
                    try:
                        if type(value) is np.ndarray:  # of the tensor's dtype
                            tensor_form(held, value, out=held)
                        else:  # a number cast to the dtype, as the kernel casts it
                            number_form(held, value, out=held, dtype=held.dtype)
                    except ValueError:  # shapes that do not broadcast into the tensor: the full path says so
                        return full(*args, **kwargs)
                    finally:
                        restore_float_errors(token)
                    written(self, held)
                    return self
        return full(*args, **kwargs)

    method.__name__, method.__qualname__, method.__doc__ = full.__name__, full.__qualname__, full.__doc__
    return method


def _scaled(sign, self, other, kwargs):
    """self.add_(other, alpha=a) (`sign` 1; sub_: -1; `kwargs` {"alpha": a}) where a is a float other than 1 (or a
    one-element Tensor of one on the host: CG's step size) and `other` a Tensor of the tensor's dtype and shape:
    self + sign * a * other rounded once (the host form of its row, scaled_sum) becomes the tensor's value, and self
    is returned; else None (the full path takes the call)."""
    alpha = kwargs.get("alpha") if len(kwargs) == 1 else None
    alpha = alpha_number(alpha) if isinstance(alpha, Tensor) else alpha
    if type(alpha) is not float or alpha == 1:
        return None
    held = exclusive_host_value(self, replaced=True)
    if held is None or held.dtype not in HOST_FLOATS or held.size > _host.HOST_ELEMENTS:
        return None
    if held.dtype == np.float32 and _FLOAT32_MAX < abs(alpha) < math.inf:
        return None  # an alpha float32 cannot hold: the full path's error
    value = _operand(other, held.dtype)
    # an operand that broadcasts the tensor: the full path's error
    if type(value) is not np.ndarray or value.shape != held.shape or not outside_every_trace():
        return None
    if cpu_device_set() is None:
        return None
    token = ignore_float_errors()
    try:
        self._v = scaled_sum_host(held, value, sign * alpha)
    finally:
        restore_float_errors(token)
    self._counter.value += 1
    return self


def zero(full):
    """Tensor.zero_ (`full`) with a lean front filling the tensor's memory with zeros."""

    def zero_(*args, **kwargs):
        if len(args) == 1 and not kwargs and not (GUARDING.count and guards_captures()):
            (self,) = args
            held = exclusive_host_value(self)
            if held is not None and outside_every_trace() and cpu_device_set() is not None:
                held.fill(0)
                written(self, held)
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


_NUMBERS = (int, float, bool)
_NATIVE_KINDS = "fiub"  # NumPy's own bool, int, unsigned and float dtypes, whose assignment casts as torch's copy


def _basic(index):
    """Whether `index` is basic indexing torch and NumPy read alike: ints, Ellipsis and slices of int or None bounds
    and a positive step (torch refuses others), not bools, tensors nor None."""
    for i in index if type(index) is tuple else (index,):
        if type(i) is slice:
            if not all([b is None or type(b) is int for b in (i.start, i.stop)]):
                return False
            if not (i.step is None or type(i.step) is int and i.step > 0):
                return False
        elif type(i) is not int and i is not Ellipsis:
            return False
    return True


def assign(full):
    """Tensor.__setitem__ (`full`) with a lean front for basic indexing (ints, slices, Ellipsis) of host data by a
    Python number, or by host data of the tensor's dtype (a view's too): NumPy's assignment into the tensor's
    memory, which casts a number as torch's fill does and broadcasts a value as torch's copy does (leading ones
    dropped). Where NumPy refuses (an index out of range, a value that does not fit), the full path says so in
    torch's words."""

    def __setitem__(self, index, value):
        if _basic(index) and not (GUARDING.count and guards_captures()):
            held = exclusive_host_value(self)
            if held is not None and held.dtype.kind in _NATIVE_KINDS and outside_every_trace() and cpu_device_set():
                kind = type(value)
                if kind in _NUMBERS and (kind is not float or held.dtype.kind == "f"):
                    source = value
                elif isinstance(value, Tensor) and _outside_graph(value):  # read as it is (NumPy copies an overlap)
                    source = value._v if type(value._v) is np.ndarray and value._v.dtype == held.dtype else None
                else:
                    source = None
                if source is not None:
                    try:
                        held[index] = source
                    except (IndexError, ValueError, OverflowError, TypeError):
                        return full(self, index, value)
                    written(self, held)
                    return None
        return full(self, index, value)

    __setitem__.__doc__ = full.__doc__
    return __setitem__


def install(tensor, methods):
    """The fronts on the Tensor class `tensor`, each before the method it fronts; `methods`: the op functions the
    methods were made from, by name (a unary op's front goes where its method is that op)."""
    from . import elementwise, linalg, reduction

    for names, row in [
        (("__add__", "__radd__", "add"), elementwise._add),
        (("__sub__", "sub"), elementwise._sub),
        (("__mul__", "__rmul__", "mul"), elementwise._mul),
        (("__truediv__", "div"), elementwise._true_div),
    ]:
        for name in names:
            setattr(tensor, name, binary(row.host_ufuncs, getattr(tensor, name)))
    for name, row in elementwise.UNARY.items():
        if row.host_numpy is not None and methods.get(name) is row:
            setattr(tensor, name, unary(*row.host_numpy, getattr(tensor, name)))
    inner, general = linalg.PRODUCTS["DotBackward0"].numpy, linalg.PRODUCTS["MmBackward0"].numpy
    tensor.dot = product(inner, general, tensor.dot, vectors_only=True)
    for name in ("matmul", "__matmul__"):
        setattr(tensor, name, product(inner, general, getattr(tensor, name)))
    tensor.sum = total(reduction.sum_all_host, tensor.sum)
    for op, row in [("add", elementwise._add), ("sub", elementwise._sub), ("mul", elementwise._mul)]:
        for name in (f"{op}_", f"__i{op}__"):
            sign = {"add_": 1, "sub_": -1}.get(name)
            setattr(tensor, name, in_place(row.host_ufuncs, getattr(tensor, name), sign))
    for name in ("div_", "__itruediv__"):
        setattr(tensor, name, in_place(elementwise._true_div.host_ufuncs, getattr(tensor, name)))
    tensor.zero_, tensor.copy_ = zero(tensor.zero_), copy(tensor.copy_)
    tensor.__setitem__ = assign(tensor.__setitem__)
