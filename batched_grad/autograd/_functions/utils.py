"""torch.autograd._functions.utils: reshaping a gradient back to a size, and summing a broadcast gradient back to the
size it was expanded from."""


def maybe_view(tensor, size, check_same_size=True):
    """`tensor` viewed with `size` (as it is where it already has that size and `check_same_size`)."""
    if check_same_size and tensor.size() == size:
        return tensor
    return tensor.contiguous().view(size)


def maybe_unexpand(tensor, old_size, check_same_size=True):
    """`tensor`, the gradient of a tensor of `old_size` broadcast to a larger size, summed back to `old_size`: over
    the leading dimensions broadcasting added, then (keeping them) over the dimensions it expanded from 1."""
    if check_same_size and tensor.size() == old_size:
        return tensor
    added = tensor.dim() - len(old_size)
    expanded = [d for d, (now, before) in enumerate(zip(tensor.size()[added:], old_size)) if now != before]
    for _ in range(added):
        tensor = tensor.sum(0, keepdim=False)
    for d in expanded:
        tensor = tensor.sum(d, keepdim=True)
    return tensor
