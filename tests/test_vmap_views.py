"""vmap results that are views of the caller's tensors, against torch.func.vmap (torch 2.13): a function that
returns a view of a mapped argument's row gives a view of the caller's tensor (its `_base`), whose values, writes
and gradients are torch's."""

import numpy as np
import pytest
import torch

import batched_grad as bg

# (function of one row of shape (3, 4), in_dim, out_dim) for a caller's tensor of shape (2, 3, 4) moved to in_dim
VIEWS = {
    "transpose": (lambda t: t.transpose(0, 1), 0, 0),
    "transpose in1 out2": (lambda t: t.transpose(0, 1), 1, 2),
    "select": (lambda t: t[1], 0, 0),
    "select in-1": (lambda t: t.select(1, 2), -1, 1),
    "slice": (lambda t: t[:, 1:3], 0, 1),
    "strided slice": (lambda t: t[::2, ::3], 2, 0),
    "narrow": (lambda t: t.narrow(1, 1, 2), 0, 0),
    "diagonal": (lambda t: t.diagonal(), 0, 0),
    "diagonal offset": (lambda t: t.diagonal(offset=1, dim1=1, dim2=0), 1, 1),
    "view": (lambda t: t.view(12), 0, 0),
    "view in2": (lambda t: t.view(2, 6), 2, 0),
    "reshape": (lambda t: t.reshape(4, 3), 0, 0),
    "flatten": (lambda t: t.flatten(), 0, -1),
    "unsqueeze": (lambda t: t.unsqueeze(1), 0, 0),
    "squeeze": (lambda t: t[:1].squeeze(0), 0, 0),
    "movedim": (lambda t: t.movedim(0, 1), 0, 0),
    "mT": (lambda t: t.mT, 0, 1),
    "T": (lambda t: t.T, 1, 0),
    "permute": (lambda t: t.permute(1, 0), 0, 0),
    "unfold": (lambda t: t.unfold(1, 2, 2), 0, 0),
    "as_strided": (lambda t: t.as_strided((2, 2), (1, 4), 1), 0, 0),
    "chain": (lambda t: t.transpose(0, 1)[1:].diagonal(), 0, 0),
}


def _input(lib, in_dim):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10
    return lib.tensor(np.ascontiguousarray(np.moveaxis(x, 0, in_dim)))


def _base(t):
    return t if t._base is None else t._base


@pytest.mark.parametrize("name", list(VIEWS))
def test_a_view_of_a_row_is_a_view_of_the_callers_tensor(name):
    f, in_dim, out_dim = VIEWS[name]
    results = {}
    for lib in (torch, bg):
        x = _input(lib, in_dim)
        result = lib.func.vmap(f, in_dims=in_dim, out_dims=out_dim)(x)
        assert result._base is x
        values = result.numpy().copy()
        with lib.no_grad():
            result.mul_(-1)  # written through the view: the caller's tensor changes where the view looks
        results[lib] = (values, x.numpy().copy())
    for ours, theirs in zip(results[bg], results[torch]):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("out_dim", [0, 1])
def test_an_expanded_row_is_a_view_of_the_callers_tensor(out_dim):
    results = []
    for lib in (torch, bg):
        x = _input(lib, 0)
        result = lib.func.vmap(lambda t: t[:1].expand(5, 4), out_dims=out_dim)(x)
        assert result._base is x
        results.append(result.numpy())
    np.testing.assert_array_equal(*results)


@pytest.mark.parametrize("name", ["transpose in1 out2", "select in-1", "diagonal offset", "chain", "unfold"])
def test_gradient_through_a_view_result_reaches_the_callers_tensor(name):
    f, in_dim, out_dim = VIEWS[name]
    grads = {}
    for lib in (torch, bg):
        x = _input(lib, in_dim).requires_grad_()
        result = lib.func.vmap(f, in_dims=in_dim, out_dims=out_dim)(x)
        weights = lib.arange(result.numel(), dtype=lib.float32).reshape(result.shape)
        (result * weights).sum().backward()
        grads[lib] = x.grad.numpy()
    np.testing.assert_array_equal(grads[bg], grads[torch])


def test_a_view_of_a_view_argument_has_the_arguments_base():
    for lib in (torch, bg):
        x = _input(lib, 0)
        argument = x[:, 1:]
        result = lib.func.vmap(lambda t: t[0])(argument)
        assert result._base is x and result.tolist() == x[:, 1, :].tolist()


