"""The tests' op database: one record per public op (batched_grad._ops.__all__), in the spirit of PyTorch's OpInfo.

A record says how to build valid inputs for the op (each tensor argument's shape and the range its values are drawn
from), how to call it (`call(m, *tensors)`, written once against a module `m`: batched_grad, or torch where torch has
the op under the same name), more calls with other keyword arguments (`variants`), whether it is differentiable,
which dtypes it takes, the family it belongs to, whether the is_grads_batched sweep covers it, and why a sweep leaves
it out. The op sweeps (test_batched_ops.py, test_ops_elementwise.py, test_property.py, test_compile_sweep.py) read
their ops from here; test_op_db.py checks that every public op has a record and no record is stale.

A few records name ops outside the op table, as `namespace.name` ("linalg.solve", "nn.functional.elu",
"Tensor.__getitem__"): the sweeps use them too, and they must resolve as attributes of batched_grad.
"""

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType

import jax.numpy as jnp
import numpy as np

FLOATS = ("float32", "float64")
INTEGERS = ("int32", "int64")
ALL = FLOATS + INTEGERS + ("bool",)


@dataclasses.dataclass(frozen=True)
class Domain:
    """Where an argument's values come from: uniform floats in [low, high) (kind "float"), or a structured float
    matrix made from such values ("spd": a a^T + 3 I; "shifted": a + 3 I; "lower": tril(a) + 3 I), or integers
    in [low, high) ("int"), or booleans ("bool"). Only float arguments are differentiable leaves."""

    name: str
    low: float
    high: float
    kind: str = "float"

    @property
    def differentiable(self):
        return self.kind not in ("int", "bool")

    def sample(self, rng, shape):
        if self.kind == "bool":
            return rng.integers(0, 2, shape).astype(bool)
        if self.kind == "int":
            return rng.integers(int(self.low), int(self.high), shape)
        a = rng.uniform(self.low, self.high, shape)
        eye = 3.0 * np.eye(shape[-1]) if self.kind != "float" else 0.0
        if self.kind == "spd":
            return a @ np.swapaxes(a, -1, -2) + eye
        if self.kind == "lower":
            return np.tril(a) + eye
        return a + eye


REAL = Domain("real", -3.0, 3.0)  # any real number: the sweeps draw from [-3, 3)
SMALL = Domain("small", -1.0, 1.0)  # any real number, for ops whose values grow fast (products, powers, matrices)
POS = Domain("positive", 0.5, 2.0)
UNIT = Domain("inside (-1, 1)", -0.9, 0.9)
PROB = Domain("inside (0, 1)", 0.1, 0.9)
ABOVE1 = Domain("above 1", 1.1, 3.0)
ABOVE_M1 = Domain("above -1", -0.5, 2.0)
TAN = Domain("inside (-pi/2, pi/2)", -1.2, 1.2)
GAMMA = Domain("positive, away from 0", 0.2, 4.0)
MVLGAMMA = Domain("above (p - 1) / 2 for p = 3", 1.5, 4.0)
SPD = Domain("symmetric positive definite", -1.0, 1.0, "spd")
WELL = Domain("well conditioned (a + 3 I)", -1.0, 1.0, "shifted")
LOWER = Domain("lower triangular, positive diagonal", -1.0, 1.0, "lower")
INDEX3 = Domain("indices in [0, 3)", 0, 3, "int")
SMALL_INT = Domain("integers in [1, 9)", 1, 9, "int")
GRID = Domain("sampling points around [-1, 1]", -1.3, 1.3)


@dataclasses.dataclass(frozen=True)
class Arg:
    """One tensor argument of a sample call: its shape and its domain."""

    shape: tuple = (3, 3)
    domain: Domain = REAL


@dataclasses.dataclass(frozen=True, eq=False)
class OpEntry:
    """One public op.

    name: the op's name in the op table (or `namespace.name` for an op outside it).
    family: the group it is tested with (the batched sweep builds one program per family).
    args: the tensor arguments of the sample call (shape and domain each).
    call: call(m, *tensors) -> the op's output(s), on tensors made from `args`, with m = batched_grad or torch.
    variants: more calls of the same form, with other keyword arguments or argument kinds (name -> call).
    differentiable: whether a float output carries a derivative to a float input.
    gradgrad: whether that derivative is differentiable again (torch has no second derivative of a few ops).
    result: the kind of the result: "float" (of the inputs' float dtype), "bool", "int" or "python" (no tensor).
    batched: whether grad(..., is_grads_batched=True) through the op is supported and swept (test_batched_ops).
    dtypes: the dtypes it takes (of its first tensor argument).
    why: why a sweep leaves the op out (sweep name -> reason); "batched" must have one whenever the op is not swept
        there.
    xfail: known failures (sweep name -> the failure), run under pytest.mark.xfail(strict=True).
    slow: why the batched sweep checks the op in the slow tier only (pytest -m slow): its programs compile slowly.
    composable: smooth on all reals, of tame growth, and (3, 3) -> (3, 3): random graphs may chain it
        (test_property).
    number_call: number_call(m, x, c) with c a Python number operand (test_compile_sweep: a new number compiles
        nothing).
    alias_of: the op this one is another name (or the in-place form) of.
    notes: anything else worth knowing.
    """

    name: str
    family: str
    args: tuple
    call: Callable
    variants: Mapping = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    differentiable: bool = True
    gradgrad: bool = True
    result: str = "float"
    batched: bool = True
    dtypes: tuple = FLOATS
    why: Mapping = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    xfail: Mapping = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    slow: str = ""
    composable: bool = False
    number_call: Callable | None = None
    alias_of: str | None = None
    notes: str = ""

    def calls(self):
        """The sample call and its variants, by name."""
        return {self.name: self.call, **{f"{self.name}-{k}": v for k, v in self.variants.items()}}


def _entry(name, family, call, *args, variants=None, why=None, xfail=None, **kw):
    return OpEntry(
        name,
        family,
        args,
        call,
        variants=MappingProxyType(dict(variants or {})),
        why=MappingProxyType(dict(why or {})),
        xfail=MappingProxyType(dict(xfail or {})),
        **kw,
    )


def _by_name(name):
    return lambda m, *a: getattr(m, name)(*a)


class _Renamed:
    """A module whose function `base` is replaced by `fn`: a record's call run on an alias or in-place form."""

    def __init__(self, module, base, fn):
        self._module, self._base, self._fn = module, base, fn

    def __getattr__(self, attr):
        return self._fn if attr == self._base else getattr(self._module, attr)


def _like(base, **kw):
    """The fields of a record that an alias or in-place form shares with its base, updated with `kw`."""
    fields = dict(
        differentiable=base.differentiable,
        gradgrad=base.gradgrad,
        result=base.result,
        batched=base.batched,
        dtypes=base.dtypes,
        why=base.why,
        alias_of=base.name,
    )
    return {**fields, **kw}


def _alias(name, base, **kw):
    def call(m, *a):
        return base.call(_Renamed(m, base.name, getattr(m, name)), *a)

    return _entry(name, base.family, call, *base.args, **_like(base, **kw))


def _inplace(name, base, **kw):
    """The in-place form `name` of `base`, run on a copy of the first argument (a leaf cannot be written)."""

    def call(m, *a):
        fn = getattr(m, name)
        return base.call(_Renamed(m, base.name, lambda first, *rest, **k: fn(first.clone(), *rest, **k)), *a)

    return _entry(name, "inplace", call, *base.args, **_like(base, **kw))


ENTRIES = []


def _add(*entries):
    ENTRIES.extend(entries)
    return entries[0] if len(entries) == 1 else entries


X = Arg((3, 3), REAL)
V = Arg((3,), REAL)
T = Arg((2, 3, 3), REAL)
SX = Arg((3, 3), SMALL)
SV = Arg((3,), SMALL)
PX = Arg((3, 3), POS)
NOT_DIFF = "not differentiable"


def _no_grad(reason, result="float"):
    """The fields of an op without a derivative, with the reason the batched sweep leaves it out."""
    return dict(
        differentiable=False, gradgrad=False, result=result, batched=False, why={"batched": f"{NOT_DIFF}: {reason}"}
    )


BOOL_RESULT = _no_grad("a bool result", "bool")
INT_RESULT = _no_grad("an integer result", "int")


# ---- elementwise unary ----------------------------------------------------------------------------------------
def _unary(name, domain=REAL, **kw):
    return _add(_entry(name, "unary", _by_name(name), Arg((3, 3), domain), **kw))


_UNARY = {}
for _name, _domain, _kw in [
    ("abs", REAL, {}),
    ("acos", UNIT, {}),
    ("acosh", ABOVE1, {}),
    ("asin", UNIT, {}),
    ("asinh", REAL, {}),
    ("atan", REAL, {}),
    ("atanh", UNIT, {}),
    ("ceil", REAL, dict(notes="zero derivative")),
    ("cos", REAL, {}),
    ("cosh", REAL, {}),
    ("deg2rad", REAL, {}),
    ("digamma", GAMMA, {}),
    ("erf", REAL, {}),
    ("erfc", REAL, {}),
    ("erfinv", UNIT, {}),
    ("exp", REAL, {}),
    ("exp2", REAL, {}),
    ("expm1", REAL, {}),
    ("floor", REAL, dict(notes="zero derivative")),
    ("frac", REAL, {}),
    ("i0", REAL, {}),
    ("lgamma", GAMMA, {}),
    ("log", POS, {}),
    ("log10", POS, {}),
    ("log1p", ABOVE_M1, {}),
    ("log2", POS, {}),
    ("neg", REAL, {}),
    ("rad2deg", REAL, {}),
    ("reciprocal", POS, {}),
    ("relu", REAL, {}),
    ("round", REAL, dict(notes="zero derivative", variants={"decimals": lambda m, x: m.round(x, decimals=1)})),
    ("rsqrt", POS, {}),
    ("sgn", REAL, {}),
    ("sigmoid", REAL, {}),
    ("sign", REAL, dict(notes="zero derivative")),
    ("sin", REAL, {}),
    ("sinc", REAL, {}),
    ("sinh", REAL, {}),
    ("sqrt", POS, {}),
    ("square", REAL, {}),
    ("tan", TAN, {}),
    ("tanh", REAL, {}),
    ("trunc", REAL, dict(notes="zero derivative")),
]:
    _UNARY[_name] = _unary(_name, _domain, **_kw)

