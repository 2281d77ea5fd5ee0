"""batched_grad.profiler: torch.profiler's recording of the ops a program runs, with wall times, input shapes, the
nesting of record_function ranges and the backward's nodes, as tables and Chrome traces.

What is recorded: every op batched_grad runs (named as torch's ATen op: "aten::mm"), every node the backward runs
("autograd::engine::evaluate_function: MulBackward0" holding "MulBackward0"), every record_function range and each
"ProfilerStep#n" of a schedule. While a profiler records, each op's result is computed inside its span (deferred
values computed, device work waited for) and nothing is fused across ops, so that a span's time is its op's own;
the program's results are the same. Times are host wall time (perf_counter_ns); on a GPU a span includes the
device's work on the op, and no separate device times are measured."""

import enum
import gzip
import os
import socket
import time
import warnings

from .. import _profiling
from ..cuda import is_available as _gpu_available
from ._events import EventList, FunctionEvent, FunctionEventAvg, events_of
from ._record import record_function

__all__ = [
    "profile",
    "schedule",
    "supported_activities",
    "tensorboard_trace_handler",
    "ProfilerAction",
    "ProfilerActivity",
    "kineto_available",
    "record_function",
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
]


class ProfilerActivity(enum.Enum):
    """What a profiler records: CPU (the host's ops), CUDA (a GPU's, where JAX has one)."""

    CPU = 0
    XPU = 1
    CUDA = 2
    HPU = 3
    MTIA = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    """What a schedule asks of a step: nothing, warm up, record, or record and hand the trace to on_trace_ready."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities():
    """The activities a profiler can record here: CPU, and CUDA where JAX has a GPU."""
    return {ProfilerActivity.CPU, ProfilerActivity.CUDA} if _gpu_available() else {ProfilerActivity.CPU}


def kineto_available():
    """False: batched_grad records its own spans (no Kineto library)."""
    return False


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """A profiler schedule: skip `skip_first` steps, then cycle through `wait` steps unrecorded, `warmup` steps
    unrecorded, `active` steps recorded (the last one hands the trace to on_trace_ready), `repeat` times (0: until
    the profiler stops). With `skip_first_wait`, the first cycle has no wait."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} (need >= 0), "
            f"active={active} (need > 0), repeat={repeat} (need >= 0), skip_first={skip_first} (need >= 0)."
        )
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results", stacklevel=2)
    cycle = wait + warmup + active

    def action(step):
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step = step - skip_first + (wait if skip_first_wait else 0)
        if repeat > 0 and step / cycle >= repeat:
            return ProfilerAction.NONE
        phase = step % cycle
        if phase < wait:
            return ProfilerAction.NONE
        if phase < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if phase < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def _always_record(step):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An on_trace_ready handler writing each trace into `dir_name` as `{worker_name}.{time in ms}.pt.trace.json`
    (gzipped with `use_gzip`), the files TensorBoard's profiler plugin reads. `worker_name` defaults to
    `{host name}_{process id}`."""
    if not isinstance(dir_name, (str, os.PathLike)):
        raise TypeError(f"tensorboard_trace_handler(): dir_name must be a path, not {type(dir_name).__name__}")

    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))

    return handler


_REFUSED = {
    "with_flops": "FLOP counts",
    "with_modules": "the nn.Module hierarchy of each op",
}


def refuse_unrecorded(**flags):
    """NotImplementedError for a flag (with_flops, with_modules) asking for what is not recorded here."""
    for name, value in flags.items():
        if value:
            raise NotImplementedError(f"profile({name}=True): {_REFUSED[name]} is not recorded by batched_grad")


def _activities(activities, use_cuda):
    """The activities to record: those given (all supported ones by default), CUDA dropped with torch's warning
    where JAX has no GPU."""
    if use_cuda is not None:
        warnings.warn(
            "The attribute `use_cuda` will be deprecated soon, please use ``use_device = 'cuda'`` instead.",
            stacklevel=3,
        )
    chosen = set(supported_activities() if activities is None else activities)
    if use_cuda:
        chosen.add(ProfilerActivity.CUDA)
    for activity in chosen:
        if not isinstance(activity, ProfilerActivity):
            raise AssertionError("No valid profiler activities found")
    if ProfilerActivity.CUDA in chosen and not _gpu_available():
        warnings.warn("CUDA is not available, disabling CUDA profiling", stacklevel=3)
        chosen.discard(ProfilerActivity.CUDA)
    other = chosen - {ProfilerActivity.CPU, ProfilerActivity.CUDA}
    if other:
        names = ", ".join(sorted(a.name for a in other))
        raise ValueError(f"profile(): activities {names} are not available here: JAX runs on the CPU or CUDA")
    return chosen


def _transitions():
    """What each change of phase runs, as torch's profiler does: (phase, next phase or None when stopping) ->
    steps (a method name, or a warning's text)."""
    none, warmup, record, save = ProfilerAction
    restart = ("stop_trace", "trace_ready", "prepare_trace", "start_trace")
    return {
        (none, warmup): ("prepare_trace",),
        (none, record): ("prepare_trace", "start_trace"),
        (none, save): ("prepare_trace", "start_trace"),
        (warmup, none): ("Incorrect schedule: WARMUP followed by NONE", "start_trace", "stop_trace"),
        (warmup, record): ("start_trace",),
        (warmup, save): ("start_trace",),
        (record, none): ("Incorrect schedule: RECORD followed by NONE", "stop_trace"),
        (record, warmup): ("Incorrect schedule: RECORD followed by WARMUP", "stop_trace"),
        (save, none): ("stop_trace", "trace_ready"),
        (save, warmup): ("stop_trace", "trace_ready", "prepare_trace"),
        (save, record): restart,
        (save, save): restart,
        (warmup, None): ("start_trace", "stop_trace"),
        (record, None): ("stop_trace", "trace_ready"),
        (save, None): ("stop_trace", "trace_ready"),
    }


_TRANSITIONS = _transitions()


class profile:
    """torch.profiler.profile: records while started (as a context manager, or by start() and stop()); with a
    `schedule`, step() moves through its phases and on_trace_ready(prof) is called at the end of each active
    phase. Results: events(), key_averages(), export_chrome_trace(path)."""

    def __init__(
        self,
        *,
        activities=None,
        schedule=None,
        on_trace_ready=None,
        record_shapes=False,
        profile_memory=False,
        with_stack=False,
        with_flops=False,
        with_modules=False,
        experimental_config=None,
        execution_trace_observer=None,
        acc_events=False,
        use_cuda=None,
        custom_trace_id_callback=None,
        post_processing_timeout_s=None,
    ):
        refuse_unrecorded(with_flops=with_flops, with_modules=with_modules)
        others = {
            "experimental_config": experimental_config,
            "execution_trace_observer": execution_trace_observer,
            "custom_trace_id_callback": custom_trace_id_callback,
            "post_processing_timeout_s": post_processing_timeout_s,
        }
        for name, value in others.items():
            if value is not None:
                raise NotImplementedError(f"profile({name}=...): Kineto's {name} has no counterpart in batched_grad")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(f"profile(): on_trace_ready must be callable, not {type(on_trace_ready).__name__}")
        self.activities = _activities(activities, use_cuda)
        self.record_shapes, self.with_stack, self.acc_events = bool(record_shapes), bool(with_stack), bool(acc_events)
        self.profile_memory = bool(profile_memory)
        self.schedule = schedule if schedule is not None else _always_record
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self.step_rec_fn = None
        self._session = None
        self._events = None
        self._prepared = False

    # ---- the schedule's phases ----------------------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self.stop()

    def start(self):
        self._transit(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self._open_step()

    def stop(self):
        self._close_step()
        self._transit(self.current_action, None)

    def step(self):
        """The next step begins: the schedule's phase for it starts (and the phase that ends, ends)."""
        self._close_step()
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(previous, self.current_action)
        if self.record_steps:
            self._open_step()

    def _open_step(self):
        self.step_rec_fn = record_function("ProfilerStep#" + str(self.step_num))
        self.step_rec_fn.__enter__()

    def _close_step(self):
        if self.step_rec_fn is not None:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None

    def _transit(self, previous, current):
        """Run what moving from phase `previous` to `current` (None: stopping) takes (_TRANSITIONS)."""
        for step in _TRANSITIONS.get((previous, current), ()):
            if step.startswith("Incorrect schedule"):
                warnings.warn(step, stacklevel=3)
            else:
                getattr(self, "_" + step)()

    def _prepare_trace(self):
        self._prepared = True

    def _start_trace(self):
        if not self._prepared:
            raise AssertionError("Profiler must be initialized before starting trace")
        self._session = _profiling.Session(self.record_shapes, self.with_stack, self.profile_memory)
        _profiling.start(self._session)

    def _stop_trace(self):
        if self._session is None:
            raise AssertionError("Profiler must be initialized before stopping trace")
        session, self._session, self._prepared = self._session, None, False
        _profiling.stop(session)
        events = events_of(session)
        if self.acc_events and self._events is not None:
            self._events.extend(events)
        else:
            self._events = events

    def _trace_ready(self):
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # ---- results ------------------------------------------------------------------------------------------------

    def _recorded(self, what):
        if self._events is None:
            raise AssertionError(f"Profiler must be initialized before {what}")
        return self._events

    def events(self):
        """The recorded spans (FunctionEvents), in the order they began."""
        return self._recorded("accessing events")

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        """The events grouped by name (and input shapes, or the innermost stack frames), as an EventList."""
        if group_by_overload_name:
            raise NotImplementedError("key_averages(group_by_overload_name=True): batched_grad's ops have no overloads")
        return self._recorded("getting key averages").key_averages(group_by_input_shape, group_by_stack_n)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write the recorded stacks (with_stack=True; else none) in the flame-graph format, weighted by `metric`."""
        self._recorded("exporting stacks").export_stacks(path, metric)

    def export_chrome_trace(self, path):
        """Write the trace as Chrome trace JSON to `path` (gzipped where it ends in .gz)."""
        events = self._recorded("exporting chrome trace")
        if str(path).endswith(".gz"):
            plain = str(path)[:-3]
            events.export_chrome_trace(plain)
            with open(plain, "rb") as f_in, gzip.open(path, "wb") as f_out:
                f_out.write(f_in.read())
            os.remove(plain)
            return
        events.export_chrome_trace(path)
