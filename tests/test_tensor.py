"""Tensor attributes, methods, conversions, dtypes and repr, checked against torch 2.13.

Most cases are code snippets run twice, with `m` bound to torch and to batched_grad: the value of the last
line (or the exception, and any warnings) must print the same. `V(t)` reads the version counter.
"""

import ast
import re
import warnings

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg

_TRIGGERED = re.compile(r" \(Triggered internally at .*\)$", re.S)
# torch warns these once per process, so whether a case sees them depends on test order: checked separately
_ONCE = (
    "Converting a tensor with requires_grad=True",
    "The use of `x.T`",
    "Tensor.T is deprecated",
    "Tensor.mT is deprecated",
)


def outcome(m, code):
    """Run `code` with `m` as the library: (repr of its last expression, or "done", or the exception's class name
    and message; the warnings raised)."""
    ns = {
        "m": m,
        "np": np,
        "V": (lambda t: t._version),
        "names": lambda fn: [(f.name() if f is not None else None, i) for f, i in fn.next_functions],
    }
    tree = ast.parse(code)
    last = tree.body[-1]
    body = tree.body[:-1] if isinstance(last, ast.Expr) else tree.body
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec(compile(ast.Module(body, []), "<case>", "exec"), ns)
            result = (
                repr(eval(compile(ast.Expression(last.value), "<case>", "eval"), ns))
                if isinstance(last, ast.Expr)
                else "done"
            )
        except Exception as e:  # the exception is the outcome
            result = (type(e).__name__, str(e))
        finally:
            m.set_grad_enabled(True)
    messages = [_TRIGGERED.sub("", str(w.message)) for w in caught]
    return result, [w for w in messages if not w.startswith(_ONCE)]


def assert_like_torch(code, error="same"):
    """`error`: "same" message; "prefix": ours adds detail after torch's; "type": only the exception class must
    match (torch's argument parser lists every overload)."""
    (expected, warned), (got, got_warned) = outcome(torch, code), outcome(bg, code)
    if error != "same" and isinstance(expected, tuple) and isinstance(got, tuple):
        keep = len(expected[1]) if error == "prefix" else 0
        expected, got = (expected[0], expected[1][:keep]), (got[0], got[1][:keep])
    assert (got, got_warned) == (expected, warned), f"\n{code}\n torch: {expected} {warned}\n    bg: {got} {got_warned}"


@pytest.fixture(autouse=True)
def _restore_modes():
    yield
    torch.set_default_dtype(torch.float32)
    bg.set_default_dtype(bg.float32)
    torch.set_grad_enabled(True)
    bg.set_grad_enabled(True)


ATTRIBUTES = [
    "x = m.ones(2, 3)\nx.shape, x.ndim, x.dim(), x.numel(), len(x), x.size(), x.size(1), x.size(-2), x.dtype",
    "isinstance(m.ones(2, 3).shape, tuple), type(m.ones(2).shape).__name__",
    "m.ones(2, 3).size(2)",
    "m.ones(2, 3).size('a')",
    "m.ones(2, 3).size(dim=1)",
    "m.ones(0, 3).numel(), m.tensor(5.).numel(), m.tensor(5.).shape, m.tensor(5.).ndim",
    "x = m.ones(2)\nx.device, str(x.device), x.device.type, x.device == 'cpu', x.device == m.ones(1).device",
    "len(m.tensor(1.))",
    "x = m.ones(2)\nx.is_leaf, x.requires_grad, x.grad_fn, x.grad",
    "x = m.ones(2, 3)\nx.is_floating_point(), x.is_complex(), x.element_size(), m.ones(1, "
    "dtype=m.int16).element_size()",
    "m.ones(2, 3, 4).T.shape, m.ones(2, 3, 4).mT.shape, m.ones(2, 3).T.shape",
    "m.ones(3).T",
    "m.tensor(1.).T",
    "m.tensor(1.).mT",
    "m.ones(3).mT",
    "x = m.arange(6.).reshape(2, 3)\nx.T, x.mT",
    "x = m.ones(2, 3, requires_grad=True)\nx.T.grad_fn.name(), x.mT.grad_fn.name(), x.T.is_leaf",
]

