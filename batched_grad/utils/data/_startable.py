"""Whether a DataLoader's worker processes can start. Workers start by 'forkserver' or 'spawn' (JAX cannot be
forked), which re-import the main script and unpickle the dataset, collate_fn and worker_init_fn in each worker,
where torch on Linux forks and needs neither. A script without an `if __name__ == "__main__":` guard would run again
in each worker, and a dataset defined in an interactive session (a notebook) or by a lambda cannot be unpickled
there: for those, the data loads in the main process, as with num_workers=0, with one warning saying why."""

import ast
import functools
import pickle
import sys
import warnings


def reason_not_to_start(loader):
    """Why `loader`'s workers could not start under the default start method, or None where they can (or the user
    chose the multiprocessing context)."""
    if loader.multiprocessing_context is not None:
        return None
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if path is not None and not _guards_main(path):
        return "the main script has no `if __name__ == '__main__':` guard, so each worker would run it again"
    try:
        pickled = pickle.dumps((loader.dataset, loader.collate_fn, loader.worker_init_fn, loader.batch_sampler))
    except Exception as error:  # a lambda, a local class: torch's forked workers never pickle them
        return f"the dataset, collate_fn or worker_init_fn cannot be pickled for a worker ({error})"
    if path is None and b"__main__" in pickled:
        return (
            "the dataset, collate_fn or worker_init_fn is defined in an interactive session: a worker cannot import it"
        )
    return None


@functools.lru_cache(maxsize=64)
def _guards_main(path):
    """Whether the script at `path` has a module-level `if __name__ == "__main__":` (either order, either quote)."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return True  # cannot tell: try the workers
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.comparators) == 1:
            sides = [node.test.left, node.test.comparators[0]]
            names = [s.id for s in sides if isinstance(s, ast.Name)]
            values = [s.value for s in sides if isinstance(s, ast.Constant)]
            if names == ["__name__"] and values == ["__main__"]:
                return True
    return False


_warned = set()


def warn_loading_in_process(reason, emulated):
    """The warning (once per reason) that a loader reads its batches in the main process: `emulated` for a map-style
    dataset, each batch under the generators of the worker that would have read it (_in_process.py)."""
    if reason not in _warned:
        _warned.add(reason)
        how = (
            "each batch read under the random generators of the worker that would have read it"
            if emulated
            else "as with num_workers=0"
        )
        warnings.warn(
            f"DataLoader workers cannot start: {reason} (batched_grad starts workers with 'forkserver' or 'spawn', "
            f"as JAX cannot be forked); loading in the main process instead, {how}",
            UserWarning,
            stacklevel=4,
        )
