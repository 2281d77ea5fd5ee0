"""Names of compiled programs that are the same in every process: the key under which the store of executables
(_store.py) keeps a program is the text `describe` gives of what the program computes (a kernel's op and static
params, a fused program's structural key), never an object identity or a hash that changes from run to run.

The text names each thing by what defines it: an Op by its name and function, a function by its module, qualified
name, the code's first line and a digest of its bytecode, and the values its closure and defaults hold; a JAX
primitive by its name; records (structural keys, VJP specs, batches) by their type and fields; numbers exactly
(floats by their hex form); arrays by dtype, shape and a digest of their bytes. The code a name refers to is pinned
by the store's environment key: the versions of JAX, jaxlib and NumPy and a digest of this package's sources.
Anything else (a function of the user's own code, a mesh of devices, an object with state) has no stable name:
`describe` gives None, and that program is compiled as usual and not stored."""

import enum
import functools
import hashlib
import threading
import types

import numpy as np

# modules whose functions are named by module and name alone: the environment key pins their versions and sources
_PINNED = ("batched_grad", "vmap", "jax", "jaxlib", "numpy", "ml_dtypes", "math", "operator", "functools", "builtins")
_MEMO_LIMIT = 8192


class Unnamed(Exception):
    """Raised inside `describe` for a value without a stable name."""


_memo = {}  # id(object) -> (object, text), for objects described often (Ops, Signatures, interned keys)
_active = []  # ids being described, outermost first: a value met again inside itself is named by its place here
_lock = threading.Lock()


def describe(value):
    """The stable text of `value`, or None where it has none (see the module's docstring)."""
    with _lock:
        try:
            return _text(value)
        except (Unnamed, RecursionError):
            return None
        finally:
            _active.clear()


def _remembered(value, make):
    key = id(value)
    found = _memo.get(key)
    if found is not None and found[0] is value:
        return found[1]
    if key in _active:  # a function whose closure holds itself (a custom_jvp and its rule defined together)
        return f"<back:{_active.index(key)}>"
    _active.append(key)
    try:
        text = make(value)
    finally:
        _active.pop()
    if "<back:" in text:  # names a place on the stack: only valid where it was met
        return text
    if len(_memo) > _MEMO_LIMIT:
        _memo.clear()
    _memo[key] = (value, text)
    return text


def _text(value):
    kind = type(value)
    simple = _SIMPLE.get(kind)
    if simple is not None:
        return simple(value)
    if kind is tuple or kind is list:
        return ("(" if kind is tuple else "[") + ",".join([_text(v) for v in value]) + ")"
    if isinstance(value, tuple):  # a record (NamedTuple, a structural key): its type and fields
        # an interned key (its own hash, computed once) is described once; other records are made anew each time
        return _remembered(value, _record) if kind.__hash__ is not tuple.__hash__ else _record(value)
    if isinstance(value, np.dtype):
        return f"dtype:{value.name}:{value.str}"
    if isinstance(value, enum.Enum):
        return f"enum:{_type_name(kind)}.{value.name}"
    if isinstance(value, np.generic):
        return f"scalar:{value.dtype.str}:{value.tobytes().hex()}"
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, type):
        return "type:" + _type_name(value)
    if isinstance(value, (frozenset, set)):
        return "{" + ",".join(sorted([_text(v) for v in value])) + "}"
    if isinstance(value, dict):
        return "dict{" + ",".join(sorted([f"{_text(k)}:{_text(v)}" for k, v in value.items()])) + "}"
    named = _NAMED.get(kind.__name__)
    if named is not None and kind.__module__.split(".")[0] in ("batched_grad", "jax", "jaxlib"):
        return _remembered(value, named)
    if isinstance(value, functools.partial):
        return f"partial({_text(value.func)},{_text(value.args)},{_text(value.keywords)})"
    if isinstance(value, types.FunctionType):
        return _remembered(value, _function)
    if callable(value):
        return _library_callable(value)
    raise Unnamed(f"a {kind.__name__}")


def _plain(tag):
    return lambda v: f"{tag}:{v!r}"


_SIMPLE = {
    type(None): lambda v: "None",
    bool: _plain("bool"),
    int: _plain("int"),
    str: _plain("str"),
    bytes: lambda v: "bytes:" + v.hex(),
    float: lambda v: "float:" + v.hex(),
    complex: lambda v: f"complex:{v.real.hex()},{v.imag.hex()}",
    type(Ellipsis): lambda v: "...",
    slice: lambda v: f"slice({_text(v.start)},{_text(v.stop)},{_text(v.step)})",
}