REQUIRES_GRAD = [
    "x = m.ones(2)\nx.requires_grad = True\nx.requires_grad, x.is_leaf, x",
    "x = m.ones(2, requires_grad=True)\nx.requires_grad = False\nx",
    "x = m.ones(2, dtype=m.int64)\nx.requires_grad = True",
    "x = m.ones(2, dtype=m.bool)\nx.requires_grad_()",
    "x = m.ones(2, dtype=m.complex64)\nx.requires_grad_().requires_grad",
    "x = m.ones(2, requires_grad=True)\ny = x * 2\ny.requires_grad = True",
    "x = m.ones(2, requires_grad=True)\ny = x * 2\ny.requires_grad = False",
    "x = m.ones(2, requires_grad=True)\ny = x * 2\ny.requires_grad_(False)",
    "x = m.ones(2, requires_grad=True)\ny = x * 2\ny.requires_grad_(True)",
    "x = m.ones(2)\nx.requires_grad = 1",
    "x = m.ones(2)\nx.requires_grad_('yes')",
    "x = m.ones(2)\nr = x.requires_grad_()\nr is x, x.requires_grad",
    "(m.ones(2) * 2).is_leaf, (m.ones(2, requires_grad=True) * 2).is_leaf",
    "x = m.ones(2, requires_grad=True)\nexec('with m.no_grad():\\n    y = x * 2')\ny.is_leaf, y.requires_grad",
]

GRAD = [
    "x = m.ones(2, requires_grad=True)\nx.grad = m.tensor([1., 2.])\nx.grad",
    "x = m.ones(2, requires_grad=True)\nx.grad = m.ones(2)\nx.grad = None\nx.grad",
    "x = m.ones(2, requires_grad=True)\nx.grad = m.ones(3)",
    "x = m.ones(2, requires_grad=True)\nx.grad = m.ones(2, dtype=m.float64)",
    "x = m.ones(2, dtype=m.float64, requires_grad=True)\nx.grad = m.ones(2, dtype=m.int64)",
    "x = m.ones(2, requires_grad=True)\nx.grad = [1., 2.]",
    "x = m.ones(2)\nx.grad = m.ones(2)\nx.grad",
    "x = m.ones(2, requires_grad=True)\ny = x * 2\ny.grad",
    "x = m.ones(2, requires_grad=True)\ny = x * 2\ny.grad = m.ones(2)\ny.grad",
    "x = m.ones(2, requires_grad=True)\ny = x * 2\ny.retain_grad()\n(y * y).sum().backward()\ny.grad, y.retains_grad",
    "x = m.ones(2, requires_grad=True)\nx.retain_grad()\nx.retains_grad, (x * 2).retains_grad",
    "m.ones(2).retain_grad()",
    "x = m.ones(2, requires_grad=True)\n(x * 3).sum().backward()\n(x * 3).sum().backward()\nx.grad",
]

HOOKS = [
    "x = m.ones(2, requires_grad=True)\nh = x.register_hook(lambda g: g * 2)\n(x * 3).sum().backward()\nx.grad",
    "x = m.ones(2, requires_grad=True)\nh = x.register_hook(lambda g: g * 2)\nh.remove()\n(x * 3).sum().backward()\n"
    "x.grad",
    "x = m.ones(2, requires_grad=True)\ny = x * 3\nh = y.register_hook(lambda g: g + 1)\ny.sum().backward()\nx.grad",
    "x = m.ones(2, requires_grad=True)\ny = x * 3\nseen = []\nh = y.register_hook(seen.append)\n"
    "(y * m.tensor([1., 2.])).sum().backward()\nseen",
    "m.ones(2).register_hook(lambda g: g)",
]

