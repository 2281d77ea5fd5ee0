"""torch.func's module helpers: functional_call runs a module with given tensors in place of its parameters and
buffers; stack_module_state stacks the state of several identical modules for vmap (model ensembling)."""

import collections.abc

from .._ops import stack
from ..nn.batchnorm import _BatchNorm
from ..nn.module import Module
from ..nn.normalization import _InstanceNorm
from ..nn.utils.stateless import _functional_call


def _merged(parameter_and_buffer_dicts):
    if isinstance(parameter_and_buffer_dicts, dict):
        return parameter_and_buffer_dicts
    if isinstance(parameter_and_buffer_dicts, collections.abc.Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        counts = collections.Counter(k for d in parameter_and_buffer_dicts for k in d)
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous")
        return {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    raise ValueError(
        "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
        f"{type(parameter_and_buffer_dicts)}"
    )


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with the given tensors in place of the parameters and buffers of those names (the
    others as they are); the module is left as it was."""
    tensors = _merged(parameter_and_buffer_dicts)
    return _functional_call(module, tensors, args, kwargs, tie_weights=tie_weights, strict=strict)


def _stacked_leaf(tensors, name):
    requires = [t.requires_grad for t in tensors]
    if any(requires) and not all(requires):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    result = stack(tensors)
    return result.detach().requires_grad_() if all(requires) else result


def _check_ensemble(models, api):
    """torch's checks of the models stacked for an ensemble: some, all in one mode, all of one class."""
    if len(models) == 0:
        raise RuntimeError(f"{api}: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError(f"{api}: Expected all models to have the same training/eval mode.")
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError(f"{api}: Expected all models to be of the same class.")


def stack_module_state(models):
    """({name: the parameters of `models` stacked}, {name: their buffers stacked}), for vmap over the models."""
    models = list(models)
    _check_ensemble(models, "stack_module_state")
    params = [dict(m.named_parameters()) for m in models]
    buffers = [dict(m.named_buffers()) for m in models]
    return (
        {k: _stacked_leaf([p[k] for p in params], k) for k in params[0]},
        {k: _stacked_leaf([b[k] for b in buffers], k) for k in buffers[0]},
    )


def replace_all_batch_norm_modules_(root):
    """Make every batch-norm module in `root` use the batch's statistics always (no running statistics), in place,
    as torch.func needs under vmap; returns root."""

    for module in root.modules():
        if isinstance(module, _BatchNorm) and not isinstance(module, _InstanceNorm) and module.track_running_stats:
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root


class FunctionalModule(Module):
    """functorch's stateless form of a module: `fmodel(params, *args)` runs it with `params` (in the order of its
    named_parameters) in place of its parameters."""

    def __init__(self, module, names):
        super().__init__()
        self.stateless_model, self.param_names = module, names

    def forward(self, params, *args, **kwargs):
        return functional_call(self.stateless_model, dict(zip(self.param_names, params)), args, kwargs)


class FunctionalModuleWithBuffers(FunctionalModule):
    """functorch's stateless form of a module with its buffers too: `fmodel(params, buffers, *args)`."""

    def __init__(self, module, names, buffer_names):
        super().__init__(module, names)
        self.buffer_names = buffer_names

    def forward(self, params, buffers, *args, **kwargs):
        tensors = {**dict(zip(self.param_names, params)), **dict(zip(self.buffer_names, buffers))}
        return functional_call(self.stateless_model, tensors, args, kwargs)


def _parameters_of(module, disable_autograd_tracking):
    names, params = zip(*module.named_parameters()) if list(module.parameters()) else ((), ())
    params = tuple(p.detach() for p in params) if disable_autograd_tracking else tuple(params)
    return names, params


def make_functional(model, disable_autograd_tracking=False):
    """functorch.make_functional (deprecated there for torch.func.functional_call): (fmodel, params), where
    fmodel(params, *args) is the model run with `params` in place of its parameters."""
    names, params = _parameters_of(model, disable_autograd_tracking)
    if len(list(model.buffers())) > 0:
        raise RuntimeError(
            "make_functional(model): `model` has buffers. Please use make_functional_with_buffers(model) instead."
        )
    return FunctionalModule(model, names), params


def make_functional_with_buffers(model, disable_autograd_tracking=False):
    """functorch.make_functional_with_buffers: (fmodel, params, buffers), fmodel(params, buffers, *args)."""
    names, params = _parameters_of(model, disable_autograd_tracking)
    buffer_names, buffers = zip(*model.named_buffers()) if list(model.buffers()) else ((), ())
    return FunctionalModuleWithBuffers(model, names, buffer_names), params, tuple(buffers)


def combine_state_for_ensemble(models):
    """functorch.combine_state_for_ensemble (deprecated there for torch.func.stack_module_state): (fmodel, params,
    buffers) for vmap over `models` (of one class, in one mode): fmodel is the first model's
    make_functional_with_buffers form; params and buffers are each model's stacked along a new first dimension,
    detached."""
    _check_ensemble(models, "combine_state_for_ensemble")
    made = [make_functional_with_buffers(model) for model in models]
    params = tuple(stack(group).detach() for group in zip(*[p for _, p, _ in made]))
    buffers = tuple(stack(group).detach() for group in zip(*[b for _, _, b in made]))
    return made[0][0], params, buffers
