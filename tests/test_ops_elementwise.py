"""Elementwise, comparison and logic ops against torch 2.13: values, dtypes, first and second derivatives.

The ops and their input domains come from the op database (tests/op_db.py): its unary and binary families, less the
aliases and the ops it says this sweep leaves out (each with its reason). The other tables hold `fn(m, *inputs)`
written once against a module `m`, run with m=batched_grad and m=torch."""

import operator

import numpy as np
import pytest
import torch

import batched_grad as bg
import op_db
from oracle import assert_same, check_both, raises_like, rand, to_torch


def _domain(arg):
    return (arg.domain.low, arg.domain.high)


WIDE, POS = _domain(op_db.Arg((), op_db.REAL)), _domain(op_db.Arg((), op_db.POS))


def leaves(*specs):
    """Float64 leaves from (shape, domain) specs (or a bare shape, domain WIDE); each gets its own seed."""
    out = []
    for i, s in enumerate(specs):
        shape, (lo, hi) = (s, WIDE) if not s or isinstance(s[0], int) else s
        out.append(rand(*shape, low=lo, high=hi, seed=i + 7 * len(shape)))
    return out


# ---- unary ----------------------------------------------------------------------------------------------
def _swept(entry):
    """A record this file sweeps: not an alias, in torch under the same name, not left out (op_db says why)."""
    return entry.alias_of is None and not {"elementwise", "oracle"} & set(entry.why) and hasattr(torch, entry.name)


def _method(name):
    return callable(getattr(torch.Tensor, name, None))


def _tensor_args(entry, kind=None):
    return all(a.domain.differentiable for a in entry.args) and (kind is None or len(entry.args) == kind)


UNARY = {e.name: e for e in op_db.entries("unary", differentiable=True) if _swept(e) and _tensor_args(e, 1)}
PREDICATES = [e.name for e in op_db.entries("unary") if e.result == "bool" and _swept(e) and _tensor_args(e, 1)]


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    entry = UNARY[name]
    (x,) = leaves(((3, 3), _domain(entry.args[0])))
    check_both(entry.call, [x])
    if _method(name):  # the method form on a non-contiguous view (a transpose) of the leaf
        check_both(op_db.as_method(entry, lambda t: t.mT), [x], gradgrad=False)


@pytest.mark.parametrize("dtype", ["int64", "bool"])
@pytest.mark.parametrize("name", list(UNARY) + PREDICATES)
def test_unary_dtypes(name, dtype):
    call = op_db.BY_NAME[name].call
    x = bg.tensor([[1, 0, 3], [2, 1, 0]]).to(getattr(bg, dtype))
    try:
        expected = call(torch, to_torch(x))
    except Exception:
        return raises_like(call, [x])
    assert_same(call(bg, x), expected, rtol=1e-6)


# ---- binary arithmetic ----------------------------------------------------------------------------------
BINARY = {e.name: e for e in op_db.entries("binary", differentiable=True) if _swept(e) and _tensor_args(e, 2)}
SHAPES = {"row": [(3, 3), (3,)], "outer": [(3, 1), (1, 3)]}  # broadcasting one side, both sides


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary(name, shapes):
    entry = BINARY[name]
    a, b = leaves(*zip(SHAPES[shapes], map(_domain, entry.args)))
    check_both(entry.call, [a, b])
    if shapes == "row" and _method(name):  # the method form, on a transposed view
        check_both(op_db.as_method(entry, lambda t: t.mT), [a, b], gradgrad=False)


WITH_NUMBER = {e.name: e for e in op_db.entries("binary") if e.number_call and _swept(e)}


@pytest.mark.parametrize("name", WITH_NUMBER)
def test_binary_with_python_number(name):
    entry = WITH_NUMBER[name]
    (a,) = leaves(((3, 3), _domain(entry.args[0])))
    # (int numbers: test_operators_with_numbers_both_orders)
    check_both(lambda m, a: entry.number_call(m, a, 1.5), [a])


