"""vmap.vmap against torch.func.vmap: output structure (dict order, out_dims=None, functions that ignore their
mapped input), argument checks and their messages, `.data` under vmap; and the argument checks shared by every
entry point (chunk_size; retain_graph/create_graph of grad and backward) against torch.autograd."""

import collections

import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap
from oracle import assert_same

LIBS = {"torch": (torch, torch.func.vmap), "bg": (bg, vmap.vmap)}
Pair = collections.namedtuple("Pair", ["first", "second"])


def outcome(fn):
    """What fn() does: ("ok", result) or (exception type, message)."""
    try:
        return "ok", fn()
    except Exception as error:  # noqa: BLE001 -- any exception is an outcome to compare
        return type(error), str(error)


def raises_as_torch(case):
    """case(lib, vmap) raises the same exception type with the same message under torch and batched_grad."""
    want, got = outcome(lambda: case(*LIBS["torch"])), outcome(lambda: case(*LIBS["bg"]))
    assert want[0] != "ok", want
    assert got == want


def same_as_torch(case, rtol=1e-6):
    """case(lib, vmap) returns the same structure and values under torch and batched_grad."""
    want, got = case(*LIBS["torch"]), case(*LIBS["bg"])
    assert_structure(got, want)
    return got, want


def assert_structure(got, want):
    if isinstance(want, torch.Tensor):
        assert_same(got, want)
    elif isinstance(want, dict):
        assert type(got) is type(want) and list(got) == list(want), (got, want)
        for key in want:
            assert_structure(got[key], want[key])
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            assert_structure(g, w)
    else:
        assert got == want


def rows(lib, *shape, seed=0):
    return lib.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=lib.float64)


# ---- dict outputs keep insertion order --------------------------------------------------------------


@pytest.mark.parametrize("make", [dict, collections.OrderedDict], ids=["dict", "OrderedDict"])
def test_dict_outputs_keep_their_insertion_order(make):
    def case(lib, vmap_fn):
        return vmap_fn(lambda a: make([("weight", a * 2), ("bias", a.sum()), ("alpha", a + 1)]))(rows(lib, 4, 3))

    got, _ = same_as_torch(case)
    assert list(got) == ["weight", "bias", "alpha"]


def test_nested_containers_come_back_as_they_were_built():
    def case(lib, vmap_fn):
        return vmap_fn(lambda a: ({"z": [a, a * 2], "a": Pair(a.sum(), a * 3)}, [a.exp()]))(rows(lib, 4, 3))

    got, _ = same_as_torch(case)
    assert type(got[0]["a"]) is Pair


def test_per_sample_gradients_by_name_pair_with_the_parameters():
    names = ["weight", "bias"]

    def case(lib, vmap_fn):
        w = rows(lib, 2, 3, seed=1).requires_grad_()
        b = rows(lib, 2, seed=2).requires_grad_()

        def per_sample(x):
            if lib is torch:  # torch.func.grad is torch's idiom; bg's is autograd.grad inside vmap
                loss = lambda p: ((p["weight"] @ x + p["bias"]) ** 2).sum()
                return torch.func.grad(loss)({"weight": w, "bias": b})
            return dict(zip(names, lib.autograd.grad(((w @ x + b) ** 2).sum(), (w, b))))

        grads = vmap_fn(per_sample)(rows(lib, 5, 3))
        return [(name, g.shape) for name, g in grads.items()], grads

    (got_names, got), (want_names, want) = case(*LIBS["bg"]), case(*LIBS["torch"])
    assert got_names == want_names == [("weight", (5, 2, 3)), ("bias", (5, 2))]
    assert_structure(got, want)


def test_dict_order_is_kept_when_the_function_runs_traced():
    # the inner vmap reads a value of the outer one's rows: the outer one runs its function under jax.vmap
    def case(lib, vmap_fn):
        return vmap_fn(lambda a: vmap_fn(lambda r: {"z": r * 2, "a": r + a.sum()})(a))(rows(lib, 3, 2, 4))

    same_as_torch(case)


def test_out_dims_given_as_a_dict_match_by_key():
    got = vmap.vmap(lambda a: {"z": a, "a": a * 2}, out_dims={"z": 1, "a": 0})(bg.ones(4, 3))
    assert list(got) == ["z", "a"] and got["z"].shape == (3, 4) and got["a"].shape == (4, 3)


