"""The persistent compilation cache: compiled XLA programs kept on disk, so that a second process loads the programs
a first one compiled instead of compiling them again.

It is JAX's own persistent cache (keyed by the lowered program, the compile options, the backend and the jaxlib
version) with a store of our own behind it: entries carry a checksum and are written whole (a temporary file renamed
into place), so that a truncated or garbage entry is a miss, not a crash; and any failure of the directory (missing
permissions, a file where the directory should be) turns the cache off with one warning. The thresholds are lowered
to zero, as most of this project's programs compile in well under JAX's default of one second.

JAX's key does not name the CPU, and a CPU executable holds machine code for the CPU that compiled it: entries live
in a subdirectory per kind of CPU (a hash of its instruction-set flags), so that a cache in a home directory shared
by different machines never hands one machine another's code. XLA logs an error for every CPU executable it loads
whose compile-time tuning flags (`+prefer-no-gather` on AMD Zen 4, for one) are not host features, although the code
runs on the machine that compiled it (openxla/xla#44565); that log is silenced while our store's entries load.

At import the directory is `$BATCHED_GRAD_CACHE_DIR`, else `$XDG_CACHE_HOME/batched_grad`, else
`~/.cache/batched_grad`; an empty `BATCHED_GRAD_CACHE_DIR` turns it off. A cache directory the user already gave JAX
(`jax_compilation_cache_dir`, or `JAX_COMPILATION_CACHE_DIR`) is left as it is. `set_compilation_cache` switches it at
run time; like JAX's setting, it is process-wide and serves the user's own `jax.jit` programs too."""

import functools
import hashlib
import os
import platform
import tempfile
import threading
import warnings
import zlib

import jax

try:  # JAX's store behind its persistent cache, replaced by ours below
    from jax._src import compilation_cache as _jax_cache
    from jax._src.compilation_cache_interface import CacheInterface

    _jax_cache.reset_cache, _jax_cache._cache_initialized_mutex, _jax_cache.get_executable_and_time  # noqa: B018
    _jax_cache.extract_executable_and_time, _jax_cache.decompress_executable  # noqa: B018
except (ImportError, AttributeError):  # another JAX's layout: its own store, through its public settings only
    _jax_cache, CacheInterface = None, object

try:
    from jax._src.lib import utils as _jaxlib_utils

    absl_set_min_log_level = _jaxlib_utils.absl_set_min_log_level
except (ImportError, AttributeError):  # a jaxlib without it: XLA's log lines stay
    absl_set_min_log_level = None

ENV_VAR = "BATCHED_GRAD_CACHE_DIR"
_MAGIC = b"BGC1"  # the header of an entry: magic, then the CRC-32 of the payload
_SUFFIX = "-cache"


def default_directory():
    """The directory the environment names, or None where it turns the cache off."""
    if ENV_VAR in os.environ:
        return os.environ[ENV_VAR] or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "batched_grad")