VARIANTS = {
    name: (call, e)
    for e in op_db.entries(("unary", "binary"), differentiable=True)
    if _swept(e)
    for name, call in e.calls().items()
    if name != e.name
}


@pytest.mark.parametrize("name", VARIANTS)
def test_variants(name):
    """The ops' calls with other keyword arguments or argument kinds (the database's variants)."""
    call, entry = VARIANTS[name]
    check_both(call, leaves(*[(a.shape, _domain(a)) for a in entry.args]))


def _operator(op, name):
    """The operator, and the domains of the tensor on its left and on its right (those of the op `name`)."""
    left, right = (_domain(a) for a in op_db.BY_NAME[name].args)
    return op, left, right


OPERATORS = {  # name: (operator, domain of the tensor when it is on the left, ... on the right)
    "add": _operator(operator.add, "add"),
    "sub": _operator(operator.sub, "sub"),
    "mul": _operator(operator.mul, "mul"),
    "truediv": _operator(operator.truediv, "div"),
    "mod": _operator(operator.mod, "remainder"),
    "pow": _operator(operator.pow, "pow"),
}


@pytest.mark.parametrize("number", [2.5, 3, -2])
@pytest.mark.parametrize("name", OPERATORS)
def test_operators_with_numbers_both_orders(name, number):
    op, left, right = OPERATORS[name]
    check_both(lambda m, x: op(x, number), leaves(((3, 3), left)))
    if name != "mod":
        check_both(lambda m, x: op(number, x), leaves(((3, 3), right)))
    elif number > 0:  # torch has no derivative for number % tensor; compare with a 0-dim tensor on the left
        check_both(lambda m, x: op(number, x), leaves(((3, 3), right)), grad=False)
        check_both(lambda m, x: m.remainder(m.tensor(number, dtype=m.float64), x), leaves(((3, 3), right)))


def test_python_unary_operators():
    x, y = leaves((3, 3), (3,))
    check_both(lambda m, x, y: -x + abs(y) * x - y / 2 + (x + y) ** 2, [x, y])
    check_both(lambda m, x: +x, [x])


