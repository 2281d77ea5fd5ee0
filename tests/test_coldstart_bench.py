"""benchmarks/coldstart.py's worker mode: one workload in a fresh process prints its record, and the result it saves
is the Jacobian torch computes with the same workload code."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(REPO, "benchmarks")
sys.path.insert(0, BENCHMARKS)

import _cold_workloads  # noqa: E402


def run_worker(tmp_path, library, workload, warm_calls, **settings):
    result = tmp_path / "result.npy"
    env = dict(os.environ, BATCHED_GRAD_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=REPO, **settings)
    done = subprocess.run(
        [
            sys.executable,
            os.path.join(BENCHMARKS, "coldstart.py"),
            f"--worker={library}",
            f"--workload={workload}",
            f"--warm_calls={warm_calls}",
            f"--result={result}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("RECORD ")]
    return json.loads(line[len("RECORD ") :]), np.load(result)


@pytest.mark.slow
def test_the_worker_times_the_mlp_jacobian_and_saves_torchs_result(tmp_path):
    # each structure's program from its first call (by default the first calls run on the host and compile nothing)
    record, jacobian = run_worker(tmp_path, "bg", 1, warm_calls=2, BATCHED_GRAD_FUSE_AFTER="0")
    assert len(record["seconds"]) == len(record["compiles"]) == 5 + 2
    assert all(s > 0 for s in record["seconds"])
    assert record["compiles"][0] > 0  # a fresh process and an empty cache: the first call compiles
    assert record["xla_compiles"] > 0 and record["rss_mb"] > 0
    data = _cold_workloads.mlp_data(np.random.default_rng(1))
    expected = _cold_workloads.mlp_jacobian(torch, data)().numpy()
    assert jacobian.shape == (128, 256) and jacobian.dtype == np.float32
    np.testing.assert_allclose(jacobian, expected, rtol=1e-4, atol=1e-5)
