"""vmap and in-place ops, and results that are the caller's own tensors, against torch.func.vmap (torch 2.13):
a mapped argument returned as it is comes back as the caller's tensor (or a view of it sharing its storage), and
an in-place op may not write values that vary across the rows into a tensor that does not."""

import numpy as np
import pytest
import torch

import batched_grad as bg

LIBS = [bg, torch]
INPLACE_NOT_POSSIBLE = r"vmap: inplace arithmetic\(self, \*extra_args\) is not possible because there exists a Tensor"


def vmap_of(lib):
    return lib.func.vmap


def pair(lib, *shape, seed=0):
    """Two tensors of `shape` with fixed values in [0.1, 0.9) (acos and atan2 are defined on them)."""
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.uniform(0.1, 0.9, shape).astype(np.float32)) for _ in range(2)]


@pytest.mark.parametrize("lib", LIBS)
def test_inplace_op_on_a_mapped_argument_returns_the_callers_tensor(lib):
    x, _ = pair(lib, 2, 5)
    expected = x.acos()
    result = vmap_of(lib)(lib.Tensor.acos_)(x)
    assert result is x
    np.testing.assert_allclose(x.numpy(), expected.numpy(), rtol=1e-6)


@pytest.mark.parametrize("lib", LIBS)
def test_nested_inplace_op_returns_the_callers_tensor(lib):
    x, _ = pair(lib, 2, 3, 4)
    expected = x.acos()
    result = vmap_of(lib)(vmap_of(lib)(lib.Tensor.acos_))(x)
    assert result is x
    np.testing.assert_allclose(x.numpy(), expected.numpy(), rtol=1e-6)


@pytest.mark.parametrize("lib", LIBS)
def test_inplace_op_with_another_out_dim_returns_a_view_of_the_callers_tensor(lib):
    x, _ = pair(lib, 2, 5)
    expected = x.t().acos()
    result = vmap_of(lib)(lib.Tensor.acos_, out_dims=(1,))(x)
    assert result._base is x and result.data_ptr() == x.data_ptr()
    np.testing.assert_allclose(result.numpy(), expected.numpy(), rtol=1e-6)


def _write_rows_into_unmapped(lib, write, rows):
    with pytest.raises(RuntimeError) as caught:
        vmap_of(lib)(lambda row: write(lib.ones(3), row))(rows)
    return str(caught.value)


# torch words this error by the batching rule the op reaches: "inplace arithmetic" (binary in-place rule), the op's
# name (a dedicated rule), "aten::<op>" (the fallback), or a broadcast failure for add_, atan2_ and copysign_
ROW_WRITES = {
    "mul_": lambda t, r: t.mul_(r),
    "copy_": lambda t, r: t.copy_(r),
    "setitem": lambda t, r: t.__setitem__(slice(None), r),
    "masked_fill_ mask": lambda t, r: t.masked_fill_(r > 0.5, 1.0),
    "masked_fill_ value": lambda t, r: t.masked_fill_(t > 0, r.sum()),
    "add_": lambda t, r: t.add_(r, alpha=2),
    "atan2_": lambda t, r: t.atan2_(r),
    "add_ row scalar": lambda t, r: t.add_(r[0]),
    "fill_": lambda t, r: t.fill_(r[0]),
    "index_add_": lambda t, r: t.index_add_(0, t.new_tensor([0, 1, 2]).long(), r),
    "index_put_": lambda t, r: t.__setitem__(t.new_tensor([0, 2]).long(), r[:2]),
    "pow_": lambda t, r: t.pow_(r),
    "addcmul_": lambda t, r: t.addcmul_(r, r),
    "clamp_": lambda t, r: t.clamp_(min=r),
    "lt_": lambda t, r: t.lt_(r),
}


@pytest.mark.filterwarnings("ignore:There is a performance drop")
@pytest.mark.parametrize("op", list(ROW_WRITES))
def test_inplace_op_writing_rows_into_an_unmapped_tensor_words_the_error_as_torch(op):
    _, rows = pair(bg, 2, 3)
    expected = _write_rows_into_unmapped(torch, ROW_WRITES[op], torch.from_numpy(rows.numpy()))
    assert _write_rows_into_unmapped(bg, ROW_WRITES[op], rows) == expected


@pytest.mark.filterwarnings("ignore:There is a performance drop")
@pytest.mark.parametrize("op", ["add_", "pow_"])
def test_inplace_write_into_an_unmapped_tensor_in_nested_vmaps_words_the_error_as_torch(op):
    """add_ names every batch size in the broadcast shape; the fallback's wording names the inner level."""

    def words(lib):
        def write(row):
            return getattr(lib.ones(3), op)(row)

        with pytest.raises(RuntimeError) as caught:
            vmap_of(lib)(vmap_of(lib)(write))(lib.ones(4, 2, 3))
        return str(caught.value)

    assert words(bg) == words(torch)


@pytest.mark.parametrize("lib", LIBS)
def test_inplace_op_writing_rows_into_a_captured_tensor_raises(lib):
    total = lib.zeros(3)

    def accumulate(row):
        total.mul_(row)
        return row

    with pytest.raises(RuntimeError, match=INPLACE_NOT_POSSIBLE if lib is bg else "doesn't match|not possible"):
        vmap_of(lib)(accumulate)(lib.ones(2, 3))
    assert total.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("lib", LIBS)
