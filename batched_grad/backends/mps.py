"""torch.backends.mps: Apple's Metal backend, which JAX does not have here."""


def is_available():
    """False: no MPS device (JAX runs on its CPU or GPU backends)."""
    return False


def is_built():
    """False: built without MPS, as torch on a machine that is not a Mac."""
    return False


def is_macos_or_newer(major, minor):
    return False
