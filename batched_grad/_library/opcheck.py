"""torch.library.opcheck: the checks of an operator's registrations that run here. test_schema (arguments the
schema does not declare written stay unchanged; outputs are not inputs), test_autograd_registration (an operator
without an autograd formula does not return outputs that require grad) and test_faketensor (the fake kernel's
outputs on meta tensors have the kernel's shapes and dtypes). torch's test_aot_dispatch_* compile the operator
with AOTAutograd, which has no counterpart here."""

import numpy as np

from .._tensor import Tensor
from ._calls import leaves, map_tensors, storage_of
from .namespaces import OpOverloadPacket
from .operator import OpOverload

CHECKS = ("test_schema", "test_autograd_registration", "test_faketensor")
NOT_HERE = ("test_aot_dispatch_static", "test_aot_dispatch_dynamic")


class OpCheckError(Exception):
    pass


class MetadataMismatchError(RuntimeError):
    pass


def _copy(t):
    return t.detach().clone().requires_grad_(t.requires_grad)


def check_schema(op, args, kwargs):
    """Run the operator on copies; an argument the schema does not declare written must keep its values, and an
    output must not be an input or share its memory."""
    args, kwargs = map_tensors(_copy, (args, kwargs))
    named = _named_arguments(op, args, kwargs)
    before = {name: np.array(t.detach().numpy(force=True)) for name, t in named}
    output = op(*args, **kwargs)
    written = {a.name for a in op._schema.mutated}
    for name, t in named:
        after = t.detach().numpy(force=True)
        if name not in written and not np.array_equal(before[name], after, equal_nan=True):
            raise RuntimeError(f"Argument {name} is not defined as mutable but was mutated")
    outputs = [o for o in leaves(output) if isinstance(o, Tensor)]
    for j, out in enumerate(outputs):
        for name, t in named:
            if out is t and name not in written:
                raise RuntimeError(
                    "Dispatcher operators below autograd are not allowed to directly return inputs.\n"
                    f"However, we found that `outputs[{j}] is {name}"
                )
            if storage_of(out) is storage_of(t) and not any(r.alias for r in op._schema.returns):
                raise RuntimeError(f"Argument {name} is not defined to alias output but was aliasing")
    return output


def _named_arguments(op, args, kwargs):
    """(schema name, Tensor) of each Tensor argument (each Tensor of a list under its list's name)."""
    values = list(zip(op._schema.positional, args)) + [
        (a, kwargs[a.name]) for a in op._schema.arguments if a.name in kwargs
    ]
    return [(a.name, t) for a, v in values for t in leaves(v) if isinstance(t, Tensor)]


def check_autograd_registration(op, args, kwargs):
    """An operator without an autograd formula, called on inputs that require grad, must not return a new output
    that requires grad (that would be autograd registered at the kernel)."""
    tensors = [t for t in leaves([*args, *kwargs.values()]) if isinstance(t, Tensor)]
    if not any(t.requires_grad for t in tensors):
        return
    if op.custom_op is not None or op.backward is not None or op.autograd_kernel is not None or op.implicit_autograd:
        return
    args, kwargs = map_tensors(_copy, (args, kwargs))
    inputs = {id(t) for t in leaves([*args, *kwargs.values()])}
    output = op(*args, **kwargs)
    if any(isinstance(o, Tensor) and o.requires_grad and id(o) not in inputs for o in leaves(output)):
        raise AssertionError(
            f"{op.name()}: at least one output of this operator has requires_grad=True but the operator does not "
            "have an autograd kernel defined at an autograd key (e.g. DispatchKey::Autograd). This could mean that "
            "you have incorrectly registered an autograd kernel to a non-Autograd DispatchKey, which may lead to "
            "silently incorrect results. If your operator consists of regular PyTorch operations, consider not "
            "using an operator at all or registering your operator as CompositeImplicitAutograd. If you have an "
            "autograd.Function registered to a backend (CPU/CUDA/XPU) key, the correct location for it is the "
            "Autograd key."
        )


