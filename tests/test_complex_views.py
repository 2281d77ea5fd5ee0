"""view_as_real, view_as_complex, real and imag as torch 2.13's views: writes through them reach their base (and the
base's writes reach them), gradients of in-place ops through them and through their base are torch's, their nodes
after an in-place update are the ones torch's view functions replay, and their strides and offsets are torch's."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch

rs = np.random.RandomState(3)
Z = (rs.rand(2, 3) + 1j * rs.rand(2, 3)).astype(np.complex64)
PAIRS = rs.rand(2, 3, 2).astype(np.float32)


# each case: (the leaf's values, the view of its clone `a`, the write (m, a, view), whether to backpropagate from the
# view or from `a`); the leaf's gradient, the output's node name and value are compared with torch's
CASES = {
    "write_through_view_as_real": (Z, lambda m, a: m.view_as_real(a), lambda m, a, v: v.mul_(m.tensor(PAIRS)), 1),
    "write_through_a_slice_of_view_as_real": (Z, lambda m, a: m.view_as_real(a)[:, 1:], lambda m, a, v: v.mul_(2), 1),
    "base_written_after_view_as_real": (Z, lambda m, a: m.view_as_real(a), lambda m, a, v: a.mul_(1j), 1),
    "view_as_real_of_a_row": (Z, lambda m, a: m.view_as_real(a[1]), lambda m, a, v: v.mul_(3), 1),
    "write_through_view_as_complex": (PAIRS, lambda m, a: m.view_as_complex(a), lambda m, a, v: v.mul_(m.tensor(Z)), 1),
    "base_written_after_view_as_complex": (PAIRS, lambda m, a: m.view_as_complex(a), lambda m, a, v: a.mul_(2), 1),
    "sibling_view_written": (Z, lambda m, a: m.view_as_real(a), lambda m, a, v: a[0].mul_(2j), 1),
    "write_through_real": (Z, lambda m, a: a.real, lambda m, a, v: v.mul_(3), 0),
    "write_through_imag": (Z, lambda m, a: a.imag, lambda m, a, v: v.mul_(3), 0),
    "write_through_imag_of_conj": (Z, lambda m, a: a.conj().imag, lambda m, a, v: v.mul_(3), 0),
    "write_through_transposed_view_as_real": (
        Z,
        lambda m, a: m.view_as_real(a).transpose(0, 1),
        lambda m, a, v: v.mul_(2),
        1,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_in_place_through_complex_views_matches_torch(case):
    values, view_of, write, from_view = CASES[case]
    results = []
    for m in (torch, bg):
        leaf = m.tensor(values, requires_grad=True)
        a = leaf.clone()
        view = view_of(m, a)
        write(m, a, view)
        out = view if from_view else a
        seed = np.arange(out.numel()).reshape(tuple(out.shape))
        seed = (seed * (1 + 2j)).astype(np.complex64) if out.is_complex() else seed.astype(np.float32)
        name = out.grad_fn.name()
        value = out.detach().clone()
        out.backward(m.tensor(seed))
        results.append((name, value, leaf.grad))
    (t_name, t_value, t_grad), (b_name, b_value, b_grad) = results
    assert b_name == t_name
    assert_same(b_value, t_value, rtol=1e-6, atol=1e-6)
    assert_same(b_grad, t_grad, rtol=1e-6, atol=1e-6)


def test_writes_reach_base_and_views_see_base_writes():
    def case(m):
        a = m.tensor(Z.copy())
        pairs = m.view_as_real(a)
        pairs[0, 1, 1] = 7.0
        re, im = a.real, a.imag
        a.mul_(2)
        im.add_(1)
        f = m.tensor(PAIRS.copy())
        c = m.view_as_complex(f)
        c[1, 2] = 5 - 4j
        return [a, pairs, re, im, f, c, a.conj().imag]

    for b, t in zip(case(bg), case(torch)):
        assert_same(b, t, rtol=1e-6, atol=1e-6)


def test_views_report_torch_base_strides_and_offset():
    def case(m):
        a = m.tensor(Z)
        f = m.tensor(PAIRS)
        views = [m.view_as_real(a), a.real, a[1].imag, m.view_as_real(a[:, 1:]), m.view_as_complex(f[1])]
        return [(v._base is a or v._base is f, v.stride(), v.storage_offset(), v.is_contiguous()) for v in views]

    assert case(bg) == case(torch)


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.zeros(3, 2).t().contiguous().t(),
        lambda m: m.zeros(3, 3)[:, 1:],
        lambda m: m.zeros(7)[1:].view(3, 2),
    ],
    ids=["last-stride", "odd-stride", "odd-offset"],
)
def test_view_as_complex_refuses_torch_layouts(make):
    raises_like_torch(lambda m: m.view_as_complex(make(m)))


def test_imag_of_a_conjugated_view_is_a_negative_view():
    def case(m):
        a = m.tensor(Z)
        im = a.conj().imag
        return [im.is_neg(), a.imag.is_neg(), im.resolve_neg().is_neg(), a.real.is_neg(), im._base is a]

    assert case(bg) == case(torch)


def test_assigning_real_and_imag_writes_the_parts():
    def case(m):
        a = m.zeros(2, dtype=m.complex64)
        a.imag = m.ones(2)
        a.real = 5
        b = m.zeros(2)
        b.real = m.tensor([1.0, 2.0])
        return [a, b]

    for b, t in zip(case(bg), case(torch)):
        assert_same(b, t)


@pytest.mark.parametrize(
    "write",
    [
        lambda m: setattr(m.zeros(2, dtype=m.complex64), "real", m.ones(3)),
        lambda m: setattr(m.zeros(2), "imag", m.ones(2)),
        lambda m: m.zeros(2, dtype=m.complex64).conj().imag.numpy(),
        lambda m: m.zeros(3).copy_(m.ones(3, 1)),
        lambda m: m.zeros(2, 3).copy_(m.ones(4, 3)),
    ],
    ids=["real-shape", "imag-of-real", "numpy-of-negative-view", "copy-broadcast", "copy-size"],
)
def test_errors_match_torch(write):
    raises_like_torch(write)


def test_view_as_complex_inside_a_compiled_function_reads_its_layout_without_values():
    """The layout check of view_as_complex (each pair adjacent, at an even offset) runs on the shapes of the views;
    inside bg.compile's trace it is computed now, not staged: rotary embeddings compile as torch.compile runs them."""

    def rotate(m, x, angles):
        pairs = m.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return m.view_as_real(pairs * m.polar(m.ones_like(angles), angles)).flatten(-2)

    x, angles = rs.standard_normal((3, 4)), rs.standard_normal((3, 2))
    expected = rotate(torch, torch.tensor(x), torch.tensor(angles))
    compiled = bg.compile(lambda a, b: rotate(bg, a, b), fullgraph=True)
    assert_same(compiled(bg.tensor(x), bg.tensor(angles)), expected)
    with pytest.raises(RuntimeError, match="storage_offset divisible by 2"):
        bg.compile(lambda a: bg.view_as_complex(a[:, 1:3]), fullgraph=True)(bg.tensor(x))


