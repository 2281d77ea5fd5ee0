"""Reductions and scans against torch 2.13: values, dtypes, dim/keepdim variants, first and second derivatives.

Tables hold `fn(m, *inputs)` written once against a module `m`, run with m=batched_grad and m=torch."""

import math

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, check_both, raises_like, rand, to_torch

SHAPE = (2, 3, 3)  # the last two dims are equal so that a transposed view reuses the same kernels


def leaf(low=-2.0, high=2.0, seed=0, shape=SHAPE):
    return rand(*shape, low=low, high=high, seed=seed)


# ---- reductions over dim variants -------------------------------------------------------------------------
DIMS = {
    "all": {},
    "int": {"dim": 1},
    "neg-keepdim": {"dim": -1, "keepdim": True},
    "tuple": {"dim": (0, 2)},
    "neg-tuple-keepdim": {"dim": (-1, 0), "keepdim": True},
    "empty-list": {"dim": []},
}
REDUCTIONS = {  # name: dim variants
    "sum": ["all", "int", "neg-keepdim", "tuple", "empty-list"],
    "mean": ["all", "int", "neg-tuple-keepdim"],
    "amax": ["all", "int", "neg-tuple-keepdim"],
    "amin": ["all", "neg-keepdim", "tuple"],
    "var": ["all", "int", "neg-tuple-keepdim"],
    "std": ["all", "neg-keepdim", "tuple"],
    "norm": ["all", "int", "neg-tuple-keepdim"],
    "logsumexp": ["int", "neg-keepdim", "tuple"],
    "prod": ["all", "int", "neg-keepdim"],
}
CASES = [(name, variant) for name, variants in REDUCTIONS.items() for variant in variants]


@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_reduction(name, variant):
    kw = DIMS[variant]
    check_both(lambda m, x: getattr(m, name)(x, **kw), [leaf()])
    if variant in ("int", "neg-keepdim"):  # the method form, on a transposed view of the leaf
        check_both(lambda m, x: getattr(x.mT, name)(**kw), [leaf()], gradgrad=False)


EXTREMES = {  # id: fn(m, x) for max/min in all their forms, and argmax/argmin
    "max": lambda m, x: m.max(x),
    "min": lambda m, x: m.min(x),
    "max-dim": lambda m, x: m.max(x, 1),
    "min-dim-keepdim": lambda m, x: m.min(x, dim=-1, keepdim=True),
    "max-method-view": lambda m, x: x.mT.max(dim=2),
    "min-method": lambda m, x: x.min(0),
    "max-other": lambda m, x: m.max(x, x.mT),
    "min-other-broadcast": lambda m, x: m.min(x, x[0, 0]),
    "max-fields": lambda m, x: m.max(x, 1).values * 2 + m.max(x, 1).indices,
    "argmax": lambda m, x: m.argmax(x),
    "argmin-dim": lambda m, x: m.argmin(x, 1),
    "argmax-keepdim": lambda m, x: m.argmax(x, dim=-1, keepdim=True),
    "argmin-nodim-keepdim": lambda m, x: m.argmin(x, keepdim=True),
    "argmax-method-view": lambda m, x: x.mT.argmax(1),
}


@pytest.mark.parametrize("name", EXTREMES)
def test_max_min_arg(name):
    check_both(EXTREMES[name], [leaf()])


VAR_FORMS = {  # id: fn(m, x)
    "correction0": lambda m, x: m.var(x, 1, correction=0),
    "correction2": lambda m, x: m.std(x, (0, 2), correction=2),
    "unbiased-false": lambda m, x: m.var(x, 1, False),
    "positional-bool": lambda m, x: m.std(x, False),
    "unbiased-keepdim": lambda m, x: m.var(x, dim=-1, unbiased=True, keepdim=True),
    "method": lambda m, x: x.std(dim=1, correction=0),
}


@pytest.mark.parametrize("name", VAR_FORMS)
def test_var_std_forms(name):
    check_both(VAR_FORMS[name], [leaf()])


