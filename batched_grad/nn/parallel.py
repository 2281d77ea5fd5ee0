"""torch.nn.parallel's DataParallel and data_parallel for the machines batched_grad runs on: without a GPU a
DataParallel calls its module as it is (as torch's does without an accelerator; data_parallel raises torch's
error); with one GPU the module and the inputs are moved to it. Splitting a batch over several GPUs (replicate,
scatter, gather) is not done here. DistributedDataParallel is the name training scripts import and test models
against; wrapping a module needs a process group, which batched_grad never has."""

from .. import cuda
from .._tensor import Tensor, device
from ..distributed import _NOT_INITIALIZED
from .module import Module

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]


def _index(d):
    """A GPU index from an int, a 'cuda:i' string or a device."""
    if isinstance(d, int) and not isinstance(d, bool):
        return d
    d = device(d)
    if d.type != "cuda":
        raise ValueError(f"DataParallel: expected a cuda device or index in device_ids, but got {d}")
    return 0 if d.index is None else d.index


def _devices(device_ids, output_device):
    """(the GPU indices, the output index), torch's defaults: every GPU, the output on the first. None where there
    is no GPU (the module is then called as it is)."""
    if not cuda.is_available():
        return None
    ids = list(range(cuda.device_count())) if device_ids is None else [_index(d) for d in device_ids]
    if len(ids) > 1:
        raise NotImplementedError(
            f"DataParallel over several GPUs (device_ids={ids}) is not supported by batched_grad: it runs the "
            "module on one GPU; pass device_ids=[<one index>]"
        )
    return ids, _index(ids[0] if output_device is None else output_device)


def _moved(value, to):
    """`value` with its tensors (in tuples, lists and dicts) moved to device `to`, as torch's scatter onto one GPU."""
    if isinstance(value, Tensor):
        return value.to(to)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_moved(v, to) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_moved(v, to) for v in value)
    if isinstance(value, dict):
        return type(value)((k, _moved(v, to)) for k, v in value.items())
    return value


class DataParallel(Module):
    """`module` run on the machine's GPU (its parameters moved there), or as it is on a machine without one."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        devices = _devices(device_ids, output_device)
        if devices is None:
            self.module = module
            self.device_ids = []
            return
        self.dim = dim
        self.module = module
        self.device_ids, self.output_device = devices
        self.src_device_obj = device("cuda", self.device_ids[0])
        self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        for t in (*self.module.parameters(), *self.module.buffers()):
            if t.device != self.src_device_obj:
                raise RuntimeError(
                    "module must have its parameters and buffers "
                    f"on device {self.src_device_obj} (device_ids[0]) but found one of "
                    f"them on device: {t.device}"
                )
        return self.module(*_moved(inputs, self.src_device_obj), **_moved(kwargs, self.src_device_obj))


class DistributedDataParallel(Module):
    """For `isinstance(model, (DataParallel, DistributedDataParallel))` and imports: construction raises torch's
    error for a process without a default process group (there are no process groups here)."""

    def __init__(self, module, *args, **kwargs):
        raise ValueError(_NOT_INITIALIZED)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """module(*inputs, **module_kwargs) as DataParallel runs it on a GPU, without wrapping the module."""
    inputs = inputs if isinstance(inputs, tuple) else (inputs,) if inputs is not None else ()
    module_kwargs = {} if module_kwargs is None else module_kwargs
    devices = _devices(device_ids, output_device)
    if devices is None:  # torch's, without an accelerator
        raise RuntimeError("device type could not be determined")
    src = device("cuda", devices[0][0])
    return module(*_moved(inputs, src), **_moved(module_kwargs, src))
