"""torch.Generator: a seeded stream of random numbers, torch's CPU stream (a 32-bit Mersenne Twister and torch's
transformations, _mt19937.py), and the default generator that rand, randn, randint, dropout and nn.init draw from
when no `generator=` is given."""

import secrets
import struct

import numpy as np

from . import _dtypes
from ._mt19937 import Stream
from ._tensor import Tensor, device, python_type_name

DEFAULT_SEED = 67280421310721  # torch's seed of a new Generator
_WORDS = 624  # MT19937's state
# torch's CPUGeneratorImplState, little-endian: the initial seed, MT19937's `left`, `seeded`, `next` and its 624
# words (each in 64 bits), the legacy Box-Muller fields (x, the cached double normal sample, rho, its valid flag),
# then the cached float normal sample and its flag; 5056 bytes with the C struct's padding
_HEAD, _NORMAL, _FLOAT = struct.Struct("<QiiQ"), struct.Struct("<dddi4x"), struct.Struct("<f?3x")
STATE_SIZE = _HEAD.size + 8 * _WORDS + _NORMAL.size + _FLOAT.size


def _seed_value(seed):
    """torch's seed argument: an int in [-2**63, 2**64), negative ones taken modulo 2**64."""
    if isinstance(seed, np.integer):
        raise TypeError("an integer is required")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise RuntimeError(f"manual_seed expected a long, but got {python_type_name(seed)}")
    if not -(2**63) <= seed < 2**64:
        raise ValueError("Overflow when unpacking long long")
    return seed % 2**64


def _device(where):
    if where is None:
        return device("cpu")
    if not isinstance(where, (str, device)):
        raise TypeError(
            f"Generator(): argument 'device' (position 1) must be torch.device, not {python_type_name(where)}"
        )
    where = device(where)
    return device("cpu") if where.type == "cpu" else where  # torch keeps no index for the CPU


class Generator:
    """A random number generator with its own state: `generator=g` makes a draw reproducible and independent of
    every other generator. Like torch, a new one starts from seed 67280421310721; `device` is accepted as torch
    does and changes nothing (the numbers are made on the host)."""

    def __init__(self, device=None):
        self.device = _device(device)
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed):
        """Restart the stream from `seed` (an int); returns the generator."""
        self._seed = _seed_value(seed)
        self._bits = Stream(self._seed)
        return self

    def seed(self):
        """Restart the stream from a new non-deterministic 64-bit seed, and return that seed."""
        seed = secrets.randbits(64)
        self.manual_seed(seed)
        return seed

    def initial_seed(self):
        """The seed the stream was last started from."""
        return self._seed

    def get_state(self):
        """The generator's state as a uint8 Tensor of torch's layout (a copy), for set_state."""
        bits = self._bits
        engine = bits.engine.state["state"]
        position = 0 if bits.fresh else int(engine["pos"])
        left = 1 if bits.fresh else _WORDS + 1 - position
        double, single = bits.next_double_normal, bits.next_float_normal
        data = (
            _HEAD.pack(self._seed, left, 1, position)
            + np.asarray(engine["key"], "<u8").tobytes()
            + _NORMAL.pack(0.0, double or 0.0, 0.0, double is not None)
            + _FLOAT.pack(single or 0.0, single is not None)
        )
        return Tensor._wrap(np.frombuffer(data, np.uint8).copy())

    def set_state(self, new_state):
        """Restore a state from get_state() (this generator's or another's, its seed included, or torch's
        get_rng_state()); returns the generator."""
        data = _state_bytes(new_state)
        seed, left, _, position = _HEAD.unpack_from(data)
        words = np.frombuffer(data, "<u8", _WORDS, _HEAD.size)
        _, double, _, double_valid = _NORMAL.unpack_from(data, _HEAD.size + 8 * _WORDS)
        single, single_valid = _FLOAT.unpack_from(data, STATE_SIZE - _FLOAT.size)
        fresh = left == 1 and position == 0
        if not (1 <= left <= _WORDS and (fresh or position == _WORDS + 1 - left)) or (words >> 32).any():
            raise RuntimeError("Invalid mt19937 state")
        bits = Stream(0)
        bits.engine.state = {
            "bit_generator": "MT19937",
            "state": {"key": words.astype(np.uint32), "pos": _WORDS if fresh else position},
        }
        bits.fresh = fresh
        bits.next_double_normal = double if double_valid else None
        bits.next_float_normal = single if single_valid else None
        self._seed, self._bits = seed, bits
        return self

    def clone_state(self):
        """A new generator in this one's state."""
        return Generator(self.device).set_state(self.get_state())


def _state_bytes(new_state):
    if not isinstance(new_state, Tensor):
        raise TypeError(f"expected a torch.ByteTensor, but got {python_type_name(new_state)}")
    if new_state.dtype is not _dtypes.uint8:
        raise TypeError("RNG state must be a torch.ByteTensor")
    if new_state.numel() != STATE_SIZE:
        raise RuntimeError(
            f"Expected a CPUGeneratorImplState of size {STATE_SIZE} but found the input RNG state "
            f"size to be {new_state.numel()}"
        )
    return np.asarray(new_state._value).tobytes()


def resolve(generator, fn):
    """The Generator a draw of `fn` uses: `generator`, or the default one for None."""
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"{fn}(): argument 'generator' must be torch.Generator, not {python_type_name(generator)}")
    return generator


default_generator = Generator()
default_generator.seed()  # like torch's default generator: a new seed in every process


def manual_seed(seed):
    """Seed the default generator (`int(seed)`, as torch); returns it."""
    return default_generator.manual_seed(int(seed))


def seed():
    """Seed the default generator non-deterministically; returns the seed."""
    return default_generator.seed()


def initial_seed():
    """The default generator's seed."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state, a uint8 Tensor."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator's state from get_rng_state()."""
    default_generator.set_state(new_state)
