"""Operators of torch.library: an OpOverload runs the kernel registered for its inputs' device, below autograd
for a custom_op (differentiable through the autograd formula registered for it, as one autograd.Function), and
bumps the version of each argument its schema writes."""

from .. import _grad_mode
from .._tracing import is_tracer
from .._transform_levels import NO_SETUP_CONTEXT
from .._transform_levels import levels as grad_levels
from .._vmap_levels import in_vmap_randomness
from ..autograd import _vmap_rule
from ..autograd.graph import increment_version
from . import _calls
from ._calls import Call, bind, map_tensors, storage_of, tensors_of
from ._fake import running
from ._host_call import host_call

# a device type -> the dispatch key torch's errors name
_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta", "xpu": "XPU", "mps": "MPS"}
ALIASING = (
    "{name} (with implementation in {module}): The output of this custom operator (1) must not also be an input "
    "to this custom operator and (2) may not alias any inputs to this custom operator or other returns. The most "
    "common way to trigger this error is if we have y = custom_op(x) and y and x are the same Tensor. Please "
    "instead return a clone of the offending output tensor(s) (e.g. return x.clone()) or refactor the custom "
    "operator to not return y."
)

OPERATORS = {}  # "namespace::name" -> {overload name ("default" for none): OpOverload}


class Named:
    """The names of an overload (`namespace`, `_opname`, `_overloadname`), as torch's OpOverload gives them."""

    @property
    def __name__(self):
        return f"{self._opname}.{self._overloadname}"

    def name(self):
        overload = "" if self._overloadname == "default" else f".{self._overloadname}"
        return f"{self.namespace}::{self._opname}{overload}"

    def __repr__(self):
        return f"<OpOverload(op='{self.namespace}.{self._opname}', overload='{self._overloadname}')>"

    def __str__(self):
        return f"{self.namespace}.{self._opname}.{self._overloadname}"

    @property
    def overloadpacket(self):
        from .namespaces import packet

        return packet(self.namespace, self._opname)


class OpOverload(Named):
    """One overload of an operator: its schema and what is registered for it."""

    def __init__(self, namespace, schema, custom_op=None):
        self.namespace, self._schema = namespace, schema
        self._opname, self._overloadname = schema.name.split("::")[1], schema.overload or "default"
        self.kernels = {}  # device type ("cpu", "meta", ...; None: every device) -> kernel
        self.fake = None  # the fake (meta) kernel: output metadata from input metadata
        self.backward = self.setup_context = None
        self.vmap_rule = None
        self.custom_op = custom_op  # the CustomOpDef that made it, None for one of Library.define
        self.autograd_kernel = None  # a kernel registered for the Autograd key (Library.impl(..., "Autograd"))
        self.implicit_autograd = False  # its kernel is CompositeImplicitAutograd's: autograd sees through it
        self._function = None  # the autograd.Functions of its calls that record, made on first use

    def __call__(self, *args, **kwargs):
        args, kwargs = bind(self._schema, args, kwargs)
        return self._dispatch(args, kwargs)

    def _dispatch(self, args, kwargs):
        """Autograd's step, then the kernel: through the autograd.Function where a call records (or is batched
        by vmap), else the kernel as it is."""
        tensors = tensors_of(args, kwargs)
        # batched by vmap.vmap: the Function applies the operator's batching rule (a JAX trace of another kind, as
        # bg.compile's, keeps the kernel opaque in run_kernel)
        in_vmap = in_vmap_randomness() is not None
        traced = in_vmap and _vmap_rule.is_traced(tensors)
        requires_grad = _grad_mode.is_recording() and any(t.requires_grad for t in tensors)
        differentiable = self.custom_op is not None or self.backward is not None
        if self.autograd_kernel is not None and not traced:
            return self.autograd_kernel(*args, **kwargs)
        if _is_out_op(self) and requires_grad:
            raise RuntimeError(
                f"{self._opname}(): functions with out=... arguments don't support automatic differentiation, "
                "but one of the arguments requires grad."
            )
        if traced or (requires_grad and differentiable and not _is_out_op(self)):
            if requires_grad and grad_levels():  # torch's Function of an operator has no setup_context there
                raise RuntimeError(NO_SETUP_CONTEXT)
            call = Call.of(self._schema, args, kwargs)
            return call.output_of(self.function(batched=in_vmap).apply(*call.flat, call))
        if self.custom_op is None:  # a kernel of Library.impl is composite: its ops record as they run
            return self.run_kernel(args, kwargs)
        with _grad_mode.no_grad():
            return self.run_kernel(args, kwargs)

    def run_kernel(self, args, kwargs):
        """The kernel's result on these arguments, checked (a custom_op's outputs are new tensors), with the
        versions of the arguments it writes bumped."""
        kernel = self.kernel_for(self._device_type(args, kwargs))
        if self._is_opaque() and any(is_tracer(t._value) for t in tensors_of(args, kwargs)):
            return host_call(self, kernel, args, kwargs)  # its writes bump the versions there
        written = [
            t for a in self._schema.mutated for t in tensors_of([_calls.value_of(self._schema, a, args, kwargs)], {})
        ]
        # a view's NumPy array is a copy: the kernel writes a new tensor, copied into the view after it
        stand_ins = {id(t): t.detach().clone() for t in written if t._view is not None}
        if stand_ins:
            args, kwargs = map_tensors(lambda t: stand_ins.get(id(t), t), (args, kwargs))
        result = kernel(*args, **kwargs)
        if self.custom_op is not None and self._schema.is_functional:
            _check_no_aliasing(self, args, kwargs, result)
        with _grad_mode.no_grad():
            for t in written:
                if id(t) in stand_ins:
                    t.copy_(stand_ins[id(t)])  # its version bump is the write's
                else:
                    increment_version(t)
        return result

    def _device_type(self, args, kwargs):
        """The device type whose kernel runs; for a custom_op without Tensor arguments, its device argument's, which
        must have a kernel (torch's error)."""
        device_type = _calls.device_type(self._schema, args, kwargs)
        if self.custom_op is not None and not tensors_of(args, kwargs) and device_type is not None:
            if device_type not in self.kernels and None not in self.kernels:
                raise RuntimeError(
                    f"{self._opname} does not have a kernel registered for {device_type}. Please use register_kernel "
                    "to do so."
                )
        return device_type

    def _is_opaque(self):
        """Whether a trace keeps the kernel opaque (a custom_op's, or one with a fake kernel) rather than tracing
        through it (a composite kernel of Library.impl)."""
        return self.custom_op is not None or self.fake is not None or "meta" in self.kernels

    def kernel_for(self, device_type):
        """The kernel registered for `device_type`, else the one for every device (the fake kernel for meta)."""
        kernel = self.kernels.get(device_type)
        if kernel is not None and self.custom_op is not None and device_type in self.custom_op.disabled_kernels:
            kernel = self.custom_op.fn  # set_kernel_enabled(device_type, False)
        if kernel is None and device_type == "meta":
            kernel = self._fake_kernel()
        if kernel is None:
            kernel = self.kernels.get(None)
        if kernel is None:
            key = _KEYS.get(device_type, str(device_type))
            raise NotImplementedError(
                f"Could not run '{self.name()}' with arguments from the '{key}' backend. This could be because the "
                f"operator doesn't exist for this backend. Registered kernels: {sorted(map(str, self.kernels))}"
            )
        return kernel

    def _fake_kernel(self):
        if self.fake is not None:
            return running(self, self.fake)
        if self.custom_op is None:
            return None
        if not self._schema.returns or self._schema.returns[0].type == "":
            return _returns_nothing  # torch's generated fake kernel of an op that returns nothing
        return self.custom_op.missing_fake

    def function(self, batched):
        """The autograd.Function that records a call (torch's GeneratedBackwardFor_<ns>_<name>_<overload>); the
        `batched` one, for calls inside vmap.vmap, has the operator's batching rule."""
        if self._function is None:
            from ._generated import generated_function

            self._function = {False: generated_function(self, False), True: generated_function(self, True)}
        return self._function[batched]