def check_fake(op, args, kwargs):
    """The operator on meta copies of the arguments (its fake kernel) against the operator on copies."""
    meta_args, meta_kwargs = map_tensors(
        lambda t: t.detach().to("meta").requires_grad_(t.requires_grad), (args, kwargs)
    )
    fake = op(*meta_args, **meta_kwargs)
    real = op(*map_tensors(_copy, args), **map_tensors(_copy, kwargs))
    context = f"When comparing the output of {op} on FakeTensor and concrete Tensors, found"
    fake_flat, real_flat = leaves(fake), leaves(real)
    if len(fake_flat) != len(real_flat):
        raise AssertionError(f"{context} mismatch in number of returns {len(fake_flat)} != {len(real_flat)}")
    for idx, (r, f) in enumerate(zip(real_flat, fake_flat)):
        if isinstance(r, Tensor) != isinstance(f, Tensor):
            raise AssertionError(f"{context} mismatched number of tensor outputs")
        if not isinstance(r, Tensor):
            continue
        problem = _metadata_problem(r, f)
        if problem:
            where = "" if len(real_flat) == 1 else f" for output[{idx}]"
            raise MetadataMismatchError(f"{context} mismatched tensor metadata{where}: {problem}")


def _metadata_problem(real, fake):
    if real.requires_grad != fake.requires_grad:
        return (
            "mismatched requires_grad-ness of outputs. This usually means that you have added autograd support "
            "for your operator at a dispatch key other than Autograd, which will lead to problems"
        )
    if real.dtype != fake.dtype:
        return f"Dtypes {real.dtype} and {fake.dtype} are not equal!"
    if tuple(real.shape) != tuple(fake.shape):
        return f"Shapes {real.shape} and {fake.shape} are not equal!"
    return ""


_TESTERS = {
    "test_schema": check_schema,
    "test_autograd_registration": check_autograd_registration,
    "test_faketensor": check_fake,
}


def _overload(op):
    if isinstance(op, OpOverloadPacket):
        overloads = op.overloads()
        if len(overloads) != 1:
            raise RuntimeError(
                "opcheck can only test operators without overloads. Got the following overloads for "
                f"{op._qualified_op_name}: {overloads}"
            )
        return getattr(op, overloads[0])
    op = getattr(op, "_opoverload", op)  # a CustomOpDef's
    if not isinstance(op, OpOverload):
        raise ValueError(
            "opcheck(op, ...): op must be instance of torch._ops.OpOverload, e.g. torch.ops.aten.sin.default, got "
            f"{type(op)}"
        )
    return op


def opcheck(op, args, kwargs=None, *, test_utils=CHECKS, raise_exception=True, rtol=None, atol=None):
    """Check `op`'s registrations on `args`; {check name: "SUCCESS" or, with raise_exception=False, the error}."""
    if (rtol is None) ^ (atol is None):
        raise ValueError("opcheck(op, ...): if you specify one of rtol/atol, you must specify both")
    op = _overload(op)
    test_utils = CHECKS if test_utils == "ALL" else (test_utils,) if isinstance(test_utils, str) else test_utils
    if not isinstance(test_utils, (tuple, list)) or not set(test_utils) <= {*CHECKS, *NOT_HERE}:
        raise ValueError(
            f"opcheck(op, ..., test_utils={test_utils}), expected test_utils to be subset of "
            f"{(*CHECKS, *NOT_HERE)} but it was not"
        )
    not_here = [t for t in test_utils if t in NOT_HERE]
    if not_here:
        raise NotImplementedError(
            f"opcheck: {not_here} compile the operator with AOTAutograd, which batched_grad does not have; "
            f"the checks that run here are {CHECKS}"
        )
    results = {}
    for name in test_utils:
        try:
            _TESTERS[name](op, tuple(args), dict(kwargs or {}))
            results[name] = "SUCCESS"
        except Exception as e:  # noqa: BLE001  (each check's error is its result)
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {name} failed with {e} (scroll up for stack trace)") from e
            results[name] = e
    return results
