"""The store of compiled programs: serialized XLA executables on disk, keyed by what each program computes, so that a
later process loads a kernel's or a fused program's executable without tracing, lowering or compiling it.

JAX's persistent compilation cache (_cache.py) skips only XLA's compile: its key is the lowered program, so every
program is still traced and lowered first (8-40 ms each in a fresh process, most of a first call). This store is
consulted before that. An entry's key is the text of:
- the environment: the format of this store, Python's version, the versions of JAX, jaxlib, NumPy and this package
  and a digest of this package's sources (batched_grad and vmap), the backend's platform, its version and device
  kind, XLA_FLAGS, the JAX settings that change a traced program, and the kind of CPU (entries live in a directory
  per kind of CPU, as in _cache.py);
- the program: its stable name (_names.py: a kernel's op and static params, a fused program's structural key),
  the jit options, the avals of its arguments (shape, dtype, weak type) and the 64-bit mode.
The file is named by a hash of that text and holds the text itself: an entry whose text differs (another version,
another program, a hash collision) is never used, nor is a truncated or corrupt one (a checksum); either warns once
and is dropped, and the program is compiled again.

Values that JAX traces a function to find (a derived host form's program, an op's output avals, which arguments a
VJP's outputs read) are kept the same way (`remembered`), under their own kind of key, so that a later process
skips those traces too.

Executables are kept and loaded in processes whose default backend has one device (no default device set): an
executable is compiled for the devices it runs on. Programs without a stable name (a user's function inside a
kernel) compile as usual. Entries are written by a background thread (a process that exits waits for it); a
directory that cannot be written turns writing off (reading goes on), one that cannot be read turns the store off,
each with one warning.

It lives in the compilation cache's directory (`$BATCHED_GRAD_CACHE_DIR`, else `$XDG_CACHE_HOME/batched_grad`, else
`~/.cache/batched_grad`), under `programs/`, and is switched with it (`set_compilation_cache`); an empty
`BATCHED_GRAD_CACHE_DIR` turns both off, `BATCHED_GRAD_STORE=0` this store alone. Loading an executable runs
code: use directories only you can write to."""

import atexit
import hashlib
import importlib.util
import io
import os
import pickle
import queue
import sys
import threading
import warnings
import zlib

import jax
import numpy as np

from . import _names, _payback
from ._cache import host_kind, quiet_xla, write_whole

ENV_VAR = "BATCHED_GRAD_STORE"  # "0": no store of executables (JAX's persistent cache stays)
FORMAT = "BGX1"  # the magic of an entry, and part of every key: a new layout is a new store
_HEADER = len(FORMAT) + 8  # magic, CRC-32 of the rest, length of the key text
_EXECUTABLE, _VALUE = ".exe", ".val"  # the suffixes of the two kinds of entries
# JAX settings that change what a trace produces (not the 64-bit mode: part of each program's key)
_SETTINGS = (
    "jax_default_matmul_precision",
    "jax_default_prng_impl",
    "jax_threefry_partitionable",
    "jax_numpy_dtype_promotion",
    "jax_numpy_rank_promotion",
    "jax_enable_checks",
    "jax_debug_nans",
    "jax_debug_infs",
    "jax_disable_jit",
    "jax_dynamic_shapes",
    "jax_use_shardy_partitioner",
)


class _State:
    directory = None  # the entries' directory, or None: the store is off
    writable = True
    warned = False
    environment = None  # the environment's part of every key, made at the first use
    sources = None  # (thread, {"digest": ...}) finding the sources' digest, started by the first `use`
    counts = None


_state = _State()
_state.counts = {"loaded": 0, "saved": 0, "not kept": 0, "missed": 0, "rejected": 0, "remembered": 0}
_lock = threading.Lock()