def _returns_nothing(*args, **kwargs):
    return None


def _is_out_op(op):
    """An out= operator: every argument it writes is keyword-only, and it returns them (torch.Tag.out's form)."""
    mutated = op._schema.mutated
    return bool(mutated) and all(a.kwarg_only for a in mutated) and all(r.alias for r in op._schema.returns)


def _check_no_aliasing(op, args, kwargs, result):
    """torch's check that a custom_op's outputs are new tensors: none is an input, a view of one, or another
    output."""
    inputs = {id(storage_of(t)) for t in tensors_of(args, kwargs)}
    seen = set()
    for output in tensors_of([result], {}):
        storage = id(storage_of(output))
        if storage in inputs or storage in seen:
            module = getattr(op.custom_op.fn, "__module__", None)
            raise RuntimeError(ALIASING.format(name=op._opname, module=f"<module '{module}'>"))
        seen.add(storage)


def define(namespace, schema, custom_op=None, allow_overwrite=False):
    """Register the operator of `schema` (a parsed Schema named within `namespace`) and return its overload."""
    qualified = schema.qualified(namespace)
    overloads = OPERATORS.setdefault(f"{namespace}::{schema.name}", {})
    key = schema.overload or "default"
    if key in overloads and not allow_overwrite:
        raise RuntimeError(
            f"Tried to register an operator ({qualified}) with the same name and overload name multiple times. "
            "Each overload's schema should only be registered with a single call to def()."
        )
    op = overloads[key] = OpOverload(namespace, qualified, custom_op)
    for register in PENDING.pop(op.name(), []):
        register(op)
    return op


# "ns::name" or "ns::name.overload" -> the registrations of kernels made before the operator was defined (as
# torch's dispatcher allows), each a function of the OpOverload, made when it is defined
PENDING = {}


def find(qualname):
    """The overload named "ns::name" or "ns::name.overload", None where it is not defined."""
    name, _, overload = qualname.partition(".")
    return OPERATORS.get(name, {}).get(overload or "default")
