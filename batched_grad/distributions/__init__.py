"""batched_grad.distributions: torch.distributions' families, built from batched_grad ops so that log_prob,
entropy, rsample and kl_divergence differentiate (create_graph and is_grads_batched included) and run inside
vmap.vmap and batched_grad.func's transforms. Samples come from batched_grad's generator (bg.manual_seed): where the
parameters' values are known they are torch's draws for the same seed; while tracing, JAX's."""

from . import constraint_registry, constraints, transforms
from .composite import Independent, LogNormal, MixtureSameFamily, TransformedDistribution
from .constraint_registry import biject_to, transform_to
from .continuous import Exponential, ExponentialFamily, Gamma, Laplace, Normal, StudentT, Uniform
from .counts import Binomial, Geometric, Multinomial, NegativeBinomial
from .discrete import Bernoulli, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .location_scale import Cauchy, Chi2, Gumbel, HalfCauchy, HalfNormal
from .matrix_families import LKJCholesky, Wishart
from .multivariate import LowRankMultivariateNormal, MultivariateNormal
from .relaxed import (
    ContinuousBernoulli,
    OneHotCategoricalStraightThrough,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
)
from .shape_families import FisherSnedecor, GeneralizedPareto, InverseGamma, Kumaraswamy, Pareto, Weibull
from .simplex import Beta, Dirichlet, LogisticNormal
from .transforms import (
    AbsTransform,
    AffineTransform,
    CatTransform,
    ComposeTransform,
    CorrCholeskyTransform,
    CumulativeDistributionTransform,
    ExpTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    PowerTransform,
    ReshapeTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StackTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    identity_transform,
)
from .von_mises import VonMises

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Binomial",
    "CatTransform",
    "Categorical",
    "Cauchy",
    "Chi2",
    "ComposeTransform",
    "ContinuousBernoulli",
    "CorrCholeskyTransform",
    "CumulativeDistributionTransform",
    "Dirichlet",
    "Distribution",
    "ExpTransform",
    "Exponential",
    "ExponentialFamily",
    "FisherSnedecor",
    "Gamma",
    "GeneralizedPareto",
    "Geometric",
    "Gumbel",
    "HalfCauchy",
    "HalfNormal",
    "Independent",
    "IndependentTransform",
    "InverseGamma",
    "Kumaraswamy",
    "LKJCholesky",
    "Laplace",
    "LogNormal",
    "LogisticNormal",
    "LowRankMultivariateNormal",
    "LowerCholeskyTransform",
    "MixtureSameFamily",
    "Multinomial",
    "MultivariateNormal",
    "NegativeBinomial",
    "Normal",
    "OneHotCategorical",
    "OneHotCategoricalStraightThrough",
    "Pareto",
    "Poisson",
    "PositiveDefiniteTransform",
    "PowerTransform",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
    "ReshapeTransform",
    "SigmoidTransform",
    "SoftmaxTransform",
    "SoftplusTransform",
    "StackTransform",
    "StickBreakingTransform",
    "StudentT",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "Uniform",
    "VonMises",
    "Weibull",
    "Wishart",
    "biject_to",
    "constraint_registry",
    "constraints",
    "identity_transform",
    "kl_divergence",
    "register_kl",
    "transform_to",
    "transforms",
]

from ._torch_files import file_modules  # noqa: E402  (torch.distributions' file layout, over the classes above)

globals().update(file_modules(__name__, globals()))
