"""torch.hub's download helpers and its progress bar: tqdm (tqdm's own when installed, as torch re-exports it),
the hub directory (get_dir / set_dir, from $TORCH_HOME or $XDG_CACHE_HOME as torch reads them), download_url_to_file
with its SHA-256 prefix check, and load_state_dict_from_url (a cached download read by batched_grad.load).
Loading models from a repository's hubconf (hub.load / list / help) is not provided."""

import hashlib
import os
import re
import shutil
import sys
import tempfile
import urllib.parse
import urllib.request

from ._serialization import load as _load

try:
    from tqdm import tqdm
except ImportError:

    class tqdm:  # noqa: N801  (torch's name for its fallback)
        """torch's fallback progress bar when tqdm is not installed: counts bytes and writes a percentage."""

        def __init__(self, total=None, disable=False, unit=None, unit_scale=None, unit_divisor=None):
            self.total, self.disable, self.n = total, disable, 0

        def update(self, n):
            if self.disable:
                return
            self.n += n
            if self.total is None:
                sys.stderr.write(f"\r{self.n:.1f} bytes")
            else:
                sys.stderr.write(f"\r{100 * self.n / float(self.total):.1f}%")
            sys.stderr.flush()

        def close(self):
            self.disable = True

        def __enter__(self):
            return self

        def __exit__(self, exc_type, exc_val, exc_tb):
            if not self.disable:
                sys.stderr.write("\n")


_HASH_PREFIX = re.compile(r"-([a-f0-9]*)\.")  # torch's HASH_REGEX: the hash prefix in a file name like name-abc123.pth
_CHUNK = 8192
_hub_dir = None


def _torch_home():
    cache = os.getenv("XDG_CACHE_HOME", os.path.join("~", ".cache"))
    return os.path.expanduser(os.getenv("TORCH_HOME", os.path.join(cache, "torch")))


def get_dir():
    """The directory downloads are cached in: set_dir's, else $TORCH_HOME/hub (by default ~/.cache/torch/hub)."""
    return _hub_dir if _hub_dir is not None else os.path.join(_torch_home(), "hub")


def set_dir(d):
    """Cache downloads in directory `d` from now on (a path; ~ is expanded)."""
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Download `url` to the file `dst` (through a temporary file beside it, moved into place when complete); with
    `hash_prefix`, the file's SHA-256 hex digest must start with it, else RuntimeError and nothing is written."""
    with urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": "torch.hub"})) as response:
        length = response.headers.get("Content-Length")
        total = int(length) if length else None
        dst = os.path.expanduser(dst)
        directory = os.path.dirname(os.path.abspath(dst))
        sha256 = hashlib.sha256() if hash_prefix is not None else None
        partial = tempfile.NamedTemporaryFile(delete=False, dir=directory, suffix=".partial")
        try:
            with partial, tqdm(total=total, disable=not progress, unit="B", unit_scale=True, unit_divisor=1024) as bar:
                while chunk := response.read(_CHUNK):
                    partial.write(chunk)
                    if sha256 is not None:
                        sha256.update(chunk)
                    bar.update(len(chunk))
            if sha256 is not None and not sha256.hexdigest().startswith(hash_prefix):
                raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{sha256.hexdigest()}")')
            shutil.move(partial.name, dst)
        finally:
            if os.path.exists(partial.name):
                os.remove(partial.name)


def load_state_dict_from_url(
    url, model_dir=None, map_location=None, progress=True, check_hash=False, file_name=None, weights_only=True
):
    """The object saved at `url`, downloaded once into `model_dir` (default: get_dir()/checkpoints) under its URL's
    file name (or `file_name`) and read with batched_grad.load. With `check_hash`, the file name's hash prefix
    (name-<sha256 prefix>.ext) is checked against the download."""
    model_dir = os.path.join(get_dir(), "checkpoints") if model_dir is None else model_dir
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        sys.stderr.write(f'Downloading: "{url}" to {cached_file}\n')
        match = _HASH_PREFIX.search(filename) if check_hash else None
        download_url_to_file(url, cached_file, match.group(1) if match else None, progress=progress)
    return _load(cached_file, map_location=map_location, weights_only=weights_only)
