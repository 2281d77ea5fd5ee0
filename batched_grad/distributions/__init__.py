"""batched_grad.distributions: torch.distributions' families, built from batched_grad ops so that log_prob,
entropy, rsample and kl_divergence differentiate (create_graph and is_grads_batched included) and run inside
vmap.vmap and batched_grad.func's transforms. Samples come from batched_grad's generator (bg.manual_seed): where the
parameters' values are known they are torch's draws for the same seed; while tracing, JAX's."""

from . import constraints, transforms
from .composite import Independent, LogNormal, MixtureSameFamily, TransformedDistribution
from .continuous import Exponential, ExponentialFamily, Gamma, Laplace, Normal, StudentT, Uniform
from .discrete import Bernoulli, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .multivariate import LowRankMultivariateNormal, MultivariateNormal
from .simplex import Beta, Dirichlet
from .transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    PowerTransform,
    SigmoidTransform,
    SoftplusTransform,
    TanhTransform,
    Transform,
    identity_transform,
)

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Categorical",
    "ComposeTransform",
    "Dirichlet",
    "Distribution",
    "ExpTransform",
    "Exponential",
    "ExponentialFamily",
    "Gamma",
    "Independent",
    "Laplace",
    "LogNormal",
    "LowRankMultivariateNormal",
    "MixtureSameFamily",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "Poisson",
    "PowerTransform",
    "SigmoidTransform",
    "SoftplusTransform",
    "StudentT",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "Uniform",
    "constraints",
    "identity_transform",
    "kl_divergence",
    "register_kl",
    "transforms",
]
