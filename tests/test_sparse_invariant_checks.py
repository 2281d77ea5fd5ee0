"""torch.sparse.check_sparse_tensor_invariants against torch 2.13: its state (enable, disable, is_enabled), the
context manager (restoring the state, refusing re-entry) and the decorator; the constructors' notices, each once per
process as torch gives them: sparse_coo_tensor's that the checks are implicitly off (not given when check_invariants
is passed or the state was set), and the legacy torch.sparse.*Tensor constructors' deprecation, once per form."""

import subprocess
import sys
import textwrap

import pytest
import torch

import batched_grad as bg
from batched_grad.sparse import _construct

_NOTICES = textwrap.dedent(
    """
    import sys, warnings
    lib = __import__(sys.argv[1])
    i, v = lib.tensor([[0, 1], [1, 0]]), lib.tensor([1.0, 2.0])
    for call in [
        "lib.sparse.FloatTensor(i, v)", "lib.sparse.FloatTensor(i, v, lib.Size([2, 2]))",
        "lib.sparse.FloatTensor(2, 2)",
        "lib.sparse.DoubleTensor(i, v.double(), lib.Size([2, 2]))", "lib.sparse.FloatTensor(i, v)",
        "lib.sparse_coo_tensor(i, v, (2, 2), check_invariants=True)", "lib.sparse_coo_tensor(i, v, (2, 2))",
        "lib.sparse_coo_tensor(i, v, (2, 2))", "lib.sparse.check_sparse_tensor_invariants.enable()",
    ]:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            eval(call)
        print(call, [str(w.message).split(" (Triggered internally")[0].rstrip() for w in seen])
    """
)


def _notices(library):
    run = subprocess.run([sys.executable, "-c", _NOTICES, library], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stdout.replace("batched_grad", "torch")


@pytest.mark.slow
def test_constructors_give_torchs_notices_once_per_process():
    assert _notices("batched_grad") == _notices("torch")


def _states(lib):
    checks = lib.sparse.check_sparse_tensor_invariants
    seen = [checks.is_enabled()]
    outer = checks()
    with outer:
        seen.append(checks.is_enabled())
        with checks(False):
            seen.append(checks.is_enabled())
        seen.append(checks.is_enabled())
        try:
            with outer:
                pass
        except RuntimeError as error:
            seen.append(str(error))
    seen.append(checks.is_enabled())
    seen.append(checks(True)(lambda x: (x, checks.is_enabled()))(3))
    checks.enable()
    seen.append(checks.is_enabled())
    checks.disable()
    seen.append(checks.is_enabled())
    return seen


def test_the_switch_and_its_context_manager_and_decorator_behave_as_torchs():
    checks = torch.sparse.check_sparse_tensor_invariants
    saved, saved_here = checks.is_enabled(), dict(_construct._INVARIANTS)
    try:
        assert _states(bg) == _states(torch)
    finally:  # the switch is process-wide: both are left as they were found
        (checks.enable if saved else checks.disable)()
        _construct._INVARIANTS.update(saved_here)
