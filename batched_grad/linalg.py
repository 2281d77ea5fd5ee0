"""batched_grad.linalg: torch.linalg's names."""
from ._ops.linalg import cholesky, det, eigh, inv, qr, slogdet, solve, svd
from ._ops.reduction import linalg_norm as norm
from ._ops.reduction import matrix_norm, vector_norm

__all__ = ["cholesky", "det", "eigh", "inv", "norm", "matrix_norm", "qr", "slogdet", "solve", "svd", "vector_norm"]
