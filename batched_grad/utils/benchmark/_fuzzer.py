"""torch.utils.benchmark's fuzzer: random benchmark inputs. FuzzedParameter draws a number (log-uniform, uniform or
from given probabilities), ParameterAlias makes one parameter take another's value, FuzzedTensor builds a tensor
whose sizes, steps and layout come from the parameters, and Fuzzer.take(n) yields n seeded draws that meet the
constraints. The draws follow torch's: the same seed gives the same parameters, layouts and values."""

import functools
import itertools

import numpy as np

from ... import _factories
from ..._dtypes import bool as _bool
from ..._dtypes import float32
from ..._generator import manual_seed
from ..._info import finfo, iinfo

__all__ = ["Fuzzer", "FuzzedParameter", "ParameterAlias", "FuzzedTensor"]

_DISTRIBUTIONS = ("loguniform", "uniform")


class FuzzedParameter:
    """A named random number: `distribution` "loguniform" or "uniform" between minval and maxval (integers when
    both bounds are), or a dict {value: probability}; a `strict` parameter keeps its first value while a Fuzzer
    retries a draw that broke a constraint."""

    def __init__(self, name, minval=None, maxval=None, distribution=None, strict=False):
        self._name = name
        self._minval = minval
        self._maxval = maxval
        self._distribution = self._check_distribution(distribution)
        self.strict = strict

    @property
    def name(self):
        """The parameter's name."""
        return self._name

    def sample(self, state):
        """A value drawn with the NumPy RandomState `state`."""
        if isinstance(self._distribution, dict):
            index = state.choice(np.arange(len(self._distribution)), p=tuple(self._distribution.values()))
            return list(self._distribution)[index]
        if self._distribution == "loguniform":
            return self._loguniform(state)
        return self._uniform(state)

    def _check_distribution(self, distribution):
        if not isinstance(distribution, dict):
            if distribution not in _DISTRIBUTIONS:
                raise AssertionError(f"Unknown distribution: {distribution}")
            return distribution
        if any(p < 0 for p in distribution.values()):
            raise AssertionError("Probabilities cannot be negative")
        # torch 2.13's test, inverted as torch has it: a dict summing to 1 is refused (and one that does not
        # fails in NumPy's choice), so no custom distribution samples there, nor here
        if not abs(sum(distribution.values()) - 1) > 1e-5:
            raise AssertionError("Distribution is not normalized")
        for bound, value in (("minval", self._minval), ("maxval", self._maxval)):
            if value is not None:
                raise AssertionError(f"When passing a custom distribution, '{bound}' must be None")
        return distribution

    def _loguniform(self, state):
        low = np.log2(self._minval) if self._minval is not None else None
        high = np.log2(self._maxval) if self._maxval is not None else None
        value = int(2 ** state.uniform(low=low, high=high))
        if self._minval is not None and value < self._minval:
            return self._minval
        if self._maxval is not None and value > self._maxval:
            return self._maxval
        return value

    def _uniform(self, state):
        if isinstance(self._minval, int) and isinstance(self._maxval, int):
            return int(state.randint(low=self._minval, high=self._maxval + 1))
        return state.uniform(low=self._minval, high=self._maxval)


class ParameterAlias:
    """A parameter value that is another parameter's (`alias_to`, its name)."""

    def __init__(self, alias_to):
        self.alias_to = alias_to

    def __repr__(self):
        return f"ParameterAlias[alias_to: {self.alias_to}]"


def dtype_size(dtype):
    """Bytes per element of `dtype`."""
    if dtype == _bool:
        return 1
    if dtype.is_floating_point or dtype.is_complex:
        return finfo(dtype).bits // 8
    return iinfo(dtype).bits // 8


def prod(values, base=1):
    """The product of `values` as Python ints, times `base`."""
    return functools.reduce(lambda x, y: int(x) * int(y), values, base)