for _name, _base in [
    ("absolute", "abs"),
    ("arccos", "acos"),
    ("arccosh", "acosh"),
    ("arcsin", "asin"),
    ("arcsinh", "asinh"),
    ("arctan", "atan"),
    ("arctanh", "atanh"),
    ("fix", "trunc"),
    ("negative", "neg"),
]:
    _UNARY[_name] = _add(_alias(_name, _UNARY[_base]))

_UNARY["logit"] = _unary(
    "logit", PROB, variants={"eps": lambda m, x: m.logit(x, 0.25)}, number_call=lambda m, x, c: m.logit(x, c / 20)
)
_UNARY["nan_to_num"] = _add(
    _entry(
        "nan_to_num",
        "unary",
        lambda m, x: m.nan_to_num(m.log(x - 0.5), nan=2.0, neginf=-3.0),
        Arg((3, 3), ABOVE_M1),
        notes="the sample makes nan and -inf with log",
    )
)
_UNARY["positive"] = _unary("positive")
_UNARY["clone"] = _unary("clone")
_UNARY["mvlgamma"] = _add(_entry("mvlgamma", "unary", lambda m, x: m.mvlgamma(x, 3), Arg((3, 3), MVLGAMMA)))
_UNARY["polygamma"] = _add(
    _entry(
        "polygamma",
        "unary",
        lambda m, x: m.polygamma(1, x),
        Arg((3, 3), Domain("positive", 0.5, 3.0)),
        variants={"n0": lambda m, x: m.polygamma(0, x)},
    )
)
_UNARY["frexp"] = _add(
    _entry("frexp", "unary", lambda m, x: m.frexp(x), X, notes="(mantissa, exponent): the exponent is an integer")
)
_UNARY["conj"] = _unary("conj", notes="a real tensor's conjugate is itself")
_UNARY["conj_physical"] = _unary("conj_physical")
_UNARY["resolve_conj"] = _unary("resolve_conj")
_UNARY["resolve_neg"] = _unary("resolve_neg")
_UNARY["real"] = _unary("real", notes="a real tensor's real part is itself")
_UNARY["angle"] = _unary("angle", notes="0 or pi for real inputs: zero derivative")
_UNARY["fill"] = _add(
    _entry(
        "fill",
        "unary",
        lambda m, x, v: m.fill(x, v[0]),
        X,
        V,
        variants={"number": lambda m, x, v: m.fill(x, 0.5) * x},
        notes="the value's derivative is taken",
    )
)
_UNARY["jax_function"] = _add(
    _entry(
        "jax_function",
        "unary",
        lambda m, x: m.jax_function(jnp.sinc)(x),
        X,
        notes="a JAX function wrapped as an op (batched_grad only)",
    )
)
_UNARY["to"] = _add(
    _entry(
        "to",
        "unary",
        lambda m, x: m.to(m.to(x, m.float32), m.float64),
        X,
        notes="no torch.to: Tensor.to in torch",
    )
)
_UNARY["detach"] = _unary("detach", **_no_grad("the result is cut from the graph"))
for _name in ("isfinite", "isinf", "isnan", "isneginf", "isposinf", "isreal", "signbit", "logical_not"):
    _UNARY[_name] = _unary(_name, dtypes=ALL, **BOOL_RESULT)
_UNARY["bitwise_not"] = _add(
    _entry(
        "bitwise_not",
        "unary",
        _by_name("bitwise_not"),
        Arg((3, 3), SMALL_INT),
        dtypes=INTEGERS + ("bool",),
        **_no_grad("integers only", "int"),
    )
)
_UNARY["imag"] = _add(
    _entry(
        "imag",
        "complex",
        lambda m, x, y: m.imag(m.complex(x, y)),
        X,
        X,
        notes="of a complex tensor (a real one has no imaginary part)",
    )
)
_UNARY["complex"] = _add(_entry("complex", "complex", lambda m, x, y: m.view_as_real(m.complex(x, y)), X, X))
_UNARY["polar"] = _add(
    _entry("polar", "complex", lambda m, r, a: m.view_as_real(m.polar(r, a)), PX, X, notes="a complex result")
)
_UNARY["view_as_real"] = _add(
    _entry("view_as_real", "complex", lambda m, x, y: m.view_as_real(m.complex(x, y)) * 2, X, X)
)
_UNARY["view_as_complex"] = _add(
    _entry("view_as_complex", "complex", lambda m, x: m.view_as_real(m.view_as_complex(x) * 2), Arg((3, 2), REAL))
)


# ---- elementwise binary ---------------------------------------------------------------------------------------
def _binary(name, a=X, b=V, *, family="binary", **kw):
    return _add(_entry(name, family, _by_name(name), a, b, **kw))


_BINARY = {}
_BINARY["add"] = _add(
    _entry(
        "add",
        "binary",
        lambda m, x, y: m.add(x, y, alpha=2),
        X,
        V,
        variants={"number": lambda m, x, y: m.add(x, 1.5, alpha=-2) + y},
        number_call=lambda m, x, c: m.add(x, c),
    )
)
_BINARY["sub"] = _add(
    _entry(
        "sub",
        "binary",
        _by_name("sub"),
        X,
        V,
        variants={"alpha": lambda m, x, y: m.sub(x, y, alpha=0.5)},
        number_call=lambda m, x, c: m.sub(x, c),
    )
)
_BINARY["mul"] = _binary("mul", number_call=lambda m, x, c: m.mul(x, c))
_BINARY["div"] = _binary(
    "div",
    X,
    Arg((3,), POS),
    variants={"floor": lambda m, x, y: m.div(x, y, rounding_mode="floor") * x},
    number_call=lambda m, x, c: m.div(x, c),
)
_BINARY["true_divide"] = _binary("true_divide", X, Arg((3,), POS), number_call=lambda m, x, c: m.true_divide(x, c))
_BINARY["floor_divide"] = _binary("floor_divide", X, Arg((3,), POS), notes="zero derivative (torch has none)")
_BINARY["remainder"] = _binary("remainder", X, Arg((3,), POS), number_call=lambda m, x, c: m.remainder(x, c))
_BINARY["fmod"] = _binary("fmod", X, Arg((3,), POS), number_call=lambda m, x, c: m.fmod(x, c))
_BINARY["pow"] = _add(
    _entry(
        "pow",
        "binary",
        _by_name("pow"),
        PX,
        V,
        variants={"number_exponent": lambda m, x, y: m.pow(x, 3) * y, "number_base": lambda m, x, y: m.pow(2.5, y)},
        number_call=lambda m, x, c: m.pow(x, c),
    )
)
_BINARY["float_power"] = _binary(
    "float_power",
    PX,
    V,
    variants={"number": lambda m, x, y: m.float_power(x, 3) * y},
    number_call=lambda m, x, c: m.float_power(x, c),
)
_BINARY["atan2"] = _binary("atan2")
_BINARY["maximum"] = _binary("maximum")
_BINARY["minimum"] = _binary("minimum")
_BINARY["fmax"] = _binary("fmax")
_BINARY["fmin"] = _binary("fmin")
_BINARY["hypot"] = _binary("hypot")
_BINARY["copysign"] = _binary(
    "copysign",
    variants={"number": lambda m, x, y: m.copysign(x, -1) * y},
    number_call=lambda m, x, c: m.copysign(x, -c),
)
_BINARY["logaddexp"] = _binary("logaddexp")
_BINARY["logaddexp2"] = _binary("logaddexp2")
_BINARY["xlogy"] = _binary(
    "xlogy",
    X,
    Arg((3,), POS),
    variants={"number": lambda m, x, y: m.xlogy(2.5, y) * x},
    number_call=lambda m, x, c: m.xlogy(x, c),
)
_BINARY["ldexp"] = _binary("ldexp", X, Arg((3,), SMALL))
_BINARY["nextafter"] = _binary("nextafter", **_no_grad("a step to the next float (torch has no derivative)"))
_BINARY["heaviside"] = _binary("heaviside", **_no_grad("a step function (torch has no derivative)"))
_BINARY["igamma"] = _add(
    _entry(
        "igamma",
        "binary",
        lambda m, a, x: m.igamma(a.detach(), x),
        PX,
        Arg((3,), POS),
        notes="differentiable in `other` only (torch has no derivative in `input`)",
    )
)
_BINARY["igammac"] = _add(
    _entry(
        "igammac", "binary", lambda m, a, x: m.igammac(a.detach(), x), PX, Arg((3,), POS), notes=_BINARY["igamma"].notes
    )
)
_BINARY["rsub"] = _binary(
    "rsub", variants={"alpha": lambda m, x, y: m.rsub(x, y, alpha=2)}, number_call=lambda m, x, c: m.rsub(x, c)
)
_BINARY["lerp"] = _add(
    _entry(
        "lerp",
        "binary",
        lambda m, x, y: m.lerp(x, y, 0.3),
        X,
        V,
        variants={"tensor_weight": lambda m, x, y: m.lerp(x, y, m.sigmoid(y))},
        number_call=lambda m, x, c: m.lerp(x, x * 2, c),
    )
)
_BINARY["clamp"] = _add(
    _entry(
        "clamp",
        "binary",
        lambda m, x: m.clamp(x, -0.5, 0.5),
        X,
        variants={
            "min_only": lambda m, x: m.clamp(x, min=0.5),
        },
        number_call=lambda m, x, c: m.clamp(x, -c, c),
    )
)
_BINARY["clip"] = _add(
    _entry("clip", "binary", lambda m, x: m.clip(x, max=0.2), X, number_call=lambda m, x, c: m.clip(x, -c, c))
)
_BINARY["clamp_min"] = _add(
    _entry("clamp_min", "binary", lambda m, x: m.clamp_min(x, 0.1), X, number_call=lambda m, x, c: m.clamp_min(x, c))
)
_BINARY["clamp_max"] = _binary("clamp_max", number_call=lambda m, x, c: m.clamp_max(x, c))
_BINARY["where"] = _add(
    _entry(
        "where",
        "binary",
        lambda m, x, y: m.where(x > y, x, y * 2),
        X,
        V,
        variants={"number": lambda m, x, y: m.where(x > 0, x, 0.5) * y},
        number_call=lambda m, x, c: m.where(x > 0, x, c),
    )
)
_BINARY["addcmul"] = _add(
    _entry(
        "addcmul",
        "binary",
        lambda m, a, b, c: m.addcmul(a, b, c, value=-0.5),
        X,
        X,
        V,
        number_call=lambda m, x, c: m.addcmul(x, x, x, value=c),
    )
)
_BINARY["addcdiv"] = _add(
    _entry("addcdiv", "binary", lambda m, a, b, c: m.addcdiv(a, b, c, value=2), X, X, Arg((3,), POS))
)
for _name, _base in [("divide", "div"), ("multiply", "mul"), ("subtract", "sub"), ("arctan2", "atan2")]:
    _BINARY[_name] = _add(_alias(_name, _BINARY[_base]))
