"""Importable submodules that repeat torch's file layout (`torch.nn.modules.linear`, `torch.distributions.normal`,
...): each is a module made at import time that names, under torch's file name, the objects batched_grad defines
elsewhere, so that `from torch.<package>.<file> import Name` finds them after the import switch."""

import sys
import types


def register_file_module(package, file, members, doc):
    """A module `<package>.<file>` holding `members` ({name: object}), registered in sys.modules so that import
    statements find it; its __all__ lists the public names."""
    made = types.ModuleType(f"{package}.{file}", doc)
    for name, member in members.items():
        setattr(made, name, member)
    made.__all__ = [name for name in members if not name.startswith("_")]
    sys.modules[made.__name__] = made
    return made
