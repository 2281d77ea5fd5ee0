"""Batches whose rows are spread over devices (a jax.sharding.NamedSharding of their first axis): each device maps,
pads and slices its own rows, and the values every row reads are replicated on every device once. With
jax.distributed, the devices may belong to several processes: nothing here gathers rows in one place."""

import functools
import weakref
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec


class Shards(NamedTuple):
    """Rows split over the devices of `mesh` along its axis (or tuple of axes) `axis`; replicated over any other
    axis of the mesh."""

    mesh: Mesh
    axis: object

    @property
    def count(self):
        """How many blocks of rows there are (the devices along `axis`)."""
        names = self.axis if isinstance(self.axis, tuple) else (self.axis,)
        return int(np.prod([self.mesh.shape[name] for name in names]))

    @property
    def rows(self):
        return NamedSharding(self.mesh, PartitionSpec(self.axis))

    @property
    def replicated(self):
        return NamedSharding(self.mesh, PartitionSpec())


def row_shards(array):
    """The Shards of an array whose first axis is split over more than one device, else None."""
    sharding = getattr(array, "sharding", None)
    if type(sharding) is not NamedSharding or isinstance(array, jax.core.Tracer) or array.ndim == 0:
        return None
    spec = tuple(sharding.spec)
    if not spec or spec[0] is None or any(s is not None for s in spec[1:]):
        return None  # rows not split, or a row split too: the program maps whole rows
    shards = Shards(sharding.mesh, spec[0])
    return shards if shards.count > 1 else None


def first_shards(arrays):
    """The Shards of the first of `arrays` whose rows are split over devices, or None: the batch's split."""
    return next((s for s in map(row_shards, arrays) if s is not None), None)


def split_as(array, shards):
    """`array` with its rows split as `shards` (moved between devices where they are split otherwise)."""
    return array if row_shards(array) == shards else jax.device_put(array, shards.rows)


def place_rows(array, devices=None):
    """`array` with its rows split evenly over `devices` (default: every device of every process), a 1-d mesh whose
    axis is named "rows"."""
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("shard_rows(devices): expected at least one device, but got none")
    if np.ndim(array) == 0 or np.shape(array)[0] % len(devices):
        raise ValueError(
            f"shard_rows(tensor): the first dimension of tensor must be divisible by the number of "
            f"devices ({len(devices)}), but got shape {tuple(np.shape(array))}"
        )
    return jax.device_put(array, NamedSharding(Mesh(np.array(devices), ("rows",)), PartitionSpec("rows")))


def map_shards(fn, batched, shards, shared=()):
    """fn(*shared, *the arrays of `batched`: each device's own block of rows) on every device, its results' rows kept
    where they are (sharded as `batched`). `shared` are replicated on every device and passed, not closed over:
    inside shard_map a closed-over array of the enclosing program keeps that program's mesh, which JAX's ops there
    refuse ("Context mesh ... should match the mesh of sharding")."""
    spec = PartitionSpec(shards.axis)
    in_specs = (PartitionSpec(),) * len(shared) + (spec,) * len(batched)
    # check_vma=False: a row's VJP pairs a cotangent that varies over the devices with primal values that do not,
    # which JAX's check of varying axes would refuse
    return jax.shard_map(fn, mesh=shards.mesh, in_specs=in_specs, out_specs=spec, check_vma=False)(*shared, *batched)


@functools.lru_cache(maxsize=256)
def _padding(shards, extra):
    return jax.jit(lambda a: map_shards(lambda b: jnp.pad(b, [(0, extra)] + [(0, 0)] * (b.ndim - 1)), (a,), shards))


@functools.lru_cache(maxsize=256)
def _slicing(shards, keep):
    return jax.jit(lambda a: map_shards(lambda b: b[:keep], (a,), shards))


def pad_rows(array, padded, shards):
    """`array` padded with zero rows to `padded`, its rows split as `shards` and each device padding its own block
    (a block's real rows come first). `padded` is a multiple of the number of blocks."""
    extra = (padded - array.shape[0]) // shards.count
    return _padding(shards, extra)(jax.device_put(array, shards.rows)) if extra else array


def take_rows(array, size, shards):
    """The real rows of a result padded by pad_rows, each device slicing its own block."""
    keep = size // shards.count
    return _slicing(shards, keep)(array) if array.shape[0] // shards.count != keep else array


class _Replicas:
    """Arrays replicated on every device of a mesh, by the identity of the array (held weakly): the values that
    every row reads (weights, saved activations) are copied to each device once, not at every call."""

    def __init__(self):
        self._copies = {}  # (id(array), shards) -> (weak reference to the array, its replicated copy)

    def __call__(self, array, shards):
        """`array` replicated over the devices of `shards`, where it is on one device (a NumPy array, a traced
        value or one already spread over devices is left as it is)."""
        if not isinstance(array, jax.Array) or isinstance(array, jax.core.Tracer) or len(array.devices()) > 1:
            return array
        key = (id(array), shards)
        known = self._copies.get(key)
        if known is not None and known[0]() is array:
            return known[1]
        copy = jax.device_put(array, shards.replicated)
        copies = self._copies
        copies[key] = (weakref.ref(array, lambda _: copies.pop(key, None)), copy)
        return copy


replicated = _Replicas()