for _name in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"):
    _BINARY[_name] = _binary(_name, dtypes=ALL, **BOOL_RESULT)
_BINARY["isclose"] = _binary("isclose", dtypes=FLOATS + INTEGERS, **BOOL_RESULT)
for _name, _base in [
    ("greater", "gt"),
    ("greater_equal", "ge"),
    ("less", "lt"),
    ("less_equal", "le"),
    ("not_equal", "ne"),
]:
    _BINARY[_name] = _add(_alias(_name, _BINARY[_base]))
_INTS = dict(dtypes=INTEGERS + ("bool",), **_no_grad("integers only", "int"))  # (gcd, lcm and shifts: integers)
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor", "gcd", "lcm"):
    _BINARY[_name] = _binary(_name, Arg((3, 3), SMALL_INT), Arg((3,), SMALL_INT), **_INTS)
for _name in ("bitwise_left_shift", "bitwise_right_shift"):
    _BINARY[_name] = _binary(_name, Arg((3, 3), SMALL_INT), Arg((3,), Domain("shifts", 0, 3, "int")), **_INTS)

# ---- in-place forms -----------------------------------------------------------------------------------------------
_IN_PLACE_OF = {
    **{
        f"{n}_": _UNARY[n]
        for n in "abs acos acosh asin asinh atan atanh ceil cos cosh deg2rad erf erfc exp exp2".split()
    },
    **{f"{n}_": _UNARY[n] for n in "expm1 floor frac i0 log log10 log1p log2 logit nan_to_num neg rad2deg".split()},
    **{
        f"{n}_": _UNARY[n]
        for n in "reciprocal relu round rsqrt sigmoid sin sinc sinh sqrt square tan tanh trunc".split()
    },
    **{f"{n}_": _UNARY[n] for n in "arccos arccosh arcsin arcsinh arctan arctanh fix negative conj_physical".split()},
    **{f"{n}_": _BINARY[n] for n in "clamp clamp_max clamp_min clip ldexp xlogy gcd lcm".split()},
}
_NO_GRAD_IN_PLACE = _no_grad("torch has no derivative of the in-place form (its backward raises: not implemented)")
_NO_INPLACE_DERIVATIVE = ("acosh_", "asinh_", "atanh_", "arccosh_", "arcsinh_", "arctanh_")
_INPLACE = {
    name: _add(_inplace(name, base, **(_NO_GRAD_IN_PLACE if name in _NO_INPLACE_DERIVATIVE else {})))
    for name, base in _IN_PLACE_OF.items()
}
_INPLACE["fill_"] = _add(
    _entry(
        "fill_",
        "inplace",
        lambda m, x, v: m.fill_(x.clone(), v[1]) * x,
        X,
        V,
        number_call=lambda m, x, c: m.fill_(x.clone(), c),
    )
)
_INPLACE["zero_"] = _add(_entry("zero_", "inplace", lambda m, x: m.zero_(x.clone()) + x, X, notes="zero derivative"))
_INPLACE["detach_"] = _add(
    _entry("detach_", "inplace", lambda m, x: m.detach_(x * 1), X, **_no_grad("the result is cut from the graph"))
)
_INPLACE["index_put_"] = _add(
    _entry(
        "index_put_",
        "inplace",
        lambda m, x, v: m.index_put_(x.clone(), (m.tensor([0, 2]),), v[:2, None] * 2, accumulate=True),
        X,
        V,
    )
)


# ---- reductions -----------------------------------------------------------------------------------------------
def _reduction(name, call, *args, family="reductions", **kw):
    return _add(_entry(name, family, call, *(args or (X,)), **kw))


_REDUCTIONS = {}
_REDUCTIONS["sum"] = _reduction("sum", lambda m, t: m.sum(t, 1), T, variants={"all": lambda m, t: m.sum(t)})
_REDUCTIONS["mean"] = _reduction("mean", lambda m, t: m.mean(t, (0, 2)), T)
_REDUCTIONS["prod"] = _reduction("prod", lambda m, x: m.prod(x, 0), SX, variants={"all": lambda m, x: m.prod(x)})
_REDUCTIONS["amax"] = _reduction("amax", lambda m, t: m.amax(t, -1), T)
_REDUCTIONS["amin"] = _reduction("amin", lambda m, x: m.amin(x), X)
_REDUCTIONS["max"] = _reduction(
    "max",
    lambda m, x: m.max(x, 1),
    X,
    variants={"all": lambda m, x: m.max(x), "binary": lambda m, x: m.max(x, x.flip(0))},
    notes="(values, indices) with a dim",
)
_REDUCTIONS["min"] = _reduction("min", lambda m, x: m.min(x, 0), X, variants={"all": lambda m, x: m.min(x)})
_REDUCTIONS["var"] = _reduction(
    "var", lambda m, t: m.var(t, 1), T, variants={"correction": lambda m, t: m.var(t, correction=0)}
)
_REDUCTIONS["std"] = _reduction(
    "std", lambda m, x: m.std(x, 0), X, variants={"correction": lambda m, x: m.std(x, correction=0)}
)
_REDUCTIONS["var_mean"] = _reduction("var_mean", lambda m, t: m.var_mean(t, 1), T)
_REDUCTIONS["std_mean"] = _reduction("std_mean", lambda m, t: m.std_mean(t, (0, 2)), T)
_REDUCTIONS["norm"] = _reduction("norm", lambda m, x: m.norm(x), X, variants={"p1_dim": lambda m, x: m.norm(x, 1, 0)})
_REDUCTIONS["logsumexp"] = _reduction("logsumexp", lambda m, t: m.logsumexp(t, 2), T)
_REDUCTIONS["cumsum"] = _reduction("cumsum", lambda m, x: m.cumsum(x, 1), X)
_REDUCTIONS["cumprod"] = _reduction("cumprod", lambda m, x: m.cumprod(x, 0), X)
_REDUCTIONS["logcumsumexp"] = _reduction("logcumsumexp", lambda m, x: m.logcumsumexp(x, 1), X, family="statistics")
_REDUCTIONS["cummax"] = _reduction("cummax", lambda m, x: m.cummax(x, 1), X, family="statistics")
_REDUCTIONS["cummin"] = _reduction("cummin", lambda m, x: m.cummin(x, 0), X, family="statistics")
_REDUCTIONS["aminmax"] = _reduction("aminmax", lambda m, x: m.aminmax(x, dim=1), X, family="statistics")
_REDUCTIONS["median"] = _reduction(
    "median", lambda m, x: m.median(x, 1), X, family="statistics", variants={"all": lambda m, x: m.median(x)}
)
_REDUCTIONS["nanmedian"] = _reduction("nanmedian", lambda m, x: m.nanmedian(m.log(x), 0), X, family="statistics")
_REDUCTIONS["kthvalue"] = _reduction("kthvalue", lambda m, x: m.kthvalue(x, 2), X, family="statistics")
_REDUCTIONS["mode"] = _reduction(
    "mode", lambda m, x: m.mode(x, 1), X, family="statistics", notes="distinct values: the mode is the smallest"
)
_REDUCTIONS["msort"] = _reduction("msort", _by_name("msort"), X, family="statistics")
_REDUCTIONS["nansum"] = _reduction("nansum", lambda m, x: m.nansum(m.log(x), 1), X, family="statistics")
_REDUCTIONS["nanmean"] = _reduction("nanmean", lambda m, x: m.nanmean(m.log(x)), X, family="statistics")
_REDUCTIONS["quantile"] = _reduction("quantile", lambda m, x: m.quantile(x, 0.3, 1), X, family="statistics")
_REDUCTIONS["nanquantile"] = _reduction(
    "nanquantile", lambda m, x: m.nanquantile(m.log(x), 0.5, 1), X, family="statistics"
)
_REDUCTIONS["diff"] = _reduction("diff", lambda m, x: m.diff(x, 1, 0), X, family="statistics")
_REDUCTIONS["trapezoid"] = _reduction("trapezoid", lambda m, x: m.trapezoid(x, dx=0.5), X, family="statistics")
_REDUCTIONS["trapz"] = _reduction("trapz", lambda m, x: m.trapz(x, dim=0), X, family="statistics")
_REDUCTIONS["cumulative_trapezoid"] = _reduction(
    "cumulative_trapezoid", lambda m, x: m.cumulative_trapezoid(x), X, family="statistics"
)
_REDUCTIONS["gradient"] = _reduction("gradient", lambda m, x: m.gradient(x, spacing=0.5, dim=1), X, family="statistics")
_REDUCTIONS["renorm"] = _reduction("renorm", lambda m, x: m.renorm(x, 2, 0, 2.0), X, family="statistics")
_REDUCTIONS["cov"] = _reduction("cov", _by_name("cov"), Arg((3, 4), REAL), family="statistics")
_REDUCTIONS["corrcoef"] = _reduction("corrcoef", _by_name("corrcoef"), Arg((3, 4), REAL), family="statistics")
_REDUCTIONS["logdet"] = _reduction("logdet", _by_name("logdet"), Arg((3, 3), SPD), family="statistics")
for _name in ("all", "any"):
    _REDUCTIONS[_name] = _reduction(_name, lambda m, x, _n=_name: getattr(m, _n)(x > 0, 1), X, **BOOL_RESULT)
