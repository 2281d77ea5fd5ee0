"""bg.autograd.functional against torch.autograd.functional: values, output structures, create_graph, strict
errors, forward mode, chunking, argument errors, and that repeated Jacobians compile nothing."""

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import batched_grad as bg
import batched_grad.autograd.functional as F
from oracle import assert_same, raises_like_torch, to_torch

FUNCTIONAL = {bg: F, torch: TF}
_RNG = np.random.default_rng(0)
X, W = _RNG.uniform(0.5, 1.5, 3), _RNG.standard_normal((2, 3))


def _leaves(m, requires_grad=False):
    """The point every test differentiates at, as module m's float64 tensors."""
    return (
        m.tensor(X, dtype=m.float64, requires_grad=requires_grad),
        m.tensor(W, dtype=m.float64, requires_grad=requires_grad),
    )


def _args(m, spec, requires_grad=False):
    """`spec` picks the inputs: "x" gives the Tensor x, "x," the tuple (x,), "xw" the tuple (x, w)."""
    x, w = _leaves(m, requires_grad)
    return {"x": x, "x,": (x,), "xw": (x, w)}[spec]


# functions written once against a module m; each is called with the inputs named by its spec
FUNCS = {
    "elementwise": (lambda m, u: m.tanh(u) * u, "x"),
    "elementwise in a tuple": (lambda m, u: m.tanh(u) * u, "x,"),
    "tuple out": (lambda m, u: (m.tanh(u) * u, (u**2).sum()), "x"),
    "tuple in, tuple out": (lambda m, u, w: (m.tanh(w @ u), (u * u).sum() * w), "xw"),
    "unused input": (lambda m, u, w: m.sin(u), "xw"),
    "one-element output": (lambda m, u, w: (m.tanh(w @ u) ** 2).sum().reshape(1, 1), "xw"),
    "scalar output, unused input": (lambda m, u, w: (u**3).sum(), "xw"),
}
SCALAR_FUNCS = {
    "one input": (lambda m, u: (u**3).sum() * u.sum(), "x"),
    "two inputs": (lambda m, u, w: (m.tanh(u) ** 2).sum() * (w * w).sum(), "xw"),
}
JACOBIAN_MODES = {
    "loop": {},
    "vectorized": {"vectorize": True},
    "forward": {"vectorize": True, "strategy": "forward-mode"},
}


def _both(name, func, spec, *args, requires_grad=False, **kwargs):
    """F.name and TF.name on the same function and point; args are built per module from (m, inputs)."""
    results = []
    for m in (bg, torch):
        inputs = _args(m, spec, requires_grad)
        extra = [a(m, inputs) for a in args]
        results.append(getattr(FUNCTIONAL[m], name)(lambda *t: func(m, *t), inputs, *extra, **kwargs))
    return results


def _assert_containers_as_torchs(result, expected):
    """Nested results come in torch's containers: tuples, but lists where torch's forward mode collects its blocks
    (a Jacobian or forward-over-reverse Hessian of tuple inputs)."""
    if not isinstance(expected, torch.Tensor):
        assert type(result) is type(expected), (type(result), type(expected))
        for r, e in zip(result, expected):
            _assert_containers_as_torchs(r, e)


@pytest.mark.parametrize("mode", JACOBIAN_MODES)
@pytest.mark.parametrize("case", FUNCS)
def test_jacobian_matches_torch(case, mode):
    func, spec = FUNCS[case]
    got, expected = _both("jacobian", func, spec, **JACOBIAN_MODES[mode])
    assert_same(got, expected, rtol=1e-12)
    _assert_containers_as_torchs(got, expected)


@pytest.mark.parametrize("mode", ["loop", "vectorized", "forward"])
@pytest.mark.parametrize("case", SCALAR_FUNCS)
def test_hessian_matches_torch(case, mode):
    func, spec = SCALAR_FUNCS[case]
    kwargs = {k.replace("strategy", "outer_jacobian_strategy"): v for k, v in JACOBIAN_MODES[mode].items()}
    got, expected = _both("hessian", func, spec, **kwargs)
    assert_same(got, expected, rtol=1e-12)
    _assert_containers_as_torchs(got, expected)


def _like_inputs(m, inputs):
    return tuple(x * 0.5 + 1 for x in inputs) if isinstance(inputs, tuple) else inputs * 0.5 + 1


