"""torch.library.custom_op: a Python function as an operator, and the registrations a CustomOpDef takes."""

import contextlib
import functools
import logging

from . import operator
from .schema import infer_schema, parse_schema

DEVICE_TYPES = (
    "cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia", "xla", "lazy",
    "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone",
)  # fmt: skip
log = logging.getLogger(__name__)
QUALNAME = (
    'Expected `qualname` to be of the form "namespace::name", but got {name}. The qualname passed to the '
    "torch.library APIs must consist of a namespace and a name, e.g. aten::sin"
)


def split_qualname(name):
    """(namespace, name) of "namespace::name", with torch's error for anything else."""
    if not isinstance(name, str):
        raise TypeError(f"Expected the operator's name to be a str of the form 'namespace::name', got {type(name)}")
    parts = name.split("::")
    if len(parts) != 2 or not all(parts):
        raise ValueError(QUALNAME.format(name=name))
    return parts[0], parts[1]


def device_types_of(device_types):
    """The device types of a registration (None: every device), each checked as torch checks device strings."""
    if device_types is None:
        return (None,)
    for device_type in (device_types,) if isinstance(device_types, str) else device_types:
        if device_type not in DEVICE_TYPES:
            raise RuntimeError(
                f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device string: {device_type}"
            )
    return (device_types,) if isinstance(device_types, str) else tuple(device_types)


def _callable(value, what):
    if not callable(value):
        raise TypeError(f"{what}: expected a function, got {type(value).__name__}")
    return value


class CustomOpDef:
    """An operator made by custom_op from a function, with the methods that register its other behaviours."""

    def __init__(self, namespace, name, schema, fn):
        self._namespace, self._name, self._init_fn = namespace, name, fn
        parsed = parse_schema(name + schema)
        kwarg_tensors = [a for a in parsed.arguments if a.kwarg_only and a.is_tensor]
        if kwarg_tensors:
            raise NotImplementedError(
                f"custom_op with kwarg-only Tensor args. Please make your tensors not kwarg-only. Got: {name}{schema}"
            )
        self._opoverload = operator.define(namespace, parsed, custom_op=self, allow_overwrite=True)
        self._schema = schema
        self.disabled_kernels = set()  # device types whose kernel set_kernel_enabled turned off: fn runs there
        functools.update_wrapper(self, fn)

    @property
    def _qualname(self):
        return f"{self._namespace}::{self._name}"

    @property
    def fn(self):
        return self._init_fn

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"

    def __call__(self, *args, **kwargs):
        return self._opoverload(*args, **kwargs)

    @contextlib.contextmanager
    def set_kernel_enabled(self, device_type, enabled=True):
        """Within it, the kernel registered for `device_type` is on (`enabled`) or off (the function given to
        custom_op runs instead); as torch's, a change that changes nothing is logged."""
        action = "enable" if enabled else "disable"
        was_disabled = device_type in self.disabled_kernels
        if device_type not in self._opoverload.kernels:
            log.warning(
                "Attempted to %s kernel for %s but no kernel was registered for this device type.", action, device_type
            )
        if enabled == (not was_disabled):
            log.warning("Attempted to %s kernel for %s but it was already %sd.", action, device_type, action)
        if enabled:
            self.disabled_kernels.discard(device_type)
        else:
            self.disabled_kernels.add(device_type)
        try:
            yield
        finally:
            if was_disabled:
                self.disabled_kernels.add(device_type)
            else:
                self.disabled_kernels.discard(device_type)

    def register_kernel(self, device_types, fn=None, /):
        """Register `fn` as the kernel for `device_types` (decorator form without `fn`)."""
        types = device_types_of(device_types)
        arguments = self._opoverload._schema.arguments
        if device_types is not None and not any(a.is_tensor for a in arguments):
            if not any(a.type.startswith("Device") for a in arguments):
                raise ValueError(
                    "Functions without tensor inputs are required to have a `device: torch.device` argument"
                )

        def register(fn):
            for device_type in types:
                self._opoverload.kernels[device_type] = _callable(fn, "register_kernel")
            return fn

        return register if fn is None else register(fn)

    def register_fake(self, fn, /):
        """Register the fake kernel: output metadata (shapes, dtypes) from input metadata, run on meta tensors."""
        self._opoverload.fake = _callable(fn, "register_fake")
        return fn

    def register_autograd(self, backward, /, *, setup_context=None):
        """Register the autograd formula: setup_context(ctx, inputs, output) saves what backward(ctx, *grads)
        needs to return one gradient per input (None for a non-Tensor)."""
        register_formula(self._opoverload, backward, setup_context, repr(self))

    def register_vmap(self, func=None, /):
        """Register the batching rule func(info, in_dims, *args) -> (output, out_dims)."""

        def register(func):
            self._opoverload.vmap_rule = _callable(func, "register_vmap")
            return func

        return register if func is None else register(func)

    def missing_fake(self, *args, **kwargs):
        """The meta kernel of an operator without a fake kernel: torch's error."""
        raise RuntimeError(
            f"There was no fake impl registered for {self}. This is necessary for torch.compile/export/fx tracing "
            f"to work. Please use `{self._init_fn.__name__}.register_fake` to add an fake impl."
        )


def register_formula(op, backward, setup_context, described):
    """Register `backward` and `setup_context` as `op`'s autograd formula (torch refuses it for an operator that
    writes its arguments)."""
    if op._schema.mutated and all(a.kwarg_only for a in op._schema.mutated) and op._schema.returns[0].alias:
        raise RuntimeError(
            f"Cannot register autograd formula for operator tagged with torch.Tag.out: {described}. Out variants "
            "do not support autograd."
        )
    if not op._schema.is_functional:
        raise RuntimeError(
            f"Cannot register autograd formula for non-functional operator {described} with schema {op._schema}. "
            "Please create a functional operator and register an autograd formula for that."
        )
    op.backward = _callable(backward, "register_autograd")
    op.setup_context = None if setup_context is None else _callable(setup_context, "register_autograd")


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
    """Wrap `fn` (with type hints) into an operator named "namespace::name" (decorator form without `fn`)."""
    namespace, opname = split_qualname(name)

    def inner(fn):
        _callable(fn, "custom_op")
        schema_text = infer_schema(fn, mutates_args=mutates_args) if schema is None else schema
        result = CustomOpDef(namespace, opname, schema_text, fn)
        if schema is not None:
            expected = {a.name for a in result._opoverload._schema.mutated}
            if expected != set(mutates_args):
                raise ValueError(
                    f"Attempted to create a custom op with `mutates_args={mutates_args}` and `schema={schema}. The "
                    f"schema suggests that the op mutates {expected}which is different from what was provided to us "
                    "in `mutates_args`. Please make these consistent."
                )
        result.register_kernel(device_types)(fn)
        return result

    return inner if fn is None else inner(fn)