for _name in ("argmax", "argmin"):
    _REDUCTIONS[_name] = _reduction(_name, lambda m, x, _n=_name: getattr(m, _n)(x, 0), X, **INT_RESULT)
_REDUCTIONS["count_nonzero"] = _reduction(
    "count_nonzero", lambda m, x: m.count_nonzero(m.relu(x), 1), X, family="statistics", **_no_grad("a count", "int")
)


# ---- linear algebra -------------------------------------------------------------------------------------------
def _linalg(name, call, *args, **kw):
    return _add(_entry(name, "linalg", call, *args, **kw))


_LINALG = {}
_LINALG["matmul"] = _linalg("matmul", _by_name("matmul"), T, X, variants={"vector": lambda m, t, x: m.matmul(t, x[0])})
_LINALG["mm"] = _linalg("mm", _by_name("mm"), X, Arg((3, 2), REAL))
_LINALG["bmm"] = _linalg("bmm", _by_name("bmm"), T, T)
_LINALG["mv"] = _linalg("mv", _by_name("mv"), X, V)
_LINALG["dot"] = _linalg("dot", _by_name("dot"), V, V)
_LINALG["vdot"] = _linalg("vdot", _by_name("vdot"), V, V)
_LINALG["inner"] = _linalg("inner", _by_name("inner"), X, Arg((2, 3), REAL))
_LINALG["outer"] = _linalg("outer", _by_name("outer"), V, Arg((2,), REAL))
_LINALG["ger"] = _linalg("ger", _by_name("ger"), V, Arg((2,), REAL))
_LINALG["einsum"] = _linalg("einsum", lambda m, t, x: m.einsum("bij,jk->bik", t, x), T, X)
_LINALG["tensordot"] = _linalg("tensordot", lambda m, t, x: m.tensordot(t, x, 1), T, X)
_LINALG["trace"] = _linalg("trace", _by_name("trace"), X)
_LINALG["diag"] = _linalg("diag", _by_name("diag"), V, variants={"of_matrix": lambda m, v: m.diag(m.outer(v, v), 1)})
_LINALG["diagonal"] = _linalg("diagonal", lambda m, t: m.diagonal(t, 0, 1, 2), T)
_LINALG["diag_embed"] = _linalg("diag_embed", lambda m, x: m.diag_embed(x, 1), Arg((2, 3), REAL))
_LINALG["diagflat"] = _linalg("diagflat", lambda m, x: m.diagflat(x, -1), Arg((2, 2), REAL))
_LINALG["tril"] = _linalg("tril", _by_name("tril"), X)
_LINALG["triu"] = _linalg("triu", lambda m, x: m.triu(x, 1), X)
_LINALG["addmm"] = _linalg("addmm", lambda m, v, a, b: m.addmm(v, a, b, beta=0.5, alpha=-2), V, X, X)
_LINALG["addmv"] = _linalg("addmv", lambda m, v, a, w: m.addmv(v, a, w, alpha=3), V, X, V)
_LINALG["addr"] = _linalg("addr", lambda m, a, v, w: m.addr(a, v, w, beta=-1), X, V, V)
_LINALG["addbmm"] = _linalg("addbmm", lambda m, a, t, u: m.addbmm(a, t, u, beta=2), X, T, T)
_LINALG["baddbmm"] = _linalg("baddbmm", _by_name("baddbmm"), T, T, T)
_LINALG["chain_matmul"] = _linalg("chain_matmul", _by_name("chain_matmul"), X, SX, Arg((3, 2), REAL))
_LINALG["matrix_power"] = _linalg("matrix_power", lambda m, x: m.matrix_power(x, 3), SX)
_LINALG["matrix_exp"] = _linalg("matrix_exp", _by_name("matrix_exp"), SX)
_LINALG["det"] = _linalg("det", _by_name("det"), Arg((3, 3), WELL))
_LINALG["slogdet"] = _linalg("slogdet", _by_name("slogdet"), Arg((3, 3), WELL), notes="the sign has zero derivative")
_LINALG["inverse"] = _linalg("inverse", _by_name("inverse"), Arg((3, 3), WELL))
_LINALG["pinverse"] = _linalg("pinverse", _by_name("pinverse"), Arg((3, 2), REAL))
_LINALG["cholesky"] = _linalg("cholesky", _by_name("cholesky"), Arg((3, 3), SPD))
_LINALG["cholesky_inverse"] = _linalg("cholesky_inverse", _by_name("cholesky_inverse"), Arg((3, 3), LOWER))
_LINALG["cholesky_solve"] = _linalg("cholesky_solve", _by_name("cholesky_solve"), Arg((3, 2), REAL), Arg((3, 3), LOWER))
_LINALG["triangular_solve"] = _linalg(
    "triangular_solve", lambda m, b, a: m.triangular_solve(b, a, upper=False)[0], Arg((3, 2), REAL), Arg((3, 3), WELL)
)
_LINALG["lu"] = _linalg("lu", _by_name("lu"), Arg((3, 3), WELL), notes="(LU, pivots); the pivots are integers")
_LINALG["lu_solve"] = _linalg(
    "lu_solve", lambda m, b, a: m.lu_solve(b, *m.lu(a)), Arg((3, 2), REAL), Arg((3, 3), WELL), notes="through lu"
)
_LINALG["lu_unpack"] = _linalg("lu_unpack", lambda m, a: m.lu_unpack(*m.lu(a)), Arg((3, 3), WELL), notes="through lu")
_LINALG["qr"] = _linalg("qr", _by_name("qr"), Arg((3, 2), REAL))
_LINALG["svd"] = _linalg(
    "svd", lambda m, a: m.svd(a).S, Arg((3, 2), REAL), notes="singular values (the vectors' signs are arbitrary)"
)
_LINALG["orgqr"] = _linalg("orgqr", _by_name("orgqr"), Arg((3, 2), REAL), Arg((2,), SMALL))
for _name, _call, _args in [
    ("linalg.norm", lambda m, x: m.linalg.norm(x), (X,)),
    ("linalg.solve", lambda m, a, b: m.linalg.solve(a, b), (Arg((3, 3), SPD), X)),
    ("linalg.inv", lambda m, a: m.linalg.inv(a), (Arg((3, 3), SPD),)),
    ("linalg.det", lambda m, a: m.linalg.det(a), (Arg((3, 3), SPD),)),
    ("linalg.slogdet", lambda m, a: m.linalg.slogdet(a).logabsdet, (Arg((3, 3), SPD),)),
    ("linalg.cholesky", lambda m, a: m.linalg.cholesky(a), (Arg((3, 3), SPD),)),
    ("linalg.eigh", lambda m, a: m.linalg.eigh(a).eigenvalues, (Arg((3, 3), SPD),)),
    ("linalg.svd", lambda m, a: m.linalg.svd(a).S, (Arg((3, 3), SPD),)),
    ("linalg.qr", lambda m, a: m.linalg.qr(a).R.abs(), (Arg((3, 3), SPD),)),
]:
    _LINALG[_name] = _linalg(_name, _call, *_args)


# ---- shapes and views -----------------------------------------------------------------------------------------
def _shape(name, call, *args, **kw):
    return _add(_entry(name, "shape", call, *(args or (X,)), **kw))


