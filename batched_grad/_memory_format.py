"""torch's memory formats: torch.preserve_format, contiguous_format, channels_last and channels_last_3d, of type
torch.memory_format. batched_grad's tensors are always laid out row-major (contiguous), so a memory format is
checked as torch checks it (channels_last needs a 4-d tensor, channels_last_3d a 5-d one) and changes no values and
no layout."""

from ._tensor import python_type_name


class TorchConstant:
    """An object torch keeps at module level (torch.channels_last, torch.strided): prints as torch's, pickles as
    the module-level object of its name."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"

    def __reduce__(self):
        return self.name


class memory_format(TorchConstant):  # noqa: N801 (torch's name)
    """One of torch's memory formats; prints as torch's (torch.channels_last)."""

    __slots__ = ()


memory_format.__module__ = "batched_grad"
preserve_format = memory_format("preserve_format")
contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")

_REQUIRED_RANK = {channels_last: 4, channels_last_3d: 5}


def check(fmt, fn, ndim=None):
    """torch's checks of the `memory_format` argument of `fn` for a result of `ndim` dimensions (its type only
    where ndim is None)."""
    if fmt is None:
        return
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{fn}(): argument 'memory_format' must be torch.memory_format, not {python_type_name(fmt)}")
    rank = _REQUIRED_RANK.get(fmt)
    if rank is not None and ndim is not None and ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
