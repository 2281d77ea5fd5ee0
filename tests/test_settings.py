"""torch's process-wide settings (threads, deterministic algorithms, float32 matmul precision, denormals, print
options), which scripts set at their top: the same state transitions, results and errors as torch 2.13's."""

import math
import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg

LIBRARIES = (torch, bg)


@pytest.fixture(autouse=True)
def restore_settings():
    yield
    for lib in LIBRARIES:
        lib.use_deterministic_algorithms(False)
        lib.set_float32_matmul_precision("highest")
        lib.set_printoptions(profile="default")


def outcome(fn):
    """What calling fn gives: its result, or the exception's type and message."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
        return result, [str(w.message).split(" (Triggered internally")[0] for w in caught]
    except Exception as e:
        return type(e).__name__, str(e)


def test_defaults_are_torchs():
    for name in (
        "are_deterministic_algorithms_enabled",
        "is_deterministic_algorithms_warn_only_enabled",
        "get_deterministic_debug_mode",
        "get_float32_matmul_precision",
    ):
        assert getattr(bg, name)() == getattr(torch, name)(), name
    assert bg.get_num_threads() >= 1 and bg.get_num_interop_threads() >= 1


@pytest.mark.parametrize(
    "steps",
    [
        [("use_deterministic_algorithms", (True,), {})],
        [("use_deterministic_algorithms", (True,), {"warn_only": True})],
        [("use_deterministic_algorithms", (False,), {"warn_only": True})],
        [("set_deterministic_debug_mode", ("warn",), {})],
        [("set_deterministic_debug_mode", (2,), {}), ("set_deterministic_debug_mode", ("default",), {})],
        [("use_deterministic_algorithms", (True,), {}), ("set_deterministic_debug_mode", (1,), {})],
    ],
)
def test_deterministic_mode_transitions(steps):
    for lib in LIBRARIES:
        for name, args, kwargs in steps:
            getattr(lib, name)(*args, **kwargs)
    for name in (
        "are_deterministic_algorithms_enabled",
        "is_deterministic_algorithms_warn_only_enabled",
        "get_deterministic_debug_mode",
    ):
        assert getattr(bg, name)() == getattr(torch, name)(), name


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.use_deterministic_algorithms(1),
        lambda lib: lib.use_deterministic_algorithms(True, warn_only=1),
        lambda lib: lib.set_deterministic_debug_mode("x"),
        lambda lib: lib.set_deterministic_debug_mode(3),
        lambda lib: lib.set_deterministic_debug_mode(1.0),
        lambda lib: lib.set_num_threads(0),
        lambda lib: lib.set_num_threads(-2),
        lambda lib: lib.set_num_threads(1.5),
        lambda lib: lib.set_flush_denormal(1),
        lambda lib: lib.set_float32_matmul_precision("low"),
    ],
)
def test_bad_settings_fail_as_in_torch(call):
    assert outcome(lambda: call(bg)) == outcome(lambda: call(torch))


def test_thread_counts_are_kept():
    before = bg.get_num_threads(), bg.get_num_interop_threads()
    try:
        bg.set_num_threads(3)
        bg.set_num_interop_threads(2)
        bg.init_num_threads()
        assert (bg.get_num_threads(), bg.get_num_interop_threads()) == (3, 2)
    finally:
        bg.set_num_threads(before[0])
        bg.set_num_interop_threads(before[1])


def test_matmul_precision_is_kept_and_products_stay_float32_on_the_cpu():
    a = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    exact = (bg.from_numpy(a) @ bg.from_numpy(a)).numpy()
    for precision in ("medium", "high", "highest"):
        bg.set_float32_matmul_precision(precision)
        assert bg.get_float32_matmul_precision() == precision
        np.testing.assert_allclose((bg.from_numpy(a) @ bg.from_numpy(a)).numpy(), exact, rtol=1e-6)


def test_flush_denormal_reports_it_cannot_be_set():
    assert bg.set_flush_denormal(False) is False
    assert bg.set_flush_denormal(True) is False
    assert bg.tensor([1e-39]).item() != 0.0  # denormals are kept


VALUES = [
    [1.123456789, 2.0, -3.5],
    [1e-6, 1.0, 123456.0],
    [1.0, 2.0, 3.0],
    list(np.linspace(-1, 1, 40)),
    [[0.5, 1e9], [3.0, 4.25]],
    list(range(2000)),
]
OPTIONS = [
    {"precision": 2},
    {"precision": 8},
    {"threshold": 5},
    {"threshold": 5, "edgeitems": 1},
    {"linewidth": 30},
    {"sci_mode": True},
    {"sci_mode": False},
    {"profile": "short"},
    {"profile": "full"},
    {"profile": "short", "precision": 6},
]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("values", VALUES, ids=range(len(VALUES)))
def test_print_options_print_as_torch(options, values):
    dtype = "float32" if any(isinstance(v, float) for v in np.ravel(values).tolist()) else "int64"
    for lib in LIBRARIES:
        lib.set_printoptions(**options)
    ours = repr(bg.tensor(values, dtype=getattr(bg, dtype)))
    theirs = repr(torch.tensor(values, dtype=getattr(torch, dtype)))
    assert ours == theirs


def test_print_options_persist_until_changed_and_sci_mode_resets_each_call():
    for lib in LIBRARIES:
        lib.set_printoptions(precision=1, sci_mode=True)
        lib.set_printoptions(linewidth=100)  # keeps precision 1, sci_mode back to None
    assert repr(bg.tensor([1.25, 2.5])) == repr(torch.tensor([1.25, 2.5]))
    assert repr(bg.tensor([1.25, 2.5])) == "tensor([1.2, 2.5])"


def test_unknown_print_profile_names_the_argument():
    with pytest.raises(ValueError, match="profile must be one of"):
        bg.set_printoptions(profile="long")


def test_full_profile_prints_every_element():
    bg.set_printoptions(profile="full")
    assert "..." not in repr(bg.arange(5000))
    assert math.isinf(bg._format.PRINT_OPTS.threshold)
