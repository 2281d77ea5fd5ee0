"""torch.nn.utils.stateless: running a module with given tensors in place of its parameters and buffers
(_reparametrize_module, the machinery of torch.func.functional_call) and functional_call under its deprecated name."""

import contextlib
import warnings

from ..._tensor import Tensor
from ...jit import is_scripting, is_tracing
from ..parallel import DataParallel

__all__ = ["functional_call"]


def _named_tensors(module):
    """{dotted name: tensor} of every parameter and buffer, tied ones under each of their names."""
    named = {}
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for registry in ("_parameters", "_buffers"):
            for name, tensor in sub.__dict__[registry].items():
                if tensor is not None:
                    named[f"{prefix}.{name}" if prefix else name] = tensor
    return named


def _untied(module, given):
    """`given` with a value for a tied tensor given under one name also set under its other names."""
    names_of = {}
    for name, tensor in _named_tensors(module).items():
        names_of.setdefault(id(tensor), set()).add(name)
    tied = {name: names for names in names_of.values() if len(names) > 1 for name in names}
    untied = dict(given)
    for name in [n for n in given if n in tied]:
        names = tied[name]
        if len(names & set(given)) > 1 and len({id(given[n]) for n in names if n in given}) != 1:
            raise ValueError(
                f"functional_call got multiple values for keys {sorted(names)}, which are tied. "
                "Consider using tie_weights=False"
            )
        for other in names:
            untied[other] = given[name]
    return untied


def _check_keys(module, given):
    expected = set(_named_tensors(module))
    unexpected, missing = sorted(set(given) - expected), sorted(expected - set(given))
    errors = []
    if unexpected:
        errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing:
        errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if errors:
        raise RuntimeError(
            "Error(s) in reparametrizing for {}:\n\t{}".format(type(module).__name__, "\n\t".join(errors))
        )


def _owner(module, name):
    """(the submodule holding the dotted `name`, its registry dict, the attribute name); registry None when the
    name is not a parameter or buffer (it is then set as a plain attribute, as torch does)."""
    *path, attr = name.split(".")
    for part in path:
        module = getattr(module, part)
    for registry in ("_parameters", "_buffers"):
        if attr in module.__dict__[registry]:
            return module, module.__dict__[registry], attr
    return module, None, attr


@contextlib.contextmanager
def _swapped(module, tensors, restore_lifo, current):
    """`tensors` in place of the module's tensors of those names while the block runs; on the way out, `current`
    gets what each name holds then (a forward may have assigned a new tensor) and the originals come back, last
    swapped first when restore_lifo."""
    saved = []
    try:
        for name, tensor in tensors.items():
            if tensor is not None and not isinstance(tensor, Tensor):
                raise TypeError(f"{tensor} is not an instance of torch.Tensor")
            owner, registry, attr = _owner(module, name)
            if registry is None:
                saved.append((name, owner, None, attr, owner.__dict__.get(attr, _ABSENT)))
                object.__setattr__(owner, attr, tensor)
            else:
                saved.append((name, owner, registry, attr, registry[attr]))
                registry[attr] = tensor
        yield
    finally:
        for name, owner, registry, attr, old in reversed(saved) if restore_lifo else saved:
            if registry is not None:
                current[name], registry[attr] = registry[attr], old
                continue
            current[name] = owner.__dict__.get(attr)
            if old is _ABSENT:
                object.__delattr__(owner, attr)
            else:
                object.__setattr__(owner, attr, old)


@contextlib.contextmanager
def _reparametrize_module(module, parameters_and_buffers, tie_weights=False, strict=False, stack_weights=False):
    """torch.nn.utils.stateless._reparametrize_module: the module runs with `parameters_and_buffers` (dotted names)
    in place of its own tensors inside the block; tensors the block assigned anew are written back to the dict.
    tie_weights: a value given for one name of a tied tensor serves its other names; strict: the names must be
    exactly the module's; stack_weights: restore the originals last-swapped first."""
    tensors = _untied(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    if strict:
        _check_keys(module, tensors)
    current = {}
    try:
        with _swapped(module, tensors, stack_weights, current):
            yield
    finally:
        parameters_and_buffers.update({k: current[k] for k in parameters_and_buffers if k in current})


_ABSENT = object()


def _functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) run with `parameters_and_buffers` in place of its tensors of those names."""
    if is_tracing() or is_scripting():
        raise RuntimeError("The stateless API can't be used with Jitted modules")
    if isinstance(module, DataParallel):
        raise RuntimeError("The stateless API can't be used with nn.DataParallel module")
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights, strict=strict):
        return module(*args, **(kwargs or {}))


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """torch.func.functional_call (one dict of tensors), with torch's FutureWarning that this name is deprecated."""
    warnings.warn(
        "`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed in a future "
        "version of PyTorch. Please use `torch.func.functional_call` instead which is a drop-in replacement.",
        FutureWarning,
        stacklevel=2,
    )
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)
