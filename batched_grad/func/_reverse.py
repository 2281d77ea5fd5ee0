"""torch.func's reverse-mode transforms on the recorded graph: grad, grad_and_value, vjp, jacrev.

Each call records f on fresh inputs (_args.differentiable_inputs) and takes bg.autograd.grad of the result; a
Jacobian's rows are one batched grad call (is_grads_batched) over the standard basis. The gradients are recorded
(create_graph) only where they must stay differentiable outside the transform: a composed transform (jacrev of
grad, vmap of grad) or a captured tensor that requires grad."""

import functools

from vmap._batching import check_chunk_size
from vmap._pytree import flatten

from .. import _dual
from .._factories import zeros_like
from .._grad_mode import enable_grad, is_recording
from .._ops import cat
from .._saved_hooks import unsupported_in_transforms
from .._sparsity._api import check_arguments, sparse_hessian, sparse_jacobian
from .._tensor import Tensor
from .._transform_levels import grad_level, note_stand_ins
from .._vmap_levels import transform_backward
from .._x64 import scoped
from ..autograd._api import grad as _autograd_grad
from ..autograd.functional import _identity_columns, _jacobian_vectorized
from ._args import (
    check_argnums,
    check_aux,
    check_tensor_outputs,
    differentiable_inputs,
    reaches_outside,
    replaced,
    retire,
    selected,
    split_aux,
)


def _detached_unless(tree, keep):
    """The Tensors of `tree` cut from the transform's graph unless they must stay differentiable outside it. Their
    values are JAX's as they are (not detach()'s stop_gradient): in a forward-mode trace, tangents flow through."""
    if keep:
        return tree
    leaves, spec = flatten(tree)
    return spec.unflatten([_cut(x) if isinstance(x, Tensor) else x for x in leaves])


def _cut(x):
    """`x` cut from the graph, keeping its dual tangent (forward over reverse, dual_level around the transform)."""
    cut = Tensor._wrap(x._v)
    tangent = _dual.tangent_of(x)
    if tangent is not None:
        _dual.set_tangent(cut, tangent)
    return cut