def test_var_correction_above_count_is_inf_with_warning():
    x = leaf()
    with pytest.warns(UserWarning, match="degrees of freedom"):
        expected = torch.var(to_torch(x), 0, correction=3)
    with pytest.warns(UserWarning, match="degrees of freedom"):
        assert_same(bg.var(x, 0, correction=3), expected)


NORMS = {  # id: fn(m, x)
    "fro": lambda m, x: m.norm(x, "fro"),
    "fro-dim": lambda m, x: m.norm(x, "fro", (1, 2)),
    "p1": lambda m, x: m.norm(x, 1, 1),
    "p3": lambda m, x: m.norm(x, 3, -1, True),
    "p1.5": lambda m, x: m.norm(x, 1.5),
    "inf": lambda m, x: m.norm(x, math.inf, (0, 1)),
    "-inf": lambda m, x: m.norm(x, -math.inf, 2),
    "p0": lambda m, x: m.norm(x, 0, 1),
    "method": lambda m, x: x.norm(dim=0),
    "method-p": lambda m, x: x.mT.norm(1, 2),
    "nuc": lambda m, x: m.norm(x[0], "nuc"),
    "linalg-norm": lambda m, x: m.linalg.norm(x, dim=(1, 2)),
    "linalg-vector-norm": lambda m, x: m.linalg.vector_norm(x, 3, dim=1),
}


@pytest.mark.parametrize("name", NORMS)
def test_norms(name):
    check_both(NORMS[name], [leaf()])


SCANS = {  # id: fn(m, x)
    "cumsum": lambda m, x: m.cumsum(x, 1),
    "cumsum-neg": lambda m, x: m.cumsum(x, -1),
    "cumprod": lambda m, x: m.cumprod(x, 1),
    "cumprod-neg": lambda m, x: m.cumprod(x, dim=-1),
    "cumsum-method-view": lambda m, x: x.mT.cumsum(2),
    "cumprod-method": lambda m, x: x.cumprod(0),
}


@pytest.mark.parametrize("name", SCANS)
def test_scans(name):
    check_both(SCANS[name], [leaf()])


LOGICAL = {  # id: fn(m, x) on a float leaf; results are bool (or uint8 for uint8 inputs, as torch)
    "all": lambda m, x: m.all(x > -1.5),
    "any-dim": lambda m, x: m.any(x > 1.5, 1),
    "all-keepdim": lambda m, x: m.all(x > -1.5, dim=-1, keepdim=True),
    "any-tuple": lambda m, x: (x > 1).any((0, 2)),
    "all-float": lambda m, x: m.all(x, 1),
    "any-float": lambda m, x: m.any(x * 0),
    "all-uint8": lambda m, x: m.all((x > 0).to(m.uint8), 2),
    "any-int-method": lambda m, x: (x > 0).long().any(),
}


@pytest.mark.parametrize("name", LOGICAL)
def test_all_any(name):
    check_both(LOGICAL[name], [leaf()])


def test_zero_dim_inputs_and_empty_dim_list():
    s = rand(low=0.5, high=2.0, seed=3)
    for fn in (
        lambda m, s: m.sum(s, 0),
        lambda m, s: m.cumsum(s, 0) * m.cumprod(s, -1),
        lambda m, s: m.max(s, 0),
        lambda m, s: m.min(s, -1, True),
        lambda m, s: m.logsumexp(s, 0),
        lambda m, s: m.argmax(s, 0),
        lambda m, s: m.amax(s) + m.mean(s, dim=[]) + m.prod(s),
    ):
        check_both(fn, [s])


def test_batched_backward_of_reductions():
    check_both(lambda m, x: m.max(x, 1).values * m.logsumexp(x, (0, 2)), [leaf()], batched=True)


