"""The names of torch._C that user code of Tensor subclasses reaches for: the switches of the __torch_function__
protocol (_subclass.py). The rest of torch._C is torch's private machinery, not provided."""

from ._grad_mode import is_grad_enabled
from ._subclass import DisableTorchFunction, DisableTorchFunctionSubclass
from ._subclass import disabled_torch_function_impl as _disabled_torch_function_impl

__all__ = ["DisableTorchFunction", "DisableTorchFunctionSubclass", "_disabled_torch_function_impl", "is_grad_enabled"]
