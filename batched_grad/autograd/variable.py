"""Variable: torch's legacy wrapper, which today makes a Tensor."""

import warnings

import numpy as np

from .._dtypes import get_default_dtype
from .._graph_task import ExecutionEngine
from .._tensor import REQUIRES_GRAD_DTYPE, Tensor, python_type_name

_NO_DATA = object()


class _VariableMeta(type):
    def __instancecheck__(cls, instance):
        return isinstance(instance, Tensor)


class Variable(metaclass=_VariableMeta):
    """Variable(data, requires_grad=False): a new leaf sharing `data`'s values and version counter (as
    data.detach()), requiring grad if asked; every Tensor is an instance of Variable, as in torch."""

    _execution_engine = ExecutionEngine()

    def __new__(cls, data=_NO_DATA, requires_grad=False, volatile=False):
        if volatile:
            warnings.warn(
                "volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                UserWarning,
                stacklevel=2,
            )
        if data is _NO_DATA or data is None:  # torch makes an empty tensor for both
            t = Tensor._wrap(np.zeros((0,), get_default_dtype().np))
        elif not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {python_type_name(data)}")
        else:
            t = data.detach()
        if requires_grad:
            t._set_requires_grad(True, REQUIRES_GRAD_DTYPE)
        return t
