"""bg.autograd.functional: vjp, jvp, jacobian, hessian, hvp and vhp with torch 2.13's signatures, output
structures, strict checks and messages. Reverse mode runs on bg.autograd.grad (a vectorized Jacobian is one
batched grad call); forward mode traces the function into a cached, compiled JAX program."""

import functools

import numpy as np

from vmap._batching import check_chunk_size

from .. import _fused
from .._factories import zeros_like
from .._grad_mode import enable_grad, is_recording, set_grad_enabled
from .._host import to_device
from .._ops import stack
from .._sparsity import SparseMatrix, Sparsity
from .._sparsity._api import check_arguments
from .._tensor import Tensor
from .._x64 import scoped
from ._api import grad as _grad
from ._functional_forward import AppliesFunction, Untraceable, check_forward_mode, forward_jacobian
from ._functional_sparse import hessian_sparsity, hessian_with_sparsity, jacobian_sparsity, jacobian_with_sparsity

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]
__all__ += ["jacobian_sparsity", "hessian_sparsity", "Sparsity", "SparseMatrix"]  # sparse Jacobians and Hessians

_OUTPUTS = "outputs of the user-provided function"
_STRATEGIES = ("forward-mode", "reverse-mode")

# _check_requires_grad: what is wrong when entry {i} does not require grad, by what was checked
_NO_GRAD_MESSAGES = {
    "outputs": "Output {i} of the user-provided function does not require gradients. The outputs must be computed "
    "in a differentiable manner from the input when running in strict mode.",
    "grad_inputs": "The gradient with respect to input {i} is independent of the inputs of the user-provided "
    "function. This is not allowed in strict mode.",
    "jacobian": "While computing the hessian, found that the jacobian of the user-provided function with respect to "
    "input {i} is independent of the input. This is not allowed in strict mode. You should ensure that "
    "your function is twice differentiable and that the jacobian depends on the inputs (this would be "
    "violated by a linear function for example).",
    "hessian": "The hessian of the user-provided function with respect to input {i} is independent of the input. "
    "This is not allowed in strict mode. You should ensure that your function is thrice differentiable "
    "and that the hessian depends on the inputs.",
}
# _fill_in_zeros: what is wrong when gradient {i} is None in strict mode, by stage
_NONE_GRAD_MESSAGES = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs when using "
    "the double backward trick to compute forward mode gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed in "
    "strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the grad_jacobian. "
    "This is not allowed in strict mode as it prevents from using the double backward trick to "
    "replace forward mode AD.",
}
_CONSTANT_GRAD_MESSAGE = (
    "The {what} of the user-provided function is independent of input {i}. This is not allowed "
    "in strict mode when create_graph=True."
)


def _as_tuple(inp, arg_name=None, fn_name=None):
    """(was it a tuple, the tuple of Tensors); torch's TypeError for anything that is not a Tensor. Without names
    (torch's unchecked form, which older autograd code calls) just the tuple: a list becomes one, anything else is
    wrapped."""
    if arg_name is None and fn_name is None:
        return inp if isinstance(inp, tuple) else tuple(inp) if isinstance(inp, list) else (inp,)
    is_tuple = isinstance(inp, tuple)
    items = inp if is_tuple else (inp,)
    for i, item in enumerate(items):
        if not isinstance(item, Tensor):
            where = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                f"{where} has type {type(item)}."
            )
    return is_tuple, items


def _tuple_postprocess(res, to_unpack):
    """Unwrap single-element tuples for arguments the user did not give as tuples; `to_unpack` is one flag,
    or (outputs were a tuple, inputs were a tuple) for tuple-of-tuples results."""
    outer, inner = to_unpack if isinstance(to_unpack, tuple) else (to_unpack, True)
    if not inner:
        res = tuple(el[0] for el in res)
    return res if outer else res[0]


def _forward_mode_lists(blocks):
    """torch's forward-mode Jacobian collects its blocks in lists, over outputs of lists over inputs, and returns
    them as lists wherever the inputs were a tuple (a Tensor input unwraps them into a tuple or a Tensor)."""
    return [list(row) for row in blocks]


def _grad_preprocess(inputs, create_graph, need_graph):
    """Fresh graph roots for the inputs: views that stay in the caller's graph when create_graph, else detached."""
    return tuple(
        x.view_as(x) if create_graph and x.requires_grad else x.detach().requires_grad_(need_graph) for x in inputs
    )


def _grad_postprocess(inputs, create_graph):
    """Detach the results (nested tuples too) unless create_graph."""
    if isinstance(inputs[0], Tensor):
        return inputs if create_graph else tuple(x.detach() for x in inputs)
    return tuple(_grad_postprocess(x, create_graph) for x in inputs)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.size() != el_other.size():
            prepend = f"Entry {i} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {el_other.size()!r} but got {el_v.size()!r}.")


