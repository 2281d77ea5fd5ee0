"""torch.testing.assert_close for batched_grad Tensors: torch's default tolerances by dtype, its structure, shape
and dtype checks, and its mismatch messages."""

import cmath
from collections.abc import Mapping, Sequence

import numpy as np

from ._tensor import Tensor

_TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (0.016, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}  # (rtol, atol)
_NUMBER_TOLERANCES = {int: "int64", float: "float64", complex: "complex128"}


class _Mismatch(Exception):
    def __init__(self, kind, message, path=()):
        super().__init__(message)
        self.kind, self.message, self.path = kind, message, path


def assert_close(
    actual,
    expected,
    *,
    allow_subclasses=True,
    rtol=None,
    atol=None,
    equal_nan=False,
    check_device=True,
    check_dtype=True,
    check_layout=True,
    check_stride=False,
    msg=None,
):
    """Raise AssertionError unless `actual` and `expected` (Tensors, numbers, or sequences/mappings of them) are close:
    |actual - expected| <= atol + rtol * |expected| elementwise, with torch's default rtol/atol for the dtype."""
    if (rtol is None) != (atol is None):
        raise ValueError(
            f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
            f"{'rtol' if rtol is None else 'atol'}."
        )
    try:
        options = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=check_dtype)
        _compare(actual, expected, (), options, check_layout)
    except _Mismatch as error:
        message = error.message
        if error.path:
            message += f"\n\nThe failure occurred for item {''.join(str([item]) for item in error.path)}"
        if msg is not None:
            message = msg if isinstance(msg, str) else msg(message)
        raise error.kind(message) from None


def _is_number(x):
    return isinstance(x, (bool, int, float, complex))


def _compare(actual, expected, path, options, check_layout):
    if actual is None and expected is None:
        return
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        if actual.is_sparse or expected.is_sparse:
            return _compare_sparse(actual, expected, path, options, check_layout)
        return _compare_tensors(actual, expected, path, **options)
    if _is_number(actual) and _is_number(expected):
        return _compare_numbers(actual, expected, path, **options)
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            raise _Mismatch(
                AssertionError,
                "The keys of the mappings do not match:\n"
                f"Missing keys in the actual mapping: {sorted(set(expected) - set(actual))}\n"
                f"Additional keys in the actual mapping: {sorted(set(actual) - set(expected))}",
                path,
            )
        for key in expected:
            _compare(actual[key], expected[key], path + (key,), options, check_layout)
        return
    if (
        isinstance(actual, Sequence)
        and isinstance(expected, Sequence)
        and not isinstance(actual, str)
        and not isinstance(expected, str)
    ):
        if len(actual) != len(expected):
            raise _Mismatch(
                AssertionError, f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", path
            )
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, path + (i,), options, check_layout)
        return
    raise _Mismatch(
        TypeError,
        f"No comparison pair was able to handle inputs of type {_type_repr(actual)} and {_type_repr(expected)}.",
        path,
    )


def _compare_sparse(actual, expected, path, options, check_layout):
    """Sparse COO operands, as torch compares them: the layouts (both made dense when they differ and check_layout is
    False), the numbers of sparse dimensions and of specified values, the indices (equal), the values (close)."""
    if actual.shape != expected.shape:
        raise _Mismatch(
            AssertionError,
            f"The values for attribute 'shape' do not match: {actual.shape!r} != {expected.shape!r}.",
            path,
        )
    if actual.layout is not expected.layout:
        if check_layout:
            raise _Mismatch(
                AssertionError,
                f"The values for attribute 'layout' do not match: {actual.layout!r} != {expected.layout!r}.",
                path,
            )
        return _compare_tensors(actual.to_dense(), expected.to_dense(), path, **options)
    for what, a, e in (
        ("sparse dimensions", actual.sparse_dim(), expected.sparse_dim()),
        ("specified values", actual._nnz(), expected._nnz()),
    ):
        if a != e:
            raise _Mismatch(
                AssertionError, f"The number of {what} in sparse COO tensors does not match: {a} != {e}", path
            )
    exact = dict(options, rtol=0, atol=0)
    _compare_tensors(actual._indices(), expected._indices(), path, **exact, what="Sparse COO indices")
    _compare_tensors(actual._values().detach(), expected._values().detach(), path, **options, what="Sparse COO values")


def _type_repr(x):
    return "<class 'torch.Tensor'>" if isinstance(x, Tensor) else repr(type(x))


