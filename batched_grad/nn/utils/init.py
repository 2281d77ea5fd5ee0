"""torch.nn.utils.init: skip_init, a module made without running its parameters' initialization."""

import inspect

from ..module import Module


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) with its parameters and buffers left uninitialized (made on the meta device, then
    given fresh storage on `device`, "cpu" by default); the class must take a `device` argument."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    device = kwargs.pop("device", "cpu")
    return module_cls(*args, **kwargs, device="meta").to_empty(device=device)
