"""batched_grad.special: torch.special's names, most of them torch's own ops under another name."""

from . import _ops
from ._ops import scipy_special as _scipy_special
from ._ops._out_rules import OUT_RULES as _OUT_RULES
from ._ops._public import functions_taking_part as _functions_taking_part
from ._ops._public import with_out as _with_out

globals().update(_scipy_special.FUNCTIONS)

# torch.special's name: the op's torch.<name>
_ALIASES = {
    **{
        name: name
        for name in """erf erfc erfinv exp2 expm1 log1p i0 sinc digamma logit xlogy polygamma logsumexp softmax
        log_softmax""".split()
    },
    "psi": "digamma",
    "gammaln": "lgamma",
    "expit": "sigmoid",
    "multigammaln": "mvlgamma",
    "gammainc": "igamma",
    "gammaincc": "igammac",
}
globals().update({name: getattr(_ops, op) for name, op in _ALIASES.items()})


def round(input, *, decimals=0):  # noqa: A001  (torch's name)
    """Round half to even, to `decimals` decimal places (torch.special.round always passes them)."""
    return _ops.round(input, decimals=decimals)


__all__ = sorted([*_scipy_special.FUNCTIONS, *_ALIASES, "round"])

globals().update(_with_out({name: globals()[name] for name in __all__}, _OUT_RULES["special"], "torch.special"))
_functions_taking_part(globals(), __all__, _OUT_RULES["special"], "torch.special")