def _preprocess_v(v, other, is_other_tuple, create_graph, fn_name, none_message):
    if v is None:
        if len(other) != 1 or other[0].numel() != 1:
            raise RuntimeError(none_message)
        return None
    v = _grad_preprocess(_as_tuple(v, "v", fn_name)[1], create_graph, need_graph=False)
    _validate_v(v, other, is_other_tuple)
    return v


def _check_requires_grad(inputs, input_type, strict):
    if not strict:
        return
    for i, x in enumerate(inputs):
        if x is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}. This is "
                "not allowed in strict mode."
            )
        if not x.requires_grad:
            raise RuntimeError(_NO_GRAD_MESSAGES[input_type].format(i=i))


def _autograd_grad(
    outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None, is_grads_batched=False, chunk_size=None
):
    """grad() of the outputs that require grad (None for every input when none does), allowing unused inputs."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    kept = [(out, g) for out, g in zip(outputs, grad_outputs) if out is not None and out.requires_grad]
    if not kept:
        return (None,) * len(inputs)
    return _grad(
        [out for out, _ in kept],
        inputs,
        [g for _, g in kept],
        retain_graph=retain_graph,
        create_graph=create_graph,
        allow_unused=True,
        is_grads_batched=is_grads_batched,
        chunk_size=chunk_size,
    )


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    """Zeros for the None gradients, or (strict) torch's error saying which entry was independent."""
    result = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_NONE_GRAD_MESSAGES[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(_CONSTANT_GRAD_MESSAGE.format(what=what, i=i))
        result.append(g)
    return tuple(result)


def _results(outputs, result, is_outputs_tuple, is_result_tuple, create_graph):
    return (
        _tuple_postprocess(_grad_postprocess(outputs, create_graph), is_outputs_tuple),
        _tuple_postprocess(_grad_postprocess(result, create_graph), is_result_tuple),
    )


@scoped
def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), v^T J): the vector-Jacobian product at `inputs`, shaped like the inputs.

    `v` may be omitted when func returns a single one-element Tensor. With `create_graph` both results are
    differentiable; with `strict`, an input that no output depends on raises instead of giving zeros.
    """
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), _OUTPUTS, "vjp")
        _check_requires_grad(outputs, "outputs", strict)
        v = _preprocess_v(
            v,
            outputs,
            is_outputs_tuple,
            create_graph,
            "vjp",
            "The vector v can only be None if the user-provided function returns a single Tensor "
            "with a single element.",
        )
    with set_grad_enabled(create_graph or is_recording()):
        grads = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grads, inputs, strict, create_graph, "back")
    return _results(outputs, result, is_outputs_tuple, is_inputs_tuple, create_graph)


@scoped
def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), J v): the Jacobian-vector product at `inputs`, shaped like the outputs.

    As torch, computed by the double-backward trick (the backward of a backward taken w.r.t. its cotangent),
    so `create_graph` makes it differentiable. `v` may be omitted for a single one-element input.
    """
    with enable_grad():
        is_inputs_tuple, inputs, v = _inputs_and_v(inputs, v, create_graph, "jvp")
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), _OUTPUTS, "jvp")
        _check_requires_grad(outputs, "outputs", strict)
        grad_outputs = tuple(zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    with set_grad_enabled(create_graph or is_recording()):
        grads = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grads, outputs, strict, create_graph, "back_trick")
    return _results(outputs, result, is_outputs_tuple, is_outputs_tuple, create_graph)


def _inputs_and_v(inputs, v, create_graph, fn_name):
    """Preprocessed inputs and a v shaped like them (jvp, vhp, hvp): (is_inputs_tuple, inputs, v)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
    v = _preprocess_v(
        v,
        inputs,
        is_inputs_tuple,
        create_graph,
        fn_name,
        "The vector v can only be None if the input to the user-provided function is a single "
        "Tensor with a single element.",
    )
    return is_inputs_tuple, inputs, v


def _check_strategy(strategy, hint):
    if strategy not in _STRATEGIES:
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".' + hint)


def _identity_cotangents(outputs, numels):
    """One (total, numel_i) block per output, together the identity: the cotangents of a whole Jacobian."""
    total, offset, blocks = sum(numels), 0, []
    for out, n in zip(outputs, numels):
        blocks.append(Tensor._wrap(_identity_columns(total, n, offset, out.dtype.np)))
        offset += n
    return tuple(blocks)


def _construct_standard_basis_for(tensors, tensor_numels):
    """torch's name (private, used by code that builds Jacobians itself) for the identity of size sum(tensor_numels)
    split into one (total, numel) block of columns per tensor, in that tensor's dtype."""
    if len(tensors) != len(tensor_numels):
        raise AssertionError(
            "Expected tensors and tensor_numels to have the same length, but got "
            f"{len(tensors)} and {len(tensor_numels)}"
        )
    if len(tensors) == 0:
        raise AssertionError("Expected at least one tensor")
    return _identity_cotangents(tensors, tuple(tensor_numels))


