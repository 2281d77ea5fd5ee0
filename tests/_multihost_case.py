"""One of two processes (argv: process id, coordinator port) that together compute a Jacobian whose rows are split
over 4 devices, 2 simulated CPU devices in each process, through jax.distributed with CPU collectives. Each checks
the rows on its own devices against the Jacobian it computes alone on one device, and prints one JSON line."""

import json
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
process, port = int(sys.argv[1]), int(sys.argv[2])
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process)

import numpy as np  # noqa: E402

import batched_grad as bg  # noqa: E402
import vmap  # noqa: E402

rng = np.random.default_rng(0)  # the same values in both processes
x = bg.tensor(rng.standard_normal((3, 6)).astype(np.float32), requires_grad=True)
w = bg.tensor(rng.standard_normal((6, 8)).astype(np.float32))


def jacobian(cotangents):
    """Rows of d tanh(x @ w) / d x: a VJP per cotangent (a 3 x 8 output), with respect to x (3 x 6)."""
    return bg.autograd.grad(bg.tanh(x @ w), x, cotangents, is_grads_batched=True)[0]


report = {"process": process, "devices": jax.device_count(), "local_devices": jax.local_device_count()}
for name, rows in [
    ("identity", np.eye(24, dtype=np.float32).reshape(24, 3, 8)),
    ("padded", rng.standard_normal((20, 3, 8)).astype(np.float32)),
]:  # 5 a device, 8 padded
    want = jacobian(bg.tensor(rows)).numpy()
    sharded = vmap.shard_rows(bg.tensor(rows))  # over every device of both processes
    for _ in range(2):
        got = jacobian(sharded)._value
    shards = got.addressable_shards
    report[name] = {
        "spec": str(got.sharding.spec),
        "devices": len(got.sharding.device_set),
        "shards": [[s.index[0].start, s.index[0].stop] for s in shards],
        "same": all(np.allclose(np.asarray(s.data), want[s.index], rtol=1e-5, atol=1e-6) for s in shards),
    }
print(json.dumps(report), flush=True)
jax.distributed.shutdown()
