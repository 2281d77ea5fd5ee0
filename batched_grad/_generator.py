"""torch.Generator: a seeded stream of random numbers (NumPy's PCG64 underneath), and the default generator that
rand, randn, randint, dropout and nn.init draw from when no `generator=` is given."""

import secrets

import numpy as np

from . import _dtypes
from ._tensor import Tensor, device, python_type_name

DEFAULT_SEED = 67280421310721  # torch's seed of a new Generator
_SEED_BYTES, _WORD_BYTES, _FLAG_BYTES = 8, 16, 4
# get_state()'s layout, little-endian: the initial seed, PCG64's 128-bit state and increment, then NumPy's
# buffered half-word (a flag and its 32 bits)
STATE_SIZE = _SEED_BYTES + 2 * _WORD_BYTES + 2 * _FLAG_BYTES


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
        self._bits = np.random.Generator(np.random.PCG64(self._seed))
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
        """The generator's state as a uint8 Tensor (a copy), for set_state."""
        state = self._bits.bit_generator.state
        words = (state["state"]["state"], state["state"]["inc"])
        data = (
            self._seed.to_bytes(_SEED_BYTES, "little")
            + b"".join(w.to_bytes(_WORD_BYTES, "little") for w in words)
            + state["has_uint32"].to_bytes(_FLAG_BYTES, "little")
            + state["uinteger"].to_bytes(_FLAG_BYTES, "little")
        )
        return Tensor._wrap(np.frombuffer(data, np.uint8).copy())

    def set_state(self, new_state):
        """Restore a state from get_state() (this generator's or another's, its seed included); returns the
        generator."""
        data = _state_bytes(new_state)
        fields, at = [], 0
        for size in (_SEED_BYTES, _WORD_BYTES, _WORD_BYTES, _FLAG_BYTES, _FLAG_BYTES):
            fields.append(int.from_bytes(data[at : at + size], "little"))
            at += size
        seed, state, inc, has_uint32, uinteger = fields
        if inc % 2 == 0 or has_uint32 > 1:  # PCG64 needs an odd increment
            raise RuntimeError("Invalid PCG64 state")
        bits = np.random.PCG64()
        bits.state = {
            "bit_generator": "PCG64",
            "state": {"state": state, "inc": inc},
            "has_uint32": has_uint32,
            "uinteger": uinteger,
        }
        self._seed, self._bits = seed, np.random.Generator(bits)
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
            f"Expected a PCG64 generator state of size {STATE_SIZE} but found the input RNG state "
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
