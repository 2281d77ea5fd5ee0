"""The op table's machinery: an Op is a pure JAX function plus static parameters; `apply` runs it
through a compiled-kernel cache and records a node whose VJP is JAX's, traced in a cached kernel."""

import functools
import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vmap._rows import map_rows

from .. import _graph, _host
from .._dtypes import differentiable
from .._dual import LEVELS as DUAL_LEVELS
from .._dual import apply_dual
from .._float_errors import ignore as ignore_float_errors
from .._float_errors import restore as restore_float_errors
from .._foreign import TORCH_TENSOR_PASSED, is_torch_tensor
from .._grad_mode import _state as GRAD_MODE
from .._grad_mode import is_recording
from .._host import (
    HOST_FLOATS,
    computed_on_host,
    cpu_device_set,
    host_array,
    host_arrays,
    host_read,
    is_shared,
    on_host,
    to_device,
)
from .._inference import InferenceCounter
from .._layout import note_base
from .._lazy import Call, Pending, Signature, defer, kernel, materialize, signature
from .._meta import SPARSE_NOT_PROVIDED, MetaValue, NoDenseValue, check_devices, meta_value, shapes_of
from .._numpy_eval import derived_vjp
from .._profiling import PROFILING, recorded_op
from .._reads import output_copies, output_reads
from .._saved import SavedValue, modified_error
from .._tensor import DETACH, Tensor, remember_view
from .._tracing import _outside_every_trace as outside_every_trace
from .._view_meta import in_graph, note_view
from .._write_watch import watching
from .._x64 import set_x64, swap_x64
from ._forward_refused import checked_forward
from ._gradient_nodes import GRADIENT_NODES

# what torch's derivative of an op reads (Op.torch_saves)
SAVES_INPUT, SAVES_RESULT, SAVES_BOTH = frozenset({"input"}), frozenset({"result"}), frozenset({"input", "result"})
SAVES_INDICES, SAVES_NOTHING = frozenset({"indices"}), frozenset()


