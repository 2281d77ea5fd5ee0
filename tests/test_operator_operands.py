"""Tensor operators and the products with an operand that is not a number or a Tensor: the operators answer
NotImplemented, so that `tensor == None` is False (a sampling loop's `if idx_next == eos_id` with eos_id None) and
Python's own TypeError names the operator; the product functions name the argument that must be a Tensor."""

import operator

import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch


class Plain:
    pass


OTHERS = [None, "a", [1, 2], (1,), Plain(), {1: 2}]
COMPARE = [operator.eq, operator.ne]
ORDER = [operator.lt, operator.le, operator.gt, operator.ge]
ARITHMETIC = [
    operator.add,
    operator.sub,
    operator.truediv,
    operator.floordiv,
    operator.mod,
    operator.pow,
    operator.matmul,
    operator.and_,
    operator.or_,
    operator.xor,
    operator.lshift,
    operator.rshift,
]
IN_PLACE = [operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ipow, operator.iand]


def _tensors(m):
    return m.tensor([1, 2]), m.tensor([1.5, -2.0], requires_grad=True)


@pytest.mark.parametrize("other", OTHERS, ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("op", COMPARE, ids=lambda f: f.__name__)
def test_equality_with_a_foreign_object_falls_back_on_identity(op, other):
    for t, e in zip(_tensors(bg), _tensors(torch)):
        assert op(t, other) == op(e, other) and type(op(t, other)) is bool
        assert op(other, t) == op(other, e)


@pytest.mark.parametrize("other", OTHERS, ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("op", ORDER + ARITHMETIC + IN_PLACE, ids=lambda f: f.__name__)
def test_other_operators_raise_pythons_type_error(op, other):
    for index in range(2):
        raises_like_torch(lambda m: op(_tensors(m)[index].detach(), other))
        if op not in IN_PLACE:
            assert _outcome(lambda m: op(other, _tensors(m)[index]), bg) == _outcome(
                lambda m: op(other, _tensors(m)[index]), torch
            )


def _outcome(fn, m):
    """fn(m)'s error (its type and first line), or its value where the other operand's own operator took the
    Tensor (a string's % formats it)."""
    try:
        return "value", fn(m)
    except Exception as e:  # noqa: BLE001  (the error is the outcome compared)
        return type(e).__name__, str(e).split("\n")[0]


def test_a_sampling_loop_stops_at_its_end_token_or_runs_on_without_one():
    def sample(m, eos_id):
        idx = m.tensor([[3]])
        for step in range(4):
            idx_next = m.tensor([[step]])
            if idx_next == eos_id:
                break
            idx = m.cat((idx, idx_next), dim=1)
        return idx.tolist()

    for eos_id in (None, 2):
        assert sample(bg, eos_id) == sample(torch, eos_id)


class Reflecting:
    """An operand whose reflected operators answer for a Tensor's, as Python asks once the Tensor's decline."""

    def __radd__(self, other):
        return "radd"

    def __eq__(self, other):
        return "eq"


def test_a_foreign_operands_reflected_operator_answers():
    for m in (bg, torch):
        t = m.ones(2)
        assert t + Reflecting() == "radd"
        assert (t == Reflecting()) == "eq"


PRODUCTS = {
    "matmul": (2, 2),
    "mm": (2, 2),
    "bmm": (1, 2, 2),
    "dot": (2,),
    "mv": (2, 2),
    "outer": (2,),
    "inner": (2,),
    "vdot": (2,),
    "kron": (2,),
    "cross": (3,),
}


@pytest.mark.parametrize("name", sorted(PRODUCTS))
@pytest.mark.parametrize("other", [None, [[1.0, 2.0], [3.0, 4.0]]], ids=["None", "list"])
def test_products_name_the_argument_that_is_not_a_tensor(name, other):
    shape = PRODUCTS[name]
    raises_like_torch(lambda m: getattr(m, name)(m.ones(shape), other))
    raises_like_torch(lambda m: getattr(m, name)(other, m.ones(shape)))