@pytest.mark.parametrize("lib", [torch, bg])
def test_each_view_of_a_multi_view_op_is_a_view_of_the_callers_tensor(lib):
    x = _input(lib, 0)
    for views in (
        lib.func.vmap(lambda t: t.unbind(1))(x),
        lib.func.vmap(lambda t: t.split(2, dim=1), out_dims=1)(x),
        lib.func.vmap(lambda t: t.chunk(3))(x),
    ):
        assert all(v._base is x for v in views)
    first, second = lib.func.vmap(lambda t: t.unbind(1))(x)[:2]
    np.testing.assert_array_equal(first.numpy(), x[:, :, 0].numpy())
    np.testing.assert_array_equal(second.numpy(), x[:, :, 1].numpy())


@pytest.mark.parametrize("lib", [torch, bg])
def test_complex_parts_of_a_row_are_views_of_the_callers_tensor(lib):
    z = lib.complex(lib.arange(6.0).reshape(2, 3), -lib.arange(6.0).reshape(2, 3))
    real, imag = lib.func.vmap(lambda t: (t.real, t.imag))(z)
    pairs = lib.func.vmap(lib.view_as_real, out_dims=1)(z)
    assert real._base is z and imag._base is z and pairs._base is z
    assert pairs.shape == (3, 2, 2) and pairs[:, :, 1].tolist() == imag.t().tolist()
    with lib.no_grad():
        imag.add_(100)
    assert lib.view_as_real(z)[..., 1].tolist() == [[100.0, 99.0, 98.0], [97.0, 96.0, 95.0]]


@pytest.mark.parametrize("lib", [torch, bg])
def test_a_view_of_a_row_written_in_place_is_a_view_of_the_written_callers_tensor(lib):
    x = _input(lib, 0)
    expected = (x + 1)[:, 0].tolist()
    result = lib.func.vmap(lambda t: t.add_(1)[0])(x)
    assert result._base is x and result.tolist() == expected


@pytest.mark.parametrize("lib", [torch, bg])
def test_nested_inplace_op_returned_at_inner_out_dim_aliases_the_callers_tensor(lib):
    """The inner vmap's result is a view of the outer row (its batch moved): the outer result views the caller's
    tensor, so a later write into the caller's tensor shows through it."""
    x = _input(lib, 0)
    result = lib.func.vmap(lib.func.vmap(lib.Tensor.mul_, in_dims=(1, None)), in_dims=(1, None), out_dims=1)(x, 2.0)
    assert result._base is x and result.shape == (4, 3, 2)
    with lib.no_grad():
        x.zero_()
    assert not result.any()


@pytest.mark.parametrize("lib", [torch, bg])
def test_chunked_vmap_joins_its_results_into_new_tensors(lib):
    x = _input(lib, 0)
    for f in (lambda t: t, lambda t: t[0], lambda t: t.add_(1)):
        result = lib.func.vmap(f, chunk_size=1)(x)
        assert result is not x and result._base is None
    np.testing.assert_allclose(x[0, 0].numpy(), [1.0, 1.1, 1.2, 1.3])  # the in-place op wrote into the caller's


@pytest.mark.parametrize("lib", [torch, bg])
def test_a_detached_row_shares_the_callers_values_without_being_a_view(lib):
    x = _input(lib, 0).requires_grad_()
    result = lib.func.vmap(lambda t: t[1].detach())(x)
    assert result._base is None and not result.requires_grad
    with lib.no_grad():
        x.mul_(0)
    assert not result.any()


@pytest.mark.parametrize("lib", [torch, bg])
def test_transposing_a_row_of_scalars_returns_the_callers_tensor(lib):
    x = lib.arange(3.0)
    for f in (lambda t: t.t(), lambda t: t.transpose(0, -1), lambda t: t.swapaxes(-1, 0), lambda t: lib.t(t)):
        assert lib.func.vmap(f)(x) is x
    assert lib.func.vmap(lambda t: t.T)(x)._base is x  # T is a view, as outside vmap
    assert lib.func.vmap(lambda t: t.t())(x.reshape(3, 1))._base is not None


