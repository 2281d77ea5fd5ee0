"""torch.ops: torch.ops.<namespace>.<name> is an operator's overload packet, its overloads its attributes
(`.default`, `.Tensor`, ...). The aten namespace holds the operators batched_grad provides under torch's name, as a
function or a Tensor method; which overloads each has is torch's (aten_overloads.json, made by
tools/aten_overloads.py)."""

import functools
import json
import pathlib
import types

from .operator import OPERATORS, Named


@functools.cache
def _aten_overloads():
    return json.loads((pathlib.Path(__file__).parent / "aten_overloads.json").read_text())


def _aten_function(name):
    """batched_grad's function of aten's operator `name`: the function of that name, else the Tensor method."""
    import batched_grad

    function = getattr(batched_grad, name, None)
    if callable(function) and not isinstance(function, type):
        return function
    method = getattr(batched_grad.Tensor, name, None)
    return method if callable(method) else None


class AtenOverload(Named):
    """One overload of an aten operator: batched_grad's function (every overload of an operator is one function
    here, its arguments telling them apart)."""

    namespace = "aten"

    def __init__(self, name, overload, function):
        self._opname, self._overloadname, self._function = name, overload, function

    def __call__(self, *args, **kwargs):
        return self._function(*args, **kwargs)


class OpOverloadPacket:
    """An operator's overloads (torch's OpOverloadPacket): calling it calls the one the arguments select."""

    def __init__(self, namespace, name):
        self._namespace, self._opname = namespace, name
        self._qualified_op_name = f"{namespace}::{name}"

    @property
    def __name__(self):
        return self._opname

    def __repr__(self):
        return f"<OpOverloadPacket(op='{self._namespace}.{self._opname}')>"

    def __str__(self):
        return f"{self._namespace}.{self._opname}"

    def overloads(self):
        if self._namespace == "aten":
            return list(_aten_overloads()[self._opname])
        return list(OPERATORS[self._qualified_op_name])

    def __getattr__(self, overload):
        if overload.startswith("__"):
            raise AttributeError(overload)
        if overload not in self.overloads():
            raise AttributeError(f"The underlying op of '{self}' has no overload name '{overload}'")
        if self._namespace == "aten":
            return AtenOverload(self._opname, overload, _aten_function(self._opname))
        return OPERATORS[self._qualified_op_name][overload]

    def __call__(self, *args, **kwargs):
        if self._namespace == "aten":
            return _aten_function(self._opname)(*args, **kwargs)
        overloads = OPERATORS[self._qualified_op_name]
        if len(overloads) == 1:
            return next(iter(overloads.values()))(*args, **kwargs)
        return _select_overload(self, overloads, args, kwargs)


def _select_overload(packet_, overloads, args, kwargs):
    """The first overload whose schema binds the arguments, as torch tries them in order."""
    errors = []
    for op in overloads.values():
        try:
            from ._calls import bind

            bind(op._schema, args, kwargs)
        except RuntimeError as e:
            errors.append(str(e))
            continue
        return op(*args, **kwargs)
    raise RuntimeError(
        f"Overloaded torch operator invoked with no matching overload ({packet_}):\n" + "\n".join(errors)
    )


def packet(namespace, name):
    return OpOverloadPacket(namespace, name)


class OpNamespace(types.ModuleType):
    """torch.ops.<namespace>: its operators as attributes."""

    def __init__(self, name):
        super().__init__(f"torch.ops.{name}")
        self.name = name

    def __getattr__(self, opname):
        if opname.startswith("__"):
            raise AttributeError(opname)
        if self.name == "aten":
            found = opname in _aten_overloads() and _aten_function(opname) is not None
        else:
            found = f"{self.name}::{opname}" in OPERATORS
        if not found:
            raise AttributeError(f"'_OpNamespace' '{self.name}' object has no attribute '{opname}'")
        return packet(self.name, opname)


@functools.cache
def namespace(name):
    return OpNamespace(name)
