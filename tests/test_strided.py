"""as_strided, as_strided_ and set_ against torch 2.13: a view of a tensor's storage by sizes, strides and an offset
(values, gradients that add up where elements are read twice, torch's errors for a bad geometry), its in-place form,
and set_, which makes a tensor share another's storage (values flow both ways, each keeps its version counter, a leaf
gets a new gradient accumulator, and a recorded set_ has no derivative)."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, check_both, pair, raises_like_torch

GEOMETRIES = [
    ((2, 2), (1, 2), 1),  # a transposed window
    ((3, 2), (1, 1), None),  # overlapping rows: elements read twice
    ((4,), (0,), 2),  # one element broadcast
    ((), (), 5),  # one element as a 0-d tensor
    ((1, 0), (2, 2), None),  # no elements
]


@pytest.mark.parametrize("size, stride, offset", GEOMETRIES)
def test_as_strided_values_and_derivatives(size, stride, offset):
    x = bg.arange(6.0, dtype=bg.float64).requires_grad_()
    if offset is None:
        check_both(lambda lib, t: lib.as_strided(t * 1.5, size, stride), [x], batched=True)
    else:
        check_both(lambda lib, t: (t * 1.5).as_strided(size, stride, offset), [x], batched=True)


def test_as_strided_of_a_view_is_relative_to_the_storage():
    for lib, base in zip((bg, torch), pair(10)):
        view = base[2:8]
        default = view.as_strided((2, 2), (1, 2))  # from the view's own offset (2)
        explicit = view.as_strided((3,), (2,), 3)
        (default.sum() * 2 + (explicit * explicit).sum()).backward()
        if lib is bg:
            got = (default, explicit, default.storage_offset(), default.stride(), base.grad)
        else:
            expected = (default.detach(), explicit.detach(), default.storage_offset(), default.stride(), base.grad)
    assert_same(got[:2], expected[:2])
    assert got[2:4] == expected[2:4]
    assert_same(got[4], expected[4])


def test_as_strided_node_and_what_it_saves():
    for lib in (bg, torch):
        x = lib.ones(2, 2, requires_grad=True)
        given, default = x.as_strided((3,), (1,), 1), x.as_strided((3,), (1,))
        assert type(given.grad_fn).__name__ == "AsStridedBackward0" and given._base is x
        assert given.grad_fn._saved_storage_offset == 1 and default.grad_fn._saved_storage_offset is None
        assert tuple(given.grad_fn._saved_size) == (3,) and tuple(given.grad_fn._saved_stride) == (1,)


def test_writes_through_an_as_strided_view_reach_the_base():
    for lib in (bg, torch):
        base = lib.zeros(6)
        base.as_strided((2, 2), (1, 2), 1).add_(lib.tensor([[1.0, 2.0], [3.0, 4.0]]))
        assert base.tolist() == [0.0, 1.0, 3.0, 2.0, 4.0, 0.0]


@pytest.mark.parametrize(
    "size, stride, offset",
    [((2, 2), (2, 1), 4), ((2,), (-1,), None), ((2, 2), (1,), None), ((-1,), (1,), None), ((2,), (1,), -1)],
    ids=["out-of-bounds", "negative-stride", "lengths", "negative-size", "negative-offset"],
)
def test_as_strided_refuses_a_bad_geometry_as_torch(size, stride, offset):
    raises_like_torch(lambda lib: lib.arange(6.0).as_strided(size, stride, offset))


def test_as_strided_in_place_on_a_tensor_and_on_a_view():
    for lib in (bg, torch):
        base = lib.arange(6.0)
        window = base[1:3]
        assert base.as_strided_((3, 2), (1, 3)) is base and base._version == 1
        base.add_(100)  # a reordering of every element: the earlier view still sees its elements
        assert base.tolist() == [[100.0, 103.0], [101.0, 104.0], [102.0, 105.0]]
        assert window.tolist() == [101.0, 102.0]
        x = lib.arange(6.0, requires_grad=True)
        y = x.clone()
        y.as_strided_((3,), (2,))
        assert type(y.grad_fn).__name__ == "AsStridedBackward1" and y.tolist() == [0.0, 2.0, 4.0]
        (y * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        assert x.grad.tolist() == [1.0, 0.0, 2.0, 0.0, 3.0, 0.0]


@pytest.mark.parametrize("kind", ["no-grad view", "multi-output view", "custom Function view"])
def test_as_strided_in_place_keeps_torchs_view_checks(kind):
    def write(lib):
        class Alias(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.view_as(x)

            @staticmethod
            def backward(ctx, g):
                return g

        base = lib.rand(2, 3, requires_grad=True).clone()
        if kind == "no-grad view":
            with lib.no_grad():
                view = base.view_as(base)
        else:
            view = base.unbind()[0] if kind == "multi-output view" else Alias.apply(base)
        view.as_strided_((1, 0), (2, 2))

    raises_like_torch(write)


def test_set_shares_storage_both_ways_with_versions_of_its_own():
    for lib in (bg, torch):
        x, source = lib.rand(2, requires_grad=True), lib.arange(3.0)
        with lib.no_grad():
            assert x.set_(source) is x
        assert tuple(x.shape) == (3,) and x.requires_grad and x.is_leaf and x._base is None
        assert (x._version, source._version) == (1, 0) and x.data_ptr() == source.data_ptr()
        source.add_(1)
        assert x.tolist() == [1.0, 2.0, 3.0] and (x._version, source._version) == (1, 1)
        with lib.no_grad():
            x.mul_(2)
        assert source.tolist() == [2.0, 4.0, 6.0] and (x._version, source._version) == (2, 1)


def test_set_with_a_geometry_and_of_a_view():
    for lib in (bg, torch):
        storage = lib.arange(10.0)
        t = lib.rand(3).set_(storage, 2, (2, 3), (3, 1))
        assert t.tolist() == [[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]] and t.storage_offset() == 2
        assert lib.rand(3).set_(storage, 2, (2, 3)).tolist() == t.tolist()
        storage.mul_(2)
        assert t.tolist() == [[4.0, 6.0, 8.0], [10.0, 12.0, 14.0]]
        view = storage[2:5]
        u = lib.rand(1).set_(view)
        assert u.storage_offset() == 2 and u.is_set_to(view) and view.is_set_to(u) and not u.is_set_to(storage)
        empty = lib.rand(3).set_()
        assert tuple(empty.shape) == (0,) and str(empty.dtype) == "torch.float32"


def test_set_leaves_old_views_on_the_old_storage():
    for lib in (bg, torch):
        x = lib.arange(4.0)
        head = x[:2]
        x.set_(lib.zeros(3))
        x.add_(1)
        assert head.tolist() == [0.0, 1.0] and x.tolist() == [1.0, 1.0, 1.0]


def test_set_recorded_has_no_derivative():
    def backward_through_set(lib, source_requires_grad):
        a = lib.rand(3, requires_grad=True)
        target = lib.rand(3) if source_requires_grad else a * 2
        target.set_(lib.rand(3, requires_grad=source_requires_grad))
        assert type(target.grad_fn).__name__ == "NotImplemented"
        assert [n is None for n, _ in target.grad_fn.next_functions] == [source_requires_grad, False]
        target.sum().backward()

    for source_requires_grad in (False, True):
        raises_like_torch(lambda lib: backward_through_set(lib, source_requires_grad))


def test_set_gives_a_leaf_a_new_gradient_accumulator():
    for lib in (bg, torch):
        x = lib.rand(2, requires_grad=True)
        edge = lib.autograd.graph.get_gradient_edge(x)
        out = (x * 2).sum()
        with lib.no_grad():
            x.set_(lib.rand(2))
        with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
            lib.autograd.grad(out, x, retain_graph=True)
        assert lib.autograd.grad(out, edge, retain_graph=True)[0].tolist() == [2.0, 2.0]
        out.backward()  # the graph recorded before still accumulates into the tensor
        assert x.grad.tolist() == [2.0, 2.0]


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.rand(2, requires_grad=True).set_(lib.rand(3)),
        lambda lib: lib.rand(4, requires_grad=True)[:2].set_(lib.zeros(3)),
        lambda lib: lib.rand(3).set_(lib.zeros(2, dtype=lib.int64)),
        lambda lib: lib.rand(3).set_(3),
        lambda lib: lib.rand(3).set_(lib.ones(2), 1),
        lambda lib: lib.rand(3).set_(lib.ones(4), 0, (2,), (1, 2)),
    ],
    ids=["leaf", "view-of-leaf", "dtype", "not-a-tensor", "offset-without-size", "stride-length"],
)
def test_set_refuses_as_torch(call):
    raises_like_torch(call)


def test_as_strided_of_a_view_reading_past_its_elements_is_refused_clearly():
    view = bg.arange(10.0)[2:8]
    with pytest.raises(RuntimeError, match="not elements of the tensor it is taken of"):
        view.as_strided((2,), (1,), 0)


def test_as_strided_backward_as_one_program():
    x = bg.arange(6.0, dtype=bg.float64, requires_grad=True)
    grads = [bg.autograd.grad((x.exp().as_strided((3, 2), (1, 1)) ** 2).sum(), x)[0] for _ in range(4)]
    tx = torch.arange(6.0, dtype=torch.float64, requires_grad=True)
    expected = torch.autograd.grad((tx.exp().as_strided((3, 2), (1, 1)) ** 2).sum(), tx)[0]
    for g in grads:  # per node first, then the fused program
        assert_same(g, expected)


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.ones(2, 3, 4, 5),
        lambda m: m.ones(2, 3, 4, 5).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
        lambda m: m.ones(2, 1, 1, 1),
        lambda m: m.ones(2, 3),
        lambda m: m.ones(2, 3, 4, 5, 6).permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3),
        lambda m: m.ones(2, 3).t(),
    ],
    ids=["row_major", "channels_last_view", "ones_sized", "matrix", "channels_last_3d_view", "transpose"],
)
def test_is_contiguous_in_each_memory_format_reads_the_strides(make):
    """is_contiguous(memory_format=...) as torch answers it from the strides: channels-last formats need the
    channels innermost and the matching rank; preserve_format and contiguous_format ask for row-major."""
    formats = ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d")
    for name in formats:
        assert make(bg).is_contiguous(memory_format=getattr(bg, name)) == make(torch).is_contiguous(
            memory_format=getattr(torch, name)
        ), name
    raises_like_torch(lambda m: make(m).is_contiguous(memory_format=3))