def _like_outputs(func):
    def v(m, inputs):
        out = func(m, *inputs) if isinstance(inputs, tuple) else func(m, inputs)
        return tuple(o.detach() * 2 - 1 for o in out) if isinstance(out, tuple) else out.detach() * 2 - 1

    return v


PRODUCTS = (
    [("vjp", c) for c in FUNCS]
    + [("jvp", c) for c in FUNCS]
    + [(name, c) for name in ("hvp", "vhp") for c in SCALAR_FUNCS]
)


def _product_case(name, case):
    func, spec = (SCALAR_FUNCS if name in ("hvp", "vhp") else FUNCS)[case]
    return func, spec, (_like_outputs(func) if name == "vjp" else _like_inputs)


@pytest.mark.parametrize("name, case", PRODUCTS)
def test_products_match_torch(name, case):
    func, spec, v = _product_case(name, case)
    got, expected = _both(name, func, spec, v)
    assert_same(got, expected, rtol=1e-12)
    _assert_containers_as_torchs(got, expected)


@pytest.mark.parametrize("name", ["vjp", "jvp", "hvp", "vhp"])
def test_v_may_be_omitted_for_a_single_element(name):
    func = SCALAR_FUNCS["one input"][0]
    got, expected = [
        getattr(FUNCTIONAL[m], name)(lambda u: func(m, u), m.tensor([0.7], dtype=m.float64)) for m in (bg, torch)
    ]
    assert_same(got, expected, rtol=1e-12)


def _weighted_sum(m, result, seed=1):
    """A scalar that depends on every element of a (nested) result, for differentiating it."""
    if isinstance(result, (tuple, list)):
        return sum(_weighted_sum(m, r, seed + i) for i, r in enumerate(result))
    weights = np.random.default_rng(seed).standard_normal(tuple(result.shape))
    return (result * m.tensor(weights, dtype=m.float64)).sum()


CREATE_GRAPH = [
    ("vjp", "tuple in, tuple out", {}),
    ("jvp", "tuple in, tuple out", {}),
    ("hvp", "one input", {}),
    ("vhp", "two inputs", {}),
    ("jacobian", "tuple in, tuple out", {}),
    ("jacobian", "tuple in, tuple out", {"vectorize": True}),
    ("jacobian", "one-element output", {"vectorize": True}),
    ("jacobian", "scalar output, unused input", {"vectorize": True}),
    ("hessian", "one input", {"vectorize": True}),
]


@pytest.mark.parametrize("name, case, kwargs", CREATE_GRAPH)
def test_create_graph_results_are_differentiable(name, case, kwargs):
    args = () if name in ("jacobian", "hessian") else (_product_case(name, case)[2],)
    func, spec = (SCALAR_FUNCS if case in SCALAR_FUNCS else FUNCS)[case]
    got, expected = [], []
    for m, out in ((bg, got), (torch, expected)):
        inputs = _args(m, spec, requires_grad=True)
        extra = [a(m, inputs) for a in args]
        result = getattr(FUNCTIONAL[m], name)(lambda *t: func(m, *t), inputs, *extra, create_graph=True, **kwargs)
        leaves = inputs if isinstance(inputs, tuple) else (inputs,)
        out.extend([result, m.autograd.grad(_weighted_sum(m, result), leaves, allow_unused=True)])
    assert_same(got, expected, rtol=1e-10)


def test_without_create_graph_results_are_detached_and_inputs_untouched():
    x, w = _leaves(bg, requires_grad=True)
    out, (gx, gw) = F.vjp(lambda u, v: (u * v).sum(), (x, w[0]))
    assert not out.requires_grad and not gx.requires_grad and not gw.requires_grad
    assert x.grad is None and w.grad is None
    with bg.no_grad():
        _, product = F.vjp(lambda u: u * u, x, bg.ones(3, dtype=bg.float64))
    assert_same(product, 2 * to_torch(x))