def use(directory, writable=True):
    """Keep entries under `directory` (the compilation cache's; None turns the store off), in a folder per kind of
    CPU; a directory that is not `writable` is only read."""
    if os.environ.get(ENV_VAR, "1").strip() == "0":
        directory = None
    with _lock:
        _state.directory = None if directory is None else os.path.join(directory, "programs", host_kind())
        _state.writable, _state.warned = writable, False
        if _state.directory is not None and _state.sources is None:
            _state.sources = _digest_in_background(_state.directory, writable)


def counts():
    """How many executables this process loaded, how many entries it saved, did not keep (calls into libraries),
    looked up in vain and refused (corrupt, or keyed by another text), and how many traced values it found
    (`remembered`), as a dict: for tests, and to see what the store does."""
    return dict(_state.counts)


def active():
    """Whether programs are looked up and kept now."""
    return _state.directory is not None and _single_device()


def _single_device():
    if jax.config.jax_default_device is not None:
        return False
    try:
        return len(jax.devices()) == 1
    except RuntimeError:
        return False


# ---- keys -------------------------------------------------------------------------------------------------------
def _digest_in_background(directory, writable):
    """Start finding the sources' digest in a thread (it may read every source file, 4-8 ms, while the import goes
    on); the first key waits for it."""
    found = {}

    def find():
        try:
            found["digest"] = _sources_digest(directory, writable)
        except Exception:  # no digest: a key of this process's own, which no other process's entry matches
            found["digest"] = "unknown " + os.urandom(16).hex()

    thread = threading.Thread(target=find, name="batched_grad sources", daemon=True)
    thread.start()
    return thread, found


def _sources_digest(directory, writable):
    """A digest of the sources of batched_grad and vmap: their files' contents, found again only when a file's size
    or modification time changed (memoized in `directory`)."""
    here = os.path.dirname(os.path.abspath(__file__))
    roots = [here, os.path.dirname(importlib.util.find_spec("vmap").origin)]
    files = []
    for root in roots:
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            files += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".py")]
    stamp = hashlib.sha256()
    for path in files:
        info = os.stat(path)
        stamp.update(f"{path}|{info.st_size}|{info.st_mtime_ns}\n".encode())
    memo = os.path.join(directory, f"sources-{stamp.hexdigest()[:32]}")
    try:
        with open(memo) as f:
            digest = f.read().strip()
        if len(digest) == 64:
            return digest
    except OSError:
        pass
    content = hashlib.sha256()
    for path in files:
        with open(path, "rb") as f:
            content.update(os.path.relpath(path, os.path.dirname(os.path.dirname(path))).encode() + b"\0")
            content.update(f.read())
    digest = content.hexdigest()
    if writable:
        try:
            os.makedirs(directory, exist_ok=True)
            write_whole(memo, digest.encode())
        except OSError:
            pass
    return digest


def _environment():
    """The part of every key that names the software and the machine (made once per process)."""
    if _state.environment is None:
        import jaxlib

        from . import __version__

        if _state.sources is None:
            _state.sources = _digest_in_background(_state.directory, _state.writable)
        thread, found = _state.sources
        thread.join()
        device = jax.devices()[0]
        parts = [
            FORMAT,
            f"python {sys.implementation.name} {sys.version_info[:3]}",
            f"jax {jax.__version__} jaxlib {jaxlib.__version__} numpy {np.__version__}",
            f"batched_grad {__version__} sources {found['digest']}",
            f"backend {device.platform} {device.client.platform_version} {device.device_kind}",
            f"XLA_FLAGS {os.environ.get('XLA_FLAGS', '')}",
            f"host {host_kind()}",
        ]
        _state.environment = "\n".join(parts)
    return _state.environment


def _settings():
    return "\n".join([f"{name} {getattr(jax.config, name, None)!r}" for name in _SETTINGS])


def aval_text(aval):
    """An argument's part of a key: its dtype, shape and weak type (from a tracer's aval or an abstractified array)."""
    return f"{np.dtype(aval.dtype).name}{list(aval.shape)}{'w' if aval.weak_type else ''}"