GRAD_FN = [
    "x = m.ones(2, requires_grad=True)\n(x * 2).grad_fn.name(), names((x * 2).grad_fn)",
    "x = m.ones(2, requires_grad=True)\nw = m.ones(2)\nnames((x * w).grad_fn), names((w * x).grad_fn)",
    "x = m.ones(2, requires_grad=True)\ny = x.exp() + x\nnames(y.grad_fn), names(y.grad_fn.next_functions[0][0])",
    "x = m.ones(2, requires_grad=True)\nz = m.ones(2, requires_grad=True)\nnames((x.sin() * z.cos()).grad_fn)",
    "x = m.ones(2, requires_grad=True)\n(x * 2).grad_fn.next_functions[0][0].variable is x",
    "x = m.ones(2, requires_grad=True)\ny = x * 2\n"
    "y.grad_fn.next_functions[0][0] is (x + 1).grad_fn.next_functions[0][0]",
    "x = m.ones(3, requires_grad=True)\n[t.grad_fn.name() for t in x.unbind()], x.sum().grad_fn.name()",
    "x = m.ones(2, requires_grad=True)\nx.grad_fn, x.detach().grad_fn, x.clone().grad_fn.name()",
    "y = m.ones(2, requires_grad=True) * 2\nnf = y.grad_fn.next_functions\ntype(nf).__name__, type(nf[0]).__name__, "
    "len(nf)",
    # torch names a node after the overload it recorded, or after the last op of a composite
    "x = m.ones(2, 3, requires_grad=True)\n[t.grad_fn.name() for t in (x.sum(), x.sum(1), x.mean(), x.mean((0, 1)), "
    "x.prod(), x.prod(1), x.clamp(0, 1), x.clip(max=x), x ** 2, x ** x, 2 ** x, x - 1, 1 - x, x.log1p(), x.square())]",
    "F = m.nn.functional\nx, w, b = m.ones(2, 3, requires_grad=True), m.ones(4, 3), m.ones(4)\n"
    "[F.linear(v, w, *c).grad_fn.name() for v in (x[0], x, x[None]) for c in ((), (b,))]",
    "F = m.nn.functional\nx, t = m.ones(2, 3, requires_grad=True), m.tensor([0, 2])\n"
    "[F.l1_loss(x, x * 0, reduction=r).grad_fn.name() for r in ('mean', 'sum', 'none')], "
    "[F.cross_entropy(x, t, reduction=r).grad_fn.name() for r in ('mean', 'none')], "
    "[F.cross_entropy(x, m.ones(2, 3) / 3, reduction=r).grad_fn.name() for r in ('mean', 'sum')], "
    "F.cross_entropy(x, t, label_smoothing=0.1).grad_fn.name(), F.nll_loss(x, t).grad_fn.name()",
    "F = m.nn.functional\nx = m.ones(3, requires_grad=True)\n[m.autograd.grad(f(x).sum(), x, create_graph=True)[0]"
    ".grad_fn.name() for f in (m.tanh, m.sigmoid, F.softplus, F.elu, F.gelu)]",
    "F = m.nn.functional\nx = m.ones(2, 3, 2, 2, requires_grad=True)\n"
    "[F.nll_loss(v, t, reduction=r).grad_fn.name() for v, t in ((x[..., 0], m.zeros(2, 2, dtype=m.long)), "
    "(x, m.zeros(2, 2, 2, dtype=m.long)), (x[..., None], m.zeros(2, 2, 2, 1, dtype=m.long))) for r in ('mean', "
    "'none')]",
]

DATA = [
    "x = m.ones(2, 3, requires_grad=True)\nd = x.data\nd.requires_grad, d.is_leaf, d.shape, d.grad_fn",
    "x = m.ones(2, requires_grad=True)\nx.data = m.zeros(2)\nx",
    "x = m.ones(2, requires_grad=True)\nx.data = m.zeros(3, dtype=m.float64)\nx.shape, x.dtype, x.requires_grad",
    "x = m.ones(2, requires_grad=True)\nx.data = 5",
]

