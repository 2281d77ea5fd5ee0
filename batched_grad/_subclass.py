"""Tensor subclasses as torch's (its __torch_function__ protocol): a call of a public function or method that takes an
instance of a user's subclass of Tensor goes to that class's `__torch_function__(func, types, args, kwargs)`. The
default one, Tensor's, runs the call with the protocol off and returns its tensors as instances of the subclass, so
that `MyTensor` flows through ops; a subclass may define its own. Classes whose `__torch_function__` is
`disabled_torch_function_impl` (Parameter, Buffer and batched_grad's own subclasses) take no part: ops on them return
plain Tensors, as torch's do.

Where the protocol is checked: the module functions (the `public` wrapper and `dispatching`), and the methods,
operators and tensor-valued properties of a subclass (installed on it when it is defined, so that plain Tensors pay
nothing)."""

import functools
import threading

_state = threading.local()
DISPATCHING = set()  # the subclasses of Tensor that take part in the protocol
PLAIN = set()  # Tensor and its subclasses that take no part
_LATER = []  # (a module's namespace, names, torch's module name, python_level): wrapped once a subclass takes part

NO_DISPATCH = frozenset(
    "__new__ __init__ __init_subclass__ __torch_function__ __class__ __getattribute__ __setattr__ __delattr__ "
    "__dir__ __sizeof__ __subclasshook__ __reduce__ __reduce_ex__ __deepcopy__ __copy__ __getstate__ __setstate__ "
    "__repr__ __str__ __format__ __hash__ __array__ __array_wrap__ __dlpack__ __dlpack_device__ __iter__ "
    "__reversed__ as_subclass".split()
)
PROPERTIES = ("T", "mT", "H", "mH", "data", "real", "imag")


def disabled():
    return getattr(_state, "disabled", False)


class DisableTorchFunctionSubclass:
    """Within it, calls take no subclass's __torch_function__ (torch._C.DisableTorchFunctionSubclass)."""

    def __enter__(self):
        self._previous = disabled()
        _state.disabled = True
        return self

    def __exit__(self, *exc):
        _state.disabled = self._previous
        return False


DisableTorchFunction = DisableTorchFunctionSubclass  # torch's also turns off TorchFunctionModes: there are none here


def disabled_torch_function_impl(func, types, args=(), kwargs=None):
    """A `__torch_function__` that takes no part in the protocol: the call runs as on plain Tensors."""
    with DisableTorchFunctionSubclass():
        return func(*args, **(kwargs or {}))


def _takes_part(cls):
    impl = cls.__torch_function__
    return getattr(impl, "__func__", impl) is not disabled_torch_function_impl


def register(cls, tensor_class):
    """Called for each new subclass of Tensor: enrol it when it takes part, and give the first such class of its
    line wrappers of Tensor's methods, operators and tensor-valued properties that it does not define itself."""
    if not _takes_part(cls):
        PLAIN.add(cls)
        return
    from ._ops.operators import BINARY_OPERATORS

    DISPATCHING.add(cls)
    _install_later()
    for name, member in _members(tensor_class).items():
        if getattr(cls, name, None) is member:
            wrap = _operator if name in BINARY_OPERATORS else _method
            setattr(cls, name, wrap(member, f"torch.Tensor.{name}"))
    for name in PROPERTIES:
        prop = getattr(tensor_class, name)
        if getattr(cls, name, None) is prop:
            getter = _method(prop.__get__, f"torch.Tensor.{name}.__get__")
            setattr(cls, name, property(getter, prop.fset, prop.fdel, prop.__doc__))


@functools.cache
def _members(tensor_class):
    """Tensor's methods and operators that go through the protocol on a subclass (name -> function)."""
    members = {}
    for klass in reversed(tensor_class.__mro__[:-1]):
        for name, member in vars(klass).items():
            public = not name.startswith("_") or (name.startswith("__") and name.endswith("__"))
            if public and callable(member) and not isinstance(member, (type, classmethod, staticmethod)):
                members[name] = getattr(tensor_class, name)
    return {name: member for name, member in members.items() if name not in NO_DISPATCH}


def _method(member, label):
    @functools.wraps(member)
    def method(self, *args, **kwargs):
        if getattr(_state, "disabled", False):
            return member(self, *args, **kwargs)
        return dispatch(member, (self, *args), kwargs, label)

    return method


def _operator(member, label):
    """A binary operator's wrapper: as torch's, a TypeError answers NotImplemented (Python then tries the other
    operand, or raises its own TypeError)."""
    method = _method(member, label)

    @functools.wraps(member)
    def operator(self, other):
        try:
            return method(self, other)
        except TypeError:
            return NotImplemented

    return operator


