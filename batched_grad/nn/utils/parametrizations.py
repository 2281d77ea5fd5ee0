"""torch.nn.utils.parametrizations: weight and spectral normalization as parametrizations (parametrize.py), and
orthogonal (_orthogonal.py).

weight_norm keeps `parametrizations.<name>.original0` (g, the norms) and `original1` (v, the direction);
spectral_norm keeps the weight as `original` and the power iteration's vectors as the buffers `_u` and `_v` of
its parametrization, which one power-iteration step updates at each read in training mode."""

from ... import _ops, linalg
from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ..functional import normalize
from ..module import Module
from . import parametrize
from ._orthogonal import orthogonal

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def norm_except_dim(v, pow=2, dim=0):  # noqa: A002  (torch's name)
    """torch.norm_except_dim: the `pow`-norm of `v` over every dimension but `dim`, kept as size-1 dimensions
    (over all of `v`, a 0-d tensor, for dim=-1)."""
    if dim == -1:
        return linalg.vector_norm(v, pow)
    dim = dim % v.ndim
    others = tuple(d for d in range(v.ndim) if d != dim)
    return linalg.vector_norm(v, pow, dim=others, keepdim=True)


def weight_norm_of(v, g, dim):
    """torch._weight_norm: `v` rescaled so that its norm over every dimension but `dim` is `g`."""
    return v * (g / norm_except_dim(v, 2, dim))


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_norm_of(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrize `module.<name>` as g * v / ||v|| (norms over every dimension but `dim`; over all of it for
    dim=None), g and v trained in its place."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        """Steps of the power iteration for the largest singular vectors, written into the buffers in place."""
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(_ops.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(normalize(_ops.mv(weight_mat.H, self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = _ops.vdot(u, _ops.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def _is_transposed_convolution(module):
    from ..basic import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d

    return isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Reparametrize `module.<name>` as weight / sigma, sigma its largest singular value (as a matrix of `dim`,
    default 0, 1 for transposed convolutions, by the rest) estimated by power iteration from random vectors."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if _is_transposed_convolution(module) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
