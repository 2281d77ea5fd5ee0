"""Python protocol methods of Tensor compared with torch: augmented assignment for floor division, bitwise and shift
operators works in place (the same object, its views see it), shifts with the number on either side, membership
tests (`x in t`), reversed(t), `del t[i]`, and torch's Python 2 spellings (__div__, __nonzero__, __long__)."""

import operator

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch

AUGMENTED = [
    (operator.ifloordiv, [7, -9, 12], 2),
    (operator.iand, [6, 5, 12], 3),
    (operator.ior, [6, 5, 12], 3),
    (operator.ixor, [6, 5, 12], 3),
    (operator.ilshift, [6, 5, 12], 2),
    (operator.irshift, [6, 5, 12], 1),
]


@pytest.mark.parametrize("op,values,other", AUGMENTED, ids=lambda v: getattr(v, "__name__", None))
def test_augmented_assignment_changes_the_tensor_and_its_base(op, values, other):
    def run(m):
        base = m.tensor([1] + values)
        view = base[1:]
        same = op(view, other)
        return same is view, base

    (identity, base), (want_identity, want) = run(bg), run(torch)
    assert identity is want_identity is True
    assert_same(base, want)


def test_float_floor_division_in_place_keeps_the_object():
    a, t = bg.tensor([5.0, -7.5]), torch.tensor([5.0, -7.5])
    alias_a, alias_t = a, t
    a //= 2
    t //= 2
    assert a is alias_a and t is alias_t
    assert_same(a, t)


@pytest.mark.parametrize("op", [operator.lshift, operator.rshift])
def test_shifts_with_the_number_on_either_side(op):
    a, t = bg.tensor([1, 2, 3]), torch.tensor([1, 2, 3])
    assert_same(op(a, 1), op(t, 1))
    assert_same(op(8, a), op(8, t))
    assert_same(op(a, a), op(t, t))


def test_shift_of_a_float_tensor_raises_as_torch():
    raises_like_torch(lambda m: m.tensor([1.5]) << 1)


@pytest.mark.parametrize("element", [2, 5, 2.0, True])
def test_membership_of_a_number(element):
    for rows in ([1, 2, 3], [[1, 2], [3, 4]]):
        assert (element in bg.tensor(rows)) is (element in torch.tensor(rows))


def test_membership_of_a_tensor_broadcasts_and_other_types_raise():
    for row, rows in (([3, 4], [[1, 2], [3, 4]]), ([9, 4], [[1, 2], [3, 5]])):
        assert (bg.tensor(row) in bg.tensor(rows)) is (torch.tensor(row) in torch.tensor(rows))
    raises_like_torch(lambda m: "x" in m.tensor([1, 2]))
    raises_like_torch(lambda m: [1] in m.tensor([1, 2]))


def test_reversed_flips_the_first_dimension_with_its_gradient():
    def run(m):
        x = m.arange(6.0, dtype=m.float64).reshape(3, 2).requires_grad_()
        r = reversed(x)
        (r * m.tensor([1.0, 2.0, 3.0], dtype=m.float64)[:, None]).sum().backward()
        scalar = m.tensor(4.0)
        return r, x.grad, reversed(scalar) is scalar

    (r, g, same), (tr, tg, tsame) = run(bg), run(torch)
    assert_same(r, tr)
    assert_same(g, tg)
    assert same is tsame is True


def test_deleting_an_item_raises_as_torch():
    def delete(m):
        t = m.tensor([1, 2])
        del t[0]

    raises_like_torch(delete)


def test_python2_spellings():
    a, t = bg.tensor([5.0, 7.0]), torch.tensor([5.0, 7.0])
    assert_same(a.__div__(2), t.__div__(2))
    assert_same(a.__rdiv__(2), t.__rdiv__(2))
    raises_like_torch(lambda m: m.tensor([1.0, 2.0]).__nonzero__())
    assert bg.tensor(1).__nonzero__() is torch.tensor(1).__nonzero__()
    assert bg.tensor(3.7).__long__() == torch.tensor(3.7).__long__() == 3
    b, u = bg.tensor([6.0]), torch.tensor([6.0])
    b.__idiv__(4)
    u.__idiv__(4)
    assert_same(b, u)
