"""record_function: a named range of the program, recorded as a span holding the ops that run inside it."""

import contextlib

from .. import _profiling


class record_function(contextlib.ContextDecorator):
    """A labelled range (a context manager, or a decorator of a function): while a profiler records, the time and
    the ops inside it are one span named `name` (a "user_annotation"); `args`, a string, goes with it into the
    trace. Without a profiler it costs nothing."""

    def __init__(self, name, args=None):
        if not isinstance(name, str):
            raise TypeError(f"record_function(): name must be a str, not {type(name).__name__}")
        if args is not None and not isinstance(args, str):
            raise TypeError(f"record_function(): args must be a str or None, not {type(args).__name__}")
        self.name, self.args = name, args
        self._spans = []  # (session, span) per entry: a decorated function may run recursively

    def __enter__(self):
        session = _profiling.PROFILING.session
        span = None if session is None else session.enter(self.name, "user_annotation")
        if span is not None:
            span.args = self.args
        self._spans.append((session, span))
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if not self._spans:
            raise RuntimeError(f"record_function {self.name!r} exited without being entered")
        session, span = self._spans.pop()
        if span is not None:
            session.exit(span)
        return None

    def _recreate_cm(self):  # each call of a decorated function enters a range of its own
        return record_function(self.name, self.args)