class FuzzedTensor:
    """A tensor built from a draw: `size` and `steps` (ints or parameter names; missing trailing entries are 1),
    dim_parameter (a parameter giving the number of dims; roll_parameter is in torch's signature, and torch does
    not use it either), a random memory order with probability
    1 - probability_contiguous, limits on elements and bytes that reject a draw, and tensor_constructor(size=,
    dtype=, **params) (rand for floats, randint(1, 127) for integers by default)."""

    def __init__(
        self,
        name,
        size,
        steps=None,
        probability_contiguous=0.5,
        min_elements=None,
        max_elements=None,
        max_allocation_bytes=None,
        dim_parameter=None,
        roll_parameter=None,
        dtype=float32,
        cuda=False,
        tensor_constructor=None,
    ):
        self._name = name
        self._size = size
        self._steps = steps
        self._probability_contiguous = probability_contiguous
        self._min_elements = min_elements
        self._max_elements = max_elements
        self._max_allocation_bytes = max_allocation_bytes
        self._dim_parameter = dim_parameter
        self._dtype = dtype
        self._cuda = cuda
        self._tensor_constructor = tensor_constructor

    @property
    def name(self):
        """The tensor's name."""
        return self._name

    @staticmethod
    def default_tensor_constructor(size, dtype, **kwargs):
        """rand of `size` for floating and complex dtypes, else randint(1, 127)."""
        if dtype.is_floating_point or dtype.is_complex:
            return _factories.rand(size=size, dtype=dtype, device="cpu")
        return _factories.randint(1, 127, size=size, dtype=dtype, device="cpu")

    def _make_tensor(self, params, state):
        size, steps, allocation_size = self._get_size_and_steps(params)
        constructor = self._tensor_constructor or self.default_tensor_constructor
        raw = constructor(size=allocation_size, dtype=self._dtype, **params)
        if self._cuda:
            raw = raw.cuda()
        dim = len(size)
        order = np.arange(dim)
        if state.rand() > self._probability_contiguous:
            while dim > 1 and np.all(order == np.arange(dim)):
                order = state.permutation(raw.dim())
            raw = raw.permute(tuple(order)).contiguous().permute(tuple(np.argsort(order)))
        tensor = raw[tuple(slice(0, n * step, step) for n, step in zip(size, steps))]
        properties = {
            "numel": int(tensor.numel()),
            "order": order,
            "steps": steps,
            "is_contiguous": tensor.is_contiguous(),
            "dtype": str(self._dtype),
        }
        return tensor, properties

    def _get_size_and_steps(self, params):
        dim = params[self._dim_parameter] if self._dim_parameter is not None else len(self._size)

        def resolve(values):
            values = tuple(params.get(v, v) for v in values)[:dim]
            return values + (1,) * (dim - len(values))

        size, steps = resolve(self._size), resolve(self._steps or ())
        return size, steps, tuple(n * step for n, step in zip(size, steps))

    def satisfies_constraints(self, params):
        """Whether the draw `params` gives this tensor an allowed number of elements and bytes."""
        size, _, allocation_size = self._get_size_and_steps(params)
        elements = prod(size)
        if elements < 0:
            raise AssertionError("Computed number of elements is negative")
        allocation_bytes = prod(allocation_size, base=dtype_size(self._dtype))

        def exceeds(left, right):
            return left is not None and right is not None and left > right

        return not (
            exceeds(elements, self._max_elements)
            or exceeds(self._min_elements, elements)
            or exceeds(allocation_bytes, self._max_allocation_bytes)
        )


class Fuzzer:
    """Seeded draws of `parameters` (FuzzedParameters, or lists of them) and the `tensors` built from them, retried
    (up to 1000 times) until every constraint(params) and every tensor's limits hold."""

    def __init__(self, parameters, tensors, constraints=None, seed=None):
        if seed is None:
            seed = int(np.random.RandomState().randint(0, 2**32 - 1, dtype=np.int64))
        self._seed = seed
        self._parameters = Fuzzer._unpack(parameters, FuzzedParameter)
        self._tensors = Fuzzer._unpack(tensors, FuzzedTensor)
        self._constraints = constraints or ()
        overlap = {p.name for p in self._parameters} & {t.name for t in self._tensors}
        if overlap:
            raise ValueError(f"Duplicate names in parameters and tensors: {overlap}")
        self._rejections = 0
        self._total_generated = 0

    @staticmethod
    def _unpack(values, cls):
        return tuple(itertools.chain.from_iterable([v] if isinstance(v, cls) else v for v in values))

    def take(self, n):
        """Yield n draws: ({name: tensor}, {name: the tensor's properties}, {name: parameter value})."""
        state = np.random.RandomState(self._seed)
        manual_seed(state.randint(low=0, high=2**63, dtype=np.int64))
        for _ in range(n):
            params = self._generate(state)
            tensors, properties = {}, {}
            for t in self._tensors:
                tensors[t.name], properties[t.name] = t._make_tensor(params, state)
            yield tensors, properties, params

    @property
    def rejection_rate(self):
        """The fraction of draws rejected by the constraints so far."""
        return self._rejections / self._total_generated if self._total_generated else 0.0

    def _generate(self, state):
        strict = {}
        for _ in range(1000):
            candidate = {}
            for p in self._parameters:
                if p.strict and p.name in strict:
                    candidate[p.name] = strict[p.name]
                    continue
                candidate[p.name] = p.sample(state)
                if p.strict:
                    strict[p.name] = candidate[p.name]
            candidate = self._resolve_aliases(candidate)
            self._total_generated += 1
            if all(f(candidate) for f in self._constraints) and all(
                t.satisfies_constraints(candidate) for t in self._tensors
            ):
                return candidate
            self._rejections += 1
        raise ValueError("Failed to generate a set of valid parameters.")

    @staticmethod
    def _resolve_aliases(params):
        params = dict(params)
        remaining = sum(isinstance(v, ParameterAlias) for v in params.values())
        while remaining:
            for name, value in params.items():
                if isinstance(value, ParameterAlias):
                    params[name] = params[value.alias_to]
            now = sum(isinstance(v, ParameterAlias) for v in params.values())
            if now == remaining:
                raise ValueError(f"ParameterAlias cycle detected\n{params}")
            remaining = now
        return params