_SHAPES = {}
_SHAPES["reshape"] = _shape("reshape", lambda m, t: m.reshape(t, (6, 3)), T)
_SHAPES["view"] = _shape("view", lambda m, x: m.view(x, 9), notes="no torch.view: Tensor.view in torch")
_SHAPES["view_as"] = _shape("view_as", lambda m, x: m.view_as(x, x.reshape(9)), X, notes="no torch.view_as")
_SHAPES["flatten"] = _shape("flatten", lambda m, t: m.flatten(t, 1), T)
_SHAPES["ravel"] = _shape("ravel", lambda m, x: m.ravel(x.T), X)
_SHAPES["unflatten"] = _shape("unflatten", lambda m, v: m.unflatten(v, 0, (1, 3)), V)
_SHAPES["squeeze"] = _shape("squeeze", lambda m, x: m.squeeze(x[None]), X)
_SHAPES["unsqueeze"] = _shape("unsqueeze", lambda m, v: m.unsqueeze(v, 1), V)
_SHAPES["expand"] = _shape("expand", lambda m, v: m.expand(v, 2, 3), V, notes="no torch.expand: Tensor.expand")
_SHAPES["expand_as"] = _shape("expand_as", lambda m, v, x: m.expand_as(v, x), V, X, notes="no torch.expand_as")
_SHAPES["broadcast_to"] = _shape("broadcast_to", lambda m, v: m.broadcast_to(v, (2, 3)), V)
_SHAPES["broadcast_tensors"] = _shape("broadcast_tensors", lambda m, x, v: m.broadcast_tensors(x, v[:, None]), X, V)
_SHAPES["permute"] = _shape("permute", lambda m, t: m.permute(t, (2, 0, 1)), T)
_SHAPES["transpose"] = _shape("transpose", lambda m, t: m.transpose(t, 0, 2), T)
_SHAPES["movedim"] = _shape("movedim", lambda m, t: m.movedim(t, 0, -1), T)
_SHAPES["t"] = _shape("t", _by_name("t"), X)
_SHAPES["adjoint"] = _shape("adjoint", _by_name("adjoint"), T)
_SHAPES["cat"] = _shape("cat", lambda m, x, y: m.cat([x, y], 1), X, Arg((3, 2), REAL))
_SHAPES["stack"] = _shape("stack", lambda m, x, y: m.stack([x, y], 2), X, X)
_SHAPES["hstack"] = _shape("hstack", lambda m, v, w: m.hstack([v, w]), V, V)
_SHAPES["vstack"] = _shape("vstack", lambda m, v, x: m.vstack([v, x]), V, X)
_SHAPES["dstack"] = _shape("dstack", lambda m, x, y: m.dstack([x, y]), X, X)
_SHAPES["column_stack"] = _shape("column_stack", lambda m, v, x: m.column_stack([v, x.T]), V, X)
_SHAPES["atleast_1d"] = _shape("atleast_1d", lambda m, x: m.atleast_1d(x[0, 0]) * 2, X)
_SHAPES["atleast_2d"] = _shape("atleast_2d", lambda m, v: m.atleast_2d(v), V)
_SHAPES["atleast_3d"] = _shape("atleast_3d", lambda m, x, v: m.atleast_3d(x, v), X, V)
_SHAPES["split"] = _shape("split", lambda m, x: m.split(x, 2, 1), X)
_SHAPES["unsafe_split"] = _shape("unsafe_split", lambda m, x: m.unsafe_split(x, 2, 0), X)
_SHAPES["split_with_sizes"] = _shape("split_with_sizes", lambda m, x: m.split_with_sizes(x, [1, 2], 1), X)
_SHAPES["unsafe_split_with_sizes"] = _shape(
    "unsafe_split_with_sizes", lambda m, x: m.unsafe_split_with_sizes(x, [2, 1], 0), X
)
_SHAPES["tensor_split"] = _shape("tensor_split", lambda m, x: m.tensor_split(x, [1, 2], dim=1), X)
_SHAPES["hsplit"] = _shape("hsplit", lambda m, x: m.hsplit(x, [1]), X)
_SHAPES["vsplit"] = _shape("vsplit", lambda m, x: m.vsplit(x, [2]), X)
_SHAPES["dsplit"] = _shape("dsplit", lambda m, t: m.dsplit(t, [1]), T)
_SHAPES["chunk"] = _shape("chunk", lambda m, t: m.chunk(t, 2), T)
_SHAPES["unsafe_chunk"] = _shape("unsafe_chunk", lambda m, x: m.unsafe_chunk(x, 2, 1), X)
_SHAPES["unbind"] = _shape("unbind", lambda m, x: m.unbind(x, 1), X)
_SHAPES["flip"] = _shape("flip", lambda m, x: m.flip(x, [0, 1]), X)
_SHAPES["fliplr"] = _shape("fliplr", _by_name("fliplr"), X)
_SHAPES["flipud"] = _shape("flipud", _by_name("flipud"), X)
_SHAPES["rot90"] = _shape("rot90", lambda m, t: m.rot90(t, -1, [2, 0]), T)
_SHAPES["roll"] = _shape("roll", lambda m, x: m.roll(x, 1, 0), X, variants={"flat": lambda m, x: m.roll(x, 2)})
_SHAPES["repeat"] = _shape("repeat", lambda m, v: m.repeat(v, 2, 2), V, notes="no torch.repeat: Tensor.repeat")
_SHAPES["tile"] = _shape("tile", lambda m, v: m.tile(v, (2,)), V)
_SHAPES["repeat_interleave"] = _shape(
    "repeat_interleave",
    lambda m, x: m.repeat_interleave(x, 2, 1),
    X,
    variants={"tensor": lambda m, x: m.repeat_interleave(x, m.tensor([1, 0, 2]), 0)},
)
_SHAPES["narrow"] = _shape("narrow", lambda m, x: m.narrow(x, 1, 1, 2), X)
_SHAPES["select"] = _shape("select", lambda m, t: m.select(t, 1, 2), T)
_SHAPES["as_strided"] = _shape(
    "as_strided",
    lambda m, x: m.as_strided(x, (2, 2), (1, 3), 1),
    X,
    variants={"overlapping": lambda m, x: m.as_strided(x, (3, 2), (1, 1))},
)
_SHAPES["as_strided_"] = _shape("as_strided_", lambda m, x: m.as_strided_(x * 1, (2, 2), (1, 3), 1), X)
_SHAPES["block_diag"] = _shape("block_diag", lambda m, x, v: m.block_diag(x, v, x[0, 0]), X, V)
_SHAPES["cartesian_prod"] = _shape("cartesian_prod", lambda m, v, w: m.cartesian_prod(v, w), V, Arg((2,), REAL))
_SHAPES["combinations"] = _shape("combinations", lambda m, v: m.combinations(v, 2), V)
_SHAPES["meshgrid"] = _shape("meshgrid", lambda m, v, w: m.meshgrid(v, w, indexing="ij"), V, Arg((2,), REAL))
_SHAPES["kron"] = _shape("kron", _by_name("kron"), Arg((2, 2), REAL), Arg((2, 1), REAL))
_SHAPES["cross"] = _shape("cross", lambda m, x, y: m.cross(x, y, dim=1), X, X)
_SHAPES["vander"] = _shape("vander", lambda m, v: m.vander(v, 4), SV)
_SHAPES["constant_pad_nd"] = _shape("constant_pad_nd", lambda m, x: m.constant_pad_nd(x, [1, 2, 0, 1], 3.5), X)
_SHAPES["channel_shuffle"] = _shape("channel_shuffle", lambda m, x: m.channel_shuffle(x, 2), Arg((1, 4, 2, 2), REAL))
_SHAPES["pixel_shuffle"] = _shape("pixel_shuffle", lambda m, x: m.pixel_shuffle(x, 2), Arg((1, 4, 2, 2), REAL))
_SHAPES["pixel_unshuffle"] = _shape("pixel_unshuffle", lambda m, x: m.pixel_unshuffle(x, 2), Arg((1, 1, 4, 2), REAL))
_SHAPES["asarray"] = _shape("asarray", lambda m, x: m.asarray(x) * 2, X, notes="a tensor itself (shared, not copied)")
for _name, _base in [("concat", "cat"), ("concatenate", "cat"), ("row_stack", "vstack"), ("swapaxes", "transpose")]:
    _SHAPES[_name] = _add(_alias(_name, _SHAPES[_base]))
_SHAPES["swapdims"] = _add(_alias("swapdims", _SHAPES["transpose"]))
_SHAPES["moveaxis"] = _add(_alias("moveaxis", _SHAPES["movedim"]))
_SHAPES["Tensor.T"] = _shape("Tensor.T", lambda m, x: x.T, X)
_SHAPES["Tensor.mT"] = _shape("Tensor.mT", lambda m, t: t.mT, T)


# ---- indexing, scatters, searches -----------------------------------------------------------------------------
def _indexing(name, call, *args, **kw):
    return _add(_entry(name, "indexing", call, *(args or (X,)), **kw))


def _idx(m, *values):
    return m.tensor(list(values))


_INDEXING = {}
_INDEXING["Tensor.__getitem__"] = _indexing(
    "Tensor.__getitem__",
    lambda m, x: x[1],
    X,
    variants={
        "slice": lambda m, x: x[:, 1:],
        "none_ellipsis": lambda m, t: t[..., None, 0],
        "int_tensor": lambda m, x: x[_idx(m, 2, 0, 2)],
        "mask": lambda m, x: x[x > 0],
        "two_lists": lambda m, x: x[[0, 2], [1, 1]],
    },
)


def _setitem(m, x, y):
    z = x * 1
    z[0, 1:] = y[2, :2]
    z[_idx(m, 2)] = 0.0
    return z


