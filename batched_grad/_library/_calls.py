"""A call of an operator: its arguments bound to the schema (torch's errors for a bad call), and, for the
autograd.Function that records it, flattened to one positional argument per Tensor."""

import inspect

from .. import _dtypes
from .._tensor import Tensor, python_type_name

_TENSOR_LISTS = ("Tensor[]", "Tensor?[]")


def bind(schema, args, kwargs):
    """(positional arguments, keyword-only arguments) of a call, as the kernel receives them: the schema's
    positional arguments given by keyword become positional (a default fills a gap before one given)."""
    name = schema.name + (f".{schema.overload}" if schema.overload else "")
    positional = schema.positional
    if len(args) + len(kwargs) > len(schema.arguments):
        raise RuntimeError(
            f"{name}() expected at most {len(schema.arguments)} argument(s) but received "
            f"{len(args) + len(kwargs)} argument(s). Declaration: {schema}"
        )
    if len(args) > len(positional):
        raise RuntimeError(
            f"{name}() takes {len(positional)} positional argument(s) but {len(args)} was/were given.  "
            f"Declaration: {schema}"
        )
    known = {a.name for a in schema.arguments}
    for key in kwargs:
        if key not in known:
            raise RuntimeError(f"Unknown keyword argument '{key}' for operator '{name}'. Schema: {schema}")
    bound = list(args)
    given = [k for k, a in enumerate(positional) if a.name in kwargs]
    for k in range(len(args), max(given, default=-1) + 1):
        argument = positional[k]
        bound.append(kwargs[argument.name] if argument.name in kwargs else _default(argument, name, schema))
    keyword = {a.name: kwargs[a.name] for a in schema.arguments if a.kwarg_only and a.name in kwargs}
    for argument in schema.arguments:
        if argument.default is inspect.Parameter.empty and not _given(argument, bound, keyword, positional):
            raise RuntimeError(f"{name}() is missing value for argument '{argument.name}'. Declaration: {schema}")
    for k, (argument, value) in enumerate(zip(positional, bound)):
        _check_tensor(argument, value, k, name, schema)
    return bound, keyword


def _given(argument, bound, keyword, positional):
    if argument.kwarg_only:
        return argument.name in keyword
    return positional.index(argument) < len(bound)


def _check_tensor(argument, value, position, name, schema):
    """torch's error for a non-Tensor given where the schema declares a Tensor."""
    optional = argument.type == "Tensor?"
    if argument.type in ("Tensor", "Tensor?") and not isinstance(value, Tensor) and not (optional and value is None):
        raise RuntimeError(
            f"{name}() Expected a value of type '{argument.type}' for argument '{argument.name}' but instead found "
            f"type '{python_type_name(value)}'.\nPosition: {position}\nValue: {value}\nDeclaration: {schema}\n"
            f"Cast error details: Unable to cast {value} to Tensor"
        )


def _default(argument, name, schema):
    if argument.default is inspect.Parameter.empty:
        raise RuntimeError(f"{name}() is missing value for argument '{argument.name}'. Declaration: {schema}")
    value = argument.default
    if argument.type.startswith("ScalarType") and isinstance(value, str):
        return _dtypes.to_dtype(value)
    return list(value) if isinstance(value, tuple) else value


def with_defaults(schema, args, kwargs):
    """The call's arguments with every omitted one at its default (torch's fill_defaults, for setup_context)."""
    name = schema.name
    positional = list(args) + [_default(a, name, schema) for a in schema.positional[len(args) :]]
    keyword = {
        a.name: kwargs[a.name] if a.name in kwargs else _default(a, name, schema)
        for a in schema.arguments
        if a.kwarg_only
    }
    return positional, keyword


def map_tensors(f, value):
    """`value` (an argument, a result, or a list, tuple or dict of them) with each Tensor replaced by f(Tensor)."""
    if isinstance(value, Tensor):
        return f(value)
    if isinstance(value, (list, tuple)):
        return type(value)(map_tensors(f, v) for v in value)
    if isinstance(value, dict):
        return {k: map_tensors(f, v) for k, v in value.items()}
    return value


def leaves(value):
    """The values in `value`, lists and tuples flattened."""
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in leaves(v)]
    return [value]


def storage_of(t):
    """The tensor whose memory `t` is a view of (`t` itself when it is not a view)."""
    while t._view is not None:
        t = t._view[0]
    return t


def tensors_of(args, kwargs):
    """The Tensors among the arguments (in lists too)."""
    found = []
    for value in (*args, *kwargs.values()):
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, Tensor):
                found.append(v)
    return found


def device_type(schema, args, kwargs):
    """The device type the call runs on: its first Tensor's, else its Device argument's; None without either."""
    tensors = tensors_of(args, kwargs)
    if tensors:
        return tensors[0].device.type
    for argument in schema.arguments:
        if argument.type.startswith("Device"):
            value = value_of(schema, argument, args, kwargs)
            if value is not None:
                return str(value).split(":")[0]
    return None


def value_of(schema, argument, args, kwargs):
    if argument.kwarg_only:
        return kwargs.get(argument.name)
    k = schema.positional.index(argument)
    return args[k] if k < len(args) else None


class Call:
    """One call as the autograd.Function sees it: each Tensor of a Tensor list a positional argument of its own
    (torch's supports_tensorlist), the keyword-only arguments held here, and whether the output was a list."""

    def __init__(self, schema, sizes, kwargs, flat):
        self.schema, self.sizes, self.kwargs, self.flat = schema, sizes, kwargs, flat
        self.list_output = False
        self.outputs = ()  # the kernel's outputs, for the tangents forward-mode AD gives them

    @classmethod
    def of(cls, schema, args, kwargs):
        flat, sizes = [], []
        for argument, value in zip(schema.positional, args):
            if argument.type in _TENSOR_LISTS and isinstance(value, (list, tuple)):
                flat.extend(value)
                sizes.append(len(value))
            else:
                flat.append(value)
                sizes.append(None)
        return cls(schema, sizes, kwargs, tuple(flat))

    def args_of(self, flat):
        """The positional arguments (a list per Tensor list) from one value per flat argument."""
        args, k = [], 0
        for size in self.sizes:
            args.append(flat[k] if size is None else list(flat[k : k + size]))
            k += 1 if size is None else size
        return args

    def flat_output(self, result):
        """The kernel's result as the Function returns it (a list of Tensors as a tuple)."""
        if isinstance(result, list):
            self.list_output = True
            result = tuple(result)
        self.outputs = result if isinstance(result, tuple) else (result,)
        return result

    def output_of(self, received):
        return list(received) if self.list_output else received

    def grads_of(self, grads):
        """The gradients of the outputs as the registered backward takes them."""
        return (list(grads),) if self.list_output else grads

    def flat_grads(self, result, function_name):
        """The registered backward's result, one gradient per flat argument, checked against the inputs."""
        result = result if isinstance(result, tuple) else (result,)
        if not any(size is not None for size in self.sizes):
            return result
        flat = []
        for size, grad in zip(self.sizes, result):
            if size is None:
                flat.append(grad)
            elif isinstance(grad, (list, tuple)) and len(grad) == size:
                flat.extend(grad)
            else:
                raise RuntimeError(
                    f"Expected the return from backward of {function_name} to be of the same structure as the "
                    f"inputs: a list of {size} gradients for each list of {size} Tensors, got {grad!r}"
                )
        if len(result) != len(self.sizes):
            raise RuntimeError(
                f"Expected the return from backward of {function_name} to be of the same structure as the inputs: "
                f"{len(self.sizes)} gradients, got {len(result)}"
            )
        return tuple(flat)
