"""Tensor conveniences: the new_* factories, size and type queries (ndimension, nelement, nbytes, itemsize,
is_signed, is_nonzero, is_same_size, is_inference, is_conj, ...), the remaining dtype conversions, sum_to_size,
fill_diagonal_, angle, complex and polar, view_as_real/view_as_complex, and torch's type utilities (promote_types,
result_type, can_cast, typename)."""

import jax
import jax.numpy as jnp

from .. import _dtypes
from .._autocast import autocast_policy
from .._factories import _NO_SIZE, COPY_CONSTRUCT_WARNING, _tuple_size, _varargs_size, empty, full, tensor
from .._inference import is_inference as inference_tensor
from .._int_args import sizes_also_by_keyword
from .._layout_types import takes_layout
from .._meta import device_for
from .._tensor import Tensor, python_type_name, type_name, warn_at_caller
from ._core import Op, apply
from ._fused_backward import FUSED_ZEROS
from .complex_parts import is_conj, is_neg, resolve_conj, resolve_neg, view_as_complex, view_as_real
from .placement import _never, to
from .rows_like import rows_like
from .shape import reshape


@takes_layout
def new_full(self, size, fill_value, *, dtype=None, requires_grad=False, device=None):
    """A tensor of `size` filled with fill_value, with this tensor's dtype and device unless `dtype` or `device`."""

    made = full(_tuple_size("new_full", size), fill_value, dtype=dtype or self.dtype, device=device_for(device, self))
    return rows_like(made, self, requires_grad)


@takes_layout
def new_empty(self, *args, size=_NO_SIZE, dtype=None, requires_grad=False, device=None):
    """A tensor of `size` (its values unspecified: zeros here), with this tensor's dtype and device unless `dtype` or
    `device`."""

    shape = _varargs_size("new_empty", args, size)
    return rows_like(empty(shape, dtype=dtype or self.dtype, device=device_for(device, self)), self, requires_grad)


@takes_layout
def new_tensor(self, data, dtype=None, requires_grad=False, device=None):
    """tensor(data) with this tensor's dtype and device unless `dtype` or `device` (a copy, outside the graph)."""

    if isinstance(data, Tensor):
        warn_at_caller(COPY_CONSTRUCT_WARNING.replace("torch.tensor(", "tensor.new_tensor("))
        data = data.detach().numpy()
    return tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad, device=device_for(device, self))


def ndimension(self):
    """The number of dimensions (dim())."""
    return self.ndim


def nelement(self):
    """The number of elements (numel())."""
    return self.numel()


def _nbytes(self):
    """The size of the elements in bytes."""
    return self.numel() * self.element_size()


def _itemsize(self):
    """The size of one element in bytes."""
    return self.element_size()


def is_signed(self):
    """Whether the dtype holds negative values."""
    return self.dtype.is_signed


def is_nonzero(self):
    """The truth of a one-element tensor."""
    if self.numel() == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if self.numel() > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(self.item())


def is_inference(input):  # noqa: A002  (torch's name)
    """Whether the tensor is an inference tensor: made in inference mode (a view of a normal tensor made there is
    not), or a view of one."""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_inference(): argument 'input' (position 1) must be Tensor, not {python_type_name(input)}")
    return inference_tensor(input)


def is_same_size(self, other):
    """Whether the two tensors have the same shape."""
    return tuple(self.shape) == tuple(other.shape)


def _conversion(name, dtype):
    def method(self, memory_format=None):
        return to(self, dtype)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"This tensor as {dtype} (self.to({dtype}))."
    return method


@sizes_also_by_keyword("size")
def sum_to_size(self, *size):
    """This tensor summed over the dims it was broadcast along to reach `size` (which must expand to its shape)."""
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    lead = self.ndim - len(size)
    if lead < 0 or any(s not in (1, n) for s, n in zip(size, self.shape[lead:])):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(self.shape)}}}.")
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size) if s == 1 and self.shape[lead + i] != 1)
    out = self.sum(dims, keepdim=True) if dims else self
    return reshape(out, size) if lead else out


def _fill_diagonal(a, value, *, wrap):
    if a.ndim == 2 and wrap:
        # torch's wrapped diagonal of a tall matrix restarts one row below the end of the previous one: every
        # (columns + 1)-th element of the flattened matrix
        flat = a.reshape(-1)
        return flat.at[jnp.arange(0, flat.size, a.shape[1] + 1)].set(value.astype(a.dtype)).reshape(a.shape)
    return a.at[(jnp.arange(min(a.shape)),) * a.ndim].set(value.astype(a.dtype))


_FILL_DIAGONAL = Op("fill_diagonal_", _fill_diagonal, linear=True)


