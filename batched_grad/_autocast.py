"""What an enabled CPU autocast region does to the arguments of the functions on torch's lists (its AutocastCPU
kernels): `lower` casts floating arguments to the region's dtype (bfloat16 or float16), `fp32` casts them to float32,
`promote` casts them to the widest floating dtype among them and the region's. float64 arguments and non-floating
ones are never cast. The function then runs with autocast suspended, as torch's kernels run the op they wrap below
the autocast key: what it calls inside is not cast again."""

import functools
import sys
import threading

from ._dtypes import float32
from ._tensor import Tensor


class _Region(threading.local):
    dtype = None  # the dtype of the enabled CPU autocast region, None outside one (or inside a listed function)


REGION = _Region()


class _Enabled:
    """Whether a CPU autocast region was ever enabled in this process: until one is, REGION.dtype is None in every
    thread, and a listed function runs without reading it (a thread-local read costs as much as a small op)."""

    ever = False


ENABLED = _Enabled()


def _eligible(x):
    return isinstance(x, Tensor) and x.dtype.is_floating_point and x.dtype.itemsize < 8 and x.device.type == "cpu"


def _promoted(args, region_dtype):
    dtype = region_dtype
    for x in args:
        for t in x if isinstance(x, (list, tuple)) else (x,):
            if _eligible(t) and t.dtype is not dtype:
                if float32 not in (dtype, t.dtype):  # bfloat16 meets float16: torch has no rule for it
                    raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
                dtype = float32
    return dtype


def cast_tree(x, dtype):
    """`x` with its eligible tensors (floating, not float64, on the CPU) cast to `dtype`, through lists, tuples and
    dicts."""
    if isinstance(x, dict):
        return {k: cast_tree(v, dtype) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(cast_tree(t, dtype) for t in x)
    return x.to(dtype) if _eligible(x) and x.dtype is not dtype else x


def autocast_policy(policy):
    """Decorator of a function on torch's CPU autocast lists: `policy` is "lower", "fp32" or "promote"."""
    if policy not in ("lower", "fp32", "promote"):
        raise ValueError(f"autocast_policy: policy must be 'lower', 'fp32' or 'promote', got {policy!r}")

    def decorate(fn):
        @functools.wraps(fn)
        def cast_call(*args, **kwargs):
            region_dtype = REGION.dtype if ENABLED.ever else None
            if region_dtype is None:
                return fn(*args, **kwargs)
            if policy == "lower":
                dtype = region_dtype
            elif policy == "fp32":
                dtype = float32
            else:
                dtype = _promoted(list(args) + list(kwargs.values()), region_dtype)
            args, kwargs = cast_tree(args, dtype), cast_tree(kwargs, dtype)
            REGION.dtype = None
            try:
                return fn(*args, **kwargs)
            finally:
                REGION.dtype = region_dtype

        return cast_call

    return decorate


_WRAPPER_CODE = autocast_policy("lower")(lambda: None).__code__  # every listed function's wrapper runs this code


def wrapped_stacklevel(level):
    """The stacklevel for warnings.warn, called in a function reached through listed functions' wrappers, that
    points where `level` points without them: each wrapper frame on the way is one more to skip."""
    frame, walked, counted = sys._getframe(1), 0, 0
    while counted < level - 1 and frame.f_back is not None:
        frame, walked = frame.f_back, walked + 1
        counted += frame.f_code is not _WRAPPER_CODE
    return walked + 1
