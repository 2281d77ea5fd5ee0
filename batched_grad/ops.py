"""torch.ops: batched_grad.ops.<namespace>.<name> is an operator (aten's: batched_grad's functions under torch's
names; others: those torch.library defined)."""

from ._library.namespaces import namespace


def load_library(path):
    """torch.ops.load_library loads a shared library of C++ operators into torch's dispatcher, which batched_grad
    does not have."""
    raise NotImplementedError(
        f"ops.load_library({path!r}): C++ operator libraries (TORCH_LIBRARY) cannot be loaded into batched_grad; "
        "define the operator with batched_grad.library.custom_op around a Python or NumPy kernel"
    )


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return namespace(name)