_INDEXING["Tensor.__setitem__"] = _indexing("Tensor.__setitem__", _setitem, X, X)
_INDEXING["index_select"] = _indexing("index_select", lambda m, x: m.index_select(x, 1, _idx(m, 2, 0)))
_INDEXING["gather"] = _indexing("gather", lambda m, x: m.gather(x, 1, m.tensor([[0, 0], [1, 2], [2, 1]])))
_INDEXING["take_along_dim"] = _indexing(
    "take_along_dim", lambda m, x: m.take_along_dim(x, m.tensor([[0], [2], [1]]), 1)
)
_INDEXING["take"] = _indexing("take", lambda m, x: m.take(x, m.tensor([[0, 5], [8, -1]])))
_INDEXING["scatter"] = _indexing(
    "scatter",
    lambda m, x, y: m.scatter(x, 0, m.tensor([[2, 1, 0]]), y),
    X,
    X,
    variants={"value": lambda m, x, y: m.scatter(x, 1, m.tensor([[1], [0], [2]]), value=0.5) * y},
)
_INDEXING["scatter_add"] = _indexing(
    "scatter_add", lambda m, x, y: m.scatter_add(x, 1, m.tensor([[0, 0, 1]] * 3), y), X, X
)
_INDEXING["scatter_reduce"] = _indexing(
    "scatter_reduce", lambda m, x, y: m.scatter_reduce(x, 1, m.tensor([[0, 2, 0]] * 3), y, "sum"), X, X
)
_INDEXING["index_add"] = _indexing("index_add", lambda m, x, y: m.index_add(x, 0, _idx(m, 0, 2, 0), y, alpha=2), X, X)
_INDEXING["index_copy"] = _indexing(
    "index_copy", lambda m, x, y: m.index_copy(x, 1, _idx(m, 2, 0), y), X, Arg((3, 2), REAL)
)
_INDEXING["index_fill"] = _indexing("index_fill", lambda m, x: m.index_fill(x, 1, _idx(m, 0, 2), 1.5))
_INDEXING["index_put"] = _indexing(
    "index_put", lambda m, x, v: m.index_put(x, (_idx(m, 0, 2), _idx(m, 1, 0)), v[:2]), X, V
)
_INDEXING["index_reduce"] = _indexing(
    "index_reduce", lambda m, x, y: m.index_reduce(x, 0, _idx(m, 0, 2, 0), y, "prod"), X, X
)
_INDEXING["put"] = _indexing("put", lambda m, x, v: m.put(x, _idx(m, 0, 5), v[:2]), X, V)
_INDEXING["masked_fill"] = _indexing(
    "masked_fill",
    lambda m, x, y: m.masked_fill(x, y > 0, 0.5),
    X,
    X,
    number_call=lambda m, x, c: m.masked_fill(x, x > c, -1.0),
)
_INDEXING["masked_select"] = _indexing("masked_select", lambda m, x, y: m.masked_select(x, y < 0), X, X)
_INDEXING["masked_scatter"] = _indexing("masked_scatter", lambda m, x, v: m.masked_scatter(x, x > 0, v.repeat(3)), X, V)
_INDEXING["diagonal_scatter"] = _indexing("diagonal_scatter", lambda m, x, v: m.diagonal_scatter(x, v[:2], 1), X, V)
_INDEXING["select_scatter"] = _indexing("select_scatter", lambda m, x, v: m.select_scatter(x, v, 1, -1), X, V)
_INDEXING["slice_scatter"] = _indexing(
    "slice_scatter", lambda m, x, y: m.slice_scatter(x, y, 1, 0, None, 2), X, Arg((3, 2), REAL)
)
_INDEXING["sort"] = _indexing("sort", lambda m, x: m.sort(x, 1), X, notes="(values, indices)")
_INDEXING["topk"] = _indexing("topk", lambda m, x: m.topk(x, 2, 0), X, notes="(values, indices)")
_INDEXING["embedding"] = _indexing(
    "embedding", lambda m, w: m.embedding(w, m.tensor([[0, 2], [1, 0]])), Arg((3, 4), REAL), notes="weight first"
)
_INDEXING["embedding_renorm_"] = _indexing(
    "embedding_renorm_",
    lambda m, w: m.embedding_renorm_(w.detach().clone(), m.tensor([0, 2, 2]), 1.5, 2.0),
    Arg((3, 4), REAL),
    **_no_grad("torch has no derivative of embedding_renorm_"),
)
_INDEXING["argsort"] = _indexing("argsort", lambda m, x: m.argsort(x, 1), **INT_RESULT)
_INDEXING["nonzero"] = _indexing("nonzero", lambda m, x: m.nonzero(x > 0), **INT_RESULT)
_INDEXING["argwhere"] = _indexing("argwhere", lambda m, x: m.argwhere(x > 0), **INT_RESULT)
_INDEXING["nonzero_static"] = _indexing("nonzero_static", lambda m, x: m.nonzero_static(x > 0, size=4), **INT_RESULT)
_INDEXING["unravel_index"] = _indexing(
    "unravel_index",
    lambda m, i: m.unravel_index(i, (3, 4)),
    Arg((5,), Domain("flat indices", 0, 12, "int")),
    **INT_RESULT,
)
_INDEXING["searchsorted"] = _indexing(
    "searchsorted", lambda m, v, x: m.searchsorted(m.sort(v).values, x), V, X, **INT_RESULT
)
_INDEXING["bucketize"] = _indexing("bucketize", lambda m, x, v: m.bucketize(x, m.sort(v).values), X, V, **INT_RESULT)
_INDEXING["bincount"] = _indexing(
    "bincount",
    lambda m, i, w: m.bincount(i, w),
    Arg((3,), INDEX3),
    V,
    **_no_grad("counts (torch has no derivative of the weights)"),
)
_INDEXING["histc"] = _indexing(
    "histc", lambda m, x: m.histc(x, 4, -3, 3), **_no_grad("counts (torch has no derivative)")
)
_INDEXING["histogram"] = _indexing(
    "histogram", lambda m, x: m.histogram(x, 3), **_no_grad("counts (torch has no derivative)")
)
_INDEXING["histogramdd"] = _indexing(
    "histogramdd", lambda m, x: m.histogramdd(x[:, :2], [3, 2]), **_no_grad("counts (torch has no derivative)")
)
_INDEXING["isin"] = _indexing(
    "isin", lambda m, i, j: m.isin(i, j), Arg((3, 3), SMALL_INT), Arg((3,), SMALL_INT), **BOOL_RESULT
)
_INDEXING["unique"] = _indexing(
    "unique",
    lambda m, x: m.unique(m.round(x), return_counts=True),
    **_no_grad("distinct values (torch has no derivative)"),
)
_INDEXING["unique_consecutive"] = _indexing(
    "unique_consecutive",
    lambda m, x: m.unique_consecutive(m.round(x)),
    **_no_grad("distinct values (torch has no derivative)"),
)


# ---- nn -------------------------------------------------------------------------------------------------------
def _nn(name, call, *args, **kw):
    return _add(_entry(name, "nn", call, *(args or (X,)), **kw))


_NN = {}
_NN["softmax"] = _nn("softmax", lambda m, x: m.softmax(x, 1), X)
_NN["log_softmax"] = _nn("log_softmax", lambda m, x: m.log_softmax(x, 0), X)
_NN["layer_norm"] = _nn("layer_norm", lambda m, x, w, b: m.layer_norm(x, (3,), w, b), Arg((2, 3), REAL), V, V)
_NN["rms_norm"] = _nn("rms_norm", lambda m, x, w: m.rms_norm(x, (3,), w, 1e-5), Arg((2, 3), REAL), V)
_NN["conv1d"] = _nn(
    "conv1d", lambda m, x, w, b: m.conv1d(x, w, b, padding=1), Arg((2, 2, 5), REAL), Arg((3, 2, 3), REAL), V
)
_NN["conv2d"] = _nn(
    "conv2d", lambda m, x, w: m.conv2d(x, w, stride=2), Arg((1, 2, 4, 4), REAL), Arg((2, 2, 2, 2), REAL)
)
_NN["conv3d"] = _nn("conv3d", _by_name("conv3d"), Arg((1, 1, 3, 3, 3), REAL), Arg((2, 1, 2, 2, 2), REAL))
_NN["conv_transpose1d"] = _nn(
    "conv_transpose1d", lambda m, x, w: m.conv_transpose1d(x, w, stride=2), Arg((1, 2, 3), REAL), Arg((2, 3, 2), REAL)
)
_NN["conv_transpose2d"] = _nn(
    "conv_transpose2d", _by_name("conv_transpose2d"), Arg((1, 2, 3, 3), REAL), Arg((2, 1, 2, 2), REAL)
)
_NN["conv_transpose3d"] = _nn(
    "conv_transpose3d", _by_name("conv_transpose3d"), Arg((1, 1, 2, 2, 2), REAL), Arg((1, 2, 2, 2, 2), REAL)
)
_NN["convolution"] = _nn(
    "convolution",
    lambda m, x, w: m.convolution(x, w, None, [1, 1], [1, 0], [1, 1], False, [0, 0], 1),
    Arg((1, 1, 3, 3), REAL),
    Arg((1, 1, 2, 2), REAL),
    variants={
        "transposed": lambda m, x, w: m.convolution(x, w, None, [2, 1], [0, 0], [1, 1], True, [1, 0], 1),
    },
)
_NN["bilinear"] = _nn("bilinear", _by_name("bilinear"), Arg((2, 3), REAL), Arg((2, 2), REAL), Arg((4, 3, 2), REAL))
_NN["grid_sampler"] = _nn(
    "grid_sampler",
    lambda m, x, g: m.grid_sampler(x, g, 0, 0, False),
    Arg((2, 2, 3, 4), REAL),
    Arg((2, 3, 2, 2), GRID),
    variants={
        "nearest-border": lambda m, x, g: m.grid_sampler(x, g, 1, 1, True),
        "bicubic-reflection": lambda m, x, g: m.grid_sampler(x, g, 2, 2, False),
    },
)
_NN["grid_sampler_2d"] = _nn(
    "grid_sampler_2d",
    lambda m, x, g: m.grid_sampler_2d(x, g, 0, 2, True),
    Arg((1, 2, 3, 3), REAL),
    Arg((1, 2, 3, 2), GRID),
)
_NN["grid_sampler_3d"] = _nn(
    "grid_sampler_3d",
    lambda m, x, g: m.grid_sampler_3d(x, g, 0, 1, False),
    Arg((1, 2, 2, 3, 2), REAL),
    Arg((1, 2, 1, 2, 3), GRID),
)
_NN["affine_grid_generator"] = _nn(
    "affine_grid_generator",
    lambda m, t: m.affine_grid_generator(t, [2, 1, 3, 4], False),
    Arg((2, 2, 3), REAL),
    variants={"3d-aligned": lambda m, t: m.affine_grid_generator(t.reshape(1, 3, 4), [1, 1, 2, 2, 3], True)},
)
_NN["prelu"] = _nn("prelu", lambda m, x, w: m.prelu(x, w), Arg((2, 3, 2), REAL), Arg((3,), POS))
_NN["celu"] = _nn("celu", lambda m, x: m.celu(x, 0.7), X, number_call=lambda m, x, c: m.celu(x, c))
_NN["selu"] = _nn("selu", _by_name("selu"), X)
_NN["hardshrink"] = _nn(
    "hardshrink", lambda m, x: m.hardshrink(x, 0.7), X, number_call=lambda m, x, c: m.hardshrink(x, c)
)
_NN["fake_quantize_per_tensor_affine"] = _nn(
    "fake_quantize_per_tensor_affine",
    lambda m, x: m.fake_quantize_per_tensor_affine(x, 0.25, 2, -8, 7),
    X,
    variants={"tensor_qparams": lambda m, x: m.fake_quantize_per_tensor_affine(x, m.tensor(0.3), m.tensor(-1), -8, 7)},
    notes="straight-through derivative: 1 where the rounded value is inside [quant_min, quant_max]",
)
_NN["fake_quantize_per_channel_affine"] = _nn(
    "fake_quantize_per_channel_affine",
    lambda m, x: m.fake_quantize_per_channel_affine(
        x, m.tensor([0.1, 0.2, 0.3]), m.tensor([0, 1, -1], dtype=m.int32), 1, -8, 7
    ),
    X,
    variants={
        "float_zero_point": lambda m, x: m.fake_quantize_per_channel_affine(
            x, m.tensor([0.1, 0.2, 0.3]), m.tensor([0.5, -1.25, 2.0]), 0, -8, 7
        )
    },
    notes="straight-through derivative, per channel along the given axis",
)
_NN["threshold"] = _nn(
    "threshold", lambda m, x: m.threshold(x, 0.2, -1.0), X, number_call=lambda m, x, c: m.threshold(x, c, -c)
)
_NN["rrelu"] = _nn(
    "rrelu",
    lambda m, x: m.rrelu(x),
    X,
    variants={"training": lambda m, x: m.rrelu(x, training=True)},
    why={"oracle": "random slopes while training: the draws differ from torch's"},
    notes="random slopes while training (fixed once drawn: the batched and per-row grads agree)",
)
_RANDOM = "random: the draws differ from torch's"
for _name in ("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout"):
    _NN[_name] = _nn(
        _name,
        lambda m, x, _n=_name: getattr(m, _n)(x, 0.5, True),
        Arg((2, 3, 2), REAL),
        why={"oracle": _RANDOM},
        notes="the mask is drawn once, in the forward",
    )
