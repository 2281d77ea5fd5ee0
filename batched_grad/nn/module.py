"""Module: torch.nn.Module's registration of parameters, buffers and submodules through attribute assignment,
with traversal, train/eval, zero_grad, conversions (to, cpu, cuda, float, double, half, bfloat16, type)
and torch's repr; state_dict/load_state_dict come from ModuleState."""

import warnings
from collections import OrderedDict

from .. import _dtypes
from .._factories import empty_like
from .._tensor import Tensor, type_name
from ..sparse._grads import zeroed_grad
from . import _conversion, _module_hooks
from ._legacy_backward_hooks import MIXED as MIXED_BACKWARD_HOOKS
from ._module_state import ModuleState
from .parameter import Buffer, Parameter

COMPLEX_MODULES = (
    "Complex modules are a new feature under active development whose design may change, and some modules might "
    "not work as expected when using complex tensors as parameters or buffers. Please file an issue at "
    "https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml if a complex module does not work as "
    "expected."
)
_REGISTRIES = ("_parameters", "_buffers", "_modules")
_GLOBAL_PRE, _GLOBAL_POST = _module_hooks.global_forward_pre_hooks, _module_hooks.global_forward_hooks
_GLOBAL_BACKWARD_PRE, _GLOBAL_BACKWARD = _module_hooks.global_backward_pre_hooks, _module_hooks.global_backward_hooks


def _set_data(tensor, value):
    """`tensor.data = value`, refused as torch refuses it for a tensor requiring grad and a non-float value."""
    if value is tensor:
        return
    if tensor.requires_grad and not (value.dtype.is_floating_point or value.dtype.is_complex):
        raise RuntimeError("data set to a tensor that requires gradients must be floating point or complex dtype")
    tensor.data = value


def _from_einops_torch(value):
    """einops.layers.torch's Rearrange, Reduce or EinMix (a torch module) as batched_grad's layer of the same pattern
    and weights; None for any other value."""
    if type(value).__module__ != "einops.layers.torch" or type(value).__name__ not in ("Rearrange", "Reduce", "EinMix"):
        return None
    from ..einops_layers import from_torch_layer

    return from_torch_layer(value)


def _typename(value):
    """torch.typename: torch.FloatTensor for a float32 tensor, else the class name."""
    return type_name(value.dtype.np) if isinstance(value, Tensor) else type(value).__name__


