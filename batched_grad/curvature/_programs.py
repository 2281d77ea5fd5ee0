"""What runs one data batch's product: a function of Tensors compiled by bg.compile into one XLA program per
signature (the batch's and the columns' shapes), with the operator's K columns as one batch of cotangents
(`is_grads_batched=True`, chunk_size="auto": as many columns at once as the memory budget allows). A model that
reads values (`.item()`, a branch on a tensor) cannot be compiled: its products run through the engine eagerly.

Programs are kept per (kind, model, loss, parameters, options), so a new operator over the same model (one per
training step, say) reuses the compiled program instead of tracing it again."""

import collections
import threading

from .. import _compile
from .._grad_mode import enable_grad
from .._tensor import Tensor
from ..autograd import grad
from ..func import functional_call
from ..nn import Module

AUTO = "auto"  # the chunk of columns: the largest whose program fits vmap.memory_budget()
_MAX_PROGRAMS = 64
_programs = collections.OrderedDict()  # key -> (the objects the key names, _Program)
_lock = threading.Lock()


class _Program:
    """fn(*args) -> list of Tensors, compiled; run eagerly from the first call whose trace needs a value."""

    def __init__(self, fn):
        self._fn, self._compiled, self._eager = fn, _compile.compile(fn), False

    def __call__(self, *args):
        with enable_grad():
            if not self._eager:
                try:
                    return list(self._compiled(*args))
                except RuntimeError as error:
                    if not isinstance(error.__cause__, _compile._CONCRETE):
                        raise
                    self._eager = True
            return [r.detach() for r in self._fn(*args)]


def program(kind, objects, options, build):
    """The cached _Program for `kind` over `objects` (model, loss, parameters: compared by identity) and hashable
    `options`; `build()` makes its function the first time."""
    key = (kind, tuple(id(o) for o in objects), options)
    with _lock:
        entry = _programs.get(key)
        if entry is not None and all(a is b for a, b in zip(entry[0], objects)):
            _programs.move_to_end(key)
            return entry[1]
        made = _Program(build())
        _programs[key] = (tuple(objects), made)
        while len(_programs) > _MAX_PROGRAMS:
            _programs.popitem(last=False)
        return made


class FunctionalModel:
    """model_func(X) as a function of leaves standing for `params`: a Module that holds every parameter is called
    with fresh leaves in their place (torch.func.functional_call), so that frozen parameters and `.grad` are left
    alone; any other callable is differentiated with respect to the parameters themselves."""

    def __init__(self, model_func, params):
        self.model_func, self.params = model_func, list(params)
        self.names = _parameter_names(model_func, self.params)
        if self.names is None:
            frozen = [i for i, p in enumerate(self.params) if not p.requires_grad]
            if frozen:
                raise ValueError(
                    f"params[{frozen[0]}] does not require grad: a model_func that is not a Module holding the "
                    "parameters is differentiated with respect to them, so each must require grad"
                )

    def leaves(self):
        if self.names is None:
            return self.params
        return [p.detach().requires_grad_() for p in self.params]

    def __call__(self, leaves, X):
        if self.names is None:
            return self.model_func(X)
        return functional_call(self.model_func, dict(zip(self.names, leaves)), (X,))


def _parameter_names(model_func, params):
    if not isinstance(model_func, Module):
        return None
    by_id = {}
    for name, p in model_func.named_parameters():
        by_id.setdefault(id(p), name)
    names = [by_id.get(id(p)) for p in params]
    return None if any(n is None for n in names) else names


def zeros_for(rows, shape, like):
    from .. import zeros

    return zeros(rows, *shape, dtype=like.dtype, device=like.device)


def batched_grad(outputs, inputs, columns, retain_graph=True):
    """The batch of vector-Jacobian products of `outputs` with the rows of `columns` (one batched backward), with
    respect to `inputs`; an input that nothing reaches gets zeros, and outputs that do not require grad (a constant
    gradient) contribute nothing."""
    pairs = [(o, c) for o, c in zip(outputs, columns) if isinstance(o, Tensor) and o.requires_grad]
    rows = columns[0].shape[0]
    if not pairs:
        return [zeros_for(rows, x.shape, x) for x in inputs]
    results = grad(
        [o for o, _ in pairs],
        inputs,
        [c for _, c in pairs],
        is_grads_batched=True,
        retain_graph=retain_graph,
        allow_unused=True,
        chunk_size=AUTO,
    )
    return [zeros_for(rows, x.shape, x) if r is None else r for r, x in zip(results, inputs)]


def jacobian_columns(out, leaves, columns):
    """J @ columns, the model's Jacobian `out` w.r.t. `leaves` applied to each row of `columns` (a list of
    `(K, *leaf.shape)`): `(K, *out.shape)`, by the transpose of a transpose: J^T u is linear in a dummy `u`, and
    its batched VJP with the columns is J @ columns."""
    from .. import zeros_like

    u = zeros_like(out).requires_grad_()
    transposed = grad(out, leaves, u, create_graph=True, allow_unused=True)
    pairs = [(t, c) for t, c in zip(transposed, columns) if t is not None and t.requires_grad]
    if not pairs:
        return zeros_for(columns[0].shape[0], out.shape, out)
    (result,) = batched_grad([t for t, _ in pairs], [u], [c for _, c in pairs])
    return result
