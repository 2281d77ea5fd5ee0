"""grad() and backward(): torch 2.13's argument handling, checks and messages, on top of the engine."""

import functools
import operator
import warnings
from collections.abc import Mapping

import numpy as np

from vmap._batching import check_chunk_size

from .. import _engine, _transform_levels
from .._batched import batched_backward
from .._dtypes import from_numpy_dtype
from .._factories import zeros
from .._foreign import reject_torch_tensors
from .._graph import GradientEdge, edge_of
from .._host import to_device
from .._lazy import keep
from .._meta import is_meta, meta_value
from .._tensor import Size, Tensor, warn_once
from .._x64 import scoped
from ..sparse._autograd import any_sparse, engine_gradients, engine_tensors, sparse_gradients

CREATE_GRAPH_CYCLE = (
    "Using backward() with create_graph=True will create a reference cycle between the parameter and its gradient "
    "which can cause a memory leak. We recommend using autograd.grad when creating the graph to avoid this. If you "
    "have to use this function, make sure to reset the .grad fields of your parameters to None after use to break "
    "the cycle and avoid the leak."
)


BACKWARD_IN_TRANSFORM = (
    "backward() called inside a functorch transform. This is not supported, please use functorch.grad or "
    "functorch.vjp instead or call backward() outside of functorch transforms."
)


def _tuple_of(x):
    if isinstance(x, (Tensor, GradientEdge)):
        return (x,)
    reject_torch_tensors(x)
    return tuple(x)


def _inputs_tuple(inputs, fn_name):
    """Normalize `inputs` like torch: a tensor/edge, an iterable, or a plain dict (whose values are used)."""
    if type(inputs) is dict:
        inputs = tuple(inputs.values())
        reject_torch_tensors(inputs)
    elif isinstance(inputs, Mapping):
        raise TypeError(
            f"`inputs` argument to `{fn_name}()` must be a dict, not {type(inputs).__name__}. "
            "Other Mapping types are not supported."
        )
    else:
        inputs = _tuple_of(inputs)
    if not inputs:
        raise RuntimeError(f"`inputs` argument to `{fn_name}()` cannot be empty.")
    return inputs


def _output_meta(out):
    if isinstance(out, GradientEdge):
        shape, dtype = out.node.out_meta[out.output_nr]

        return Size(shape), from_numpy_dtype(dtype), True
    if not isinstance(out, Tensor):
        raise AssertionError("Expected output to be a torch.Tensor")
    return out.shape, out.dtype, out.requires_grad


@functools.lru_cache(maxsize=64)
def _ones(shape, dtype):
    # moved from NumPy, not jnp.ones: that compiles a program (30-40 ms in a fresh process); a device array is
    # immutable, so every implicit grad_output can share it, and concrete even when first made inside a trace
    return to_device(np.ones(shape, dtype))


def _across_meta(i, out, grad):
    """A grad_output on or off the meta device where its output is not: torch moves a 0-dimensional one onto the
    meta device (and cannot move one off it); any other is an error."""
    if grad.ndim == 0:
        return grad.to(out.device)
    raise RuntimeError(f"invalid gradient at index {i} - expected device {out.device} but got {grad.device}")


