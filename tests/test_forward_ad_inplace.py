"""In-place ops on dual tensors and their views against torch 2.13: an existing tangent is updated in place (the
tensor given to make_dual, and the tangents that are views of it, see the write), a forward view without a tangent
makes its base's (zeros elsewhere), an in-place view op (t_, squeeze_) views the tangent in place too, and views
that forward mode does not follow (make_dual's result, unpack_dual's primal, detach()) keep their tangents apart
from their base's."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same


def _tangent(m, t):
    return m.autograd.forward_ad.unpack_dual(t).tangent


def _primal(m, t):
    return m.autograd.forward_ad.unpack_dual(t).primal


def _scaled_dual(m):
    fw = m.autograd.forward_ad
    base, given = m.tensor([1.5, -2.0]), m.tensor([1.0, 3.0])
    dual = fw.make_dual(base, given)
    dual *= 2
    return [_tangent(m, base), given, _tangent(m, dual), base]


def _scaled_primal_then_tangent(m):
    fw = m.autograd.forward_ad
    dual = fw.make_dual(m.tensor([1.5, -2.0]), m.tensor([1.0, 3.0]))
    primal, tangent = fw.unpack_dual(dual)
    primal *= 3
    after_primal = [_primal(m, dual), _tangent(m, dual), _tangent(m, primal)]
    tangent *= -1
    return after_primal + [_primal(m, dual), _tangent(m, dual)]


def _narrowed_view(m):
    fw = m.autograd.forward_ad
    base, given = m.tensor([1.5, -2.0, 4.0]), m.tensor([1.0, 3.0, 5.0])
    dual = fw.make_dual(base, given)
    view = dual.narrow(0, 1, 2)
    view.mul_(m.tensor([2.0, -1.0]))
    return [_tangent(m, base), given, _tangent(m, dual), _tangent(m, view)]


def _transposed_row(m):
    fw = m.autograd.forward_ad
    given = m.tensor([[5.0, 6.0], [1.0, 2.0]])
    dual = fw.make_dual(m.tensor([[3.0, 4.0], [1.0, 1.0]]), given)
    t = dual.t()
    t[0].mul_(3)
    return [_tangent(m, dual), _tangent(m, t), given]


def _plain_takes_dual(m):
    fw = m.autograd.forward_ad
    dual = fw.make_dual(m.tensor([1.5, -2.0]), m.tensor([1.0, 3.0]))
    plain = m.tensor([3.0, 4.0])
    plain += dual
    return [_tangent(m, plain), plain]


def _element_of_plain_set_from_dual(m):
    fw = m.autograd.forward_ad
    dual = fw.make_dual(m.tensor([1.5, -2.0]), m.tensor([1.0, 3.0]))
    plain = m.tensor([3.0, 4.0])
    plain[0] = dual[1]
    return [_tangent(m, plain)]


def _view_made_before_base_gets_tangent(m):
    fw = m.autograd.forward_ad
    dual = fw.make_dual(m.tensor([1.5, -2.0]), m.tensor([1.0, 3.0]))
    plain = m.zeros(2, 2)
    earlier, written = plain[1], plain[0]
    written.copy_(dual)
    return [_tangent(m, plain), _tangent(m, earlier), _tangent(m, written)]


def _detached_view_takes_dual(m):
    fw = m.autograd.forward_ad
    dual = fw.make_dual(m.tensor([1.5, -2.0]), m.tensor([1.0, 3.0]))
    plain = m.tensor([3.0, 4.0])
    detached = plain.detach()
    detached += dual
    return [_tangent(m, plain), _tangent(m, detached), plain]


def _base_of_dual_takes_another(m):
    fw = m.autograd.forward_ad
    dual = fw.make_dual(m.tensor([1.5, -2.0]), m.tensor([1.0, 3.0]))
    base = m.tensor([3.0, 4.0])
    other = fw.make_dual(base, m.tensor([5.0, 6.0]))
    base += dual
    return [_tangent(m, base), _tangent(m, other), other]


def _unpacked_primal_takes_dual(m):
    fw = m.autograd.forward_ad
    dual = fw.make_dual(m.tensor([1.5, -2.0]), m.tensor([1.0, 3.0]))
    primal = fw.unpack_dual(dual).primal
    primal += dual
    return [_tangent(m, primal), _tangent(m, dual)]


def _writes_without_tangent(m):
    fw = m.autograd.forward_ad
    given = [m.tensor([5.0, 6.0]) for _ in range(3)]
    zeroed, copied, element = (fw.make_dual(m.tensor([3.0, 4.0]), g) for g in given)
    zeroed.zero_()
    copied.copy_(m.ones(2))
    element[1] = 7.0
    return [_tangent(m, zeroed), _tangent(m, copied), _tangent(m, element)] + given


def _in_place_view_ops(m):
    fw = m.autograd.forward_ad
    given = m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    dual = fw.make_dual(m.zeros(2, 3), given)
    dual.t_()
    transposed = _tangent(m, dual)
    dual.unsqueeze_(0)
    unsqueezed = _tangent(m, dual)
    dual.squeeze_()
    written = m.zeros(3)
    written.copy_(fw.make_dual(m.ones(3), m.tensor([2.0, 3.0, 4.0])))
    written.unsqueeze_(1)
    return [transposed, unsqueezed, _tangent(m, dual), given, _tangent(m, written)]


def _real_view_of_complex_takes_dual(m):
    fw = m.autograd.forward_ad
    dual = fw.make_dual(m.ones(2, dtype=m.float64), m.tensor([1.0, 2.0], dtype=m.float64))
    values = m.zeros(2, dtype=m.complex128)
    pairs = m.view_as_real(values)
    pairs[:, 1].add_(dual)
    return [_tangent(m, values), _tangent(m, pairs), values]


PROGRAMS = {
    "real_view_of_complex_takes_dual": _real_view_of_complex_takes_dual,
    "in_place_view_ops": _in_place_view_ops,
    "scaled_dual": _scaled_dual,
    "scaled_primal_then_tangent": _scaled_primal_then_tangent,
    "narrowed_view": _narrowed_view,
    "transposed_row": _transposed_row,
    "plain_takes_dual": _plain_takes_dual,
    "element_of_plain_set_from_dual": _element_of_plain_set_from_dual,
    "view_made_before_base_gets_tangent": _view_made_before_base_gets_tangent,
    "detached_view_takes_dual": _detached_view_takes_dual,
    "base_of_dual_takes_another": _base_of_dual_takes_another,
    "unpacked_primal_takes_dual": _unpacked_primal_takes_dual,
    "writes_without_tangent": _writes_without_tangent,
}


def in_dual_levels(program):
    """(program(batched_grad), program(torch)), each run in a dual level of its module."""
    with bg.autograd.forward_ad.dual_level():
        got = program(bg)
    with torch.autograd.forward_ad.dual_level():
        return got, program(torch)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_in_place_tangents_as_torch(name):
    assert_same(*in_dual_levels(PROGRAMS[name]))


def test_in_place_op_keeps_the_tangent_object():
    """A dual tensor's tangent stays the tensor given to make_dual through in-place ops on the dual (as torch's)."""
    fw = bg.autograd.forward_ad
    with fw.dual_level():
        given = bg.tensor([1.0, 3.0])
        dual = fw.make_dual(bg.tensor([1.5, -2.0]), given)
        dual.add_(dual)
        dual.copy_(fw.make_dual(bg.tensor([0.0, 1.0]), bg.tensor([2.0, 2.0])))
        assert fw.unpack_dual(dual).tangent is given
        assert given.tolist() == [2.0, 2.0]


VIEWS = {"rows": lambda t: t[:2], "transposed columns": lambda t: t[:, :2].t()}
WRITES = {"copy_": lambda v, x: v.copy_(x), "add_": lambda v, x: v.add_(x), "mul_": lambda v, x: v.mul_(x)}


@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize("view", VIEWS)
def test_batched_tangent_written_into_a_view_of_a_tensor_without_one(view, write):
    """Under the prototype vmap (gradcheck's batched forward mode), a dual whose tangent varies across the rows
    written into a view of a tensor without a tangent: its base's new tangent holds zeros per row, so that the
    view's row of it takes the write, as torch's."""

    def rows(m):
        fw = m.autograd.forward_ad

        def jvp(tangent):
            base = m.zeros(3, 3)
            target = VIEWS[view](base)
            with fw.dual_level():
                WRITES[write](target, fw.make_dual(m.ones(2, 3), tangent))
                return _tangent(m, target), _tangent(m, base)

        return m._vmap_internals._vmap(jvp)(m.arange(12.0).reshape(2, 2, 3))

    assert_same(rows(bg), rows(torch))