CONVERSIONS = [
    "x = m.tensor(2.5)\nx.item(), x.tolist(), float(x), int(x), bool(x), complex(x)",
    "x = m.tensor([[7]])\nx.item(), int(x), float(x), bool(x)",
    "x = m.tensor(-2.7, dtype=m.float64)\nint(x), float(x)",
    "x = m.tensor(3, dtype=m.int32)\ntype(x.item()), x.item(), type(m.tensor(True).item()), [1, 2, 3, 4][m.tensor(2)]",
    "[1, 2][m.tensor(1.)]",
    "m.tensor([1, 2]).item()",
    "float(m.tensor([1., 2.]))",
    "int(m.tensor([1, 2]))",
    "bool(m.tensor([1, 2]))",
    "bool(m.tensor([]))",
    "bool(m.tensor(0.)), bool(m.tensor([3]))",
    "m.arange(6.).reshape(2, 3).tolist(), m.tensor(True).tolist(), m.tensor([1, 2]).tolist()",
    "x = m.tensor(2.5, requires_grad=True)\nx.item(), float(x), x.tolist()",
    "m.tensor(2.5, requires_grad=True).numpy()",
    "x = m.tensor([2.5, 1.])\nx.numpy().dtype, type(x.numpy()).__name__, x.numpy().tolist()",
    "np.asarray(m.tensor([1, 2])).dtype, np.asarray(m.tensor([1., 2.], dtype=m.float64)).dtype",
    "np.asarray(m.tensor([1, 2]), dtype=np.float32)",
    "f'{m.tensor(2.5):.2f}', f'{m.tensor(3)}'",
    "x = m.arange(6.).reshape(2, 3)\n[r for r in x], list(m.tensor([1, 2]))",
    "list(m.tensor(1.))",
    "x = m.ones(2, requires_grad=True)\n[r.grad_fn.name() for r in x]",
]

METHODS = [
    "x = m.ones(2, requires_grad=True)\ny = x.detach()\ny.requires_grad, y.is_leaf, y.grad_fn, y",
    "x = m.ones(2, requires_grad=True)\ny = (x * 2).detach()\ny.requires_grad, y.is_leaf",
    "x = m.ones(2, requires_grad=True)\ny = x * 2\nr = y.detach_()\nr is y, y.requires_grad, y.is_leaf, y.grad_fn",
    "x = m.ones(3, requires_grad=True)\ny = x[1:]\ny.detach_()",
    "x = m.ones(2, requires_grad=True)\ny = x.clone()\ny.grad_fn.name(), y.is_leaf, y",
    "x = m.ones(2)\ny = x.clone()\ny.add_(1)\nx, y",
    "x = m.ones(2, requires_grad=True)\ny = x.to(m.float64)\ny.grad_fn.name(), y.dtype, x.to(m.float32) is x",
    "x = m.ones(2)\nx.to(dtype=m.int32), x.to('cpu') is x, x.to('cpu', m.float64).dtype, x.to(m.ones(1, "
    "dtype=m.int64))",
    "x = m.ones(2, requires_grad=True)\nx.to(x.device) is x, x.to(x.device, m.float64).dtype, x.to(copy=True) is x, "
    "x.to(m.float32, copy=True).grad_fn.name()",
    "x = m.tensor([1.7, -2.2])\nx.long(), x.int(), x.bool(), x.double(), x.float() is x, x.half()",
    "m.tensor([1, 0]).float(), m.tensor([1.5]).type_as(m.tensor([1])), m.tensor([1]).type_as(m.ones(1))",
    "x = m.tensor([1.5], requires_grad=True)\nx.double().grad_fn.name(), x.long().requires_grad, x.long().grad_fn",
    "x = m.tensor([1.5], requires_grad=True)\ny = x.double()\ny.sum().backward()\nx.grad",
]

COPIES = [
    "import copy\nx = m.ones(2, requires_grad=True)\nx.grad = m.tensor([1., 2.])\ny = copy.deepcopy(x)\n"
    "y, y.is_leaf, y.grad, y.grad is x.grad, y is x",
    "import copy\ncopy.deepcopy(m.ones(2, requires_grad=True) * 2)",
    "import copy\nx = m.ones(2)\nd = x.detach()\ny = copy.deepcopy(x)\nwith m.no_grad():\n    y.add_(1)\nx, d, y",
    "import pickle\nx = m.tensor([1., 2.], requires_grad=True)\nd = x.detach()\ny = pickle.loads(pickle.dumps(x))\n"
    "y, y.dtype, y.is_leaf",
    "import pickle\npickle.loads(pickle.dumps(m.tensor([1, 2], dtype=m.int16)))",
    "import pickle\nx = m.tensor([1., 2.], requires_grad=True)\ny = pickle.loads(pickle.dumps(x * 2))\n"
    "y, y.requires_grad, y.is_leaf",
    "import copy\np = m.nn.Parameter(m.ones(2))\np.grad = m.ones(2)\nq = copy.deepcopy(p)\nq, q.grad, type(q).__name__",
    "import copy\nlayer = m.nn.Linear(2, 1)\nlayer(m.ones(2)).sum().backward()\ncopy.deepcopy(layer).weight.grad",
]