@functools.lru_cache(maxsize=32)
def _identity_rows(n, shape, dtype):
    """The (n, n) identity with each row shaped `shape`, made and moved to the device once."""
    return to_device(np.eye(n, dtype=dtype).reshape((n,) + shape))


@functools.lru_cache(maxsize=32)
def _identity_columns(total, n, offset, dtype):
    """Columns offset..offset+n of the (total, total) identity, made and moved to the device once (it is immutable,
    so every Jacobian of that size shares it)."""
    return to_device(np.eye(total, n, k=-offset, dtype=dtype))


def _jacobian_vectorized(outputs, inputs, create_graph, chunk_size):
    """All rows of the Jacobian from one batched grad call whose cotangents are the standard basis (one plain grad
    call for a single one-element real output)."""
    numels = [out.numel() for out in outputs]
    if numels == [1] and outputs[0].dtype.is_floating_point:
        return (_gradient_blocks(outputs[0], inputs, create_graph),)
    flat_outputs = tuple(out if out.ndim == 1 else out.reshape(-1) for out in outputs)
    grads = _autograd_grad(
        flat_outputs,
        inputs,
        _identity_cotangents(outputs, numels),
        create_graph=create_graph,
        is_grads_batched=True,
        chunk_size=chunk_size,
    )
    per_input = []
    for g, x in zip(grads, inputs):
        if g is None:
            g = zeros_like(x).expand((sum(numels),) + tuple(x.shape))
        blocks = (g,) if len(outputs) == 1 else g.split(numels, dim=0)
        shapes = [tuple(out.shape) + tuple(x.shape) for out in outputs]
        per_input.append([b if tuple(b.shape) == shape else b.view(shape) for b, shape in zip(blocks, shapes)])
    return tuple(zip(*per_input))


def _gradient_blocks(out, inputs, create_graph):
    """The Jacobian of a one-element real output: its gradient (an unbatched grad call, as its basis is the implicit
    one), each block shaped out.shape + input.shape."""
    grads = _autograd_grad((out,), inputs, create_graph=create_graph)
    blocks = []
    for g, x in zip(grads, inputs):
        shape = tuple(out.shape) + tuple(x.shape)
        g = zeros_like(x) if g is None else g
        blocks.append(g if tuple(g.shape) == shape else g.view(shape))
    return tuple(blocks)


def _jacobian_rows(outputs, inputs, create_graph, strict):
    """The Jacobian one output element at a time, as torch's loop (a one-hot cotangent selects the element,
    so every row reuses one backward structure). Where that backward runs no user code (no hook, custom Function
    or saved-tensor hook) and records nothing, an output's rows run as one batched grad call instead, which cannot
    be told from the loop but by float rounding: on the host it computes each node's VJP for all rows at once, and
    compiled, as one program."""
    jacobian = []
    for i, out in enumerate(outputs):
        if out.numel() > 1 and not create_graph and out.grad_fn is not None and _fused.plain([out.grad_fn]):
            jacobian.append(_rows_at_once(i, out, inputs, strict))
            continue
        rows = tuple([] for _ in inputs)
        if out.numel() == 1 and out.dtype.is_floating_point:
            one_hots = [None]  # the implicit grad_output of a real scalar: a shared device constant
        else:
            basis = np.eye(out.numel(), dtype=out.dtype.np).reshape((-1,) + tuple(out.shape))
            one_hots = [Tensor._wrap(h) for h in basis]  # host data, not shared with anyone
        for one_hot in one_hots:
            grads = _autograd_grad((out,), inputs, (one_hot,), retain_graph=True, create_graph=create_graph)
            for j, (row, g, x) in enumerate(zip(rows, grads, inputs)):
                if g is None:
                    _check_independent(strict, i, j)
                    g = zeros_like(x)
                elif strict and create_graph and not g.requires_grad:
                    raise RuntimeError(_CONSTANT_GRAD_MESSAGE.format(what="jacobian", i=i))  # torch names output i
                row.append(g)
        jacobian.append(tuple(_block(row, tuple(out.shape) + tuple(x.shape)) for row, x in zip(rows, inputs)))
    return tuple(jacobian)


