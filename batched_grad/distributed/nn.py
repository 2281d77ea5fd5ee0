"""torch.distributed.nn: the collectives that autograd differentiates through. With no process group here (see
batched_grad.distributed) each raises torch's error for a process that has none, as torch's do before
init_process_group."""

from . import _NOT_INITIALIZED, ReduceOp


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """torch's error: there is no default process group to reduce over."""
    raise ValueError(_NOT_INITIALIZED)


def all_gather(tensor, group=None):
    """torch's error: there is no default process group to gather from."""
    raise ValueError(_NOT_INITIALIZED)


def broadcast(tensor, src, group=None):
    """torch's error: there is no default process group to broadcast to."""
    raise ValueError(_NOT_INITIALIZED)
