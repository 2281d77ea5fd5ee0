"""torch.version as a CPU build of torch has it: no CUDA, HIP, ROCm or XPU toolkit versions (None), not a debug
build; `git_version` is "Unknown", as torch's is for a build made outside a git checkout. `__version__` names the
torch API batched_grad implements, 2.13.0, with batched_grad's own version as its local label, so that code which
compares torch versions (`torch.__version__ >= "1.13"`) takes its current branch."""

from .torch_version import TorchVersion

__all__ = ["__version__", "cuda", "debug", "git_version", "hip", "rocm", "xpu"]

batched_grad_version = "0.1.0"
__version__ = TorchVersion(f"2.13.0+bg.{batched_grad_version}")
debug = False
cuda = None
git_version = "Unknown"
hip = None
rocm = None
xpu = None
