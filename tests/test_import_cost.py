"""Importing batched_grad loads none of its optional companions: torch (the oracle of the tests, never a runtime
need), SciPy (0.1 s a process, imported by the few functions that use it) nor matplotlib."""

import subprocess
import sys


def test_import_loads_no_optional_package():
    loaded = "sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'scipy', 'matplotlib'})"
    script = f"import sys, batched_grad; print({loaded})"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "[]"