def _check_independent(strict, i, j):
    if strict:
        raise RuntimeError(
            f"Output {i} of the user-provided function is independent of input {j}. This is not allowed in strict mode."
        )


def _rows_at_once(i, out, inputs, strict):
    """The blocks of output `i`'s Jacobian rows (one per input), by one batched grad call over the one-hots."""
    basis = Tensor._wrap(_identity_rows(out.numel(), tuple(out.shape), out.dtype.np))
    grads = _autograd_grad((out,), inputs, (basis,), retain_graph=True, is_grads_batched=True)
    blocks = []
    for j, (g, x) in enumerate(zip(grads, inputs)):
        shape = tuple(out.shape) + tuple(x.shape)
        if g is None:
            _check_independent(strict, i, j)
            blocks.append(zeros_like(x).expand(shape))
        else:
            blocks.append(g if tuple(g.shape) == shape else g.view(shape))
    return tuple(blocks)


def _block(rows, shape):
    """The rows of one Jacobian block, stacked to `shape` (a single-element output's one row already has it)."""
    return rows[0] if len(rows) == 1 and tuple(rows[0].shape) == shape else stack(rows).view(shape)


@scoped
def jacobian(
    func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode", *, chunk_size=None,
    sparsity=None, output=None
):  # fmt: skip
    """The Jacobian of `func` at `inputs`: a Tensor for a Tensor input and output, a tuple over inputs or over
    outputs, or a tuple (over outputs) of tuples (over inputs), each block shaped output.shape + input.shape
    (lists where inputs are a tuple and strategy="forward-mode", as torch's).

    `vectorize=True` computes it with one batched grad call (reverse mode) or one compiled program of JVPs
    (`strategy="forward-mode"`, which requires vectorize=True); `chunk_size` bounds how many rows run at once.

    `sparsity="auto"` (detected from the recorded graph) or a pattern (a boolean array of shape (m, n) or
    output.shape + input.shape, a scipy.sparse matrix, (rows, cols) coordinates, or a Sparsity) computes it with
    one batched call of one seed per color, in the mode with fewer colors (`strategy`'s on a tie); each block is
    then a SparseMatrix, or with `output="dense"` the dense Tensor.
    """
    chunk_size = check_chunk_size(chunk_size)
    _check_strategy(
        strategy,
        ' Hint: If your function has more outputs than inputs, "forward-mode" tends to be '
        'more performant. Otherwise, prefer to use "reverse-mode".',
    )
    if check_arguments(sparsity, output):
        return jacobian_with_sparsity(func, inputs, create_graph, strict, strategy, chunk_size, sparsity, output)
    if strategy == "forward-mode":
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        check_forward_mode(create_graph, strict, vectorize, inputs)
        try:
            blocks, is_outputs_tuple = forward_jacobian(
                func, inputs, lambda out: _as_tuple(out, _OUTPUTS, "jacobian"), chunk_size=chunk_size
            )
        except Untraceable:  # func reads concrete values: the same Jacobian by reverse mode
            blocks = jacobian(func, inputs, vectorize=True, chunk_size=chunk_size)
            is_outputs_tuple = isinstance(blocks[0], tuple)
            blocks = blocks if is_outputs_tuple else (blocks,)
        return _tuple_postprocess(_forward_mode_lists(blocks), (is_outputs_tuple, is_inputs_tuple))

    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), _OUTPUTS, "jacobian")
        _check_requires_grad(outputs, "outputs", strict)
        if vectorize:
            if strict:
                raise RuntimeError(
                    "torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                    "supported together. Please either set `strict=False` or `vectorize=False`."
                )
            result = _jacobian_vectorized(outputs, inputs, create_graph, chunk_size)
        else:
            result = _jacobian_rows(outputs, inputs, create_graph, strict)
        return _tuple_postprocess(_grad_postprocess(result, create_graph), (is_outputs_tuple, is_inputs_tuple))


def _single_output(func, fn_name, strict):
    """func, checked to return one single-element Tensor (squeezed to 0-d), as hessian, hvp and vhp need."""

    def checked(*inputs):
        out = func(*inputs)
        is_tuple, outputs = _as_tuple(out, _OUTPUTS, fn_name)
        _check_requires_grad(outputs, "outputs", strict)
        if is_tuple:
            raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError(
                f"The Tensor returned by the function given to {fn_name} should contain a single element"
            )
        return out if out.ndim == 0 else out.squeeze()  # a 0-d output needs no squeeze node

    return checked