class Op:
    """A table entry: `fn(*arrays, **static)` returns an array (or a tuple when `multi`).

    `linear`: the VJP needs no saved values (so the graph can be walked twice without retain_graph).
    `multilinear`: linear in each operand separately (mul, matmul): an operand is saved only when another
    operand requires grad, as torch does; or a tuple of the operands it is linear in (the numerator of a division).
    `view`: the outputs alias operand 0 (they share its version counter and see its in-place updates).
    `involution`: a view whose elements are its base's through an elementwise function that is its own inverse
    (conj): what is written into it reaches the base through that function.
    `replayed`: a view op that torch re-derives by calling it again, not by as_strided of its base (its view has
    another dtype or a conjugate/negative bit: view_as_real, view_as_complex, conj, _neg_view); one that is no
    involution reinterprets complex elements as (real, imaginary) pairs of its last dimension or back.
    `view_step`: for a view op with more operands than the viewed one, `view_step(operands, **static)` gives the
    (op, static) of a one-operand op computing the same view, which the view's chain records.
    `whole_backward`: a whole backward program: the deferred values it reads are compiled into it at once.
    `diagonal`: output element i (in flat order) depends only on element i of each operand of the output's size
    (elementwise ops, reshapes), so the VJP of a one-hot cotangent is one-hot at the same index (_basis.py).
    `backward_name`: torch's name of the op's nodes, or a function of the Signature that gives it (where torch's
    name depends on static params or operand ranks).
    `reads`: for a recorded backward (create_graph=True), a function of the static params giving, per output, a
    bitmask of the operands it depends on: only those get a gradient from it (None: each reads every operand).
    `links` (optional): as `reads`, the operands each output links to (requires grad through), where that is more
    than what it depends on (a gradient of a `fused` op); None: those it reads.
    `fused` (optional): a Fused record (_fused_backward.py) where torch's backward of the op is one node (a kernel
    such as native_layer_norm_backward) that reads the inputs and the cotangents for every gradient: a recorded
    gradient (create_graph=True) links to them all, so it requires grad when any of them does, and every operand
    is saved, as torch saves them. Its own gradients are those the math gives: None for an input it does not
    depend on, unless the record's `zeros` says torch's gives zeros there.
    `host` (optional): the op computed with NumPy, `host(*arrays, **static)` giving what `fn` gives (or None where
    it does not apply), which runs instead of a kernel on the CPU backend when every operand is concrete
    (_host.on_host), whether the op is computed now or deferred and computed alone (_lazy): no compile for a new
    shape; where it is small_floats' form, `numpy` is its NumPy function, which the eager path calls directly on
    operands of the op's float dtype. `host_vjp` (optional): `host_vjp(cotangent, operands, avals, **static)` gives,
    with NumPy, the gradient of each operand (None for those without one) of a one-output op, from its output's
    cotangent and the operands its node saves (None for the others); or None where it does not apply. A multi-output
    op's rule gets the cotangents of its differentiable outputs as a list (None for those not given), unbatched.
    `inputs` (optional): how many leading operands are torch's inputs; the others (numbers passed as operands so
    that a new value compiles nothing) get no edge in the node.
    `torch_saves`: what torch's backward of the op reads, and so which in-place changes make a backward through it
    raise: a set of "input" (its first operand; the others always count), "result" (its differentiable outputs) and
    "indices" (its integer outputs): exp and tanh read the result, prod the input and the result, sort the indices,
    a composite such as cross_entropy only intermediates. Our backward reads the operands whatever it is: they are
    immutable arrays, so only where the version check looks moves.
    `saved_names`: torch's names of the operands (per position, None for one torch's node does not show), by which
    a node shows what it saved as `_saved_<name>` / `_raw_saved_<name>`; `saved_static`: the static parameters it
    shows by their own names (pow's exponent). The results torch saves are shown as `result` and `indices`.
    `forward_error` (optional): for an op torch has no forward-mode derivative of, `forward_error(*operands,
    **static)` gives the exception torch raises when an operand has a tangent (None where the op has one there);
    forward-mode AD raises it instead of differentiating the op (_forward_refused.py).
    `expose` (optional): `expose(node)` gives a recorded node the structure torch's graph has around it, made when its
    next_functions are first read (nodes torch records that the op's one node stands for: linear's weight.t()).
    `added` (optional): a function of the Signature giving the operands that enter the result only as an added term
    (linear's bias, addmm's input): no VJP reads their values and torch's node does not save them, so an in-place
    change of one (an optimizer's step) leaves a backward through the node valid. A fused op's bias that its
    backward does not read (Fused.reads_bias) is such an operand too.
    `shapes` (optional): `shapes(avals, **static)` gives the (shape, dtype) of each output on operands of `avals`
    without a trace (a deferred op's Signature), or None where it cannot tell.
    `second_order` (optional): `second_order(static, operands, grads)` gives the gradients of a backward run with
    create_graph (its saved operands given, None for the others), where torch's node joins some of them to an
    error node for the operands it cannot differentiate twice (scatter_reduce's prod through repeated zeros).
    `derivative` (optional): a function of the same operands and static params whose VJP is the op's backward,
    where torch's backward is not the transpose of its forward-mode derivative (a write at repeated positions: the
    value written last, yet every source gets its position's gradient); forward-mode AD differentiates `fn`.
    """

    __slots__ = (
        "name",
        "fn",
        "backward_name",
        "linear",
        "multilinear",
        "view",
        "involution",
        "replayed",
        "view_step",
        "multi",
        "whole_backward",
        "diagonal",
        "torch_saves",
        "reads",
        "links",
        "fused",
        "host",
        "host_vjp",
        "numpy",
        "inputs",
        "saved_names",
        "saved_static",
        "forward_error",
        "expose",
        "added",
        "shapes",
        "second_order",
        "derivative",
    )

    def __init__(
        self,
        name,
        fn,
        backward_name=None,
        linear=False,
        multilinear=False,
        view=False,
        involution=False,
        replayed=False,
        view_step=None,
        multi=False,
        whole_backward=False,
        diagonal=False,
        torch_saves=SAVES_INPUT,
        reads=None,
        links=None,
        fused=None,
        host=None,
        host_vjp=None,
        inputs=None,
        saved_names=(),
        saved_static=(),
        forward_error=None,
        expose=None,
        added=None,
        shapes=None,
        second_order=None,
        derivative=None,
    ):
        self.name, self.fn, self.linear, self.view, self.multi = name, fn, linear, view, multi
        self.reads, self.host, self.host_vjp, self.inputs = reads, host, host_vjp, inputs
        self.numpy = getattr(host, "numpy", None)
        self.links, self.fused = links or reads, fused
        self.multilinear, self.whole_backward = multilinear, whole_backward
        self.view_step, self.diagonal, self.involution = view_step, diagonal, involution
        self.replayed = replayed
        self.torch_saves = torch_saves
        self.saved_names, self.saved_static = saved_names, saved_static
        self.forward_error = forward_error
        self.expose, self.added = expose, added
        self.shapes = shapes
        self.second_order = second_order
        self.derivative = fn if derivative is None else derivative
        self.backward_name = backward_name or "".join(p.capitalize() for p in name.split("_")) + "Backward0"

    def __repr__(self):
        return f"Op({self.name})"


_NUMBERS = (bool, int, float, complex, np.generic)


def _number_array(x):
    """A number operand as a 0-d array; an int, bool or float as one device array per distinct value (a float
    keyed by its exact bits: -0.0 is not 0.0), so that a constant such as the 1.5 of `x * 1.5` is not copied to
    the device on every call."""
    kind = type(x)
    if kind is float:
        return _device_number(kind, x.hex())
    if kind is int or kind is bool:
        if not fits_int64(x):
            raise OverflowError("int too big to convert")  # as torch
        return _device_number(kind, x)
    return np.asarray(x)


def _array_operand(x):
    """An operand that is neither a Tensor nor a number (an array), as it is; a torch.Tensor is refused."""
    if is_torch_tensor(x):
        raise TypeError(TORCH_TENSOR_PASSED)
    return x


def fits_int64(x):
    return -(2**63) <= x < 2**63


@functools.lru_cache(maxsize=1024)
def _device_number(kind, key):
    return to_device(np.asarray(float.fromhex(key) if kind is float else key))


OP_LOGS = []  # the operator logs in force (checkpoint's debug mode): the innermost records each op run


def apply(op, operands, **static):
    """Run `op` on operands (Tensors or numbers) and record it when grad mode is on and any operand requires grad.

    A recorded op is deferred: its outputs are Pending values (_lazy.py), computed when read; so is any op on the
    rows of a vmap.vmap input. An op outside the graph that reads deferred values computes them now."""
    if PROFILING.on and PROFILING.claims(op):  # a profiler is recording: the op runs as its span (_profiling.py)
        return recorded_op(apply, op, operands, static)
    if OP_LOGS:
        OP_LOGS[-1].record(op, operands)
    if op.forward_error is not None:
        op = checked_forward(op, operands, _static_key(static))
    tried = False
    if DUAL_LEVELS.tangents is None:
        out = _computed_on_host(op, operands, static)
        if out is _DECLINED:
            tried = True
        elif out is not None:
            if not op.multi and not op.view:
                return Tensor._wrap(out)
            outs = out if op.multi else (out,)
            return _wrapped(op, operands, _static_key(static), outs, [differentiable(o.dtype) for o in outs], None)
    static = _static_key(static)
    previous = swap_x64(True)
    try:
        if DUAL_LEVELS.tangents is not None:  # a forward-mode AD level is open (_dual.py)
            return apply_dual(_apply, op, operands, static)
        return _apply(op, operands, static, tried)
    finally:
        set_x64(previous)


