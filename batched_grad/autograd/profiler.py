"""batched_grad.autograd.profiler: torch.autograd.profiler's context-manager profiler over the same recording as
batched_grad.profiler (see there for what is recorded), its record_function, and emit_nvtx / emit_itt, which have
nothing to emit here."""

from .. import _profiling
from ..cuda import is_available as _gpu_available
from ..profiler import refuse_unrecorded
from ..profiler._events import EventList, FunctionEvent, FunctionEventAvg, events_of
from ..profiler._record import record_function

__all__ = ["profile", "record_function", "emit_nvtx", "emit_itt", "EventList", "FunctionEvent", "FunctionEventAvg"]


def _profiler_enabled():
    """Whether a profiler is recording now."""
    return _profiling.PROFILING.on


class profile:
    """torch.autograd.profiler.profile: records the ops, backward nodes and record_function ranges run inside it
    (when `enabled`); its results are `function_events`, key_averages(), table(), export_chrome_trace()."""

    def __init__(
        self,
        enabled=True,
        *,
        use_cuda=False,
        use_device=None,
        record_shapes=False,
        with_flops=False,
        profile_memory=False,
        with_stack=False,
        with_modules=False,
        use_kineto=False,
        use_cpu=True,
        acc_events=False,
    ):
        refuse_unrecorded(with_flops=with_flops, with_modules=with_modules)
        if not use_cpu:
            raise NotImplementedError("profile(use_cpu=False): batched_grad records host spans only (use_cpu=True)")
        if use_cuda or use_device not in (None, "cuda"):
            use_device = use_device or "cuda"
            if use_device != "cuda" or not _gpu_available():
                raise ValueError(f"profile(): the device {use_device!r} is not available to profile here")
        self.enabled, self.use_device = bool(enabled), use_device
        self.record_shapes, self.with_stack, self.acc_events = bool(record_shapes), bool(with_stack), bool(acc_events)
        self.profile_memory = bool(profile_memory)
        self.use_kineto = use_kineto  # either way the same spans are recorded
        self.entered = False
        self._session = None
        self._function_events = None

    def __enter__(self):
        if not self.enabled:
            return None
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        self._session = _profiling.Session(self.record_shapes, self.with_stack, self.profile_memory)
        _profiling.start(self._session)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if not self.enabled:
            return None
        session, self._session = self._session, None
        _profiling.stop(session)
        events = events_of(session)
        if self.acc_events and self._function_events is not None:
            self._function_events.extend(events)
        else:
            self._function_events = events
        self.entered = False
        return None

    @property
    def function_events(self):
        """The recorded spans (FunctionEvents), in the order they began; None before the profiler has run."""
        return self._function_events

    def _events(self):
        if self._session is not None:
            raise RuntimeError("Profiler didn't finish running")
        return self._function_events if self._function_events is not None else EventList((), self.profile_memory)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        if group_by_overload_name:
            raise NotImplementedError("key_averages(group_by_overload_name=True): batched_grad's ops have no overloads")
        return self._events().key_averages(group_by_input_shape, group_by_stack_n)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False):  # fmt: skip
        return self._events().table(
            sort_by=sort_by,
            row_limit=row_limit,
            max_src_column_width=max_src_column_width,
            max_name_column_width=max_name_column_width,
            max_shapes_column_width=max_shapes_column_width,
            header=header,
            top_level_events_only=top_level_events_only,
        )

    def export_chrome_trace(self, path):
        self._events().export_chrome_trace(path)

    def total_average(self):
        return self._events().total_average()

    @property
    def self_cpu_time_total(self):
        return self._events().self_cpu_time_total

    def __str__(self):
        return self.table()


class _NoEmitter:
    """emit_nvtx / emit_itt: they make torch's ops emit NVTX or ITT ranges for an external profiler (nsys, VTune);
    batched_grad's ops run as XLA programs that emit none, so entering one raises (disabled, it does nothing)."""

    tool = None

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled, self.record_shapes = enabled, record_shapes

    def __enter__(self):
        if self.enabled:
            raise NotImplementedError(
                f"{type(self).__name__}(): batched_grad's ops run as XLA programs and emit no {self.tool} ranges; use "
                "batched_grad.profiler.profile, or JAX's profiler (jax.profiler.trace) for the device's work"
            )
        return self

    def __exit__(self, *exc):
        return None


class emit_nvtx(_NoEmitter):
    tool = "NVTX"


class emit_itt(_NoEmitter):
    tool = "ITT"