def key_text(name, options, tree, avals):
    """The full key of a program: the environment, JAX's settings, the program's stable name (text), its jit
    options, the structure of its arguments (`tree`, a pytree's text) and their avals, and the 64-bit mode."""
    return "\n".join(
        [
            _environment(),
            _settings(),
            f"program {name}",
            f"options {sorted(options.items())!r}",
            f"arguments {tree} " + ";".join([aval_text(a) for a in avals]),
            f"x64 {jax.enable_x64.value}",
        ]
    )


def _path(key, suffix=_EXECUTABLE):
    return os.path.join(_state.directory, hashlib.sha256(key.encode()).hexdigest()[:40] + suffix)


# ---- reading ----------------------------------------------------------------------------------------------------
def contains(key):
    """Whether an entry for this key is on disk (not checked: a load may still refuse it)."""
    return _state.directory is not None and os.path.exists(_path(key))


def load(key):
    """The executable (a jax.stages.Compiled) kept under `key`, or None."""
    mark = _payback.one_time_mark()
    found = _read(key)
    if found is None:
        return None
    data, path = found
    try:
        compiled = _deserialize(*pickle.loads(data))
    except Exception as error:  # written by another jaxlib, or damaged before its checksum was taken
        _refuse(path, f"entry {os.path.basename(path)} cannot be loaded ({type(error).__name__}: {error})")
        return None
    _state.counts["loaded"] += 1
    _payback.note_load(_payback.one_time_since(mark))  # not time a structure spends running
    return compiled


def _read(key, suffix=_EXECUTABLE):
    """(the payload of the entry kept under `key`, its path), or None: missing, or refused with one warning."""
    if _state.directory is None:
        return None
    path = _path(key, suffix)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        _state.counts["missed"] += 1
        return None
    except OSError as e:
        _refuse(path, f"cannot read entry {os.path.basename(path)}: {e.strerror or e}")
        return None
    found = _decode(data, key)
    if isinstance(found, str):
        _refuse(path, f"entry {os.path.basename(path)} {found}")
        return None
    return found, path


def _decode(data, key):
    """The payload of an entry's bytes, or why it is refused (a str)."""
    body = data[len(FORMAT) + 4 :]
    if data[: len(FORMAT)] != FORMAT.encode() or len(data) < _HEADER:
        return "is not an entry of this store"
    if int.from_bytes(data[len(FORMAT) : len(FORMAT) + 4], "big") != zlib.crc32(body):
        return "is corrupt (bad checksum)"
    size = int.from_bytes(body[:4], "big")
    if body[4 : 4 + size] != key.encode():
        return "was written for another program, version or machine"
    return body[4 + size :]


# ---- values derived from traces ---------------------------------------------------------------------------------
def remembered(kind, name, compute, encode=pickle.dumps, decode=pickle.loads):
    """`compute()`, kept in the store under the stable text of `name` (_names.py) and `kind`: a value JAX traces a
    function to find (a host form's program, an op's output avals, what a VJP's outputs read), found again in a
    later process without the trace. Computed as it is where the store is off or `name` has no stable text. A value
    that cannot be decoded (or encoded) is computed (and not kept). Either is one-time work (_payback.py)."""
    mark = _payback.one_time_mark()
    try:
        return _remembered(kind, name, compute, encode, decode)
    finally:
        _payback.one_time_since(mark)


def _remembered(kind, name, compute, encode, decode):
    if _state.directory is None:
        return compute()
    text = _names.describe(name)
    if text is None:
        return compute()
    key = "\n".join([_environment(), _settings(), f"{kind} {text}", f"x64 {jax.enable_x64.value}"])
    found = _read(key, _VALUE)
    if found is not None:
        try:
            value = decode(found[0])
            _state.counts["remembered"] += 1
            return value
        except Exception:  # written by another version of the code that reads it: computed again below
            pass
    value = compute()
    if _state.writable:  # encoded by the writer (one that cannot be encoded is not kept)
        _pending.put((_path(key, _VALUE), key, None, (value, encode)))
        _start_writer()
    return value


