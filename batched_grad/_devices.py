"""torch's device names on JAX's devices: cpu is JAX's CPU backend, cuda:i the i-th device of its GPU backend; meta
(shapes and dtypes without values) is on none."""

import functools

import jax

from ._tensor import _default_device, default_device, device

_PLATFORMS = {"cpu": "cpu", "cuda": "gpu"}
NO_CUDA = "CUDA is not available: JAX has no GPU backend in this process (batched_grad.cuda.is_available() is False)"


@functools.cache
def jax_devices(kind):
    """JAX's devices for the torch device type `kind` ('cpu' or 'cuda'); () when JAX has no such backend."""
    try:
        return tuple(jax.devices(_PLATFORMS[kind]))
    except RuntimeError:
        return ()


def only_cpu():
    """Whether every device JAX has here is a CPU (then every tensor is on the cpu)."""
    return not jax_devices("cuda")


def resolve(spec):
    """(torch device, JAX device) for a device given as torch takes one: a string ('cpu', 'cuda:1'), a
    batched_grad.device, or an int (an accelerator's index); torch's errors for what this process lacks. The meta
    device has no JAX device (None)."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        if only_cpu():
            raise RuntimeError("Cannot access accelerator device when none is available.")
        spec = device("cuda", spec)
    if not isinstance(spec, (str, device)):
        raise TypeError(
            f"expected a device (a string such as 'cpu' or a batched_grad.device), but got {type(spec).__name__}"
        )
    d = device(spec)
    if d.type == "cpu":
        return device("cpu"), jax_devices("cpu")[0]
    if d.type == "meta":  # shapes and dtypes without values: no JAX device holds them
        return device("meta"), None
    if d.type != "cuda":
        raise RuntimeError(
            f"batched_grad is not linked with support for {d.type} devices: tensors live on JAX's "
            "devices, the cpu and, where JAX has a GPU backend, cuda, or on meta (without values)"
        )
    gpus = jax_devices("cuda")
    if not gpus:
        raise AssertionError(NO_CUDA)
    index = d.index or 0
    if index >= len(gpus):
        raise RuntimeError(f"CUDA error: invalid device ordinal (cuda:{index}; {len(gpus)} CUDA devices here)")
    return device("cuda", index), gpus[index]


def get_default_device():
    """The device new tensors are made on: set_default_device's or the running `with device(...)` block's, else
    the device of JAX's default backend (cuda:0 where it is a GPU, else the cpu)."""
    chosen = default_device()
    if chosen is not None:
        return chosen
    return device("cpu") if jax.default_backend() == "cpu" else device("cuda", 0)


def set_default_device(spec):
    """torch.set_default_device: the device of tensors the factories make when given none (None: back to JAX's
    default). The meta device makes tensors without values; cuda needs a GPU when a tensor is made, as torch's."""
    if spec is not None:
        if isinstance(spec, int) and not isinstance(spec, bool):
            spec = device("cuda", spec)
        elif not isinstance(spec, (str, device)):
            raise TypeError(f"set_default_device(): expected a device, a string or None, but got {type(spec).__name__}")
        spec = device(spec)
    _default_device[0] = spec
