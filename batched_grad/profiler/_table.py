"""torch's profiler summary table: right-aligned columns two spaces apart, a dashed rule above and below the header
and at the end, then the total self CPU time."""

from ._events import _format_memory, _format_time

_COLUMN = 12  # the width of every numeric column
_SPACING = 2
_TIME_HEADERS = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
_MEMORY_HEADERS = ["CPU Mem", "Self CPU Mem"]


def build_table(events, *, sort_by, row_limit, widths, header, top_level_events_only, time_unit, profile_memory):
    """The table of `events` (FunctionEvents or their averages); `widths`: the largest name, input-shapes and source
    columns."""
    if len(events) == 0:
        return ""
    max_name, max_shapes, max_src = widths
    if sort_by is not None:
        events = sorted(events, key=lambda event: getattr(event, sort_by.replace("cuda", "device")), reverse=True)
    has_shapes = any(event.input_shapes for event in events)
    stacks = [event.stack for event in events if event.stack]
    columns = [(_capped(max(len(event.key) for event in events) + 4, max_name), ">")]
    headers = ["Name", *_TIME_HEADERS, *(_MEMORY_HEADERS if profile_memory else ()), "# of Calls"]
    columns += [(_COLUMN, ">")] * (len(headers) - 1)
    if has_shapes:
        headers.append("Input Shapes")
        columns.append((_capped(max(len(str(event.input_shapes)) for event in events) + 4, max_shapes), ">"))
    if stacks:
        headers.append("Source Location")
        columns.append((_capped(max(len(entry) for stack in stacks for entry in stack) + 4, max_src), "<"))
    row = "".join("{: " + align + str(width) + "}" + " " * _SPACING for width, align in columns)
    rule = "".join("-" * width + " " * _SPACING for width, _ in columns)
    line_length = sum(width + _SPACING for width, _ in columns) - _SPACING
    total = sum([event.self_cpu_time_total for event in events])
    lines = []
    if header is not None:
        lines += ["=" * line_length, header]
    if top_level_events_only:
        lines += ["=" * line_length, "This report only display top-level ops statistics"]
    lines += [rule, row.format(*headers), rule]
    shown = 0
    shapes_width = columns[headers.index("Input Shapes")][0] if has_shapes else None
    shown_widths = (max_name, shapes_width, columns[-1][0] if stacks else None, profile_memory)
    for event in events:
        if shown == row_limit:
            break
        if top_level_events_only and event.cpu_parent is not None:
            continue
        shown += 1
        lines += _rows(event, row, len(headers), total, shown_widths, time_unit)
    lines += [rule, f"Self CPU time total: {_time(total, time_unit)}"]
    return "\n".join(lines) + "\n"


def _rows(event, row, width, total, widths, time_unit):
    """The event's row, and where stacks are shown, a row per further frame and an empty row; `widths`: the name's
    limit, the input-shapes and source columns' widths (None where not shown), whether memory columns are shown."""
    max_name, shapes_width, src_width, profile_memory = widths
    name = event.key
    if max_name is not None and len(name) >= max_name - 3:
        name = name[: max_name - 3] + "..."
    values = [
        name,
        _share(event.self_cpu_time_total, total),
        _time(event.self_cpu_time_total, time_unit),
        _share(event.cpu_time_total, total),
        _time(event.cpu_time_total, time_unit),
        _time(event.cpu_time, time_unit),
    ]
    if profile_memory:
        values += [_format_memory(event.cpu_memory_usage), _format_memory(event.self_cpu_memory_usage)]
    values.append(event.count)
    if shapes_width is not None:
        values.append(str(event.input_shapes)[:shapes_width])
    if src_width is None:
        return [row.format(*values)]
    stack = event.stack or []
    values.append(_trimmed(stack[0], src_width) if stack else "")
    more = [row.format(*([""] * (width - 1) + [_trimmed(entry, src_width)])) for entry in stack[1:]]
    return [row.format(*values), *more, row.format(*([""] * width))]


def _capped(width, limit):
    return width if limit is None else min(width, limit)


def _share(time_us, total_us):
    return "NaN" if total_us == 0 else f"{time_us * 100.0 / total_us:.2f}%"


def _time(time_us, unit):
    if unit == "s":
        return f"{time_us / 1e6:.3f}s"
    if unit == "ms":
        return f"{time_us / 1e3:.3f}ms"
    if unit == "us":
        return f"{time_us:.3f}us"
    return _format_time(time_us)


def _trimmed(path, width):
    """A source location cut to `width` from the left, marked by "..."."""
    if len(path) > width:
        path = path[len(path) - width :]
        if len(path) > 3:
            path = "..." + path[3:]
    return path
