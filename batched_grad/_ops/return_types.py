"""torch.return_types: the named tuples torch's ops return (values and indices, eigenvalues and eigenvectors, ...),
each shown as torch shows it: `torch.return_types.<name>(` and one field a line."""

from collections import namedtuple


def return_type(name, fields):
    """A named tuple class `name` with `fields`, printed as torch prints torch.return_types.<name>."""
    cls = namedtuple(name, fields)
    cls.__repr__ = lambda self: (
        f"torch.return_types.{name}(\n" + ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self)) + ")"
    )
    return cls