def test_floor_divide():
    a = bg.tensor([[7.5, -7.5, 3.0], [-3.0, 0.5, -0.5]], dtype=bg.float64, requires_grad=True)
    b = bg.tensor([2.0, -2.0, 1.5], dtype=bg.float64)
    for f in (
        lambda m, a, b: m.floor_divide(a, b),
        lambda m, a, b: a // b,
        lambda m, a, b: a // 2,
        lambda m, a, b: 5 // a,
        lambda m, a, b: a.floor_divide(b),
        lambda m, a, b: m.floor_divide(7, 2),
    ):
        check_both(f, [a, b], grad=False)
    # torch raises "derivative for aten::floor_divide is not implemented"; we give the a.e. derivative, zero,
    # which is what torch gives for div(rounding_mode="floor")
    (g,) = bg.autograd.grad((a // b * a).sum(), a)
    ta, tb = to_torch([a, b])
    (tg,) = torch.autograd.grad((torch.div(ta, tb, rounding_mode="floor") * ta).sum(), ta)
    assert_same(g, tg)
    # div with a rounding mode is differentiable (zero gradient)
    for mode in ("floor", "trunc"):
        check_both(lambda m, a, b: m.div(a, b, rounding_mode=mode) * a, [a, b])
        check_both(lambda m, a, b: a.div(2, rounding_mode=mode) * a, [a, b])


CALLS = {  # id: (fn(m, *inputs), input specs)
    "add_alpha": (lambda m, x, y: m.add(x, y, alpha=2), [(3, 3), (3,)]),
    "add_alpha_number": (lambda m, x, y: m.add(x, 1.5, alpha=-2) + y, [(3, 3), (3,)]),
    "sub_alpha": (lambda m, x, y: m.sub(x, y, alpha=0.5), [(3, 3), (3,)]),
    "sub_alpha_method": (lambda m, x, y: x.sub(y, alpha=3), [(3, 3), (3,)]),
    "mul_method_view": (lambda m, x, y: x[:, 1:].mul(y[::2]), [(3, 3), (3,)]),
    "div_number_left": (lambda m, x: 2.0 / x, [((3, 3), POS)]),
    "div_0dim": (lambda m, x, s: x / s - s, [(3, 3), ((), POS)]),
    "same_shape": (lambda m, x, y: m.atan2(x, y) * m.maximum(x, y), [(3, 3), (3, 3)]),
    "pow_tensor_base_number": (lambda m, x: m.pow(2.5, x), [(3, 3)]),
    "pow_zero_exponent": (lambda m, x: m.pow(x, 0), [(3, 3)]),
    "pow_broadcast_exponent": (lambda m, x, y: m.pow(x, y), [((3, 1), POS), ((2, 1, 3), WIDE)]),
    "remainder_negative_divisor": (lambda m, x, y: m.remainder(x, -y), [(3, 3), ((3,), POS)]),
    "fmod_negative_divisor": (lambda m, x, y: m.fmod(x, -y), [(3, 3), ((3,), POS)]),
    "clamp_numbers": (lambda m, x: m.clamp(x, -1.0, 1.5), [(3, 3)]),
    "clamp_min_only": (lambda m, x: m.clamp(x, min=0.5), [(3, 3)]),
    "clamp_max_only_method": (lambda m, x: x.clamp(max=-0.5), [(3, 3)]),
    "clamp_tensors": (lambda m, x, lo, hi: m.clamp(x, lo, hi + 1.5), [(3, 3), (3,), ((3, 1), (0.0, 1.0))]),
    "clamp_tensor_min": (lambda m, x, lo: m.clamp(x, min=lo), [(3, 3), (3,)]),
    "clip": (lambda m, x: m.clip(x, -1, 1), [(3, 3)]),
    "clip_method": (lambda m, x, hi: x.T.clip(max=hi), [(3, 3), (3,)]),
    "where": (lambda m, x, y: m.where(x > 0, x, y), [(3, 3), (3,)]),
    "where_number": (lambda m, x: m.where(x > 0, x, 0.5), [(3, 3)]),
    "where_number_left": (lambda m, x: m.where(x > 0, -1.0, x), [(3, 3)]),
    "where_method": (lambda m, x, y: x.where(x < 0, y), [(3, 3), (3,)]),
    "where_numbers": (lambda m, x: m.where(x > 0, 1.0, -1.0) * x, [(3, 3)]),
    "two_numbers": (lambda m, x: m.add(1, 2) + m.mul(1.5, 2) * x - m.sub(2, 1) + m.div(3, 2), [(3, 3)]),
    "lerp_number": (lambda m, x, y: m.lerp(x, y, 0.3), [(3, 3), (3,)]),
    "lerp_tensor_weight": (lambda m, x, y, w: m.lerp(x, y, w), [(3, 3), (3,), ((3, 1), (0.0, 1.0))]),
    "lerp_method": (lambda m, x, y: x.lerp(y, 0.75), [(3, 3), (3,)]),
    "round_decimals": (lambda m, x: m.round(x * 10, decimals=1) * x, [(3, 3)]),
    "round_negative_decimals": (lambda m, x: m.round(x * 100, decimals=-1), [(3, 3)]),
    "atan2_number": (lambda m, x: m.atan2(x, m.tensor(2.0, dtype=m.float64)), [(3, 3)]),
    "chain": (lambda m, x, y: m.sigmoid(x * y).log() + m.tanh(x).exp() * m.hypot(x, y), [(3, 3), (3,)]),
}


@pytest.mark.parametrize("name", CALLS)
def test_calls(name):
    fn, specs = CALLS[name]
    check_both(fn, leaves(*specs))


# ---- derivative conventions at kinks and ties -----------------------------------------------------------
NAN = float("nan")


def _t(values, requires_grad=True):
    return bg.tensor(values, dtype=bg.float64, requires_grad=requires_grad)


# inputs are (3, 3) / (3,) / (3, 1) like the tables above, so the kernels compiled there are reused
KINKS = {  # id: (fn(m, *inputs), input values)
    "abs_at_0": (lambda m, x: m.abs(x) * x, [[[0.0, -0.0, 1.0], [-2.0, 0.0, 3.0], [0.5, -1.0, 0.0]]]),
    "sign_at_0": (lambda m, x: m.sign(x) * x, [[[0.0, 1.0, -2.0], [0.5, 0.0, -0.0], [3.0, -1.0, 0.0]]]),
    "sqrt_at_0": (lambda m, x: m.sqrt(x), [[[0.0, 1.0, 4.0], [0.25, 0.0, 2.0], [1.5, 3.0, 0.0]]]),
    "frac_at_integers": (lambda m, x: m.frac(x), [[[-1.0, 0.0, 2.0], [2.5, -2.5, 3.0], [0.5, 1.0, -0.0]]]),
    "clamp_at_bounds": (lambda m, x: m.clamp(x, -0.5, 1.5), [[[-1.0, -0.5, 0.0], [0.5, 1.5, 2.0], [-0.5, 1.5, 1.0]]]),
    "clamp_tensor_bounds_ties": (
        lambda m, x, lo, hi: m.clamp(x, lo, hi),
        [[[-1.0, -0.5, 0.0], [0.5, 1.0, 0.25], [2.0, -2.0, 0.5]], [-1.0, -0.5, 0.0], [[0.5], [1.0], [0.5]]],
    ),
    "maximum_ties": (
        lambda m, x, y: m.maximum(x, y),
        [[[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [3.0, 2.0, 1.0]], [1.0, 0.0, 1.0]],
    ),
    "minimum_ties": (
        lambda m, x, y: m.minimum(x, y),
        [[[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [3.0, 2.0, 1.0]], [1.0, 0.0, 1.0]],
    ),
    "pow_base_0": (lambda m, x: m.pow(x, 2) + m.pow(x, 0) + m.pow(x, 1) + m.pow(x, 3), [[[0.0, 1.0, -2.0]] * 3]),
    "pow_base_0_tensor_exponent": (
        lambda m, x, y: m.pow(x, y),
        [[[0.0, 0.0, 2.0], [0.0, 1.0, 0.0], [1.0, 0.5, 3.0]], [2.0, 0.0, 1.5]],
    ),
    "pow_negative_base": (
        lambda m, x, y: m.pow(x, 2) * y + m.pow(x, 3.0) + m.pow(x, -1),
        [[[-2.0, -0.5, 3.0], [-1.0, 2.0, -3.0], [0.5, -1.5, 1.0]], [1.0, 2.0, 3.0]],
    ),
    "where_selects": (
        lambda m, x, y: m.where(x > y, x, y),
        [[[1.0, 2.0, 3.0], [0.0, 0.0, 5.0], [3.0, 2.0, 1.0]], [1.0, 0.0, 4.0]],
    ),
    # at nan, zeros and underflow: torch's formulas, where JAX's derivatives differ
    "abs_sign_relu_at_nan": (
        lambda m, x: m.abs(x) + m.sign(x) + m.relu(x),
        [[[NAN, 0.0, -1.0], [2.0, NAN, -0.0], [0.5, -3.0, NAN]]],
    ),
    "rsqrt_at_zeros": (lambda m, x: m.rsqrt(x), [[[0.0, -0.0, 1.0], [4.0, 0.0, 2.0], [0.25, -0.0, 9.0]]]),
    "maximum_minimum_nan": (
        lambda m, x, y: m.maximum(x, y) + m.minimum(x, y),
        [[[NAN, 2.0, 3.0], [0.0, NAN, 0.0], [3.0, 2.0, NAN]], [1.0, NAN, 1.0]],
    ),
    "clamp_at_nan": (lambda m, x: m.clamp(x, -1.0, 1.0), [[[NAN, 0.5, 2.0], [-2.0, NAN, 1.0], [-1.0, 0.0, NAN]]]),
    "atan2_hypot_at_zero": (
        lambda m, x, y: m.atan2(x, y) + m.hypot(x, y),
        [[[0.0, 1e-200, 3.0], [0.0, -0.0, 1.0], [2.0, 0.0, 1e-200]], [0.0, 0.0, 1.0]],
    ),
}


@pytest.mark.parametrize("name", KINKS)
def test_kinks(name):
    fn, inputs = KINKS[name]
    # torch's double backward of pow with a tensor exponent is nan at base 0; ours is finite
    check_both(fn, [_t(v) for v in inputs], gradgrad=name != "pow_base_0_tensor_exponent")


def test_clamp_min_above_max_gives_max():
    x = _t([[-2.0, 0.0, 2.0]] * 3)
    check_both(lambda m, x: m.clamp(x, 1.0, -1.0), [x], grad=False)
    check_both(lambda m, x, lo, hi: m.clamp(x, lo, hi), [x, _t([1.0] * 3), _t([[-1.0]] * 3)], grad=False)


# ---- comparisons and logic -------------------------------------------------------------------------------
COMPARE = [e.name for e in op_db.entries("binary") if e.result == "bool" and _swept(e)]


@pytest.mark.parametrize("name", COMPARE)
def test_comparisons(name):
    a = bg.tensor([[1.0, 2.0, 0.0], [3.0, 2.0, -1.0]], dtype=bg.float64, requires_grad=True)
    b = bg.tensor([1.0, 0.0, 0.0], dtype=bg.float64)
    i = bg.tensor([1, 2, 0])
    # (Python numbers: test_comparison_operators; torch's logical ops take none)
    for fn in (
        lambda m, a, b, i: getattr(m, name)(a, b),
        lambda m, a, b, i: getattr(a.mT, name)(i[:2]),
        lambda m, a, b, i: getattr(m, name)(a > 0, i),
    ):
        check_both(fn, [a, b, i])


COMPARE_OPERATORS = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


@pytest.mark.parametrize("op", COMPARE_OPERATORS, ids=lambda op: op.__name__)
def test_comparison_operators(op):
    a = bg.tensor([[1.0, 2.0, 0.0], [3.0, 2.0, -1.0]], dtype=bg.float64, requires_grad=True)
    i = bg.tensor([1, 2, 0])
    for fn in (
        lambda m, a, i: op(a, i),
        lambda m, a, i: op(2, a),
        lambda m, a, i: op(1.5, i),
        lambda m, a, i: op(a, m.tensor(2.0)),
    ):
        check_both(fn, [a, i])


def test_predicates_and_logical_not():
    x = bg.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0], dtype=bg.float64)
    for name in PREDICATES:
        check_both(lambda m, x: getattr(m, name)(x), [x])
        check_both(lambda m, x: getattr(x, name)(), [x])


# ---- dtype promotion -------------------------------------------------------------------------------------
def _typed(dtype, shape):
    base = np.resize(np.array([-3.5, -1.25, 2.0, 5.5, 1.0, -2.0]), shape)
    if dtype in ("uint8", "bool"):
        base = np.abs(base) if dtype == "uint8" else base > 0
    return bg.tensor(base.astype(getattr(np, dtype) if dtype != "bool" else bool))


def _other(dtype, shape):
    base = np.resize(np.array([2.0, -3.0, 1.5, 4.0, -1.0, 3.0]), shape)
    return bg.tensor(np.abs(base).astype(np.uint8) if dtype == "uint8" else base.astype(getattr(np, dtype)))


PROMOTION = [  # (name, input (dtype, shape) or number, other (dtype, shape) or number)
    ("add", ("int64", (4,)), 1.5),
    ("add", ("int64", (4,)), ("float64", (4,))),
    ("add", ("int64", (4,)), True),
    ("add", ("float32", (4,)), ("float64", ())),
    ("add", ("float32", ()), ("float64", ())),
    ("mul", ("int32", (4,)), ("int64", ())),
    ("mul", ("int32", (4,)), 5),
    ("mul", ("float16", (4,)), 2.5),
    ("add", ("uint8", (4,)), ("int8", (4,))),
    ("mul", ("bool", (4,)), ("int64", (4,))),
    ("add", ("bool", (4,)), ("bool", (4,))),
    ("mul", ("bool", (4,)), 2.5),
    ("mul", ("int64", (4,)), ("float32", ())),
    ("div", ("int64", (4,)), ("int64", (4,))),
    ("div", ("int64", (4,)), 2),
    ("true_divide", 3, ("int32", (4,))),
    ("floor_divide", ("int64", (4,)), ("int64", (4,))),
    ("remainder", ("int64", (4,)), ("int64", (4,))),
    ("fmod", ("int64", (4,)), ("int64", (4,))),
    ("remainder", ("int64", (4,)), -2),
    ("fmod", ("int32", (4,)), 2.5),
    ("pow", ("int64", (4,)), 2),
    ("pow", ("int64", (4,)), 0.5),
    ("pow", 2, ("int64", (4,))),
    ("pow", ("float32", (4,)), ("float64", ())),
    ("atan2", ("int64", (4,)), ("int64", (4,))),
    ("maximum", ("int32", (4,)), ("float64", ())),
    ("minimum", ("int64", (4,)), ("bool", (4,))),
    ("hypot", ("float32", (4,)), ("float32", ())),
    ("eq", ("int64", (4,)), 2.0),
    ("lt", ("int32", (4,)), ("float64", ())),
    ("logical_and", ("int64", (4,)), ("float64", (4,))),
    ("logical_or", ("bool", (4,)), ("float32", ())),
    ("pow", ("int64", (4,)), ("int64", (4,))),
    ("pow", ("int32", (4,)), ("float64", ())),
    ("pow", 2.5, ("int64", (4,))),
    ("div_trunc", ("int64", (4,)), ("int64", (4,))),
    ("div_floor", ("int64", (4,)), ("int64", (4,))),
    ("div_trunc", ("float32", (4,)), ("float64", ())),
]
PROMOTION_FNS = {
    "div_trunc": lambda m, a, b: m.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda m, a, b: m.div(a, b, rounding_mode="floor"),
}


@pytest.mark.parametrize("name,a,b", PROMOTION, ids=[f"{n}-{a}-{b}" for n, a, b in PROMOTION])
def test_dtype_promotion(name, a, b):
    a = _typed(*a) if isinstance(a, tuple) else a
    b = _other(*b) if isinstance(b, tuple) else b
    fn = PROMOTION_FNS.get(name, lambda m, a, b: getattr(m, name)(a, b))
    check_both(fn, [a, b])


def test_where_clamp_lerp_promotion():
    i, f32, f64_0 = _typed("int64", (4,)), _typed("float32", (4,)), _typed("float64", ())
    for fn in (
        lambda m, i, f32, f64_0: m.where(i > 0, i, f32),
        lambda m, i, f32, f64_0: m.where(i > 0, i, 2.5),
        lambda m, i, f32, f64_0: m.where(i > 0, f32, f64_0),
        lambda m, i, f32, f64_0: m.where(i > 0, i, i),
        lambda m, i, f32, f64_0: m.clamp(i, 0.5),
        lambda m, i, f32, f64_0: m.clamp(i, min=f64_0),
        lambda m, i, f32, f64_0: m.clamp(i, -1, 3),
        lambda m, i, f32, f64_0: m.clamp(f32, max=f64_0),
        lambda m, i, f32, f64_0: m.lerp(f32, f32, 0.5),
        lambda m, i, f32, f64_0: m.lerp(f32, f32, f64_0),
    ):
        check_both(fn, [i, f32, f64_0])


# ---- errors ----------------------------------------------------------------------------------------------
ERRORS = {  # id: (fn(m, *inputs), inputs, message part)
    "neg_bool": (lambda m, b: -b, [bg.tensor([True, False])], "Negation"),
    "sub_bools": (lambda m, b: b - b, [bg.tensor([True, False])], "Subtraction"),
    "rsub_bool_number": (lambda m, b: m.sub(b, True), [bg.tensor([True, False])], "Subtraction"),
    "int_negative_power": (lambda m, i: i**-1, [bg.tensor([1, 2])], "negative integer powers"),
    "rounding_mode": (lambda m, x: m.div(x, 2, rounding_mode="round"), [bg.tensor([1.0])], "rounding_mode"),
    "atan2_numbers": (lambda m: m.atan2(1.0, 2.0), [], None),
    "lerp_int": (lambda m, i: m.lerp(i, i, 0.5), [bg.tensor([1, 2])], "not implemented for 'Long'"),
    "floor_bool": (lambda m, b: m.floor(b), [bg.tensor([True, False])], "not implemented for 'Bool'"),
    "floor_divide_bool": (lambda m, b: b // b, [bg.tensor([True, False])], "div_floor_cpu\" not implemented for 'Bo"),
    "remainder_complex": (lambda m, z: z % 2, [bg.tensor([1j])], "remainder_cpu\" not implemented for 'ComplexFloat'"),
    "fmod_complex": (lambda m, x, z: m.fmod(x, z), [bg.tensor([1.0]), bg.tensor([1j])], "not implemented for 'Complex"),
    "hypot_int": (lambda m, i: m.hypot(i, i), [bg.tensor([1, 2])], "hypot_cpu\" not implemented for 'Long'"),
    "atan2_complex": (lambda m, z: m.atan2(z, z), [bg.tensor([1j])], "atan2_cpu\" not implemented for 'Complex"),
    "maximum_number": (lambda m, x: m.maximum(x, 2), [bg.tensor([1.0])], "argument 'other' \\(position 2\\)"),
    "atan2_number_input": (lambda m, x: m.atan2(1.0, x), [bg.tensor([1.0])], "argument 'input' \\(position 1\\)"),
    "maximum_complex": (
        lambda m, x, z: m.maximum(x, z),
        [bg.tensor([1.0]), bg.tensor([1j])],
        "maximum not implemented for complex tensors",
    ),
    "clamp_no_bounds": (lambda m, x: m.clamp(x), [bg.tensor([1.0])], "At least one of 'min' or 'max'"),
    "lerp_dtypes": (
        lambda m, x, y: m.lerp(x, y, 0.5),
        [bg.tensor([1.0]), bg.tensor([1.0], dtype=bg.float64)],
        "expected dtype",
    ),
    "lerp_weight_dtype": (
        lambda m, x: m.lerp(x, x, m.tensor([0.5], dtype=m.float64)),
        [bg.tensor([1.0])],
        "expected dtype",
    ),
    "add_float_alpha_int": (lambda m, i: m.add(i, i, alpha=0.5), [bg.tensor([1, 2])], "alpha"),
    "broadcast": (lambda m, x, y: x + y, [bg.zeros(2, 3), bg.zeros(2)], "size of tensor a"),
    "where_condition_dtype": (lambda m, x: m.where(x, x, x), [bg.tensor([1.0])], "condition"),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors(name):
    fn, inputs, match = ERRORS[name]
    raises_like(fn, inputs, match)


def test_batched_backward_of_a_mix():
    # is_grads_batched=True over a mix of custom-derivative ops (pow), kinks (clamp) and broadcasting
    check_both(lambda m, x, y: m.pow(m.clamp(x, -1, 1) + 2, y) * m.maximum(x, y), leaves((3, 3), (3,)), batched=True)
