"""torch.utils.hooks: the handle that register_*_hook returns, whose `.remove()` unregisters the hook."""

from .._graph import RemovableHandle as _GraphHandle


class RemovableHandle(_GraphHandle):
    """A hook's handle: `.remove()` deletes it from `hooks_dict` and from each dict of `extra_dict` (where a hook
    registered with options, such as with_kwargs, is also noted); usable as a context manager."""

    def __init__(self, hooks_dict, *, extra_dict=None):
        super().__init__(hooks_dict)
        if extra_dict is None:
            extra_dict = ()
        elif isinstance(extra_dict, dict):
            extra_dict = (extra_dict,)
        self._extra = tuple(extra_dict)

    def remove(self):
        super().remove()
        for extra in self._extra:
            extra.pop(self.id, None)