DTYPE_NAMES = [
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "bool",
    "complex64",
    "complex128",
]


@pytest.mark.parametrize(
    "code", ATTRIBUTES + REQUIRES_GRAD + GRAD + HOOKS + GRAD_FN + DATA + CONVERSIONS + METHODS + COPIES
)
def test_tensor_behaves_like_torch(code):
    assert_like_torch(code)


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_dtype_attributes_like_torch(name):
    t, b = getattr(torch, name), getattr(bg, name)
    assert repr(b) == repr(t) == str(b)
    assert (b.is_floating_point, b.is_complex, b.is_signed, b.itemsize) == (
        t.is_floating_point,
        t.is_complex,
        t.is_signed,
        t.itemsize,
    )
    assert repr(bg.ones(2, dtype=b).dtype) == repr(t)


def test_dtype_aliases():
    assert (bg.half, bg.double, bg.long, bg.cfloat, bg.cdouble) == (
        bg.float16,
        bg.float64,
        bg.int64,
        bg.complex64,
        bg.complex128,
    )


@pytest.mark.parametrize(
    "code",
    [
        "m.get_default_dtype()",
        "m.set_default_dtype(m.float64)\nm.get_default_dtype(), m.tensor(1.).dtype, m.tensor(1j).dtype, "
        "m.tensor(1).dtype",
        "m.set_default_dtype(m.float64)\nm.zeros(2).dtype, m.arange(2.).dtype, m.rand(2).dtype, m.full((1,), 2.).dtype",
        "m.set_default_dtype(m.float64)\nm.tensor([1., 2.]), m.tensor([1., 2.], dtype=m.float32), m.tensor([1j])",
        "m.set_default_dtype(m.float64)\n(m.ones(2, dtype=m.int64) * 1.5).dtype, (m.ones(2, "
        "dtype=m.float32) * 1.5).dtype",
        "m.set_default_dtype(m.float16)\nm.tensor(1.5).dtype, m.arange(3.).dtype",
        "m.set_default_dtype(m.int64)",
        "m.set_default_dtype(m.complex64)",
        "m.set_default_dtype('float32')",
    ],
)
def test_default_dtype_like_torch(code):
    assert_like_torch(code)


def test_float64_and_int64_are_really_64_bit():
    assert bg.tensor(0.1, dtype=bg.float64).item() == 0.1
    x = bg.tensor([1.0], dtype=bg.float64)
    assert ((x + 1e-12) - x).item() == pytest.approx(1e-12, rel=1e-3)
    assert bg.tensor(2**62 + 1).item() == 2**62 + 1
    assert (bg.tensor([2**40]) * 2**20).item() == 2**60
    assert bg.tensor([1.0, 2.0], dtype=bg.float64).jax().dtype == np.float64
    assert bg.arange(3).jax().dtype == np.int64


REPRS = [
    "m.tensor([1., 2.], requires_grad=True)",
    "m.tensor([1., 2.], requires_grad=True) * 2",
    "(m.tensor([1., 2.], requires_grad=True) * 2).sum()",
    "m.tensor([1, 2])",
    "m.tensor(3.5)",
    "m.tensor(3)",
    "m.tensor(True)",
    "m.tensor([True, False])",
    "m.tensor([[1., 2.], [3., 4.]])",
    "m.tensor([1., 2.], dtype=m.float64)",
    "m.tensor([1.5, 2.25])",
    "m.tensor([1e-5, 1.])",
    "m.tensor([1e10, 1.])",
    "m.tensor([0.1, 0.2, 0.3333])",
    "m.tensor([])",
    "m.zeros(0, 3)",
    "m.zeros(0, dtype=m.int64)",
    "m.tensor([1, 2], dtype=m.int32)",
    "m.tensor([float('nan'), 1.])",
    "m.tensor([float('inf'), -1.5])",
    "m.tensor([-1., 2.])",
    "m.tensor([[1, 2], [3, 4]], dtype=m.int16)",
    "m.tensor([1., 2.], dtype=m.float16)",
    "m.tensor([1.0+2j])",
    "m.tensor([1.5-2j, -3j], dtype=m.complex128)",
    "m.arange(12.).reshape(3, 4)",
    "m.tensor([123456.789])",
    "m.tensor([1e-10, 1e-12])",
    "m.tensor(2.5, dtype=m.float64)",
    "m.tensor([0.])",
    "m.tensor([-0.5, 100.25])",
    "m.ones(2, 2, 2)",
    "m.tensor([1., 2.], dtype=m.bfloat16)",
    "m.arange(2000.)",
    "m.arange(1500).reshape(30, 50)",
    "m.arange(0., 1., 0.1)",
    "m.arange(24.).reshape(2, 3, 4) / 7",
    "m.tensor([[1., 2.5], [3., 4.]], dtype=m.float64)",
    "m.tensor([-1, 20, 300])",
    "m.tensor(-0.)",
    "m.tensor([1e8, 1e9])",
    "m.tensor(float('nan'))",
    "m.linspace(0, 1, 7, requires_grad=True)",
    "m.linspace(0, 1, 7, dtype=m.float64, requires_grad=True) * 2",
    "m.ones(3, 20, dtype=m.float64, requires_grad=True) * 2",
    "m.tensor([[True], [False]])",
    "m.tensor([100000000.5])",
    "m.tensor([[float('inf')]], requires_grad=True)",
    "m.ones(2, dtype=m.uint8)",
]


