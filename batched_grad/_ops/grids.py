"""Coordinate grids: meshgrid, made of views (a reshape and an expand of each input)."""

from .._tensor import Tensor, warn_once

_INDEXING_REQUIRED = "torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument."


def _checked(tensors, indexing):
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(
                "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: a tensor of "
                f"shape {tuple(t.shape)}"
            )
    if any(t.dtype != tensors[0].dtype for t in tensors):
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    if any(t.device != tensors[0].device for t in tensors):
        raise RuntimeError("meshgrid expects all tensors to have the same device")


def meshgrid(*tensors, indexing=None):
    """Grids of coordinates: result i holds tensors[i] along dimension i ("ij") or, with "xy", the first two
    dimensions swapped (x along columns); each is a view of its input expanded to the grid's shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warn_once(_INDEXING_REQUIRED, stacklevel=4)
        indexing = "ij"
    _checked(tensors, indexing)
    dims = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        dims[0], dims[1] = 1, 0
    shape = [0] * len(tensors)
    for t, d in zip(tensors, dims):
        shape[d] = t.numel()
    grids = []
    for t, d in zip(tensors, dims):
        along = [1] * len(tensors)
        along[d] = -1
        grids.append(t.reshape(along).expand(shape))
    return tuple(grids)