# ---- derivative conventions at ties and zeros ---------------------------------------------------------------
TIES = np.array(
    [[[1.0, 3.0, 3.0], [2.0, 2.0, -1.0], [0.0, 3.0, -1.0]], [[3.0, 1.0, 3.0], [-1.0, -1.0, -1.0], [0.5, 0.0, 0.5]]]
)
ZEROS = np.array(
    [[[0.0, 2.0, 3.0], [0.0, 0.0, 2.0], [1.0, -2.0, 0.5]], [[0.0, 0.0, 0.0], [1.5, 0.0, -1.0], [2.0, 1.0, -0.5]]]
)
KINKS = {  # id: (fn(m, x), input values)
    "amax-ties": (lambda m, x: m.amax(x, 1), TIES),
    "amax-ties-all": (lambda m, x: m.amax(x), TIES),
    "amin-ties-tuple": (lambda m, x: m.amin(x, (0, 2)), TIES),
    "max-ties-all": (lambda m, x: m.max(x), TIES),
    "min-ties-all": (lambda m, x: m.min(x), TIES),
    "max-ties-dim": (lambda m, x: m.max(x, 1), TIES),
    "min-ties-dim": (lambda m, x: m.min(x, 0), TIES),
    "argmax-ties": (lambda m, x: m.argmax(x, 2, True), TIES),
    "maximum-ties": (lambda m, x: m.maximum(x, x.mT), TIES),
    "norm-inf-ties": (lambda m, x: m.norm(x, math.inf, (0, 1)), TIES),
    "norm1-at-0": (lambda m, x: m.norm(x, 1, 1), ZEROS),
    "norm3-at-0": (lambda m, x: m.norm(x, 3, -1, True), ZEROS),
    "norm-inf-at-0": (lambda m, x: m.norm(x, math.inf, 2), ZEROS),
    "norm-neg-inf-at-0": (lambda m, x: m.norm(x, -math.inf, 2), ZEROS),
    "prod-zeros-dim": (lambda m, x: m.prod(x, 1), ZEROS),
    "prod-zeros-keepdim": (lambda m, x: m.prod(x, -1, True), ZEROS),
    "cumprod-zeros": (lambda m, x: m.cumprod(x, 2), ZEROS),
    "std-of-constant-rows": (lambda m, x: m.std(x * (x > 0.4), 2), ZEROS),
    "norm1-at-nan": (lambda m, x: m.norm(m.where(x == 3, x * math.nan, x), 1, 2), TIES),
    "max-min-all-at-nan": (lambda m, x: m.max(x) + m.min(x * x.isnan()), np.where(TIES == 3, math.nan, TIES)),
}


@pytest.mark.parametrize("name", KINKS)
def test_kinks(name):
    fn, values = KINKS[name]
    check_both(fn, [bg.tensor(values, dtype=bg.float64, requires_grad=True)])


def test_norm2_at_0():
    # torch's gradient of the 2-norm at 0 is 0; its double backward there is nan (ours is finite), so second
    # derivatives are compared where the norm is not 0 (test_norms)
    x = bg.tensor(ZEROS, dtype=bg.float64, requires_grad=True)
    for fn in (lambda m, x: x.norm(dim=0), lambda m, x: m.norm(x * 0), lambda m, x: m.linalg.norm(x * 0, dim=(1, 2))):
        check_both(fn, [x], gradgrad=False)


# ---- dtypes ---------------------------------------------------------------------------------------------
def _ints(dtype="int64"):
    return bg.tensor([[3, -1, 2], [0, 5, -4]]).to(getattr(bg, dtype))


DTYPES = {  # id: fn(m, i) on an int64 tensor i
    "sum-int32": lambda m, i: m.sum(i.int(), 0),
    "sum-bool": lambda m, i: m.sum(i > 0),
    "sum-dtype": lambda m, i: m.sum(i, 1, dtype=m.float64),
    "sum-float32": lambda m, i: i.float().sum(1),
    "prod-int": lambda m, i: m.prod(i, 1),
    "prod-bool": lambda m, i: m.prod(i != 0),
    "cumsum-int32": lambda m, i: m.cumsum(i.int(), 1),
    "cumsum-bool": lambda m, i: m.cumsum(i > 0, 0),
    "cumprod-dtype": lambda m, i: m.cumprod(i, 1, dtype=m.float32),
    "mean-dtype": lambda m, i: m.mean(i, dtype=m.float64),
    "amax-int": lambda m, i: m.amax(i, 0),
    "max-int-dim": lambda m, i: m.max(i, 1),
    "min-int": lambda m, i: m.min(i),
    "argmin-int": lambda m, i: m.argmin(i),
    "logsumexp-int": lambda m, i: m.logsumexp(i, 1),
    "var-float32": lambda m, i: m.var(i.float(), 1),
    "norm-float32-dtype": lambda m, i: m.norm(i.float(), dtype=m.float64),
    "max-bool": lambda m, i: m.max(i > 0, 0),
}