# ---- out_dims=None and functions that ignore their mapped input ----------------------------------------


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_a_function_that_ignores_its_mapped_input_returns_the_result_expanded(chunk_size):
    def case(lib, vmap_fn):
        w = rows(lib, 3, seed=1)
        return vmap_fn(lambda a: lib.ones(2) * w.sum(), chunk_size=chunk_size)(rows(lib, 5, 3))

    got, _ = same_as_torch(case)
    assert got.shape == (5, 2)


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_out_dims_none_returns_an_unbatched_output_as_it_is(chunk_size):
    def case(lib, vmap_fn):
        w = rows(lib, 3, seed=1)
        return vmap_fn(lambda a: (a * 2, w * 3), out_dims=(0, None), chunk_size=chunk_size)(rows(lib, 5, 3))

    if chunk_size is not None:  # torch's chunked vmap fails concatenating an out_dim of None (torch.cat(dim=None))
        want = torch.func.vmap(lambda a: (a * 2, rows(torch, 3, seed=1) * 3), out_dims=(0, None))(rows(torch, 5, 3))
        assert_structure(case(*LIBS["bg"]), want)
        return
    got, _ = same_as_torch(case)
    assert got[1].shape == (3,)


def test_out_dims_none_of_an_output_that_varies_across_rows_raises_torchs_error():
    def batched(a):
        return a * 2

    raises_as_torch(lambda lib, vmap_fn: vmap_fn(batched, out_dims=None)(rows(lib, 4, 3)))
    raises_as_torch(lambda lib, vmap_fn: vmap_fn(lambda a: (a, a.sum()), out_dims=(0, None))(rows(lib, 4, 3)))


def test_ignoring_the_mapped_input_keeps_the_graph_to_captured_tensors():
    def case(lib, vmap_fn):
        w = rows(lib, 3, seed=1).requires_grad_()
        out = vmap_fn(lambda a: w * 2)(rows(lib, 4, 2))
        out.sum().backward()
        return out.detach(), w.grad

    same_as_torch(case)


def test_a_batch_of_zero_rows_with_an_unbatched_output():
    def case(lib, vmap_fn):
        w = rows(lib, 2, seed=1)
        return vmap_fn(lambda a: (w * 2, w + 1), out_dims=(0, None))(lib.zeros(0, 3, dtype=lib.float64))

    got, _ = same_as_torch(case)
    assert got[0].shape == (0, 2)


def test_non_tensor_outputs_need_an_out_dim_of_none():
    same_as_torch(lambda lib, vmap_fn: vmap_fn(lambda a: (a * 2, 3, "text"), out_dims=(0, None, None))(lib.ones(4, 2)))
    raises_as_torch(lambda lib, vmap_fn: vmap_fn(lambda a: (a * 2, 3.5))(lib.ones(4, 2)))
    raises_as_torch(lambda lib, vmap_fn: vmap_fn(lambda a: (a, None))(lib.ones(4, 2)))


def test_a_nested_vmap_returning_the_outer_row():
    same_as_torch(lambda lib, vmap_fn: vmap_fn(lambda x: vmap_fn(lambda y: x)(lib.ones(2)))(rows(lib, 3, 4)))


# ---- argument checks: torch.func.vmap's messages ----------------------------------------------------


def f(a):
    return a * 2


def g(a, b):
    return a + b