_NN["avg_pool1d"] = _nn("avg_pool1d", lambda m, x: m.avg_pool1d(x, 2), Arg((1, 2, 5), REAL))
_NN["max_pool1d"] = _nn("max_pool1d", lambda m, x: m.max_pool1d(x, 2), Arg((1, 2, 5), REAL))
_NN["max_pool1d_with_indices"] = _nn(
    "max_pool1d_with_indices", lambda m, x: m.max_pool1d_with_indices(x, 2), Arg((1, 2, 5), REAL)
)
_NN["max_pool2d"] = _nn("max_pool2d", lambda m, x: m.max_pool2d(x, 2), Arg((1, 4, 4), REAL))
_NN["max_pool3d"] = _nn("max_pool3d", lambda m, x: m.max_pool3d(x, 2), Arg((1, 2, 2, 4), REAL))
_NN["adaptive_avg_pool1d"] = _nn("adaptive_avg_pool1d", lambda m, x: m.adaptive_avg_pool1d(x, 2), Arg((1, 2, 5), REAL))
_NN["adaptive_max_pool1d"] = _nn(
    "adaptive_max_pool1d",
    lambda m, x: m.adaptive_max_pool1d(x, 2)[0],
    Arg((1, 2, 5), REAL),
    notes="torch.adaptive_max_pool1d gives (values, indices): the sweeps read the values",
)
_ONCE = dict(gradgrad=False, notes="torch has no second derivative (_cdist_backward / _pdist_backward)")
_NN["cdist"] = _nn("cdist", _by_name("cdist"), Arg((3, 2), REAL), Arg((4, 2), REAL), **_ONCE)
_NN["pdist"] = _nn("pdist", _by_name("pdist"), Arg((3, 2), REAL), **_ONCE)
_NN["dist"] = _nn("dist", _by_name("dist"), X, V)
_NN["pairwise_distance"] = _nn("pairwise_distance", _by_name("pairwise_distance"), X, X)
_NN["cosine_similarity"] = _nn("cosine_similarity", _by_name("cosine_similarity"), X, X)
_NN["kl_div"] = _nn("kl_div", lambda m, x, y: m.kl_div(x, y, 2), X, PX)
_NN["binary_cross_entropy_with_logits"] = _nn(
    "binary_cross_entropy_with_logits",
    lambda m, x, y: m.binary_cross_entropy_with_logits(x, y, None, None, 1),
    X,
    Arg((3, 3), PROB),
)
_NN["hinge_embedding_loss"] = _nn(
    "hinge_embedding_loss", lambda m, x, y: m.hinge_embedding_loss(x, m.sign(y), 0.5, 1), X, X
)
_NN["margin_ranking_loss"] = _nn(
    "margin_ranking_loss", lambda m, x, y, z: m.margin_ranking_loss(x, y, m.sign(z), 0.1, 2), V, V, V
)
_NN["cosine_embedding_loss"] = _nn(
    "cosine_embedding_loss", lambda m, x, y, v: m.cosine_embedding_loss(x, y, m.sign(v), 0.2), X, X, V
)
_NN["poisson_nll_loss"] = _nn("poisson_nll_loss", lambda m, x, y: m.poisson_nll_loss(x, y, True, False, 1e-8, 1), X, PX)
_NN["triplet_margin_loss"] = _nn(
    "triplet_margin_loss", lambda m, a, p, n: m.triplet_margin_loss(a, p, n, 1.0, 2, 1e-6, True, 0), X, X, X
)
for _name in (
    "dropout_",
    "alpha_dropout_",
    "feature_dropout_",
    "feature_alpha_dropout_",
    "celu_",
    "selu_",
    "rrelu_",
    "threshold_",
):
    _INPLACE[_name] = _add(_inplace(_name, _NN[_name[:-1]]))
_INPLACE["addmv_"] = _add(_inplace("addmv_", _LINALG["addmv"]))
_NN["nn.functional.leaky_relu"] = _nn(
    "nn.functional.leaky_relu",
    lambda m, x: m.nn.functional.leaky_relu(x, 0.2),
    X,
    number_call=lambda m, x, c: m.nn.functional.leaky_relu(x, c),
)
_NN["nn.functional.elu"] = _nn(
    "nn.functional.elu",
    lambda m, x: m.nn.functional.elu(x, 0.7),
    X,
    number_call=lambda m, x, c: m.nn.functional.elu(x, 0.5 + c),
)
_NN["nn.functional.grid_sample"] = _nn(
    "nn.functional.grid_sample",
    lambda m, x, g: m.nn.functional.grid_sample(x, g, padding_mode="border", align_corners=False),
    Arg((1, 2, 3, 4), REAL),
    Arg((1, 3, 2, 2), GRID),
    variants={"bicubic": lambda m, x, g: m.nn.functional.grid_sample(x, g, "bicubic", "zeros", True)},
)
_NN["nn.functional.affine_grid"] = _nn(
    "nn.functional.affine_grid",
    lambda m, t: m.nn.functional.affine_grid(t, (2, 1, 3, 4), align_corners=True),
    Arg((2, 2, 3), REAL),
)
_NN["nn.functional.hardtanh"] = _nn(
    "nn.functional.hardtanh",
    lambda m, x: m.nn.functional.hardtanh(x, -1.5, 0.3),
    X,
    number_call=lambda m, x, c: m.nn.functional.hardtanh(x, -c, c),
)


def _embedding_bag(mode, **kw):
    def call(m, w, p):
        F = m.nn.functional
        last = [6] if kw.get("include_last_offset") else []  # the closing offset is the input's length
        indices, offsets = m.tensor([0, 2, 1, 2, 0, 1]), m.tensor([0, 2, 2, 5] + last)
        if mode == "sum":
            return F.embedding_bag(indices, w, offsets, mode=mode, per_sample_weights=p, **kw)
        return F.embedding_bag(indices, w * p[:3, None], offsets, mode=mode, **kw)

    return call


_NN["nn.functional.embedding_bag"] = _nn(
    "nn.functional.embedding_bag",
    _embedding_bag("sum"),
    Arg((3, 4), REAL),
    Arg((6,), REAL),
    variants={
        "mean-padding": _embedding_bag("mean", padding_idx=2),
        "max": _embedding_bag("max"),
        "sum-last-offset": _embedding_bag("sum", include_last_offset=True),
        "rows": lambda m, w, p: m.nn.functional.embedding_bag(m.tensor([[0, 1], [2, 2]]), w * p[:3, None], mode="max"),
    },
    notes="bags of rows of w (an empty one too); p: per-sample weights (sum) or a row scale (mean, max)",
)


# ---- random draws, factories, queries -------------------------------------------------------------------------
def _hann_spectrum(m, x):
    return m.stft(x, 4, hop_length=2, window=m.hann_window(4, dtype=x.dtype), return_complex=True)


