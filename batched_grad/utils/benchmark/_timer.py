"""Timer: torch.utils.benchmark's timer of Python statements. batched_grad defers an op's computation until its
value is read, and JAX dispatches work asynchronously, so each timed run of the statement also computes and waits
for the values it produces (the value of each expression statement and of each assignment): the times are those
of the work, not of recording it."""

import ast
import enum
import textwrap
import timeit

import jax

import batched_grad

from ... import _tensor
from . import _common

__all__ = ["Timer", "timer", "Language"]

_SYNC = "__batched_grad_block_until_ready__"


def timer():
    """The clock Timer reads (timeit's), after the pending device work of JAX has finished."""
    jax.effects_barrier()
    return timeit.default_timer()


class Language(enum.Enum):
    """The language of a Timer's statement (only PYTHON runs here)."""

    PYTHON = 0
    CPP = 1


def block_until_ready(value):
    """Compute `value`'s deferred Tensors (in tuples, lists and dicts too) and wait for their arrays; returns it."""
    if isinstance(value, _tensor.Tensor):
        jax.block_until_ready(value._held)
    elif isinstance(value, jax.Array):
        value.block_until_ready()
    elif isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            block_until_ready(item)
    elif isinstance(value, dict):
        for item in value.values():
            block_until_ready(item)
    return value


class _WaitForValues(ast.NodeTransformer):
    """Wrap the value of each expression statement and assignment in the statement (not inside functions or
    classes it defines) in a call that waits for it."""

    def _wrapped(self, node):
        call = ast.Call(func=ast.Name(id=_SYNC, ctx=ast.Load()), args=[node.value], keywords=[])
        node.value = ast.copy_location(call, node.value)
        return node

    def visit_Expr(self, node):
        return self._wrapped(node)

    def visit_Assign(self, node):
        return self._wrapped(node)

    def visit_AugAssign(self, node):
        return self._wrapped(node)

    def visit_AnnAssign(self, node):
        return self._wrapped(node) if node.value is not None else node

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef


def _waiting(stmt):
    """`stmt` rewritten to wait for the values it computes."""
    tree = ast.fix_missing_locations(_WaitForValues().visit(ast.parse(stmt)))
    return ast.unparse(tree) or "pass"


def _trimmed(code):
    code = textwrap.dedent(code)
    return (code[1:] if code and code[0] == "\n" else code).rstrip()


class Timer:
    """Times the Python statement `stmt` after running `setup` once, with `globals` as its namespace (`torch`
    in it is batched_grad unless given); label, sub_label, description and env name it in Measurements and
    Compare tables; num_threads: the intra-op thread count while timing."""

    def __init__(
        self,
        stmt="pass",
        setup="pass",
        global_setup="",
        timer=timer,
        globals=None,  # noqa: A002  (torch's argument name)
        label=None,
        sub_label=None,
        description=None,
        env=None,
        num_threads=1,
        language=Language.PYTHON,
    ):
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        if language in (Language.CPP, "cpp", "c++"):
            raise NotImplementedError(
                "Timer(language='cpp') compiles the statement against torch's C++ library; batched_grad has no C++ "
                "API, so only Python statements (language='python') can be timed"
            )
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError(f"Invalid language `{language}`.")
        if global_setup:
            raise ValueError(
                f"global_setup is C++ only, got `{global_setup}`. Most likely this code can simply be moved to `setup`."
            )
        self._globals = dict(globals or {})
        self._globals.setdefault("torch", batched_grad)
        self._globals[_SYNC] = block_until_ready
        self._language = Language.PYTHON
        stmt, setup = _trimmed(stmt), _trimmed(setup)
        self._timer = timeit.Timer(stmt=_waiting(stmt), setup=setup, timer=timer, globals=self._globals)
        self._task_spec = _common.TaskSpec(
            stmt=stmt,
            setup=setup,
            global_setup=global_setup,
            label=label,
            sub_label=sub_label,
            description=description,
            env=env,
            num_threads=num_threads,
        )

    def _timeit(self, number):
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number=1000000):
        """One Measurement of `number` runs (after a warm-up of number // 100 runs, at least 2)."""
        with _common.set_torch_threads(self._task_spec.num_threads):
            self._timeit(number=max(int(number // 100), 2))
            return _common.Measurement(
                number_per_run=number, raw_times=[self._timeit(number=number)], task_spec=self._task_spec
            )

    def repeat(self, repeat=-1, number=-1):
        """Not provided, as in torch: use blocked_autorange."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None):
        """Not provided, as in torch: use blocked_autorange."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _measurement_loop(self, number, stop, min_run_time, max_run_time=None, callback=None):
        """Blocks of `number` runs until min_run_time has passed and `stop(times)` agrees, or max_run_time."""
        total, can_stop, times = 0.0, False, []
        with _common.set_torch_threads(self._task_spec.num_threads):
            while total < min_run_time or not can_stop:
                spent = self._timeit(number)
                times.append(spent)
                total += spent
                if callback:
                    callback(number, spent)
                can_stop = stop(times)
                if max_run_time and total > max_run_time:
                    break
        return times

    def _estimate_block_size(self, min_run_time):
        """Runs per block: the first power of ten whose block takes min_run_time / 1000 with the timer's own
        overhead 1e-4 of it or less, or whose block takes longer than min_run_time."""
        with _common.set_torch_threads(self._task_spec.num_threads):
            overhead = sorted(self._timeit(0) for _ in range(5))[2]
            number = 1
            while True:
                taken = self._timeit(number)
                if overhead / taken <= 1e-4 and taken >= min_run_time / 1000:
                    break
                if taken > min_run_time or number * 10 > 2147483647:
                    break
                number *= 10
        return number

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Blocks of runs (sized so the timer's overhead is negligible) until min_run_time seconds have passed;
        callback(number, seconds) after each block."""
        number = self._estimate_block_size(min_run_time)
        times = self._measurement_loop(number, lambda times: True, min_run_time, callback=callback)
        return _common.Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0, callback=None):
        """Blocks of runs until, after at least min_run_time seconds and four blocks, the interquartile range is
        under `threshold` of the median, or max_run_time seconds have passed."""
        number = self._estimate_block_size(min_run_time=0.05)

        def confident(times):
            measured = _common.Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)
            return len(times) > 3 and measured.meets_confidence(threshold=threshold)

        times = self._measurement_loop(number, confident, min_run_time, max_run_time, callback=callback)
        return _common.Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)
