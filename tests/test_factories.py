"""Factories (tensor, as_tensor, from_numpy, zeros ... randint), their dtype rules and signatures, against torch."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import batched_grad as bg
from test_tensor import _restore_modes, assert_like_torch  # noqa: F401  (the fixture restores default dtypes)

TENSOR_DATA = [
    "1.",
    "1",
    "True",
    "1j",
    "[1, 2.]",
    "[True, 1]",
    "[True, False]",
    "[[1, 2], [3, 4]]",
    "[[1, 2], [3, 4.5]]",
    "[1, 2j]",
    "[]",
    "[[], []]",
    "()",
    "(1, 2)",
    "range(3)",
    "[[True], [2]]",
    "np.float16(1)",
    "np.float64(2.0)",
    "np.int32(2)",
    "np.bool_(True)",
    "[np.float64(2.0), 1.0]",
    "[np.float32(1.), 2.]",
    "[np.float16(1.), 2]",
    "[np.int32(2), 1]",
    "[m.tensor(1.), m.tensor(2.)]",
    "[m.tensor(1., dtype=m.float64), m.tensor(2.)]",
    "[m.tensor(1.), 2.5]",
    "[m.tensor(1, dtype=m.int32), 2]",
    "[m.tensor(1, dtype=m.int32), True]",
    "np.array([np.array([1., 2.]), np.array([3., 4.])])",
    "0.1",
    "-2**63",
    "2**62",
    "1e40",
    "float('nan')",
    "[[0.5]] * 3",
    "[[[1], [2]], [[3], [4]]]",
    "[m.ones(1), m.ones(1)]",
    "[[m.ones(1, 1)], [2]]",
]
TENSOR_ERRORS = [
    "[[1, 2], [3]]",
    "None",
    "'a'",
    "2**63",
    "[1, 2**64]",
    "{1: 2}",
    "object()",
    "[m.ones(2), m.ones(2)]",
    "[m.ones(2), m.ones(3)]",
]
NOT_A_SEQUENCE = ["[[1, 2], 3]", "[[[1], [2]], [[3], 4]]"]
TENSOR_OPTIONS = [
    "[1.5, 2.5], dtype=m.int64",
    "[1, 2], dtype=m.float64",
    "True, dtype=m.float32",
    "2**63, dtype=m.float32",
    "[1, 2], requires_grad=True",
    "[1., 2.], dtype=m.int32, requires_grad=True",
    "[1., 2.], requires_grad=True",
    "3.5, requires_grad=True",
    "[1, 2], dtype=m.complex64",
    "1e40, dtype=m.float64",
    "[0.1], dtype=m.float16",
    "np.array([1, 2], dtype=np.int64), dtype=m.float32",
    "np.array([[1.5]], dtype=np.float32), requires_grad=True",
]


@pytest.mark.parametrize("data", TENSOR_DATA + TENSOR_ERRORS)
def test_tensor_infers_dtype_and_shape_like_torch(data):
    assert_like_torch(f"t = m.tensor({data})\nt, t.dtype, t.shape, t.requires_grad, t.is_leaf")


@pytest.mark.parametrize("args", TENSOR_OPTIONS)
def test_tensor_options_like_torch(args):
    assert_like_torch(f"t = m.tensor({args})\nt, t.dtype, t.requires_grad")


@pytest.mark.parametrize("data", NOT_A_SEQUENCE)
def test_ragged_data_errors_start_like_torch(data):
    assert_like_torch(f"m.tensor({data})", error="prefix")


def test_number_where_a_sequence_belongs():
    assert_like_torch("m.tensor([1, [2, 3]])", error="type")
    with pytest.raises(TypeError, match="tensor\\(\\) expected a number at dim 1, but got list"):
        bg.tensor([1, [2, 3]])


NUMPY_DTYPES = [
    "bool_",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]


@pytest.mark.parametrize("np_dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("factory", ["tensor", "as_tensor", "from_numpy"])
def test_numpy_arrays_keep_their_dtype(factory, np_dtype):
    for shape in [(2, 3), ()]:
        assert_like_torch(
            f"a = np.arange(6).reshape(2, 3)[(slice(None),) * {len(shape)} or (0, 0)]"
            f".astype(np.{np_dtype})\nt = m.{factory}(a)\nt, t.dtype, t.shape"
        )


@pytest.mark.parametrize("np_dtype", NUMPY_DTYPES)
def test_jax_arrays_keep_their_dtype(np_dtype):
    with jax.enable_x64(True):  # JAX's own default is 32-bit
        a = jnp.arange(6).reshape(2, 3).astype(np_dtype)
    expected = torch.from_numpy(np.asarray(a))
    for t in [bg.tensor(a), bg.as_tensor(a), bg.from_jax(a)]:
        assert repr(t) == repr(expected)
    assert bg.from_jax(a).jax() is a  # wrapped without a copy


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int32", "int64", "bool", "complex64"])
def test_tensor_of_tensor_keeps_dtype_copies_and_warns(dtype):
    assert_like_torch(f"s = m.ones(2, dtype=m.{dtype})\nt = m.tensor(s)\nt.dtype, t is s, t.requires_grad")
    assert_like_torch(f"s = m.ones(2, dtype=m.{dtype})\nt = m.as_tensor(s)\nt.dtype, t is s")


def test_tensor_of_tensor_is_a_new_leaf():
    assert_like_torch("s = m.ones(2, requires_grad=True) * 2\nt = m.tensor(s)\nt.requires_grad, t.is_leaf, t")
    assert_like_torch("s = m.ones(2)\nt = m.tensor(s, requires_grad=True)\ns.requires_grad, t")


AS_TENSOR = [
    "m.as_tensor([1, 2]).dtype",
    "m.as_tensor([1, 2], dtype=m.float32)",
    "m.as_tensor(3)",
    "s = m.ones(2, requires_grad=True)\nm.as_tensor(s) is s",
    "m.as_tensor(m.ones(2), dtype=m.float64)",
    "s = m.ones(2, requires_grad=True)\nm.as_tensor(s, dtype=m.float64).grad_fn.name()",
    "m.from_numpy(np.arange(3.)).requires_grad",
    "m.from_numpy(np.array(5))",
    "m.from_numpy([1, 2])",
]

SHAPES = [
    "m.{f}(2, 3).shape",
    "m.{f}((2, 3)).shape",
    "m.{f}([2, 3]).shape",
    "m.{f}(()).shape",
    "m.{f}(0).shape",
    "m.{f}(2, dtype=m.float64).dtype",
    "m.{f}(2, requires_grad=True).requires_grad",
    "m.{f}(-1)",
    "m.{f}(2, -3)",
    "m.{f}(2.5)",
    "m.{f}(2, 'a')",
    "m.{f}(2).is_leaf",
    "m.{f}(2, dtype=m.int64, requires_grad=True)",
    "m.{f}(np.int64(2), 2).shape",
]

FACTORIES = [
    "m.zeros(2, 3, dtype=m.int32)",
    "m.ones(2, dtype=m.float64, requires_grad=True)",
    "m.ones(2, dtype=m.bool)",
    "m.zeros(2, dtype=m.complex64)",
    "m.empty(2, 3).shape, m.empty(2, 3).dtype",
    "m.full((2, 2), 3.0)",
    "m.full((2, 2), 3)",
    "m.full((2, 2), True)",
    "m.full((2,), 1.5, dtype=m.float64)",
    "m.full([2], 1.5, requires_grad=True)",
    "m.full((2,), 1j)",
    "m.full((2,), 2**40)",
    "m.full((2,), 1.5, dtype=m.int64)",
    "m.full((2,), m.tensor(3.))",
    "m.full((2,), m.tensor(3))",
    "m.full([], 3.)",
    "m.full(2, 1.5)",
    "m.full((-1,), 2.)",
    "m.full((2,), 3, requires_grad=True)",
    "m.eye(3)",
    "m.eye(2, 3)",
    "m.eye(3, 2, dtype=m.int64)",
    "m.eye(2, dtype=m.bool)",
    "m.eye(3, requires_grad=True)",
    "m.eye(0)",
    "m.eye(-1)",
    "m.eye(2.5)",
    "m.arange(5)",
    "m.arange(1, 4)",
    "m.arange(0, 1, 0.25)",
    "m.arange(5.)",
    "m.arange(1, 2.5, 0.5)",
    "m.arange(10, 0, -3)",
    "m.arange(0, 5, dtype=m.float64)",
    "m.arange(0, 10, 3, dtype=m.float32)",
    "m.arange(5, requires_grad=True)",
    "m.arange(5., requires_grad=True)",
    "m.arange(0, 5, 0)",
    "m.arange(1, 0)",
    "m.arange(0, 1, -0.5)",
    "m.arange(5, dtype=m.bool)",
    "m.arange(m.tensor(3))",
    "m.arange(np.int64(3))",
    "m.arange(m.tensor(1.), 3)",
    "m.arange(0.5, 3, dtype=m.int64)",
    "m.arange(0.5, 3)",
    "m.arange(3, 3)",
    "m.arange(0., 1., 0.1).shape",
    "m.arange(0, 1, 0.1, dtype=m.float64).shape",
    "m.arange(-3, 3, 2)",
    "m.linspace(0, 1, 5)",
    "m.linspace(0, 1, 5, dtype=m.float64)",
    "m.linspace(0, 10, 3)",
    "m.linspace(-1, 1, 1)",
    "m.linspace(0, 1, 0)",
    "m.linspace(0, 1, 7, requires_grad=True)",
    "m.linspace(0, 1, -1)",
    "m.linspace(2, 10, 5, dtype=m.int64)",
    "m.linspace(0., 1., 11)",
    "m.linspace(1, -1, 9, dtype=m.float64)",
    "m.zeros_like(m.tensor([1, 2]))",
    "m.ones_like(m.tensor([1., 2.]), dtype=m.float64)",
    "m.ones_like(m.tensor(2.))",
    "m.full_like(m.tensor([1, 2]), 2.7)",
    "m.full_like(m.tensor([1., 2.]), 7, requires_grad=True)",
    "m.full_like(m.tensor([True]), 3)",
    "m.zeros_like(m.tensor([1., 2.], requires_grad=True))",
    "m.empty_like(m.tensor([1., 2.]), dtype=m.int64).dtype",
    "m.ones_like(m.ones(2), requires_grad=True)",
    "m.zeros_like(m.ones(2, 3, dtype=m.float16))",
]

RANDOM = [
    "m.rand(2, 3).dtype, m.rand(2, 3).shape",
    "m.rand((2, 3)).shape",
    "m.rand(2, dtype=m.float64).dtype",
    "m.rand(2, dtype=m.int64)",
    "m.rand(2, dtype=m.bool)",
    "m.rand(2, dtype=m.complex64).dtype",
    "m.randn(2, 3, dtype=m.float64).dtype",
    "m.randn(2, dtype=m.int64)",
    "m.randn(2, dtype=m.complex64).dtype",
    "m.rand(2, requires_grad=True).requires_grad",
    "m.randn(2, requires_grad=True).is_leaf",
    "m.randint(0, 10, (3,)).dtype",
    "m.randint(10, (3,)).shape",
    "m.randint(3, 10, (2, 2), dtype=m.int32).dtype",
    "bool((m.randint(3, 10, (50,)) >= 3).all()), bool((m.randint(3, 10, (50,)) < 10).all())",
    "m.randint(5, (2,), dtype=m.float32).dtype",
    "m.randint(0, 5, (2,), requires_grad=True)",
    "m.randint(5, 5, (2,))",
    "m.rand_like(m.tensor([1., 2.], dtype=m.float64)).dtype",
    "m.rand_like(m.tensor([1, 2]))",
    "m.randn_like(m.tensor([1., 2.]), dtype=m.float64).dtype",
    "m.randn_like(m.tensor([1, 2]))",
    "bool(((m.rand(1000) >= 0) & (m.rand(1000) < 1)).all())",
    "m.rand(0).shape, m.randn(2, 0).shape",
]


@pytest.mark.parametrize("code", AS_TENSOR + FACTORIES + RANDOM)
def test_factories_like_torch(code):
    assert_like_torch(code)


@pytest.mark.parametrize("factory", ["zeros", "ones", "empty", "rand", "randn"])
@pytest.mark.parametrize("code", SHAPES)
def test_size_arguments_like_torch(factory, code):
    assert_like_torch(code.format(f=factory))


@pytest.mark.parametrize(
    "code",
    [
        "m.linspace(0, 1, 2.5)",
        "m.randint(0, 10, 3)",
        "m.rand()",
        "m.randn()",
        "m.zeros()",
        "m.ones()",
        "m.empty()",
        "m.arange()",
        "m.full()",
        "m.eye()",
    ],
)
def test_argument_parser_errors_have_torch_types(code):
    assert_like_torch(code, error="type")


@pytest.mark.parametrize("args", ["0, 1, 1000", "-3.3, 7.1, 37", "1, -2, 10", "-1e3, 1e3, 101", "0, 1, 2"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", ["linspace", "arange"])
def test_range_values_match_torch_to_an_ulp(fn, args, dtype):
    if fn == "arange":
        args = args.rsplit(",", 1)[0] + (", 0.37" if "-2" not in args else ", -0.37")
    t = eval(f"torch.{fn}({args}, dtype=torch.{dtype})")
    b = eval(f"bg.{fn}({args}, dtype=bg.{dtype})")
    assert repr(b.dtype) == repr(t.dtype) and b.shape == t.shape
    ulp = np.finfo(getattr(np, dtype)).eps * np.abs(t.numpy()).max()
    np.testing.assert_allclose(b.numpy(), t.numpy(), rtol=0, atol=2 * ulp)


@pytest.mark.parametrize("code", ["m.zeros(2, 3)", "m.ones(3)"])
def test_empty_zeros_ones_values(code):
    assert_like_torch(code)


@pytest.mark.parametrize(
    "draw",
    [
        "bg.rand(3, 4)",
        "bg.randn(5)",
        "bg.randint(0, 100, (6,))",
        "bg.rand_like(bg.ones(2))",
        "bg.randn(2, dtype=bg.complex64)",
    ],
)
def test_manual_seed_makes_draws_reproducible(draw):
    bg.manual_seed(1234)
    first = [eval(draw).tolist() for _ in range(2)]
    bg.manual_seed(1234)
    again = [eval(draw).tolist() for _ in range(2)]
    bg.manual_seed(4321)
    other = eval(draw).tolist()
    assert first == again
    assert first[0] != first[1] and other != first[0]


def test_random_draws_have_torch_moments():
    bg.manual_seed(0)
    u, n = bg.rand(20000).numpy(), bg.randn(20000).numpy()
    c = bg.randn(20000, dtype=bg.complex64).numpy()
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03
    assert abs(np.mean(np.abs(c) ** 2) - 1) < 0.05  # torch: real and imaginary parts each have variance 1/2


def test_numpy_interop():
    t = bg.tensor([[1.5, 2.0]], dtype=bg.float64)
    a = np.asarray(t)
    assert a.dtype == np.float64 and a.tolist() == [[1.5, 2.0]]
    assert np.asarray(t, dtype=np.float32).dtype == np.float32
    assert repr(bg.tensor([1.0, 2.0]) + np.ones(2)) == "tensor([2., 3.], dtype=torch.float64)"  # as torch: a tensor
    assert_like_torch("m.tensor([1., 2.]) * np.float64(2.), m.tensor([1, 2]) * np.int32(2)")  # a NumPy scalar: a number
    x = bg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Use tensor.detach\(\).numpy\(\) instead"):
        x.numpy()
    assert x.detach().numpy().tolist() == [1.0, 2.0]


def test_from_jax_rejects_other_types():
    with pytest.raises(TypeError, match="from_jax\\(\\): argument 'array' must be a jax.Array, but got list"):
        bg.from_jax([1.0])


def test_factories_follow_float64_default():
    torch.set_default_dtype(torch.float64)
    bg.set_default_dtype(bg.float64)
    for code in [
        "m.tensor([1.5])",
        "m.tensor(1j)",
        "m.zeros(1)",
        "m.full((1,), 2.)",
        "m.arange(2.)",
        "m.linspace(0, 1, 3)",
        "m.eye(1)",
        "m.rand(1).dtype",
        "m.tensor([m.tensor(1., dtype=m.float32), 2.])",
        "m.tensor([1, 2.5j])",
        "m.randint(3, (2,)).dtype",
    ]:
        assert_like_torch(code)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ends", [(-1.0, 1.0), (-3.5, 2.25), (1e-4, 0.02), (5.0, -1.0)])
def test_short_linspace_is_torchs_bit_for_bit(ends, dtype):
    """Shorter than two of torch's kernel vectors, linspace fills each half from its own end with fused
    multiply-adds (one rounding each): the same values bit for bit, the middle of an odd count included."""
    for steps in range(1, 8 if dtype == "float64" else 16):
        got = bg.linspace(*ends, steps, dtype=getattr(bg, dtype)).numpy()
        np.testing.assert_array_equal(got, torch.linspace(*ends, steps, dtype=getattr(torch, dtype)).numpy())


@pytest.mark.parametrize(
    "code",
    [
        "m.zeros(np.array([2, 3]))",
        "m.ones(size=np.array([2]))",
        "m.rand(np.array([2]))",
        "m.full(np.array([2]), 1.0)",
        "m.zeros((2, np.float64(3)))",
        "m.ones(2).new_zeros(np.array([2]))",
        "m.ones(2).new_ones(2.0)",
        "m.ones(2).new_zeros((2, None))",
        "m.ones(2).new_empty(-1)",
        "m.ones(2).new_empty(np.array([2]))",
        "m.ones(2).new_full(np.array([2]), 1.0)",
        "m.ones(2).new_full((2, None), 1.0)",
        "m.ones(2).new_full(2, 1.0)",
        "m.ones(2).new_empty(2, size=(2,))",
        "m.ones(2).new_zeros()",
        "m.ones(4).resize_(np.array([2]))",
    ],
)
def test_size_errors_name_types_and_methods_as_torch(code):
    """A size of the wrong type is named as CPython names it (numpy.ndarray, not ndarray), and the new_* methods'
    errors name the method."""
    assert bg.ones(2).new_empty(size=(2, 3)).shape == (2, 3)
    messages = []
    for m in (torch, bg):
        with pytest.raises((TypeError, RuntimeError)) as caught:
            eval(code, {"m": m, "np": np})
        messages.append((caught.type, str(caught.value)))
    assert messages[1] == messages[0]