def _tolerances(names, rtol, atol):
    if rtol is not None:
        return rtol, atol
    pairs = [_TOLERANCES.get(n, (0.0, 0.0)) for n in names]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _compare_numbers(actual, expected, path, *, rtol, atol, equal_nan, check_dtype):
    if isinstance(actual, bool) or isinstance(expected, bool):
        if type(actual) is not type(expected):
            raise _Mismatch(AssertionError, f"The (d)types do not match: {type(actual)} != {type(expected)}.", path)
        if actual != expected:
            raise _Mismatch(AssertionError, f"Booleans mismatch: {actual} is not {expected}", path)
        return
    if check_dtype and type(actual) is not type(expected):
        raise _Mismatch(AssertionError, f"The (d)types do not match: {type(actual)} != {type(expected)}.", path)
    rtol, atol = _tolerances([_NUMBER_TOLERANCES[type(x)] for x in (actual, expected)], rtol, atol)
    if equal_nan and cmath.isnan(actual) and cmath.isnan(expected):
        return
    if actual == expected or abs(actual - expected) <= atol + rtol * abs(expected):
        return
    raise _Mismatch(AssertionError, _scalar_message(actual, expected, rtol, atol), path)


def _scalar_message(actual, expected, rtol, atol):
    diff = abs(actual - expected)
    relative = float("inf") if expected == 0 else diff / abs(expected)
    return _message("Scalars", rtol, atol, f"Expected {expected} but got {actual}.", (diff, None), (relative, None))


def _message(what, rtol, atol, extra, absolute, relative):
    equal = rtol == 0 and atol == 0
    lines = [f"{what} are not {'equal' if equal else 'close'}!", "", extra]
    for kind, (diff, index), tol in (("absolute", absolute, atol), ("relative", relative, rtol)):
        line = (
            f"{kind.title()} difference: {diff}"
            if index is None
            else f"Greatest {kind} difference: {diff} at index {index}"
        )
        lines.append(line if equal else f"{line} (up to {tol} allowed)")
    return "\n".join(lines)


def _compare_tensors(actual, expected, path, *, rtol, atol, equal_nan, check_dtype, what="Tensor-likes"):
    if actual.shape != expected.shape:
        raise _Mismatch(
            AssertionError,
            f"The values for attribute 'shape' do not match: {actual.shape!r} != {expected.shape!r}.",
            path,
        )
    if check_dtype and actual.dtype is not expected.dtype:
        raise _Mismatch(
            AssertionError,
            f"The values for attribute 'dtype' do not match: {actual.dtype!r} != {expected.dtype!r}.",
            path,
        )
    rtol, atol = _tolerances([actual.dtype.name, expected.dtype.name], rtol, atol)
    a, e = np.asarray(actual._value), np.asarray(expected._value)
    scalars = (a.item(), e.item()) if a.ndim == 0 else None
    common = np.result_type(a, e)
    a, e = a.astype(common), e.astype(common)
    if common.kind in "biu":  # torch compares integers (and bools) as int64
        a, e = a.astype(np.int64), e.astype(np.int64)
    with np.errstate(invalid="ignore", over="ignore"):
        matches = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan) if a.size else np.ones(0, bool)
    if matches.all():
        return
    if a.ndim == 0:
        raise _Mismatch(AssertionError, _scalar_message(*scalars, rtol, atol), path)
    raise _Mismatch(AssertionError, _tensor_message(a, e, matches, rtol, atol, what), path)


def _tensor_message(a, e, matches, rtol, atol, what):
    count, mismatched = matches.size, int((~matches).sum())
    extra = f"Mismatched elements: {mismatched} / {count} ({mismatched / count:.1%})"
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        diff = np.abs(a - e).ravel()
        diff[matches.ravel()] = 0
        # torch divides integer differences in the default float dtype
        relative = (diff / np.abs(e).ravel()).astype(np.float32 if diff.dtype.kind == "i" else diff.dtype)
        relative[matches.ravel()] = 0
    found = []
    for values in (diff, relative):
        nan = np.flatnonzero(np.isnan(values))  # torch.max propagates nan
        i = int(nan[0]) if nan.size else int(np.argmax(values))
        found.append((values[i].item(), tuple(int(k) for k in np.unravel_index(i, a.shape))))
    return _message(what, rtol, atol, extra, *found)


__all__ = ["assert_close"]