# strict mode: each case raises in torch; batched_grad must raise the same type with the same message
STRICT = {
    "vjp: input unused": lambda m: FUNCTIONAL[m].vjp(
        lambda u, w: u * 2, _args(m, "xw"), m.ones(3, dtype=m.float64), strict=True
    ),
    "vjp: constant output": lambda m: FUNCTIONAL[m].vjp(lambda u: m.ones(3), _args(m, "x"), strict=True),
    "vjp: linear, create_graph": lambda m: FUNCTIONAL[m].vjp(
        lambda u: u * 2, _args(m, "x"), m.ones(3, dtype=m.float64), strict=True, create_graph=True
    ),
    "jvp: input unused": lambda m: FUNCTIONAL[m].jvp(
        lambda u, w: u * 2, _args(m, "xw"), _like_inputs(m, _args(m, "xw")), strict=True
    ),
    "jacobian: input unused": lambda m: FUNCTIONAL[m].jacobian(lambda u, w: u * 2, _args(m, "xw"), strict=True),
    "jacobian: vectorized": lambda m: FUNCTIONAL[m].jacobian(
        lambda u: u * 2, _args(m, "x"), strict=True, vectorize=True
    ),
    "jacobian: linear, create_graph": lambda m: FUNCTIONAL[m].jacobian(
        lambda u: u * 2, _args(m, "x"), strict=True, create_graph=True
    ),
    "hessian: linear": lambda m: FUNCTIONAL[m].hessian(lambda u: (u * 2).sum(), _args(m, "x"), strict=True),
    "vhp: linear": lambda m: FUNCTIONAL[m].vhp(lambda u: (u * 2).sum(), _args(m, "x"), _args(m, "x"), strict=True),
    "hvp: linear": lambda m: FUNCTIONAL[m].hvp(lambda u: (u * 2).sum(), _args(m, "x"), _args(m, "x"), strict=True),
}


@pytest.mark.parametrize("case", STRICT)
def test_strict_errors_like_torch(case):
    raises_like_torch(STRICT[case])


def test_strict_passes_when_everything_depends_on_the_inputs():
    func, spec = FUNCS["tuple in, tuple out"]
    got, expected = _both("jacobian", func, spec, strict=True)
    assert_same(got, expected, rtol=1e-12)


def _call(name, func, spec="x", *args, **kwargs):
    return lambda m: getattr(FUNCTIONAL[m], name)(lambda *t: func(m, *t), _args(m, spec), *args, **kwargs)


def _ones(*shape):
    return lambda m: m.ones(*shape, dtype=m.float64)


def _with(name, func, spec, v, **kwargs):
    return lambda m: getattr(FUNCTIONAL[m], name)(lambda *t: func(m, *t), _args(m, spec), v(m), **kwargs)


_square = lambda m, *t: sum((u * u).sum() for u in t)
_identity = lambda m, u: u * 1.0
BAD_ARGUMENTS = {
    "inputs: a list": lambda m: FUNCTIONAL[m].vjp(lambda u: u, [m.ones(2)]),
    "inputs: a number in the tuple": lambda m: FUNCTIONAL[m].jacobian(lambda u, k: u, (m.ones(2), 3)),
    "outputs: not a Tensor": _call("jacobian", lambda m, u: 3.0),
    "outputs: a number in the tuple": _call("jvp", lambda m, u: (u, 3.0), "x", _ones(3)),
    "vjp: v of the wrong size": _with("vjp", _identity, "x", _ones(2)),
    "vjp: v of the wrong length": _with("vjp", lambda m, u, w: (u, w), "xw", lambda m: (m.ones(3),)),
    "vjp: entry of v of the wrong size": _with(
        "vjp", lambda m, u, w: (u, w), "xw", lambda m: (m.ones(3, dtype=m.float64), m.ones(3, dtype=m.float64))
    ),
    "vjp: v for a tensor output given two": _with("vjp", _identity, "x", lambda m: (m.ones(3), m.ones(3))),
    "vjp: v omitted": _call("vjp", _identity),
    "jvp: v omitted": _call("jvp", _identity),
    "jvp: v of the wrong size": _with("jvp", _identity, "x", _ones(4)),
    "hvp: v omitted": _call("hvp", _square),
    "vhp: v of the wrong size": _with("vhp", _square, "xw", lambda m: (m.ones(3), m.ones(3))),
    "hessian: tuple output": _call("hessian", lambda m, u: ((u * u).sum(),)),
    "hessian: several elements": _call("hessian", lambda m, u: u * u),
    "hvp: several elements": _with("hvp", lambda m, u: u * u, "x", _ones(3)),
    "vhp: tuple output": _with("vhp", lambda m, u: ((u * u).sum(),), "x", _ones(3)),
    "jacobian: unknown strategy": _call("jacobian", _identity, strategy="sideways"),
    "hessian: unknown strategy": _call("hessian", _square, outer_jacobian_strategy="sideways"),
    "jacobian: integer input": lambda m: FUNCTIONAL[m].jacobian(lambda u: u * 2, m.arange(3)),
    "forward: integer input": lambda m: FUNCTIONAL[m].jacobian(
        lambda u: u * 2, m.arange(3), vectorize=True, strategy="forward-mode"
    ),
    "forward: create_graph": _call("jacobian", _identity, vectorize=True, strategy="forward-mode", create_graph=True),
    "forward: strict": _call("jacobian", _identity, vectorize=True, strategy="forward-mode", strict=True),
    "forward: not vectorized": _call("jacobian", _identity, strategy="forward-mode"),
    "forward hessian: create_graph": _call(
        "hessian", _square, vectorize=True, outer_jacobian_strategy="forward-mode", create_graph=True
    ),
    "forward hessian: strict": _call(
        "hessian", _square, vectorize=True, outer_jacobian_strategy="forward-mode", strict=True
    ),
    "forward hessian: not vectorized": _call("hessian", _square, outer_jacobian_strategy="forward-mode"),
}


