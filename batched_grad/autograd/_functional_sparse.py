"""`sparsity=` of bg.autograd.functional.jacobian and hessian, and the pattern functions jacobian_sparsity and
hessian_sparsity: the function is recorded as for a dense Jacobian, then its pattern (detected or given) is colored
and the nonzeros computed with one batched call of one seed per color (batched_grad/_sparsity)."""

from .._grad_mode import enable_grad
from .._sparsity._api import detected, sparse_hessian, sparse_jacobian
from .._x64 import scoped

_MODES = {"reverse-mode": "reverse", "forward-mode": "forward"}


def _no_strict(strict, fn_name):
    if strict:
        raise RuntimeError(
            f"torch.autograd.functional.{fn_name}: `strict=True` and `sparsity` are not supported together. "
            "Please either set `strict=False` or `sparsity=None`."
        )


def jacobian_with_sparsity(func, inputs, create_graph, strict, strategy, chunk_size, sparsity, output):
    """jacobian(..., sparsity=...): blocks as the dense Jacobian's structure, each a SparseMatrix (or, with
    output="dense", the dense Tensor)."""
    from .functional import _OUTPUTS, _as_tuple, _grad_preprocess, _tuple_postprocess

    _no_strict(strict, "jacobian")
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), _OUTPUTS, "jacobian")
        blocks = sparse_jacobian(
            outputs, inputs, sparsity, _MODES[strategy], create_graph, chunk_size, output or "sparse"
        )
    return _tuple_postprocess(tuple(tuple(row) for row in blocks), (is_outputs_tuple, is_inputs_tuple))


def hessian_with_sparsity(func, inputs, create_graph, strict, chunk_size, sparsity, output):
    """hessian(..., sparsity=...): blocks [i][j] over the inputs, as the dense Hessian's structure."""
    from .functional import _as_tuple, _grad_preprocess, _single_output, _tuple_postprocess

    _no_strict(strict, "hessian")
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    scalar_func = _single_output(func, "hessian", strict)
    with enable_grad():
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        blocks = sparse_hessian(scalar_func(*inputs), inputs, sparsity, create_graph, chunk_size, output or "sparse")
    return _tuple_postprocess(tuple(tuple(row) for row in blocks), (is_inputs_tuple, is_inputs_tuple))


@scoped
def jacobian_sparsity(func, inputs, strategy="reverse-mode"):
    """The sparsity of the Jacobian of `func` at `inputs` (a Tensor or a tuple of Tensors), detected from the
    graph it records, and its coloring: a Sparsity of shape (total output elements, total input elements) whose
    `mode` ("reverse" or "forward", `strategy`'s on a tie) has the fewest colors. The pattern holds for every input
    that records the same graph; computed once per structure and cached, as jacobian(..., sparsity="auto")
    finds it."""
    from .functional import _OUTPUTS, _as_tuple, _check_strategy

    _check_strategy(strategy, "")
    _, inputs = _as_tuple(inputs, "inputs", "jacobian_sparsity")
    with enable_grad():
        inputs = tuple(x.detach().requires_grad_(True) for x in inputs)
        _, outputs = _as_tuple(func(*inputs), _OUTPUTS, "jacobian_sparsity")
        return detected(outputs, inputs, hessian=False).choose(_MODES[strategy])


@scoped
def hessian_sparsity(func, inputs):
    """The symmetric sparsity of the Hessian of `func` (returning one single-element Tensor) at `inputs`, detected
    from the graph it records, with the coloring of fewest colors (a star coloring, mode "symmetric", unless a
    distance-2 one has fewer)."""
    from .functional import _as_tuple, _single_output

    _, inputs = _as_tuple(inputs, "inputs", "hessian_sparsity")
    scalar_func = _single_output(func, "hessian_sparsity", False)
    with enable_grad():
        inputs = tuple(x.detach().requires_grad_(True) for x in inputs)
        return detected([scalar_func(*inputs)], inputs, hessian=True).choose("reverse")