def _serialize(compiled, executable_bytes):
    """(pickled executable, in_tree, out_tree), as jax.experimental.serialize_executable.serialize gives them, with
    the XLA executable's own bytes where given (from JAX's cache entry)."""
    from jax.experimental import serialize_executable

    if executable_bytes is None:
        return serialize_executable.serialize(compiled)
    from jax._src.lib import _jax
    from jax._src.lib import xla_client as xc

    class Pickler(serialize_executable._JaxPjrtPickler):
        def persistent_id(self, obj):
            if isinstance(obj, (xc.LoadedExecutable, _jax.Executable)):
                return ("exec", executable_bytes)
            return super().persistent_id(obj)

    if compiled._params.const_args:
        raise NotImplementedError("an executable with constant arguments")
    args_info, in_tree = jax.tree_util.tree_flatten(compiled.args_info)
    with io.BytesIO() as f:
        Pickler(f).dump((compiled._executable._unloaded_executable, args_info, compiled._no_kwargs))
        return f.getvalue(), in_tree, compiled.out_tree


def _deserialize(serialized, in_tree, out_tree):
    from jax.experimental.serialize_executable import deserialize_and_load

    with quiet_xla:
        return deserialize_and_load(serialized, in_tree, out_tree)


def _refuse(path, reason):
    _state.counts["rejected"] += 1
    _warn(f"{reason}; it is compiled again")
    if _state.writable:
        try:
            os.remove(path)
        except OSError:
            pass


def _warn(reason):
    with _lock:
        if _state.warned:
            return
        _state.warned = True
    warnings.warn(f"batched_grad program store at {_state.directory!r}: {reason}", UserWarning, stacklevel=3)


# ---- writing ----------------------------------------------------------------------------------------------------
_pending = queue.Queue()
_writer = []  # the writer thread, once started


def save(key, compiled, serialized=None):
    """Keep `compiled` (a jax.stages.Compiled) under `key`, written by a background thread; `serialized`: the bytes
    of its XLA executable where it was loaded from JAX's cache (whose copy cannot be serialized again)."""
    if _state.directory is None or not _state.writable:
        return
    _pending.put((_path(key), key, compiled, serialized))
    _start_writer()


def _start_writer():
    with _lock:
        if not _writer:
            thread = threading.Thread(target=_write_entries, name="batched_grad store", daemon=True)
            _writer.append(thread)
            thread.start()


def flush():
    """Wait until every entry given to `save` is written."""
    if _writer:
        _pending.join()


atexit.register(flush)


def _write_entries():
    while True:
        path, key, compiled, serialized = _pending.get()
        try:
            _write_entry(path, key, compiled, serialized)
        except Exception:  # an executable or value that cannot be serialized (constants, an object): not kept
            pass
        finally:
            _pending.task_done()


def _write_entry(path, key, compiled, serialized):
    """An executable's entry (`compiled`, with its XLA executable's bytes where `serialized` is given), or with no
    executable, a value's entry (`serialized`: the value and the function encoding it)."""
    if compiled is None:
        value, encode = serialized
        payload = encode(value)
    else:
        if "custom-call" in (compiled.as_text() or ""):
            # a call into a library (LAPACK, the FFT) that JAX registers while lowering: a later process that loads
            # the executable without lowering anything would call an unregistered target and crash
            _state.counts["not kept"] += 1
            return
        with io.BytesIO() as f:
            pickle.dump(_serialize(compiled, serialized), f, protocol=pickle.HIGHEST_PROTOCOL)
            payload = f.getvalue()
    text = key.encode()
    body = len(text).to_bytes(4, "big") + text + payload
    data = FORMAT.encode() + zlib.crc32(body).to_bytes(4, "big") + body
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_whole(path, data)
    except OSError as e:
        _state.writable = False
        _warn(f"cannot write to it: {e.strerror or e}; entries are read, new programs are not kept")
        return
    _state.counts["saved"] += 1