BAD_CALLS = {
    "in_dims a list": lambda lib, vmap_fn: vmap_fn(f, in_dims=[0])(lib.ones(2, 3)),
    "in_dims a string": lambda lib, vmap_fn: vmap_fn(f, in_dims="0")(lib.ones(2, 3)),
    "in_dims a float": lambda lib, vmap_fn: vmap_fn(f, in_dims=0.0)(lib.ones(2, 3)),
    "in_dims None": lambda lib, vmap_fn: vmap_fn(g, in_dims=None)(lib.ones(2, 3), lib.ones(2, 3)),
    "an in_dim a float": lambda lib, vmap_fn: vmap_fn(f, in_dims=(0.5,))(lib.ones(2, 3)),
    "an in_dim a string": lambda lib, vmap_fn: vmap_fn(f, in_dims=("a",))(lib.ones(2, 3)),
    "in_dims too short": lambda lib, vmap_fn: vmap_fn(g, in_dims=(0,))(lib.ones(2, 3), lib.ones(2, 3)),
    "in_dims nested wrongly": lambda lib, vmap_fn: vmap_fn(lambda p: p[0], in_dims=((0, 1, 0),))(
        (lib.ones(2, 3), lib.ones(3, 2))
    ),
    "no mapped input": lambda lib, vmap_fn: vmap_fn(g, in_dims=(None, None))(lib.ones(2, 3), lib.ones(2, 3)),
    "no input at all": lambda lib, vmap_fn: vmap_fn(lambda: lib.ones(2))(),
    "a number mapped": lambda lib, vmap_fn: vmap_fn(g)(lib.ones(2, 3), 2.0),
    "in_dim out of range": lambda lib, vmap_fn: vmap_fn(f, in_dims=2)(lib.ones(2, 3)),
    "unequal batch sizes": lambda lib, vmap_fn: vmap_fn(g)(lib.ones(3, 2), lib.ones(2, 2)),
    "out_dims a string": lambda lib, vmap_fn: vmap_fn(f, out_dims="0")(lib.ones(2, 3)),
    "out_dims a float": lambda lib, vmap_fn: vmap_fn(f, out_dims=1.0)(lib.ones(2, 3)),
    "an out_dim a float": lambda lib, vmap_fn: vmap_fn(f, out_dims=(1.0,))(lib.ones(2, 3)),
    "an out_dim a string in a dict": lambda lib, vmap_fn: vmap_fn(lambda a: {"z": a}, out_dims={"z": "1"})(
        lib.ones(2, 3)
    ),
    "out_dims a list for a Tensor": lambda lib, vmap_fn: vmap_fn(f, out_dims=[0])(lib.ones(2, 3)),
    "out_dims too long": lambda lib, vmap_fn: vmap_fn(lambda a: (a, a), out_dims=(0, 0, 0))(lib.ones(2, 3)),
    "out_dims a tuple for a namedtuple": lambda lib, vmap_fn: vmap_fn(lambda a: Pair(a, a), out_dims=(0, 1))(
        lib.ones(2, 3)
    ),
    "out_dims with other keys": lambda lib, vmap_fn: vmap_fn(lambda a: {"z": a, "a": a}, out_dims={"a": 0, "y": 1})(
        lib.ones(2, 3)
    ),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_bad_arguments_raise_torchs_error(case):
    raises_as_torch(BAD_CALLS[case])


@pytest.mark.parametrize("in_dims", [True, (True,)])
def test_a_bool_is_not_an_in_dim(in_dims):
    # torch fails later, inside size(); a bool is not a dimension here either, with vmap's own message
    with pytest.raises(ValueError, match="in_dim"):
        vmap.vmap(f, in_dims=in_dims)(bg.ones(2, 3))


def test_good_arguments_agree_with_torch():
    same_as_torch(
        lambda lib, vmap_fn: vmap_fn(lambda p: p[0] + p[1], in_dims=((0, 1),))(
            (rows(lib, 2, 3), rows(lib, 3, 2, seed=1))
        )
    )
    same_as_torch(lambda lib, vmap_fn: vmap_fn(lambda d: d["a"] * 2, in_dims=({"a": 1},))({"a": rows(lib, 2, 3)}))
    same_as_torch(lambda lib, vmap_fn: vmap_fn(lambda a: Pair(a, a * 2), out_dims=Pair(0, 1))(rows(lib, 2, 3)))
    same_as_torch(lambda lib, vmap_fn: vmap_fn(lambda a: [a, (a, a)], out_dims=[0, 1])(rows(lib, 2, 3)))
    same_as_torch(lambda lib, vmap_fn: vmap_fn(f, out_dims=(-1,))(rows(lib, 2, 3)))


def test_keyword_arguments_are_passed_unbatched():
    same_as_torch(lambda lib, vmap_fn: vmap_fn(lambda a, scale=1.0: a * scale)(rows(lib, 2, 3), scale=rows(lib, 3)))


# ---- .data under vmap -----------------------------------------------------------------------------


def _set_data_from_row(lib):
    def fn(a):
        b = lib.zeros(3, dtype=lib.float64)
        b.data = a
        return b

    return fn


DATA_CASES = {
    "of a mapped input": lambda lib, vmap_fn: vmap_fn(lambda a: a.data * 2)(rows(lib, 2, 3)),
    "of a result": lambda lib, vmap_fn: vmap_fn(lambda a: (a * 2).data)(rows(lib, 2, 3)),
    "of an outer vmap's row": lambda lib, vmap_fn: vmap_fn(lambda a: vmap_fn(lambda b: b + a.data)(a))(
        rows(lib, 2, 3, 3)
    ),
    "assigned a row": lambda lib, vmap_fn: vmap_fn(_set_data_from_row(lib))(rows(lib, 2, 3)),
    "when the function runs traced": lambda lib, vmap_fn: vmap_fn(lambda a: vmap_fn(lambda b: (b * a.sum()).data)(a))(
        rows(lib, 2, 3, 3)
    ),
}


@pytest.mark.parametrize("case", DATA_CASES)
def test_data_of_a_batched_tensor_under_vmap_raises_torchs_error(case):
    raises_as_torch(DATA_CASES[case])


def test_data_of_a_captured_tensor_under_vmap_is_allowed():
    def case(lib, vmap_fn):
        w = rows(lib, 3, seed=1).requires_grad_()
        return vmap_fn(lambda a: a + w.data + (w * 2).data)(rows(lib, 2, 3))

    same_as_torch(case)
    same_as_torch(lambda lib, vmap_fn: vmap_fn(lambda a: a + rows(lib, 3, seed=1).data, chunk_size=1)(rows(lib, 2, 3)))


# ---- one chunk_size check for every entry point ------------------------------------------------------


def _square_sum(u):
    return (u * u).sum()


CHUNKED_CALLS = {
    "vmap.vmap": lambda chunk_size: vmap.vmap(lambda a: a * 2, chunk_size=chunk_size)(bg.ones(4, 2)),
    "grad": lambda chunk_size: bg.autograd.grad(_square_sum(_leaf()), _LEAVES[-1], chunk_size=chunk_size),
    "batched grad": lambda chunk_size: bg.autograd.grad(
        _leaf() * 2, _LEAVES[-1], bg.eye(3, dtype=bg.float64), is_grads_batched=True, chunk_size=chunk_size
    ),
    "jacobian": lambda chunk_size: bg.autograd.functional.jacobian(
        _square_sum, _leaf(), vectorize=True, chunk_size=chunk_size
    ),
    "hessian": lambda chunk_size: bg.autograd.functional.hessian(
        _square_sum, _leaf(), vectorize=True, chunk_size=chunk_size
    ),
}
_LEAVES = []


def _leaf():
    _LEAVES[:] = [bg.tensor([1.0, 2.0, 3.0], dtype=bg.float64, requires_grad=True)]
    return _LEAVES[0]


@pytest.mark.parametrize("chunk_size", [True, False, 0, -2, 1.5, "2", np.bool_(True)])
@pytest.mark.parametrize("entry", CHUNKED_CALLS)
def test_every_entry_point_checks_chunk_size_the_same_way(entry, chunk_size):
    with pytest.raises(ValueError) as error:
        CHUNKED_CALLS[entry](chunk_size)
    if entry == "vmap.vmap" and isinstance(chunk_size, (int, float)) and not chunk_size > 0:  # torch.func.vmap's
        assert str(error.value) == f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})"
    else:
        assert str(error.value) == f'chunk_size must be None, "auto" or a positive int, but got {chunk_size!r}'