def dispatching(function, label, python_level=False):
    """`function` (a module function, torch's `label`) taking part in the protocol; `python_level`: torch's is
    written in Python (its error where no __torch_function__ takes the call is that of handle_torch_function)."""

    @functools.wraps(function)
    def public(*args, **kwargs):
        if DISPATCHING and overloaded(args, kwargs):
            return dispatch(public, args, kwargs, label, python_level=python_level)
        try:
            return function(*args, **kwargs)
        except Exception:
            if overloaded(args, kwargs):  # a tensor-like of another class (checked only once the call has failed)
                return dispatch(public, args, kwargs, label, python_level=python_level)
            raise

    return public


def dispatching_later(namespace, names, module, python_level=False):
    """Make the functions `names` of `namespace` (a module's globals; torch's `module`) take part in the protocol
    once a subclass does: until then they run as they are (no wrapper's frame between a warning and its caller)."""
    _LATER.append((namespace, tuple(names), module, python_level))
    if DISPATCHING:
        _install_later()


def _install_later():
    while _LATER:
        namespace, names, module, python_level = _LATER.pop()
        for name in names:
            namespace[name] = dispatching(namespace[name], f"{module}.{name}", python_level)
        _exported.cache_clear()  # the names now stand for the wrappers


def overloaded(args, kwargs=None):
    """The arguments (also in lists and tuples, and keyword values) whose __torch_function__ takes the call (instances
    of Tensor subclasses, and tensor-likes of other classes), in torch's order: left to right, a subclass before its
    base classes; empty while the protocol is off."""
    if getattr(_state, "disabled", False):
        return []
    found, types = [], []
    for value in _flat(args, kwargs):
        kind = type(value)
        if kind not in DISPATCHING and (kind in PLAIN or not _tensor_like(kind)):
            continue
        if kind not in types:
            place = next((i for i, t in enumerate(types) if issubclass(kind, t)), len(types))
            types.insert(place, kind)
            found.insert(place, value)
    return found


def _tensor_like(kind):
    """Whether instances of `kind`, a class other than Tensor's, are tensor-likes of the protocol: those of torch's
    own classes are not (batched_grad refuses torch's tensors with its own error)."""
    if not hasattr(kind, "__torch_function__") or kind.__module__.split(".")[0] == "torch":
        PLAIN.add(kind)
        return False
    return True


def _flat(args, kwargs):
    for value in (*args, *(kwargs or {}).values()):
        if isinstance(value, (list, tuple)):
            yield from value
        else:
            yield value


def dispatch(func, args, kwargs, label, relevant=None, python_level=False):
    """torch's handle_torch_function: the first answer other than NotImplemented of the __torch_function__ of the
    overloaded arguments (of `relevant`, by default of all arguments); else torch's TypeError, naming the call
    `label` in the words of torch's functions written in C (or with `python_level`, in Python)."""
    kwargs = kwargs or {}
    func = exported(label, func)
    found = overloaded(args if relevant is None else tuple(relevant), kwargs if relevant is None else None)
    types = tuple(type(a) for a in found)
    for value in found:
        result = type(value).__torch_function__(func, types, args, kwargs)
        if result is not NotImplemented:
            return result
    if python_level:
        raise TypeError(f"no implementation found for '{label}' on types that implement __torch_function__: {[*types]}")
    listed = "".join(f"  - tensor subclass {t}\n" for t in types)
    raise TypeError(
        f"Multiple dispatch failed for '{label}'; all __torch_function__ handlers returned NotImplemented:\n\n{listed}"
        "\nFor more information, try re-running with TORCH_LOGS=not_implemented"
    )


@functools.cache
def _exported(label):
    import batched_grad

    found = batched_grad
    for part in label.split(".")[1:]:
        found = getattr(found, part, None)
    return found


def exported(label, func):
    """What batched_grad exports under torch's name `label` (the object a __torch_function__ compares `func` with),
    else `func`."""
    if not label.startswith("torch.") or label.startswith("torch.Tensor."):
        return func
    found = _exported(label)
    return func if found is None else found


def default_torch_function(cls, func, types, args, kwargs, tensor_class):
    """Tensor.__torch_function__: the call with the protocol off, its tensors returned as instances of `cls`."""
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with DisableTorchFunctionSubclass():
        return convert(func(*args, **(kwargs or {})), cls, tensor_class)


def convert(result, cls, tensor_class):
    """torch's _convert: `result`'s tensors (also in tuples and lists) as instances of `cls`."""
    if isinstance(result, tensor_class):
        return result if isinstance(result, cls) else result.as_subclass(cls)
    if isinstance(result, (tuple, list)):
        items = [convert(r, cls, tensor_class) for r in result]
        return type(result)._make(items) if hasattr(result, "_fields") else type(result)(items)
    return result
