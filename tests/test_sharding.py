"""Batches whose rows are split over devices (vmap/_shards.py): each case of _sharded_cases.py runs in a process
of its own with 4 simulated CPU devices, and must give the unsharded results, split over all 4 devices as its
cotangents (or vmap.vmap inputs) were."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [
    "unpadded",
    "padded",
    "shard_rows",
    "two_axis_mesh",
    "chunked",
    "jacobian_seeds",
    "elementwise_jacobian",
    "per_sample",
    "create_graph",
]


@pytest.fixture(scope="module")
def reports():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, "_sharded_cases.py"), *CASES],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return {r["case"]: r for r in map(json.loads, done.stdout.splitlines())}


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        "unpadded",
        "padded",
        "shard_rows",
        "chunked",
        "jacobian_seeds",
        "elementwise_jacobian",
        "per_sample",
        "per_sample_chunked",
        "create_graph",
    ],
)
def test_results_equal_the_unsharded_ones_and_stay_split_over_every_device(reports, case):
    report = reports[case]
    assert report["same"]
    assert report["placement"] and all(p == {"devices": 4, "spec": "P('rows',)"} for p in report["placement"])


def test_a_users_two_axis_mesh_keeps_its_row_axis(reports):
    report = reports["two_axis_mesh"]
    assert report["same"]
    assert all(p == {"devices": 4, "spec": "P('data',)"} for p in report["placement"])


def test_chunk_size_applies_to_each_devices_rows(reports):
    # 52 rows over 4 devices: 13 a device, padded to 16 there, mapped 4 at a time
    assert reports["chunked_maps"]["maps"] == [[16, 4]]


def test_shard_rows_refuses_what_it_cannot_split():
    import batched_grad as bg
    import vmap

    with pytest.raises(TypeError, match="argument 'tensor' must be a Tensor"):
        vmap.shard_rows([1.0, 2.0])
    with pytest.raises(ValueError, match="tensor requires grad"):
        vmap.shard_rows(bg.ones(4, requires_grad=True))
    with pytest.raises(ValueError, match="must be divisible by the number of devices"):
        vmap.shard_rows(bg.ones(3), devices=[None, None])
