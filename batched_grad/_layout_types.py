"""torch's layouts: torch.strided, sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc, _mkldnn and jagged,
of type torch.layout. batched_grad's tensors are dense JAX arrays (torch.strided), or sparse COO tensors made by
sparse_coo_tensor and Tensor.to_sparse (batched_grad.sparse); a factory's `layout` argument is checked: the default
(None) or torch.strided, anything else refused."""

import functools

from ._memory_format import TorchConstant
from ._tensor import python_type_name


class layout(TorchConstant):  # noqa: N801 (torch's name)
    """One of torch's tensor layouts; prints as torch's (torch.sparse_coo)."""

    __slots__ = ()


layout.__module__ = "batched_grad"
NAMES = ("strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "_mkldnn", "jagged")
strided, sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc, _mkldnn, jagged = map(layout, NAMES)


def takes_layout(factory):
    """`factory` with torch's `layout` keyword, checked (check) before the call, which does not see it."""

    @functools.wraps(factory)
    def made(*args, layout=None, **kwargs):
        check(layout, made.__name__)  # the name it is given, which a method's maker may set after this
        return factory(*args, **kwargs)

    return made


def check(value, fn):
    """The `layout` argument of the factory `fn`: None or torch.strided, the only layout batched_grad makes."""
    if value is None or value is strided:
        return
    if not isinstance(value, layout):
        raise TypeError(f"{fn}(): argument 'layout' must be torch.layout, not {python_type_name(value)}")
    raise NotImplementedError(
        f"{fn}(): layout={value!r} is not supported: its factories make dense tensors only (layout=torch.strided, "
        "the default); sparse COO tensors are made with sparse_coo_tensor or Tensor.to_sparse"
    )
