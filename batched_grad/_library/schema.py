"""Operator schemas as torch writes them, "name.overload(Tensor(a!) x, *, int k=1) -> Tensor": parsed into
arguments, and inferred from a function's type hints (torch.library.infer_schema)."""

import ast
import dataclasses
import inspect
import typing
from collections.abc import Sequence

from .._dtypes import dtype as DType
from .._tensor import Tensor, device


@dataclasses.dataclass(frozen=True)
class Argument:
    """One argument or return of a schema: its type as the schema writes it (without alias annotation)."""

    name: str
    type: str
    alias: str = ""  # "a1!" of Tensor(a1!), "" when there is none
    kwarg_only: bool = False
    default: object = inspect.Parameter.empty
    default_text: str = ""

    @property
    def is_write(self):
        return self.alias.endswith("!")

    @property
    def is_tensor(self):
        return self.type.startswith("Tensor")

    def __str__(self):
        annotated = f"Tensor({self.alias}){self.type[len('Tensor') :]}" if self.alias else self.type
        text = f"{annotated} {self.name}".rstrip()
        return f"{text}={self.default_text}" if self.default_text else text


@dataclasses.dataclass(frozen=True)
class Schema:
    """A parsed schema: name (with namespace once defined), overload name, arguments and returns."""

    name: str
    overload: str
    arguments: tuple
    returns: tuple

    @property
    def positional(self):
        return tuple(a for a in self.arguments if not a.kwarg_only)

    @property
    def mutated(self):
        return tuple(a for a in self.arguments if a.is_write)

    @property
    def is_functional(self):
        """No argument written and no return aliasing an input (torch's is_functional_schema)."""
        return not self.mutated and not any(r.alias for r in self.returns)

    def qualified(self, namespace):
        return dataclasses.replace(self, name=f"{namespace}::{self.name}")

    def __str__(self):
        arguments, star = [], False
        for a in self.arguments:
            if a.kwarg_only and not star:
                arguments.append("*")
                star = True
            arguments.append(str(a))
        returns = [str(r) for r in self.returns]
        written = returns[0] if len(returns) == 1 and not self.returns[0].name else f"({', '.join(returns)})"
        overload = f".{self.overload}" if self.overload else ""
        return f"{self.name}{overload}({', '.join(arguments)}) -> {written}"


def _split_top(text):
    """`text` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += c in "([" and 1 or -(c in ")]")
        if c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return [*parts, tail] if tail or parts else parts


def _parse_type(text, schema):
    """(type without alias annotation, alias) of a schema type such as Tensor(a!)[] or int?."""
    if text.startswith("Tensor("):
        close = text.find(")")
        if close < 0:
            raise RuntimeError(f"expected ')' in the alias annotation of '{text}' in schema: {schema}")
        return "Tensor" + text[close + 1 :], text[len("Tensor(") : close]
    return text, ""


_DEFAULT_NAMES = {"None": None, "True": True, "False": False}


def _parse_default(text):
    if text in _DEFAULT_NAMES:
        return _DEFAULT_NAMES[text]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a name (a dtype or a layout, contiguous_format, ...) as the schema writes it


def _default_text(value, text):
    """A default as torch prints it in a schema: a whole float with a trailing dot ("2."), else as written."""
    if type(value) is float and value.is_integer():
        return f"{int(value)}."
    return text


def _parse_argument(text, kwarg_only, schema, is_return=False):
    declared, _, default = text.partition("=")
    words = declared.strip().rsplit(" ", 1)
    if len(words) == 1 and not is_return:
        raise RuntimeError(f"expected a type and a name for argument '{text}' in schema: {schema}")
    type_text, name = (words[0], "") if len(words) == 1 else words
    if not name.isidentifier() and name:
        raise RuntimeError(f"expected an identifier as the name of argument '{text}' in schema: {schema}")
    kind, alias = _parse_type(type_text.strip(), schema)
    if default:
        value = _parse_default(default.strip())
        return Argument(name, kind, alias, kwarg_only, value, _default_text(value, default.strip()))
    return Argument(name, kind, alias, kwarg_only)


def parse_schema(text):
    """The Schema of `text`; the name may be absent, as in custom_op's "(Tensor x) -> Tensor"."""
    head, arrow, tail = text.partition("->")
    head, tail = head.strip(), tail.strip()
    open_at = head.find("(")
    if not arrow or open_at < 0 or not head.endswith(")"):
        raise RuntimeError(f"expected a schema of the form 'name(arguments) -> returns', got: {text}")
    name, _, overload = head[:open_at].strip().partition(".")
    arguments, kwarg_only = [], False
    for part in _split_top(head[open_at + 1 : -1]):
        if part == "*":
            kwarg_only = True
            continue
        arguments.append(_parse_argument(part, kwarg_only, text))
    if tail.startswith("(") and tail.endswith(")"):
        returns = [_parse_argument(p, False, text, is_return=True) for p in _split_top(tail[1:-1])]
    else:
        returns = [_parse_argument(tail, False, text, is_return=True)]
    return Schema(name, overload, tuple(arguments), tuple(returns))


