"""NumPy's floating-point error handling switched off around host computations: inf and nan come as XLA's kernels
give them, without NumPy's RuntimeWarnings (nor its errors under np.seterr(all="raise"))."""

import functools

import numpy as np

try:  # np.errstate costs 0.75 us a use, as much as a small ufunc; setting its context variable costs 0.1 us
    from numpy._core._ufunc_config import _extobj_contextvar
    from numpy._core.umath import _make_extobj

    # ignore(): start ignoring float errors, giving the token that restore(token) takes to handle them again as
    # before; both are the context variable's own methods (no Python call around them, on every op's path)
    ignore = functools.partial(_extobj_contextvar.set, _make_extobj(all="ignore"))
    restore = _extobj_contextvar.reset

except ImportError:  # pragma: no cover - depends on the NumPy version

    def ignore():
        """Start ignoring float errors; returns the token that `restore` takes."""
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def restore(token):
        """Handle float errors again as before `ignore` gave `token`."""
        token.__exit__(None, None, None)


def ignoring_float_errors(f, *args):
    """f(*args) with float errors ignored."""
    token = ignore()
    try:
        return f(*args)
    finally:
        restore(token)
