"""linalg.eig and linalg.eigvals: the eigendecomposition of a general (not Hermitian) square matrix, complex, with
torch's derivatives (JAX differentiates eigenvalues only)."""

import jax
import jax.numpy as jnp

from .._autocast import autocast_policy
from ._core import SAVES_RESULT, Op, apply
from .linalg import _matrix
from .return_types import return_type

eig_result = return_type("linalg_eig", ["eigenvalues", "eigenvectors"])


@jax.custom_jvp
def _eig(a):
    return tuple(jnp.linalg.eig(a))


@_eig.defjvp
def _eig_jvp(primals, tangents):
    # torch's forward derivative (linalg_eig_jvp): with dP = V^-1 dA V and E_ij = L_j - L_i, dL = diag(dP) and
    # dV = V X - V diag(Re(diag(V^H V X))), X = dP / E off the diagonal and 0 on it: the eigenvectors keep unit norm,
    # and their phase is fixed by X's zero diagonal. Linear in dA, so JAX transposes it into the backward; the rule
    # calls _eig itself, so it differentiates again for higher orders.
    (a,), (da,) = primals, tangents
    w, v = _eig(a)
    dp = jnp.linalg.solve(v, da.astype(v.dtype) @ v)
    eye = jnp.eye(w.shape[-1], dtype=bool)
    gaps = w[..., None, :] - w[..., :, None]
    x = jnp.where(eye, 0, dp / jnp.where(eye, 1, gaps))
    vx = v @ x
    dv = vx - v * jnp.real(jnp.sum(jnp.conj(v) * vx, axis=-2, keepdims=True))
    return (w, v), (jnp.diagonal(dp, axis1=-2, axis2=-1), dv)


_EIG = Op("linalg_eig", _eig, multi=True, torch_saves=SAVES_RESULT)
_EIGVALS = Op("linalg_eigvals", lambda a: _eig(a)[0], backward_name="LinalgEigBackward0", torch_saves=SAVES_RESULT)


def _check(name, A):
    if A.ndim >= 2 and not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError(f"Unknown Complex ScalarType for {A.dtype.type_name}")
    _matrix(name, A)


@autocast_policy("fp32")
def eig(A):
    """(eigenvalues, eigenvectors) of a square matrix (or of each in a batch), complex: A @ V = V @ diag(L), each
    eigenvector of unit norm. Its backward is torch's; torch also checks that a loss does not depend on the
    eigenvectors' phases (each is defined up to a factor e^(i phi)), which this one does not."""
    _check("eig", A)
    return eig_result(*apply(_EIG, [A]))


@autocast_policy("fp32")
def eigvals(A):
    """The eigenvalues of a square matrix (or of each in a batch), complex (eig(A).eigenvalues)."""
    _check("eigvals", A)
    return apply(_EIGVALS, [A])