def fill_diagonal_(self, fill_value, wrap=False):
    """Write fill_value on the main diagonal, in place (dims all equal beyond 2-D; `wrap` continues a tall
    matrix's diagonal every n + 1 rows)."""
    if self.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if self.ndim > 2 and len(set(self.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    return self._assign(apply(_FILL_DIAGONAL, [self, fill_value], wrap=bool(wrap)), "fill_diagonal_")


# ---- complex numbers ----------------------------------------------------------------------------------------------
def _angle(a, *, dtype):
    if jnp.iscomplexobj(a):
        # atan2(imag, real) at the zeros too (+-0 or +-pi by their signs), where torch's derivative is 0 (the inner
        # `where` keeps nan out of it)
        zero = a == 0
        at_zero = jax.lax.stop_gradient(jnp.arctan2(a.imag, a.real))
        return jnp.where(zero, at_zero, jnp.angle(jnp.where(zero, 1, a))).astype(dtype)
    # a real's angle is pi below 0 and 0 elsewhere (-0.0 included), nan at nan; constant: torch's derivative is 0
    return jax.lax.stop_gradient(jnp.where(jnp.isnan(a), a, jnp.where(a < 0, jnp.pi, 0))).astype(dtype)


_ANGLE = Op("angle", _angle, diagonal=True)
_COMPLEX = Op("complex", lambda re, im: jax_complex(re, im))
# torch's derivative reads the result (and so both inputs)
_POLAR = Op("polar", lambda r, theta: jax_complex(r * jnp.cos(theta), r * jnp.sin(theta)), fused=FUSED_ZEROS)


def jax_complex(re, im):
    return re + 1j * im


def angle(input):
    """The argument of each element (0 or pi for real ones, by their sign)."""
    d = input.dtype if input.dtype.is_floating_point else _dtypes.float_result(input.dtype)
    if input.dtype.is_complex:
        d = _dtypes.float64 if input.dtype is _dtypes.complex128 else _dtypes.float32
    return apply(_ANGLE, [input], dtype=d.np)


def _complex_pair(name, a, b):
    for _argument, t in (("real", a), ("imag", b)) if name == "complex" else (("abs", a), ("angle", b)):
        if not t.dtype.is_floating_point or t.dtype in (_dtypes.bfloat16,):
            raise RuntimeError(
                f"Expected both inputs to be Half, Float or Double tensors but got "
                f"{a.dtype.type_name} and {b.dtype.type_name}"
            )
    if a.dtype is not b.dtype:
        raise RuntimeError(
            f"Expected object of scalar type {a.dtype.type_name} but got scalar type "
            f"{b.dtype.type_name} for second argument"
        )


def complex(real, imag):  # noqa: A001  (torch's name)
    """real + i imag, elementwise (float inputs of one dtype)."""
    _complex_pair("complex", real, imag)
    return apply(_COMPLEX, [real, imag])


@autocast_policy("fp32")
def polar(abs, angle):  # noqa: A002
    """abs * (cos(angle) + i sin(angle)), elementwise."""
    _complex_pair("polar", abs, angle)
    return apply(_POLAR, [abs, angle])


# ---- torch's type utilities -------------------------------------------------------------------------------------
def promote_types(type1, type2):
    """The dtype both promote to."""
    return _dtypes.promote_types(type1, type2)


def result_type(tensor1, tensor2):
    """The dtype of an arithmetic op on the two (tensors or numbers), as torch's type promotion gives it."""
    return _dtypes.result_type(tensor1, tensor2)


def can_cast(from_, to):
    """Whether torch's casting rules allow from_ -> to (no cast to a lower category: float to int, complex to
    float, non-bool to bool)."""
    return _dtypes.category(from_) <= _dtypes.category(to) or from_ is to


def typename(obj):
    """The type's name as torch gives it: 'torch.FloatTensor' for a tensor, the class name otherwise."""
    if isinstance(obj, Tensor):
        return type_name(obj.dtype.np)
    module = getattr(type(obj), "__module__", "")
    name = type(obj).__qualname__
    return name if module in ("builtins", "__builtin__", None) else f"{module}.{name}"


_CONVERSIONS = {
    "byte": _dtypes.uint8,
    "char": _dtypes.int8,
    "short": _dtypes.int16,
    "bfloat16": _dtypes.bfloat16,
    "cfloat": _dtypes.complex64,
    "cdouble": _dtypes.complex128,
}
METHODS = {
    f.__name__: f
    for f in (
        new_full,
        new_empty,
        new_tensor,
        ndimension,
        nelement,
        is_signed,
        is_nonzero,
        is_same_size,
        is_inference,
        is_conj,
        is_neg,
        resolve_conj,
        resolve_neg,
        sum_to_size,
        fill_diagonal_,
        angle,
    )
}
METHODS.update({name: _conversion(name, d) for name, d in _CONVERSIONS.items()})
METHODS.update(
    nbytes=property(_nbytes),
    itemsize=property(_itemsize),
    is_cpu=property(lambda self: self.device.type == "cpu", doc="Whether the tensor is on the cpu."),
)
METHODS.update(
    {
        f"is_{name}": _never(name)
        for name in ("mps", "xla", "xpu", "ipu", "mtia", "maia", "vulkan", "mkldnn", "nested", "sparse_csr")
    }
)
FUNCTIONS = {
    f.__name__: f
    for f in (
        is_nonzero,
        is_same_size,
        is_inference,
        is_signed,
        is_conj,
        is_neg,
        resolve_conj,
        resolve_neg,
        angle,
        complex,
        polar,
        view_as_real,
        view_as_complex,
        promote_types,
        result_type,
        can_cast,
        typename,
    )
}
