"""batched_grad.fft: torch.fft's names."""

from ._ops import fft as _fft
from ._ops._out_rules import OUT_RULES as _OUT_RULES
from ._ops._public import functions_taking_part as _functions_taking_part
from ._ops._public import with_out as _with_out

globals().update(_fft.FUNCTIONS)

__all__ = sorted(_fft.FUNCTIONS)

globals().update(_with_out({name: globals()[name] for name in __all__}, _OUT_RULES["fft"], "torch.fft"))
_functions_taking_part(globals(), __all__, _OUT_RULES["fft"], "torch.fft")