def _make_grads(outputs, grads, is_grads_batched):
    """torch's _make_grads: check shapes and dtypes, create implicit ones for scalar outputs."""
    result = []
    for i, (out, grad) in enumerate(zip(outputs, grads)):
        shape, dtype, requires_grad = _output_meta(out)
        if isinstance(grad, Tensor):
            grad_shape = grad._v.shape
            if is_grads_batched:
                if not grad_shape:
                    raise RuntimeError(
                        f"If `is_grads_batched=True`, every grad_output needs a leading batch dimension, but "
                        f"grad_output[{i}] is 0-dimensional. Pass a tensor of shape (B,) + output[{i}].shape, "
                        f"here (B,) + {tuple(shape)}."
                    )
                grad_shape = grad_shape[1:]
            if grad_shape != shape:
                grad_shape = Size(grad_shape)
                if is_grads_batched:
                    raise RuntimeError(
                        "If `is_grads_batched=True`, we interpret the first dimension of each grad_output as the "
                        "batch dimension. The sizes of the remaining dimensions are expected to match the shape "
                        f"of corresponding output, but a mismatch was detected: grad_output[{i}] has a shape of "
                        f"{grad_shape!r} and output[{i}] has a shape of {shape!r}. If you only want some tensors "
                        "in `grad_output` to be considered batched, consider using vmap."
                    )
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {grad_shape!r} and "
                    f"output[{i}] has a shape of {shape!r}."
                )
            grad_dtype = grad.dtype
            if dtype.is_complex != grad_dtype.is_complex:
                raise RuntimeError(
                    "For complex Tensors, both grad_output and output are required to have the same dtype. "
                    f"Mismatch in dtype: grad_output[{i}] has a dtype of {grad_dtype!r} and output[{i}] has a "
                    f"dtype of {dtype!r}."
                )
            if isinstance(out, Tensor) and is_meta(out) is not is_meta(grad):
                grad = _across_meta(i, out, grad)
            result.append(grad if grad_dtype is dtype else grad.to(dtype))
        elif grad is None:
            if requires_grad:
                if shape.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if not dtype.is_floating_point:
                    raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got {dtype!r}")
                if is_grads_batched:
                    raise RuntimeError(
                        f"If `is_grads_batched=True`, grad_outputs[{i}] cannot be None: pass a tensor of shape "
                        f"(B,) + {tuple(shape)} holding the B cotangents of output[{i}]."
                    )
                on_meta = isinstance(out, Tensor) and is_meta(out)  # a GradientEdge's gradient is made off it
                ones = meta_value(shape, dtype.np) if on_meta else _ones(tuple(shape), dtype.np)
                result.append(Tensor._wrap(ones))
            else:
                result.append(None)
        else:
            raise TypeError(f"gradients can be either Tensors or None, but got {type(grad).__name__}")
    return tuple(result)


def _tensor_or_tensors_to_tuple(tensors, length):
    if tensors is None:
        return (None,) * length
    if isinstance(tensors, Tensor):
        return (tensors,)
    reject_torch_tensors(tensors)
    return tuple(tensors)


def _graph_flags(retain_graph, create_graph):
    """retain_graph (None: create_graph) and create_graph as bools, taken as torch's engine takes them: any
    integer from 0 to 255 (anything with __index__), with Python's TypeError or OverflowError otherwise."""
    if retain_graph is None:
        retain_graph = create_graph
    return _engine_flag(retain_graph), _engine_flag(create_graph)


def _engine_flag(value):
    value = operator.index(value)  # TypeError: "'str' object cannot be interpreted as an integer"
    if not -(2**63) <= value < 2**63:
        raise OverflowError("Python int too large to convert to C long")
    if value < 0:
        raise OverflowError("unsigned byte integer is less than minimum")
    if value > 255:
        raise OverflowError("unsigned byte integer is greater than maximum")
    return bool(value)


def _root_edges(outputs, grads):
    if len(outputs) != len(grads):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grads)} gradients")
    edges = []
    for i, out in enumerate(outputs):
        edge = out if isinstance(out, GradientEdge) else edge_of(out)
        if edge is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        if grads[i] is None:
            raise RuntimeError(f"element {i} of gradients tuple is None, but the corresponding Tensor requires grad")
        if isinstance(out, Tensor):
            keep(out._v)  # an output is often read after its backward (loss.item()): the fused program returns it
        edges.append(edge)
    return edges


def _input_edges(inputs, *, retain):
    edges = []
    for x in inputs:
        if isinstance(x, GradientEdge):
            edges.append(x)
            continue
        if not isinstance(x, Tensor):
            raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got {type(x).__name__}")
        if retain and not x.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if not x.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        edges.append(edge_of(x))
    return edges


