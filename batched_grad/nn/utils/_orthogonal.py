"""torch.nn.utils.parametrizations.orthogonal: a matrix (or batch) kept orthogonal or unitary, as the image of an
unconstrained one by the matrix exponential, the Cayley map or a product of Householder reflections; with
`use_trivialization` (the default) the result multiplies a `base` found by QR when the weight is assigned.

torch finds that base with geqrf (LAPACK's Householder QR) and fixes the signs by R's diagonal; the orthogonal factor
of a full-rank matrix with R's diagonal made positive is unique, so linalg.qr followed by the same sign fix gives it
here. What needs geqrf's raw Householder vectors (householder without trivialization) is refused by name."""

from enum import Enum, auto

from ... import _ops, linalg
from ..._factories import eye, randn, zeros_like
from ..._grad_mode import no_grad
from ..._info import finfo
from ..._tensor import Tensor
from ..module import Module
from . import parametrize

_NEEDS_GEQRF = (
    "orthogonal(orthogonal_map='householder', use_trivialization=False) keeps the Householder vectors of torch.geqrf "
    "(LAPACK's raw QR), which batched_grad does not provide; use use_trivialization=True or another orthogonal_map"
)


def _is_orthogonal(q):
    k = q.shape[-1]
    identity = eye(k, dtype=q.dtype, device=q.device)
    return _ops.allclose(q.mH @ q, identity, atol=10.0 * q.shape[-2] * finfo(q.dtype).eps)


def _make_orthogonal(a):
    """The Q of a = QR with R's diagonal made positive (torch's geqrf + householder_product + sign fix)."""
    q, r = linalg.qr(a)
    return q * r.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x):
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = x.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            x = x.tril()
            if n != k:
                x = _ops.cat([x, x.new_zeros(n, n - k).expand(*x.shape[:-2], -1, -1)], dim=-1)
            a = x - x.mH  # skew-Hermitian
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                q = _ops.matrix_exp(a)
            else:
                identity = eye(n, dtype=a.dtype, device=a.device)
                q = linalg.solve(identity - 0.5 * a, identity + 0.5 * a)
            if n != k:
                q = q[..., :k]
        else:
            a = x.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (a * a).sum(dim=-2))
            q = linalg.householder_product(a, tau)
            q = q * x.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if "base" in self._buffers:
            q = self.base @ q
        return q.mT if transposed else q

    def right_inverse(self, q):
        with no_grad():
            if q.shape != self.shape:
                raise ValueError(
                    f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of shape {q.shape}."
                )
            q_init = q
            n, k = q.shape[-2], q.shape[-1]
            if n < k:
                q = q.mT
                n, k = k, n
            if "base" not in self._buffers:
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the Cayley parametrizations when "
                        "use_trivialization=False."
                    )
                raise NotImplementedError(_NEEDS_GEQRF)
            if n == k:
                q = q.clone() if _is_orthogonal(q) else _make_orthogonal(q)
            else:  # completed to a square matrix by random columns, as torch's
                extra = randn(*(tuple(q.shape[:-2]) + (n, n - k)), dtype=q.dtype, device=q.device)
                q = _make_orthogonal(_ops.cat([q, extra], dim=-1))
            self.base = q
            neg_eye = zeros_like(q_init)
            neg_eye.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_eye


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Keep `module.<name>` (a matrix or batch of them) orthogonal (unitary if complex), by `orthogonal_map`:
    "matrix_exp" (default for square or complex), "cayley" or "householder" (default otherwise)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square_or_complex = weight.shape[-2] == weight.shape[-1] or weight.is_complex()
        orthogonal_map = "matrix_exp" if square_or_complex else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError(
            f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: {orthogonal_map}'
        )
    if orth_enum == _OrthMaps.householder and not use_trivialization and not weight.is_complex():
        raise NotImplementedError(_NEEDS_GEQRF)
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