def test_nested_vmap_result_requires_grad_through_a_captured_outer_row():
    """The inner vmap captures the outer one's row (it does not vary across the inner rows): its result requires
    grad through that row, and gradients reach the outer argument."""
    grads = []
    for lib in (torch, bg):
        x = (lib.arange(14.0).reshape(7, 2) / 7).requires_grad_()
        y = lib.arange(15.0).reshape(5, 3) / 5

        def outer(a, y=y, lib=lib):
            return lib.func.vmap(lambda v: (a.unsqueeze(1) * v).sin())(y)

        result = lib.func.vmap(outer)(x)
        assert result.requires_grad
        (result * result.detach().cos()).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dim", [0, -1, 1, (0,), (-1,), (0, 0), (), (0, 1)])
def test_squeezing_a_row_of_scalars_checks_dims_as_torchs_batching_rule(dim):
    outcomes = []
    for lib in (torch, bg):
        x = lib.arange(4.0)
        try:
            result = lib.func.vmap(lambda t: t.squeeze(dim))(x)
        except (RuntimeError, IndexError) as error:
            outcomes.append((type(error), str(error)))
        else:
            outcomes.append((result._base is x, result.tolist()))
    assert outcomes[1] == outcomes[0]


def _layout_seen(lib, x, in_dims, nested):
    """What a vmapped function sees of its row's layout: strides, contiguity, a view's strides, and whether
    view(-1) and view_as_complex succeed."""
    seen = []

    def look(t):
        views = (t.select(-1, 0).stride(), t.mT.stride()) if t.ndim > 1 else None
        seen.append((t.stride(), t.is_contiguous(), views))
        for attempt in (lambda: t.view(-1), lambda: lib.view_as_complex(t) if t.shape[-1] == 2 else t):
            try:
                attempt()
                seen.append("ok")
            except RuntimeError as error:
                seen.append(str(error))
        return t * 1

    f = lib.func.vmap(look, in_dims=in_dims[-1])
    if nested:
        f = lib.func.vmap(f, in_dims=in_dims[0])
    f(x)
    return seen


LAYOUTS = {
    "contiguous": (lambda lib: lib.randn(3, 4, 5), (0,), False),
    "in_dim 1": (lambda lib: lib.randn(3, 4, 5), (1,), False),
    "in_dim 2": (lambda lib: lib.randn(3, 4, 2), (2,), False),
    "moved batch": (lambda lib: lib.randn(4, 3, 5).movedim(1, 0), (0,), False),
    "sliced argument": (lambda lib: lib.randn(3, 4, 6)[:, ::2, 1:3], (0,), False),
    "pairs with batch last": (lambda lib: lib.randn(2, 3, 2).movedim(0, 2).movedim(0, 1), (2,), False),
    "nested": (lambda lib: lib.randn(3, 4, 5, 2), (1, 0), True),
    "nested moved": (lambda lib: lib.randn(3, 5, 2).movedim(1, 2), (0, 1), True),
}


@pytest.mark.parametrize("case", list(LAYOUTS))
def test_a_row_lies_in_the_callers_storage_with_its_strides(case):
    make, in_dims, nested = LAYOUTS[case]
    assert _layout_seen(bg, make(bg), in_dims, nested) == _layout_seen(torch, make(torch), in_dims, nested)


@pytest.mark.parametrize("in_dim", [0, 1])
def test_reshape_and_contiguous_of_a_row_copy_only_where_its_layout_needs(in_dim):
    outcomes = []
    for lib in (torch, bg):
        x = lib.randn(3, 4, 5)
        reshaped = lib.func.vmap(lambda t: t.reshape(-1), in_dims=in_dim)(x)
        made_contiguous = lib.func.vmap(lambda t: t.contiguous(), in_dims=in_dim, out_dims=in_dim)(x)
        outcomes.append((reshaped._base is x, made_contiguous is x))
    assert outcomes[1] == outcomes[0]


@pytest.mark.parametrize("lib", [torch, bg])
@pytest.mark.parametrize("memory_format", ["channels_last", "channels_last_3d", "preserve_format"])
def test_asking_a_row_for_another_memory_format_is_refused(lib, memory_format):
    fmt = getattr(lib, memory_format)
    for ask in (lambda t: t.is_contiguous(memory_format=fmt), lambda t: t.contiguous(memory_format=fmt)):
        with pytest.raises(RuntimeError, match="NYI: querying is_contiguous inside of vmap for memory_format other"):
            lib.func.vmap(lambda t: (ask(t), t)[1])(lib.randn(2, 3, 4, 5, 6))


