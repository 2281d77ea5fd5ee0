"""A torch.Tensor handed to batched_grad by mistake (code half ported from torch): one clear error, raised where
operands are converted and where a public function fails on one."""

TORCH_TENSOR_PASSED = (
    "a torch.Tensor was passed where a batched_grad Tensor is expected: make it with batched_grad "
    "(batched_grad.tensor(t.detach().cpu().numpy()) converts one)"
)


def is_torch_tensor(x):
    """Whether `x` is a torch.Tensor (or a subclass, such as torch.nn.Parameter), without importing torch."""
    return any(cls.__name__ == "Tensor" and cls.__module__ == "torch" for cls in type(x).__mro__)


def _values(arguments):
    for x in arguments:
        if isinstance(x, (list, tuple)):
            yield from x
        elif isinstance(x, dict):
            yield from x.values()
        else:
            yield x


def reject_torch_tensors(*arguments):
    """Raise TypeError(TORCH_TENSOR_PASSED) if an argument (or an item of a list, tuple or dict argument) is a
    torch.Tensor."""
    if any(is_torch_tensor(x) for x in _values(arguments)):
        raise TypeError(TORCH_TENSOR_PASSED)


def has_torch_tensor(args, kwargs):
    """Whether a positional or keyword argument (or an item of one that is a list, tuple or dict) is a
    torch.Tensor."""
    return any(is_torch_tensor(x) for x in _values(args + tuple(kwargs.values())))


def not_a_tensor(fn, argument, value, position=None):
    """The TypeError for `value`, given as `argument` of `fn` where a Tensor is expected: torch's message, or
    TORCH_TENSOR_PASSED for a torch.Tensor (whose type name is Tensor too)."""
    if is_torch_tensor(value):
        return TypeError(TORCH_TENSOR_PASSED)
    where = "" if position is None else f" (position {position})"
    return TypeError(f"{fn}(): argument '{argument}'{where} must be Tensor, not {type(value).__name__}")