@pytest.mark.parametrize("case", BAD_ARGUMENTS)
def test_bad_arguments_raise_like_torch(case):
    raises_like_torch(BAD_ARGUMENTS[case])


@pytest.mark.parametrize("chunk_size", [0, -1, 1.5, True, "2"])
@pytest.mark.parametrize("name", ["jacobian", "hessian"])
def test_chunk_size_must_be_a_positive_int(name, chunk_size):
    with pytest.raises(ValueError, match=f'chunk_size must be None, "auto" or a positive int, but got {chunk_size!r}'):
        getattr(F, name)(lambda u: (u * u).sum(), _args(bg, "x"), vectorize=True, chunk_size=chunk_size)


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_chunk_size_gives_the_same_jacobian(strategy):
    func, spec = FUNCS["tuple in, tuple out"]
    assert_same(
        F.jacobian(lambda *t: func(bg, *t), _args(bg, spec), vectorize=True, strategy=strategy, chunk_size=3),
        TF.jacobian(lambda *t: func(torch, *t), _args(torch, spec)),
        rtol=1e-12,
    )


def test_chunk_size_gives_the_same_forward_over_reverse_hessian():
    func, spec = SCALAR_FUNCS["two inputs"]
    assert_same(
        F.hessian(
            lambda *t: func(bg, *t),
            _args(bg, spec),
            vectorize=True,
            outer_jacobian_strategy="forward-mode",
            chunk_size=2,
        ),
        TF.hessian(lambda *t: func(torch, *t), _args(torch, spec)),
        rtol=1e-12,
    )


def test_forward_mode_integer_outputs_give_integer_zeros():
    got, expected = _both(
        "jacobian", lambda m, u: (u * u, (u > 1).long()), "x", vectorize=True, strategy="forward-mode"
    )
    assert_same(got, expected)


@pytest.mark.parametrize("name", ["jacobian", "hessian"])
def test_forward_mode_of_a_function_that_reads_values_falls_back_to_reverse_mode(name):
    def func(m, u):  # a branch on a value cannot be traced
        return (u**3).sum() if float(u.sum()) > 0 else (u**2).sum()

    strategy = "strategy" if name == "jacobian" else "outer_jacobian_strategy"
    for spec in ("x", "x,"):
        got, expected = _both(name, func, spec, vectorize=True, **{strategy: "forward-mode"})
        assert_same(got, expected, rtol=1e-12)
        _assert_containers_as_torchs(got, expected)


WARM_UP_CALLS = 5  # the engine's tiers: per-node kernels on a structure's first calls, then one fused program


def test_repeated_vectorized_jacobians_compile_nothing():
    x = bg.tensor(X, dtype=bg.float64)
    func = lambda u: bg.tanh(u) * u.sum()
    for _ in range(WARM_UP_CALLS):
        F.jacobian(func, x, vectorize=True)
    before = bg.compile_count()
    for scale in (1.0, 2.0, 3.0):
        x_new = bg.tensor(X * scale, dtype=bg.float64)
        got = F.jacobian(func, x_new, vectorize=True)
        assert_same(got, TF.jacobian(lambda u: torch.tanh(u) * u.sum(), to_torch(x_new)), rtol=1e-12)
    assert bg.compile_count() == before