@functools.cache
def host_kind():
    """A short name for this machine's kind of CPU: a hash of its architecture and instruction-set flags (its host
    name where the flags cannot be read)."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    described = "|".join([platform.system(), platform.machine(), platform.processor(), flags or platform.node()])
    return hashlib.sha256(described.encode()).hexdigest()[:16]


class DiskCache(CacheInterface):
    """JAX's cache interface over a directory: one file per key. It never raises: the first failure warns (once)
    and either drops the entry (unreadable or corrupt: compiled again and rewritten) or turns the cache off (the
    directory cannot be written)."""

    def __init__(self, path):
        self._path = path
        self.usable = True
        self.writable = True  # False: a directory that can be read but not written (a pre-built cache, shared)
        self._warned = False
        self._lock = threading.Lock()

    def get(self, key):
        if not self.usable:
            return None
        entry = os.path.join(self._path, key + _SUFFIX)
        try:
            with open(entry, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            return self._drop(entry, f"cannot read entry {os.path.basename(entry)}: {e.strerror or e}")
        payload = data[len(_MAGIC) + 4 :]
        if data[: len(_MAGIC)] != _MAGIC or int.from_bytes(data[len(_MAGIC) : len(_MAGIC) + 4], "big") != zlib.crc32(
            payload
        ):
            return self._drop(entry, f"entry {os.path.basename(entry)} is corrupt (bad header or checksum)")
        return payload

    def put(self, key, value):
        if not (self.usable and self.writable):
            return
        header = _MAGIC + zlib.crc32(value).to_bytes(4, "big")
        try:
            write_whole(os.path.join(self._path, key + _SUFFIX), header + value)
        except OSError as e:
            self.disable(f"cannot write to it: {e.strerror or e}")

    def _drop(self, entry, reason):
        self.warn(f"{reason}; it is compiled again" + ("" if self.writable else " (not replaced: read-only)"))
        try:
            os.remove(entry)
        except OSError:
            pass
        return None

    def unloadable(self, key, error):
        """An entry whose checksum holds but which JAX cannot load (written by another jaxlib, or damaged before its
        checksum was taken): dropped like a corrupt one, with the cache's one warning."""
        entry = os.path.join(self._path, key + _SUFFIX)
        return self._drop(entry, f"entry {os.path.basename(entry)} cannot be loaded ({type(error).__name__}: {error})")

    def disable(self, reason):
        self.usable = False
        self.warn(f"{reason}; compiling without a persistent cache")

    def warn(self, reason):
        with self._lock:
            if self._warned:
                return
            self._warned = True
        warnings.warn(f"batched_grad compilation cache at {self._path!r}: {reason}", UserWarning, stacklevel=2)


def write_whole(path, data):
    """Write `data` to `path` so that a reader sees either no file or all of it."""
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.remove(temporary)
        except OSError:
            pass
        raise


def _usable(cache):
    """Create the directory and write a file of this process's own in it (processes sharing the directory probe it
    at once). A directory that can be read but not written is read only; one that cannot be read or created turns
    `cache` off. Either costs the cache's one warning."""
    try:
        os.makedirs(cache._path, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=cache._path, prefix=".probe-")
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        reason = e.strerror or e
        if os.path.isdir(cache._path) and os.access(cache._path, os.R_OK | os.X_OK):
            cache.writable = False
            cache.warn(f"cannot write to it: {reason}; its entries are read, new programs are not kept")
        else:
            cache.disable(f"cannot create or write to it: {reason}")
    return cache.usable


def use(path):
    """Serve JAX's persistent compilation cache and the store of executables (_store.py) from `path` (a str), or turn
    them off (None)."""
    from . import _store

    if _jax_cache is not None:
        _jax_cache.reset_cache()
    if path is None:
        jax.config.update("jax_compilation_cache_dir", None)
        _store.use(None)
        return
    path = os.path.abspath(os.path.expanduser(path))
    cache = DiskCache(os.path.join(path, host_kind()))
    if not _usable(cache):
        jax.config.update("jax_compilation_cache_dir", None)
        _store.use(None)
        return
    _store.use(path, writable=cache.writable)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    if _jax_cache is not None:
        with _jax_cache._cache_initialized_mutex:
            _jax_cache._cache, _jax_cache._cache_initialized = cache, True


_CPP_LEVELS = {"CRITICAL": 3, "FATAL": 3, "ERROR": 2, "WARN": 1, "WARNING": 1, "INFO": 0, "DEBUG": 0}


def _cpp_log_level():
    """XLA's C++ minimum log level as JAX set it: from `jax_logging_level`, else `TF_CPP_MIN_LOG_LEVEL`."""
    level = _CPP_LEVELS.get(jax.config.jax_logging_level or "")
    if level is not None:
        return level
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "1"))
    except ValueError:
        return 1


