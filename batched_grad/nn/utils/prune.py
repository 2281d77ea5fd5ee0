"""torch.nn.utils.prune: pruning a module's tensor by a mask. Pruning `weight` moves the parameter to `weight_orig`,
registers the mask as the buffer `weight_mask`, and adds the pruning method as a forward pre-hook that recomputes
`module.weight = weight_mask * weight_orig` before each forward, so gradients reach `weight_orig` through the mask.
Pruning the same tensor again composes the masks in a PruningContainer; `remove` makes the pruning permanent."""

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

from ... import _factories, _ops
from .convert_parameters import parameters_to_vector


def _check_amount(amount):
    """torch's check of `amount` when a method is made: a non-negative int, or a float in [0, 1]."""
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    is_count = isinstance(amount, numbers.Integral)
    if (is_count and amount < 0) or (not is_count and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _count_to_prune(amount, size):
    """How many of `size` units `amount` prunes (a fraction is rounded half to even, as Python's round); a count
    larger than `size` is refused."""
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={size}")
        return amount
    return round(amount * size)


def _check_structured(t, dim):
    if t.dim() <= 1:
        raise ValueError(
            "Structured pruning can only be applied to multidimensional tensors. "
            f"Found tensor of shape {t.shape} with {t.dim()} dims"
        )
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _channel_mask(t, dim, channels):
    """A mask of t's shape that keeps the slices `channels` (indices or a boolean mask) along `dim`."""
    mask = _factories.zeros_like(t)
    index = [slice(None)] * t.dim()
    index[dim] = channels
    mask[tuple(index)] = 1
    return mask


class BasePruningMethod(ABC):
    """A way of pruning one tensor of a module: subclasses define compute_mask(t, default_mask); an applied method
    is the module's forward pre-hook that recomputes the pruned tensor from `<name>_orig` and `<name>_mask`."""

    _tensor_name: str

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The mask pruning `t` further, given the mask `default_mask` of earlier pruning (same shape as t)."""

    def apply_mask(self, module):
        """The pruned tensor: `<name>_mask` (in `<name>_orig`'s dtype) times `<name>_orig`."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune `module.<name>` with cls(*args, **kwargs), composed with the pruning it already has; masks are
        computed from `importance_scores` (the tensor itself when None). Returns the method now acting on it."""
        method = _composed_method(cls, module, name, *args, **kwargs)
        orig = getattr(module, name)
        if importance_scores is None:
            importance_scores = orig
        elif importance_scores.shape != orig.shape:
            raise AssertionError(
                f"importance_scores should have the same shape as parameter {name} of {module}, "
                f"got {importance_scores.shape} vs {orig.shape}"
            )
        first = not isinstance(method, PruningContainer)
        if first:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = _factories.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            module.register_buffer(name + "_mask", method.compute_mask(importance_scores, default_mask=default_mask))
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if first:
                module.register_parameter(name, getattr(module, name + "_orig"))
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """`t` times this method's mask for it (computed from `importance_scores` when given)."""
        if importance_scores is None:
            importance_scores = t
        elif importance_scores.shape != t.shape:
            raise AssertionError(
                f"importance_scores should have the same shape as tensor t, got {importance_scores.shape} vs {t.shape}"
            )
        default_mask = _factories.ones_like(t) if default_mask is None else default_mask
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module):
        """Make the pruning permanent: the masked values become the parameter `<name>` again, and
        `<name>_orig` and `<name>_mask` go away (the forward pre-hook is removed by prune.remove)."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        pruned = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig.data = pruned.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


def _composed_method(cls, module, name, *args, **kwargs):
    """cls(*args, **kwargs) for `name`, joined with the pruning hook already on `name` (which is taken off the
    module: the caller registers the result)."""
    found = [
        (key, hook)
        for key, hook in module._forward_pre_hooks.items()
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name
    ]
    if len(found) > 1:
        raise AssertionError(
            f"Avoid adding multiple pruning hooks to the same tensor {name} of module {module}. Use a PruningContainer."
        )
    for key, _ in found:
        del module._forward_pre_hooks[key]
    method = cls(*args, **kwargs)
    method._tensor_name = name
    if not found:
        return method
    previous = found[0][1]
    container = previous if isinstance(previous, PruningContainer) else PruningContainer(previous)
    container.add_pruning_method(method)
    return container


class PruningContainer(BasePruningMethod):
    """The sequence of pruning methods applied to one tensor; its mask is the last method's, computed on what the
    earlier ones left (the unpruned entries, or the unpruned channels for a structured method)."""

    def __init__(self, *args):
        self._pruning_methods = ()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method):
        """Append `method` (a BasePruningMethod acting on the same tensor)."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(
                f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' to "
                f"PruningContainer {self}. Found '{method._tensor_name}'"
            )
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """default_mask with the last method's mask, computed on the part of `t` still unpruned, written over
        that part."""
        method = self._pruning_methods[-1]
        index = _unpruned_part(method, t, default_mask)
        new_mask = default_mask.to(dtype=t.dtype)
        partial = method.compute_mask(t[index], default_mask=default_mask[index])
        new_mask[index] = partial.to(dtype=new_mask.dtype)
        return new_mask


