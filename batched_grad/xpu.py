"""torch.xpu's queries as programs guard with them (`args.xpu and torch.xpu.is_available()`): batched_grad has no
Intel GPU backend, so, as torch built without XPU, nothing is available, seeding is accepted and changes nothing,
and the calls that need a device raise torch's error."""

_NO_XPU = "Torch not compiled with XPU enabled"


def is_available():
    """False: there is no XPU backend."""
    return False


def device_count():
    """0: there are no XPU devices."""
    return 0


def is_initialized():
    """False: no XPU backend is ever started."""
    return False


def manual_seed(seed):
    """Accepted, as torch without XPU: there is no XPU generator to seed."""
    int(seed)


def manual_seed_all(seed):
    """Accepted, as manual_seed."""
    int(seed)


def empty_cache():
    """Nothing cached: no XPU memory is ever allocated."""


def current_device():
    """torch's error: there is no XPU device."""
    raise AssertionError(_NO_XPU)


def synchronize(device=None):
    """torch's error: there is no XPU device."""
    raise AssertionError(_NO_XPU)
