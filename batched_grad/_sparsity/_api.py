"""`sparsity=` of the Jacobian and Hessian APIs: the pattern ("auto": detected from the recorded graph and cached
by its structure; or the user's, checked), the mode with the fewest colors, the compressed evaluation, and the
result as SparseMatrix blocks (or dense ones with output="dense")."""

import collections
import hashlib
import math
import threading
import weakref

import jax
import numpy as np

from .._tensor import Tensor
from .._tracing import is_tracer
from . import _pattern, _program
from ._evaluate import block_values, check_pattern, hessian_parts, jacobian_parts
from ._matrix import SparseMatrix
from ._pattern import Sparsity
from ._recorded import detect, operand, walk
from ._sets import TooDense

COUNTS = {"detections": 0}
MAX_ENTRIES = 256  # structures whose patterns are kept, least recently used dropped
_detected = collections.OrderedDict()  # (hessian, structural key) -> _Entry
_given = collections.OrderedDict()  # a user's pattern, by its contents -> Sparsity
OUTPUTS = ("sparse", "dense")
_lock = threading.Lock()


class _Entry:
    """The patterns detected for one structure: the operand values they depend on (`used`: (node, operand)
    slots) and, per fingerprint of those values, the Sparsity."""

    __slots__ = ("used", "found")

    def __init__(self, used):
        self.used, self.found = used, {}


_parts = {}  # id(a device array) -> (a weak reference to it, its part of a fingerprint): a device array is immutable


def _fingerprint(recorded, used):
    return tuple([_part(operand(recorded.nodes[pos], k)) for pos, k in used])


def _part(value):
    """What a fingerprint holds of one operand value: its dtype, shape and bytes (a digest of them where long);
    None for a value not known (a tracer). The part of a device array (a slice's start, interned) is kept."""
    if value is None or is_tracer(value) or not hasattr(value, "dtype"):
        return None
    cached = isinstance(value, jax.Array)
    if cached:
        hit = _parts.get(id(value))
        if hit is not None and hit[0]() is value:
            return hit[1]
    array = np.asarray(value)
    data = np.ascontiguousarray(array).tobytes()
    part = (array.dtype.str, array.shape, data if len(data) <= 64 else hashlib.sha1(data).digest())
    if cached:
        if len(_parts) > 4096:
            _parts.clear()
        _parts[id(value)] = (weakref.ref(value), part)  # an id reused by another array fails the `is` above
    return part


def detected(outputs, inputs, hessian):
    """The Sparsity of the Jacobian of `outputs` (or the Hessian of the one output) with respect to `inputs`,
    from the recorded graph between them: detected once per structure (and values of the integer operands the
    pattern depends on), then found by its key."""
    return _detected_in(outputs, inputs, hessian)[0]


def _detected_in(outputs, inputs, hessian):
    """(the Sparsity (see detected), the Recorded graph, the operand slots whose values it depends on)."""
    recorded = walk(outputs, inputs)
    key = (hessian, recorded.key)
    entry = _detected.get(key) if recorded.key is not None else None
    fingerprint = None
    if entry is not None:
        with _lock:
            if key in _detected:
                _detected.move_to_end(key)
        fingerprint = _fingerprint(recorded, entry.used)
        found = entry.found.get(fingerprint)
        if found is not None:
            return found, recorded, entry.used
    COUNTS["detections"] += 1
    sizes = [x.numel() for x in inputs]
    try:
        out_sets, ctx = detect(recorded, sizes, hessian)
    except TooDense as error:
        raise RuntimeError(f'sparsity="auto": {error}; the derivative is too dense for a sparse evaluation') from None
    width = int(sum(sizes))
    if hessian:
        sparsity = _pattern.from_pairs(*ctx.pair_arrays(), width)
    else:
        sparsity = _pattern.from_sets(out_sets, [o.numel() for o in outputs], width)
    if recorded.key is not None:
        used = tuple(sorted(ctx.used))
        with _lock:  # threads may detect at once: each keeps its own result, the dict stays whole
            if entry is None or entry.used != used:
                entry = _detected[key] = _Entry(used)
                fingerprint = _fingerprint(recorded, used)
            entry.found[fingerprint] = sparsity
            while len(_detected) > MAX_ENTRIES:
                _detected.popitem(last=False)
        return sparsity, recorded, used
    return sparsity, recorded, None


