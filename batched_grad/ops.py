"""torch.ops: batched_grad.ops.<namespace>.<name> is an operator (aten's: batched_grad's functions under torch's
names; others: those torch.library defined)."""

from ._library.namespaces import namespace


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return namespace(name)
