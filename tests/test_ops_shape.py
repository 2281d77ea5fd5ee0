"""Shape ops against torch: values, first and second derivatives, views written in place, error messages."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, check_op, raises_like_torch, rand

FAST = {"batched": False}  # is_grads_batched is checked on the BATCHED subset below (each vmapped kernel compiles)

# (id, fn(m, x) where m is bg or torch, x a random (3, 4) float64 leaf). Variants of one op reuse its output shape
# where they can: they then share its compiled kernels and cost little more than the parsing they test.
CASES = [
    ("reshape", lambda m, x: x.reshape(4, 3)),
    ("reshape_infer_tuple", lambda m, x: m.reshape(x, (4, -1))),
    ("reshape_of_transpose", lambda m, x: x.t().reshape(-1)),
    ("view", lambda m, x: x.view(4, 3)),
    ("view_list", lambda m, x: x.view([-1, 3])),
    ("view_as", lambda m, x: x.view_as(m.zeros(4, 3))),
    ("flatten", lambda m, x: m.flatten(x)),
    ("flatten_range", lambda m, x: x.reshape(3, 2, 2).flatten(1, 2)),
    ("flatten_0d", lambda m, x: x[0, 0].flatten()),
    ("unflatten", lambda m, x: x.unflatten(1, (2, 2))),
    ("unflatten_infer", lambda m, x: m.unflatten(x, -2, (-1, 1))),
    ("squeeze_all", lambda m, x: x.reshape(1, 3, 1, 4).squeeze()),
    ("squeeze_dim", lambda m, x: m.squeeze(x.reshape(3, 1, 4), 1)),
    ("squeeze_dims_tuple", lambda m, x: x.reshape(1, 3, 1, 4).squeeze((0, 1, 2))),
    ("squeeze_non_singleton", lambda m, x: x.squeeze(0)),
    ("unsqueeze", lambda m, x: x.unsqueeze(1)),
    ("unsqueeze_negative", lambda m, x: m.unsqueeze(x, -2)),
    ("expand", lambda m, x: x[:, :1].expand(3, 5)),
    ("expand_new_dims", lambda m, x: x.expand(2, -1, 4)),
    ("expand_as", lambda m, x: x[0].expand_as(x)),
    ("broadcast_to", lambda m, x: m.broadcast_to(x[:1], (2, 3, 4))),
    ("permute", lambda m, x: x.reshape(3, 2, 2).permute(2, 0, 1)),
    ("permute_tuple_negative", lambda m, x: m.permute(x, (-1, 0))),
    ("transpose", lambda m, x: m.transpose(x, 0, 1)),
    ("swapaxes", lambda m, x: x.swapaxes(0, 1)),
    ("t", lambda m, x: x.t()),
    ("t_vector", lambda m, x: m.t(x[0])),
    ("T", lambda m, x: x.T),
    ("mT_batched", lambda m, x: x.reshape(3, 2, 2).mT),
    ("movedim", lambda m, x: x.reshape(3, 2, 2).movedim(0, -1)),
    ("movedim_lists", lambda m, x: m.movedim(x.reshape(3, 2, 2), (0, 1), (2, 0))),
    ("cat", lambda m, x: m.cat([x, x[:1] * 2])),
    ("cat_dim_negative_skips_empty", lambda m, x: m.cat([x, m.zeros(0, dtype=m.float64), x[:, :2]], -1)),
    ("cat_promotes", lambda m, x: m.cat([x, m.ones(1, 4, dtype=m.float32)])),
    ("concat", lambda m, x: m.concat((x, x[:1] * 2), dim=0)),
    ("stack", lambda m, x: m.stack([x, x.flip(0)])),
    ("stack_last", lambda m, x: m.stack((x[0], x[1]), dim=-1)),
    ("hstack", lambda m, x: m.hstack([x, x[:, :1]])),
    ("hstack_vectors", lambda m, x: m.hstack([x[0], x[1, :2], x[2, 0]])),
    ("vstack", lambda m, x: m.vstack([x, x[0]])),
    ("split_int", lambda m, x: m.split(x, 2)),
    ("split_sizes", lambda m, x: x.split([1, 3], dim=1)),
    ("chunk", lambda m, x: x.chunk(2, 1)),
    ("chunk_uneven", lambda m, x: m.chunk(x, 3, dim=1)),
    ("unbind", lambda m, x: m.unbind(x)),
    ("unbind_dim", lambda m, x: x.unbind(-1)),
    ("flip", lambda m, x: m.flip(x, (0, 1))),
    ("flip_int_dim", lambda m, x: x.flip(-2)),
    ("roll", lambda m, x: m.roll(x, 1, 0)),
    ("roll_several", lambda m, x: x.roll((1, -2), (0, 1))),
    ("roll_flattened", lambda m, x: m.roll(x, 5)),
    ("repeat", lambda m, x: x.repeat(2, 1)),
    ("repeat_new_dims", lambda m, x: x.repeat(2, 1, 1)),
    ("tile", lambda m, x: m.tile(x, (2, 1))),
    ("tile_more_dims", lambda m, x: x.tile((2, 1, 1))),
    ("narrow", lambda m, x: m.narrow(x, 1, 1, 2)),
    ("narrow_negative_start", lambda m, x: x.narrow(0, -2, 2)),
    ("select", lambda m, x: m.select(x, 1, -1)),
    ("select_method", lambda m, x: x.select(0, 1)),
]


@pytest.mark.parametrize("fn", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_against_torch(fn):
    check_op(lambda x: fn(bg, x), lambda x: fn(torch, x), [rand(3, 4)], **FAST)


BATCHED = ["reshape_of_transpose", "expand", "cat_promotes", "split_sizes", "roll_flattened", "repeat"]


@pytest.mark.parametrize("fn", [c[1] for c in CASES if c[0] in BATCHED], ids=[c[0] for c in CASES if c[0] in BATCHED])
def test_batched_grads(fn):
    check_op(lambda x: fn(bg, x), lambda x: fn(torch, x), [rand(3, 4)], gradgrad=False)


def test_grad_fn_names_like_torch():
    x = rand(3, 4)
    t = torch.tensor(x.detach().numpy(), requires_grad=True)
    for f in (
        lambda x: x.view(12),
        lambda x: x.squeeze(),
        lambda x: x.squeeze(0),
        lambda x: x.squeeze((0,)),
        lambda x: x.unsqueeze(0),
        lambda x: x.t(),
        lambda x: x.transpose(0, 1),
        lambda x: x.permute(1, 0),
        lambda x: x.expand(2, 3, 4),
        lambda x: x.split(2)[0],
        lambda x: x.split([1, 2])[0],
        lambda x: x.unbind()[0],
        lambda x: x.select(0, 1),
        lambda x: x.narrow(0, 1, 1),
        lambda x: x.roll(1),
        lambda x: x.repeat(1, 2),
    ):
        assert f(x).grad_fn.name() == f(t).grad_fn.name()


# in-place writes through views of a non-leaf: the base sees them and gradients flow through both
VIEW_WRITES = [
    ("slice_step", lambda y: y[:, ::2]),
    ("transpose", lambda y: y.t()),
    ("chained", lambda y: y.t()[1:][0]),
]


def _write_through(view_of):
    def f(x, v):
        y = x * 1
        w = view_of(y)
        w.mul_(v[: w.shape[-1]] if w.ndim else v[0])
        return y, w.detach()  # the view's value is compared; gradients flow through the base

    return f


@pytest.mark.parametrize("view_of", [v[1] for v in VIEW_WRITES], ids=[v[0] for v in VIEW_WRITES])
def test_in_place_writes_through_views(view_of):
    check_op(_write_through(view_of), _write_through(view_of), [rand(3, 4), rand(4)], **FAST)


@pytest.mark.parametrize(
    "view_of",
    [lambda y: y.unbind(1)[2], lambda y: y.split(2, 1)[1].t(), lambda y: y.chunk(2)[0]],
    ids=["unbind", "split_then_view", "chunk"],
)
def test_writes_to_multi_output_views_raise_like_torch(view_of):
    x = rand(3, 4)
    raises_like_torch(
        lambda m: view_of((x if m is bg else torch.tensor(x.detach().numpy(), requires_grad=True)) * 1).mul_(2)
    )
    raises_like_torch(
        lambda m: view_of(m.ones(3, 4, dtype=m.float64)).mul_(m.ones((), dtype=m.float64, requires_grad=True))
    )


def test_view_writes_without_grad():
    for m in (bg, torch):
        y = m.arange(12).reshape(3, 4)
        y.t()[1].fill_(7)
        y[2][1:3] = m.tensor([8, 9])
        z = m.arange(12.0).reshape(3, 4)
        z.unbind(1)[2].mul_(2)
        z.split(2)[1].add_(1)
        if m is bg:
            got = (y, z)
    assert_same(got, (y, z))


def X(m, *shape):
    return m.ones(*shape, dtype=m.float64)


ERRORS = [
    ("reshape_size", lambda m: X(m, 2, 3).reshape(4, 2)),
    ("reshape_two_inferred", lambda m: X(m, 2, 3).reshape(-1, -1)),
    ("reshape_negative", lambda m: X(m, 2, 3).reshape(-2, 3)),
    ("reshape_ambiguous_empty", lambda m: X(m, 0, 3).reshape(-1, 0)),
    ("view_size", lambda m: X(m, 2, 3).view(5)),
    ("flatten_order", lambda m: X(m, 2, 3, 4).flatten(2, 1)),
    ("unflatten_product", lambda m: X(m, 2, 6).unflatten(-1, (2, 2))),
    ("unflatten_two_inferred", lambda m: X(m, 2, 6).unflatten(1, (-1, -1))),
    ("unflatten_no_sizes", lambda m: X(m, 2, 6).unflatten(1, ())),
    ("squeeze_dim_range", lambda m: X(m, 2, 1).squeeze(2)),
    ("unsqueeze_dim_range", lambda m: X(m, 2, 1).unsqueeze(4)),
    ("expand_leading_minus_one", lambda m: X(m, 3).expand(-1, 3)),
    ("expand_size", lambda m: X(m, 3).expand(2, 4)),
    ("expand_fewer_sizes", lambda m: X(m, 2, 3).expand(3)),
    ("broadcast_to_size", lambda m: m.broadcast_to(X(m, 3), (2, 4))),
    ("permute_duplicate", lambda m: X(m, 2, 3).permute(0, 0)),
    ("permute_length", lambda m: X(m, 2, 3).permute(0, 1, 2)),
    ("transpose_dim_range", lambda m: X(m, 2, 3).transpose(0, 2)),
    ("t_3d", lambda m: X(m, 2, 3, 4).t()),
    ("mT_vector", lambda m: X(m, 3).mT),
    ("movedim_repeated", lambda m: m.movedim(X(m, 2, 3, 4), (0, 0), (1, 2))),
    ("movedim_lengths", lambda m: m.movedim(X(m, 2, 3, 4), (0, 1), (1,))),
    ("cat_sizes", lambda m: m.cat([X(m, 2, 3), X(m, 2, 4)])),
    ("cat_ndims", lambda m: m.cat([X(m, 2, 3), X(m, 3)])),
    ("cat_scalars", lambda m: m.cat([X(m), X(m)])),
    ("cat_empty_list", lambda m: m.cat([])),
    ("cat_dim_range", lambda m: m.cat([X(m, 2, 3), X(m, 2, 3)], 2)),
    ("cat_tensor_not_list", lambda m: m.cat(X(m, 2, 3))),
    ("stack_sizes", lambda m: m.stack([X(m, 2, 3), X(m, 2, 4)])),
    ("stack_empty_list", lambda m: m.stack([])),
    ("split_zero", lambda m: m.split(X(m, 3), 0)),
    ("split_negative", lambda m: m.split(X(m, 3), -1)),
    ("split_sizes_sum", lambda m: m.split(X(m, 3), [1, 1])),
    ("split_sizes_negative", lambda m: m.split(X(m, 3), [4, -1])),
    ("chunk_zero", lambda m: m.chunk(X(m, 3), 0)),
    ("unbind_scalar", lambda m: m.unbind(X(m))),
    ("flip_repeated_dim", lambda m: m.flip(X(m, 2, 3), (0, 0))),
    ("roll_shifts_dims", lambda m: m.roll(X(m, 2, 3), (1, 2), (0,))),
    ("roll_shifts_without_dims", lambda m: m.roll(X(m, 2, 3), (1, 2))),
    ("repeat_fewer_dims", lambda m: X(m, 2, 3).repeat(2)),
    ("repeat_negative", lambda m: X(m, 2, 3).repeat(2, -1)),
    ("tile_negative", lambda m: m.tile(X(m, 2, 3), (-1,))),
    ("narrow_past_end", lambda m: m.narrow(X(m, 5), 0, 4, 2)),
    ("narrow_start_range", lambda m: m.narrow(X(m, 5), 0, 6, 0)),
    ("narrow_negative_length", lambda m: m.narrow(X(m, 5), 0, 1, -1)),
    ("select_range", lambda m: m.select(X(m, 3, 4), 0, 3)),
    ("select_scalar", lambda m: m.select(X(m), 0, 0)),
    ("device_name", lambda m: X(m, 2).to("abc")),
    ("device_index", lambda m: m.device("cuda:x")),
]


@pytest.mark.parametrize("fn", [e[1] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_like_torch(fn):
    raises_like_torch(fn)


EDGE_SHAPES = [
    ("chunk_empty", lambda m: m.chunk(m.zeros(0), 3)),
    ("chunk_fewer_than_asked", lambda m: m.chunk(m.ones(5), 4)),
    ("split_empty", lambda m: m.split(m.zeros(0), 2)),
    ("flip_scalar", lambda m: (m.flip(m.ones(()), (0,)),)),
    ("roll_scalar", lambda m: (m.roll(m.ones(()), 1),)),
    ("squeeze_scalar", lambda m: (m.ones(()).squeeze(0),)),
    ("reshape_empty", lambda m: (m.zeros(0, 3).reshape(-1, 2, 3),)),
    ("vstack_scalars", lambda m: (m.vstack([m.ones(()), m.zeros(())]),)),
]


@pytest.mark.parametrize("fn", [e[1] for e in EDGE_SHAPES], ids=[e[0] for e in EDGE_SHAPES])
def test_edge_shapes_like_torch(fn):
    assert_same(fn(bg), fn(torch))


OPS = (
    "matmul mm bmm mv dot outer einsum tensordot trace diag diagonal tril triu reshape view view_as flatten "
    "unflatten squeeze unsqueeze expand expand_as broadcast_to permute transpose swapaxes movedim t cat concat "
    "stack hstack vstack split chunk unbind flip roll repeat tile narrow select index_select gather scatter "
    "scatter_add take_along_dim masked_fill masked_select nonzero sort argsort topk"
).split()


@pytest.mark.parametrize("name", OPS)
def test_module_functions_and_methods_like_torch(name):
    assert hasattr(bg, name) or not hasattr(torch, name)
    assert hasattr(bg.Tensor, name) or not hasattr(torch.Tensor, name)


@pytest.mark.parametrize("empty_first", [True, False])
def test_cat_keeps_a_skipped_empty_tensor_that_requires_grad_as_an_input(empty_first):
    """cat skips 1-D empty tensors, but the result requires grad through one that does, as torch's CatBackward0."""
    results = []
    for m in (torch, bg):
        empty = m.zeros(0, requires_grad=True)
        x = m.ones(2, 3, dtype=m.float32)
        result = m.cat([empty, x] if empty_first else [x, empty, x], dim=-1)
        grads = m.autograd.grad((result * 2).sum(), [empty], allow_unused=True)
        results.append((result.requires_grad, result.grad_fn.name(), tuple(result.shape), grads[0].shape))
    assert results[1] == results[0]
