"""out= on every function torch gives it to, against torch 2.13: single results (cast where torch casts, the same
dtype where torch wants it), several results written into a tuple of tensors and returned as torch's `<op>_out`
named tuple, factories made in out's dtype, and torch's errors for a wrong out."""

import re
import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad._ops._out_rules import OUT_RULES

NAMESPACES = {"torch": (torch, bg), "linalg": (torch.linalg, bg.linalg), "special": (torch.special, bg.special)}
NAMESPACES["fft"] = (torch.fft, bg.fft)


def _documented_with_out(module):
    names = []
    for name in dir(module):
        fn = getattr(module, name)
        if not name.startswith("_") and callable(fn) and not isinstance(fn, type):
            if re.search(r"\bout\s*=\s*None", fn.__doc__ or ""):
                names.append(name)
    return names


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_every_function_torch_documents_with_out_takes_it(namespace):
    theirs, ours = NAMESPACES[namespace]
    refused = []
    for name in _documented_with_out(theirs):
        fn = getattr(ours, name, None)
        if fn is None or name in ("std_mean", "var_mean"):  # torch's docstrings say out=, its parser refuses it
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fn(out=None)
            except TypeError as error:
                if "unexpected keyword argument 'out'" in str(error):
                    refused.append(name)
            except Exception:  # noqa: S110  (the arguments are missing: only the keyword matters here)
                pass
    assert not refused, f"{namespace}: functions refusing out=: {refused}"


def test_out_rules_name_only_functions_of_their_namespace():
    for namespace, rules in OUT_RULES.items():
        module = NAMESPACES[namespace][1]
        assert not [name for name in rules if not hasattr(module, name)]


def _x(m):
    return m.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])


def _e(m, dtype="float32"):
    return m.empty(0, dtype=getattr(m, dtype))


def _same(got, want):
    if isinstance(want, tuple):
        assert type(got).__name__ == type(want).__name__ and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert str(got.dtype) == str(want.dtype) and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


CALLS = [
    ("aminmax_dim", lambda m: m.aminmax(_x(m), dim=1, out=(_e(m), _e(m)))),
    ("aminmax_list", lambda m: m.aminmax(_x(m), out=[_e(m), _e(m)])),
    ("sort", lambda m: m.sort(_x(m), out=(_e(m), _e(m, "int64")))),
    ("max_dim", lambda m: m.max(_x(m), 1, out=(_e(m), _e(m, "int64")))),
    ("max_all", lambda m: m.max(_x(m), out=_e(m))),
    ("topk", lambda m: m.topk(_x(m), 2, out=(_e(m), _e(m, "int64")))),
    ("cummax", lambda m: m.cummax(_x(m), 1, out=(_e(m), _e(m, "int64")))),
    ("cumsum_wider", lambda m: m.cumsum(_x(m), 0, out=_e(m, "float64"))),
    ("mm", lambda m: m.mm(_x(m), _x(m).T, out=_e(m))),
    ("cat_wider", lambda m: m.cat([_x(m), _x(m)], out=_e(m, "float64"))),
    ("logsumexp", lambda m: m.logsumexp(_x(m), 1, out=_e(m))),
    ("zeros_of_out_dtype", lambda m: m.zeros(2, out=_e(m, "int64"))),
    ("arange_of_out_dtype", lambda m: m.arange(3, out=_e(m, "float64"))),
    ("linalg_inv", lambda m: m.linalg.inv(_x(m)[:, :2], out=_e(m))),
    ("linalg_slogdet", lambda m: m.linalg.slogdet(_x(m)[:, :2], out=(_e(m), _e(m)))),
    ("special_xlogy", lambda m: m.special.xlogy(_x(m), 2.0, out=_e(m))),
    ("fft", lambda m: m.fft.fft(_x(m), out=_e(m, "complex64"))),
    ("fftfreq_of_out_dtype", lambda m: m.fft.fftfreq(4, out=_e(m, "float64"))),
    ("divide_alias", lambda m: m.divide(_x(m), 2, out=_e(m))),
    ("randint_into_float", lambda m: m.randint(3, (4,), out=_e(m)).clamp(max=-1)),
    ("linspace_into_int", lambda m: m.linspace(0, 4, 3, out=_e(m, "int64"))),
]


@pytest.mark.parametrize("call", [c[1] for c in CALLS], ids=[c[0] for c in CALLS])
def test_out_like_torch(call):
    _same(call(bg), call(torch))


def test_out_returns_the_tensors_given():
    low, high = bg.empty(0), bg.empty(0)
    result = bg.aminmax(_x(bg), dim=0, out=(low, high))
    assert result.min is low and result[1] is high and low.tolist() == [0.5, -2.0, -1.0]
    assert repr(result).startswith("torch.return_types.aminmax_out(\nmin=")


def test_a_factory_asked_for_grad_makes_out_require_it():
    out = bg.empty(0)
    result = bg.ones(2, out=out, requires_grad=True)
    want = torch.ones(2, out=torch.empty(0), requires_grad=True)
    assert result is out and out.requires_grad is want.requires_grad is True and out.is_leaf


ERRORS = [
    ("tuple_for_one_result", lambda m: m.cumsum(_x(m), 0, out=(_e(m),))),
    ("tensor_for_two_results", lambda m: m.aminmax(_x(m), out=_e(m))),
    ("too_few_tensors", lambda m: m.aminmax(_x(m), out=(_e(m),))),
    ("indices_of_wrong_dtype", lambda m: m.sort(_x(m), out=(_e(m), _e(m)))),
    ("float_result_into_int", lambda m: m.copysign(_x(m), 1.0, out=_e(m, "int64"))),
    ("mm_other_dtype", lambda m: m.mm(_x(m), _x(m).T, out=_e(m, "float64"))),
    ("requires_grad", lambda m: m.aminmax(m.ones(2, requires_grad=True), out=(_e(m), _e(m)))),
    ("factory_dtype_not_out_dtype", lambda m: m.zeros(2, dtype=m.float32, out=_e(m, "float64"))),
]


@pytest.mark.parametrize("call", [e[1] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_out_errors_like_torch(call):
    with pytest.raises(Exception) as want:
        call(torch)
    with pytest.raises(type(want.value)) as got:
        call(bg)
    assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]