def _static_key(static):
    """An op's static params (a dict) as the sorted tuple of their items that keys its kernels and signatures."""
    return tuple(static.items()) if len(static) < 2 else tuple(sorted(static.items()))


_DECLINED = object()  # _computed_on_host's answer where the host form was tried on these operands and does not apply


def _computed_on_host(op, operands, static):
    """The output of `op` (a tuple for a multi-output op) computed now by its host form (hand-written or derived), on
    its static params `static` (a dict), without entering JAX's 64-bit mode nor moving a number operand to the
    device; None where the op is recorded or deferred, or an operand is not a concrete, unshared value on the
    host's device or a float or int (then `_apply` decides); _DECLINED where the host form does not apply to these
    operands (then the op runs as its kernel). One pass over the operands, which also tells whether they all have
    the op's float dtype, so that the NumPy function of its host form runs as it is (Op.numpy): this is every eager
    op's path."""
    numpy_fn = op.numpy
    dtype = limit = None
    if numpy_fn is not None:
        dtype, limit = static.get("dtype"), _host.HOST_ELEMENTS
    values, numbers = [], False
    for x in operands:
        if isinstance(x, Tensor):
            if in_graph(x) and GRAD_MODE.enabled:  # a thread-local read, the last
                return None
            v = x._v
            if type(v) is not np.ndarray or v.base is not None:  # a device array, or a view (of NumPy's memory?)
                v = host_array(v)
                if v is None:
                    return None
            if numpy_fn is not None:
                if dtype is None:
                    dtype = v.dtype  # an op without a dtype param computes in its operands' one dtype
                if v.dtype != dtype or v.size > limit:
                    numpy_fn = None
            values.append(v)
        elif type(x) is float or type(x) is int:
            kind = _number_kind(x, dtype)
            if kind is None:
                return None
            values.append(x)  # the NumPy function casts a Python number to the op's dtype, as the kernel does
            numbers = True
            numpy_fn = numpy_fn if kind else None
        else:
            return None
    if not outside_every_trace() or cpu_device_set() is None:  # _host.ops_run_on_host, on every eager op's path
        return None
    if numpy_fn is not None and dtype in HOST_FLOATS:
        token = ignore_float_errors()
        try:
            out = np.asarray(numpy_fn(*values))  # a NumPy scalar (np.dot's) as a 0-d array
        finally:
            restore_float_errors(token)
        if out.dtype == dtype:  # else NumPy before 2.0 promoted for a number's value
            return out
    out = computed_on_host(op, _number_arrays(values) if numbers else values, static)
    return _DECLINED if out is None else out


_EXACT_INTS = 2**53  # the ints float64 holds exactly


def _number_kind(x, dtype):
    """For a Python float or int operand: None where the op refuses it (an int beyond int64's range), True where the
    host form's NumPy function may take it as it is (the op has a dtype param, and an int is one float64 holds
    exactly: NumPy would round a larger one twice, through float64), else False."""
    if type(x) is int and not fits_int64(x):
        return None
    return dtype is not None and (type(x) is float or -_EXACT_INTS <= x <= _EXACT_INTS)


def _number_arrays(values):
    """The host operands with their Python numbers as 0-d arrays, as host forms take them."""
    return [np.asarray(v) if type(v) is float or type(v) is int else v for v in values]


def apply_in_place(op, tensor, *others, **static):
    """`tensor` holding op(tensor, *others, **static) computed now on the host, as do its plain aliases (detach(),
    .data, a .grad: InPlace._aliases), its version bumped: the whole of an in-place op where nothing else follows
    from it (no graph, other views, tangents nor transform that watches the write: the caller checks that), which
    is then the op's own in-place lane (an `in_place` attribute of its function, that the in-place method tries
    first). None where that does not hold, or the result would not fit `tensor` as it is, or computing it fails:
    the caller takes the in-place path of _inplace.py, which covers every case and raises torch's errors."""
    if DUAL_LEVELS.tangents is not None or OP_LOGS or watching():  # the general path logs the op, tells the watcher
        return None
    aliases = () if tensor._view is None and not tensor._views else tensor._aliases()
    if aliases is None:
        return None
    try:
        out = _computed_on_host(op, (tensor, *others), static)
    except Exception:  # operands that do not broadcast, say: the general path says so in torch's words
        return None
    held = tensor._v
    if type(out) is not np.ndarray or out.shape != held.shape or out.dtype != held.dtype:
        return None
    tensor._v = out
    for alias in aliases:
        alias._v = out
    tensor._counter.value += 1
    return tensor