def test_inplace_op_writing_an_unmapped_value_into_a_mapped_argument_is_allowed(lib):
    x, _ = pair(lib, 2, 7)
    y, _ = pair(lib, 7, seed=1)
    expected = x * y
    result = vmap_of(lib)(lib.Tensor.mul_, in_dims=(0, None))(x, y)
    assert result is x
    np.testing.assert_allclose(x.numpy(), expected.numpy(), rtol=1e-6)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize(
    "shape, in_dim, out_dim, permutation",
    [
        ((2, 3), 0, 1, (1, 0)),
        ((2, 3, 5, 7), 0, 2, (1, 2, 0, 3)),
        ((2, 3, 5, 7), 0, -1, (1, 2, 3, 0)),
        ((2, 3, 5), 1, 0, (1, 0, 2)),
        ((2, 3, 5), 2, 1, (0, 2, 1)),
    ],
)
def test_identity_result_is_a_view_of_the_argument_sharing_its_storage(lib, shape, in_dim, out_dim, permutation):
    x, _ = pair(lib, *shape)
    result = vmap_of(lib)(lambda a: a, in_dims=in_dim, out_dims=out_dim)(x)
    assert result._base is x and result.data_ptr() == x.data_ptr()
    assert result.shape == x.permute(*permutation).shape
    np.testing.assert_array_equal(result.numpy(), x.permute(*permutation).numpy())


@pytest.mark.parametrize("lib", LIBS)
def test_identity_result_at_its_own_dim_is_the_argument(lib):
    x, other = pair(lib, 2, 3, 5)
    assert vmap_of(lib)(lambda a: a, in_dims=1, out_dims=1)(x) is x
    first, second = vmap_of(lib)(lambda a, b: (a, b))(x, other)
    assert first is x and second is other
    leaf = x.clone().requires_grad_()
    assert vmap_of(lib)(lambda a: a)(leaf) is leaf


@pytest.mark.parametrize("lib", LIBS)
def test_identity_result_moved_keeps_the_gradient_path(lib):
    leaf = lib.ones(2, 3, requires_grad=True)
    moved = vmap_of(lib)(lambda a: a, out_dims=1)(leaf)
    (moved * lib.arange(2.0)).sum().backward()
    assert leaf.grad.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]


MADE_AFTER = {
    "new_zeros": lambda lib, x: x.new_zeros(3),
    "new_empty": lambda lib, x: x.new_empty(3),
    "new_ones": lambda lib, x: x.new_ones((3,)),
    "new_full": lambda lib, x: x.new_full((3,), 2.0),
    "zeros_like": lambda lib, x: lib.zeros_like(x[:3]),
    "ones_like": lambda lib, x: lib.ones_like(x[:3]),
    "empty_like": lambda lib, x: lib.empty_like(x[:3]),
    "full_like": lambda lib, x: lib.full_like(x[:3], 5.0),
}
WRITES = {
    "copy_": lambda made, y: made.copy_(y),
    "zero_then_add_": lambda made, y: made.zero_().add_(y),
    "fill_then_mul_": lambda made, y: made.fill_(2.0).mul_(y),
    "fill_tensor_then_sub_": lambda made, y: made.fill_(made.new_tensor(1.0)).sub_(y),
}


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("factory", list(MADE_AFTER))
def test_a_tensor_made_after_a_mapped_one_takes_a_batched_write_as_torchs(factory, write):
    def run(lib):
        x, y = pair(lib, 2, 4)
        return vmap_of(lib)(lambda x, y: WRITES[write](MADE_AFTER[factory](lib, x), y[:3]))(x, y)

    np.testing.assert_allclose(run(bg).numpy(), run(torch).numpy(), rtol=1e-6)


@pytest.mark.parametrize("factory", ["new_zeros", "new_empty"])
def test_per_sample_gradients_through_a_new_tensor_written_in_place(factory):
    def run(lib):
        x, y = pair(lib, 3, 5)

        def loss(y_row, x_row):
            made = getattr(x_row, factory)(5)
            made.copy_(y_row)
            return (made * made).sum()

        return vmap_of(lib)(lib.func.grad(loss))(y, x)

    np.testing.assert_allclose(run(bg).numpy(), run(torch).numpy(), rtol=1e-6)


@pytest.mark.parametrize("in_dim, out_dim", [(0, 0), (1, 0), (1, 1)])
def test_inplace_op_on_a_mapped_argument_with_history_writes_and_differentiates_as_torchs(in_dim, out_dim):
    """An argument that requires grad but is no leaf may be written in place under vmap; the gradient reaches
    its leaf through the values before the write."""
    outcomes = []
    for lib in LIBS:
        leaf = lib.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], requires_grad=True)
        x = leaf * 1
        result = vmap_of(lib)(lambda t: t.mul_(2).exp_(), in_dims=in_dim, out_dims=out_dim)(x)
        (result * lib.arange(6.0).reshape(result.shape)).sum().backward()
        values, grads = np.round(x.detach().numpy(), 5).tolist(), np.round(leaf.grad.numpy(), 4).tolist()
        outcomes.append((result is x, values, grads))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize(
    "argument, message", [(lambda leaf: leaf, "a leaf"), (lambda leaf: leaf[:], "a view of a leaf")]
)
def test_inplace_op_on_a_row_of_a_leaf_that_requires_grad_is_refused_as_torchs(argument, message):
    for lib in LIBS:
        leaf = lib.ones(2, 3, requires_grad=True)
        with pytest.raises(RuntimeError, match=f"^{message} Variable that requires grad"):
            vmap_of(lib)(lambda t: t.mul_(2))(argument(leaf))
