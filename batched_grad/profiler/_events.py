"""The profiler's results as torch shows them: FunctionEvent (one span), FunctionEventAvg (spans grouped by name, and
by input shapes or stack where asked), EventList (with torch's summary table and its chrome-trace JSON)."""

import json
import os

from .._profiling import Session


class FunctionEvent:
    """One recorded span: an op (cat "cpu_op"), a backward node, or a record_function range ("user_annotation");
    times in microseconds from the profiler's start."""

    def __init__(self, span, origin_ns):
        self.id, self.trace_name = span.id + 1, span.name
        # the steps of a schedule aggregate under one name, as torch's: ProfilerStep#3 is ProfilerStep*
        self.name = self.key = "ProfilerStep*" if span.name.startswith("ProfilerStep#") else span.name
        self.thread = span.thread
        self.input_shapes = span.shapes
        self.stack = span.stack
        self.is_user_annotation = span.kind == "user_annotation"
        self.args = span.args
        self.sequence_nr, self.fwd_thread = span.sequence_nr, span.fwd_thread
        self.self_cpu_memory_usage = span.bytes
        self.start_us = (span.start_ns - origin_ns) / 1000
        self.end_us = ((span.end_ns if span.end_ns is not None else span.start_ns) - origin_ns) / 1000
        self.cpu_parent, self.cpu_children = None, []
        self.count, self.is_async, self.is_remote, self.node_id = 1, False, False, -1

    @property
    def cpu_time_total(self):
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum([child.cpu_time_total for child in self.cpu_children])

    @property
    def cpu_time(self):
        return self.cpu_time_total

    @property
    def cpu_memory_usage(self):
        """The bytes of the arrays made by its op and the ops inside it."""
        return self.self_cpu_memory_usage + sum([child.cpu_memory_usage for child in self.cpu_children])

    # device time: these spans are host wall time, the device's work included (the profiler waits for it)
    self_device_time_total = device_time_total = device_time = 0.0

    def __repr__(self):
        children = [child.id for child in self.cpu_children]
        return (
            f"<FunctionEvent id={self.id} name={self.name} cpu_time={_format_time(self.cpu_time_total)} "
            f"start_us={self.start_us:.3f} end_us={self.end_us:.3f} cpu_children={children} thread={self.thread} "
            f"input_shapes={self.input_shapes}>"
        )


class FunctionEventAvg:
    """The spans of one key (name, and input shapes or stack where grouped by them), summed."""

    def __init__(self, key, input_shapes=None, stack=None):
        self.key, self.input_shapes, self.stack = key, input_shapes, stack
        self.count, self.cpu_time_total, self.self_cpu_time_total = 0, 0.0, 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.node_id, self.is_async, self.is_remote, self.cpu_parent = -1, False, False, None
        self.is_user_annotation = False

    def add(self, event):
        if self.key != event.key and self.key != "Total":
            raise AssertionError(f"Expected keys to match, but got {self.key} vs {event.key}")
        self.count += event.count
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        self.cpu_memory_usage += event.cpu_memory_usage
        self.self_cpu_memory_usage += event.self_cpu_memory_usage
        self.is_user_annotation = event.is_user_annotation
        return self

    __iadd__ = add

    @property
    def cpu_time(self):
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    self_device_time_total = device_time_total = device_time = 0.0

    def __repr__(self):
        return (
            f"<FunctionEventAvg key={self.key} self_cpu_time={_format_time(self.self_cpu_time_total)} "
            f"cpu_time={_format_time(self.cpu_time)} input_shapes={self.input_shapes}>"
        )


