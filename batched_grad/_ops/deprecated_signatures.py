"""torch's deprecated positional signatures of the ops taking a scaling scalar (its deprecated.yaml), which torch 2.13
still accepts with one UserWarning per process: the scalar before the tensors, as code written for older torch
calls them (`p.data.add_(-lr, grad)`, `v.addcmul_(1 - beta, g, g)`, `torch.addmm(beta, input, alpha, m1, m2)`).
A call that fits one is made with the current signature, its scalars given as keywords."""

import functools
import numbers

from .._tensor import Tensor, warn_at_caller

# op: (its scalars, the first only where the op has one, in their deprecated order; the tensors after them)
_SIGNATURES = {
    "add": (("alpha",), ("other",)),
    "sub": (("alpha",), ("other",)),
    "addcmul": (("value",), ("tensor1", "tensor2")),
    "addcdiv": (("value",), ("tensor1", "tensor2")),
    "addmm": (("beta", "alpha"), ("mat1", "mat2")),
    "addmv": (("beta", "alpha"), ("mat", "vec")),
    "addr": (("beta", "alpha"), ("vec1", "vec2")),
    "addbmm": (("beta", "alpha"), ("batch1", "batch2")),
    "baddbmm": (("beta", "alpha"), ("batch1", "batch2")),
}
NAMES = tuple(_SIGNATURES)
_WITH_OUT_DTYPE = ("addmm", "baddbmm")  # torch's messages also offer their out_dtype overload
_ONCE = "a deprecated signature"  # torch warns for the first deprecated call of the process only


def _is_scalar(x):
    """A Scalar argument to torch: a Python number, or a 0-dim tensor that does not require grad."""
    if isinstance(x, Tensor):
        return x.dim() == 0 and not x.requires_grad
    return isinstance(x, numbers.Number)


def _value(x):
    return x.item() if isinstance(x, Tensor) else x


def _split(op, args, method):
    """(the current call's positional args, its scalar keywords, the scalars given) for a call `args` (the tensor a
    method is called on first) that fits a deprecated signature of `op`, else None. The current signatures take
    fewer positional arguments, so the count tells them apart."""
    scalars, tensors = _SIGNATURES[op]
    n = len(tensors)
    if len(scalars) == 1:  # input, value, *tensors (as method and as function)
        if len(args) == 2 + n and _is_scalar(args[1]):
            return (args[0], *args[2:]), {scalars[0]: _value(args[1])}, scalars
        return None
    k = len(args) - 1 - n  # beta and alpha, or beta alone
    if k not in (1, 2):
        return None
    given = scalars[:k]
    at = range(1, 1 + k) if method else (0, 2)[:k]  # self, beta[, alpha], ... or beta, input[, alpha], ...
    if not all(_is_scalar(args[i]) for i in at):
        return None
    input_ = args[0] if method else args[1]
    return (input_, *args[1 + k :]), {s: _value(args[i]) for s, i in zip(given, at)}, given


def _message(name, op, given, method):
    """torch's warning for the deprecated call of `name` with the scalars `given`."""
    scalars, tensors = _SIGNATURES[op]
    numbers_ = [f"Number {s}" for s in given]
    tensors_ = ", ".join(f"Tensor {t}" for t in tensors)
    defaults = ", ".join(f"Number {s} = 1" for s in scalars)
    out = "" if method or name.endswith("_") else ", Tensor out = None"
    if method:
        old, new = ", ".join([*numbers_, tensors_]), [f"{tensors_}, *, {defaults}"]
    else:
        head = ["Tensor input", *numbers_] if len(scalars) == 1 else [numbers_[0], "Tensor input", *numbers_[1:]]
        old = ", ".join([*head, tensors_]) + (", *" + out if out else "")
        new = [f"Tensor input, {tensors_}, *, {defaults}{out}"]
        if op in _WITH_OUT_DTYPE and out:
            new.append(f"Tensor input, {tensors_}, torch.dtype out_dtype, *, {defaults}{out}")
    alternatives = "".join(f"\n\t{name}({sig})" for sig in new)
    return (
        f"This overload of {name} is deprecated:\n\t{name}({old})\n"
        f"Consider using one of the following signatures instead:{alternatives}"
    )


def accepting(name, fn, method):
    """`fn` (torch.<name>, or Tensor.<name> where `method`) also taking the deprecated signatures of its op; the
    warning points at the caller."""
    op = name.rstrip("_")

    @functools.wraps(fn)
    def call(*args, **kwargs):
        split = _split(op, args, method) if len(args) > 2 and not set(kwargs) & set(_SIGNATURES[op][0]) else None
        if split is None:
            return fn(*args, **kwargs)
        current, scalars, given = split
        warn_at_caller(_message(name, op, given, method), once=True, key=_ONCE)
        return fn(*current, **scalars, **kwargs)

    return call
