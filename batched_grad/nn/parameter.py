"""Parameter: a leaf Tensor that requires grad and that Module.__setattr__ registers."""

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
