"""Tensor's binary operators as Python's data model wants them: an operand of a type the op does not take (None, a
string, a list) makes the operator answer NotImplemented rather than raise, as torch's do, so that Python tries the
other operand's reflected method and otherwise falls back on its own rule: `tensor == None` is False, `tensor !=
"a"` is True, and `tensor < None` or `tensor + None` raise Python's "not supported between instances" and
"unsupported operand type(s)" TypeErrors. A torch.Tensor operand keeps the error that says it is one."""

import functools

from .._foreign import is_torch_tensor

ARITHMETIC = ("add", "sub", "mul", "truediv", "div", "floordiv", "mod", "pow", "matmul")
BITWISE = ("and", "or", "xor", "lshift", "rshift")
BINARY_OPERATORS = frozenset(
    [f"__{prefix}{op}__" for op in ARITHMETIC + BITWISE for prefix in ("", "r", "i")]
    + [f"__{op}__" for op in ("eq", "ne", "lt", "le", "gt", "ge")]
)


def operator_method(fn):
    """The method `fn` (self op other), answering NotImplemented where it raises a TypeError (other than for a
    torch.Tensor operand)."""

    @functools.wraps(fn)
    def method(self, other):
        try:
            return fn(self, other)
        except TypeError:
            if is_torch_tensor(other):
                raise
            return NotImplemented

    return method
