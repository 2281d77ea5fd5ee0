"""OptimizedModule: what compile(module) returns, as torch's: a Module holding the original as `_orig_mod` (so its
parameters and state-dict keys are "_orig_mod.<name>"), calling it through the compiled program, and reading any
other attribute from it."""

from .module import Module


class OptimizedModule(Module):
    """A module run through bg.compile; `_orig_mod` is the module compiled."""

    def __init__(self, mod, compiled_call):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_compiled_call", compiled_call)

    def forward(self, *args, **kwargs):
        return self._compiled_call(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            original = self.__dict__.get("_modules", {}).get("_orig_mod")
            if original is None:  # not made yet
                raise
            return getattr(original, name)