@pytest.mark.parametrize("entry", CHUNKED_CALLS)
def test_a_numpy_integer_is_a_chunk_size(entry):
    assert CHUNKED_CALLS[entry](np.int64(2)) is not None


# ---- retain_graph and create_graph take what torch's engine takes ------------------------------------


class Index:
    def __index__(self):
        return 1


class Truthy:
    def __bool__(self):
        return True


def _backward_calls(lib):
    def graph():
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        return x, x.exp().sum()

    def grad(**options):
        x, y = graph()
        return lib.autograd.grad(y, x, **options)

    def backward(**options):
        x, y = graph()
        lib.autograd.backward(y, **options)
        return x.grad

    def tensor_backward(**options):
        x, y = graph()
        y.backward(**options)
        return x.grad

    def batched_grad(**options):
        x, _ = graph()
        return lib.autograd.grad(x.exp(), x, lib.eye(3), is_grads_batched=True, **options)

    return {"grad": grad, "backward": backward, "Tensor.backward": tensor_backward, "batched grad": batched_grad}


FLAG_VALUES = {
    "str": "yes",
    "float": 1.0,
    "list": [],
    "numpy bool": np.bool_(True),
    "object": Truthy(),
    "too large": 256,
    "negative": -1,
    "huge": 2**70,
}


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("call", ["grad", "backward", "Tensor.backward", "batched grad"])
@pytest.mark.parametrize("option", ["retain_graph", "create_graph"])
@pytest.mark.parametrize("value", FLAG_VALUES)
def test_graph_flags_that_are_not_integers_raise_torchs_error(call, option, value):
    raises_as_torch(lambda lib, _: _backward_calls(lib)[call](**{option: FLAG_VALUES[value]}))


