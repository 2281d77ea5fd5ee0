"""checkpoint's debug mode (debug=True, set_checkpoint_debug_enabled): the ops run in the forward and in the latest
recomputation, each with the calls outside batched_grad that ran it (innermost first), dumped in torch's message when
the tensors the recomputation saves differ from the forward's. The ops are batched_grad's own (named by its op
table), where torch logs its ATen operators."""

import os
import traceback

from .._ops._core import OP_LOGS
from .._tensor import Tensor

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

TEMPLATE = (
    " An error happened while unpacking tensors; dumping logs of latest computation\n"
    "because you passed `debug=True` to `torch.utils.checkpoint.checkpoint()`.\n"
    "Scroll all the way down for guidance on how to navigate these logs.\n"
    "\n"
    "+~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~+\n"
    "|        1. Stack traces of the operators that ran in the original forward     |\n"
    "+------------------------------------------------------------------------------+\n"
    "\n"
    "{forward_traces}\n"
    "+~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~+\n"
    "|        2. Stack traces of the operators that ran during recomputation        |\n"
    "+------------------------------------------------------------------------------+\n"
    "\n"
    "{recompute_traces}\n"
    "+~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~+\n"
    "|       3. Log of operators in the original forward and recomputation          |\n"
    "+------------------------------------------------------------------------------+\n"
    "(Scroll up to correlate stack traces with each operation listed below. This\n"
    " helps identify their source in the code.)\n"
    "\n"
    'IMPORTANT: Differences in "detach" calls between the original forward and the\n'
    "           recomputation are expected. They are introduced by the checkpointing\n"
    "           mechanism and can be ignored.\n"
    "\n"
    "Operations executed during the original forward:\n"
    "\n"
    "{forward_ops}\n"
    "\n"
    "Operations executed during recomputation:\n"
    "\n"
    "{recompute_ops}\n"
    "\n"
    "+------------------------------------------------------------------------------+\n"
    " ERROR: Detected non-determinism while running activation checkpointing\n"
    "\n"
    " You are seeing this error because you passed `debug=True` to checkpoint and\n"
    " tensors to be saved during the original forward and differ between those saved\n"
    " during recomputation. This can happen if different operators were ran in the\n"
    " original forward and in the recomputation.\n"
    "\n"
    " To identify where the mismatch may be coming from, you can do the following:\n"
    "\n"
    " 1) Compare the operators ran during original forward and recomputation to\n"
    "    see where they differ. These operators are printed above in the order they\n"
    "    were executed.\n"
    "\n"
    " 2) Review the stack trace for each operator to locate its invocation source.\n"
    "    Each operator's stack trace is printed in their execution order.\n"
    "\n"
    " Note that the logs can be quite long. Here's how they are structured:\n"
    " (Tip: you can Ctrl-f for these headers)\n"
    "\n"
    " 1. Stack traces of the operators that ran in the original forward\n"
    " 2. Stack traces of the operators that ran during recomputation\n"
    " 3. Log of operators in the original forward and recomputation\n"
    " 4. Error message                                             <--- You are here\n"
    "--------------------------------------------------------------------------------\n"
)


class OperatorLog:
    """A context manager under which every op run is logged (each `with` starts a new log): `logs`, a line per op
    (its name and operands), and `stacks`, per op the frames outside batched_grad that led to it."""

    def __init__(self):
        self.logs, self.stacks = [], []

    def __enter__(self):
        self.logs, self.stacks = [], []
        OP_LOGS.append(self)
        return self

    def __exit__(self, *exc):
        OP_LOGS.remove(self)

    def record(self, op, operands):
        described = ", ".join(f"{x.dtype}{list(x.shape)}" if isinstance(x, Tensor) else repr(x) for x in operands)
        self.logs.append(f"{op.name}({described})")
        frames = [f for f in traceback.extract_stack() if not f.filename.startswith(_PACKAGE)]
        self.stacks.append(frames[::-1])


def _traces(label, log):
    out, total = "", len(log.logs)
    for i, (line, frames) in enumerate(zip(log.logs, log.stacks)):
        out += f"{line}   ({i + 1} of {total} in {label})\n\n"
        out += "".join(f"{f.filename}:{f.lineno}:{f.name}\n" for f in frames) + "\n\n"
    return out


def debug_message(forward, recompute):
    """torch's message of a mismatch found in debug mode, with the logs of the forward and of the recomputation."""
    return TEMPLATE.format(
        forward_traces=_traces("original", forward),
        recompute_traces=_traces("recompute", recompute),
        forward_ops="\n".join(forward.logs),
        recompute_ops="\n".join(recompute.logs),
    )