def _apply(op, operands, static, host_tried=False):
    arrays, recording, pending, mapped, meta, host_data = [], False, False, False, False, []
    for x in operands:  # one pass: the arrays, and whether the op is recorded or reads deferred or meta values
        if isinstance(x, Tensor):
            a = x._v
            if type(a) is np.ndarray:
                if is_shared(a):
                    a = host_read(x, a)  # a copy: the user may write into it later
                else:
                    host_data.append(len(arrays))
            recording = recording or in_graph(x)
        else:
            a = _number_array(x) if isinstance(x, _NUMBERS) else _array_operand(x)
        kind = type(a)
        if kind is Pending:
            pending, mapped = True, mapped or a.call.mapped
        elif kind is MetaValue:
            meta = True
        elif kind is NoDenseValue:
            raise RuntimeError(SPARSE_NOT_PROVIDED)
        arrays.append(a)
    recording = recording and is_recording() and _any_normal(op, operands)
    deferred = recording or pending
    # a recorded or deferred op runs on the host when computed (_lazy)
    outs = None if deferred or host_tried else on_host(op, arrays, static)
    if host_data and outs is None:
        _read_host_data(operands, arrays, host_data)
    if outs is not None:
        return _wrapped(op, operands, static, outs, [differentiable(o.dtype) for o in outs], None)
    if not deferred:
        return _wrapped(op, operands, static, *_computed_now(op, operands, arrays, static), None)
    if meta:
        return _wrapped(op, operands, static, *_on_meta(op, operands, arrays, static, recording))
    outs = defer(op, static, arrays, mapped)  # computed when read, fused with what reads it
    if not outs:  # a multi-output op with no outputs (a backward program whose inputs are all unreached)
        return ()
    return _wrapped(op, operands, static, *_deferred_results(op, operands, arrays, outs, recording, mapped))


def _any_normal(op, operands):
    """Whether `op` on `operands` is recorded outside inference mode, as torch's autograd runs for it (it does not
    for inference tensors alone): some operand is a normal tensor, or a Python number that torch takes as a tensor
    input (wrapped as a normal tensor), not one it takes as a Scalar (past the op's `inputs`)."""
    first = operands[0]
    if isinstance(first, Tensor) and type(first._counter) is not InferenceCounter:  # the common case, settled
        return True
    inputs = op.inputs
    for k, x in enumerate(operands):
        if isinstance(x, Tensor):
            if type(x._counter) is not InferenceCounter:
                return True
        elif inputs is None or k < inputs:
            return True
    return False


def _read_host_data(operands, arrays, host_data):
    """The host arrays read by a kernel, or kept by a deferred op: moved to the device on a second read (moved
    already where the op reads the tensor twice)."""
    for i in host_data:
        v = operands[i]._v
        arrays[i] = host_read(operands[i], v) if type(v) is np.ndarray else v


def _deferred_results(op, operands, arrays, outs, recording, mapped):
    """(outputs, which are differentiable, the node recorded or None) of a deferred op."""
    sig = outs[0].call.sig
    gradients, node = sig.differentiable, None
    if recording:
        linked = -1
        if op.reads is not None:  # a recorded backward: each output links only to the operands it reads
            gradients, linked = _links(gradients, links_of(sig), operands)
        if True in gradients:
            node = node_class(sig)(outs[0].call, operands, arrays, linked)
    elif not mapped:  # outside the graph (and vmap.vmap): compute now, as a chain of
        outs = [materialize(p) for p in outs]  # such ops would keep all its deferred inputs alive
    return outs, gradients, node


def _computed_now(op, operands, arrays, static):
    """(outputs, which are differentiable) of an op outside the graph, by its kernel."""
    try:
        out = kernel(op, static)(*arrays)
    except TypeError:  # an operand JAX does not take: a meta tensor's value, or a real error
        if MetaValue not in map(type, arrays):
            raise
        outs, gradients, _ = _on_meta(op, operands, arrays, static, False)
        return outs, gradients
    outs = out if op.multi else (out,)
    if outs and isinstance(outs[0], jax.core.Tracer):
        outs = _concrete_if_untraced(op, static, arrays, outs)
    return outs, [differentiable(o.dtype) for o in outs]


def _wrapped(op, operands, static, outs, gradients, node):
    """The op's result Tensors (views of the first operand for a view op), checked where torch checks them."""
    if not op.multi and not op.view:  # the common case: one output, not a view
        result = Tensor._wrap(outs[0], node if gradients[0] else None)
        if node is not None and op.torch_saves is not SAVES_INPUT:
            node.check_where_torch_does([result])
        return result
    results = [Tensor._wrap(o, node if d else None, i) for i, (o, d) in enumerate(zip(outs, gradients))]
    if node is not None and op.torch_saves is not SAVES_INPUT:
        node.check_where_torch_does(results)
    if op.view and isinstance(operands[0], Tensor):
        step_op, step_static = op.view_step(operands, **dict(static)) if op.view_step else (op, static)
        for k, r in enumerate(results):
            _make_view(operands[0], r, (step_op, step_static, k))
            note_view(operands[0], r, op.multi)
    return tuple(results) if op.multi else results[0]


def _on_meta(op, operands, arrays, static, recording):
    """(outputs, which link to the node, node) of `op` on operands of which some are meta tensors: meta values of
    the shapes and dtypes jax.eval_shape finds, and the node recorded as for any op (its backward gives meta
    gradients)."""
    check_devices(op, [x for x in operands if isinstance(x, Tensor)])
    return _meta_results(op, operands, arrays, static, recording)


def _meta_results(op, operands, arrays, static, recording):
    sig = shapes_of(op, signature, static, arrays)
    outs = [meta_value(shape, dtype) for shape, dtype in sig.out_avals]
    gradients, node = sig.differentiable, None
    if recording:
        call = Call(sig, None)
        call.result = tuple(outs)  # complete: nothing to compute
        linked = -1
        if op.reads is not None:
            gradients, linked = _links(gradients, links_of(sig), operands)
        if True in gradients:
            node = node_class(sig)(call, operands, arrays, linked)
    return outs, gradients, node


