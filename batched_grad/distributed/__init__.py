"""torch.distributed's queries, as a script's guards use them (`if dist.is_available() and dist.is_initialized()`):
batched_grad has no process groups or collectives (several processes run one JAX program through
jax.distributed instead), so is_available() is False, no group is ever initialized, and the calls that need the
default group raise torch's error for a process that has none."""

import os

_NOT_INITIALIZED = "Default process group has not been initialized, please make sure to call init_process_group."


def is_available():
    """False: torch.distributed's process groups and collectives are not provided here."""
    return False


def is_initialized():
    """False: no default process group exists."""
    return False


def is_torchelastic_launched():
    """Whether torchrun (torch elastic) started this process: it sets TORCHELASTIC_RUN_ID, as torch checks."""
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def is_nccl_available():
    """False: no NCCL backend (no process groups here)."""
    return False


def is_gloo_available():
    """False: no Gloo backend (no process groups here)."""
    return False


def is_mpi_available():
    """False: no MPI backend (no process groups here)."""
    return False


def init_process_group(*args, **kwargs):
    """Refused: there are no process groups here (run several processes through jax.distributed)."""
    raise RuntimeError(
        "init_process_group: batched_grad has no torch.distributed process groups or collectives; "
        "several processes run one JAX program through jax.distributed"
    )


def get_rank(group=None):
    """torch's error: there is no default process group."""
    raise ValueError(_NOT_INITIALIZED)


def get_world_size(group=None):
    """torch's error: there is no default process group."""
    raise ValueError(_NOT_INITIALIZED)


class ReduceOp:
    """torch.distributed.ReduceOp's members, as code names them in annotations and defaults; with no process
    groups here no collective ever applies one."""

    SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM = (
        "SUM AVG PRODUCT MIN MAX BAND BOR BXOR PREMUL_SUM".split()
    )


class ProcessGroup:
    """torch.distributed.ProcessGroup as a name for annotations; making one is refused, as init_process_group is."""

    def __init__(self, *args, **kwargs):
        init_process_group()