_NN["stft"] = _nn("stft", lambda m, x: _hann_spectrum(m, x).abs(), Arg((12,), REAL))
_NN["istft"] = _nn(
    "istft",
    lambda m, x: m.istft(_hann_spectrum(m, x) * 2, 4, hop_length=2, window=m.hann_window(4, dtype=x.dtype)),
    Arg((12,), REAL),
)
_NN["ctc_loss"] = _nn(
    "ctc_loss",
    lambda m, x: m.ctc_loss(x.log_softmax(-1), m.tensor([[1, 2], [2, 1]]), m.tensor([4, 3]), m.tensor([2, 2])),
    Arg((4, 2, 3), REAL),
    gradgrad=False,
    notes="torch has no second derivative of ctc_loss",
)


def _other(name, call, *args, family, **kw):
    return _add(_entry(name, family, call, *args, **kw))


_OTHERS = {}
_OTHERS["normal"] = _other(
    "normal",
    lambda m, mean, std: m.normal(mean, std),
    X,
    PX,
    family="random",
    why={"oracle": _RANDOM},
    notes="reparametrized: the draw is mean + std * eps",
)
_OTHERS["bernoulli"] = _other(
    "bernoulli",
    lambda m, p: m.bernoulli(p) * p,
    Arg((3, 3), PROB),
    family="random",
    why={"oracle": _RANDOM},
    notes="zero derivative of the draw",
)
_OTHERS["poisson"] = _other(
    "poisson",
    lambda m, r: m.poisson(r) * r,
    PX,
    family="random",
    why={"oracle": _RANDOM},
    notes="zero derivative of the draw",
)
_OTHERS["binomial"] = _other(
    "binomial",
    lambda m, c, p: m.binomial(m.floor(c * 4), p),
    PX,
    Arg((3, 3), PROB),
    family="random",
    why={"oracle": _RANDOM, "batched": f"{NOT_DIFF}: torch's binomial has no derivative"},
    differentiable=False,
    gradgrad=False,
    batched=False,
)
_OTHERS["multinomial"] = _other(
    "multinomial", lambda m, p: m.multinomial(p, 2), PX, family="random", **_no_grad("integer draws", "int")
)
_OTHERS["randperm"] = _other(
    "randperm", lambda m: m.randperm(5), family="random", **_no_grad("made from numbers", "int")
)
_FROM_NUMBERS = _no_grad("made from numbers, not from tensors")
for _name, _call in [
    ("bartlett_window", lambda m: m.bartlett_window(5)),
    ("blackman_window", lambda m: m.blackman_window(5)),
    ("hamming_window", lambda m: m.hamming_window(5)),
    ("hann_window", lambda m: m.hann_window(5)),
    ("kaiser_window", lambda m: m.kaiser_window(5)),
    ("logspace", lambda m: m.logspace(0, 2, 5)),
    ("scalar_tensor", lambda m: m.scalar_tensor(1.5)),
    ("tril_indices", lambda m: m.tril_indices(3, 4)),
    ("triu_indices", lambda m: m.triu_indices(3, 4, 1)),
]:
    _OTHERS[_name] = _other(_name, _call, family="creation", **_FROM_NUMBERS)
_OTHERS["resize_as_"] = _other(
    "resize_as_",
    lambda m, x, template: m.resize_as_(x.detach().clone(), template),
    X,
    T,
    family="shape",
    **_no_grad("torch refuses to resize a tensor that requires grad"),
)
_QUERY = _no_grad("a Python value, not a tensor", "python")
for _name, _call, _args in [
    ("numel", _by_name("numel"), (X,)),
    ("is_tensor", _by_name("is_tensor"), (X,)),
    ("is_complex", _by_name("is_complex"), (X,)),
    ("is_floating_point", _by_name("is_floating_point"), (X,)),
    ("is_inference", _by_name("is_inference"), (X,)),
    ("is_conj", _by_name("is_conj"), (X,)),
    ("is_neg", _by_name("is_neg"), (X,)),
    ("is_signed", _by_name("is_signed"), (X,)),
    ("is_nonzero", lambda m, x: m.is_nonzero(x[0, 0]), (X,)),
    ("is_same_size", _by_name("is_same_size"), (X, X)),
    ("equal", _by_name("equal"), (X, X)),
    ("allclose", _by_name("allclose"), (X, X)),
    ("typename", _by_name("typename"), (X,)),
    ("get_device", _by_name("get_device"), (X,)),
    ("result_type", _by_name("result_type"), (X, V)),
    ("broadcast_shapes", lambda m: m.broadcast_shapes((3, 1), (2,)), ()),
    ("can_cast", lambda m: m.can_cast(m.float64, m.int32), ()),
    ("promote_types", lambda m: m.promote_types(m.float32, m.int64), ()),
]:
    _OTHERS[_name] = _other(_name, _call, *_args, family="query", **_QUERY)

# ---- operators (torch's Tensor methods without a module function): the sweeps' forms --------------------------
_OPERATORS = {}
_OPERATORS["Tensor.__rsub__"] = _add(
    _entry(
        "Tensor.__rsub__",
        "binary",
        lambda m, x: 2.0 - x / 3.0,
        X,
        notes="a number minus a tensor, and a tensor over a number",
    )
)
_OPERATORS["Tensor.__pow__"] = _add(
    _entry("Tensor.__pow__", "binary", lambda m, x: x**3, X, number_call=lambda m, x, c: x ** int(4 * c))
)


def _excuse(sweep, reason, names):
    """Record that `sweep` leaves the ops `names` out, and why."""
    names = names.split()
    for i, e in enumerate(ENTRIES):
        if e.name in names:
            ENTRIES[i] = dataclasses.replace(e, why=MappingProxyType({**e.why, sweep: reason}))


for _i, _e in enumerate(ENTRIES):  # the ops that test_property.py's random graphs chain
    if (
        _e.name
        in (
            "asinh atan cos erf neg sigmoid sin square tanh t flip cumsum logcumsumexp softmax log_softmax "
            "add sub mul lerp logaddexp where mm"
        ).split()
    ):
        ENTRIES[_i] = dataclasses.replace(_e, composable=True)
_excuse(
    "elementwise",
    "swept by test_ops_special.py (float32 and float64, node names, integer operands)",
    "exp2 sinc deg2rad rad2deg lgamma digamma erfinv i0 sgn logit polygamma mvlgamma nan_to_num frexp positive "
    "xlogy logaddexp logaddexp2 copysign fmax fmin float_power ldexp nextafter igamma igammac clamp_min clamp_max "
    "heaviside",
)
_excuse(
    "elementwise",
    "torch has no derivative of floor_divide (test_floor_divide compares with div(rounding_mode='floor'))",
    "floor_divide",
)
_excuse("elementwise", "where(condition, input, other): its method's self is input, not the condition", "where")
_excuse("elementwise", "operands of one dtype only (test_conveniences.py)", "isclose")


def _known_failure(sweep, failure, names):
    """Record that `sweep` fails on the ops `names` (run as strict expected failures), with the failure."""
    names = names.split()
    for i, e in enumerate(ENTRIES):
        if e.name in names:
            ENTRIES[i] = dataclasses.replace(e, xfail=MappingProxyType({**e.xfail, sweep: failure.format(e.name)}))


for _i, _e in enumerate(ENTRIES):  # decompositions and special functions whose batched programs compile slowly
    if (
        _e.name
        in (
            "matrix_exp pinverse lu lu_solve lu_unpack orgqr svd qr cholesky_solve cholesky_inverse triangular_solve "
            "corrcoef igamma igammac polygamma nanquantile quantile"
        ).split()
    ):
        ENTRIES[_i] = dataclasses.replace(_e, slow="a decomposition or special function: compiles in seconds")

# the number is static in these ops' kernels: each new one traces (and compiles) a kernel
_known_failure(
    "compile",
    "AssertionError: {}: 17 kernels traced (one per new number operand after the first three)",
    "celu",
)

BY_NAME = {e.name: e for e in ENTRIES}
assert len(BY_NAME) == len(ENTRIES), "an op has two records"


def entries(family=None, *, batched=None, differentiable=None):
    """The records, optionally those of one family (or families), swept by the batched test or not, and
    differentiable or not."""
    families = (family,) if isinstance(family, str) else family
    return [
        e
        for e in ENTRIES
        if (families is None or e.family in families)
        and (batched is None or e.batched == batched)
        and (differentiable is None or e.differentiable == differentiable)
    ]


def families():
    return sorted({e.family for e in ENTRIES})


def as_method(entry, view=lambda t: t):
    """The record's call with the op run as a method of (a view of) its first argument."""

    def method(first, *rest, **kw):
        return getattr(view(first), entry.name)(*rest, **kw)

    return lambda m, *a: entry.call(_Renamed(m, entry.name, method), *a)


def resolve(module, name):
    """The function (or attribute) `name` of a record in `module`: dotted names are looked up attribute by
    attribute."""
    obj = module
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def make_args(entry, module, *, seed=0, dtype=None, cache=None):
    """Tensors of `module` for the record's args: float leaves that require grad, integer and bool tensors that do
    not. With `cache` (a dict), an Arg already made is reused, so records of one family share their leaves."""
    out = []
    for i, arg in enumerate(entry.args):
        if cache is not None and arg in cache:
            out.append(cache[arg])
            continue
        rng = np.random.default_rng(seed + 101 * (len(cache) if cache is not None else i))
        value = arg.domain.sample(rng, arg.shape)
        if arg.domain.differentiable:
            t = module.tensor(value, dtype=dtype or module.float64, requires_grad=True)
        else:
            t = module.tensor(value)
        if cache is not None:
            cache[arg] = t
        out.append(t)
    return out
