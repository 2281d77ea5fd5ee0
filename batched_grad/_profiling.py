"""What a profiler records while it is on: the ops `apply` runs, the backward's nodes and record_function ranges, as
timed, nested spans. `PROFILING.on` is the one flag the op path reads when no profiler records (a module attribute:
one check per op); while it is set, `_ops._core.apply` and the engine hand each op and node to `recorded_op` /
`evaluated_node`, which time it between perf_counter_ns readings, its outputs computed inside the span (a recorded
op's deferred result, JAX's asynchronous dispatch), so that a span's time is the op's own."""

import threading
import time
import traceback

import jax

from . import _lazy
from ._lazy import Pending
from ._tensor import Tensor

ENGINE_PREFIX = "autograd::engine::evaluate_function: "
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"

# the ops whose torch (ATen) name is not "aten::" + their row's name; rows of batched_grad's own machinery have none
_TORCH_NAMES = {
    "to_copy": "aten::_to_copy",
    "neg_view": "aten::_neg_view",
    "cross_entropy": "aten::cross_entropy_loss",
    "multi_dot": "aten::linalg_multi_dot",
    **{
        name: "aten::special_" + name
        for name in (
            "bessel_j0",
            "bessel_j1",
            "entr",
            "erfcx",
            "i0e",
            "i1",
            "i1e",
            "log_ndtr",
            "modified_bessel_i0",
            "modified_bessel_i1",
            "ndtr",
            "ndtri",
            "spherical_bessel_j0",
            "xlog1py",
            "zeta",
        )
    },
}
# rows that are batched_grad's machinery or composites torch runs as several ATen ops: named in its own namespace
OWN_ROWS = frozenset(
    {
        "_binomial_by_jax",
        "_drawn_by_jax",
        "adaptive_max_pool_indices",
        "backward_program",
        "backward_segment",
        "copy_slices",
        "copy_slices_of",
        "dirichlet_draw",
        "forward_jacobian",
        "gamma_draw",
        "gaussian_nll_loss",
        "jvp",
        "leaky_rrelu",
        "lu_info",
        "lu_permutation",
        "max_pool_indices",
        "multilabel_soft_margin_loss",
        "normalize",
        "rnn_layer",
        "rows_of",
        "select_row",
        "upsample",
        "vjp",
    }
)


def torch_name(op):
    """The name a profiler shows for the op row `op`: torch's ATen name, or batched_grad's for its own rows (and
    for the rows made at run time: forward-mode tangents, jax_function's)."""
    if op.name in OWN_ROWS or op.name.endswith("_jvp") or str(op.backward_name).startswith("JaxFunction_"):
        return "batched_grad::" + op.name
    return _TORCH_NAMES.get(op.name) or "aten::" + op.name


class Span:
    """One timed range: an op, a backward node or a record_function, with the spans that ran inside it."""

    __slots__ = (
        "name",
        "start_ns",
        "end_ns",
        "thread",
        "shapes",
        "stack",
        "children",
        "parent",
        "kind",
        "id",
        "args",
        "sequence_nr",
        "fwd_thread",
        "bytes",
    )

    def __init__(self, name, kind, thread, shapes, stack, parent, id):
        self.name, self.kind, self.thread, self.shapes, self.stack = name, kind, thread, shapes, stack
        self.parent, self.children, self.id, self.args = parent, [], id, None
        self.sequence_nr, self.fwd_thread = -1, 0  # an op's node, a backward span's node; the node's forward thread
        self.bytes = 0  # the bytes of the arrays an op made (profile_memory)
        self.start_ns = self.end_ns = None


class Session:
    """The spans recorded between a profiler's start and stop, each thread's open spans kept on its own stack."""

    def __init__(self, record_shapes, with_stack, profile_memory=False):
        self.record_shapes, self.with_stack, self.profile_memory = record_shapes, with_stack, profile_memory
        self.spans, self.open, self.lock = [], {}, threading.Lock()
        self.forward_threads = {}  # sequence_nr -> the thread whose op recorded that node
        self.start_ns, self.wall_start_ns = time.perf_counter_ns(), time.time_ns()
        self.end_ns = None

    def enter(self, name, kind, shapes=()):
        thread = threading.get_ident()
        stack = self.open.setdefault(thread, [])
        parent = stack[-1] if stack else None
        frames = _user_frames() if self.with_stack and kind != "user_annotation" else ()
        with self.lock:
            span = Span(name, kind, thread, list(shapes) if self.record_shapes else [], frames, parent, len(self.spans))
            self.spans.append(span)
        if parent is not None:
            parent.children.append(span)
        stack.append(span)
        span.start_ns = time.perf_counter_ns()
        return span

    def exit(self, span):
        span.end_ns = time.perf_counter_ns()
        stack = self.open.get(span.thread)
        if stack and stack[-1] is span:
            stack.pop()
        elif stack and span in stack:  # a range closed out of order (record_function exited late): its inner ones too
            del stack[stack.index(span) :]


def _user_frames():
    """The caller's stack, innermost first, without batched_grad's own frames, as torch's `file(line): function`."""
    own = __file__.rsplit("/", 1)[0]
    frames = [f for f in traceback.extract_stack()[:-3] if not f.filename.startswith(own)]
    return [f"{f.filename}({f.lineno}): {f.name}" for f in reversed(frames)]


