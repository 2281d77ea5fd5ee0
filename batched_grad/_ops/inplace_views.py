"""torch's in-place view ops, which change a tensor's shape and keep its values: squeeze_, unsqueeze_, t_, transpose_
(swapdims_, swapaxes_); resize_ and resize_as_, which may also change its number of elements (new elements are
zeros, where torch leaves them uninitialized); and the deprecated out-of-place resize and resize_as.

The tensor keeps its identity, its version counter is bumped, and with grad mode on it takes the place of the view
op's result in the graph (SqueezeBackward4, TBackward1, ... as torch names them). A tensor that is a view stays a
view of its base; the views of a tensor that is none keep their values through the steps that undo the change.
Strides are not modelled: after t_() a tensor reports the strides of a contiguous one, where torch's are swapped."""

import math
import warnings

import jax.numpy as jnp
import numpy as np

from .._dual import tangent_of
from .._graph import _lock
from .._inference import is_inference
from .._inplace import DETACH, _view_value_jit
from .._int_args import sizes_also_by_keyword
from .._layout import is_contiguous, storage_offset
from .._tensor import Tensor, python_type_name
from .._write_watch import before_write
from ._core import Op, apply
from .shape import (
    _PERMUTE,
    _RESHAPE,
    _SLICE,
    _permuted,
    _reshaped,
    _sizes,
    cat,
    check_multi_view,
    encode_index,
    matrix_transposed_axes,
    reshape,
    squeezed_shape,
    transposed_axes,
    unsqueezed_shape,
)

RESIZE_REQUIRES_GRAD = "cannot resize variables that require grad"


def _reshape_step(shape):
    return (_RESHAPE["ViewBackward0"], (("shape", tuple(shape)),), 0)


def _undo_permute(static, shape):
    axes = dict(static)["axes"]
    return ((_PERMUTE["PermuteBackward0"], (("axes", tuple(np.argsort(axes).tolist())),), 0),)


# how the last step of a view chain is undone, given the shape before it
_UNDO = {
    "reshape": lambda static, shape: (_reshape_step(shape),),
    "permute": _undo_permute,
}


def _in_place_view(self, make, undo=None):
    """`self` made, in place, into the view `make(self)` of itself; `undo(static, shape)` gives the steps back
    from it (by default those of its view op's kind), or None where there are none."""
    self._check_inplace()
    if self._view is not None:
        check_multi_view(self._view[0], self._view[1], self.requires_grad)
    shape = tuple(self.shape)
    result = make(self)
    op, static, _ = result._view[1][-1]
    tangent = tangent_of(self)
    if tangent is not None:  # as torch's, a dual tensor's tangent is made the same view of itself, in place
        _in_place_view(tangent, make, undo)
    return self._assign_view(result, (undo or _UNDO[op.name])(static, shape))


def squeeze_(self, dim=None):
    """Drop size-1 dimensions (all, or those in `dim`) of this tensor, in place."""
    name = "SqueezeBackward3" if dim is None else "SqueezeBackward4" if isinstance(dim, int) else "SqueezeBackward5"
    return _in_place_view(self, lambda t: _reshaped(t, squeezed_shape(t, dim), name))


def unsqueeze_(self, dim):
    """Insert a size-1 dimension at `dim` of this tensor, in place."""
    return _in_place_view(self, lambda t: _reshaped(t, unsqueezed_shape(t, dim), "UnsqueezeBackward1"))


def transpose_(self, dim0, dim1):
    """Swap dimensions `dim0` and `dim1` of this tensor, in place."""
    return _in_place_view(self, lambda t: _permuted(t, transposed_axes(t, dim0, dim1), "TransposeBackward1"))


def swapaxes_(self, axis0, axis1):
    """Swap dimensions `axis0` and `axis1` of this tensor, in place (transpose_)."""
    return transpose_(self, axis0, axis1)


def t_(self):
    """Transpose this matrix in place (0-D and 1-D tensors stay as they are)."""
    return _in_place_view(self, lambda t: _permuted(t, matrix_transposed_axes(t, "t_()"), "TBackward1"))


def reshape_in_place(self, shape):
    """Give this tensor the shape `shape` (of as many elements), in place, its elements in row-major order: how
    functionalize gives an input the shape its function gave it in place (torch's as_strided_)."""
    return _in_place_view(self, lambda t: _reshaped(t, shape, "AsStridedBackward0"))


# ---- resize --------------------------------------------------------------------------------------------------------