@pytest.mark.parametrize("name", DTYPES)
def test_dtypes(name):
    check_both(DTYPES[name], [_ints()])


ERRORS = {  # id: (fn(m, *inputs), inputs, message part)
    "mean-int": (lambda m, i: m.mean(i), [_ints()], "mean\\(\\): could not infer output dtype"),
    "mean-int-method": (lambda m, i: i.mean(1), [_ints()], "Got: Long"),
    "var-int": (lambda m, i: m.var(i), [_ints()], "std and var only support floating point"),
    "std-int": (lambda m, i: m.std(i, 1), [_ints()], "std and var only support floating point"),
    "norm-int": (lambda m, i: m.norm(i), [_ints()], "Expected a floating point or complex tensor"),
    "dim-out-of-range": (lambda m, x: m.sum(x, 3), [leaf()], "Dimension out of range"),
    "max-dim-out-of-range": (lambda m, x: m.max(x, -4), [leaf()], "Dimension out of range"),
    "logsumexp-no-dim": (lambda m, x: m.logsumexp(x), [leaf()], None),
    "cumsum-no-dim": (lambda m, x: m.cumsum(x), [leaf()], None),
    "prod-tuple-dim": (lambda m, x: m.prod(x, (0, 1)), [leaf()], None),
    "argmax-bool": (lambda m, i: m.argmax(i > 0), [_ints()], "does not support bool"),
    "max-empty": (lambda m: m.max(m.zeros(0, 3)), [], "Expected reduction dim"),
    "max-dim-empty": (lambda m: m.max(m.zeros(0, 3), 0), [], "Expected reduction dim 0 to have non-zero size"),
    "min-dim-empty": (lambda m: m.min(m.zeros(3, 0), -1), [], "Expected reduction dim 1 to have non-zero size"),
    "amax-empty": (lambda m: m.amax(m.zeros(0, 3)), [], "amax\\(\\): Expected reduction dim to be specified"),
    "amin-dims-empty": (lambda m: m.amin(m.zeros(0, 3), (1, 0)), [], "dim 0 to have non-zero size"),
    "argmax-empty": (lambda m: m.argmax(m.zeros(0)), [], "argmax\\(\\): Expected reduction dim to be specified"),
    "argmin-dim-empty": (lambda m: m.argmin(m.zeros(2, 0), 1), [], "dim 1 to have non-zero size"),
    "repeated-dim": (lambda m, x: m.sum(x, (1, -2)), [leaf()], "appears multiple times"),
    "zero-dim-out-of-range": (lambda m, x: m.sum(x[0, 0, 0], 1), [leaf()], "Dimension out of range"),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors(name):
    fn, inputs, match = ERRORS[name]
    raises_like(fn, inputs, match)


def test_an_explicit_dim_none_takes_torchs_dim_overload():
    # torch's sum and mean without a dim are one overload (Backward0); any dim argument, None included, the other
    for lib in (torch, bg):
        x = lib.ones(2, 3, requires_grad=True)
        nodes = [x.sum(), x.sum(dim=None), lib.sum(x, None, True), x.mean(), x.mean(dim=None), x.sum(dtype=lib.float64)]
        names = [t.grad_fn.name().rsplit("::", 1)[-1] for t in nodes]
        if lib is torch:
            expected = names
    assert names == expected
    assert expected[:2] == ["SumBackward0", "SumBackward1"]