def _gradients(outputs, inputs, cotangents, create_graph):
    """Gradients of `outputs` (with `cotangents`) for `inputs`, zeros where one does not depend on an input, as
    torch.func's: outputs that do not require grad contribute nothing."""
    pairs = [(o, c) for o, c in zip(outputs, cotangents) if o.requires_grad]
    if not pairs:
        return [zeros_like(x) for x in inputs]
    grads = _autograd_grad(
        [o for o, _ in pairs],
        inputs,
        [c for _, c in pairs],
        retain_graph=True,
        create_graph=create_graph,
        allow_unused=True,
    )
    return [zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


class _Recorded:
    """f applied to fresh inputs for the arguments at `argnums`, under grad mode: its output, aux, the fresh inputs
    and their structure, whether its output depends on tensors outside that require grad (`reaches_outside`), and
    whether gradients must be recorded now to stay differentiable outside (`keep_graph`: that, with grad mode on)."""

    def __init__(self, func, args, kwargs, argnums, has_aux, api):
        grad_outside = is_recording()
        with enable_grad():
            callers = selected(args, argnums)
            self.inputs, self.spec = differentiable_inputs(callers)
            note_stand_ins(flatten(callers)[0], self.inputs)
            output = func(*replaced(args, argnums, self.spec.unflatten(self.inputs)), **kwargs)
            self.output, self.aux = split_aux(output, has_aux, api)
        self.flat_output, self.output_spec = flatten(self.output)
        self.reaches_outside = reaches_outside(self.flat_output, self.inputs)
        self.keep_graph = grad_outside and self.reaches_outside

    def __enter__(self):  # the transform runs: its fresh inputs are retired when it returns
        return self

    def __exit__(self, *exc):
        retire(self.inputs)


def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning (gradient of func's scalar output w.r.t. args[argnums], the output); with has_aux,
    (gradient, (output, aux))."""

    @functools.wraps(func)
    @unsupported_in_transforms
    @scoped
    def wrapper(*args, **kwargs):
        argnums_ = check_argnums(argnums, len(args))
        with (
            grad_level(args, kwargs),
            _Recorded(func, args, kwargs, argnums_, has_aux, "grad_and_value(f)(*args)") as run,
        ):
            return _gradient_and_value(run, has_aux)

    return wrapper


def _gradient_and_value(run, has_aux):
    output = run.output
    if not isinstance(output, Tensor):
        raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(output)}")
    if output.dim() != 0:
        raise RuntimeError(
            "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor "
            f"with {output.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?"
        )
    with enable_grad():
        grads = _gradients([output], run.inputs, [None], run.keep_graph)
    gradient = run.spec.unflatten(grads)
    output = _detached_unless(output, run.keep_graph)
    if has_aux:
        return gradient, (output, _detached_unless(check_aux(run.aux), run.keep_graph))
    return gradient, output


def grad(func, argnums=0, has_aux=False):
    """A function returning the gradient of func's scalar output w.r.t. args[argnums] (with has_aux, also aux)."""
    value_and_grad = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        gradient, value = value_and_grad(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient

    return wrapper


def _check_floating_outputs(outputs):
    for o in outputs:
        if not (o.dtype.is_floating_point or o.dtype.is_complex):
            raise RuntimeError(
                "vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got Tensor "
                f"with dtype {o.dtype}"
            )


@unsupported_in_transforms
@scoped
def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn[, aux]): vjp_fn(cotangents) gives the gradients for every primal, shaped as
    `primals`. As torch.func's, the grad mode in force when vjp_fn is called decides whether its gradients are
    recorded: then they are differentiable with respect to the cotangents and to the tensors outside that func's
    output depends on, even when vjp itself ran under no_grad."""
    with grad_level(primals):
        run = _Recorded(func, primals, {}, tuple(range(len(primals))), has_aux, "vjp(f, *primals)")
    retire(run.inputs)
    check_tensor_outputs(run.flat_output, "vjp(f, *primals)")
    _check_floating_outputs(run.flat_output)
    if has_aux:
        check_aux(run.aux)

    @scoped
    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        flat_cotangents, spec = flatten(cotangents)
        if repr(spec) != repr(run.output_spec):
            raise RuntimeError(
                "Expected pytree structure of cotangents to be the same as pytree structure of outputs "
                f"to the function. cotangents: {spec.pprint()}, "
                f"primal output: {run.output_spec.pprint()}"
            )
        record = is_recording() if create_graph is None else create_graph
        differentiable = run.reaches_outside or reaches_outside(flat_cotangents, ())
        with enable_grad():
            grads = _gradients(run.flat_output, run.inputs, flat_cotangents, record and differentiable)
        return run.spec.unflatten(grads)

    output = _detached_unless(run.output, run.keep_graph)
    if has_aux:
        return output, vjp_fn, _detached_unless(run.aux, run.keep_graph)
    return output, vjp_fn


def _check_real(tree, api, what):
    leaves, _ = flatten(tree)
    for idx, x in enumerate(leaves):
        if isinstance(x, Tensor) and x.dtype.is_complex:
            raise RuntimeError(
                f"{api}: Expected all {what} to be real but received complex tensor at flattened input idx: {idx}"
            )


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False, sparsity=None, output=None):
    """A function returning the Jacobian of func w.r.t. args[argnums] by reverse mode: for each output leaf, the
    structure of args[argnums] (a tuple over argnums for a tuple), each block shaped output.shape + input.shape.
    `chunk_size` bounds how many rows of the basis run at once ("auto": as many as the memory budget allows, in one
    program). With a number of rows, as torch's: each chunk of the basis is one batched gradient (a chunk of one
    row, one plain gradient), and the chunks' rows are concatenated or, with `_preallocate_and_copy`, copied into a
    Jacobian allocated first (which holds one chunk's rows at a time besides the result).
    `sparsity` ("auto" or a pattern) and `output` as in autograd.functional.jacobian: each block a SparseMatrix
    computed from one seed per color, in the mode with fewer colors (reverse on a tie)."""
    return _jacobian_transform(func, argnums, has_aux, chunk_size, sparsity, output, "reverse", _preallocate_and_copy)


def _jacobian_transform(func, argnums, has_aux, chunk_size, sparsity, output, preferred, preallocate=False):
    """jacrev, and jacfwd with sparsity (`preferred`: the mode taken on a tie of colors)."""
    if isinstance(chunk_size, (int, float)) and not chunk_size > 0:
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")
    chunk_size = check_chunk_size(chunk_size)
    check_arguments(sparsity, output)

    @functools.wraps(func)
    @unsupported_in_transforms
    @scoped
    def wrapper(*args, **kwargs):
        _check_real(args, "jacrev", "inputs")
        argnums_ = check_argnums(argnums, len(args))
        with grad_level(args, kwargs), _Recorded(func, args, kwargs, argnums_, has_aux, "vjp(f, *primals)") as run:
            check_tensor_outputs(run.flat_output, "vjp(f, *primals)")
            _check_real(run.flat_output, "jacrev", "outputs")
            _check_floating_outputs(run.flat_output)
            if sparsity is None:
                blocks = _jacobian_blocks(run, chunk_size, preallocate)
            else:
                blocks = sparse_jacobian(
                    run.flat_output, run.inputs, sparsity, preferred, run.keep_graph, chunk_size, output or "sparse"
                )
            if has_aux:
                check_aux(run.aux)
        per_output = [run.spec.unflatten(row) for row in blocks]
        jacobian = run.output_spec.unflatten(_detached_unless(per_output, run.keep_graph))
        return (jacobian, _detached_unless(run.aux, run.keep_graph)) if has_aux else jacobian

    return wrapper


def _jacobian_blocks(run, chunk_size, preallocate):
    """Per output leaf, its Jacobian block for each fresh input: from the outputs that require grad, zeros for the
    others (they depend on no input), as torch.func's."""
    differentiable = tuple(o for o in run.flat_output if o.requires_grad)
    rows = iter(())
    if differentiable:
        inputs = tuple(run.inputs)
        # torch.func.jacrev is vmap(vjp_fn): user code in the backward sees its rows as under vmap
        with enable_grad(), transform_backward():
            if isinstance(chunk_size, int) and chunk_size < sum(o.numel() for o in differentiable):
                rows = iter(_jacobian_in_chunks(differentiable, inputs, run.keep_graph, chunk_size, preallocate))
            else:
                rows = iter(_jacobian_vectorized(differentiable, inputs, run.keep_graph, chunk_size))
    return [
        next(rows)
        if o.requires_grad
        else tuple(zeros_like(x).expand(tuple(o.shape) + tuple(x.shape)) for x in run.inputs)
        for o in run.flat_output
    ]


def _jacobian_in_chunks(outputs, inputs, create_graph, chunk_size, preallocate):
    """The Jacobian blocks (per output, per input) from the standard basis `chunk_size` rows at a time: each chunk
    one batched grad (a chunk of one row, one plain grad, which has none of batching's limits), and per input the
    chunks' rows concatenated or, with `preallocate`, copied into a (rows, *input.shape) tensor made first."""
    numels = [o.numel() for o in outputs]
    total = sum(numels)
    flat_outputs = [o.reshape(-1) for o in outputs]
    basis = [Tensor._wrap(_identity_columns(total, n, offset, o.dtype.np)) for o, n, offset in _offsets(outputs)]
    jacobians = [x.new_zeros((total, *x.shape)) if preallocate else [] for x in inputs]
    for start in range(0, total, chunk_size):
        stop = min(start + chunk_size, total)
        if chunk_size == 1:
            grads = _gradients(flat_outputs, inputs, [b[start] for b in basis], create_graph)
            grads = [g.unsqueeze(0) for g in grads]
        else:
            grads = _autograd_grad(
                flat_outputs,
                inputs,
                [b[start:stop] for b in basis],
                retain_graph=True,
                create_graph=create_graph,
                allow_unused=True,
                is_grads_batched=True,
            )
            grads = [zeros_like(x).expand((stop - start, *x.shape)) if g is None else g for g, x in zip(grads, inputs)]
        for jacobian, g in zip(jacobians, grads):
            if preallocate:
                jacobian[start:stop].copy_(g)
            else:
                jacobian.append(g)
    if not preallocate:
        jacobians = [cat(chunks) for chunks in jacobians]
    per_input = []
    for jacobian, x in zip(jacobians, inputs):
        blocks = jacobian.split(numels) if len(outputs) > 1 else (jacobian,)
        per_input.append([b.view(tuple(o.shape) + tuple(x.shape)) for b, o in zip(blocks, outputs)])
    return tuple(zip(*per_input))


def _offsets(outputs):
    offset = 0
    for o in outputs:
        yield o, o.numel(), offset
        offset += o.numel()


def sparse_hessian_transform(func, argnums, sparsity, output):
    """func.hessian with `sparsity`: the Hessian of func's scalar output from one batched Hessian-vector product
    per color, blocks structured as jacfwd(jacrev(func))'s."""
    check_arguments(sparsity, output)

    @functools.wraps(func)
    @unsupported_in_transforms
    @scoped
    def wrapper(*args, **kwargs):
        _check_real(args, "hessian", "inputs")
        argnums_ = check_argnums(argnums, len(args))
        with grad_level(args, kwargs), _Recorded(func, args, kwargs, argnums_, False, "hessian(f)(*args)") as run:
            value = run.output
            if not isinstance(value, Tensor) or value.numel() != 1:
                raise RuntimeError(
                    "hessian(f, sparsity=...)(*args): Expected f(*args) to return a single-element Tensor, got "
                    + (f"a Tensor of shape {tuple(value.shape)}" if isinstance(value, Tensor) else f"{type(value)}")
                )
            blocks = sparse_hessian(value, run.inputs, sparsity, run.keep_graph, None, output or "sparse")
        return run.spec.unflatten([run.spec.unflatten(list(row)) for row in blocks])

    return wrapper