def apply_onto_meta(op, tensor, **static):
    """`op` (whose function is `onto_meta`) on a tensor of any device, with a meta result: the one op whose operand
    and result may be on different devices."""
    previous = swap_x64(True)
    try:
        recording = _requires_grad(tensor) and is_recording()
        (out,), (linked,), node = _meta_results(op, [tensor], [tensor._v], tuple(static.items()), recording)
        return Tensor._wrap(out, node if linked else None)
    finally:
        set_x64(previous)


def _concrete_if_untraced(op, static, arrays, outs):
    """`outs`, the traced outputs of op on `arrays`, computed again outside the trace when no array is a tracer: they
    may be kept after it (an in-place op on a tensor made before the trace), so must not be tracers (_tracing.py)."""
    if any([isinstance(a, jax.core.Tracer) for a in arrays]):
        return outs
    host = host_arrays(arrays, in_trace=True)
    with jax.ensure_compile_time_eval():
        found = None if host is None else computed_on_host(op, host, dict(static))  # no eager compile per op and shape
        if found is not None:
            return found if op.multi else (found,)
        out = kernel(op, static)(*arrays)
    return out if op.multi else (out,)


def _requires_grad(x):
    return isinstance(x, Tensor) and (x.grad_fn is not None or x.requires_grad)


@functools.lru_cache(maxsize=8192)
def reads_of(sig):
    """Per output of `sig`, a bitmask of the operands it reads, for an op with `reads`; else None."""
    reads = sig.op.reads
    return None if reads is None else reads(**dict(sig.static))


@functools.lru_cache(maxsize=8192)
def links_of(sig):
    """Per output of `sig`, a bitmask of the operands it links to, for an op with `reads`; else None."""
    links = sig.op.links
    return None if links is None else links(**dict(sig.static))


def _links(differentiable, reads, operands):
    """Which outputs of a recorded backward link to the graph (the differentiable ones that read an operand which
    requires grad), and a bitmask of the operands that those outputs read."""
    requiring = sum([1 << i for i, x in enumerate(operands) if _requires_grad(x)])
    linked = [d and reads[k] & requiring != 0 for k, d in enumerate(differentiable)]
    return linked, functools.reduce(int.__or__, [r for r, link in zip(reads, linked) if link], 0)


def _read_by(want, reads, outputs):
    """The operands of `want` that the given outputs read."""
    mask = functools.reduce(int.__or__, [reads[k] for k in outputs], 0)
    return tuple([i for i in want if mask >> i & 1])


def _make_view(src, view, step):
    root, chain = src._view if src._view is not None else (src, ())
    view._view = (root, chain + (step,))
    view._counter = root._counter
    remember_view(root, view)
    if chain and DETACH in chain:  # a view of a detached tensor: its base is no tensor of the chain
        note_base(view, src)


class VjpSpec(NamedTuple):
    """Static description of one node's VJP; `batch` is None, or (chunk_size,) for batched cotangents."""

    sig: Signature  # the op, its static params and operand avals
    saved_mask: tuple  # which operands are saved (the others are not needed)
    want: tuple  # the operands that get a gradient
    ct_mask: tuple  # which differentiable outputs (sig.diff_outs) have a cotangent
    batch: tuple = None


# one object per distinct spec: the structural keys that hold specs compare them by identity
_vjp_spec = functools.lru_cache(maxsize=8192)(VjpSpec)


def _vjp_fn(*args, spec):
    sig, saved_mask, want, ct_mask, batch = spec
    if batch is not None:  # cotangents carry a leading batch axis; saved values do not
        n = sum(saved_mask)
        row_spec = spec._replace(batch=None)
        row = lambda *a: _vjp_fn(*a, spec=row_spec)
        return map_rows(row, args[n:], batch.chunk_size, batch.shards, shared=args[:n])
    args = iter(args)
    primals = [next(args) if s else jnp.zeros(shape, dtype) for (shape, dtype), s in zip(sig.avals, saved_mask)]
    cts = [next(args) if m else None for m in ct_mask]
    op, fn = sig.op, functools.partial(sig.op.derivative, **dict(sig.static))

    def f(*diff):
        full = list(primals)
        for i, d in zip(want, diff):
            full[i] = d
        out = fn(*full)
        outs = out if op.multi else (out,)
        return tuple(outs[k] for k in sig.diff_outs)

    outs, pullback = jax.vjp(f, *[primals[i] for i in want])
    cts = tuple(jnp.zeros_like(o) if c is None else jnp.conj(c) for o, c in zip(outs, cts))
    return tuple(jnp.conj(g) for g in pullback(cts))


def vjp_reads(spec):
    """Per gradient of a VJP (one per operand in `spec.want`), a bitmask of the VJP's arguments it reads: its
    saved operands, then its cotangents (the arguments of _vjp_fn)."""
    return _vjp_reads(_vjp_spec(*spec[:4]))  # the rows of a batch read what one row reads


@functools.lru_cache(maxsize=8192)
def _vjp_reads(spec):
    declared = _declared_reads(spec)
    if declared is not None:
        return declared
    sig = spec.sig
    avals = [a for a, s in zip(sig.avals, spec.saved_mask) if s]
    avals += [sig.out_avals[k] for k, m in zip(sig.diff_outs, spec.ct_mask) if m]
    return output_reads(functools.partial(_vjp_fn, spec=spec), avals, differentiable_only=True)