def test_complex_values_cast_to_a_real_dtype_keep_their_real_part_as_torch():
    """`.to(real)`, `.float()`, writes into a real tensor and torch.func.jvp's tangent of a real primal take the
    real part of complex values, `.to` and `copy_` with torch's warning; the gradient comes back complex."""

    def casts(m):
        z = m.tensor([1 + 1j, 2 - 3j], dtype=m.complex128, requires_grad=True)
        with pytest.warns(UserWarning, match="Casting complex values to real discards the imaginary part"):
            m.set_warn_always(True)
            try:
                real = z.to(m.float64)
            finally:
                m.set_warn_always(False)
        (real * m.tensor([2.0, 3.0], dtype=m.float64)).sum().backward()
        into = m.zeros(3, dtype=m.float64)
        into[1:] = z.detach()
        copied = m.zeros(2, dtype=m.float32)
        with pytest.warns(UserWarning, match="Casting complex values to real discards the imaginary part"):
            m.set_warn_always(True)
            try:
                copied.copy_(z.detach())
            finally:
                m.set_warn_always(False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _, tangent = m.func.jvp(m.sin, (m.tensor([0.5, 1.0], dtype=m.float64),), (z.detach(),))
        return real, z.detach().float(), z.grad.real, into, copied, tangent

    assert_same(casts(bg), casts(torch))
