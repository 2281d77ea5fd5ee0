"""Parameter and Buffer: the Tensors that Module.__setattr__ registers as a parameter or as a buffer; and the
placeholders of a lazy module's ones until its first forward (UninitializedParameter, UninitializedBuffer)."""

from .._devices import device, get_default_device
from .._factories import empty
from .._inference import counter_like
from .._subclass import disabled_torch_function_impl
from .._tensor import REQUIRES_GRAD_DTYPE, Tensor


class Parameter(Tensor):
    """A Tensor that is a module parameter: a leaf (requiring grad by default) sharing `data`'s values."""

    __slots__ = ()
    __torch_function__ = staticmethod(disabled_torch_function_impl)  # ops on it return plain Tensors

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): argument 'data' must be a Tensor, not {type(data).__name__}")
        param = Tensor._wrap.__func__(cls, data._value)
        param._counter = counter_like(data)
        param._set_requires_grad(bool(requires_grad), REQUIRES_GRAD_DTYPE)
        return param

    def __deepcopy__(self, memo):
        """A new Parameter with the same values and requires_grad; as torch's, without the gradient."""
        copied = Tensor._wrap.__func__(type(self), self._value, requires_grad=self._requires_grad)
        memo[id(self)] = copied
        return copied

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


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
    __torch_function__ = staticmethod(disabled_torch_function_impl)  # ops on it return plain Tensors

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer(): argument 'data' must be a Tensor, not {type(data).__name__}")
        marked = data.detach().requires_grad_(data.requires_grad)
        marked.persistent = persistent
        marked._is_buffer = True
        return marked


NO_SHAPE = (
    "Can't access the shape of an uninitialized parameter or buffer. This error usually happens in `load_state_dict` "
    "when trying to load an uninitialized parameter into an initialized one. Call `forward` to initialize the "
    "parameters before accessing their attributes."
)


class _Uninitialized:
    """What UninitializedParameter and UninitializedBuffer share: no shape until materialize() gives them values,
    turning them into cls_to_become."""

    __slots__ = ()
    cls_to_become = None

    def materialize(self, shape, device=None, dtype=None):
        """Give the placeholder values of `shape` (uninitialized: zeros here) on its device unless `device`, of its
        dtype unless `dtype`, and make it a cls_to_become (the same object)."""
        self.data = empty(shape, dtype=dtype or self.dtype, device=device or self.device)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(NO_SHAPE)

    @property
    def device(self):
        """The device its values will be made on (`materialize`)."""
        return self._target_device

    def converted(self, dtype, where=None):
        """The placeholder of `dtype` on `where` (None: its own), still a placeholder of this class: a lazy
        module's .to(), .double() or .cpu() before its first forward sets the dtype and device that forward gives
        its values, as there are no values yet to convert (torch's placeholders allow those conversions too)."""
        dtype, where = dtype or self.dtype, where or self.device
        if dtype is self.dtype and where == self.device:
            return self
        made = type(self)(self.requires_grad, device=where, dtype=dtype)
        if isinstance(self, UninitializedBuffer):
            made.persistent = self.persistent
        return made

    def share_memory_(self):
        raise RuntimeError(
            "Can't share memory on an uninitialized parameter or buffer. Call `forward` to initialize the parameters "
            "before calling `module.share_memory()`."
        )

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return type(self), (self.requires_grad, self.device)

    def __deepcopy__(self, memo):
        copied = type(self)(self.requires_grad, device=self.device, dtype=self.dtype)
        memo[id(self)] = copied
        return copied


def _placeholder(dtype):
    return empty(0, dtype=dtype, device="meta")


def _targeted(placeholder, where):
    """`placeholder`, to be made on the device `where` (None: the default device)."""
    placeholder._target_device = get_default_device() if where is None else device(where)
    return placeholder


class UninitializedParameter(_Uninitialized, Parameter):
    """A parameter whose shape is not known yet (a lazy module's, until its first forward)."""

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return _targeted(Parameter.__new__(cls, _placeholder(dtype), requires_grad), device)


class UninitializedBuffer(_Uninitialized, Tensor):
    """A buffer whose shape is not known yet (a lazy normalization's running statistics)."""

    __slots__ = ()
    __torch_function__ = staticmethod(disabled_torch_function_impl)  # ops on it return plain Tensors
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        buffer = cls._wrap(_placeholder(dtype)._value)
        if requires_grad:
            buffer._set_requires_grad(True, REQUIRES_GRAD_DTYPE)
        buffer.persistent = persistent
        return _targeted(buffer, device)


def is_lazy(t):
    return isinstance(t, _Uninitialized)
