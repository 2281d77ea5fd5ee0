"""conj() as torch 2.13's lazy conjugate: a view of its input that is_conj(), whose writes reach the input
conjugated, resolved by resolve_conj() and never set by conj_physical(); views of it keep the bit and other ops'
results do not; numpy() and view_as_real refuse it; under grad and vmap too."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

Z = np.array([1 + 1j, 2 - 1j, -0.5 + 3j])


def both(case):
    return case(torch), case(bg)


def test_conj_is_a_view_with_the_conjugate_bit():
    def case(m):
        x = m.tensor(Z)
        y = x.conj()
        return [
            y.is_conj(),
            m.is_conj(y),
            y._base is x,
            y.data_ptr() == x.data_ptr(),
            y.conj().is_conj(),
            y[0].is_conj(),
            y.view(3).is_conj(),
            y.detach().is_conj(),
            (y + 1).is_conj(),
            y.clone().is_conj(),
            y.resolve_conj().is_conj(),
            y.resolve_conj() is y,
            x.resolve_conj() is x,
            x.conj_physical().is_conj(),
            m.tensor([1.0]).conj().is_conj(),
            m.tensor([[1 + 1j, 2], [3j, 4]]).mH.is_conj(),
        ]

    want, got = both(case)
    assert got == want


def test_writes_through_a_conjugated_view_reach_its_base_conjugated():
    def case(m):
        x = m.tensor(Z)
        y = x.conj()
        y.mul_(2j)
        later = x.conj()
        x.add_(1j)
        z = m.tensor(Z).conj()
        z.conj_physical_()
        return x, y, later, z, z.is_conj()

    want, got = both(case)
    assert_same(got[:4], want[:4])
    assert got[4] == want[4]


def test_gradients_through_a_written_conjugated_view():
    def case(m):
        a = m.tensor(Z, requires_grad=True)
        b = a * 1
        b.conj().mul_(2j)
        names = (b.grad_fn.name(), a.conj().grad_fn.name(), m.conj_physical(a).grad_fn.name())
        return m.autograd.grad(b.abs().sum(), a), names

    (tg, tnames), (bg_, bnames) = both(case)
    assert_same(bg_, tg)
    assert bnames == tnames


@pytest.mark.parametrize("read", ["numpy", "view_as_real"])
def test_reading_the_unresolved_conjugate_as_memory_is_refused(read):
    def case(m):
        y = m.tensor(Z).conj()
        try:
            y.numpy() if read == "numpy" else m.view_as_real(y)
        except RuntimeError as error:
            return str(error)

    want, got = both(case)
    assert got == want is not None
    assert np.array_equal(bg.tensor(Z).conj().numpy(force=True), np.conj(Z))


def test_the_bit_under_grad_and_vmap():
    def case(m):
        seen = []

        def f(x):
            y = x.conj()
            seen.append((x.is_conj(), y.is_conj()))
            return y.abs()

        g = m.func.grad(f)(m.tensor(1 + 1j))
        m.func.vmap(lambda t: t.conj() * 1)(m.tensor(Z))
        return g, seen

    (tg, tseen), (bg_, bseen) = both(case)
    assert_same(bg_, tg)
    assert bseen[0] == tseen[0] == (False, True)
