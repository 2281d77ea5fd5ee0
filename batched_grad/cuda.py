"""batched_grad.cuda: whether JAX has a GPU backend here, and how many devices it has."""

from ._devices import jax_devices


def is_available():
    """Whether JAX has a GPU backend in this process (then tensors can move to 'cuda')."""
    return bool(jax_devices("cuda"))


def device_count():
    """The number of GPU devices JAX has (0 without a GPU backend)."""
    return len(jax_devices("cuda"))


__all__ = ["device_count", "is_available"]
