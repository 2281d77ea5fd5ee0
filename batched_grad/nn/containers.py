"""torch.nn's containers: Sequential, ModuleList and ModuleDict of modules, ParameterList and ParameterDict of
parameters, registered so that parameters(), state_dict(), to() and repr() see what they hold, under torch's names
("0.weight", "layers.2.bias")."""

import operator
import warnings
from collections import OrderedDict, abc
from itertools import chain

from .._tensor import Tensor
from .module import Module, _typename, indent
from .parameter import Parameter


def _absolute_index(idx, size):
    """`idx` (any integer-like) as a non-negative index below `size`, torch's IndexError otherwise."""
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range")
    return idx % size


def _renumber(container):
    """Keys "0".."n-1" again after a deletion, keeping the order."""
    object.__setattr__(
        container, "_modules", OrderedDict([(str(i), m) for i, m in enumerate(container._modules.values())])
    )


def _check_pairs(owner, pairs):
    """(key, value) pairs from an iterable of 2-element iterables, with torch's messages for anything else."""
    for j, pair in enumerate(pairs):
        if not isinstance(pair, abc.Iterable):
            raise TypeError(f"{owner} update sequence element #{j} should be Iterable; is{type(pair).__name__}")
        if len(pair) != 2:
            raise ValueError(f"{owner} update sequence element #{j} has length {len(pair)}; 2 is required")
        yield pair[0], pair[1]


class _IndexedModules(Module):
    """What Sequential and ModuleList share: modules under the keys "0", "1", ... in order."""

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def _key(self, idx):
        return str(_absolute_index(idx, len(self)))

    def __setitem__(self, idx, module):
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._key(idx)]
        for key in keys:
            delattr(self, key)
        _renumber(self)

    def pop(self, key):
        """Remove and return the module (or the container of modules, for a slice) at `key`."""
        value = self[key]
        del self[key]
        return value

    def append(self, module):
        """Add `module` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def __dir__(self):
        return [key for key in super().__dir__() if not key.isdigit()]


class Sequential(_IndexedModules):
    """Modules applied in order; built from positional modules or one OrderedDict of named ones."""

    def __init__(self, *args):
        super().__init__()
        items = args[0].items() if len(args) == 1 and isinstance(args[0], OrderedDict) else enumerate(args)
        for name, module in items:
            self.add_module(str(name), module)

    def forward(self, input):
        for module in self:
            input = module(input)
        return input

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_absolute_index(idx, len(self))]

    def _key(self, idx):  # a Sequential built from an OrderedDict keeps its names
        return list(self._modules)[_absolute_index(idx, len(self))]

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return Sequential(*self, *other)

    def __iadd__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return self.extend(other)

    def insert(self, index, module):
        """Insert `module` before position `index` (negative counts from the end)."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        modules = list(self._modules.values())
        modules.insert(index, module)
        object.__setattr__(self, "_modules", OrderedDict([(str(i), m) for i, m in enumerate(modules)]))
        return self

    def extend(self, sequential):
        """Append every module of `sequential` (any iterable of modules)."""
        for module in sequential:
            self.append(module)
        return self


