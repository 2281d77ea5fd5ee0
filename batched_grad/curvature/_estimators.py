"""Stochastic estimators of a square operator's trace and diagonal (curvlinops 3's names and arguments): every probe
of an estimate is drawn in one call and multiplied in one batched product (two for Hutch++, XTrace and XDiag, whose
second block depends on the first). `generator` (a bg.Generator) is an addition; without it, the default generator
that `bg.manual_seed` seeds draws the probes."""

import numpy as np

from ._probes import check_matvecs, draw_probe_rows, draw_probes, product, product_rows, result, square_size


def hutchinson_trace(A, num_matvecs, distribution="rademacher", *, generator=None):
    """Girard-Hutchinson: mean over `num_matvecs` probes v (E[v v^T] = I) of v^T A v."""
    dim = square_size(A)
    check_matvecs(A, num_matvecs)
    G = draw_probe_rows(dim, num_matvecs, distribution, generator=generator)
    return result(np.einsum("ij,ij->", G, product_rows(A, G)) / num_matvecs, A)


def hutchinson_diag(A, num_matvecs, distribution="rademacher", *, generator=None):
    """Bekas et al.: mean over `num_matvecs` probes v of v * (A v), elementwise."""
    dim = square_size(A)
    check_matvecs(A, num_matvecs)
    G = draw_probe_rows(dim, num_matvecs, distribution, generator=generator)
    return result(np.einsum("ij,ij->j", G, product_rows(A, G)) / num_matvecs, A)


def hutchpp_trace(A, num_matvecs, distribution="rademacher", *, generator=None):
    """Hutch++ (Meyer et al., 2020): the exact trace on the span Q of A S (a third of the products), plus
    Hutchinson's estimate on its complement. The probes S and G are drawn together; A Q and the projected G go
    through one product."""
    dim = square_size(A)
    check_matvecs(A, num_matvecs, divisor=3)
    n = num_matvecs // 3
    probes = draw_probes(dim, 2 * n, distribution, generator=generator)
    S, G = probes[:, :n], probes[:, n:]
    Q, _ = np.linalg.qr(product(A, S))
    projected = G - Q @ (Q.T @ G)
    both = product(A, np.concatenate([Q, projected], axis=1))
    AQ, A_projected = both[:, :n], both[:, n:]
    A_projected = A_projected - Q @ (Q.T @ A_projected)
    return result(np.einsum("ij,ij->", Q, AQ) + np.einsum("ij,ij->", G, A_projected) / n, A)


def _leave_one_out(Q, R):
    """S, whose column i gives the basis Q_i that leaves out test vector i: Q_i Q_i^T = Q (I - s_i s_i^T) Q^T."""
    RT_inv = np.linalg.inv(R.T)
    return RT_inv / np.sqrt((RT_inv**2).sum(0))


def _deflated(S, Y):
    """Column i of Y with its component along S[:, i] removed: (I - s_i s_i^T) y_i for every i."""
    return Y - S * (S * Y).sum(0)


def xtrace(A, num_matvecs, distribution="rademacher", *, generator=None):
    """XTrace (Epperly, Tropp and Webber, 2024): Hutch++'s variance reduction with every test vector used both in
    the basis and, left out of it in turn, as a Hutchinson probe; the mean of those estimates."""
    dim = square_size(A)
    check_matvecs(A, num_matvecs, divisor=2)
    W = draw_probes(dim, num_matvecs // 2, distribution, generator=generator)
    AW = product(A, W)
    Q, R = np.linalg.qr(AW)
    AQ = product(A, Q)
    S = _leave_one_out(Q, R)
    QT_A_Q = Q.T @ AQ
    traces = np.trace(QT_A_Q) - np.einsum("ij,ik,kj->j", S, QT_A_Q, S)
    A_P_W = AW - AQ @ _deflated(S, Q.T @ W)
    PT_A_P_W = A_P_W - Q @ _deflated(S, Q.T @ A_P_W)
    return result(np.mean(traces + (W * PT_A_P_W).sum(0)), A)


def xdiag(A, num_matvecs, *, generator=None):
    """XDiag (Epperly, Tropp and Webber, 2024): the diagonal of Q Q^T A on the span of A W, corrected by each
    Rademacher test vector left out of the basis in turn. Uses A^T once (A's adjoint)."""
    dim = square_size(A)
    check_matvecs(A, num_matvecs, divisor=2)
    n = num_matvecs // 2
    W = draw_probes(dim, n, "rademacher", generator=generator)
    AW = product(A, W)
    Q, R = np.linalg.qr(AW)
    QT_A = product(A, Q, adjoint=True).T
    S = _leave_one_out(Q, R)
    diagonal = (Q * QT_A.T).sum(1) - ((Q @ (S @ S.T)) * QT_A.T).sum(1) / n
    A_complement_W = AW - Q @ _deflated(S, QT_A @ W)
    diagonal = diagonal + (W * A_complement_W / W**2).sum(1) / n
    return result(diagonal, A)
