"""torch.torch_version: `__version__` is a string that compares with version strings and tuples by PEP 440 order, as
torch's TorchVersion does (`torch.__version__ >= "2.0"`, `>= (1, 13)`); a string that is not a version compares as a
string."""

import re

__all__ = ["TorchVersion"]

_PEP440 = re.compile(
    r"v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|b|c|rc|alpha|beta|pre|preview)[-_.]?(?P<pre_n>\d*))?"
    r"(?:[-_.]?(?:post|rev|r)[-_.]?(?P<post>\d*))?"
    r"(?:[-_.]?dev[-_.]?(?P<dev>\d*))?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?",
    re.IGNORECASE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_INF = float("inf")


def _order_key(text):
    """packaging.version's ordering: release (trailing zeros ignored), then pre-release, post, dev, local label."""
    match = _PEP440.fullmatch(text.strip())
    if match is None:
        return None
    release = [int(part) for part in match["release"].split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    is_post, is_dev = match["post"] is not None, match["dev"] is not None
    if match["pre"] is not None:
        pre = (_PRE_RANK[match["pre"].lower()], int(match["pre_n"] or 0))
    else:
        pre = (-_INF, 0) if is_dev and not is_post else (_INF, 0)
    post = (int(match["post"] or 0),) if is_post else (-_INF,)
    dev = (int(match["dev"] or 0),) if is_dev else (_INF,)
    local_parts = re.split(r"[-_.]", match["local"]) if match["local"] else []
    local = tuple((1, int(p), "") if p.isdigit() else (0, 0, p.lower()) for p in local_parts) or ((-1, 0, ""),)
    return tuple(release), pre, post, dev, local


def _as_text(other):
    if isinstance(other, tuple):
        return ".".join(str(part) for part in other)
    return other if isinstance(other, str) else None


def _compare(name):
    str_op = getattr(str, name)

    def compare(self, other):
        text = _as_text(other)
        if text is None:
            return NotImplemented
        mine, theirs = _order_key(self), _order_key(text)
        if mine is None or theirs is None:
            return str_op(str(self), text)
        return getattr(mine, name)(theirs)

    compare.__name__ = name
    return compare


class TorchVersion(str):
    """A version string ordered as a version: `TorchVersion("2.13.0") > "2.9"` is True, as torch's is."""

    __lt__ = _compare("__lt__")
    __le__ = _compare("__le__")
    __gt__ = _compare("__gt__")
    __ge__ = _compare("__ge__")
    __eq__ = _compare("__eq__")
    __hash__ = str.__hash__
