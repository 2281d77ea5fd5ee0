"""A workaround for a miscompilation of jaxlib 0.8.0 to 0.10.1 on CPU: a float64 scatter whose update is computed
in the same fusion (the backward of indexing under vmap: `vmap(lambda x, c: grad(x * w[0], w, c))`) writes wrong
values for some shapes (a leading dimension of 4 and a trailing one of 5, for one). XLA's older CPU emitters compile
it right, so for those versions `--xla_cpu_use_fusion_emitters=false` is added to XLA_FLAGS before JAX starts its
CPU backend, unless XLA_FLAGS already names that flag (set it to true to opt out). jaxlib 0.7 and 0.10.2 compile it
right; 0.10.2 is excluded for another reason (pyproject.toml)."""

import os
from importlib.metadata import PackageNotFoundError, version

FLAG = "--xla_cpu_use_fusion_emitters"
AFFECTED = ((0, 8, 0), (0, 10, 1))  # first and last jaxlib release with the miscompilation


def _jaxlib_version():
    try:
        return tuple(int(part) for part in version("jaxlib").split(".")[:3])
    except (PackageNotFoundError, ValueError):
        return None


def apply():
    """Add the flag for an affected jaxlib; it takes effect only if JAX has not yet started its CPU backend."""
    found = _jaxlib_version()
    flags = os.environ.get("XLA_FLAGS", "")
    if found is not None and AFFECTED[0] <= found <= AFFECTED[1] and FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {FLAG}=false".strip()
