"""The pattern language of functorch.einops.rearrange (einops' syntax): expressions such as `b (h w) ... c`, parsed
into compositions of axis names, as torch's functorch.einops._parsing."""

import keyword
import warnings

_ellipsis = "\u2026"  # "...", as one character, so an ellipsis is one token of an expression


class AnonymousAxis:
    """An axis written as a number (`2` in `a 2`); each occurrence is a distinct axis."""

    def __init__(self, value):
        self.value = int(value)
        if self.value < 1:
            raise ValueError(f"Anonymous axis should have positive length, not {self.value}")

    def __repr__(self):
        return f"{self.value}-axis"


class ParsedExpression:
    """One side of a pattern. `composition` lists the tensor's dimensions: each is a list of the axes it is made
    of (`[]` for `()` or `1`), or `_ellipsis` for an ellipsis outside brackets; `identifiers` holds every axis name
    (and AnonymousAxis) once."""

    def __init__(self, expression, *, allow_underscore=False, allow_duplicates=False):
        self.has_ellipsis = False
        self.has_ellipsis_parenthesized = None
        self.identifiers = set()
        self.has_non_unitary_anonymous_axes = False
        self.composition = []
        if "." in expression:
            if "..." not in expression:
                raise ValueError("Expression may contain dots only inside ellipsis (...)")
            if expression.count("...") != 1 or expression.count(".") != 3:
                raise ValueError(
                    "Expression may contain dots only inside ellipsis (...); only one ellipsis for tensor "
                )
            expression = expression.replace("...", _ellipsis)
            self.has_ellipsis = True
        self._allow_underscore, self._allow_duplicates = allow_underscore, allow_duplicates
        group = None  # the axes of the bracket being read, None outside brackets
        for token in _tokens(expression):
            if token == "(":
                if group is not None:
                    raise ValueError("Axis composition is one-level (brackets inside brackets not allowed)")
                group = []
            elif token == ")":
                if group is None:
                    raise ValueError("Brackets are not balanced")
                self.composition.append(group)
                group = None
            else:
                self._add_axis(token, group)
        if group is not None:
            raise ValueError(f"Imbalanced parentheses in expression: '{expression}'")

    def _add_axis(self, name, group):
        if name in self.identifiers and not isinstance(name, AnonymousAxis) and not self._allow_duplicates:
            raise ValueError(f"Indexing expression contains duplicate dimension '{name}'")
        if name == _ellipsis:
            self.identifiers.add(_ellipsis)
            if group is None:
                self.composition.append(_ellipsis)
                self.has_ellipsis_parenthesized = False
            else:
                group.append(_ellipsis)
                self.has_ellipsis_parenthesized = True
            return
        if name.isdecimal():
            if int(name) == 1:  # a unitary axis: a dimension of size 1 outside brackets, nothing inside them
                if group is None:
                    self.composition.append([])
                return
            axis = AnonymousAxis(name)
            self.has_non_unitary_anonymous_axes = True
        else:
            valid, reason = self.check_axis_name_return_reason(name, allow_underscore=self._allow_underscore)
            if not valid:
                raise ValueError(f"Invalid axis identifier: {name}\n{reason}")
            axis = name
        self.identifiers.add(axis)
        if group is None:
            self.composition.append([axis])
        else:
            group.append(axis)

    @staticmethod
    def check_axis_name_return_reason(name, allow_underscore=False):
        """(whether `name` can name an axis, why not)."""
        if not str.isidentifier(name):
            return False, "not a valid python identifier"
        if name[0] == "_" or name[-1] == "_":
            if name == "_" and allow_underscore:
                return True, ""
            return False, "axis name should should not start or end with underscore"
        if keyword.iskeyword(name):
            warnings.warn(
                f"It is discouraged to use axes names that are keywords: {name}", RuntimeWarning, stacklevel=2
            )
        return True, ""

    @staticmethod
    def check_axis_name(name):
        """Whether `name` can name an axis: an identifier that neither starts nor ends with an underscore."""
        return ParsedExpression.check_axis_name_return_reason(name)[0]


def _tokens(expression):
    """Brackets, and the runs of other characters between spaces and brackets."""
    word = ""
    for char in expression:
        if char in "() ":
            if word:
                yield word
                word = ""
            if char != " ":
                yield char
        else:
            word += char
    if word:
        yield word


def parse_pattern(pattern, axes_lengths):
    """The two sides of `left -> right` as ParsedExpressions, with the checks that need both."""
    if _ellipsis in axes_lengths:
        raise ValueError(f"'{_ellipsis}' is not an allowed axis identifier")
    if pattern.count("->") != 1:
        raise ValueError("Pattern must contain a single '->' separator")
    left_text, right_text = pattern.split("->")
    left, right = ParsedExpression(left_text), ParsedExpression(right_text)
    if not left.has_ellipsis and right.has_ellipsis:
        raise ValueError(f"Ellipsis found in right side, but not left side of a pattern {pattern}")
    if left.has_ellipsis and left.has_ellipsis_parenthesized:
        raise ValueError(f"Ellipsis is parenthesis in the left side is not allowed: {pattern}")
    return left, right


def validate_rearrange_expressions(left, right, axes_lengths):
    """rearrange's checks of a parsed pattern and the axis lengths given with it."""
    for length in axes_lengths.values():
        if type(length) is not int:
            raise TypeError(f"rearrange axis lengths must be integers, got: {type(length)}")
    if left.has_non_unitary_anonymous_axes or right.has_non_unitary_anonymous_axes:
        raise ValueError("rearrange only supports unnamed axes of size 1")
    only_one_side = set.symmetric_difference(left.identifiers, right.identifiers)
    if only_one_side:
        raise ValueError(f"Identifiers only on one side of rearrange expression (should be on both): {only_one_side}")
    unmatched = axes_lengths.keys() - left.identifiers
    if unmatched:
        raise ValueError(f"Identifiers not found in rearrange expression: {unmatched}")
