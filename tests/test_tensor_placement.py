"""Where a tensor is and how it lies in storage, against torch 2.13: to(device[, dtype]) / to(other) / cpu() /
cuda() / type(), is_cuda, get_device, data_ptr(), _base, is_contiguous(), contiguous(), output_nr, reshape_as."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch

# views of a (3, 4) tensor x, written once against a module's tensor
VIEWS = {
    "itself": lambda x: x,
    "t": lambda x: x.t(),
    "column": lambda x: x[:, 1],
    "row": lambda x: x[1],
    "left-columns": lambda x: x[:, :2],
    "expand": lambda x: x.expand(2, 3, 4),
    "new-axis": lambda x: x[None],
    "first-row": lambda x: x[:1],
    "first-column": lambda x: x[:, :1],
    "every-other-row": lambda x: x[::2],
    "diagonal": lambda x: x.diagonal(),
    "diagonal-1": lambda x: x.diagonal(1),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "empty-rows": lambda x: x[:0],
    "empty-columns": lambda x: x[:, :0],
    "block": lambda x: x[1:, 1:2],
    "view": lambda x: x.view(2, 6),
    "t-rows": lambda x: x.t()[1:],
    "t-t": lambda x: x.permute(1, 0).t(),
    "unbind-column": lambda x: x.unbind(1)[3],
    "unbind-row": lambda x: x.unbind(0)[2],
    "chunk": lambda x: x.chunk(2, 1)[1],
    "split": lambda x: x.split(1)[2],
    "narrow": lambda x: x.narrow(1, 1, 2),
    "rows-view": lambda x: x[1:].view(8),
    "flatten": lambda x: x.flatten(),
    "view-of-view": lambda x: x[2:][None][:, :, 1:],
    "expand-row": lambda x: x.expand(2, 3, 4)[1],
    "detach": lambda x: x.detach(),
    "detach-rows": lambda x: x[1:].detach(),
    "transpose-3d": lambda x: x.reshape(3, 2, 2).transpose(0, 2),
    "movedim": lambda x: x.reshape(3, 2, 2).movedim(0, 1),
}


@pytest.mark.parametrize("name", VIEWS)
def test_is_contiguous_and_data_ptr_of_views(name):
    x, t = bg.zeros(3, 4), torch.zeros(3, 4)
    v, tv = VIEWS[name](x), VIEWS[name](t)
    assert v.is_contiguous() is tv.is_contiguous()
    assert (v.data_ptr() - x.data_ptr() if v.numel() else v.data_ptr()) == (
        tv.data_ptr() - t.data_ptr() if tv.numel() else tv.data_ptr()
    )
    assert (v._base is x) is (tv._base is t) and (v._base is None) is (tv._base is None)


def test_data_ptr_is_stable_and_distinct_per_storage():
    x, y = bg.zeros(3, 4), bg.zeros(3, 4)
    p = x.data_ptr()
    x.add_(1)
    x[0] = 7  # in-place changes keep the storage
    assert x.data_ptr() == p and isinstance(p, int) and p % 64 == 0
    assert len({x.data_ptr(), y.data_ptr(), x.clone().data_ptr(), (x + 1).data_ptr()}) == 4
    assert not (x.data_ptr() <= y.data_ptr() < x.data_ptr() + 48)  # storages do not overlap
    assert bg.ones(0).data_ptr() == 0


def test_base_of_views_of_a_detached_tensor():
    x = bg.zeros(3, 4)
    d = x.detach()
    assert d._base is None and d[1:]._base is d and d[1:][1:]._base is d and d.t()[0]._base is d
    assert x.data[1:]._base is not None and x.data[1:]._base is not x


def test_contiguous():
    x = bg.zeros(3, 4)
    assert x.contiguous() is x and x[1:].contiguous()._base is x
    c = x.t().contiguous()
    assert c.is_contiguous() and c._base is None
    c[0, 0] = 5  # a copy: the original is unchanged, as in torch
    assert x[0, 0].item() == 0
    w = bg.ones(3, requires_grad=True)
    assert w.contiguous() is w
    e = w[None].expand(2, 3).contiguous()
    assert e.grad_fn.name() == "CloneBackward0"
    e.sum().backward()
    assert_same(w.grad, torch.full((3,), 2.0))


def test_output_nr():
    w, tw = bg.ones(2, 3, requires_grad=True), torch.ones(2, 3, requires_grad=True)
    for f in (
        lambda w: w * 2,
        lambda w: w.unbind(0)[1],
        lambda w: w.chunk(3, 1)[2],
        lambda w: w.sort()[1],
        lambda w: w.max(0)[0],
        lambda w: w.detach().unbind(0)[1],
        lambda w: w,
    ):
        assert f(w).output_nr == f(tw).output_nr


def test_reshape_as():
    x, t = bg.arange(12.0), torch.arange(12.0)
    assert_same(x.reshape_as(bg.ones(4, 3)), t.reshape_as(torch.ones(4, 3)))
    raises_like_torch(lambda m: m.arange(12.0).reshape_as(m.ones(5)))
    raises_like_torch(lambda m: m.arange(12.0).reshape_as((4, 3)))
    w = bg.ones(6, requires_grad=True)
    assert w.reshape_as(bg.ones(2, 3)).grad_fn.name() == "ViewBackward0"


# ---- to / cpu / type / device ----------------------------------------------------------------------------------
TO_CALLS = {
    "cpu": lambda m, x: x.to("cpu"),
    "device": lambda m, x: x.to(m.device("cpu")),
    "device=": lambda m, x: x.to(device="cpu"),
    "cpu:0": lambda m, x: x.to("cpu:0"),
    "cpu-dtype": lambda m, x: x.to("cpu", m.float64),
    "cpu-dtype=": lambda m, x: x.to("cpu", dtype=m.int32),
    "device-dtype=": lambda m, x: x.to(device=None, dtype=None),
    "other": lambda m, x: x.to(m.ones(1, dtype=m.int32)),
    "dtype": lambda m, x: x.to(m.float16),
    "non_blocking": lambda m, x: x.to("cpu", non_blocking=True),
    "copy": lambda m, x: x.to("cpu", copy=True),
    "positional-copy": lambda m, x: x.to(m.float32, False, True),
    "nothing": lambda m, x: x.to(),
    "cpu()": lambda m, x: x.cpu(),
    "type(dtype)": lambda m, x: x.type(m.float64),
    "type(same)": lambda m, x: x.type(m.float32),
    "type(str)": lambda m, x: x.type("torch.DoubleTensor"),
    "type(str same)": lambda m, x: x.type("torch.FloatTensor"),
    "type(non_blocking)": lambda m, x: x.type(m.int64, non_blocking=True),
}


@pytest.mark.parametrize("name", TO_CALLS)
def test_to_and_type_conversions(name):
    x, t = bg.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)
    got, want = TO_CALLS[name](bg, x), TO_CALLS[name](torch, t)
    assert_same(got, want)
    assert (got is x) is (want is t)
    assert str(got.device) == str(want.device) == "cpu"


@pytest.mark.parametrize("name", ["cpu-dtype", "other", "copy", "type(dtype)", "cpu"])
def test_to_records_torch_node(name):
    w, tw = bg.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    got, want = TO_CALLS[name](bg, w), TO_CALLS[name](torch, tw)
    assert (got.grad_fn is None) is (want.grad_fn is None)
    if want.grad_fn is not None:
        assert got.grad_fn.name() == want.grad_fn.name()
        if got.dtype.is_floating_point:
            got.sum().backward()
            want.sum().backward()
            assert_same(w.grad, tw.grad)


@pytest.mark.parametrize(
    "name",
    [
        "float32",
        "float64",
        "float16",
        "bfloat16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
        "complex64",
        "complex128",
    ],
)
def test_type_names(name):
    assert bg.zeros(2, dtype=getattr(bg, name)).type() == torch.zeros(2, dtype=getattr(torch, name)).type()


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.ones(2).type("torch.Foo"),
        lambda m: m.ones(2).type("torch.float64"),
        lambda m: m.ones(2).type(3),
        lambda m: m.ones(2).to("foo"),
        lambda m: m.ones(2).to("cuda:x"),
        lambda m: m.ones(2).to(m.float64, m.float32),
    ],
    ids=["type-unknown", "type-dtype-name", "type-int", "to-unknown", "to-bad-index", "to-two-dtypes"],
)
def test_conversion_errors(call):
    with pytest.raises(Exception) as want:
        call(torch)
    with pytest.raises(type(want.value)) as got:
        call(bg)
    if type(want.value) is not TypeError:  # torch's TypeError here lists its overloads
        assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]


def test_devices_jax_lacks_raise_clearly():
    x = bg.ones(2)
    assert x.to("meta").is_meta is torch.ones(2).to("meta").is_meta is True  # tests/test_meta_device.py
    with pytest.raises(RuntimeError, match="not linked with support for mps devices"):  # torch's words
        x.to("mps")
    if bg.cuda.is_available():
        return
    for call in (
        lambda: x.to("cuda"),
        lambda: x.to("cuda:1"),
        lambda: x.cuda(),
        lambda: x.to(bg.device("cuda")),
        lambda: x.type("torch.cuda.FloatTensor"),
    ):
        with pytest.raises(AssertionError, match="CUDA is not available"):  # torch: AssertionError too
            call()
    raises_like_torch(lambda m: m.ones(2).to(0))


def test_where_a_tensor_is():
    x, t = bg.ones(2), torch.ones(2)
    for name in ("is_cuda", "is_sparse", "is_meta", "is_quantized"):
        assert getattr(x, name) is getattr(t, name) is False
    assert x.get_device() == t.get_device() == -1
    assert x.cpu() is x and x.device == bg.device("cpu")


LAYOUT_NAMES = ("strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "_mkldnn", "jagged")


def test_layouts_and_tensor_metadata_as_torch():
    import pickle

    for name in LAYOUT_NAMES:
        ours = getattr(bg, name)
        assert isinstance(ours, bg.layout) and repr(ours) == repr(getattr(torch, name))
        assert pickle.loads(pickle.dumps(ours)) is ours
    x, t = bg.ones(2, 3)[:, 1], torch.ones(2, 3)[:, 1]
    assert repr(x.layout) == repr(t.layout) == "torch.strided" and x.layout is bg.strided
    assert x.to("meta").layout is bg.strided
    flags = [a for a in dir(t) if a.startswith("is_") and not callable(getattr(t, a))]
    assert {a: getattr(x, a) for a in flags} == {a: getattr(t, a) for a in flags}


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.hann_window(4, layout=m.strided),
        lambda m: m.tril_indices(3, 3, layout=m.strided),
        lambda m: m.fft.rfftfreq(4, layout=m.strided),
        lambda m: m.zeros(2, 3, dtype=m.float64, layout=m.ones(1).layout),
        lambda m: m.arange(5, layout=m.strided),
        lambda m: m.full((2,), 3.0, layout=m.strided),
        lambda m: m.eye(3, layout=m.strided),
        lambda m: m.linspace(0, 1, 5, layout=m.strided),
        lambda m: m.logspace(0, 1, 3, layout=m.strided),
        lambda m: m.ones_like(m.ones(2, 2), layout=m.strided),
        lambda m: m.ones(2).new_zeros(3, layout=m.strided),
        lambda m: m.ones(2).new_full((2,), 4.0, layout=m.strided),
        lambda m: m.randperm(4, layout=m.strided).sort().values,
    ],
    ids=["window", "triangle", "frequencies", "zeros", "arange", "full", "eye", "linspace", "logspace", "like"]
    + ["new_zeros", "new_full", "randperm"],
)
def test_strided_layout_argument_is_accepted(call):
    assert_same(call(bg), call(torch))


@pytest.mark.parametrize(
    "make", [lambda m: m.kaiser_window(4, layout="strided"), lambda m: m.triu_indices(2, 2, layout=1)]
)
def test_layout_argument_of_wrong_type(make):
    with pytest.raises(TypeError, match="layout"):  # torch lists its overloads
        make(torch)
    with pytest.raises(TypeError, match="argument 'layout' must be torch.layout, not (str|int)"):
        make(bg)


def test_layouts_other_than_strided_are_refused():
    with pytest.raises(RuntimeError, match="not implemented for sparse types"):  # torch can't make it either
        torch.hann_window(3, layout=torch.sparse_coo)
    for call in (
        lambda: bg.hann_window(3, layout=bg.sparse_coo),
        lambda: bg.tril_indices(3, 3, layout=bg.sparse_csr),
        lambda: bg.fft.fftfreq(3, layout=bg.jagged),
        lambda: bg.zeros(2, layout=bg.sparse_coo),
        lambda: bg.rand(2, layout=bg._mkldnn),
        lambda: bg.ones(2).new_ones(2, layout=bg.sparse_csr),
    ):
        with pytest.raises(NotImplementedError, match=r"dense tensors only \(layout=torch.strided"):
            call()


@pytest.mark.skipif(not bg.cuda.is_available(), reason="needs a JAX GPU backend")
def test_to_cuda_and_back():
    x = bg.arange(6.0, requires_grad=True)
    y = x.to("cuda")
    assert y.is_cuda and y.device == bg.device("cuda", 0) and y.get_device() == 0
    assert y.type() == "torch.cuda.FloatTensor" and y.grad_fn.name() == "ToCopyBackward0"
    (y * y).sum().backward()
    assert_same(x.grad, torch.arange(6.0) * 2) and x.grad.device == bg.device("cpu")
    z = bg.ones(3).cuda().cpu()
    assert not z.is_cuda and np.array_equal(z.numpy(), np.ones(3, np.float32))
