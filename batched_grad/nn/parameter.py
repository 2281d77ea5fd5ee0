"""Parameter and Buffer: the Tensors that Module.__setattr__ registers as a parameter or as a buffer."""

from .._factories import empty
from .._tensor import REQUIRES_GRAD_DTYPE, Tensor


class Parameter(Tensor):
    """A Tensor that is a module parameter: a leaf (requiring grad by default) sharing `data`'s values."""

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): argument 'data' must be a Tensor, not {type(data).__name__}")
        param = cls._wrap(data._value)
        param._set_requires_grad(bool(requires_grad), REQUIRES_GRAD_DTYPE)
        return param

    def __deepcopy__(self, memo):
        """A new Parameter with the same values and requires_grad; as torch's, without the gradient."""
        copied = type(self)._wrap(self._value, requires_grad=self._requires_grad)
        memo[id(self)] = copied
        return copied

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__


class _BufferMeta(type):
    """isinstance(t, Buffer) holds for any Tensor that Buffer() marked, as torch's (Buffer returns a plain Tensor)."""

    def __instancecheck__(cls, instance):
        if cls is Buffer and isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False):
            return True
        return super().__instancecheck__(instance)


class Buffer(Tensor, metaclass=_BufferMeta):
    """A Tensor that is module state but not a parameter (BatchNorm's running_mean, say): assigned as a Module
    attribute it is registered as a buffer, in the state_dict unless `persistent` is False. As torch's, Buffer(data)
    returns `data` detached (a plain Tensor, requiring grad as `data` does) marked as a buffer."""

    __slots__ = ()

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer(): argument 'data' must be a Tensor, not {type(data).__name__}")
        marked = data.detach().requires_grad_(data.requires_grad)
        marked.persistent = persistent
        marked._is_buffer = True
        return marked