def _unpruned_part(method, t, mask):
    """The index of the part of `t` that `method` prunes further: the unpruned entries (unstructured), the
    channels along method.dim with an unpruned entry (structured), or all of it (global)."""
    kind = method.PRUNING_TYPE
    if kind == "unstructured":
        return mask == 1
    if kind == "global":
        return (slice(None),) * t.dim()
    if kind != "structured":
        raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
    if not hasattr(method, "dim"):
        raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have the attribute `dim` defined.')
    dim = method.dim + t.dim() if method.dim < 0 else method.dim
    if dim < 0:
        raise IndexError(f"Index is out of bounds for tensor with dimensions {t.dim()}")
    kept = mask.sum(dim=[d for d in range(t.dim()) if d != dim]) != 0
    return tuple(kept if d == dim else slice(None) for d in range(t.dim()))


class Identity(BasePruningMethod):
    """Pruning that prunes nothing (the mask is all ones), to give a tensor the pruned structure."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class _ByScore(BasePruningMethod):
    """Unstructured pruning of the `amount` entries (a count, or a fraction of the tensor) whose scores are the
    largest (or smallest, `_prunes_largest` False) on top of the mask so far."""

    PRUNING_TYPE = "unstructured"
    _prunes_largest = True

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    @abstractmethod
    def _scores(self, t):
        """The score of each entry of t."""

    def compute_mask(self, t, default_mask):
        count = _count_to_prune(self.amount, t.nelement())
        mask = default_mask.clone()
        if count != 0:  # random scores are drawn only then, as torch draws them
            chosen = _ops.topk(self._scores(t).view(-1), k=count, largest=self._prunes_largest).indices
            mask.view(-1)[chosen] = 0
        return mask


class RandomUnstructured(_ByScore):
    """Prune `amount` entries (a count, or a fraction of the tensor) chosen at random."""

    def _scores(self, t):
        return _factories.rand_like(t)

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_ByScore):
    """Prune the `amount` entries (a count, or a fraction of the tensor) of smallest absolute value."""

    _prunes_largest = False

    def _scores(self, t):
        return t.abs()

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prune `amount` whole channels along `dim` (a count, or a fraction of them) chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _check_amount(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _check_structured(t, self.dim)
        channels = t.shape[self.dim]
        count = _count_to_prune(self.amount, channels)
        if count == 0:
            return default_mask
        draws = _factories.rand(channels)
        threshold = _ops.kthvalue(draws, k=count).values
        mask = _channel_mask(t, self.dim, draws > threshold)
        mask *= default_mask.to(dtype=mask.dtype)
        return mask

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prune the `amount` channels along `dim` (a count, or a fraction of them) of smallest L`n` norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _check_amount(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _check_structured(t, self.dim)
        channels = t.shape[self.dim]
        count = _count_to_prune(self.amount, channels)
        dim = self.dim % t.dim()
        norms = _ops.norm(t, p=self.n, dim=[d for d in range(t.dim()) if d != dim])
        kept = _ops.topk(norms, k=channels - count, largest=True).indices
        if count == 0:
            return default_mask
        mask = _channel_mask(t, self.dim, kept)
        mask *= default_mask.to(dtype=mask.dtype)
        return mask

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prune by a given mask (of the tensor's shape), on top of the pruning it already has."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError(
                f"default_mask shape {default_mask.shape} must match self.mask shape {self.mask.shape}"
            )
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    """Give `module.<name>` the pruned structure with an all-ones mask; returns module."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune `amount` random entries of `module.<name>`; returns module."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the `amount` entries of `module.<name>` of smallest absolute value (or importance); returns module."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune `amount` random channels of `module.<name>` along `dim`; returns module."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the `amount` channels of `module.<name>` along `dim` of smallest L`n` norm; returns module."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    """Prune `module.<name>` by `mask`; returns module."""
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the (module, name) pairs of `parameters` together, as one vector, with the unstructured
    `pruning_method(**kwargs)` (importance_scores: {(module, name): scores} for some of them)."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    importance_scores = {} if importance_scores is None else importance_scores
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    parameters = list(parameters)
    scores = parameters_to_vector([importance_scores.get((m, n), getattr(m, n)) for m, n in parameters])
    default_mask = parameters_to_vector(
        [getattr(m, n + "_mask", _factories.ones_like(getattr(m, n))) for m, n in parameters]
    )
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(
            'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
            f"Found method {pruning_method} of type {method.PRUNING_TYPE}"
        )
    container.add_pruning_method(method)
    final_mask = container.compute_mask(scores, default_mask)
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        custom_from_mask(module, name, mask=final_mask[start : start + param.numel()].view_as(param))
        start += param.numel()


def remove(module, name):
    """Make the pruning of `module.<name>` permanent and take its hook off; returns module."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module):
    """Whether `module` or one of its submodules has a pruning hook."""
    return any(
        isinstance(hook, BasePruningMethod)
        for _, sub in module.named_modules()
        for hook in sub._forward_pre_hooks.values()
    )
