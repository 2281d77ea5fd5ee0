"""batched_grad.linalg: torch.linalg's names."""

from ._ops import decompositions as _decompositions
from ._ops import products as _products
from ._ops._out_rules import OUT_RULES as _OUT_RULES
from ._ops._public import functions_taking_part as _functions_taking_part
from ._ops._public import with_out as _with_out
from ._ops.arrange import linalg_cross as cross
from ._ops.eig import eig, eigvals
from ._ops.linalg import LinAlgError, cholesky, det, eigh, inv, norm, qr, slogdet, solve, svd
from ._ops.reduction import matrix_norm, vector_norm

globals().update(_products.LINALG)
globals().update(_decompositions.LINALG)

__all__ = [
    "LinAlgError",
    "cholesky",
    "cross",
    "det",
    "eig",
    "eigh",
    "eigvals",
    "inv",
    "matrix_norm",
    "norm",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "vector_norm",
    *_products.LINALG,
    *_decompositions.LINALG,
]

globals().update(_with_out({name: globals()[name] for name in __all__}, _OUT_RULES["linalg"], "torch.linalg"))
_functions_taking_part(globals(), __all__, _OUT_RULES["linalg"], "torch.linalg")
