"""Curvature as batched linear operators (curvlinops 3's interface on batched_grad): the Hessian, the generalized
Gauss-Newton matrix, the empirical and Monte-Carlo Fisher, the Jacobian and its transpose, their CG inverses, and
estimators of their traces, diagonals and spectra, each product with K columns one batched call per data batch;
per-sample gradient norms without the per-sample gradients (ghost norms), a DP-SGD step on them, and the exact GGN
diagonal."""

from ._base import LinearOperator
from ._curvature import CurvatureLinearOperator
from ._diag_ggn import diag_ggn
from ._dp_sgd import DPStep, GhostClipping, dp_sgd_step
from ._eigen import top_eigenvalues
from ._estimators import hutchinson_diag, hutchinson_trace, hutchpp_trace, xdiag, xtrace
from ._inverse import CGInverseLinearOperator
from ._jacobian import JacobianLinearOperator, TransposedJacobianLinearOperator
from ._operators import EFLinearOperator, FisherMCLinearOperator, GGNLinearOperator, HessianLinearOperator
from ._persample import per_sample_grad_norms, per_sample_grads
from ._probes import draw_probes
from ._spectrum import (
    LanczosApproximateLogSpectrumCached,
    LanczosApproximateSpectrumCached,
    lanczos_approximate_log_spectrum,
    lanczos_approximate_spectrum,
)
