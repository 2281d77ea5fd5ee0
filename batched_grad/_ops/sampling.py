"""Random sampling beyond rand/randn/randint, drawn from batched_grad's generators: normal (differentiable in its
mean and std), bernoulli, multinomial, poisson, randperm, and the in-place fills uniform_, normal_, bernoulli_,
exponential_, random_, cauchy_, log_normal_ and geometric_ (their derivative is 0, as torch's)."""

import math

import numpy as np

from .. import _dtypes
from .._binomial_draws import binomial as binomial_draws
from .._dtypes import not_implemented
from .._layout_types import takes_layout
from .._meta import is_meta, meta_value, names_meta
from .._tensor import Tensor
from .._vmap_levels import in_vmap_randomness
from ._core import Op, apply
from ._derivatives import without_derivative
from ._forward_refused import unsupported_forward
from .indexing import _concrete
from .random_draws import (
    check_inplace,
    check_inplace_parameters,
    check_parameters,
    fill_order,
    sample,
    sample_given,
    sample_like,
)

# an in-place fill replaces the values: its derivative for the old ones is 0
_FILL = {
    name: Op(
        f"{name}_",
        lambda a, sample: sample.astype(a.dtype),
        linear=True,
        backward_name="".join(p.capitalize() for p in name.split("_")) + "Backward0",
    )
    for name in ("uniform", "normal", "exponential", "random", "cauchy", "log_normal", "geometric")
}
# bernoulli_'s node is named after its overload: a tensor of probabilities, or a number
_FILL.update(
    {
        f"bernoulli{k}": Op(
            "bernoulli_", lambda a, sample: sample.astype(a.dtype), f"BernoulliBackward{k}", linear=True
        )
        for k in (1, 2)
    }
)


def _fill(self, name, generator, draw, strided_draw=None):
    """Fill `self` in place with what `draw(bits, size)` draws (random_draws.sample_like: through its storage;
    `strided_draw` where that is not row-major). A meta tensor has no values to fill: nothing is drawn, as in
    torch."""
    op = _FILL[name]
    if is_meta(self):
        return _assign_draw(self, op, self)
    return _assign_draw(self, op, sample_like(generator, op.name, self, draw, strided_draw, in_place=True))


def _assign_draw(self, op, values):
    check_inplace(self, values)
    return self._assign(apply(op, [self, values]), op.name)


def _real_of(d):
    """The NumPy dtype torch's kernels compute a floating dtype's draws in: float64, or float32 for the others."""
    return np.float64 if d.np in (np.float64, np.complex128) else np.float32


def _real(self):
    return _real_of(self.dtype)


def _uniform_for(p):
    """torch's uniform against a tensor of probabilities `p`: double for float64 probabilities, else float."""
    real = np.float64 if p.dtype is _dtypes.float64 else np.float32
    return lambda bits, size: bits.unit(math.prod(size), real == np.float64).reshape(size)


def _float_only(self, kernel):
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise not_implemented(kernel, self.dtype)


