"""Module's state dict, as torch.nn.Module's: state_dict() asks each module for its own entries through the
overridable `_save_to_state_dict` and records each module's `_version` in `destination._metadata`; load_state_dict()
hands each module its share through the overridable `_load_from_state_dict` with that module's saved metadata (so a
subclass can migrate an older checkpoint), then reports the missing and unexpected keys. Extra state
(get_extra_state/set_extra_state) travels under `<prefix>_extra_state`; pre- and post-hooks run around both."""

import functools
import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

from .._grad_mode import no_grad
from .._tensor import Tensor
from ..utils.hooks import RemovableHandle
from .parameter import Parameter

EXTRA_STATE_KEY_SUFFIX = "_extra_state"
POSITIONAL_STATE_DICT = (
    "Positional args are being deprecated, use kwargs instead. Refer to "
    "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module.state_dict for details."
)
NEVER_CALLED = (
    "Reached a code path in Module.{}() that should never be called. Please file an issue at "
    "https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml to report this bug."
)
POST_HOOK_RETURNED = (
    "Hooks registered with ``register_load_state_dict_post_hook`` are not expected to return new values, if "
    "incompatible_keys need to be modified, it should be done inplace."
)


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """load_state_dict's result: the keys the module expected but did not get, and those it did not expect."""

    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _add_hook(hooks, hook):
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def _state_dict_arguments(args, destination, prefix, keep_vars):
    """torch's deprecated positional form state_dict(destination, prefix, keep_vars), with its FutureWarning."""
    warnings.warn(POSITIONAL_STATE_DICT, FutureWarning, stacklevel=3)
    if destination is None:
        destination = args[0]
    if len(args) > 1 and prefix == "":
        prefix = args[1]
    if len(args) > 2 and keep_vars is False:
        keep_vars = args[2]
    return destination, prefix, keep_vars


class ModuleState:
    """The state-dict half of Module (mixed into it); every method keeps torch's name and signature, so that
    subclasses overriding them are honoured."""

    _version = 1

    # ---- hooks ---------------------------------------------------------------------------------------------------
    def _register_state_dict_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) -> None or a new state_dict (respected at the root)."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError(
                "Cannot register the same function as the state dict post hook that was previously registered via "
                "register_state_dict_post_hook"
            )
        return _add_hook(self._state_dict_hooks, hook)

    def register_state_dict_post_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) -> None, run after this module's state is saved; it may
        change state_dict in place."""
        hook._from_public_api = True
        return _add_hook(self._state_dict_hooks, hook)

    def register_state_dict_pre_hook(self, hook):
        """hook(module, prefix, keep_vars) -> None, run before this module's state is saved."""
        return _add_hook(self._state_dict_pre_hooks, hook)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """hook([module,] state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)."""
        return _add_hook(self._load_state_dict_pre_hooks, functools.partial(hook, self) if with_module else hook)

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        -> None, run before this module's entries are loaded; it may change state_dict and the key lists."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) -> None, run after this module and its descendants are loaded; it may
        change incompatible_keys' lists in place (which decides whether a strict load raises)."""
        return _add_hook(self._load_state_dict_post_hooks, hook)

    # ---- extra state ---------------------------------------------------------------------------------------------
    def get_extra_state(self):
        """What to save under `<prefix>_extra_state`; override it (with set_extra_state) to save more than tensors."""
        raise RuntimeError(NEVER_CALLED.format("get_extra_state"))

    def set_extra_state(self, state):
        """Restore what get_extra_state returned, from the loaded state dict."""
        raise RuntimeError(NEVER_CALLED.format("set_extra_state"))

    def _has_own(self, method):
        return getattr(type(self), method) is not getattr(ModuleState, method)

    # ---- saving --------------------------------------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """Put this module's parameters, persistent buffers and extra state (not its descendants') in
        `destination` under `prefix`."""
        skip = self.__dict__.get("_non_persistent", ())
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buffer in self._buffers.items():
            if buffer is not None and name not in skip:
                destination[prefix + name] = buffer if keep_vars else buffer.detach()
        if self._has_own("get_extra_state"):
            destination[prefix + EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Every parameter and persistent buffer (detached unless keep_vars) and extra state, by dotted name, in
        `destination` (a new OrderedDict by default, whose `_metadata` holds each module's version)."""
        if args:
            destination, prefix, keep_vars = _state_dict_arguments(args, destination, prefix, keep_vars)
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = {"version": self._version}
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            result = hook(self, destination, prefix, local_metadata)
            if getattr(hook, "_from_public_api", False):
                if result is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif result is not None:
                destination = result
        return destination

    # ---- loading -------------------------------------------------------------------------------------------------
    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        """Load this module's parameters, persistent buffers and extra state (not its descendants') from
        `state_dict`, noting what is missing, unexpected or wrong in the lists; `local_metadata` is what was saved
        for this module ({"version": ...}), plus "assign_to_params_buffers" when loading with assign=True."""
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        skip = self.__dict__.get("_non_persistent", ())
        local_state = {k: v for k, v in self._parameters.items() if v is not None}
        local_state.update((k, v) for k, v in self._buffers.items() if v is not None and k not in skip)
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, param in local_state.items():
            key = prefix + name
            if key in state_dict:
                _load_one(self, name, param, key, state_dict[key], assign, error_msgs)
            elif strict:
                missing_keys.append(key)
        extra_key = prefix + EXTRA_STATE_KEY_SUFFIX
        if self._has_own("set_extra_state"):
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            unexpected_keys.extend(_unexpected(self, state_dict, prefix, local_state, extra_key))

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Load parameters, persistent buffers and extra state from `state_dict` into this module and its
        descendants (copied in place, or with `assign` the state dict's tensors themselves); with `strict` the keys
        must match state_dict()'s. Returns _IncompatibleKeys(missing_keys, unexpected_keys)."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)  # the modules' _load_from_state_dict may change their copy
        if metadata is not None:
            state_dict._metadata = metadata
        _load_tree(self, state_dict, "", metadata, assign, (missing_keys, unexpected_keys, error_msgs))
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, f"Unexpected key(s) in state_dict: {_quoted(unexpected_keys)}. ")
            if missing_keys:
                error_msgs.insert(0, f"Missing key(s) in state_dict: {_quoted(missing_keys)}. ")
        if error_msgs:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(error_msgs)
            )
        return _IncompatibleKeys(missing_keys, unexpected_keys)


