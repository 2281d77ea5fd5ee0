"""torch's NumPy spellings of keywords: the functions and methods torch binds in C++ take `axis` for `dim`,
`keepdims` for `keepdim`, and (functions only) `x`, `a` or `x1` for `input` and `x2` for `other`; those torch writes
in Python (norm, split, unique, stft, ...) take only their own names."""

import functools
import inspect

ALIASES = {"axis": "dim", "keepdims": "keepdim", "x": "input", "a": "input", "x1": "input", "x2": "other"}
METHOD_ALIASES = {alias: name for alias, name in ALIASES.items() if name != "input"}  # a method's input is self

# torch's functions (of the torch namespace) and methods written in Python, which see no NumPy spellings; those of
# torch.linalg, torch.fft and torch.special are all bound in C++ (torch.linalg.norm takes `axis`, torch.norm doesn't)
TORCH_PYTHON_FUNCTIONS = frozenset({"norm", "split", "stft", "istft", "unique", "unique_consecutive"})
TORCH_PYTHON_METHODS = TORCH_PYTHON_FUNCTIONS | {"unflatten"}


def renaming(fn, name, aliases):
    """A function of (args, kwargs) giving kwargs with fn's NumPy spellings under their torch names, or None where
    fn (torch's `name`) takes none of `aliases`; a keyword given under both names is refused as torch refuses it."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    names = [p.name for p in parameters]
    taken = {alias: torch_name for alias, torch_name in aliases.items() if torch_name in names and alias not in names}
    if not taken:
        return None
    positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

    def given(torch_name, args, kwargs):
        return torch_name in kwargs or (torch_name in positional and len(args) > positional.index(torch_name))

    def renamed(args, kwargs):
        spelled = [alias for alias in kwargs if alias in taken]
        if any(given(taken[alias], args, kwargs) for alias in spelled):  # torch names the first NumPy spelling
            raise TypeError(f"{name}() got an unexpected keyword argument '{spelled[0]}'")
        for alias in spelled:
            kwargs[taken[alias]] = kwargs.pop(alias)
        return kwargs

    return renamed


def function_renaming(fn, name, namespace="torch"):
    python_written = namespace == "torch" and name in TORCH_PYTHON_FUNCTIONS
    return None if python_written else renaming(fn, name, ALIASES)


def with_method_aliases(fn, name):
    """The Tensor method `fn` (torch's `name`), also taking the NumPy spellings torch's method takes."""
    renamed = None if name in TORCH_PYTHON_METHODS else renaming(fn, name, METHOD_ALIASES)
    if renamed is None:
        return fn

    @functools.wraps(fn)
    def method(*args, **kwargs):
        return fn(*args, **renamed(args, kwargs)) if kwargs else fn(*args)

    return method
