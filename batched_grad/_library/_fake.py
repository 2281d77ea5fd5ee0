"""The context of a fake kernel (torch.library.get_ctx): set while one runs on meta tensors."""

_CURRENT = []


class FakeImplCtx:
    """What a fake kernel may ask of the call it describes."""

    def __init__(self, op):
        self.op = op

    def new_dynamic_size(self, *, min=0, max=None):  # noqa: A002  (torch's names)
        """torch's unbacked symbolic size for a data-dependent output shape: meta tensors here have concrete
        shapes, so an output whose size depends on the data cannot be described."""
        raise NotImplementedError(
            f"get_ctx().new_dynamic_size() in the fake kernel of {self.op.name()}: batched_grad's meta tensors have "
            "concrete sizes, so a data-dependent output size has no fake form"
        )


def get_ctx():
    """The FakeImplCtx of the fake kernel running now; None outside one (as torch's)."""
    return _CURRENT[-1] if _CURRENT else None


def running(op, fake):
    """`fake` as the meta kernel of `op`: get_ctx() is its context while it runs."""

    def kernel(*args, **kwargs):
        _CURRENT.append(FakeImplCtx(op))
        try:
            return fake(*args, **kwargs)
        finally:
            _CURRENT.pop()

    return kernel