@functools.lru_cache(maxsize=8192)
def _vjp_copies(spec):
    """Per gradient of a VJP, the position among its cotangent arguments of the one it is exactly (torch's formulas
    `grad` for add, sub, clone: no node between them), or -1."""
    if _declared_reads(spec) is not None:  # a rule that declares its reads passes no cotangent through
        return (-1,) * len(spec.want)
    sig = spec.sig
    avals = [a for a, s in zip(sig.avals, spec.saved_mask) if s]
    avals += [sig.out_avals[k] for k, m in zip(sig.diff_outs, spec.ct_mask) if m]
    n = sum(spec.saved_mask)
    copies = output_copies(functools.partial(_vjp_fn, spec=spec), avals)
    return tuple([c - n if c >= n else -1 for c in copies])


def _declared_reads(spec):
    """vjp_reads as the op's host VJP rule declares it (its `reads`: per operand, the operands its gradient reads
    besides the cotangent), without tracing the VJP; None where the rule declares none for these static params, or
    for a spec it does not cover (no cotangent given, an operand it reads not saved, other dtypes)."""
    declared = getattr(spec.sig.op.host_vjp, "reads", None)
    sig = spec.sig
    if declared is None or len(sig.out_avals) != 1 or not spec.ct_mask[0]:
        return None
    per_operand = declared(sig.static)
    if per_operand is None or any([dtype not in HOST_FLOATS for _, dtype in sig.avals + sig.out_avals]):
        return None
    position = {i: k for k, i in enumerate([i for i, s in enumerate(spec.saved_mask) if s])}
    cotangent = 1 << len(position)
    masks = []
    for w in spec.want:
        if any([j not in position for j in per_operand[w]]):
            return None
        masks.append(functools.reduce(int.__or__, [1 << position[j] for j in per_operand[w]], cotangent))
    return tuple(masks)


def vjp_links(spec):
    """Per gradient of a VJP, a bitmask of the VJP's arguments it links to: those it reads, and for a fused op the
    operands torch's backward node reads (Fused.links) and the cotangents."""
    reads, fused = vjp_reads(spec), spec.sig.op.fused
    if fused is None:
        return reads
    args = [i for i, s in enumerate(spec.saved_mask) if s]  # the saved operands, as the VJP's first arguments
    links = fused.links(spec.sig)
    linked = [sum([1 << k for k, i in enumerate(args) if links[w] >> i & 1]) for w in spec.want]
    return tuple([r | (m and m | _cotangent_args(spec)) for r, m in zip(reads, linked)])


def vjp_dependencies(spec):
    """Per gradient of a VJP, a bitmask of the VJP's arguments it gets a gradient for: those it reads; for a fused
    op whose node's derivative gives zeros where a gradient does not depend on an input, those it links to; and a
    fused op's bias gradient, the cotangent summed, depends on the cotangent only (the jaxpr walk sees more where
    one product computes it with the weight's)."""
    fused = spec.sig.op.fused
    if fused is not None and fused.zeros:
        return vjp_links(spec)
    bias = None if fused is None else fused.bias_of(spec.sig)
    return tuple([r & _cotangent_args(spec) if w == bias else r for w, r in zip(spec.want, vjp_reads(spec))])


def _cotangent_args(spec):
    """A bitmask of a VJP's cotangent arguments (they follow its saved operands)."""
    return ((1 << sum(spec.ct_mask)) - 1) << sum(spec.saved_mask)


def _vjp_on_host(*args, spec):
    """A node's VJP with NumPy: a one-output op's by its host_vjp (of batched cotangents too where the rule takes
    their rows: its `rows` attribute), any other's, or one the rule declines, derived from its jaxpr (None where it
    has none: _numpy_eval.py)."""
    sig, saved_mask, want, ct_mask, batch = spec
    rule, multi = sig.op.host_vjp, sig.op.multi
    if rule is None or batch is not None and (multi or not _rows_taken(rule, batch, ct_mask)):
        return derived_vjp(_vjp_fn, spec, args)
    n = sum(saved_mask)
    saved = iter(args[:n])
    operands = [next(saved) if s else None for s in saved_mask]
    if multi:  # a cotangent per differentiable output, None where not given
        given = iter(args[n:])
        ct = [next(given) if m else None for m in ct_mask]
    else:
        ((shape, dtype),) = sig.out_avals
        ct = args[n] if ct_mask[0] else np.zeros(shape, dtype)
    grads = rule(ct, operands, sig.avals, **dict(sig.static))
    if grads is None:  # the rule does not apply (a large or non-float operand)
        return derived_vjp(_vjp_fn, spec, args)
    return tuple([np.asarray(grads[i], sig.avals[i][1]) for i in want])


def _rows_taken(rule, batch, ct_mask):
    """Whether a host VJP rule computes batched cotangents, all rows at once (not in chunks nor over devices)."""
    return getattr(rule, "rows", False) and ct_mask[0] and batch.chunk_size is None and batch.shards is None


def _vjp_shapes(avals, *, spec):
    """A VJP's gradients: one per operand in `spec.want`, of its aval (the rows of batched cotangents first, the
    leading axis of its first cotangent argument), as jax.vjp gives them; None for rows split over devices."""
    if spec.batch is not None and spec.batch.shards is not None:
        return None
    lead = () if spec.batch is None else (avals[sum(spec.saved_mask)][0][0],)
    return tuple([(lead + tuple(spec.sig.avals[i][0]), spec.sig.avals[i][1]) for i in spec.want])


