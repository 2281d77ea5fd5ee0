"""torch.nn.attention's kernel choice for scaled_dot_product_attention: the SDPBackend names and the sdpa_kernel
context manager, which sets torch.backends.cuda's sdp switches (and their priority order) inside it and restores
them after, as torch's. XLA picks its own kernel, so the choice is recorded and readable, and changes no result."""

import contextlib
import enum

from ..backends import cuda as _cuda_backends


class SDPBackend(enum.IntEnum):
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    __str__ = enum.Enum.__str__  # SDPBackend.MATH, as torch's enum prints


# torch.backends.cuda's switch of each backend, in torch's order
_SWITCHES = {
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "mem_efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
    "overrideable": SDPBackend.OVERRIDEABLE,
}


def _enabled_backends(with_priority):
    backends = [backend for name, backend in _SWITCHES.items() if _cuda_backends.sdp_switches[name]]
    if with_priority:
        order = _cuda_backends.sdp_priority
        backends.sort(key=lambda backend: order.index(int(backend)))
    return backends


def _enable(backends, set_priority):
    for name, backend in _SWITCHES.items():
        _cuda_backends.sdp_switches[name] = backend in backends
    if set_priority:
        chosen = [int(backend) for backend in backends]
        _cuda_backends.sdp_priority[:] = chosen + [b for b in _cuda_backends.sdp_priority if b not in chosen]


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Only `backends` (an SDPBackend or a list of them; with set_priority, in that order of preference) enabled
    for scaled_dot_product_attention inside the block."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError(
            "Backend must be an instance of SDPBackend or a list of SDPBackend instances, "
            f"got {type(backends).__name__}"
        )
    backends = list(dict.fromkeys([backends] if isinstance(backends, SDPBackend) else backends))
    previous = _enabled_backends(with_priority=set_priority)
    try:
        _enable(backends, set_priority)
        yield {}
    finally:
        _enable(previous, set_priority)