class _State:
    """The flag the op path checks, the session it records into, and each thread's hand-over marker."""

    def __init__(self):
        self.on = False
        self.session = None
        self._local = threading.local()

    def claims(self, key):
        """Whether the op or node `key` reaching its entry point is to be recorded: not when recorded_op or
        evaluated_node is handing it back to be run (the marker is cleared, so what it runs in turn is recorded)."""
        local = self._local
        if getattr(local, "handing", None) is key:
            local.handing = None
            return False
        return True

    def hand(self, key):
        self._local.handing = key


PROFILING = _State()


def start(session):
    """Record into `session` from now on; one session at a time."""
    if PROFILING.session is not None:
        raise RuntimeError(
            "A profiler is already recording: batched_grad records into one profiler at a time; stop it before "
            "starting another"
        )
    PROFILING.session = session
    _lazy._fusing.append(False)  # per-op and per-node runs while recording: each op's time is its own
    PROFILING.on = True


def stop(session):
    if PROFILING.session is not session:
        raise RuntimeError("Can't disable Kineto profiler when it's not running")
    PROFILING.on = False
    PROFILING.session = None
    _lazy._fusing.remove(False)
    session.end_ns = time.perf_counter_ns()


def _shape_of(x):
    return list(x.shape) if isinstance(x, Tensor) else []


def _torch_order(op_name, shapes):
    """Operand shapes in the order of torch's arguments: linear's row takes (bias, input, weight)."""
    return shapes[1:] + shapes[:1] if op_name == "linear" and len(shapes) == 3 else shapes


def _bytes_made(result):
    """The bytes of the arrays of an op's result Tensors."""
    outs = result if isinstance(result, (tuple, list)) else (result,)
    return sum([t.numel() * t.element_size() for t in outs if isinstance(t, Tensor)])


def _note_node(session, span, result):
    """Mark an op's span with the sequence number of the node it recorded (as torch's autograd ops are)."""
    first = result[0] if isinstance(result, (tuple, list)) and result else result
    node = first._node if isinstance(first, Tensor) else None
    if node is not None and getattr(node, "sequence_nr", None) is not None:
        span.sequence_nr = node.sequence_nr
        session.forward_threads[node.sequence_nr] = span.thread


def _node_span(session, span, node):
    span.sequence_nr = node.sequence_nr
    span.fwd_thread = session.forward_threads.get(node.sequence_nr, span.thread)


def computed(result):
    """`result` (a Tensor, or a tuple or list of them), its deferred values computed and device work finished."""
    for t in result if isinstance(result, (tuple, list)) else (result,):
        if not isinstance(t, Tensor):
            continue
        v = t._v
        if type(v) is Pending and not v.call.mapped:
            v = t._held
        if isinstance(v, jax.Array) and not isinstance(v, jax.core.Tracer):
            v.block_until_ready()
    return result


def _handed(key, run, *args, **kwargs):
    """`run(*args, **kwargs)`, the entry point it reaches letting `key` through unrecorded (PROFILING.claims)."""
    PROFILING.hand(key)
    try:
        return run(*args, **kwargs)
    finally:
        PROFILING.hand(None)  # where `run` failed before its entry point claimed it


def recorded_op(apply, op, operands, static):
    """`apply(op, operands, **static)` as one span named after torch's ATen op."""
    session = PROFILING.session
    if session is None:  # stopped meanwhile (another thread)
        return _handed(op, apply, op, operands, **static)
    shapes = _torch_order(op.name, [_shape_of(x) for x in operands]) if session.record_shapes else ()
    span = session.enter(torch_name(op), "cpu_op", shapes)
    try:
        result = computed(_handed(op, apply, op, operands, **static))
        _note_node(session, span, result)
        if session.profile_memory and not op.view:  # a view makes no array: it shares its base's
            span.bytes = _bytes_made(result)
        return result
    finally:
        session.exit(span)


def evaluated_node(call, node, cotangents, *args):
    """A backward node's `call(node, cotangents, *args)` as torch's engine shows it: an evaluate_function span holding
    the node's own span."""
    session = PROFILING.session
    if session is None:
        return _handed(node, call, node, cotangents, *args)
    shapes = [_shape_of(c) for c in cotangents] if session.record_shapes else ()
    return _engine_spans(
        session, node, node.name(), shapes, lambda: computed(_handed(node, call, node, cotangents, *args))
    )


def accumulated(run, node, holder, *args):
    """A leaf's AccumulateGrad run by the engine, `run(node, holder, *args)`, as torch's engine shows it."""
    session = PROFILING.session
    if session is None:
        return _handed(node, run, node, holder, *args)

    def accumulate():
        result = _handed(node, run, node, holder, *args)
        computed(node.variable.grad)
        return result

    shapes = [_shape_of(holder[0])] if session.record_shapes else ()
    return _engine_spans(session, None, ACCUMULATE_GRAD, shapes, accumulate)


def _engine_spans(session, node, name, shapes, run):
    """`run()` inside the spans torch's engine records for a node named `name`: evaluate_function, holding the node's
    own span (with its cotangents' `shapes`); both carry the sequence number of `node` (None: AccumulateGrad's)."""
    outer = session.enter(ENGINE_PREFIX + name, "cpu_op")
    try:
        inner = session.enter(name, "cpu_op", shapes)
        if node is not None:
            _node_span(session, outer, node)
            _node_span(session, inner, node)
        try:
            return run()
        finally:
            session.exit(inner)
    finally:
        session.exit(outer)