VJP = Op("vjp", _vjp_fn, multi=True, reads=vjp_dependencies, links=vjp_links, host=_vjp_on_host, shapes=_vjp_shapes)


@functools.lru_cache(maxsize=8192)
def _layout(sig, grads):
    """The operands that get a gradient (`grads`: a bool per operand), and which ones the node saves. A linear op's
    VJP needs only its integer operands (indices, masks) and the numbers past its inputs (add's alpha), never its
    inputs' float values; a multilinear op's VJP needs an operand only when another operand gets a gradient (none
    where only its added terms do); a fused op saves them all."""
    op = sig.op
    want = tuple([i for i, g in enumerate(grads) if g])
    added = _added_operands(sig)
    if op.fused is not None:  # torch's backward node saves every input it reads
        return want, tuple([i not in added for i in range(len(grads))])
    factors = [i for i in want if i not in added]
    if added and not factors and op.multilinear is True:  # only added terms get a gradient: the cotangent's own
        return want, tuple([not (i in added or d) for i, d in enumerate(sig.in_differentiable)])
    alone = op.multilinear if len(factors) == 1 else False  # True, the operands it is linear in, or False
    inputs = len(grads) if op.inputs is None else op.inputs
    return want, tuple(
        [
            i not in added
            and not (d and ((op.linear and i < inputs) or (g and alone and (alone is True or i in alone))))
            for i, (d, g) in enumerate(zip(sig.in_differentiable, grads))
        ]
    )


def _added_operands(sig):
    """The operands of `sig` that enter its result only as an added term (Op.added), which no node saves."""
    op = sig.op
    if op.fused is not None and not op.fused.reads_bias:
        bias = op.fused.bias_of(sig)
        return () if bias is None else (bias,)
    return () if op.added is None else op.added(sig)


def _backward_name(sig):
    name = sig.op.backward_name
    return name if type(name) is str else name(sig)


def _node_name(sig):
    """torch's name of the node recording `sig`; a recorded backward (create_graph=True) is named as torch's node
    that makes the gradient (GRADIENT_NODES), else after the op it differentiates, as torch's TanhBackwardBackward0."""
    if sig.op is VJP:
        name = _backward_name(dict(sig.static)["spec"].sig)
        if name in GRADIENT_NODES:
            return GRADIENT_NODES[name]
        return name[:-1] + "Backward0" if name.endswith("Backward0") else name + "Backward"
    return _backward_name(sig)


_NODE_CLASSES = {}


@functools.lru_cache(maxsize=8192)
def node_class(sig):
    """The class of the nodes recording `sig`: an OpNode subclass per torch name, named as torch's node class
    (type(grad_fn).__name__ is AddBackward0, CopyBackwards), as graph printers show it."""
    name = _node_name(sig)
    made = _NODE_CLASSES.get(name)
    if made is None:
        short = name.split("::")[-1]
        attributes = {"__slots__": (), "torch_name": name, "__module__": OpNode.__module__, "__qualname__": short}
        made = _NODE_CLASSES[name] = type(short, (OpNode,), attributes)
    return made


@functools.lru_cache(maxsize=256)
def _save_order(names, count):
    """The positions of `count` operands in the order torch's node saves them (pack hooks see them in this order)
    and its backward reads them: its generated code sorts the saved inputs by name (mul saves `other`, then
    `self`); operands it does not name follow in their order."""
    named = sorted((name, i) for i, name in enumerate(names) if name is not None)
    return tuple([i for _, i in named] + [i for i in range(count) if i >= len(names) or names[i] is None])


def _saved_operand(op, index, operand, array):
    """What a node saves of operand `index`: a Tensor's SavedValue; an operand given as a number or a list as a
    SavedValue too where torch makes it a tensor it saves (freed with the graph), else as it is."""
    if isinstance(operand, Tensor):  # the saved-tensor hooks see only what torch's node saves (exp: its result)
        return SavedValue(operand, hooks=index > 0 or "input" in op.torch_saves)
    return SavedValue.of_operand(array) if _freed_with_graph(op, index, array) else array


def _freed_with_graph(op, index, array):
    """Whether torch saves an operand given as a number or a list as a tensor: one of its inputs (not a Scalar past
    `Op.inputs`), other than a number of a linear op, whose VJP reads only its index and mask operands (add's
    integer `other` is saved here but read by no VJP, and torch saves none)."""
    return (op.inputs is None or index < op.inputs) and not (op.linear and np.ndim(array) == 0)


def node_after_the_fact(sig, edges, sequence_nr):
    """A node of the op `sig` (a linear one: it saves nothing) whose operands' edges are `edges`, made after the
    nodes it leads to were recorded, with the sequence number `sequence_nr` (which its place among them gives)."""
    node = node_class(sig).__new__(node_class(sig))
    _graph.Node.__init__(node, edges, sig.out_avals)
    node.sequence_nr, node.sig, node.call, node.saved_results = sequence_nr, sig, None, ()
    node.want, node.saved_mask = _layout(sig, tuple([e is not None for e in edges]))
    node.saved = (None,) * len(edges)
    return node