def _type_name(kind):
    return f"{kind.__module__}.{kind.__qualname__}"


def _record(value):
    return f"{_type_name(type(value))}(" + ",".join([_text(v) for v in value]) + ")"


def _array(value):
    if value.dtype.hasobject:
        raise Unnamed("an array of objects")
    digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:32]
    return f"array:{value.dtype.str}:{value.shape}:{digest}"


def _op(op):
    """An Op: its name (which also selects its Jacobian seed rules), its function (what its kernels and VJPs are
    traced from) and the flags the traced backward reads."""
    flags = (op.multi, op.linear, op.multilinear, op.view, op.diagonal, op.whole_backward, op.inputs)
    return f"op:{op.name}:{_text(op.fn)}:{_text(flags)}"


def _signature(sig):
    return f"sig({_op_text(sig.op)},{_text(sig.static)},{_text(sig.avals)},{_text(sig.out_avals)})"


def _op_text(op):
    return _remembered(op, _op)


def _custom_jvp(fn):
    return f"custom_jvp({_text(fn.fun)},{_text(fn.jvp)},{_text(fn.nondiff_argnums)})"


def _custom_vjp(fn):
    return f"custom_vjp({_text(fn.fun)},{_text(fn.fwd)},{_text(fn.bwd)},{_text(fn.nondiff_argnums)})"


def _sharding(sharding):
    """A sharding of an abstract mesh (a traced program's, naming no device) by its text; one naming devices has no
    stable name."""
    if type(sharding.mesh).__name__ != "AbstractMesh":
        raise Unnamed("a sharding over devices")
    return f"sharding:{sharding!r}"


def _primitive(primitive):
    return f"primitive:{primitive.name}"


def _mapped_input(value):
    return "mapped_input"


def _shaped(value):
    return f"struct:{_text(tuple(value.shape))}:{_text(np.dtype(value.dtype))}:{value.weak_type}"


# classes named by their fields, found by class name (importing them here would import the engine)
_NAMED = {
    "Op": _op,
    "Signature": _signature,
    "Primitive": _primitive,
    "_MappedInput": _mapped_input,
    "ShapeDtypeStruct": _shaped,
    "custom_jvp": _custom_jvp,
    "custom_vjp": _custom_vjp,
    "NamedSharding": _sharding,
}


def _function(fn):
    """A Python function: where it is defined, its code, and the values its defaults and closure hold. Only the
    functions of this package and the pinned libraries: the user's code may change under the same name."""
    module = fn.__module__ or ""
    if module.split(".")[0] not in _PINNED:
        raise Unnamed(f"function {fn.__qualname__} of module {module}")
    code = fn.__code__
    body = hashlib.sha256(code.co_code + repr(code.co_names).encode() + _constants(code.co_consts)).hexdigest()[:16]
    parts = [f"fn:{module}.{fn.__qualname__}:{code.co_firstlineno}:{body}"]
    if fn.__defaults__:
        parts.append(_text(fn.__defaults__))
    if fn.__kwdefaults__:
        parts.append(_text(fn.__kwdefaults__))
    if fn.__closure__:
        parts.append(_text(tuple([_cell(c) for c in fn.__closure__])))
    return "(" + ",".join(parts) + ")"


def _constants(consts):
    """The code's constants as bytes (a nested function's code by its own bytecode)."""
    out = []
    for c in consts:
        if isinstance(c, types.CodeType):
            out.append(c.co_code + repr(c.co_names).encode() + _constants(c.co_consts))
        elif isinstance(c, frozenset):  # its repr's order follows the string hash, which differs per process
            out.append(repr(sorted([repr(v) for v in c])).encode())
        else:
            out.append(repr(c).encode())
    return b"|".join(out)


def _cell(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell (a name bound later in the enclosing function)
        raise Unnamed("an empty closure cell") from None


def _library_callable(value):
    """A NumPy ufunc; a wrapper of a function (jax.jit's) by what it wraps; a builtin or a JAX function object of a
    pinned library by module and qualified name."""
    if isinstance(value, np.ufunc):
        return f"ufunc:{value.__name__}"
    wrapped = getattr(value, "__wrapped__", None)
    if wrapped is not None and wrapped is not value:
        return f"wrapped:{type(value).__name__}({_text(wrapped)})"
    module = getattr(value, "__module__", None) or ""
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if not isinstance(name, str) or "<locals>" in name or module.split(".")[0] not in _PINNED:
        raise Unnamed(f"a callable {type(value).__name__}")
    return f"callable:{module}.{name}"
