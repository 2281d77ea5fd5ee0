"""Optimizer: torch.optim.Optimizer's parameter groups, zero_grad, step(closure) and state_dict. Subclasses give
one pure JAX update over all of a group's parameters, compiled once per group structure (shapes, dtypes, flags)
and called with the hyperparameters that may change between steps (lr, ...) as arguments, so steps never
recompile. Until that program pays for its compile, the update runs parameter by parameter (_parts.py)."""

import copy
import functools
import itertools
from collections import OrderedDict, defaultdict

import jax
import jax.numpy as jnp

from .._grad_mode import enable_grad, no_grad
from .._tensor import Tensor, type_name
from .._x64 import scoped
from ..nn._module_hooks import add as _registered  # a hook dict entry and its handle, as modules keep them
from ..nn._module_hooks import replaced_arguments
from ..sparse._grads import zeroed_grad

# hooks every optimizer's step calls (torch.optim.optimizer.register_optimizer_step_pre_hook / _post_hook)
_global_pre_hooks, _global_post_hooks = OrderedDict(), OrderedDict()


def register_optimizer_step_pre_hook(hook):
    """hook(optimizer, args, kwargs) before every optimizer's step; it may return (new_args, new_kwargs)."""
    return _registered(_global_pre_hooks, hook)


def register_optimizer_step_post_hook(hook):
    """hook(optimizer, args, kwargs) after every optimizer's step."""
    return _registered(_global_post_hooks, hook)


def _hooked_step(step):
    """`step` calling the global and the optimizer's pre hooks before it and its post hooks after it, as torch
    wraps the step of each optimizer class it initialises (`args` holds the optimizer first, as torch passes it)."""

    @functools.wraps(step)
    def wrapper(*args, **kwargs):
        self = args[0]
        for pre_hook in itertools.chain(_global_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
            args, kwargs = replaced_arguments(pre_hook(self, args, kwargs), args, kwargs, step)
        out = step(*args, **kwargs)
        for post_hook in itertools.chain(self._optimizer_step_post_hooks.values(), _global_post_hooks.values()):
            post_hook(self, args, kwargs)
        return out

    wrapper.hooked = True
    return wrapper


class _RequiredParameter:
    """The default of a hyperparameter that every parameter group must give (optimizers written over torch's base
    class put it in their defaults, as torch's SGD once did for lr)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()
_HOOK_DICTS = (
    "_optimizer_step_pre_hooks",
    "_optimizer_step_post_hooks",
    "_optimizer_state_dict_pre_hooks",
    "_optimizer_state_dict_post_hooks",
    "_optimizer_load_state_dict_pre_hooks",
    "_optimizer_load_state_dict_post_hooks",
)


class Optimizer:
    """Base class: holds `param_groups` (dicts with "params" and hyperparameters) and per-parameter `state`."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        for name in _HOOK_DICTS:
            setattr(self, name, OrderedDict())
        if not getattr(type(self).step, "hooked", False):  # torch patches the class on its first instance
            type(self).step = _hooked_step(type(self).step)
        self.state = defaultdict(dict)  # a new parameter's state is an empty dict, as torch's
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, but "
                f"got {type_name(params._v.dtype)}"
            )
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        for group in groups if isinstance(groups[0], dict) else [{"params": groups}]:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Add a group of parameters with its own hyperparameters (missing ones come from the defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the ordering of "
                "tensors in sets will change between runs. Please use a list instead."
            )
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group, params=params)
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Reset every parameter's .grad: to None (default), or to zeros."""

        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad = None if set_to_none else zeroed_grad(p.grad)

    @scoped
    def step(self, closure=None):
        """One update of every parameter that has a .grad; `closure` re-evaluates the loss (with grad on) first."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if not params:
                    continue
                if any(p.grad._sparse_forms is not None for p in params):
                    self._sparse_update(group, params)
                else:
                    self._update(group, params)
        return loss

    def _update(self, group, params):
        raise NotImplementedError

    def _sparse_update(self, group, params):
        """The step of a group where some gradient is sparse (Embedding(sparse=True)'s): refused unless the optimizer
        has a sparse form (SGD, Adagrad, SparseAdam)."""
        raise RuntimeError(self.sparse_refusal or f"{type(self).__name__} does not support sparse gradients")

    sparse_refusal = None  # torch's message where it is not "<name> does not support sparse gradients"

    @staticmethod
    def _write(params, values):
        """Store the new values in place (version counters move, as with torch's in-place update)."""
        for p, v in zip(params, values):
            p.copy_(Tensor._wrap(v))

    # ---- hooks ---------------------------------------------------------------------------------------------
    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs) before each step; it may return (new_args, new_kwargs)."""
        return _registered(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs) after each step."""
        return _registered(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer) before state_dict() builds the dict."""
        return _registered(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) after state_dict(); a dict it returns replaces the result."""
        return _registered(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) before load_state_dict(); a dict it returns is loaded instead."""
        return _registered(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer) after load_state_dict()."""
        return _registered(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # ---- state ---------------------------------------------------------------------------------------------
    def state_dict(self):
        """{"state": {index: state}, "param_groups": [group with "params" as indices]}, torch's layout."""
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        result = self._state_dict()
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            replaced = post_hook(self, result)
            result = result if replaced is None else replaced
        return result

    def _state_dict(self):
        index, groups = {}, []
        for group in self.param_groups:
            ids = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(dict({k: v for k, v in group.items() if k != "params"}, params=ids))
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore the hyperparameters and per-parameter state saved by state_dict()."""
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            replaced = pre_hook(self, state_dict)
            state_dict = state_dict if replaced is None else replaced
        self._load_state_dict(state_dict)
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)

    def _load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(self.param_groups, groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"
            )
        params = {i: p for g, s in zip(self.param_groups, groups) for i, p in zip(s["params"], g["params"])}
        self.state = defaultdict(dict, {params[i]: copy.copy(s) for i, s in state_dict["state"].items()})
        # new group dicts in a new list, as torch's: whoever shared the old ones (a wrapping optimizer, a scheduler
        # made before) no longer reaches these
        self.param_groups = [{**saved, "params": group["params"]} for group, saved in zip(self.param_groups, groups)]

    def __repr__(self):
        text = f"{type(self).__name__} ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            text += "".join(f"    {k}: {group[k]}\n" for k in sorted(group) if k != "params")
        return text + ")"


def real_pairs(array):
    """A complex array as torch's view_as_real lays it out, (..., 2) of (real, imaginary): torch's elementwise
    optimizers step a complex parameter, its gradient and its state as pairs of reals. Other arrays (and None) pass
    unchanged."""
    if array is None or not jnp.iscomplexobj(array):
        return array
    return jnp.stack([jnp.real(array), jnp.imag(array)], axis=-1)


def complex_from_pairs(array, like):
    """real_pairs undone where `like` (the array before) is complex."""
    if like is None or not jnp.iscomplexobj(like):
        return array
    return jax.lax.complex(array[..., 0], array[..., 1])
