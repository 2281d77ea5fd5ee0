"""Dual tensors against torch 2.13: their repr shows the tangent; make_dual keeps the tangent it is given where it is
laid out as the primal (else a copy) and refuses a tangent that has a tangent of its own; out= refuses operands
with tangents."""

import pytest

import batched_grad as bg
from oracle import raises_like_torch
from test_forward_ad_inplace import in_dual_levels


def _dual_reprs(m):
    fw = m.autograd.forward_ad
    plain = m.tensor([1.0, 2.0])
    dual = fw.make_dual(plain, m.tensor([3.0, 4.0], dtype=m.float64))
    wide = fw.make_dual(m.arange(30.0).reshape(3, 10) * 1000.125, m.ones(3, 10))
    primal, tangent = fw.unpack_dual(dual)
    return [repr(plain), repr(dual), str(wide), repr(primal), repr(tangent), repr(dual.detach())]


def test_repr_shows_the_tangent():
    got, expected = in_dual_levels(_dual_reprs)
    assert got == expected


def _layouts(m):
    fw = m.autograd.forward_ad
    complex_values = m.tensor([[1 + 2j, 3 - 1j], [0.5j, 2.0]])
    primals = {"plain": m.zeros(2, 2, dtype=m.complex128), "conj": m.zeros(2, 2, dtype=m.complex128).conj()}
    tangents = {
        "plain": complex_values.clone(),
        "conj": complex_values.clone().conj(),
        "transposed": complex_values.clone().T,
        "offset": m.cat([complex_values.reshape(-1), complex_values.reshape(-1)])[1:5].reshape(2, 2),
        "part_of_larger": m.cat([complex_values.reshape(-1), complex_values.reshape(-1)])[:4].reshape(2, 2),
    }
    out = []
    for (p_name, primal), (t_name, tangent) in zip(sorted(primals.items()) * 5, sorted(tangents.items()) * 2):
        dual = fw.make_dual(primal, tangent)
        kept = fw.unpack_dual(dual).tangent
        out.append((p_name, t_name, kept is tangent, kept.is_conj(), bool((kept == tangent).all())))
    return out


def test_make_dual_copies_a_tangent_laid_out_otherwise():
    got, expected = in_dual_levels(_layouts)
    assert got == expected


def test_make_dual_refuses_a_tangent_with_a_tangent():
    def program(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            dual = fw.make_dual(m.ones(2), m.ones(2))
            fw.make_dual(m.zeros(2), dual)

    raises_like_torch(program)


OUT_CALLS = {
    "into_dual": lambda m, dual, plain: m.add(plain, plain, out=dual),
    "from_dual": lambda m, dual, plain: m.mul(dual, plain, out=m.empty(2)),
    "pow_scalar": lambda m, dual, plain: m.pow(dual, 2, out=m.empty(2)),
    "comparison": lambda m, dual, plain: m.eq(dual, plain, out=m.empty(2, dtype=m.bool)),
    "sequence": lambda m, dual, plain: m.cat([plain, dual], out=m.empty(4)),
    "two_results": lambda m, dual, plain: m.sort(dual, out=(m.empty(2), m.empty(2, dtype=m.long))),
    "factory": lambda m, dual, plain: m.full((2,), 1.0, out=dual),
}


@pytest.mark.parametrize("name", sorted(OUT_CALLS))
def test_out_refuses_tangents(name):
    def program(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            dual = fw.make_dual(m.tensor([0.5, 1.5]), m.tensor([1.0, -1.0]))
            OUT_CALLS[name](m, dual, m.tensor([2.0, 3.0]))

    got, _ = raises_like_torch(program)
    assert isinstance(got, NotImplementedError)


def test_out_without_tangents_and_in_place_comparison_run():
    fw = bg.autograd.forward_ad
    with fw.dual_level():
        dual = fw.make_dual(bg.tensor([0.5, 1.5]), bg.tensor([1.0, -1.0]))
        written = bg.add(bg.ones(2), bg.ones(2), out=bg.empty(2))
        dual.eq_(bg.tensor([0.5, 2.0]))
    assert written.tolist() == [2.0, 2.0]
    assert dual.tolist() == [1.0, 0.0]