class OpNode(_graph.Node):
    """A node recorded by `apply`; its backward applies the op's VJP as another op (so it can be recorded)."""

    __slots__ = ("sig", "saved", "saved_mask", "want", "call", "saved_results")

    def __init__(self, call, operands, arrays, linked=-1):
        """`linked`: a bitmask of the operands that get an edge (among those that require grad)."""
        sig, edges = call.sig, []
        for i, x in enumerate(operands):
            edges.append(_graph.edge_of(x) if linked >> i & 1 and isinstance(x, Tensor) else None)
        edges = tuple(edges)
        super().__init__(edges, sig.out_avals)
        self.sig, self.call = sig, call  # call: the deferred forward (a fused backward runs it)
        self.saved_results = ()  # the outputs torch's node saves (check_where_torch_does)
        self.want, self.saved_mask = _layout(sig, tuple([e is not None for e in edges]))
        if sig.op.inputs is not None:  # trailing number operands: no edge, as torch's node has none for them
            self.edges = edges[: sig.op.inputs]
        saved = [None] * len(operands)
        for i in _save_order(sig.op.saved_names, len(operands)):
            if self.saved_mask[i]:
                saved[i] = _saved_operand(sig.op, i, operands[i], arrays[i])
        self.saved = tuple(saved)

    torch_name = None  # set by each subclass (node_class)

    @property
    def next_functions(self):
        expose = self.sig.op.expose
        if expose is not None:
            expose(self)
        return _graph.Node.next_functions.fget(self)

    def rewire(self, sig, edges, saved):
        """Stand for the op `sig` on operands with `edges` and `saved` values from now on, as the same node (its
        identity and hooks stay). Its deferred forward call is that of the op it stood for: a fused program reads its
        saved values instead."""
        self.sig, self.edges, self.saved, self.call = sig, edges, saved, None
        self.want, self.saved_mask = _layout(sig, tuple([e is not None for e in edges]))

    def name(self):
        return self.torch_name or _node_name(self.sig)

    def saved_values(self):
        return [s for s in self.saved if type(s) is SavedValue]

    def check_where_torch_does(self, results):
        """Version-check what torch saves (Op.torch_saves) among the first operand and the `results` (Tensors, in
        output order): the results it saves are saved here too, as outputs (read by _saved_result, not by the VJP,
        which reads the operands)."""
        saves, first = self.sig.op.torch_saves, self.saved[0]
        if "input" not in saves and type(first) is SavedValue:  # an in-place change of it leaves this backward
            first.counter, first.version, first.original = _graph.UNCHANGING, 0, None  # valid: not torch's
        self.saved_results = tuple(
            [SavedValue(r, self) for r in results if ("result" if r.grad_fn is self else "indices") in saves]
        )

    def check_results(self):
        for s in self.saved_results:
            if s.packed is None and s.counter.value != s.version:  # torch checks no version of a packed one
                shape, dtype = self.sig.out_avals[s.output_nr]
                node = self if s.requires_grad else None  # torch names no node for indices
                raise modified_error(shape, dtype, node, s.counter.value, s.version, s.output_nr)

    def release(self):
        super().release()
        for s in self.saved_results:
            s.free()
        self.call = None

    def torch_saved(self):
        from ._saved_names import torch_saved

        return torch_saved(self)

    def spec(self, ct_mask, batch=None, needed=None):
        """The VJP's spec for cotangents on the outputs of `ct_mask`: gradients for the operands they read (of those
        whose edge is `needed`, a bool per edge, where given)."""
        sig, want = self.sig, self.want
        if sig.op.reads is not None:
            want = _read_by(want, reads_of(sig), [k for k, m in zip(sig.diff_outs, ct_mask) if m])
        if needed is not None:
            want = tuple([i for i in want if needed[i]])
        return _vjp_spec(sig, self.saved_mask, want, ct_mask, batch)

    def _unpacked(self, create_graph):
        """The saved operands' values (those saved, in operand order), read in the order torch's node reads them;
        then the results torch saves are unpacked as its node does (their unpack hooks run), though the VJP here
        reads the operands only."""
        expose = self.sig.op.expose
        if expose is not None and any(type(s) is SavedValue and s.stale() for s in self.saved):
            expose(self)  # torch's in-place error names what its node saved (linear's weight.t())
        values = list(self.saved)
        for i in _save_order(self.sig.op.saved_names, len(values)):
            if isinstance(values[i], SavedValue):
                values[i] = values[i].unpack(create_graph)
        for s in self.saved_results:
            if s.packed is not None:
                s.unpack(create_graph)
        return [v for v, s in zip(values, self.saved) if s is not None]

    def backward(self, cotangents, create_graph, batch=None):
        return self.backward_needed(cotangents, create_graph, batch, None)

    def backward_needed(self, cotangents, create_graph, batch, needed):
        cts = [cotangents[k] for k in self.sig.diff_outs]
        ct_mask = tuple(c is not None for c in cts)
        self.check_results()
        saved = self._unpacked(create_graph)
        spec = self.spec(ct_mask, None if batch is None else batch.kernel_key, needed)
        want = spec.want
        if not want:  # backward(inputs=...) runs an input's node that leads to no other input: nothing to compute
            return [None] * len(self.edges)
        given = [c for c in cts if c is not None]
        copies = _vjp_copies(spec._replace(batch=None)) if create_graph and not self.sig.op.view else ()
        if copies and -1 not in copies:  # every gradient is a cotangent as it is: no node for them, as torch's
            grads = [given[c] for c in copies]
        else:
            grads = apply(VJP, saved + given, spec=spec)
            grads = [given[c] if c >= 0 else g for c, g in itertools.zip_longest(copies, grads, fillvalue=-1)]
        result = [None] * len(self.edges)
        for i, g in zip(want, grads):
            result[i] = g
        if create_graph and self.sig.op.second_order is not None:
            operands = iter(saved)
            saved_operands = [None if s is None else next(operands) for s in self.saved]
            result = self.sig.op.second_order(dict(self.sig.static), saved_operands, result)
        return result