@scoped
def hessian(
    func,
    inputs,
    create_graph=False,
    strict=False,
    vectorize=False,
    outer_jacobian_strategy="reverse-mode",
    *,
    chunk_size=None,
    sparsity=None,
    output=None,
):
    """The Hessian of a function returning one single-element Tensor: a Tensor for a Tensor input, else a tuple
    of tuples whose block [i][j] has shape inputs[i].shape + inputs[j].shape (a list of lists with
    outer_jacobian_strategy="forward-mode", as torch's).

    The outer Jacobian (of the gradient) follows `vectorize`, `outer_jacobian_strategy` and `chunk_size` as in
    `jacobian`; "forward-mode" is forward over reverse in one compiled program. `sparsity` and `output` as in
    `jacobian`: the Hessian-vector products of one seed per color of a star coloring, as one batched call.
    """
    chunk_size = check_chunk_size(chunk_size)
    if check_arguments(sparsity, output):
        _check_strategy(outer_jacobian_strategy, "")
        return hessian_with_sparsity(func, inputs, create_graph, strict, chunk_size, sparsity, output)
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    _check_strategy(outer_jacobian_strategy, "")
    scalar_func = _single_output(func, "hessian", strict)
    if outer_jacobian_strategy == "forward-mode":
        check_forward_mode(create_graph, strict, vectorize, inputs, hessian=True)
        try:
            try:
                blocks, _ = forward_jacobian(
                    scalar_func, inputs, lambda out: (False, (out,)), hessian=True, chunk_size=chunk_size
                )
            except AppliesFunction:  # a custom Function's backward gives the gradient, as torch's: by the engine
                gradient = _engine_gradient(scalar_func)
                blocks, _ = forward_jacobian(gradient, inputs, lambda g: (True, g), chunk_size=chunk_size)
        except Untraceable:  # func reads concrete values: the same Hessian by reverse mode
            blocks = hessian(func, inputs, vectorize=True, chunk_size=chunk_size)
        return _tuple_postprocess(_forward_mode_lists(blocks), (is_inputs_tuple, is_inputs_tuple))

    def jac_func(*inp):  # the outer Jacobian's fresh inputs: no views of them are needed, unlike a user's inputs
        with enable_grad():
            (jac,) = _jacobian_rows((scalar_func(*inp),), inp, create_graph=True, strict=False)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    result = jacobian(
        jac_func,
        inputs,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
        chunk_size=chunk_size,
    )
    return _tuple_postprocess(result, (is_inputs_tuple, is_inputs_tuple))


def _engine_gradient(scalar_func):
    """The function of the inputs giving the gradient of `scalar_func` by the engine (whose custom Functions use
    their backward), for a forward-mode Jacobian of it in a trace: the inputs become fresh leaves holding the same
    traced values."""

    def gradient(*inputs):
        leaves = [Tensor._wrap(x._v, requires_grad=True) for x in inputs]
        with enable_grad():
            (rows,) = _jacobian_rows((scalar_func(*leaves),), leaves, create_graph=True, strict=False)
        return rows

    return gradient


def _hessian_setup(func, inputs, v, create_graph, strict, fn_name):
    """The shared start of vhp and hvp: preprocessed inputs and v, the checked output and its gradient."""
    is_inputs_tuple, inputs, v = _inputs_and_v(inputs, v, create_graph, fn_name)
    out = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(out, _OUTPUTS, fn_name)
    _check_requires_grad(outputs, "outputs", strict)
    if is_outputs_tuple:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if out.numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should contain a single element")
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict)
    return inputs, is_inputs_tuple, v, outputs, jac


@scoped
def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), v^T H): the vector-Hessian product of a function returning one single-element Tensor."""
    with enable_grad():
        inputs, is_inputs_tuple, v, outputs, jac = _hessian_setup(func, inputs, v, create_graph, strict, "vhp")
    with set_grad_enabled(create_graph or is_recording()):
        grads = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grads, inputs, strict, create_graph, "double_back")
    return _results(outputs, result, False, is_inputs_tuple, create_graph)


@scoped
def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), H v): the Hessian-vector product of a function returning one single-element Tensor,
    computed as torch does, by the double-backward trick on the gradient."""
    with enable_grad():
        inputs, is_inputs_tuple, v, outputs, jac = _hessian_setup(func, inputs, v, create_graph, strict, "hvp")
        grad_jac = tuple(zeros_like(x, requires_grad=True) for x in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict)
    with set_grad_enabled(create_graph or is_recording()):
        grads = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        result = _fill_in_zeros(grads, inputs, strict, create_graph, "double_back_trick")
    return _results(outputs, result, False, is_inputs_tuple, create_graph)