def _resize_shape(sizes):
    try:
        shape = _sizes(sizes)
    except TypeError:
        kind = python_type_name(sizes[0] if len(sizes) == 1 else sizes)
        raise TypeError(f"resize_(): argument 'size' (position 1) must be tuple of ints, not {kind}") from None
    if any(n < 0 for n in shape):
        raise RuntimeError("numel: integer multiplication overflow")
    return shape


def _window(flat, start, length):
    """`length` elements of the 1-D `flat` from `start`, zeros past its end."""
    part = flat[start : start + length]
    missing = length - part.numel()
    return cat([part, flat.new_zeros(missing)]) if missing else part


@sizes_also_by_keyword("size")
def resize_(self, *sizes, memory_format=None):
    """Give this tensor the shape `sizes`, in place: its elements in row-major order from where it starts in its
    storage, as many as the new shape holds (zeros past the old ones). Refused for a tensor that requires grad (not
    for an inference tensor, which torch's autograd does not see)."""
    if self.requires_grad and not is_inference(self):
        raise RuntimeError(RESIZE_REQUIRES_GRAD)
    shape = _resize_shape(sizes)
    if shape == tuple(self.shape):
        return self
    if math.prod(shape) == self.numel() and is_contiguous(self):
        return self._assign_view(_reshaped(self, shape), (_reshape_step(self.shape),))
    before_write(self)
    (_resize_view if self._view is not None else _resize_root)(self, shape)
    self._counter.value += 1
    return self


def _resize_root(self, shape):
    """A tensor that is no view, resized: its views keep their elements if it grew, and lose their link if it
    shrank (torch keeps the storage: here the tensor's value is its storage)."""
    old, n, m = tuple(self.shape), self.numel(), math.prod(shape)
    self._value = reshape(_window(Tensor._wrap(self._value).reshape(n), 0, m), shape)._value
    undo = (_reshape_step((m,)), (_SLICE, (("index", encode_index((slice(0, n, None),))),), 0), _reshape_step(old))
    for ref in self._views or ():
        view = ref()
        if view is not None:
            if m > n:
                view._view = (view._view[0], undo + view._view[1])
            else:
                view._view = None
    if m < n:
        self._views = None


def _resize_view(self, shape):
    """A view resized: the elements of its base's storage from its offset, while they last; past them it becomes a
    tensor of its own (torch would grow the base's storage)."""
    root, chain = self._view
    offset, m, size = storage_offset(self), math.prod(shape), root.numel()
    if offset + m <= size:
        steps = (
            _reshape_step((size,)),
            (_SLICE, (("index", encode_index((slice(offset, offset + m, None),))),), 0),
            _reshape_step(shape),
        )
        detached = (DETACH,) if DETACH in chain else ()
        self._view = (root, detached + steps)
        self._value = _view_value_jit(root._value, steps)
        return
    flat = Tensor._wrap(root._value.reshape(-1))
    self._value = reshape(_window(flat, offset, m), shape)._value
    self._view = None
    with _lock:
        root._views = [r for r in root._views if r() is not self]


def resize_as_(self, the_template, *, memory_format=None):
    """Give this tensor the shape of `the_template`, in place (resize_)."""
    return resize_(self, the_template.shape)


_RESIZE = Op("resize", lambda a, *, shape: jnp.reshape(a, shape), linear=True, backward_name="ResizeBackward")


def _resized(self, shape):
    shape = _sizes(shape)
    m = math.prod(shape)
    if m != self.numel():
        raise RuntimeError(
            f"requested resize to {'x'.join(map(str, shape))} ({m} elements in total), but the given tensor has a "
            f"size of {'x'.join(map(str, self.shape))} ({self.numel()} elements). autograd's resize can only change "
            "the shape of a given tensor, while preserving the number of elements. "
        )
    return apply(_RESIZE, [self], shape=shape)


def resize(self, *sizes):
    """This tensor's elements in the shape `sizes` (deprecated in torch: use reshape)."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    return _resized(self, sizes)


def resize_as(self, tensor):
    """This tensor's elements in the shape of `tensor` (deprecated in torch: use reshape_as)."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    return _resized(self, tensor.shape)


METHODS = {
    "squeeze_": squeeze_,
    "unsqueeze_": unsqueeze_,
    "transpose_": transpose_,
    "swapaxes_": swapaxes_,
    "t_": t_,
    "resize_": resize_,
    "resize_as_": resize_as_,
}
OUT_OF_PLACE = {"resize": resize, "resize_as": resize_as}
FUNCTIONS = {"resize_as_": resize_as_}
