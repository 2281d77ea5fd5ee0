"""opt_einsum on batched_grad tensors. opt_einsum's contract() takes its backend's name from the module of the
operands' class and calls that module's einsum, tensordot and transpose with NumPy's signatures, through its table of
aliases where a module has other signatures (torch's is there). batched_grad's entry in that table (batched_grad
imports this module when opt_einsum is installed) points at these: opt_einsum's torch backend with batched_grad in
torch's place, so contract() records the same ops on batched_grad tensors as on torch's."""

from opt_einsum.backends import dispatch
from opt_einsum.parser import convert_to_valid_einsum_chars


def transpose(a, axes):
    return a.permute(*axes)


def einsum(equation, *operands, **kwargs):
    import batched_grad

    return batched_grad.einsum(convert_to_valid_einsum_chars(equation), operands)


def tensordot(x, y, axes=2):
    import batched_grad

    return batched_grad.tensordot(x, y, dims=axes)


dispatch._aliases.setdefault("batched_grad", __name__)
