"""torch.library: custom operators (custom_op and its registrations, Library.define/impl), called directly or
through batched_grad.ops.<namespace>.<name>."""

import warnings
import weakref

from ._library import operator
from ._library._fake import get_ctx
from ._library.custom_op import CustomOpDef, custom_op, device_types_of, register_formula, split_qualname
from ._library.opcheck import opcheck
from ._library.schema import infer_schema, parse_schema

__all__ = [
    "CustomOpDef",
    "Library",
    "custom_op",
    "define",
    "get_ctx",
    "impl",
    "impl_abstract",
    "infer_schema",
    "opcheck",
    "register_autograd",
    "register_fake",
    "register_kernel",
    "register_vmap",
]

# Library.impl's dispatch keys -> (device type of the kernel, None for every device; whether it is autograd's)
_DISPATCH_KEYS = {
    "CPU": ("cpu", False),
    "CUDA": ("cuda", False),
    "XPU": ("xpu", False),
    "MPS": ("mps", False),
    "Meta": ("meta", False),
    "CompositeExplicitAutograd": (None, False),
    "CompositeImplicitAutograd": (None, False),
    "Autograd": (None, True),
    "AutogradCPU": (None, True),
}
_KINDS = ("DEF", "IMPL", "FRAGMENT")
_DEF_LIBRARIES = weakref.WeakValueDictionary()  # namespace -> its live Library of kind DEF
_KEEP_ALIVE = []  # the libraries of torch.library.define/impl without lib=, which live as long as the process


def _forget(registrations):
    """Undo a Library's registrations (when it is destroyed or collected)."""
    for undo in reversed(registrations):
        undo()
    registrations.clear()


class Library:
    """A namespace's operator definitions (kind "DEF" or "FRAGMENT") and kernels ("IMPL" or either other kind);
    its registrations are undone when it is destroyed."""

    def __init__(self, ns, kind, dispatch_key=""):
        if kind not in _KINDS:
            raise ValueError(f"Unsupported kind: {kind}")
        if kind == "DEF" and ns in _DEF_LIBRARIES:
            raise RuntimeError(
                f"Only a single TORCH_LIBRARY can be used to register the namespace {ns}; please put all of your "
                "definitions in a single TORCH_LIBRARY block.  If you were trying to specify implementations, "
                "consider using TORCH_LIBRARY_IMPL (which can be duplicated)."
            )
        if dispatch_key and dispatch_key not in _DISPATCH_KEYS:
            raise ValueError(f"Library: dispatch_key must be one of {sorted(_DISPATCH_KEYS)}, got {dispatch_key!r}")
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        self._registrations = []
        self._finalizer = weakref.finalize(self, _forget, self._registrations)
        if kind == "DEF":
            _DEF_LIBRARIES[ns] = self

    def __repr__(self):
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})>"

    def define(self, schema, alias_analysis="", *, tags=()):
        """Define the operator of `schema` ("name(Tensor x) -> Tensor") in this namespace; returns its name."""
        if self.kind == "IMPL":
            raise RuntimeError(
                f'def("{schema.partition("(")[0]}"): Cannot define an operator inside of a TORCH_LIBRARY_IMPL block.  '
                "All def()s should be placed in the (unique) TORCH_LIBRARY block for their namespace."
            )
        if alias_analysis not in ("", "FROM_SCHEMA", "CONSERVATIVE"):
            raise RuntimeError(f"Invalid alias_analysis type {alias_analysis}")
        if tags:
            raise NotImplementedError(f"Library.define: operator tags are not provided; got tags={tags!r}")
        parsed = parse_schema(schema)
        if not parsed.name:
            raise RuntimeError(f"Library.define: the schema must name the operator, got: {schema}")
        op = operator.define(self.ns, parsed)
        overloads = operator.OPERATORS[f"{self.ns}::{parsed.name}"]
        self._registrations.append(lambda: overloads.pop(op._overloadname, None))
        return parsed.name

    def impl(self, op_name, fn, dispatch_key="", *, with_keyset=False, allow_override=True):
        """Register `fn` as the kernel of `op_name` ("name" or "name.overload" in this namespace, or an overload)
        for `dispatch_key` ("CPU", "Meta", "CompositeExplicitAutograd", "Autograd", ...)."""
        if with_keyset:
            raise NotImplementedError(
                "Library.impl: with_keyset=True (kernels taking dispatch key sets) is not provided"
            )
        if not callable(fn):
            raise TypeError(f"Input function is required to be a callable but found type {type(fn)}")
        key = dispatch_key or self.dispatch_key or "CompositeImplicitAutograd"
        if key not in _DISPATCH_KEYS:
            raise ValueError(f"Library.impl: dispatch_key must be one of {sorted(_DISPATCH_KEYS)}, got {key!r}")
        name = op_name if isinstance(op_name, str) else op_name.name()
        qualname = name if "::" in name else f"{self.ns}::{name}"
        op = operator.find(qualname)
        if op is not None:
            self._register_kernel(op, key, fn, allow_override)
            return
        register = lambda op: self._register_kernel(op, key, fn, allow_override)  # noqa: E731
        operator.PENDING.setdefault(qualname, []).append(register)  # made when the operator is defined
        self._registrations.append(lambda: _discard(operator.PENDING.get(qualname, []), register))

    def _register_kernel(self, op, key, fn, allow_override):
        device_type, is_autograd = _DISPATCH_KEYS[key]
        if is_autograd:
            op.autograd_kernel = fn
            self._registrations.append(lambda: setattr(op, "autograd_kernel", None))
            return
        if device_type in op.kernels and not allow_override:
            raise RuntimeError(
                f"This is not allowed since there's already a kernel registered from python overriding "
                f"{op.name()}'s behavior for {key} dispatch key and {self.ns} namespace."
            )
        op.kernels[device_type] = fn
        self._registrations.append(lambda: op.kernels.pop(device_type, None))
        if key == "CompositeImplicitAutograd":
            op.implicit_autograd = True
            self._registrations.append(lambda: setattr(op, "implicit_autograd", False))

    def _destroy(self):
        self._finalizer()
        if _DEF_LIBRARIES.get(self.ns) is self:
            del _DEF_LIBRARIES[self.ns]


