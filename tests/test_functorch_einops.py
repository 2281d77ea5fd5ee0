"""functorch.einops (rearrange and its pattern parser) against torch 2.13's: parsed expressions, the errors of bad
patterns and axis lengths, and rearranged values, views and gradients."""

import numpy as np
import pytest
import torch
from functorch.einops import _parsing as torch_parsing
from functorch.einops import rearrange as torch_rearrange

import batched_grad as bg
from batched_grad.functorch.einops import _parsing, rearrange
from oracle import assert_same, to_torch

EXPRESSIONS = [
    "a b c",
    " x1   y_2  ",
    "() () 1 ()",
    "5 (3 4) 1",
    "2 1 (1 7) 1",
    "first ... (second 9)",
    "(first ... last 3) tail 6",
    "(...)",
    "camelCase \u00df Name ...",
    "",
]
BAD_EXPRESSIONS = [
    "... a ...",
    "a (b ...) ...",
    "a.b",
    "a (b))",
    "(a (b c))",
    "(a",
    "(a b",
    "1x",
    "_x",
    "x_",
    "_",
    "...x",
    "x...",
    "a a",
    "0",
    "(a) (()) b",
]


def _parsed(module, expression):
    parsed = module.ParsedExpression(expression)
    name = lambda axis: axis if isinstance(axis, str) else f"#{axis.value}"
    composition = [group if isinstance(group, str) else [name(axis) for axis in group] for group in parsed.composition]
    return (
        composition,
        sorted(name(axis) for axis in parsed.identifiers),
        parsed.has_ellipsis,
        parsed.has_ellipsis_parenthesized,
        parsed.has_non_unitary_anonymous_axes,
    )


def _outcome(fn):
    try:
        return "ok", fn()
    except Exception as error:  # compared by type name and message
        return type(error).__name__, str(error)


@pytest.mark.parametrize("expression", EXPRESSIONS + BAD_EXPRESSIONS)
def test_parsed_expression_like_torch(expression):
    ours = _outcome(lambda: _parsed(_parsing, expression))
    assert ours == _outcome(lambda: _parsed(torch_parsing, expression))


def test_axis_names_and_anonymous_axes_like_torch():
    names = ["a", "h1", "Alex", "u_n_d", "\u00df", "", "2b", "_a", "a_", "_", "...", _parsing._ellipsis]
    with pytest.warns(RuntimeWarning, match="axes names that are keywords: for"):
        assert _parsing.ParsedExpression("a for").identifiers == {"a", "for"}
    assert [_parsing.ParsedExpression.check_axis_name(n) for n in names] == [
        torch_parsing.ParsedExpression.check_axis_name(n) for n in names
    ]
    first, second = _parsing.AnonymousAxis("3"), _parsing.AnonymousAxis("3")
    assert first != second and first.value == 3 and repr(first) == repr(torch_parsing.AnonymousAxis("3"))
    for value in ["1", "0", "-2", "x"]:
        ours = _outcome(lambda: repr(_parsing.AnonymousAxis(value)))
        assert ours == _outcome(lambda: repr(torch_parsing.AnonymousAxis(value)))


PATTERNS = [  # (pattern, axes lengths)
    ("a b -> a b", {}),
    ("a -> a -> a", {}),
    ("a", {}),
    ("a ... -> ... a", {}),
    ("a -> a ...", {}),
    ("(...) -> ...", {}),
    ("a b -> b a", {"...": 2}),
    ("a b -> b a", {"\u2026": 2}),
    ("a b -> b a", {"a": 2.0}),
    ("a b -> b a", {"c": 2}),
    ("a 2 -> a", {}),
    ("a -> a 3", {}),
    ("a b -> a", {}),
    ("a -> a b", {}),
]


@pytest.mark.parametrize("pattern, lengths", PATTERNS)
def test_pattern_checks_like_torch(pattern, lengths):
    def check(module):
        left, right = module.parse_pattern(pattern, lengths)
        module.validate_rearrange_expressions(left, right, lengths)
        return "valid"

    assert _outcome(lambda: check(_parsing)) == _outcome(lambda: check(torch_parsing))