class Container(Module):
    """Deprecated in torch (FutureWarning): a Module holding the modules given as keyword arguments."""

    def __init__(self, **kwargs):
        warnings.warn(
            "`nn.Container` is deprecated. All of its functionality is now implemented in `nn.Module`. Subclass that "
            "instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)


class ModuleList(_IndexedModules):
    """A list of modules: indexed, sliced, appended to like a list, each module registered under its index."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[self._key(idx)]

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        combined = ModuleList()
        for i, module in enumerate(chain(self, other)):
            combined.add_module(str(i), module)
        return combined

    def insert(self, index, module):
        """Insert `module` before position `index` (negative counts from the end, as list.insert)."""
        modules = list(self._modules.values())
        modules.insert(index, module)
        object.__setattr__(self, "_modules", OrderedDict())
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def extend(self, modules):
        """Append the modules of an iterable."""
        if not isinstance(modules, abc.Iterable):
            raise TypeError(f"ModuleList.extend should be called with an iterable, but got {type(modules).__name__}")
        offset = len(self)
        for i, module in enumerate(modules):
            self.add_module(str(offset + i), module)
        return self

    def __repr__(self):
        """Runs of equal reprs print once, as torch's: `(0-2): 3 x Linear(...)`."""
        runs = []  # [first index, last index, repr]
        for i, text in enumerate(repr(m) for m in self):
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        if not runs:
            return f"{self._get_name()}()"
        lines = [
            indent(f"({first}): {text}" if first == last else f"({first}-{last}): {last - first + 1} x {text}")
            for first, last, text in runs
        ]
        return f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules: each registered under its key."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        """Remove every module."""
        self._modules.clear()

    def pop(self, key):
        """Remove the module under `key` and return it."""
        module = self[key]
        del self[key]
        return module

    def keys(self):
        """The keys, in order."""
        return self._modules.keys()

    def items(self):
        """(key, module) pairs, in order."""
        return self._modules.items()

    def values(self):
        """The modules, in order."""
        return self._modules.values()

    def update(self, modules):
        """Add (or replace) the modules of a mapping or of an iterable of (key, module) pairs, in their order."""
        if not isinstance(modules, abc.Iterable):
            raise TypeError(
                "ModuleDict.update should be called with an iterable of key/value pairs, but got "
                f"{type(modules).__name__}"
            )
        pairs = (
            modules.items() if isinstance(modules, (abc.Mapping, ModuleDict)) else _check_pairs("ModuleDict", modules)
        )
        for key, module in pairs:
            self[key] = module


def _describe(value, type_text):
    """A ParameterList's or ParameterDict's line for one entry, as torch prints it."""
    if not isinstance(value, Tensor):
        return f"Object of type: {type(value).__name__}"
    size = "x".join(str(s) for s in value.shape)
    where = f" ({value.device})" if value.device.type == "cuda" else ""
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    return f"{kind} containing: [{type_text(value)} of size {size}{where}]"


def _as_parameter(value):
    """torch's containers of parameters turn a plain Tensor into a Parameter; anything else is kept as it is."""
    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value, Parameter) else value


class ParameterList(Module):
    """A list of parameters (Tensors become Parameters), each registered under its index; other objects are kept
    as plain attributes."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_absolute_index(idx, len(self))))

    def __setitem__(self, idx, value):
        setattr(self, str(_absolute_index(idx, len(self))), _as_parameter(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def __dir__(self):
        return [key for key in super().__dir__() if not key.isdigit()]

    def append(self, value):
        """Add `value` at the end."""
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        """Append the values of an iterable (not a Tensor)."""
        if not isinstance(values, abc.Iterable) or isinstance(values, Tensor):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got {type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return "\n".join(f"  ({i}): " + _describe(p, lambda t: repr(t.dtype)) for i, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of parameters (Tensors become Parameters), each registered under its (string) key; other
    objects are kept as plain attributes. A plain dict given to update() is added in sorted key order, as torch."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _attribute(key):
        if not isinstance(key, str):
            raise TypeError(
                "Index given to ParameterDict cannot be used as a key as it is not a string (type is "
                f"'{type(key).__name__}'). Open an issue on github if you need non-string keys."
            )
        return key

    def __getitem__(self, key):
        return getattr(self, self._attribute(key))

    def __setitem__(self, key, value):
        self._keys[key] = None
        setattr(self, self._attribute(key), _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._attribute(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key, default=None):
        """The value under `key`, first set to `default` if the key is missing."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        """Remove every entry."""
        for key in list(self._keys):
            del self[key]

    def pop(self, key):
        """Remove the entry under `key` and return its value."""
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        """Remove and return the last (key, value) pair added."""
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def get(self, key, default=None):
        """The value under `key`, or `default`."""
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        """A new ParameterDict with `default` under each of `keys`."""
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        """The keys, in order."""
        return self._keys.keys()

    def items(self):
        """(key, value) pairs, in order."""
        return ((k, self[k]) for k in self._keys)

    def values(self):
        """The values, in order."""
        return (self[k] for k in self._keys)

    def update(self, parameters):
        """Add (or replace) the entries of a mapping or of an iterable of (key, value) pairs."""
        if not isinstance(parameters, abc.Iterable):
            raise TypeError(
                "ParametersDict.update should be called with an iterable of key/value pairs, but got "
                f"{type(parameters).__name__}"
            )
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = parameters.items()
        elif isinstance(parameters, abc.Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = _check_pairs("ParameterDict", parameters)
        for key, value in pairs:
            self[key] = value

    def extra_repr(self):
        return "\n".join(f"  ({k}): " + _describe(p, _typename) for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other):
        merged = self.copy()
        merged.update(other)
        return merged

    def __ror__(self, other):
        merged = other.copy()
        merged.update(self)
        return merged

    def __ior__(self, other):
        self.update(other)
        return self