def _discard(registrations, register):
    if register in registrations:
        registrations.remove(register)


def _library(lib, namespace):
    if lib is not None:
        return lib
    made = Library(namespace, "FRAGMENT")
    _KEEP_ALIVE.append(made)
    return made


def define(qualname, schema, *, lib=None, tags=()):
    """Define the operator "namespace::name" with `schema` ("(Tensor x) -> Tensor")."""
    namespace, name = split_qualname(qualname)
    _library(lib, namespace).define(name + schema, tags=tags)


def impl(qualname, types, func=None, *, lib=None):
    """Register `func` as the kernel of "namespace::name" for device `types` ("cpu", ...; "default": every
    device); the decorator form without `func`."""
    namespace, name = split_qualname(qualname)
    keys = ["CompositeExplicitAutograd" if t in ("default", None) else _device_key(t) for t in _types_of(types)]

    def register(func):
        library = _library(lib, namespace)
        for key in keys:
            library.impl(name, func, key)
        return func

    return register if func is None else register(func)


def _types_of(types):
    return [types] if isinstance(types, str) or types is None else list(types)


def _device_key(device_type):
    if device_type in _DISPATCH_KEYS:
        return device_type
    (checked,) = device_types_of(device_type)
    key = {"cpu": "CPU", "cuda": "CUDA", "xpu": "XPU", "mps": "MPS", "meta": "Meta"}.get(checked)
    if key is None:
        raise NotImplementedError(f"torch.library.impl: kernels for device type {checked!r} are not provided")
    return key


def _overload_of(op):
    """The OpOverload a registration names: a CustomOpDef's, an overload itself, or "namespace::name"."""
    if isinstance(op, CustomOpDef):
        return op._opoverload
    if isinstance(op, operator.OpOverload):
        return op
    namespace, name = split_qualname(op)
    from . import ops

    packet = getattr(getattr(ops, namespace), name.partition(".")[0])
    return getattr(packet, name.partition(".")[2] or "default")


def register_fake(op, func=None, /, *, lib=None, allow_override=True):
    """Register the fake kernel of `op` (a CustomOpDef, an overload or "namespace::name"); with
    allow_override=False, an operator that has one already is refused."""
    if isinstance(op, str) and f"{op.partition('.')[0]}" not in operator.OPERATORS:
        split_qualname(op)
        raise RuntimeError(f"operator {op} does not exist")
    overload = _overload_of(op)

    def register(func):
        if not callable(func):
            raise TypeError(f"register_fake: expected a function, got {type(func).__name__}")
        if not allow_override and overload.fake is not None:
            raise RuntimeError(f"register_fake: {overload.name()} already has a fake kernel (allow_override=False)")
        overload.fake = func
        if lib is not None:
            lib._registrations.append(lambda: setattr(overload, "fake", None))
        return func

    return register if func is None else register(func)


def impl_abstract(qualname, func=None, *, lib=None):
    """The former name of register_fake (with torch's FutureWarning)."""
    warnings.warn(
        "`torch.library.impl_abstract` was renamed to `torch.library.register_fake`. Please use that instead; we "
        "will remove `torch.library.impl_abstract` in a future version of PyTorch.",
        FutureWarning,
        stacklevel=2,
    )
    return register_fake(qualname, func, lib=lib)


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    """Register the autograd formula of `op` (see CustomOpDef.register_autograd)."""
    overload = _overload_of(op)
    described = repr(overload.custom_op) if overload.custom_op is not None else overload.name()
    register_formula(overload, backward, setup_context, described)
    if lib is not None:
        lib._registrations.append(lambda: setattr(overload, "backward", None))


def register_kernel(op, device_types, func=None, /, *, lib=None):
    """Register the kernel of `op` for `device_types` (None: every device)."""
    overload = _overload_of(op)
    if overload.custom_op is not None:
        return overload.custom_op.register_kernel(device_types, func)
    return impl(overload.name(), "default" if device_types is None else device_types, func, lib=lib)


def register_vmap(op, func=None, /, *, lib=None):
    """Register the batching rule of `op`: func(info, in_dims, *args) -> (output, out_dims)."""
    overload = _overload_of(op)

    def register(func):
        if not callable(func):
            raise TypeError(f"register_vmap: expected a function, got {type(func).__name__}")
        overload.vmap_rule = func
        return func

    return register if func is None else register(func)