def _derived(base, schema_type, lists=True, optional_list=False):
    """The annotations of `base` and its Optional, list and Sequence forms, with their schema types."""
    forms = {base: schema_type, typing.Optional[base]: f"{schema_type}?"}  # noqa: UP045  (torch's keys)
    if lists:
        for seq in (typing.Sequence, typing.List, Sequence, list):  # noqa: UP006
            forms[seq[base]] = f"{schema_type}[]"
            if optional_list:
                forms[typing.Optional[seq[base]]] = f"{schema_type}[]?"  # noqa: UP045
    return forms


_NUMBER = int | float | bool
PARAMETER_TYPES = {
    **_derived(Tensor, "Tensor"),
    **{typing.Sequence[typing.Optional[Tensor]]: "Tensor?[]", list[typing.Optional[Tensor]]: "Tensor?[]"},  # noqa: UP045
    **_derived(int, "SymInt", optional_list=True),
    **_derived(float, "float", optional_list=True),
    **_derived(bool, "bool", optional_list=True),
    **_derived(str, "str", lists=False),
    **_derived(_NUMBER, "Scalar"),
    **_derived(DType, "ScalarType", lists=False),
    **_derived(device, "Device", lists=False),
}
RETURN_TYPES = {
    Tensor: "Tensor",
    list[Tensor]: "Tensor[]",
    int: "SymInt",
    float: "float",
    bool: "bool",
    _NUMBER: "Scalar",
}


class _Inference:
    """infer_schema's state: the function's signature (its errors name it) and its globals for string hints."""

    def __init__(self, function):
        self.function = function
        self.signature = inspect.signature(function)

    def error(self, what):
        raise ValueError(f"infer_schema(func): {what} Got func with signature {self.signature})")

    def resolve(self, annotation):
        if isinstance(annotation, str):
            try:
                return eval(annotation, self.function.__globals__)  # noqa: S307  (as torch resolves string hints)
            except Exception as e:  # noqa: BLE001  (any failure names the annotation)
                self.error(f"Unsupported type annotation {annotation}. It is not a type. ({type(e).__name__}: {e})")
        return annotation

    def parameter(self, name, param, mutates_args):
        if param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL, param.VAR_KEYWORD):
            self.error("We do not support positional-only args, varargs, or varkwargs.")
        if param.annotation is param.empty:
            self.error(f"Parameter {name} must have a type annotation.")
        annotation = self.resolve(param.annotation)
        schema_type = PARAMETER_TYPES.get(annotation)
        if schema_type is None:
            self.error(
                f"Parameter {name} has unsupported type {param.annotation}. "
                f"The valid types are: {PARAMETER_TYPES.keys()}."
            )
        return schema_type

    def default(self, name, value):
        if value is None or isinstance(value, (int, float, bool)):
            return str(value)
        if isinstance(value, (str, device)):
            return f'"{value}"'
        if isinstance(value, DType):
            return str(value).removeprefix("torch.")
        return self.error(
            f"Parameter {name} has an unsupported default value type {type(value)}. "
            "Please file an issue on GitHub so we can prioritize this."
        )

    def returns(self):
        annotation = self.resolve(self.signature.return_annotation)
        if annotation is inspect.Signature.empty:
            self.error("No return type annotation was provided. Please add one.")
        if annotation is None:
            return "()"
        if typing.get_origin(annotation) is tuple:
            parts = typing.get_args(annotation)
            return f"({', '.join(self.return_type(p) for p in parts)})"
        return self.return_type(annotation)

    def return_type(self, annotation):
        if annotation not in RETURN_TYPES:
            self.error(f"Return has unsupported type {annotation}. The valid types are: {RETURN_TYPES}.")
        return RETURN_TYPES[annotation]


def infer_schema(prototype_function, /, *, mutates_args, op_name=None):
    """The schema of `prototype_function` from its type hints, as torch.library.infer_schema writes it."""
    inference = _Inference(prototype_function)
    unknown = isinstance(mutates_args, str)
    mutated = set() if unknown else set(mutates_args)
    params, star = [], False
    for index, (name, param) in enumerate(inference.signature.parameters.items()):
        if param.kind == param.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        schema_type = inference.parameter(name, param, mutates_args)
        if unknown and mutates_args != "unknown":  # checked after each parameter's annotation, as torch's
            raise ValueError(
                "mutates_args must either be a sequence of the names of the arguments that are mutated or the "
                "string 'unknown'. "
            )
        if (unknown and schema_type.startswith("Tensor")) or name in mutated:
            if not schema_type.startswith("Tensor"):
                inference.error(
                    f"Parameter {name} is in mutable_args but only Tensors or collections of Tensors can be mutated"
                )
            schema_type = f"Tensor(a{index}!){schema_type[len('Tensor') :]}"
        text = f"{schema_type} {name}"
        params.append(text if param.default is param.empty else f"{text}={inference.default(name, param.default)}")
    missing = mutated - set(inference.signature.parameters)
    if missing:
        inference.error(
            f"{missing} in mutates_args were not found in the custom op's signature. mutates_args should contain "
            "the names of all args that the custom op mutates, or just the string 'unknown' if you don't know."
        )
    returns = inference.returns()
    return f"{op_name or ''}({', '.join(params)}) -> {returns}"
