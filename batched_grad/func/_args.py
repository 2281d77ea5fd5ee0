"""What the transforms of batched_grad.func share: torch.func's argnums rules and messages, the inputs a transform
differentiates (fresh graph inputs standing for the caller's tensors), and whether its results must stay
differentiable outside it."""

import weakref

from vmap._pytree import flatten

from .. import _dual
from .._graph import AccumulateGrad
from .._ops import clone
from .._tensor import Tensor


def _wrap_argnum(argnum, num_args):
    if not isinstance(argnum, int):
        raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
    if 0 <= argnum < num_args:
        return argnum
    if -num_args <= argnum < 0:
        return argnum + num_args
    raise RuntimeError(f"Got argnum={argnum}, but only {num_args} positional inputs")


def check_argnums(argnums, num_args):
    """`argnums` (an int or a non-empty tuple of distinct ints) with negative entries wrapped, as torch checks it."""
    if not isinstance(argnums, (int, tuple)):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    if isinstance(argnums, int):
        return _wrap_argnum(argnums, num_args)
    argnums = tuple(_wrap_argnum(a, num_args) for a in argnums)
    if len(argnums) == 0:
        raise RuntimeError("argnums must be non-empty")
    if len(set(argnums)) != len(argnums):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return argnums


def selected(args, argnums):
    """The differentiated part of `args`: args[argnums] for an int, the tuple of them for a tuple."""
    return args[argnums] if isinstance(argnums, int) else tuple(args[i] for i in argnums)


def replaced(args, argnums, new):
    """`args` with the differentiated part replaced by `new` (shaped as `selected` returns it)."""
    if isinstance(argnums, int):
        return args[:argnums] + (new,) + args[argnums + 1 :]
    args = list(args)
    for i, value in zip(argnums, new):
        args[i] = value
    return tuple(args)


def differentiable_inputs(tree):
    """Fresh graph inputs for the tensors of `tree` (leaves, spec): a gradient taken with respect to one counts only
    the uses through it, not those of the caller's tensor it stands for. Where the caller's tensor requires grad, the
    input is a recorded copy of it (recorded even under no_grad outside: a vjp_fn called later with grad mode on
    must give gradients differentiable with respect to it); otherwise a new leaf holding its value (JAX's value
    itself: a transform traced in forward mode sees its tangent)."""
    leaves, spec = flatten(tree)
    for x in leaves:
        if not isinstance(x, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
    return [_fresh(x) for x in leaves], spec


def _fresh(x):
    """A fresh graph input standing for `x`; for a sparse COO tensor, one with its indices and fresh values (its
    gradient is then sparse, as torch.func's)."""
    if x._sparse_forms is not None:
        return type(x)._of(x._coo_indices, _fresh(x._coo_values), x.shape, x._coalesced)
    if x.requires_grad:
        return clone(x)  # a dual tensor's clone carries its tangent
    fresh = Tensor._wrap(x._v)._requires_grad_()  # torch's refusal of an integer
    tangent = _dual.tangent_of(x)
    if tangent is not None:  # a dual input stays dual: the gradient gets its tangent (forward over reverse)
        _dual.set_tangent(fresh, tangent)
    return fresh


def _graph_tensor(x):
    """The tensor the graph holds for `x`: a sparse tensor's values, else itself."""
    return x._coo_values if x._sparse_forms is not None else x


# The fresh leaves of transforms that have returned. A vjp_fn called later records its gradients through its
# transform's fresh leaves; they stand for tensors that did not require grad outside, so no transform around the
# call differentiates with respect to them (as torch's wrappers of an exited level are plain tensors again).
# Keyed by id (a Tensor's == is elementwise, so no WeakSet); an entry leaves with its tensor.
_retired = {}


def retire(tensors):
    """Mark the fresh leaves among `tensors` as belonging to a transform that has returned."""
    for x in tensors:
        x = _graph_tensor(x) if isinstance(x, Tensor) else x
        if isinstance(x, Tensor) and x.grad_fn is None:
            key = id(x)
            _retired[key] = weakref.ref(x, lambda _, key=key: _retired.pop(key, None))


def _is_retired(leaf):
    ref = _retired.get(id(leaf))
    return ref is not None and ref() is leaf


def _is_outside_leaf(leaf, own):
    return leaf.requires_grad and id(leaf) not in own and not _is_retired(leaf)


def reaches_outside(outputs, inputs):
    """Whether the graph of `outputs` (or an output itself) reaches a leaf that requires grad other than the fresh
    leaves in `inputs` and those of returned transforms: then a gradient of them must be recorded (create_graph)
    to stay differentiable with respect to it."""
    own = {id(_graph_tensor(x)) for x in inputs if x.grad_fn is None}
    tensors = [o for o in outputs if isinstance(o, Tensor)]
    if any(o.grad_fn is None and _is_outside_leaf(o, own) for o in tensors):
        return True
    stack = [o.grad_fn for o in tensors if o.grad_fn is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if type(node) is AccumulateGrad:
            if _is_outside_leaf(node.variable, own):
                return True
            continue
        stack.extend(edge.node for edge in node.edges if edge is not None)
    return False


def check_tensor_outputs(leaves, api):
    """torch's check that f returned a non-empty pytree of Tensors."""
    if (len(leaves) == 1 and leaves[0] is None) or len(leaves) < 1:
        raise RuntimeError(f"{api}: Expected f to be a function that has non-empty output (got output = {leaves})")
    for o in leaves:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got unsupported type {type(o)}")


def check_aux(aux):
    """torch's check that f's aux is a pytree of Tensors only (no numbers, strings or None)."""
    for x in flatten(aux)[0]:
        if not isinstance(x, Tensor):
            raise RuntimeError(f"Expected tensors, got unsupported type {type(x)}")
    return aux


def split_aux(output, has_aux, api):
    """(output, aux) of f's result: with has_aux, f must return a pair."""
    if not has_aux:
        return output, None
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True")
    return output