@pytest.mark.parametrize("call", ["grad", "backward", "Tensor.backward"])
def test_create_graph_none_raises_torchs_error(call):
    raises_as_torch(lambda lib, _: _backward_calls(lib)[call](create_graph=None))


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize(
    "value",
    [True, False, 0, 1, 2, np.int64(1), Index()],
    ids=["True", "False", "0", "1", "2", "numpy int", "__index__"],
)
def test_graph_flags_that_are_integers_work_as_their_truth_value(value):
    def case(lib, _):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.exp().sum()
        (gx,) = lib.autograd.grad(y, x, retain_graph=value, create_graph=value)
        retained = outcome(lambda: lib.autograd.grad(y, x))[0] == "ok"
        return gx.detach(), gx.requires_grad, retained

    same_as_torch(case)


def test_a_grad_inside_vmap_compiles_once_and_not_again_on_later_calls():
    """The backward inside the function is recorded as one program from the first call, so the function's structure,
    and its one compiled program, are the same on every call. Its first calls, before that program pays back (the
    suite's FUSE_AFTER: two), run a row at a time with the ops' host forms, and compile nothing."""
    rng = np.random.default_rng(0)
    w = bg.tensor(rng.standard_normal((5, 3)))
    xs = bg.tensor(rng.standard_normal((4, 5)))

    def loss(w, x):
        return (bg.tanh(x @ w) ** 2).sum()

    per_sample = bg.func.vmap(bg.func.grad(loss), in_dims=(None, 0))
    expected = torch.func.vmap(torch.func.grad(lambda w, x: (torch.tanh(x @ w) ** 2).sum()), in_dims=(None, 0))(
        torch.tensor(w.numpy()), torch.tensor(xs.numpy())
    )
    compiles = []
    for _ in range(5):
        before = bg.compile_count()
        grads = per_sample(w, xs)
        compiles.append(bg.compile_count() - before)
        np.testing.assert_allclose(grads.numpy(), expected.numpy(), rtol=1e-12)
    assert compiles[:2] == [0, 0] and compiles[2] > 0 and compiles[3:] == [0, 0]


# ---- ops vmap has no rule for ----------------------------------------------------------------------------------------

_OUT_CALLS = {
    "unary": lambda lib, x, y: lib.abs(x, out=y),
    "binary tensor": lambda lib, x, y: lib.add(x, x, out=y),
    "binary number": lambda lib, x, y: lib.mul(x, 2.0, out=y),
    "pow number": lambda lib, x, y: lib.pow(x, 2.0, out=y),
    "pow tensor": lambda lib, x, y: lib.pow(x, x, out=y),
    "number pow": lambda lib, x, y: lib.pow(2.0, x, out=y),
    "clamp": lambda lib, x, y: lib.clamp(x, min=0.1, out=y),
    "clip tensor": lambda lib, x, y: lib.clip(x, min=x, out=y),
    "fmod": lambda lib, x, y: lib.fmod(x, 0.3, out=y),
    "lt": lambda lib, x, y: lib.lt(x, x, out=y.bool()),
    "div floor": lambda lib, x, y: lib.div(x, 2.0, rounding_mode="floor", out=y),
    "round decimals": lambda lib, x, y: lib.round(x, decimals=1, out=y),
    "lerp": lambda lib, x, y: lib.lerp(x, y, 0.5, out=y),
    "where": lambda lib, x, y: lib.where(x > 0, x, y, out=y),
    "normalize": lambda lib, x, y: lib.nn.functional.normalize(x, dim=0, out=y),
}


@pytest.mark.parametrize("call", list(_OUT_CALLS), ids=list(_OUT_CALLS))
def test_an_op_with_out_on_rows_is_refused_with_torchs_message(call):
    raises_as_torch(
        lambda lib, vmap_fn: vmap_fn(lambda x, y: _OUT_CALLS[call](lib, x, y))(rows(lib, 2, 3), rows(lib, 2, 3))
    )


def test_an_op_with_out_is_refused_when_only_out_varies_and_runs_when_nothing_does():
    raises_as_torch(
        lambda lib, vmap_fn: vmap_fn(lambda x, y: lib.abs(x, out=y), in_dims=(None, 0))(lib.ones(3), rows(lib, 2, 3))
    )

    def case(lib, vmap_fn):
        out = lib.empty(3)
        return vmap_fn(lambda x: lib.abs(lib.ones(3), out=out), out_dims=None)(rows(lib, 2, 3)), out

    same_as_torch(case)


@pytest.mark.parametrize("fn", ["equal", "allclose"])
def test_whole_tensor_comparisons_of_rows_are_refused_with_torchs_message(fn):
    raises_as_torch(lambda lib, vmap_fn: vmap_fn(getattr(lib, fn))(rows(lib, 2, 3), rows(lib, 2, 3)))
