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


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("op", ["mul_", "copy_", "atan2_", "fill_"])
def test_inplace_op_writing_rows_into_an_unmapped_argument_raises(lib, op):
    x, _ = pair(lib, 3)
    _, y = pair(lib, 2, 3)
    write = getattr(lib.Tensor, op) if op != "fill_" else (lambda a, b: a.fill_(b[0]))
    with pytest.raises(RuntimeError):  # torch's wording depends on the op; the error itself does not
        vmap_of(lib)(write, in_dims=(None, 0))(x, y)
    if lib is bg or op in ("mul_", "copy_"):
        with pytest.raises(RuntimeError, match=INPLACE_NOT_POSSIBLE):
            vmap_of(lib)(write, in_dims=(None, 0))(x, y)


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
