"""torch.multiprocessing.spawn: run fn(i, *args) in nprocs new processes and join them; the first failure stops the
others and is raised in the parent with the child's traceback."""

import multiprocessing
import multiprocessing.connection
import signal
import traceback


class ProcessException(Exception):
    def __init__(self, msg, error_index, pid):
        super().__init__(msg)
        self.msg, self.error_index, self.pid = msg, error_index, pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A process failed with an exception raised by its code."""


class ProcessExitedException(ProcessException):
    """A process exited without raising: a nonzero exit code or a signal."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn, index, args, errors):
    try:
        fn(index, *args)
    except KeyboardInterrupt:
        pass  # the parent stopped the run
    except Exception:
        errors.put((index, traceback.format_exc()))
        raise SystemExit(1) from None


class ProcessContext:
    """The processes of one spawn: join() waits for them and raises the first failure."""

    def __init__(self, processes, errors):
        self.processes, self._errors = processes, errors
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [int(p.pid) for p in self.processes]

    def join(self, timeout=None, grace_period=None):
        """Wait up to `timeout` seconds (None: until one fails or all end). True when every process has ended,
        False when some still run; a failed process's error is raised after the others are stopped."""
        if not self.sentinels:
            return True
        failed = None
        for sentinel in multiprocessing.connection.wait(list(self.sentinels), timeout=timeout):
            index = self.sentinels.pop(sentinel)
            self.processes[index].join()
            if self.processes[index].exitcode != 0:
                failed = index
                break
        if failed is None:
            return not self.sentinels
        self._stop_others(grace_period)
        raise self._failure(failed)

    def _stop_others(self, grace_period):
        for p in self.processes:
            if p.is_alive():
                p.join(grace_period or 0)
            if p.is_alive():
                p.terminate()
            p.join()

    def _failure(self, index):
        process = self.processes[index]
        traces = {}
        while not self._errors.empty():
            i, trace = self._errors.get()
            traces[i] = trace
        if index in traces:
            message = f"\n\n-- Process {index:d} terminated with the following error:\n{traces[index]}"
            return ProcessRaisedException(message, index, process.pid)
        code = process.exitcode
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"<Unknown signal {-code}>"
            return ProcessExitedException(
                f"process {index:d} terminated with signal {name}", index, process.pid, code, name
            )
        return ProcessExitedException(f"process {index:d} terminated with exit code {code:d}", index, process.pid, code)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start nprocs processes of `start_method` calling fn(i, *args) for i in range(nprocs); with join, wait for all
    (raising the first failure), else return their ProcessContext."""
    context = multiprocessing.get_context(start_method)
    errors = context.SimpleQueue()
    processes = []
    for i in range(nprocs):
        process = context.Process(target=_wrap, args=(fn, i, args, errors), daemon=daemon)
        process.start()
        processes.append(process)
    spawned = ProcessContext(processes, errors)
    if not join:
        return spawned
    while not spawned.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """start_processes with torch's default `spawn` start method."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