# ---- a user's pattern ------------------------------------------------------------------------------------------
def _coordinates(pattern, shape, argname):
    """(rows, cols) of a user's pattern for an (m, n) matrix (`shape`: its possible shapes, the first (m, n))."""
    m, n = shape[0]
    if hasattr(pattern, "tocoo") and hasattr(pattern, "nnz"):  # scipy.sparse: its stored entries
        if tuple(pattern.shape) != (m, n):
            raise ValueError(f"{argname}: expected a pattern of shape {(m, n)}, got a sparse matrix of {pattern.shape}")
        coo = pattern.tocoo()
        return np.asarray(coo.row, np.int64), np.asarray(coo.col, np.int64)
    if isinstance(pattern, tuple) and len(pattern) == 2:
        rows, cols = (np.asarray(p) for p in pattern)
        if rows.ndim != 1 or rows.shape != cols.shape or rows.dtype.kind not in "iu" or cols.dtype.kind not in "iu":
            raise ValueError(
                f"{argname}: coordinates must be two 1-D integer arrays of equal length (rows, cols), got arrays of "
                f"shapes {rows.shape} and {cols.shape} and dtypes {rows.dtype} and {cols.dtype}"
            )
        if len(rows) and (rows.min() < 0 or rows.max() >= m or cols.min() < 0 or cols.max() >= n):
            raise ValueError(f"{argname}: coordinates outside a pattern of shape {(m, n)}")
        return rows.astype(np.int64), cols.astype(np.int64)
    if isinstance(pattern, Tensor):
        pattern = pattern.detach().numpy()
    array = np.asarray(pattern)
    if array.dtype != bool:
        raise TypeError(
            f'{argname}: expected None, "auto", a boolean array, a scipy.sparse matrix or (rows, cols) '
            f"coordinates; got an array of dtype {array.dtype}"
        )
    if tuple(array.shape) not in shape:
        raise ValueError(
            f"{argname}: expected a boolean pattern of shape {shape[0]}"
            + (f" or {shape[1]}" if len(shape) > 1 and shape[1] != shape[0] else "")
            + f", got {tuple(array.shape)}"
        )
    rows, cols = np.nonzero(array.reshape(m, n))
    return rows.astype(np.int64), cols.astype(np.int64)


def given(pattern, shapes, argname, symmetric=False):
    """The Sparsity of a user's pattern (see _coordinates; a Sparsity as it is, its shape checked)."""
    m, n = shapes[0]
    if isinstance(pattern, Sparsity):
        if pattern.shape != (m, n):
            raise ValueError(f"{argname}: expected a pattern of shape {(m, n)}, got a Sparsity of {pattern.shape}")
        return pattern
    rows, cols = _coordinates(pattern, shapes, argname)
    if symmetric:  # a Hessian's pattern: both triangles
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    key = (m, n, symmetric, hashlib.sha1(rows.tobytes() + b"|" + cols.tobytes()).digest())
    found = _given.get(key)
    if found is None:
        from . import _sets

        sets = _sets.from_pairs(rows, cols, m, max(n, 1))
        found = Sparsity((m, n), sets.indptr, sets.indices, symmetric=symmetric)
        with _lock:
            _given[key] = found
            while len(_given) > MAX_ENTRIES:
                _given.popitem(last=False)
    return found


# ---- the APIs --------------------------------------------------------------------------------------------------
def check_arguments(sparsity, output, argname="sparsity"):
    """Whether the sparse path runs (`sparsity` given), after checking both arguments: `output` is None, "sparse"
    or "dense" ("sparse" only with a sparsity; "dense" without one is the dense result anyway)."""
    if output not in (None, *OUTPUTS):
        raise ValueError(f"output: expected 'sparse' or 'dense', got {output!r}")
    if isinstance(sparsity, str) and sparsity != "auto":
        raise ValueError(f'{argname}: expected None, "auto" or a pattern, got the string {sparsity!r}')
    if sparsity is None and output == "sparse":
        raise ValueError(f"output='sparse' needs a pattern: pass {argname}=\"auto\" or a pattern")
    return sparsity is not None


