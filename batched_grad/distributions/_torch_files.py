"""torch.distributions' file layout: `batched_grad.distributions.<file>.<Class>` names the class torch keeps in
torch/distributions/<file>.py (`distributions.normal.Normal`, `distributions.multivariate_normal.MultivariateNormal`,
...), for programs that spell the path out. The families live where batched_grad defines them; files batched_grad
already has under torch's name (constraints, kl, transforms, distribution, utils, ...) are those modules themselves."""

from .._file_layout import register_file_module

# torch's file -> the classes it defines that batched_grad has
TORCH_FILES = {
    "bernoulli": "Bernoulli",
    "beta": "Beta",
    "binomial": "Binomial",
    "categorical": "Categorical",
    "cauchy": "Cauchy",
    "chi2": "Chi2",
    "continuous_bernoulli": "ContinuousBernoulli",
    "dirichlet": "Dirichlet",
    "exp_family": "ExponentialFamily",
    "exponential": "Exponential",
    "fishersnedecor": "FisherSnedecor",
    "gamma": "Gamma",
    "generalized_pareto": "GeneralizedPareto",
    "geometric": "Geometric",
    "gumbel": "Gumbel",
    "half_cauchy": "HalfCauchy",
    "half_normal": "HalfNormal",
    "independent": "Independent",
    "inverse_gamma": "InverseGamma",
    "kumaraswamy": "Kumaraswamy",
    "laplace": "Laplace",
    "lkj_cholesky": "LKJCholesky",
    "log_normal": "LogNormal",
    "logistic_normal": "LogisticNormal",
    "lowrank_multivariate_normal": "LowRankMultivariateNormal",
    "mixture_same_family": "MixtureSameFamily",
    "multinomial": "Multinomial",
    "multivariate_normal": "MultivariateNormal",
    "negative_binomial": "NegativeBinomial",
    "normal": "Normal",
    "one_hot_categorical": "OneHotCategorical OneHotCategoricalStraightThrough",
    "pareto": "Pareto",
    "poisson": "Poisson",
    "relaxed_bernoulli": "RelaxedBernoulli",
    "relaxed_categorical": "RelaxedOneHotCategorical",
    "studentT": "StudentT",
    "transformed_distribution": "TransformedDistribution",
    "uniform": "Uniform",
    "weibull": "Weibull",
    "wishart": "Wishart",
}


def file_modules(package, namespace):
    """{file: module} for TORCH_FILES, each naming the classes found in `namespace` (the package's globals)."""
    return {
        file: register_file_module(
            package,
            file,
            {name: namespace[name] for name in names.split()},
            f"torch.distributions.{file}'s classes, as batched_grad has them.",
        )
        for file, names in TORCH_FILES.items()
    }