def uniform_(self, from_=0.0, to=1.0, *, generator=None):
    """Fill with uniform samples in [from_, to), in place."""
    _float_only(self, "check_uniform_bounds")
    return _fill(self, "uniform", generator, lambda bits, size: bits.uniform(size, _real(self), from_, to))


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with normal samples of the given mean and std, in place."""
    _float_only(self, "normal_kernel_cpu")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return _fill(
        self,
        "normal",
        generator,
        lambda bits, size: bits.normal(size, _real(self), mean, std),
        lambda bits, size: bits.normal(size, _real(self), mean, std, contiguous=False),
    )


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 1 (probability p, a number or a tensor) or 0, in place."""
    if not isinstance(p, Tensor):
        return _fill(self, "bernoulli2", generator, lambda bits, size: bits.bernoulli(size, p))
    if is_meta(self):
        return _assign_draw(self, _FILL["bernoulli1"], self)
    check_inplace_parameters(self, "inplace bernoulli", p)
    uniform = sample_like(generator, "bernoulli_", self, _uniform_for(p), in_place=True)
    return _assign_draw(self, _FILL["bernoulli1"], uniform < p.detach())


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with exponential samples of rate lambd, in place."""
    _float_only(self, "exponential_cpu")
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return _fill(self, "exponential", generator, lambda bits, size: bits.exponential(size, _real(self), lambd))


def random_(self, from_=0, to=None, *, generator=None):
    """Fill with integers drawn uniformly from [from_, to) (to defaults to the dtype's range), in place."""
    if to is None:
        from_, to = (0, from_) if from_ else (0, None)
    if to is None:  # torch's full range: a word modulo 2**digits + 1 for floats, the maximum + 1 for integers
        double_words = self.dtype in (_dtypes.float64, _dtypes.int64)
        span = (
            2 ** (np.finfo(self.dtype.np).nmant + 1) + 1
            if self.dtype.is_floating_point
            else (2 if self.dtype is _dtypes.bool else int(np.iinfo(self.dtype.np).max) + 1)
        )
        return _fill(self, "random", generator, lambda bits, size: bits.full_range(size, np.int64, span, double_words))
    if from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    return _fill(self, "random", generator, lambda bits, size: bits.integers(size, from_, to, np.int64))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy samples, in place."""
    _float_only(self, "cauchy_cpu")
    return _fill(self, "cauchy", generator, lambda bits, size: bits.cauchy(size, _real(self), median, sigma))


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with log-normal samples (exp of a normal of the given mean and std), in place."""
    _float_only(self, "log_normal_cpu")
    return _fill(self, "log_normal", generator, lambda bits, size: bits.log_normal(size, _real(self), mean, std))


def geometric_(self, p, *, generator=None):
    """Fill with geometric samples (the number of Bernoulli(p) trials to the first success), in place."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    return _fill(self, "geometric", generator, lambda bits, size: bits.geometric(size, _real(self), p))


# ---- out-of-place samplers --------------------------------------------------------------------------------------
_NORMAL = Op("normal", lambda mean, std, eps: (mean + std * eps).astype(eps.dtype))  # eps: the result dtype


@takes_layout
def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, requires_grad=False, device=None):
    """Samples mean + std * N(0, 1), with mean and std numbers or tensors (broadcast); differentiable in both. With
    numbers, a factory of `size` (on `device`: the meta device draws nothing)."""
    tensors = [x for x in (mean, std) if isinstance(x, Tensor)]
    if not tensors:
        if size is None:
            raise TypeError("normal() missing required argument 'size' for number mean and std")
        d = _dtypes.to_dtype(dtype) if dtype is not None else _dtypes.get_default_dtype()
        if names_meta(device):
            out = Tensor._wrap(meta_value(tuple(size), d.np))
        else:
            out = sample(generator, "normal", size, lambda bits, s: bits.normal(s, _real_of(d), mean, std).astype(d.np))
        return out._requires_grad_() if requires_grad else out
    if device is not None:
        raise TypeError(
            "normal() received an invalid combination of arguments: device= is taken only with float mean and std"
        )
    check_parameters(mean, std)
    values = _concrete(std) if isinstance(std, Tensor) else None
    if values is not None and (values < 0).any():
        raise RuntimeError("normal expects all elements of std >= 0.0")
    if isinstance(std, (int, float)) and std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    d = mean.dtype if isinstance(mean, Tensor) else std.dtype  # torch: the dtype of mean, if a Tensor
    shape = np.broadcast_shapes(*[tuple(t.shape) for t in tensors])
    eps = sample(generator, "normal", shape, lambda bits, s: bits.normal(s, _real_of(d)).astype(d.np))
    mean_ = mean.to(d) if isinstance(mean, Tensor) else mean
    std_ = std.to(d) if isinstance(std, Tensor) else std
    return apply(_NORMAL, [mean_, std_, eps])


# a sample whose distribution `a` parametrizes, with torch's zero derivative for `a`
_ZEROED = Op("bernoulli", lambda a, sample: sample.astype(a.dtype), linear=True)
_POISSON = Op("poisson", lambda a, sample: sample.astype(a.dtype), linear=True)
_BERNOULLI_P = Op(
    "bernoulli",
    without_derivative(
        lambda a, sample: sample.astype(a.dtype),
        lambda: RuntimeError("derivative for aten::bernoulli is not implemented"),
    ),
    "torch::autograd::NotImplemented",
    forward_error=unsupported_forward("bernoulli"),
)


def bernoulli(input, p=None, *, generator=None):
    """1 with probability input (or p, a number), else 0, elementwise (zero derivative)."""
    if p is None:
        check_parameters(input)
        uniform = sample(generator, "bernoulli", input.shape, _uniform_for(input))
        return apply(_ZEROED, [input, uniform < input.detach()])
    drawn = sample(generator, "bernoulli", input.shape, lambda bits, size: bits.bernoulli(size, p))
    return apply(_BERNOULLI_P, [input, drawn])


def _with_replacement(stream, rows, num_samples):
    """torch's CPU sampling with replacement: each row's running sums (in the row's dtype) divided by the total,
    then per sample a double uniform placed by binary search (the first sum not below it)."""
    picks = []
    for row in rows:
        cumulative = np.cumsum(row, dtype=row.dtype)
        cumulative = cumulative / cumulative[-1]
        picks.append(np.searchsorted(cumulative, stream.unit(num_samples, True), side="left"))
    return np.minimum(np.asarray(picks), rows.shape[1] - 1)


def _by_exponential_race(stream, probabilities, num_samples, order):
    """torch's sampling without replacement (and of one sample): q ~ Exp(1) for every entry (drawn through the
    storage in `order`, random_draws.fill_order), then the indices of the num_samples largest p / q in each row
    (argmax for one)."""
    shape = probabilities.shape
    if order is None:
        q = stream.exponential(shape, probabilities.dtype, 1.0)
    else:
        q = np.transpose(stream.exponential([shape[d] for d in order], probabilities.dtype, 1.0), np.argsort(order))
    ratios = probabilities / q
    if num_samples == 1:
        return np.argmax(ratios, axis=-1)[..., None]
    return np.argsort(-ratios, axis=-1, kind="stable")[..., :num_samples]


def _check_distributions(probabilities, num_samples, replacement):
    """torch's checks of multinomial's probabilities (a NumPy array of rows on its last axis)."""
    if (probabilities < 0).any() or not np.isfinite(probabilities).all():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if not replacement and num_samples > probabilities.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if (probabilities.sum(-1) == 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Indices drawn from each row of (unnormalized) probabilities `input`, with or without replacement. Under
    vmap.vmap(randomness="different"), one draw for the rows of every row, as torch's batching rule."""
    check_parameters(input)
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    shape = tuple(input.shape[:-1]) + (num_samples,)
    real = input.dtype.np if input.dtype.np in (np.float32, np.float64) else np.float32
    # torch's batching rule draws a batch of matrices as one matrix of their rows, a row-major copy
    order = fill_order(input) if input.ndim == 1 or in_vmap_randomness() != "different" else None

    def draw(stream, size, probabilities):
        _check_distributions(np.asarray(probabilities, np.float64), num_samples, replacement)
        given = np.asarray(probabilities, real)
        if replacement and num_samples > 1:
            picks = _with_replacement(stream, given.reshape(-1, given.shape[-1]), num_samples)
        else:
            picks = _by_exponential_race(stream, given, num_samples, order)
        return np.asarray(picks, np.int64).reshape(size)

    return sample_given(generator, "multinomial", shape, draw, input.detach())


def poisson(input, generator=None):
    """Poisson samples with rates `input` (zero derivative)."""
    check_parameters(input)
    counts = sample_given(generator, "poisson", input.shape, lambda bits, size, rates: bits.poisson(rates), input)
    return apply(_POISSON, [input, counts])


_BINOMIAL = Op(
    "binomial",
    without_derivative(
        lambda count, prob, sample: sample.astype(count.dtype),
        lambda: RuntimeError("derivative for aten::binomial is not implemented"),
    ),
    "torch::autograd::NotImplemented",
    forward_error=unsupported_forward("binomial"),
)


def binomial(count, prob, generator=None):
    """Binomial(count, prob) draws, elementwise, by torch's CPU sampler on the generator's stream (no derivative)."""
    for name, t in (("count", count), ("prob", prob)):
        if not t.dtype.is_floating_point:
            raise ValueError(f"binomial only supports floating-point dtypes for {name}, got: {t.dtype.type_name}")
    check_parameters(count, prob)
    shape = np.broadcast_shapes(tuple(count.shape), tuple(prob.shape))

    def draw(bits, size, counts, probs):  # each of (rows..., *its shape), broadcast at its own dims
        n = len(size) - len(shape)
        counts, probs = (
            np.broadcast_to(v.reshape(v.shape[:n] + (1,) * (len(size) - v.ndim) + v.shape[n:]), size)
            for v in (counts, probs)
        )
        return binomial_draws(bits, counts, probs, count.dtype.np)

    drawn = sample_given(generator, "binomial", shape, draw, count, prob)
    return apply(_BINOMIAL, [count, prob, drawn])


@takes_layout
def randperm(n, *, generator=None, dtype=None, requires_grad=False, device=None):
    """A random permutation of 0..n-1 (int64 unless `dtype`)."""
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    d = _dtypes.to_dtype(dtype) if dtype is not None else _dtypes.int64
    out = sample(
        generator,
        "randperm",
        (n,),
        lambda bits, size: np.stack([bits.randperm(n) for _ in range(math.prod(size[:-1]))]).reshape(size).astype(d.np),
    )
    return out._requires_grad_() if requires_grad else out


METHODS = {
    f.__name__: f
    for f in (
        uniform_,
        normal_,
        bernoulli_,
        exponential_,
        random_,
        cauchy_,
        log_normal_,
        geometric_,
        bernoulli,
        multinomial,
    )
}
FUNCTIONS = {f.__name__: f for f in (normal, bernoulli, binomial, multinomial, poisson, randperm)}