def _shapes(out_shapes, in_shapes):
    m, n = sum(_numel(s) for s in out_shapes), sum(_numel(s) for s in in_shapes)
    shapes = [(m, n)]
    if len(out_shapes) == 1 and len(in_shapes) == 1:
        shapes.append(tuple(out_shapes[0]) + tuple(in_shapes[0]))
    return shapes


def _numel(shape):
    return math.prod(shape)


def _blocks(values, sparsity, out_shapes, in_shapes, output):
    """blocks[i][j]: the SparseMatrix (or, output="dense", the dense Tensor shaped out_i + in_j) of output i and
    input j, from the values of each block."""
    out_sizes, in_sizes = [_numel(s) for s in out_shapes], [_numel(s) for s in in_shapes]
    result = []
    for i, row in enumerate(sparsity.blocks(out_sizes, in_sizes)):
        blocks = []
        for j, (_, rows, cols) in enumerate(row):
            block = SparseMatrix(values[i][j], rows, cols, (out_sizes[i], in_sizes[j]), out_shapes[i], in_shapes[j])
            if output == "dense":
                block = block.to_dense().view(tuple(out_shapes[i]) + tuple(in_shapes[j]))
            blocks.append(block)
        result.append(blocks)
    return result


def sparse_jacobian(outputs, inputs, sparsity, preferred, create_graph, chunk_size, output, argname="sparsity"):
    """blocks[i][j] of the Jacobian of recorded `outputs` with respect to `inputs` (see _blocks)."""
    out_shapes, in_shapes = [tuple(o.shape) for o in outputs], [tuple(x.shape) for x in inputs]
    auto = isinstance(sparsity, str)
    if auto:
        pattern, recorded, used = _detected_in(outputs, inputs, hessian=False)
    else:
        pattern = given(sparsity, _shapes(out_shapes, in_shapes), argname)
    mode = pattern.best_mode(preferred)
    if auto and used is not None and _program.runnable(inputs, outputs, create_graph, chunk_size):
        out_sizes = [o.numel() for o in outputs]
        values = _program.nonzeros(recorded, inputs, out_sizes, pattern, pattern.program_mode(preferred), False, used)
        if values is not None:
            return _blocks(values, pattern, out_shapes, in_shapes, output)
    parts = jacobian_parts(outputs, inputs, pattern, mode, create_graph, chunk_size, probe=not auto)
    if not auto:
        check_pattern(parts, pattern, mode, argname)
    # each block in the dtype of the dense Jacobian of the API's mode (the inputs' in reverse, the outputs' in forward)
    dtypes = [[x.dtype if preferred == "reverse" else o.dtype for x in inputs] for o in outputs]
    values = block_values(parts, pattern, mode, [o.numel() for o in outputs], [x.numel() for x in inputs], dtypes)
    values = [[v if v.dtype == d else v.to(d) for v, d in zip(row, drow)] for row, drow in zip(values, dtypes)]
    return _blocks(values, pattern, out_shapes, in_shapes, output)


def sparse_hessian(output_value, inputs, sparsity, create_graph, chunk_size, output, argname="sparsity"):
    """blocks[i][j] of the Hessian of the recorded single-element `output_value` with respect to `inputs`."""
    in_shapes = [tuple(x.shape) for x in inputs]
    auto = isinstance(sparsity, str)
    if auto:
        pattern, recorded, used = _detected_in([output_value], inputs, hessian=True)
    else:
        pattern = given(sparsity, _shapes(in_shapes, in_shapes), argname, symmetric=True)
    mode = pattern.best_mode("reverse")
    if auto and used is not None and _program.runnable(inputs, [output_value], create_graph, chunk_size):
        values = _program.nonzeros(recorded, inputs, None, pattern, mode, True, used)
        if values is not None:
            return _blocks(values, pattern, in_shapes, in_shapes, output)
    parts = hessian_parts(output_value, inputs, pattern, mode, create_graph, chunk_size, probe=not auto)
    if not auto:
        check_pattern(parts, pattern, mode, argname)
    sizes = [x.numel() for x in inputs]
    values = block_values(parts, pattern, mode, sizes, sizes, [[x.dtype for x in inputs] for _ in inputs])
    return _blocks(values, pattern, in_shapes, in_shapes, output)
