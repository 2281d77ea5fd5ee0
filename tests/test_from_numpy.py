"""bg.from_numpy shares the array's memory as torch.from_numpy does: NumPy writes reach the tensor and the tensor's
in-place writes reach the array, however often it has been read; and numpy() of a tensor that requires grad works
where grad mode is off, as in torch 2.13. Each case runs with `m` bound to torch and to batched_grad."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap
from batched_grad import _tensor
from test_tensor import _TRIGGERED, _restore_modes, assert_like_torch, outcome  # noqa: F401  (the fixture restores grad mode)

NUMPY_WRITES = [
    "a = np.arange(3.)\nt = m.from_numpy(a)\na[0] = 7\nt",
    "a = np.arange(3.)\nt = m.from_numpy(a)\nt * 2\na[0] = 7\nt * 2",
    "a = np.arange(3.)\nt = m.from_numpy(a)\nfor k in range(4):\n    a[k % 3] += 10\n    (t * 1).sum()\n"
    "t + 0, t.sum(), t.tolist()",
    "a = np.arange(3.)\nt = m.from_numpy(a)\nt.tolist()\nt.sum().item()\na *= -1\n"
    "t.tolist(), t.sum().item(), t[1].item()",
    "a = np.arange(6, dtype=np.int32).reshape(2, 3)\nt = m.from_numpy(a)\nt @ t.T\na[1] = 0\nt @ t.T",
    "a = np.arange(3.)\nt = m.from_numpy(a)\nu = m.from_numpy(a)\nt.add_(1)\nu",
    "a = np.arange(6.).reshape(2, 3).T\nt = m.from_numpy(a)\nt.sum(0)\na[2, 1] = -1\nt.sum(0), t",
    "a = np.arange(3.)\nt = m.from_numpy(a)\nc = t.clone()\nr = t.to(m.float32)\na[0] = 9\nc, r, t",
    "a = np.arange(3.)\nt = m.tensor(a)\nt * 1\na[0] = 9\nt",  # tensor() copies, in both
]


@pytest.mark.parametrize("code", NUMPY_WRITES)
def test_numpy_writes_reach_the_tensor_like_torch(code):
    assert_like_torch(code)


TENSOR_WRITES = [
    "a = np.arange(4.)\nt = m.from_numpy(a)\nt.add_(1)\nt.mul_(2)\na",
    "a = np.arange(4.)\nt = m.from_numpy(a)\nt * 3\nt * 3\nt.add_(1)\na, t",
    "a = np.arange(4.)\nt = m.from_numpy(a)\nt[1] = 9\na",
    "a = np.arange(4.)\nt = m.from_numpy(a)\nt[1:].zero_()\na, t",
    "a = np.arange(4.)\nt = m.from_numpy(a)\nv = t[::2]\nv.mul_(10)\na, t, v",
    "a = np.arange(4.)\nt = m.from_numpy(a)\nt.copy_(m.ones(4))\na",
    "a = np.arange(4.)\nt = m.from_numpy(a)\nt.fill_(3)\na",
    "a = np.arange(6, dtype=np.int64)\nt = m.from_numpy(a[::2])\nt += 100\na",
    "a = np.arange(6.).reshape(2, 3).T\nt = m.from_numpy(a)\nt.add_(10)\na[0, 0] = -1\na.copy(), t",
    "a = np.arange(3.)\nt = m.from_numpy(a)\nd = t.detach()\nd.add_(1)\na[2] = 0\na, t, d",
    "a = np.arange(3.)\nt = m.from_numpy(a)\nd = t.data\nd.sub_(1)\na, t",
    # .data = other makes the tensor hold other's values: the array is no longer shared
    "a = np.arange(3.)\nt = m.from_numpy(a)\nt.data = m.zeros(3, dtype=m.float64)\na[0] = 9\nt.add_(1)\na, t",
    # an optimizer's step on a parameter made from an array updates the array
    "a = np.arange(3.)\nw = m.from_numpy(a).requires_grad_()\n(w * w).sum().backward()\nwith m.no_grad():\n"
    "    w.sub_(0.25 * w.grad)\na, w",
    # a gradient accumulates into a .grad made from an array
    "buf = np.zeros(3, np.float32)\nx = m.ones(3, requires_grad=True)\nx.grad = m.from_numpy(buf)\n"
    "(x * 2).sum().backward()\n(x * 3).sum().backward()\nbuf, x.grad",
    # an in-place op that is recorded writes its value through too
    "a = np.ones(3)\nt = m.from_numpy(a)\nw = m.full((3,), 2., dtype=m.float64, requires_grad=True)\nt.mul_(w)\n"
    "a, t.grad_fn.name()",
]


@pytest.mark.parametrize("code", TENSOR_WRITES)
def test_tensor_writes_reach_the_array_like_torch(code):
    assert_like_torch(code)


SHARED_MEMORY = [
    "a = np.arange(3.)\nt = m.from_numpy(a)\nb = t.numpy()\nb[0] = 5\nnp.shares_memory(a, b), b is a, a, t",
    "a = np.arange(3.)\nt = m.from_numpy(a)\nt * 2\nt * 2\n"
    "np.shares_memory(t.numpy(), a), np.shares_memory(np.asarray(t), a)",
    "a = np.arange(3.)\nt = m.from_numpy(a)\nnp.shares_memory(t.detach().numpy(), a), t.numpy().flags.writeable",
    "a = np.arange(3.)\nt = m.from_numpy(a)\nnp.asarray(t)[1] = -4\na, t",
    "a = np.arange(3.)\nt = m.from_numpy(a)\nt.device, str(t.device)",
    "import copy, pickle\na = np.arange(3.)\nt = m.from_numpy(a)\nc = copy.deepcopy(t)\n"
    "p = pickle.loads(pickle.dumps(t))\n"
    "a[:] = 0\nc, p, np.shares_memory(c.numpy(), a)",
]


@pytest.mark.parametrize("code", SHARED_MEMORY)
def test_numpy_of_a_shared_tensor_shares_memory_like_torch(code):
    assert_like_torch(code)


AS_TENSOR = [
    "a = np.arange(3.)\nt = m.as_tensor(a)\nt * 2\nt * 2\na[0] = 7\nt.add_(1)\na, t",
    "a = np.arange(3.)\nt = m.as_tensor(a, dtype=m.float64)\na[0] = 7\nt.add_(1)\na, t",
    "a = np.arange(3.)\nt = m.as_tensor(a, dtype=m.float32)\na[0] = 7\nt.add_(1)\na, t",
    "a = np.arange(6)\nt = m.as_tensor(a[::2], device='cpu')\na[2] = 7\nt.add_(1)\na, t",
    "m.as_tensor(np.arange(6.)[::-1])",
    "m.as_tensor(np.arange(3, dtype='>f4'))",
    "a = np.arange(3.)\nt = m.as_tensor([a[0], a[1]])\na[0] = 7\nt",
]


@pytest.mark.parametrize("code", AS_TENSOR)
def test_as_tensor_shares_an_array_of_its_dtype_like_torch(code):
    assert_like_torch(code)


NP_ARRAY = [
    "a = np.arange(3.)\nt = m.from_numpy(a)\nb = np.array(t)\nb[0] = 9\na, np.shares_memory(a, b)",
    "t = m.ones(2)\nt * 1\nt * 1\nb = np.array(t)\nb[0] = 9\nb, t",
]


@pytest.mark.parametrize("code", NP_ARRAY)
def test_np_array_of_a_tensor_is_a_writable_copy_like_torch(code):
    assert outcome(bg, code)[0] == outcome(torch, code)[0]  # torch's __array__ also gets a NumPy deprecation warning


ARGUMENTS = [
    "m.from_numpy(np.arange(6.).reshape(2, 3)[:, ::-1])",
    "m.from_numpy(np.arange(3, dtype='>f4'))",
    "m.from_numpy(np.float64(2.0))",
    "m.from_numpy(np.ma.array([1., 2.]))",
    "import fractions\nm.from_numpy(fractions.Fraction(1, 2))",  # a class made in Python: its name alone
    "m.from_numpy(np.zeros((2, 0)))",
    "a = np.ma.array([1., 2.])\nt = m.from_numpy(a)\na[0] = 3\nt.add_(1)\na.data",
]


@pytest.mark.parametrize("code", ARGUMENTS)
def test_arguments_like_torch(code):
    assert_like_torch(code)


def test_a_read_only_array_warns_with_torchs_words_and_keeps_its_values():
    expected = (
        "The given NumPy array is not writable, and PyTorch does not support non-writable tensors. This means "
        "writing to this tensor will result in undefined behavior. You may want to copy the array to protect "
        "its data or make it writable before converting it to a tensor. This type of warning will be "
        "suppressed for the rest of this program."
    )
    a = np.arange(3.0)
    a.flags.writeable = False
    _tensor._warned.discard(expected)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = bg.from_numpy(a)
        bg.from_numpy(a)
    assert [str(w.message) for w in caught] == [expected]
    t.add_(1)  # torch calls this undefined behaviour; here the tensor changes and the array keeps its values
    assert t.tolist() == [1.0, 2.0, 3.0] and a.tolist() == [0.0, 1.0, 2.0]


NO_GRAD_NUMPY = [
    "x = m.ones(2, requires_grad=True)\nwith m.no_grad():\n    b = x.numpy()\nb",
    "x = m.ones(2, requires_grad=True)\nwith m.no_grad():\n    b = (x * 2).numpy()\nb",
    "x = m.ones(2, requires_grad=True)\nwith m.inference_mode():\n    b = x.numpy()\nb",
    "x = m.ones(2, requires_grad=True)\nm.set_grad_enabled(False)\nb = x.numpy()\nm.set_grad_enabled(True)\nb",
    "x = m.ones(2, requires_grad=True)\nwith m.no_grad():\n    with m.enable_grad():\n        b = x.numpy()",
    "x = m.ones(2, requires_grad=True)\nx.numpy()",
    "x = m.ones(2, requires_grad=True)\nx.numpy(force=True)",
    "a = np.arange(2.)\nx = m.from_numpy(a).requires_grad_()\nwith m.no_grad():\n    b = x.numpy()\n"
    "b[0] = 8\nnp.shares_memory(a, b), x",
]


@pytest.mark.parametrize("code", NO_GRAD_NUMPY)
def test_numpy_of_a_tensor_that_requires_grad_like_torch(code):
    assert_like_torch(code)


def test_an_op_reads_the_array_when_it_runs_even_when_its_result_is_computed_later():
    for m in (torch, bg):
        a = np.ones(3)
        t = m.from_numpy(a)
        w = m.ones(3, dtype=m.float64, requires_grad=True)
        y = t * w  # recorded: computed here when first read, from the values t has now
        a[:] = 5
        assert y.tolist() == [1.0, 1.0, 1.0]


def test_writes_right_after_an_op_do_not_race_with_it():
    a = np.ones((512, 512), np.float32)
    t = bg.from_numpy(a)
    x = bg.ones(512, 512, requires_grad=True)
    for _ in range(5):
        a[:] = 1
        y = t * 3
        z = t @ t
        (g,) = bg.autograd.grad(x * 2, x, t)  # an array as the cotangent
        a[:] = 100
        assert (y.numpy() == 3).all() and (z.numpy() == 512).all() and (g.numpy() == 2).all()


def test_a_vmap_of_a_function_that_reads_a_shared_tensor_sees_the_arrays_values_at_each_call():
    for m, vmapped in ((torch, torch.func.vmap), (bg, vmap.vmap)):
        a = np.ones(3)
        t = m.from_numpy(a)
        f = vmapped(lambda r: r * t)
        x = m.ones(2, 3, dtype=m.float64)
        assert f(x).tolist() == [[1.0] * 3] * 2
        a[:] = 2
        assert f(x).tolist() == [[2.0] * 3] * 2
        a[:] = 3
        assert f(x).tolist() == [[3.0] * 3] * 2


def test_a_shared_tensor_as_jacobian_input_and_grad_output():
    a = np.array([1.0, 2.0])
    for m in (torch, bg):
        x = m.from_numpy(a.copy())
        jac = [m.autograd.functional.jacobian(lambda v: v**2, x).tolist()]
        x.numpy()[:] = [3.0, 4.0]
        jac.append(m.autograd.functional.jacobian(lambda v: v**2, x).tolist())
        assert jac == [[[2.0, 0.0], [0.0, 4.0]], [[6.0, 0.0], [0.0, 8.0]]]


def test_saved_values_are_the_ones_the_forward_read():
    # a documented difference: torch's backward reads the array's memory when it runs, so a NumPy write between the
    # forward and the backward changes torch's gradient (by 10 here); ours uses the values the forward read
    a = np.arange(1.0, 4.0)
    t = bg.from_numpy(a).requires_grad_()
    y = (t * t).sum()
    a[:] = 10
    y.backward()
    assert t.grad.tolist() == [2.0, 4.0, 6.0]


GRADIENT_COPIES = [
    # the first gradient a leaf receives is its own, as torch clones a gradient that something else holds: later
    # accumulation does not write into the grad_output's array, nor an in-place change of .grad into grad_output
    "a = np.ones(3, np.float32)\nx = m.zeros(3, requires_grad=True)\ng = m.from_numpy(a)\nx.backward(g)\n"
    "x.backward(g)\na, x.grad",
    "x = m.zeros(3, requires_grad=True)\ng = m.ones(3)\nx.backward(g)\nwith m.no_grad():\n    x.grad.mul_(5)\n"
    "g, x.grad",
    "x = m.zeros(3, requires_grad=True)\ng = m.ones(3)\nx.backward(g)\ng.mul_(5)\ng, x.grad",
    "x = m.zeros(3, requires_grad=True)\ng = m.ones(3)\nx.backward(g, create_graph=True)\nwith m.no_grad():\n"
    "    x.grad.mul_(5)\ng, x.grad, x.grad is g",
    # a retained gradient too
    "x = m.zeros(3, requires_grad=True)\ny = x * 2\ny.retain_grad()\ng = m.ones(3)\ny.backward(g)\n"
    "with m.no_grad():\n    y.grad.mul_(5)\ng, y.grad",
]


@pytest.mark.parametrize("code", GRADIENT_COPIES)
def test_a_gradient_does_not_alias_the_grad_output_like_torch(code):
    assert_like_torch(code)


LISTS_OF_ARRAYS = [
    "m.tensor([np.ones(2), np.ones(2)])",
    "m.tensor((np.ones(2), [1.0, 2.0]))",
    "m.tensor([[1, 2], np.ones(2, np.int32)])",
    "m.tensor([[np.ones(2)]])",
    "m.tensor([np.ones((2, 3)), np.ones((2, 3))])",
    "m.tensor([np.ones((2, 2, 2))])",
    "m.tensor([1.0, np.array(2.0)])",
    "m.tensor([np.array(1.0), 2.0])",
    "m.tensor([np.ones(0)])",
    "m.tensor([np.float64(1.0), np.float32(2.0)])",
    "m.tensor(np.ones(2))",
    "m.as_tensor([np.ones(2), np.ones(2)])",
    "m.FloatTensor([np.ones(2), np.ones(2)])",
    "m.LongTensor([np.ones(2, np.int64)])",
    "m.ones(2).new_tensor([np.ones(2)])",
]


@pytest.mark.parametrize("code", LISTS_OF_ARRAYS)
def test_tensor_from_a_list_of_arrays_warns_as_torch(code):
    """torch warns that copying NumPy arrays out of a list is slow, once per process, or at each array (and each row
    of one it walks into) under set_warn_always(True); at the user's line. A 0-d array leading the list is refused."""
    seen = []
    for m in (torch, bg):
        m.set_warn_always(True)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    result = eval(code, {"m": m, "np": np}).tolist()
                except TypeError as e:
                    result = str(e)
        finally:
            m.set_warn_always(False)
        seen.append((result, [(_TRIGGERED.sub("", str(w.message)), w.filename) for w in caught]))
    assert seen[1] == seen[0]


@pytest.mark.parametrize(
    "code",
    [
        "m.tensor([np.ones(2), m.ones(2)])",
        "m.tensor([[1.0, 2.0], m.ones(2)])",
        "m.tensor([[1.0, 2.0], m.ones(3)])",
        "m.tensor([np.ones(2), m.tensor(1.0)])",
        "m.tensor([m.ones(2), m.ones(2)])",
        "m.tensor([m.ones(1), m.ones(1)])",
        "m.tensor([[1.0], m.ones(1)])",
        "m.tensor([np.ones((2, 2)), m.ones(2, 2)])",
        "m.tensor([[m.tensor(1.0), 2.0], m.ones(2)])",
        "m.tensor([[1, 2], m.tensor([True, False])])",
    ],
)
def test_tensor_within_nested_sequences_as_torch(code):
    """Below the outermost level, where the nesting expects a sequence, torch reads a tensor as one (its rows); at
    the innermost level a tensor must hold one element."""
    outcomes = []
    for m in (torch, bg):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                made = eval(code, {"m": m, "np": np})
                outcomes.append((made.tolist(), str(made.dtype)))
            except (TypeError, ValueError) as e:
                outcomes.append((type(e).__name__, str(e)))
    assert outcomes[1] == outcomes[0]
