"""torch.version as a CPU build of torch has it: no CUDA, HIP, ROCm or XPU toolkit versions (None), not a debug
build. `__version__` is batched_grad's own version; `git_version` is "Unknown", as torch's is for a build made
outside a git checkout."""

__all__ = ["__version__", "cuda", "debug", "git_version", "hip", "rocm", "xpu"]

__version__ = "0.1.0"
debug = False
cuda = None
git_version = "Unknown"
hip = None
rocm = None
xpu = None