@scoped
def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    only_inputs=True,
    allow_unused=None,
    is_grads_batched=False,
    materialize_grads=False,
    *,
    chunk_size=None,
):
    """Return the sum of gradients of `outputs` w.r.t. `inputs` (a tuple, or a dict for dict inputs).

    With `is_grads_batched=True` the leading dimension of every grad_output is a batch of cotangents and
    result i has shape (B,) + inputs[i].shape; `chunk_size` bounds how many rows run at a time.
    """
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, but got: allow_unused=False."
        )
    chunk_size = check_chunk_size(chunk_size)
    if allow_unused is None:
        allow_unused = materialize_grads
    keys = list(inputs.keys()) if type(inputs) is dict else None
    outputs = _tuple_of(outputs)
    inputs = _inputs_tuple(inputs, "grad")
    if not only_inputs:
        warnings.warn(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
            "gradient for other parts of the graph, please use torch.autograd.backward.",
            FutureWarning,
            stacklevel=3,
        )
    grad_outputs = _tensor_or_tensors_to_tuple(grad_outputs, len(outputs))
    sparse_inputs = inputs
    if any_sparse(outputs + inputs + grad_outputs):  # differentiated through their values tensors
        if is_grads_batched:
            raise RuntimeError("grad(): is_grads_batched=True is not provided with sparse COO outputs or inputs")
        grad_outputs = engine_gradients(outputs, grad_outputs)
        outputs, inputs = engine_tensors(outputs), engine_tensors(inputs)
    grads = _make_grads(outputs, grad_outputs, is_grads_batched)
    retain_graph, create_graph = _graph_flags(retain_graph, create_graph)
    roots = _root_edges(outputs, grads)
    captures = _input_edges(inputs, retain=False)
    reachable = [edge for edge in captures if edge is not None]
    if is_grads_batched:
        result = batched_backward(
            roots, grads, reachable, retain_graph=retain_graph, create_graph=create_graph, chunk_size=chunk_size
        )
    else:
        result = _engine.run_backward(
            roots, grads, reachable, retain_graph=retain_graph, create_graph=create_graph, accumulate=False
        )
    result = _unreached_as_none(result, captures)
    result = _finish(result, inputs, allow_unused, materialize_grads, create_graph)
    result = sparse_gradients(result, sparse_inputs) if sparse_inputs is not inputs else result
    return dict(zip(keys, result)) if keys is not None else result


def _unreached_as_none(result, captures):
    """The engine's gradients of the inputs that have an edge, with None for those that have none (a view made with
    grad mode off of a tensor that requires grad: no gradient reaches it, as in torch)."""
    found = iter(result)
    return tuple([next(found) if edge is not None else None for edge in captures])


def _finish(result, inputs, allow_unused, materialize_grads, create_graph):
    out = []
    for i, (g, x) in enumerate(zip(result, inputs)):
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior."
                )
            if materialize_grads:
                if isinstance(x, GradientEdge):
                    raise RuntimeError("materialize_grads cannot be used when the given input is a GradientEdge")
                # torch's zeros_like(input), without the batch dimension also when is_grads_batched
                g = zeros(tuple(x.shape), dtype=x.dtype, requires_grad=create_graph)
        elif not create_graph and g.requires_grad:
            g = g.detach()
        out.append(g)
    return tuple(out)


@scoped
def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """Accumulate the gradients of `tensors` into the `.grad` of the leaves (or of `inputs`)."""
    if _transform_levels.in_transform():
        raise RuntimeError(BACKWARD_IN_TRANSFORM)
    if grad_variables is not None:
        warnings.warn("`grad_variables` is deprecated. Use `grad_tensors` instead.", FutureWarning, stacklevel=3)
        if grad_tensors is not None:
            raise RuntimeError(
                "`grad_tensors` and `grad_variables` (deprecated) arguments both passed to "
                "`backward()`. Please only use `grad_tensors`."
            )
        grad_tensors = grad_variables
    if inputs is not None:
        inputs = _inputs_tuple(inputs, "backward")
    tensors = _tuple_of(tensors)
    grad_tensors = _tensor_or_tensors_to_tuple(grad_tensors, len(tensors))
    if any_sparse(tensors + (inputs or ()) + grad_tensors):  # differentiated through their values tensors
        grad_tensors = engine_gradients(tensors, grad_tensors)
        tensors, inputs = engine_tensors(tensors), inputs and engine_tensors(inputs)
    grads = _make_grads(tensors, grad_tensors, False)
    if create_graph:
        warn_once(CREATE_GRAPH_CYCLE, stacklevel=4)  # past _x64.scoped
    retain_graph, create_graph = _graph_flags(retain_graph, create_graph)
    roots = _root_edges(tensors, grads)
    captures = _input_edges(inputs, retain=True) if inputs is not None else []
    for x in inputs or ():
        if isinstance(x, Tensor) and x.grad_fn is not None:
            x._retain_grad()  # as torch: non-leaf inputs get .grad through retain_grad
    reachable = [edge for edge in captures if edge is not None]
    if captures and not reachable:
        return  # only inputs no gradient reaches (views made with grad mode off): nothing to accumulate
    _engine.run_backward(roots, grads, reachable, retain_graph=retain_graph, create_graph=create_graph, accumulate=True)
