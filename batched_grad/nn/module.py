"""Module: torch.nn.Module's registration of parameters, buffers and submodules through attribute assignment,
with traversal, train/eval, zero_grad and state_dict/load_state_dict."""
from collections import OrderedDict, namedtuple

from .. import _dtypes
from .._factories import zeros_like
from .._grad_mode import no_grad
from .._tensor import Tensor, type_name
from .parameter import Parameter

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
_REGISTRIES = ("_parameters", "_buffers", "_modules")


def _typename(value):
    """torch.typename: torch.FloatTensor for a float32 tensor, else the class name."""
    return type_name(value.dtype.np) if isinstance(value, Tensor) else type(value).__name__


class Module:
    """Base class of layers: assign Parameters and Modules as attributes and they are registered."""

    def __init__(self):
        object.__setattr__(self, "training", True)
        for registry in _REGISTRIES:
            object.__setattr__(self, registry, OrderedDict())

    def forward(self, *args, **kwargs):
        """The module's computation, defined by subclasses; calling the module calls it."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- registration -----------------------------------------------------------------------------------
    def _registry(self, kind):
        registry = self.__dict__.get(kind)
        if registry is None:
            raise AttributeError(f"cannot assign {kind[1:-1]} before Module.__init__() call")
        return registry

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            self.add_module(name, value)
        elif name in self.__dict__.get("_parameters", ()):
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' (torch.nn.Parameter "
                                "or None expected)")
            self._parameters[name] = None
        elif name in self.__dict__.get("_modules", ()):
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' (torch.nn.Module "
                                "or None expected)")
            self._modules[name] = None
        elif name in self.__dict__.get("_buffers", ()):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' (torch.Tensor or None "
                                "expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        for registry in _REGISTRIES:
            entries = self.__dict__.get(registry)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for registry in _REGISTRIES:
            if name in self.__dict__.get(registry, ()):
                del self.__dict__[registry][name]
                return
        object.__delattr__(self, name)

    def _forget(self, name):
        for registry in _REGISTRIES:
            self.__dict__.get(registry, {}).pop(name, None)
        self.__dict__.pop(name, None)

    def register_parameter(self, name, param):
        """Register `param` (a Parameter or None) under `name`."""
        registry = self._registry("_parameters")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' (torch.nn.Parameter "
                            "or None required)")
        self._forget(name)
        registry[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Register a non-parameter tensor (saved in state_dict when `persistent`)."""
        registry = self._registry("_buffers")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' (torch Tensor or None "
                            "required)")
        self._forget(name)
        registry[name] = tensor
        if not persistent:
            self.__dict__.setdefault("_non_persistent", set()).add(name)

    def add_module(self, name, module):
        """Register a child module under `name`."""
        registry = self._registry("_modules")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._forget(name)
        registry[name] = module

    register_module = add_module

    # ---- traversal -------------------------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(name, module) for this module and every descendant, each once."""
        memo = set() if memo is None else memo
        if remove_duplicate and id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self):
        """This module and every descendant."""
        return (m for _, m in self.named_modules())

    def named_children(self):
        """(name, module) for the direct children."""
        return ((n, m) for n, m in self._modules.items() if m is not None)

    def children(self):
        """The direct children."""
        return (m for _, m in self.named_children())

    def _named_members(self, registry, prefix, recurse):
        seen = set()
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, registry).items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix="", recurse=True):
        """(dotted name, Parameter) pairs, each parameter once."""
        return self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        """The Parameters of this module and (with `recurse`) its descendants."""
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix="", recurse=True):
        """(dotted name, buffer) pairs."""
        return self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        """The buffers of this module and its descendants."""
        return (b for _, b in self.named_buffers(recurse=recurse))

    # ---- modes and gradients -----------------------------------------------------------------------------------
    def train(self, mode=True):
        """Set training mode (Dropout drops) on this module and its descendants."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self):
        """train(False)."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Set requires_grad on every parameter."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the parameters' .grad: to None (default), or to zeros."""
        for p in self.parameters():
            if p.grad is not None:
                p.grad = None if set_to_none else zeros_like(p.grad)

    def apply(self, fn):
        """Call fn on every descendant, then on this module."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def to(self, dtype):
        """Convert floating-point parameters and buffers (and grads) to `dtype`, in place."""
        d = _dtypes.to_dtype(dtype)
        if not d.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={d}")
        for t in [*self.parameters(), *self.buffers()]:
            if t.dtype.is_floating_point:
                t.data = t.data.to(d)
                if t._grad is not None:
                    t._grad = t._grad.to(d)
        return self

    def float(self):
        """Convert floating-point parameters and buffers to float32, in place."""
        return self.to(_dtypes.float32)

    def double(self):
        """Convert floating-point parameters and buffers to float64, in place."""
        return self.to(_dtypes.float64)

    # ---- state ---------------------------------------------------------------------------------------------------
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of every parameter and persistent buffer by dotted name (detached unless keep_vars)."""
        destination = OrderedDict() if destination is None else destination
        for module_prefix, module in self.named_modules(prefix=prefix.rstrip(".")):
            skip = module.__dict__.get("_non_persistent", ())
            for registry in ("_parameters", "_buffers"):
                for name, value in getattr(module, registry).items():
                    if value is not None and name not in skip:
                        key = f"{module_prefix}.{name}" if module_prefix else name
                        destination[key] = value if keep_vars else value.detach()
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values from `state_dict` into the parameters and buffers; with `strict`, the keys must match."""
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                errors.append(f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                              f"object from checkpoint but received {type(value)}")
            elif value.shape != target.shape:
                errors.append(f"size mismatch for {key}: copying a param with shape {value.shape!r} from "
                              f"checkpoint, the shape in current model is {target.shape!r}.")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        with no_grad():
            for key, target in own.items():
                if key in state_dict:
                    target.copy_(state_dict[key])
        return IncompatibleKeys(missing, unexpected)

    # ---- printing --------------------------------------------------------------------------------------------
    def extra_repr(self):
        """The text inside this module's parentheses in repr (torch's hook)."""
        return ""

    def __repr__(self):
        lines = [line for line in self.extra_repr().split("\n") if line]
        for name, child in self._modules.items():
            lines.append(f"({name}): " + repr(child).replace("\n", "\n  "))
        if not self._modules:
            return f"{type(self).__name__}({', '.join(lines)})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return sorted({*super().__dir__(), *[k for r in _REGISTRIES for k in self.__dict__.get(r, ())]})
