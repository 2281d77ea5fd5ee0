"""functorch.einops.rearrange: reorder, merge, split, add and drop axes of a tensor by an einops pattern, as one
reshape, one permute and one reshape (views where strides allow, as torch's)."""

import math

from ..._tensor import Tensor
from ._parsing import _ellipsis, parse_pattern, validate_rearrange_expressions


class DimensionBindError(Exception):
    """The tensor's sizes do not fit the pattern's axes (torch raises functorch.dim's error of this name)."""


def rearrange(tensor, pattern, **axes_lengths):
    """`tensor` (or a sequence of tensors, stacked along a new first dimension) rearranged by `pattern`, e.g.
    `"b c (h w) -> b h w c"` with `w=4`; axes named on the left appear on the right, `1` and `()` stand for a
    dimension of size 1 and `...` for the dimensions not named."""
    if not isinstance(tensor, Tensor):
        from ... import stack

        tensor = stack(tensor)
    left, right = parse_pattern(pattern, axes_lengths)
    validate_rearrange_expressions(left, right, axes_lengths)
    n_named = len(left.composition) - left.has_ellipsis
    if not left.has_ellipsis and n_named != tensor.ndim:
        raise ValueError(
            f"Number of dimensions in pattern ({n_named}) must be equal to the number of dimensions in the tensor "
            f"({tensor.ndim})"
        )
    if n_named > tensor.ndim:
        raise ValueError(
            f"Number of dimensions in pattern ({n_named}) must be less than or equal to the number of dimensions in "
            f"the tensor ({tensor.ndim})"
        )
    ellipsis_axes = [f"{_ellipsis}{i}" for i in range(tensor.ndim - n_named)]
    left_groups = _groups(left.composition, ellipsis_axes)
    for dim, group in enumerate(left_groups):
        if not group and tensor.shape[dim] != 1:  # torch's rearrange sums a unitary axis of another size
            tensor = tensor.sum(dim, keepdim=True)
    lengths = {}
    for group, size in zip(left_groups, tensor.shape):
        lengths.update(_bind(group, size, axes_lengths))
    axes = [axis for group in left_groups for axis in group]
    right_groups = _groups(right.composition, ellipsis_axes)
    order = [axes.index(axis) for group in right_groups for axis in group]
    split = tensor.reshape([lengths[axis] for axis in axes])
    return split.permute(order).reshape([math.prod(lengths[axis] for axis in group) for group in right_groups])


def _groups(composition, ellipsis_axes):
    """The composition with its ellipsis expanded: one group per dimension, a list of axis names."""
    groups = []
    for group in composition:
        if group == _ellipsis:
            groups.extend([axis] for axis in ellipsis_axes)
        else:
            groups.append([axis for part in group for axis in (ellipsis_axes if part == _ellipsis else [part])])
    return groups


def _bind(group, size, axes_lengths):
    """The lengths of the axes of `group`, one dimension of `size`: those given, and at most one inferred."""
    unknown = [axis for axis in group if axis not in axes_lengths]
    if len(unknown) > 1:
        raise DimensionBindError(f"cannot infer the sizes of two dimensions at once {unknown[0]} and {unknown[1]}")
    known = math.prod(axes_lengths[axis] for axis in group if axis in axes_lengths)
    if unknown:
        if known == 0 or size % known:
            given = tuple(axes_lengths.get(axis, "?") for axis in group)
            raise DimensionBindError(f"inferred dimension does not evenly fit into larger dimension: {size} vs {given}")
        return {**{axis: axes_lengths[axis] for axis in group if axis in axes_lengths}, unknown[0]: size // known}
    if group and known != size:
        raise DimensionBindError(
            f"Dimension sizes to do not match ({size} != {known}) when matching dimension pack ({', '.join(group)})"
        )
    return {axis: axes_lengths[axis] for axis in group}
