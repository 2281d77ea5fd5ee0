"""A new size compiles nothing, op by op of the op database (tests/op_db.py): on the CPU backend an op outside the
graph runs on the host (a hand-written or derived host form, _numpy_eval.py), so that after it ran at one size, the
same call at sizes never seen compiles no XLA kernel, whatever bucket of sizes they fall in. Counted with
bg.compile_count(), not timed. The ops whose host forms are still missing are listed in GAPS with the primitive that
has no NumPy row, as strict xfails: one that starts passing must leave the list."""

import jax
import numpy as np
import pytest

import batched_grad as bg
from op_db import ENTRIES

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="host forms run on the CPU backend only")

FAMILIES = ("unary", "binary", "reductions", "statistics", "indexing", "shape", "linalg")
# each record's sizes 3 and 2 become these (a (3, 3) argument: 49, then 169, 961 elements), so that the sizes
# counted fall in other buckets of sizes than the warm-up's (16, 64, 256, 1024, ...)
WARM_UP, NEW = (7, 11), ((13, 17), (31, 29))

_SORT = "sort (no NumPy row)"
_LINALG = "a decomposition (no NumPy row)"
GAPS = {  # call name -> what compiles
    "logcumsumexp": "cumlogsumexp (no NumPy row)",
    "median": _SORT,
    "median-all": _SORT,
    "nanmedian": _SORT,
    "msort": _SORT,
    "quantile": _SORT,
    "nanquantile": _SORT,
    "sort": _SORT,
    "topk": "top_k (no NumPy row)",
    "searchsorted": _SORT,
    "corrcoef": _LINALG,
    "logdet": _LINALG,
    "matrix_exp": _LINALG,
    "det": _LINALG,
    "inverse": _LINALG,
    "pinverse": _LINALG,
    "cholesky": _LINALG,
    "cholesky_inverse": _LINALG,
    "lu": _LINALG,
    "qr": _LINALG,
    "svd": _LINALG,
    "linalg.cholesky": _LINALG,
    "linalg.eigh": _LINALG,
    "linalg.svd": _LINALG,
    "linalg.qr": _LINALG,
    "diagflat": "its result has more than HOST_ELEMENTS elements at the new sizes: a kernel",
}


def _calls():
    for entry in ENTRIES:
        if entry.family in FAMILIES and "float32" in entry.dtypes:
            for name, call in entry.calls().items():
                marks = [pytest.mark.xfail(strict=True, reason=GAPS[name])] if name in GAPS else []
                yield pytest.param(entry, call, id=name, marks=marks)


def _tensors(entry, sizes):
    """The record's arguments with its sizes 3 and 2 replaced by `sizes`."""
    rng = np.random.default_rng(0)
    out = []
    for arg in entry.args:
        shape = tuple([{3: sizes[0], 2: sizes[1]}.get(d, d) for d in arg.shape])
        value = arg.domain.sample(rng, shape)
        out.append(bg.tensor(value.astype(np.float32) if arg.domain.kind == "float" else value))
    return out


def _run(entry, call, sizes):
    out = call(bg, *_tensors(entry, sizes))
    for o in out if isinstance(out, (tuple, list)) else [out]:
        if isinstance(o, bg.Tensor):
            o.numpy()


@pytest.mark.parametrize("entry, call", list(_calls()))
def test_a_new_size_compiles_nothing(entry, call):
    try:
        _run(entry, call, WARM_UP)
    except (RuntimeError, ValueError, IndexError) as e:  # a call whose sizes are fixed (view(9), a 3-vector cross)
        pytest.skip(f"the call takes no other sizes: {e}")
    before = bg.compile_count()
    for sizes in NEW:
        _run(entry, call, sizes)
    assert bg.compile_count() == before, "a new size compiled a kernel"


def test_most_calls_of_these_families_take_new_sizes():
    """The sweep above is no sweep of skips: the records of these families mostly take other sizes."""
    taken = 0
    for param in _calls():
        entry, call = param.values
        try:
            _run(entry, call, WARM_UP)
            taken += 1
        except (RuntimeError, ValueError, IndexError):
            pass
    assert taken >= 300


_xla_compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kwargs: (
        _xla_compiles.append(event) if event.endswith("backend_compile_duration") else None
    )
)


def _layout_of_views(n):
    return _layouts(bg, bg.randn(n, n + 1, 3), n)


def _layouts(lib, x, n):
    views = (
        x.transpose(0, 1),
        x[:, 1:],
        x.permute(2, 0, 1)[1],
        x.reshape(n + 1, n, 3).narrow(0, 1, 2),
        x.diagonal(0, 0, 1),
        x[None].expand(2, n, n + 1, 3),
    )
    return [
        (v.is_contiguous(), v.stride(), v.storage_offset(), v.data_ptr() - x.data_ptr(), tuple(v.contiguous().shape))
        for v in views
    ]


def test_a_views_layout_at_a_new_size_compiles_nothing():
    """Strides, contiguity and storage offsets of views (read by `.contiguous()` in every Transformer's reshapes)
    are worked out on the host: a new size compiles no XLA program, not even JAX's own eager ones; they are torch's."""
    import torch

    _layout_of_views(4)
    before = len(_xla_compiles)
    for n in (5, 9, 23):
        assert _layout_of_views(n) == _layouts(torch, torch.randn(n, n + 1, 3), n)
    assert len(_xla_compiles) == before


def _index_arithmetic(lib, n):
    a = lib.tensor(np.arange(n) * 7 % 11)
    b = lib.tensor(np.arange(n) + 1)
    strides = lib.tensor([5, 1])
    return [
        a * b,
        a + 3,
        a - b,
        a // 2,
        a % 3,
        a * 5 + b,
        (a > 4) & (b < 9),
        (lib.stack([a, b]) * strides.unsqueeze(1)).sum(0),
        a.cumsum(0),
        a.max(),
        a.clamp(2, 8),
    ]


def test_integer_ops_at_a_new_size_compile_nothing():
    """Integer ops (index arithmetic: a sparse tensor's linear index, masks, offsets) fall back from a float-only
    hand-written host form to the derived one: a new size compiles nothing, with torch's values."""
    import torch

    _index_arithmetic(bg, 5)
    before = bg.compile_count()
    for n in (6, 13, 40):
        for got, want in zip(_index_arithmetic(bg, n), _index_arithmetic(torch, n)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert bg.compile_count() == before