REARRANGES = [  # (shape, pattern, axes lengths)
    ((2, 3, 4), "a b c -> c a b", {}),
    ((2, 3, 4), "a b c -> (a b) c", {}),
    ((2, 3, 4), "a b c -> a (c b)", {}),
    ((2, 12), "a (b c) -> a b c", {"b": 3}),
    ((2, 12), "a (b c) -> c (a b)", {"c": 6}),
    ((2, 12), "a (b c) -> a b c", {"b": 3, "c": 4}),
    ((6, 4), "(a b) c -> (b c) a", {"a": 2, "b": 3}),
    ((2, 3, 4, 5), "... c -> c ...", {}),
    ((2, 3, 4, 5), "a ... -> (...) a", {}),
    ((2, 3, 4, 5), "a b ... -> b (a ...)", {}),
    ((2, 3, 4, 5), "a ... d -> a ... d", {}),
    ((2, 3, 4, 5), "... -> ...", {}),
    ((2, 3, 4, 5), "... -> (...)", {}),
    ((2, 1, 3), "a 1 b -> b a", {}),
    ((2, 2, 3), "a 1 b -> b a", {}),  # torch sums a unitary axis of another size
    ((2, 3), "a b -> a () b 1", {}),
    ((), "->", {}),
    ((), "... -> ...", {}),
    ((1, 2, 3), "a b -> b a", {}),
    ((1, 2, 3), "a b c d -> a b c d", {}),
    ((), "a ... -> ... a", {}),
    ((2, 6), "a (b c) -> a b c", {}),
    ((2, 6), "a (b c) -> a b c", {"b": 4}),
    ((2, 6), "a (b c) -> a b c", {"b": 2, "c": 2}),
    ((2, 6), "a b -> a b", {"b": 5}),
    ((1, 1, 1, 1, 1), "a b c d (...) -> a b c ... d", {}),
]


@pytest.mark.parametrize("shape, pattern, lengths", REARRANGES)
def test_rearrange_like_torch(shape, pattern, lengths):
    x = bg.arange(float(np.prod(shape, dtype=int))).reshape(shape).requires_grad_()
    x_torch = to_torch(x)
    ours = _outcome(lambda: rearrange(x, pattern, **lengths))
    theirs = _outcome(lambda: torch_rearrange(x_torch, pattern, **lengths))
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] != "ok":
        if ours[0] != "DimensionBindError":  # its message names torch's internal dims (d0, d1...), ours the axes
            assert ours[1] == theirs[1]
        return
    assert_same(ours[1], theirs[1])
    weights = bg.randn(ours[1].shape, dtype=ours[1].dtype)
    (ours[1] * weights).sum().backward()
    (theirs[1] * to_torch(weights)).sum().backward()
    assert_same(x.grad, x_torch.grad)


def test_rearrange_stacks_a_sequence_and_makes_views_like_torch():
    parts = [bg.arange(6).reshape(2, 3) + i for i in range(3)]
    assert_same(rearrange(parts, "n a b -> a (n b)"), torch_rearrange(to_torch(parts), "n a b -> a (n b)"))
    assert_same(rearrange(tuple(parts), "... -> ..."), torch_rearrange(tuple(to_torch(parts)), "... -> ..."))
    x = bg.randn(2, 3, 4)
    transposed = rearrange(x, "a b c -> c b a")
    assert transposed._base is x and transposed.dtype == x.dtype
    assert rearrange(x, "a b c -> c (b a)")._base is None  # a copy, as torch's
    with pytest.raises(TypeError, match="must be tuple of Tensors, not int"):
        rearrange(3, "a -> a")


def test_unitary_axes_on_both_sides():
    # torch's own rearrange fails on these (an AssertionError inside functorch.dim); they are plain reshapes
    x = bg.arange(6.0).reshape(2, 1, 3)
    assert_same(rearrange(x, "a 1 b -> b a 1 ()"), torch.arange(6.0).reshape(2, 3).t()[:, :, None, None])
    assert_same(rearrange(x, "a () b -> 1 b a"), torch.arange(6.0).reshape(2, 3).t()[None])