class _Hits(threading.local):
    """This thread's hits of JAX's persistent cache. An executable JAX loaded from its cache cannot be serialized
    again (its code is missing from the copy: it fails when run), so the store of executables (_store.py) keeps
    the serialized bytes the entry held instead: `wanted` asks for them at the next hit."""

    count = 0
    wanted = False
    serialized = None  # the serialized executable of the last hit while wanted, where it could be read back


hits = _Hits()
_counting = [False]  # whether _count_hits listens to JAX's events


def _count_hits(name, **kwargs):
    if name == "/jax/compilation_cache/cache_hits":
        hits.count += 1


def _serialized_entry(cache, key):
    """The serialized executable JAX's cache entry `key` holds (the payload JAX decompresses and loads), or None."""
    try:
        data = cache.get(key)
        return (
            None if data is None else _jax_cache.extract_executable_and_time(_jax_cache.decompress_executable(data))[0]
        )
    except Exception:
        return None


class _QuietXla:
    """Within it, XLA's C++ log shows fatal errors only (loading an executable of ours logs an error for each XLA
    tuning flag that is not a host feature, openxla/xla#44565). The log level is one setting for the process: it is
    restored when the last thread inside leaves, so that a load in another thread stays quiet."""

    def __init__(self):
        self._lock, self._inside = threading.Lock(), 0

    def __enter__(self):
        with self._lock:
            if self._inside == 0 and absl_set_min_log_level is not None:
                absl_set_min_log_level(3)
            self._inside += 1

    def __exit__(self, *exc):
        with self._lock:
            self._inside -= 1
            if self._inside == 0 and absl_set_min_log_level is not None:
                absl_set_min_log_level(_cpp_log_level())
        return False


quiet_xla = _QuietXla()


def _quiet_loads(load):
    """JAX's read of a cache entry, with XLA's C++ log limited to fatal errors while it loads one of ours, and an
    entry JAX cannot load dropped as a miss; the entry's serialized executable kept where `hits.wanted`."""

    @functools.wraps(load)
    def load_quietly(key, *args, **kwargs):
        cache = _jax_cache._cache
        if not isinstance(cache, DiskCache):
            found = load(key, *args, **kwargs)
            if hits.wanted and found[0] is not None:
                hits.serialized = _serialized_entry(cache, key)
            return found
        try:
            with quiet_xla:
                found = load(key, *args, **kwargs)
            if hits.wanted and found[0] is not None:
                hits.serialized = _serialized_entry(cache, key)
            return found
        except Exception as error:  # JAX would warn once per entry: ours warns once in all and drops the entry
            if jax.config.jax_raise_persistent_cache_errors:
                raise
            cache.unloadable(key, error)
            return None, None

    load_quietly.quiet = True
    return load_quietly


def set_compilation_cache(path):
    """Keep compiled programs in the directory `path` (created if missing), so that later processes load them
    instead of compiling; None turns the persistent cache off. An unusable directory warns once and leaves it off."""
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"set_compilation_cache(): argument 'path' must be a str, an os.PathLike or None, not {type(path).__name__}"
        )
    if path is not None:
        path = os.fspath(path)
        if not isinstance(path, str):
            raise TypeError(
                f"set_compilation_cache(): argument 'path' must name a directory as a str path, "
                f"not {type(path).__name__}"
            )
        if not path:
            raise ValueError("set_compilation_cache(): argument 'path' must be a directory path or None, not ''")
    use(path)


def setup():
    """At import: the directory the environment names, unless the user already gave JAX one."""
    if _jax_cache is not None and not getattr(_jax_cache.get_executable_and_time, "quiet", False):
        _jax_cache.get_executable_and_time = _quiet_loads(_jax_cache.get_executable_and_time)
    if not _counting[0]:
        jax.monitoring.register_event_listener(_count_hits)
        _counting[0] = True
    if jax.config.jax_compilation_cache_dir is None:
        use(default_directory())
    else:  # JAX's cache stays where the user put it; the store of executables takes the default directory
        from . import _store

        directory = default_directory()
        _store.use(None if directory is None else os.path.abspath(os.path.expanduser(directory)))