class EventList(list):
    """A list of FunctionEvents (or of their averages) with torch's reports of them; `profile_memory`: whether the
    table shows the bytes the ops made."""

    def __init__(self, events=(), profile_memory=False):
        super().__init__(events)
        self.profile_memory = profile_memory

    @property
    def self_cpu_time_total(self):
        return sum([event.self_cpu_time_total for event in self])

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """The events grouped by name (and input shapes, and the innermost `group_by_stack_n` stack frames, where
        asked), in the order each group first appears."""
        groups = {}
        for event in self:
            key = (event.key,)
            if group_by_input_shape:
                key += (str(event.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(event.stack[:group_by_stack_n])
            group = groups.get(key)
            if group is None:
                shapes = event.input_shapes if group_by_input_shape else None
                stack = event.stack[:group_by_stack_n] if group_by_stack_n > 0 else None
                group = groups[key] = FunctionEventAvg(event.key, shapes, stack)
            group.add(event)
        return EventList(groups.values(), self.profile_memory)

    def total_average(self):
        total = FunctionEventAvg("Total")
        for event in self:
            total.add(event)
        total.key = "Total"
        return total

    def table(
        self,
        sort_by=None,
        row_limit=100,
        max_src_column_width=75,
        max_name_column_width=55,
        max_shapes_column_width=80,
        header=None,
        top_level_events_only=False,
        time_unit=None,
    ):
        """torch's summary table: a row per event (sorted descending by the attribute `sort_by`)."""
        from ._table import build_table

        return build_table(
            self,
            sort_by=sort_by,
            row_limit=row_limit,
            widths=(max_name_column_width, max_shapes_column_width, max_src_column_width),
            header=header,
            top_level_events_only=top_level_events_only,
            time_unit=time_unit,
            profile_memory=self.profile_memory,
        )

    def export_chrome_trace(self, path):
        """Write the events as a Chrome trace (the JSON chrome://tracing and Perfetto read) to `path`."""
        with open(path, "w") as f:
            json.dump(chrome_trace(self, path, getattr(self, "base_ns", 0)), f)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write, per event recorded with its stack (with_stack=True), a line `outer;...;inner value` (the
        flame-graph format) with its `metric` as an integer, where that is positive."""
        with open(path, "w") as f:
            for event in self:
                value = int(getattr(event, metric.replace("cuda", "device")))
                if event.stack and value > 0:
                    f.write(";".join(reversed(event.stack)) + f" {value}\n")

    def __str__(self):
        return self.table()


def events_of(session: Session):
    """The session's spans as an EventList of FunctionEvents (in the order they began), linked to parent and
    children."""
    events = [FunctionEvent(span, session.start_ns) for span in session.spans]
    for span, event in zip(session.spans, events):
        if span.parent is not None:
            parent = events[span.parent.id]
            event.cpu_parent = parent
            parent.cpu_children.append(event)
    result = EventList(events, session.profile_memory)
    result.base_ns = session.wall_start_ns
    return result


def chrome_trace(events, trace_name, base_ns):
    """The Chrome trace of `events`: one complete ("X") event per span, timestamps in microseconds from the
    profiler's start, which `base_ns` gives as wall-clock time (ns since the epoch)."""
    pid = os.getpid()
    threads = sorted({event.thread for event in events})
    trace = [{"ph": "M", "name": "process_name", "ts": 0, "pid": pid, "tid": 0, "args": {"name": "python"}}]
    trace += [
        {"ph": "M", "name": "thread_name", "ts": 0, "pid": pid, "tid": t, "args": {"name": f"thread {t} (python)"}}
        for t in threads
    ]
    for event in events:
        args = {"External id": event.id, "Ev Idx": event.id - 1}
        if event.sequence_nr >= 0:
            args["Sequence number"], args["Fwd thread id"] = event.sequence_nr, event.fwd_thread
        if event.input_shapes:
            args["Input Dims"] = event.input_shapes
        if event.self_cpu_memory_usage:
            args["Bytes"] = event.self_cpu_memory_usage
        if event.args is not None:
            args["Record function args"] = event.args
        trace.append(
            {
                "ph": "X",
                "cat": "user_annotation" if event.is_user_annotation else "cpu_op",
                "name": event.trace_name,
                "pid": pid,
                "tid": event.thread,
                "ts": event.start_us,
                "dur": event.cpu_time_total,
                "args": args,
            }
        )
    return {
        "schemaVersion": 1,
        "deviceProperties": [],
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": base_ns,
        "traceEvents": trace,
        "traceName": str(trace_name),
    }


def _format_memory(nbytes):
    """A number of bytes as torch's tables print it."""
    for unit, size in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


def _format_time(time_us):
    """A time in microseconds as torch's tables print it."""
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"