class Module(ModuleState):
    """Base class of layers: assign Parameters and Modules as attributes and they are registered."""

    def __init__(self):
        object.__setattr__(self, "training", True)
        for registry in _REGISTRIES + _module_hooks.HOOK_DICTS:
            object.__setattr__(self, registry, OrderedDict())

    def forward(self, *args, **kwargs):
        """The module's computation, defined by subclasses; calling the module calls it."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        compiled = self.__dict__.get("_compiled_call_impl")
        if compiled is not None:
            return compiled(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        if self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or self._backward_pre_hooks:
            return _module_hooks.call_with_hooks(self, args, kwargs)
        if _GLOBAL_PRE or _GLOBAL_POST or _GLOBAL_BACKWARD_PRE or _GLOBAL_BACKWARD:
            return _module_hooks.call_with_hooks(self, args, kwargs)
        return self.forward(*args, **kwargs)

    def compile(self, *args, **kwargs):
        """Compile this module's calls in place with bg.compile(*args, **kwargs) (torch.compile's arguments): the
        module stays itself (its parameters, state-dict keys and attributes unchanged); its calls, hooks included,
        run through the compiled program."""
        from .._compile import compile_forward  # the compiler imports nn lazily too

        if args:
            raise TypeError(f"Module.compile() takes torch.compile's keyword arguments, but got {len(args)} positional")
        object.__setattr__(self, "_compiled_call_impl", compile_forward(self._call_impl, **kwargs))

    # ---- hooks -------------------------------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None or new args (hook(module, args, kwargs) -> None or (args, kwargs) with
        with_kwargs), run before forward."""
        flags = [self._forward_pre_hooks_with_kwargs] if with_kwargs else []
        return _module_hooks.add(self._forward_pre_hooks, hook, prepend, flags)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) -> None or a new output (hook(module, args, kwargs, output) with
        with_kwargs), run after forward; with always_call also when forward raises."""
        flags = [self._forward_hooks_with_kwargs] if with_kwargs else []
        flags += [self._forward_hooks_always_called] if always_call else []
        return _module_hooks.add(self._forward_hooks, hook, prepend, flags)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> None or a new grad_output, run when the output's gradients are known."""
        return _module_hooks.add(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> None or a new grad_input, run when the gradients with respect
        to the module's Tensor inputs are known."""
        if self.__dict__.get("_is_full_backward_hook") is False:
            raise RuntimeError(MIXED_BACKWARD_HOOKS)
        object.__setattr__(self, "_is_full_backward_hook", True)
        return _module_hooks.add(self._backward_hooks, hook, prepend)

    def register_backward_hook(self, hook):
        """torch's deprecated non-full form: hook(module, grad_input, grad_output) is registered, at each call, on
        the grad_fn of the result's first Tensor, and sees that node's gradients only (torch's FutureWarning says
        when that is not the whole module); register_full_backward_hook gives the module's."""
        if self.__dict__.get("_is_full_backward_hook") is True:
            raise RuntimeError(MIXED_BACKWARD_HOOKS)
        object.__setattr__(self, "_is_full_backward_hook", False)
        return _module_hooks.add(self._backward_hooks, hook)

    # ---- registration -----------------------------------------------------------------------------------
    def _registry(self, kind):
        registry = self.__dict__.get(kind)
        if registry is None:
            raise AttributeError(f"cannot assign {kind[1:-1]} before Module.__init__() call")
        return registry

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            self._registry("_parameters")
            self._remove_from(name, "__dict__", "_buffers", "_modules")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            self._registry("_modules")
            self._remove_from(name, "__dict__", "_parameters", "_buffers")
            self._modules[name] = value
        elif name in self.__dict__.get("_parameters", ()):
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter '{name}' (torch.nn.Parameter or None expected)"
                )
            self._parameters[name] = None
        elif name in self.__dict__.get("_modules", ()):
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as child module '{name}' (torch.nn.Module or None expected)"
                )
            self._modules[name] = None
        elif isinstance(value, Buffer):
            self._registry("_buffers")
            self.register_buffer(name, value, value.persistent)
        elif name in self.__dict__.get("_buffers", ()):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as buffer '{name}' "
                    "(torch.nn.Buffer, torch.Tensor or None expected)"
                )
            self._buffers[name] = value
        elif (layer := _from_einops_torch(value)) is not None:
            self.__setattr__(name, layer)
        else:
            object.__setattr__(self, name, value)

    def __getstate__(self):
        """Pickling and deepcopy leave out what Module.compile made, as torch's: the copy runs uncompiled."""
        state = self.__dict__.copy()
        state.pop("_compiled_call_impl", None)
        return state

    def __setstate__(self, state):
        """Unpickling: a module saved before it had hook registries gets empty ones, as torch's does."""
        self.__dict__.update(state)
        for registry in _module_hooks.HOOK_DICTS:
            self.__dict__.setdefault(registry, OrderedDict())

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
                self.__dict__.get("_non_persistent", set()).discard(name)
                return
        object.__delattr__(self, name)

    def _remove_from(self, name, *places):
        """Forget `name` in these registries (or the instance __dict__): an attribute assigned anew moves there."""
        for place in places:
            (self.__dict__ if place == "__dict__" else self.__dict__.get(place, {})).pop(name, None)
        self.__dict__.get("_non_persistent", set()).discard(name)

    def _check_name(self, kind, name, registry):
        """torch's checks of a new parameter's, buffer's or module's name."""
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in registry:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."' + (f", got: {name}" if kind == "module" else ""))
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')

    def register_parameter(self, name, param):
        """Register `param` (a Parameter or None) under `name`."""
        registry = self._registry("_parameters")
        self._check_name("parameter", name, registry)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' (torch.nn.Parameter or None required)"
            )
        registry[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Register a non-parameter tensor (saved in state_dict when `persistent`)."""
        registry = self._registry("_buffers")
        self._check_name("buffer", name, registry)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' (torch Tensor or None required)"
            )
        registry[name] = tensor
        if persistent:
            self.__dict__.get("_non_persistent", set()).discard(name)
        else:
            self.__dict__.setdefault("_non_persistent", set()).add(name)

    def add_module(self, name, module):
        """Register a child module under `name`."""
        if module is not None and not isinstance(module, Module):
            converted = _from_einops_torch(module)
            module = module if converted is None else converted
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        registry = self._registry("_modules")
        self._check_name("module", name, registry)
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

    def get_submodule(self, target):
        """The submodule at the dotted path `target` ("" is this module)."""
        found = self
        for name in target.split(".") if target else ():
            if not hasattr(found, name):
                raise AttributeError(f"{found._get_name()} has no attribute `{name}`")
            found = getattr(found, name)
            if not isinstance(found, Module):
                raise AttributeError(f"`{name}` is not an nn.Module")
        return found

    def _get_member(self, target):
        """(owner module, name, value) of the attribute at the dotted path `target`."""
        path, _, name = target.rpartition(".")
        owner = self.get_submodule(path)
        if not hasattr(owner, name):
            raise AttributeError(f"{owner._get_name()} has no attribute `{name}`")
        return owner, name, getattr(owner, name)

    def get_parameter(self, target):
        """The Parameter at the dotted path `target` ("block.0.weight")."""
        _, name, found = self._get_member(target)
        if not isinstance(found, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return found

    def get_buffer(self, target):
        """The buffer at the dotted path `target` ("bn.running_mean")."""
        owner, name, found = self._get_member(target)
        if name not in owner._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return found

    def set_submodule(self, target, module, strict=False):
        """Put `module` at the dotted path `target`, replacing what is there (which must be a module); with
        `strict`, only an existing attribute may be replaced."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        path, _, name = target.rpartition(".")
        parent = self.get_submodule(path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

    def modules(self, remove_duplicate=True):
        """This module and every descendant (a module reached twice, twice without `remove_duplicate`)."""
        return (m for _, m in self.named_modules(remove_duplicate=remove_duplicate))

    def named_children(self):
        """(name, module) for the direct children, a child registered under two names once (its first)."""
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        """The direct children."""
        return (m for _, m in self.named_children())

    def _named_members(self, registry, prefix, recurse, remove_duplicate):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, registry).items():
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, Parameter) pairs, each parameter once (under every name it has, without
        `remove_duplicate`)."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        """The Parameters of this module and (with `recurse`) its descendants."""
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, buffer) pairs, each buffer once (under every name it has, without `remove_duplicate`)."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        """The buffers of this module and its descendants."""
        return (b for _, b in self.named_buffers(recurse=recurse))

    # ---- modes and gradients -----------------------------------------------------------------------------------
    def train(self, mode=True):
        """Set training mode (Dropout drops) on this module, then call each child's train(mode): a subclass that
        overrides train (to merge weights on eval, say) is reached, as torch reaches it."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        object.__setattr__(self, "training", mode)
        for module in self.children():
            module.train(mode)
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
                p.grad = None if set_to_none else zeroed_grad(p.grad)

    def apply(self, fn):
        """Call fn on every descendant, then on this module."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---- devices and dtypes ----------------------------------------------------------------------------------
    def _apply(self, fn, recurse=True):
        """Convert every parameter (in place: `.data`, and its grad's), then every buffer (replaced), by `fn`,
        descendants first (with `recurse`), as torch's Module._apply."""
        for child in self.children() if recurse else ():
            child._apply(fn)
        for param in self._parameters.values():
            if param is not None:
                _set_data(param, fn(param))
                if param._grad is not None:
                    _set_data(param._grad, fn(param._grad))
        for name, buffer in self._buffers.items():
            if buffer is not None:
                self._buffers[name] = fn(buffer)
        return self

    def to(self, *args, **kwargs):
        """Move and/or cast the parameters and buffers, in place: `to(device=None, dtype=None, non_blocking=False)`,
        `to(dtype)`, `to(tensor)` (its device and dtype). A dtype changes only the floating point and complex
        tensors; "cpu" is JAX's cpu device, "cuda" its GPUs."""
        where, dtype, _ = _conversion.parse_to(args, kwargs)
        if dtype is not None:
            if not (dtype.is_floating_point or dtype.is_complex):
                raise TypeError(
                    f"nn.Module.to only accepts floating point or complex dtypes, but got desired dtype={dtype}"
                )
            if dtype.is_complex:
                warnings.warn(COMPLEX_MODULES, UserWarning, stacklevel=2)
        if where is not None:
            _conversion.jax_device(where)  # torch's error before anything changes

        def convert(t):
            return _conversion.convert(t, where, dtype if t.dtype.is_floating_point or t.dtype.is_complex else None)

        return self._apply(convert)

    def to_empty(self, *, device, recurse=True):
        """Give every parameter and buffer (those of descendants too, with `recurse`) new storage on `device`,
        without copying values (none to copy from the meta device): its values are uninitialized (zeros here)."""
        where = _conversion.as_device(device)
        _conversion.jax_device(where)
        return self._apply(lambda t: _conversion.convert(empty_like(t, device=where), where), recurse)

    def cpu(self):
        """Move the parameters and buffers to the CPU."""
        return self.to("cpu")

    def _made_on(self, device):
        """The end of a built-in module's construction with torch's `device=` argument: its parameters and buffers,
        made on the default device, moved to `device` (None: left there)."""
        if device is not None:
            self.to(device)

    def cuda(self, device=None):
        """Move the parameters and buffers to a GPU (`device`: its index or name; the first GPU by default)."""
        return self.to("cuda" if device is None else _conversion.as_device(device))

    def type(self, dst_type):
        """Cast every parameter and buffer, integer ones included, to `dst_type` (a dtype, or a name such as
        'torch.DoubleTensor')."""
        dtype, where = _conversion.dtype_of_type(dst_type)
        return self._apply(lambda t: _conversion.convert(t, where, dtype))

    def _cast_floating(self, dtype):
        return self._apply(lambda t: _conversion.convert(t, dtype=dtype) if t.dtype.is_floating_point else t)

    def float(self):
        """Cast floating point parameters and buffers to float32."""
        return self._cast_floating(_dtypes.float32)

    def double(self):
        """Cast floating point parameters and buffers to float64."""
        return self._cast_floating(_dtypes.float64)

    def half(self):
        """Cast floating point parameters and buffers to float16."""
        return self._cast_floating(_dtypes.float16)

    def bfloat16(self):
        """Cast floating point parameters and buffers to bfloat16."""
        return self._cast_floating(_dtypes.bfloat16)

    # ---- printing --------------------------------------------------------------------------------------------
    def extra_repr(self):
        """The text inside this module's parentheses in repr (torch's hook)."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + indent(repr(child)) for name, child in self._modules.items()]
        lines = extra_lines + child_lines
        if len(extra_lines) == 1 and not child_lines:
            return f"{self._get_name()}({extra_lines[0]})"
        if not lines:
            return f"{self._get_name()}()"
        return f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return sorted({*super().__dir__(), *[k for r in _REGISTRIES for k in self.__dict__.get(r, ())]})


def indent(text):
    """`text` with its lines after the first indented by two spaces (a child's repr inside its parent's)."""
    return text.replace("\n", "\n  ")