def _quoted(keys):
    return ", ".join(f'"{k}"' for k in keys)


def _load_tree(module, state_dict, prefix, metadata, assign, lists):
    """Load `module` then each child (with the entries under its prefix), then run `module`'s load post-hooks."""
    missing_keys, unexpected_keys, error_msgs = lists
    local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
    if assign:
        local_metadata["assign_to_params_buffers"] = assign
    module._load_from_state_dict(state_dict, prefix, local_metadata, True, missing_keys, unexpected_keys, error_msgs)
    for name, child in module._modules.items():
        if child is not None:
            child_prefix = prefix + name + "."
            child_state = {k: v for k, v in state_dict.items() if k.startswith(child_prefix)}
            _load_tree(child, child_state, child_prefix, metadata, assign, lists)
    incompatible = _IncompatibleKeys(missing_keys, unexpected_keys)
    for hook in module._load_state_dict_post_hooks.values():
        if hook(module, incompatible) is not None:
            raise AssertionError(POST_HOOK_RETURNED)


def _load_one(module, name, param, key, value, assign, error_msgs):
    """Copy (or with `assign`, set) one parameter or buffer from its checkpoint value, or note why not."""
    if not isinstance(value, Tensor):
        error_msgs.append(
            f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like object from checkpoint '
            f"but received {type(value)}"
        )
        return
    if param.dim() == 0 and value.dim() == 1 and value.shape[0] == 1:
        value = value[0]  # a scalar saved as a one-element vector (torch 0.3 checkpoints)
    if value.shape != param.shape:
        error_msgs.append(
            f"size mismatch for {key}: copying a param with shape {value.shape} from checkpoint, "
            f"the shape in current model is {param.shape}."
        )
        return
    try:
        with no_grad():
            if not assign:
                param.copy_(value)
                return
            if isinstance(param, Parameter):
                if isinstance(value, Parameter):
                    value.requires_grad_(param.requires_grad)
                else:
                    value = Parameter(value, requires_grad=param.requires_grad)
            setattr(module, name, value)
    except Exception as ex:
        error_msgs.append(
            f'While copying the parameter named "{key}", whose dimensions in the model are {param.size()} and '
            f"whose dimensions in the checkpoint are {value.size()}, an exception occurred : {ex.args}."
        )


def _unexpected(module, state_dict, prefix, local_state, extra_key):
    """The keys under `prefix` that name neither one of `module`'s entries nor one under a child module."""
    for key in state_dict:
        if key.startswith(prefix) and key != extra_key:
            head = key[len(prefix) :].split(".", 1)
            if (head[0] not in module._modules) if len(head) > 1 else (head[0] not in local_state):
                yield key
