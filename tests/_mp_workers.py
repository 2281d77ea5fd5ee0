"""Functions the torch.multiprocessing.spawn tests run in child processes (importable by name, without
batched_grad, so that a child starts fast)."""

import os
import sys


def write_rank(rank, directory, word):
    with open(os.path.join(directory, f"rank{rank}"), "w") as f:
        f.write(f"{word}{rank}")


def raise_on_rank_one(rank):
    if rank == 1:
        raise ValueError("rank one failed on purpose")


def exit_with_code(rank, code):
    sys.exit(code)