def _strided_arguments(lib):
    """Tensors of shape (4, 2, 3) (rows on axis 0) laid out in different ways in their storage."""
    rng = np.random.default_rng(1)

    def r(*shape):
        return lib.tensor(rng.standard_normal(shape).astype(np.float32))

    return [
        r(4, 2, 3),
        r(4, 3, 2).transpose(1, 2),
        r(2, 4, 2, 3)[1],
        r(2, 3, 4, 2).permute(2, 3, 0, 1)[:, :, 1],
    ]


@pytest.mark.parametrize("which", range(4))
@pytest.mark.parametrize("in_dim", [0, -1])
def test_as_strided_of_a_row_reads_the_callers_storage(which, in_dim):
    """as_strided of a row takes sizes, strides and offset in the caller's storage (the row's own strides and
    offset), and its result is a view of the caller's tensor like the equivalent view."""
    outcomes = []
    for lib in (torch, bg):
        x = _strided_arguments(lib)[which].movedim(0, in_dim)
        rows = x.movedim(in_dim, 0)
        s0, s1 = rows.stride()[1:]
        offset = rows.storage_offset()
        for geometry, equivalent in (
            (([3, 2], [s1, s0], offset), lambda t: t.transpose(0, 1)),
            (([2], [s0], offset + s1), lambda t: t[:, 1]),
            (([2], [s0 + s1], offset), lambda t: t.diagonal()),
            (([5, 2, 3], [0, s0, s1], offset), lambda t: t.expand(5, 2, 3)),
        ):
            result = lib.func.vmap(lambda t: t.as_strided(*geometry), in_dims=in_dim)(x)
            expected = lib.func.vmap(equivalent, in_dims=in_dim)(x)
            assert result._base is _base(x) and result.tolist() == expected.tolist()
            outcomes.append(result.tolist())
    assert outcomes[: len(outcomes) // 2] == outcomes[len(outcomes) // 2 :]


@pytest.mark.parametrize(
    "make, size, stride, offset",
    [
        (lambda lib: lib.randn(5, 3), [3], [1], 1),
        (lambda lib: lib.randn(5, 3, 5), [4, 4], [4, 1], 0),
        (lambda lib: lib.randn(2, 5, 3)[1], [3], [1], 14),
        (lambda lib: lib.randn(5, 0, 3), [3], [1], None),
        (lambda lib: lib.randn(5, 2, 3), [1, 1, 1], [1, 1], None),
    ],
)
def test_as_strided_of_a_row_reaching_outside_it_is_refused_as_torchs(make, size, stride, offset):
    messages = []
    for lib in (torch, bg):
        with pytest.raises(RuntimeError) as caught:
            lib.func.vmap(lambda t: t.as_strided(size, stride, offset))(make(lib))
        messages.append(str(caught.value))
    assert messages[1] == messages[0]


@pytest.mark.parametrize("out_dim", [1, -1])
def test_a_result_at_another_out_dim_is_a_moved_view_of_the_rows(out_dim):
    """As torch's: the rows are computed on axis 0 and the result is their movedim to out_dim (PermuteBackward0,
    contiguous once moved back), and gradients pass through it."""
    outcomes = []
    for lib in (torch, bg):
        x = (lib.arange(24.0).reshape(2, 3, 4) / 10).requires_grad_()
        result = lib.func.vmap(lambda t: t.clone(memory_format=lib.contiguous_format) * 2, out_dims=out_dim)(x)
        back = result.movedim(out_dim, 0)
        (grad,) = lib.autograd.grad((result * lib.arange(result.numel()).reshape(result.shape)).sum(), x)
        outcomes.append(
            (result._base is not None, back.is_contiguous(), result.grad_fn.name(), result.tolist(), grad.tolist())
        )
    assert outcomes[1] == outcomes[0]


@pytest.mark.parametrize("memory_format", ["channels_last", "channels_last_3d"])
@pytest.mark.parametrize("shape", [(3,), (3, 2, 4, 5, 6)])
def test_cloning_a_row_in_a_channels_last_format_is_refused_as_torchs(memory_format, shape):
    messages = []
    for lib in (torch, bg):
        fmt = getattr(lib, memory_format)
        with pytest.raises(RuntimeError) as caught:
            lib.func.vmap(lambda t: t.clone(memory_format=fmt))(lib.randn(*shape))
        messages.append(str(caught.value))
    assert messages[1] == messages[0]