@pytest.mark.parametrize("code", REPRS)
def test_repr_like_torch(code):
    expected = repr(eval(code, {"m": torch}))
    assert repr(eval(code, {"m": bg})) == expected
    assert str(eval(code, {"m": bg})) == expected


def test_repr_under_float64_default():
    torch.set_default_dtype(torch.float64)
    bg.set_default_dtype(bg.float64)
    for code in ["m.tensor([1.5, 2.])", "m.tensor([1.5], dtype=m.float32)", "m.tensor([1j])", "m.zeros(0)"]:
        assert repr(eval(code, {"m": bg})) == repr(eval(code, {"m": torch}))


def test_jax_roundtrip_and_traced_repr():
    x = bg.tensor([1.0, 2.0])
    assert isinstance(x.jax(), jax.Array) and x.jax() is x._value
    seen = []
    jax.jit(lambda a: seen.append(repr(bg.Tensor._wrap(a))) or a)(x.jax())
    assert seen == ["tensor(<traced float32[2]>)"]


@pytest.mark.parametrize(
    "code, message",
    [
        ("bg.ones(3).T", "The use of `x.T` on tensors of dimension other than 2"),
        ("bg.tensor(1.).T", "Tensor.T is deprecated on 0-D tensors"),
        ("bg.tensor(1.).mT", "Tensor.mT is deprecated on 0-D tensors"),
        ("float(bg.tensor(1., requires_grad=True))", "Converting a tensor with requires_grad=True to a scalar"),
    ],
)
def test_once_per_process_warnings(code, message, monkeypatch):
    monkeypatch.setattr(bg._tensor, "_warned", set())
    with pytest.warns(UserWarning, match=re.escape(message)):
        eval(code)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eval(code)
    assert not [w for w in bg._tensor._warned if not w.startswith(message)]


def test_scalar_conversion_warns_only_in_grad_mode(monkeypatch):
    """torch warns when float() or complex() drops a gradient while grad mode is on; under no_grad (an optimizer's
    step converting its closure's loss) it does not, and int() never does."""
    monkeypatch.setattr(bg._tensor, "_warned", set())
    t = bg.tensor([2.0], requires_grad=True) * 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with bg.no_grad():
            assert float(t) == 6.0 and complex(t) == 6.0
        assert int(t) == 6
    with pytest.warns(UserWarning, match="Converting a tensor with requires_grad=True"):
        complex(t)


def test_scalar_conversion_warning_names_the_converting_line(monkeypatch):
    """float(t), '%f' % t and complex(t) of a tensor that requires grad warn at the caller's line, as torch's does."""
    for convert in (float, lambda t: "%.3f" % t, complex):  # noqa: UP031  (the programs' own formatting)
        monkeypatch.setattr(bg._tensor, "_warned", set())
        t = bg.tensor([2.0], requires_grad=True) * 3
        with pytest.warns(UserWarning, match="Converting a tensor with requires_grad=True") as record:
            convert(t)
        assert record[0].filename == __file__
