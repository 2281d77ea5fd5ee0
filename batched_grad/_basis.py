"""Standard-basis cotangents. A Jacobian's batched grad_outputs are the rows of an identity (jacobian()'s blocks
of one, for several outputs): row b is one at flat index b - offset and zero elsewhere. The batched backward
program carries such a row as its index and a scale (a BasisRow) rather than as a dense array, for as long as
the ops allow: the VJP of an elementwise op (a diagonal Jacobian) scales it, and that of a matrix product (or
nn.functional.linear) picks a row or column of the other operand. So the first product of a Jacobian's
backward is a gather, where a dense cotangent would cost a (B x n) @ (n x m) product. Any other op sees the
dense row.

The results are those of the dense rows, nan included: the VJP of an elementwise op at a point where its
derivative is not finite turns the zeros of every row into nan there (0 * inf), and the rows keep that."""

import math

import jax.numpy as jnp

from ._ops._core import _vjp_fn


class BasisRow:
    """Row `row` (a traced index) of a block of the identity, as VJPs transformed it: `scale` at flat index
    row - offset when in range, `rest` elsewhere. Both have the output's shape and are the same for every row.
    `rest` is None while it is exactly zero; else it is what VJPs made of zeros: zeros, and nan where a
    derivative was not finite."""

    __slots__ = ("row", "offset", "scale", "rest")

    def __init__(self, row, offset, scale, rest=None):
        self.row, self.offset, self.scale, self.rest = row, offset, scale, rest

    def hit(self):
        """True at the row's index (nowhere when it is out of range), in the output's shape."""
        return (jnp.arange(self.scale.size) == self.row - self.offset).reshape(self.scale.shape)


def dense(x):
    if type(x) is not BasisRow:
        return x
    return jnp.where(x.hit(), x.scale, 0 if x.rest is None else x.rest)


def add(a, b):
    if type(a) is BasisRow and type(b) is BasisRow and a.row is b.row and a.offset == b.offset:
        rest = None if a.rest is None and b.rest is None else _rest(a) + _rest(b)
        return BasisRow(a.row, a.offset, a.scale + b.scale, rest)
    return dense(a) + dense(b)


def _rest(x):
    return jnp.zeros_like(x.scale) if x.rest is None else x.rest


def vjp(values, cts, spec):
    """The VJP of one step (as `_vjp_fn`), keeping basis rows where a rule allows."""
    if BasisRow in [type(c) for c in cts]:
        op = spec.sig.op
        rule = _diagonal if op.diagonal else _RULES.get(op.name)
        grads = None if rule is None else rule(values, cts, spec)
        if grads is not None:
            return grads
        cts = [dense(c) for c in cts]
    return _vjp_fn(*values, *cts, spec=spec)


def _diagonal(values, cts, spec):
    """An elementwise op or a reshape: the VJP of the scale and of the rest, at the same index. Each operand that
    gets a gradient must have the output's size (a broadcast operand's gradient sums over rows). A linear op
    keeps a zero rest zero."""
    (ct,) = cts
    sig = spec.sig
    n = math.prod(sig.out_avals[0][0])
    if any(math.prod(sig.avals[j][0]) != n for j in spec.want):
        return None
    scales = _vjp_fn(*values, ct.scale, spec=spec)
    if ct.rest is None and sig.op.linear:
        return [BasisRow(ct.row, ct.offset, s) for s in scales]
    rests = _vjp_fn(*values, _rest(ct), spec=spec)
    return [BasisRow(ct.row, ct.offset, s, r) for s, r in zip(scales, rests)]


def _entry(ct, p, m):
    """(in range, i, j, s, nan) of a cotangent row of shape (p, m): its entry s at (i, j) (clipped into range),
    and where the rest is nan elsewhere (None when the rest is zero)."""
    index = ct.row - ct.offset
    inside = (index >= 0) & (index < p * m)
    index = jnp.clip(index, 0, p * m - 1)
    nan = None if ct.rest is None else jnp.isnan(jnp.where(ct.hit(), 0, ct.rest).reshape(p, m))
    return inside, index // m, index % m, ct.scale.reshape(-1)[index], nan


def _left(entry, b, p):
    """The gradient (p, k) of a in a @ b, b (k, m): s * b[:, j] in row i; a nan row of the cotangent, a nan row."""
    inside, i, j, s, nan = entry
    g = jnp.where(inside & (jnp.arange(p) == i)[:, None], s * b[:, j], 0)
    return g if nan is None else jnp.where(nan.any(1)[:, None], jnp.nan, g)


def _right(entry, a, m):
    """The gradient (k, m) of b in a @ b, a (p, k): s * a[i, :] in column j; a nan column, a nan column."""
    inside, i, j, s, nan = entry
    g = jnp.where(inside & (jnp.arange(m) == j), (s * a[i])[:, None], 0)
    return g if nan is None else jnp.where(nan.any(0), jnp.nan, g)


def _right_rows(entry, a, m):
    """_right's gradient transposed, (m, k): s * a[i, :] in row j; a nan column of the cotangent, a nan row. Built
    in that orientation, not transposed after, which XLA would do as a copy of the whole batch of Jacobians."""
    inside, i, j, s, nan = entry
    g = jnp.where((inside & (jnp.arange(m) == j))[:, None], (s * a[i])[None, :], 0)
    return g if nan is None else jnp.where(nan.any(0)[:, None], jnp.nan, g)


def _operands(values, spec):
    saved = iter(values)
    return [next(saved) if s else None for s in spec.saved_mask]


def _real(avals, most_dims):
    return all(len(shape) <= most_dims and jnp.issubdtype(dtype, jnp.floating) for shape, dtype in avals)


def _matmul(values, cts, spec):
    """a @ b for 1-D and 2-D real operands, as (p, k) @ (k, m)."""
    (ct,) = cts
    (sa, _), (sb, _) = avals = spec.sig.avals
    if not _real(avals, 2):
        return None
    a, b = _operands(values, spec)
    p, k, m = (sa[0] if len(sa) == 2 else 1), sa[-1], (sb[-1] if len(sb) == 2 else 1)
    entry = _entry(ct, p, m)
    grads = {
        0: lambda: _left(entry, b.reshape(k, m), p).reshape(sa),
        1: lambda: _right(entry, a.reshape(p, k), m).reshape(sb),
    }
    return [grads[j]() for j in spec.want]


def _linear(values, cts, spec):
    """bias + x @ w.T (nn.functional.linear, its operands in torch's addmm order: bias, x, w) for a 1-D or 2-D real
    x: a product with b = w.T (given as such where the weight is recorded transposed), and the bias gradient the
    cotangent's column sums (s at j)."""
    (ct,) = cts
    sig = spec.sig
    avals, weight_t = sig.avals, dict(sig.static)["weight_t"]
    if not _real(avals, 2):
        return None
    (sx, _), (sw, dw) = avals[-2:]
    m, k = (sw[1], sw[0]) if weight_t else sw
    *_, x, w = _operands(values, spec)
    p = sx[0] if len(sx) == 2 else 1
    entry = _entry(ct, p, m)
    first = len(avals) - 2  # the position of x (after the bias, if any)
    grads = {
        first: lambda: _left(entry, w if weight_t else w.T, p).reshape(sx),
        first + 1: lambda: (_right if weight_t else _right_rows)(entry, x.reshape(p, k), m),
    }
    if first:
        grads[0] = lambda: _right(entry, jnp.ones((p, 1), dw), m).reshape(m)
    return [grads[j]() for j in spec.want]


_RULES = {"matmul": _matmul, "linear": _linear}