def test_forward_mode_compiles_once_per_computation_and_reads_closed_over_values_afresh():
    x = bg.tensor(X, dtype=bg.float64)

    def jacobian_of_product_with(matrix):  # a new closure each time, over a new matrix of the same shape
        return F.jacobian(lambda u: bg.tanh(matrix @ u), x, vectorize=True, strategy="forward-mode")

    jacobian_of_product_with(bg.tensor(W))
    before = bg.compile_count()
    for scale in (2.0, -1.0):
        matrix = W * scale
        expected = TF.jacobian(lambda u: torch.tanh(torch.tensor(matrix) @ u), torch.tensor(X))
        assert_same(jacobian_of_product_with(bg.tensor(matrix)), expected, rtol=1e-12)
    assert bg.compile_count() == before


def test_forward_mode_tells_apart_computations_that_differ_only_in_wiring_or_a_kernel():
    # the same kernels with their inputs swapped, or kernels differing only in a static argument (the roll's
    # shift): each function must keep its own compiled Jacobian through the engine's tiers
    def funcs(m):
        return [
            lambda u, v: u - v * 2,
            lambda u, v: v - u * 2,
            lambda u, v: m.roll(u, 1) * v,
            lambda u, v: m.roll(u, 2) * v,
        ]

    x, y = bg.tensor(X, dtype=bg.float64), bg.tensor(X[::-1] + 1, dtype=bg.float64)
    for _ in range(WARM_UP_CALLS + 1):
        for func, torch_func in zip(funcs(bg), funcs(torch)):
            got = F.jacobian(func, (x, y), vectorize=True, strategy="forward-mode")
            assert_same(got, TF.jacobian(torch_func, (to_torch(x), to_torch(y))), rtol=1e-12)


def test_forward_mode_traces_the_jaxpr_jax_make_jaxpr_gives():
    """The direct trace of forward mode gives make_jaxpr's closed jaxpr: the same structure (equations, literals,
    a nested jit's jaxpr, avals) and the same constants, also when they are an outer trace's tracers."""
    import jax
    import jax.numpy as jnp

    from batched_grad.autograd._functional_forward import _jaxpr_of, _structure

    w, c = jnp.asarray(W), np.float32(2.0)

    def f(x, y):
        z = jnp.tanh(w @ x) * 2.0 + c
        return z.sum() * y, jax.jit(jnp.sin)(z), x.astype(jnp.int32) + 1

    def assert_same_jaxpr(fn, *arrays):
        ours, theirs = _jaxpr_of(fn, list(arrays)), jax.make_jaxpr(fn)(*arrays)
        assert _structure(ours.jaxpr) == _structure(theirs.jaxpr)
        assert len(ours.consts) == len(theirs.consts)
        assert all(a is b for a, b in zip(ours.consts, theirs.consts))

    assert_same_jaxpr(f, jnp.asarray(X), jnp.float32(3.0))

    def row(v):
        assert_same_jaxpr(lambda x: (jnp.tanh(v * x),), v)
        return v

    jax.vmap(row)(jnp.ones((2, 3)))


@pytest.mark.parametrize(
    "shapes", [[(2, 3)], [()], [(2,), (3,), ()], [(2, 3), (3,), (3, 4, 2)]], ids=["one", "scalar", "three", "mixed"]
)
def test_standard_basis_blocks_as_torch(shapes):
    def run(m):
        dtypes = [m.float64, m.float32, m.float64][: len(shapes)] if len(shapes) > 1 else [m.float32]
        tensors = tuple(m.zeros(s, dtype=d) for s, d in zip(shapes, dtypes))
        return m.autograd.functional._construct_standard_basis_for(tensors, tuple(t.numel() for t in tensors))

    assert_same(run(bg), run(torch))


def test_standard_basis_checks_its_arguments_as_torch():
    raises_like_torch(lambda m: m.autograd.functional._construct_standard_basis_for((m.zeros(2),), (2, 1)))
    raises_like_torch(lambda m: m.autograd.functional._construct_standard_basis_for((), ()))
