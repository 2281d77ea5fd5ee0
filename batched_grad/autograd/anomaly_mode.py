"""Anomaly detection: record forward tracebacks, check backward results for NaN."""

import functools
import warnings

from .._graph import _anomaly


def is_anomaly_enabled():
    """Whether anomaly detection is on."""
    return _anomaly["enabled"]


def is_anomaly_check_nan_enabled():
    """Whether anomaly detection checks backward results for nan."""
    return _anomaly["check_nan"]


def set_anomaly_enabled(enabled, check_nan=True):
    """torch.set_anomaly_enabled: switch anomaly detection on or off (set_detect_anomaly without the context)."""
    set_detect_anomaly(enabled, check_nan)


class set_detect_anomaly:
    """Turn anomaly detection on or off: as a call, or as a context manager restoring the previous mode."""

    def __init__(self, mode, check_nan=True):
        if not isinstance(mode, bool):
            raise TypeError(f"set_detect_anomaly(mode): mode must be a bool, but got {type(mode).__name__}")
        self.prev = dict(_anomaly)
        _anomaly.update(enabled=mode, check_nan=check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _anomaly.update(self.prev)


class detect_anomaly:
    """Context manager enabling anomaly detection inside it (and, beyond torch, a decorator doing so around each
    call). Making one warns that the mode is on, as torch's does; the mode it restores is the one of that time."""

    def __init__(self, check_nan=True):
        self.prev = dict(_anomaly)
        self.check_nan = check_nan
        warnings.warn(ENABLED_WARNING, UserWarning, stacklevel=2)

    def __enter__(self):
        _anomaly.update(enabled=True, check_nan=self.check_nan)

    def __exit__(self, *exc):
        _anomaly.update(self.prev)

    def __call__(self, func):

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with set_detect_anomaly(True, self.check_nan):
                return func(*args, **kwargs)

        return wrapper


ENABLED_WARNING = (
    "Anomaly Detection has been enabled. This mode will increase the runtime and should only be enabled for debugging."
)
