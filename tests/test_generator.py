"""bg.Generator and generator= on every random function, against torch 2.13. The numbers differ from torch's (another
algorithm); what is compared is what a program can rely on: same state, same numbers; generators independent of
each other and of the default one; states that round-trip; seeds and errors as torch has them."""

import subprocess
import sys

import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap
from test_tensor import _restore_modes, assert_like_torch  # noqa: F401  (the fixture restores grad mode)

SEEDS = [
    "g = m.Generator()\ng.initial_seed(), g.device",
    "m.Generator('cpu').device, m.Generator(device='cpu').device, m.Generator(None).device",
    "m.Generator(device=m.device('cpu')).device, m.Generator(device='cpu:0').device",
    "m.Generator(device='xyz')",
    "g = m.Generator()\ng.manual_seed(5) is g, g.initial_seed()",
    "m.Generator().manual_seed(-1).initial_seed(), m.Generator().manual_seed(-2**63).initial_seed()",
    "m.Generator().manual_seed(2**64 - 1).initial_seed()",
    "m.Generator().manual_seed(np.int64(9))",
    "m.manual_seed(np.int64(9)).initial_seed()",
    "m.Generator().manual_seed(2**64)",
    "m.Generator().manual_seed(-2**63 - 1)",
    "m.Generator().manual_seed(1.5)",
    "m.Generator().manual_seed(True)",
    "m.Generator().manual_seed('3')",
    "m.Generator().manual_seed(None)",
    "m.Generator().manual_seed(m.tensor(3))",
    "m.Generator().manual_seed(np.zeros(1))",
    "m.manual_seed(5) is m.default_generator, m.initial_seed(), m.default_generator.initial_seed()",
    "m.manual_seed(1.5).initial_seed(), m.manual_seed('3').initial_seed(), m.manual_seed(True).initial_seed()",
    "m.manual_seed(-1).initial_seed(), m.manual_seed(m.tensor(7)).initial_seed()",
    "m.manual_seed(None)",
    "m.manual_seed(2**64)",
    "m.manual_seed('x')",
    "s = m.seed()\ntype(s).__name__, 0 <= s < 2**64, s == m.initial_seed() == m.default_generator.initial_seed()",
    "g = m.Generator()\ns = g.seed()\ns == g.initial_seed(), 0 <= s < 2**64, g.seed() != s",
]


@pytest.mark.parametrize("code", SEEDS)
def test_seeds_like_torch(code):
    assert_like_torch(code)


STATES = [
    "s = m.Generator().get_state()\ns.dtype, s.ndim, s.requires_grad, s.is_leaf, s.grad_fn",
    "s = m.get_rng_state()\ns.dtype, s.ndim, s.requires_grad",
    # a state restores the stream (and the seed), on the same generator or another one
    "g = m.Generator().manual_seed(5)\ns = g.get_state()\na = m.rand(5, generator=g).tolist()\n"
    "g.set_state(s) is g, a == m.rand(5, generator=g).tolist()",
    "g = m.Generator().manual_seed(5)\nm.rand(3, generator=g)\nh = m.Generator().set_state(g.get_state())\n"
    "h.initial_seed(), m.randn(4, generator=g).tolist() == m.randn(4, generator=h).tolist()",
    "m.manual_seed(11)\nm.rand(2)\ns = m.get_rng_state()\na = m.randn(6).tolist()\n"
    "m.set_rng_state(s), a == m.randn(6).tolist(), m.initial_seed()",
    # the state is a copy: changing it changes nothing
    "g = m.Generator()\ns = g.get_state()\nbefore = s.tolist()\ns.zero_()\ng.get_state().tolist() == before",
    "g = m.Generator()\ns = g.get_state()\nm.rand(4, generator=g)\ns.tolist() == g.get_state().tolist()",
    "m.Generator().set_state(m.Generator().get_state().float())",
    "m.Generator().set_state(np.zeros(5056, np.uint8))",
    "m.Generator().set_state([0] * 16)",
    "import fractions\nm.Generator().set_state(fractions.Fraction(1, 2))",
    "m.set_rng_state(m.get_rng_state().double())",
    "m.set_rng_state(m.get_rng_state().numpy())",
    # a copy of a generator continues where the original is
    "import pickle\ng = m.Generator().manual_seed(5)\nm.rand(2, generator=g)\nh = pickle.loads(pickle.dumps(g))\n"
    "h.initial_seed(), m.rand(3, generator=g).tolist() == m.rand(3, generator=h).tolist()",
    "import copy\ng = m.Generator().manual_seed(5)\nm.rand(2, generator=g)\nh = copy.deepcopy(g)\n"
    "h is g, h.initial_seed(), m.rand(3, generator=g).tolist() == m.rand(3, generator=h).tolist()",
    "g = m.Generator().manual_seed(5)\nm.rand(2, generator=g)\nh = g.clone_state()\n"
    "h is g, h.initial_seed(), m.rand(3, generator=g).tolist() == m.rand(3, generator=h).tolist()",
]


@pytest.mark.parametrize("code", STATES)
def test_states_like_torch(code):
    assert_like_torch(code)


@pytest.mark.parametrize("bad", ["m.zeros(7, dtype=m.uint8)", "m.zeros(2, 100, dtype=m.uint8)"])
def test_a_state_of_the_wrong_size_is_refused_naming_both_sizes(bad):
    size = eval(bad.replace("m.", "bg.")).numel()
    for m in (torch, bg):
        with pytest.raises(RuntimeError, match=f"of size \\d+ but found the input RNG state size to be {size}$"):
            m.Generator().set_state(eval(bad))


def test_a_state_that_no_generator_can_have_is_refused():
    for m in (torch, bg):
        zeros = m.zeros(m.Generator().get_state().numel(), dtype=m.uint8)
        with pytest.raises(RuntimeError, match="^Invalid mt19937 state$"):
            m.Generator().set_state(zeros)


DRAWS = [
    "m.rand(3, 4, generator=g)",
    "m.randn(5, generator=g)",
    "m.randn(2, dtype=m.complex64, generator=g)",
    "m.randint(0, 100, (6,), generator=g)",
    "m.randint(100, (6,), generator=g)",
    "m.rand_like(m.ones(2), generator=g)",
    "m.randn_like(m.ones(2, dtype=m.float64), generator=g)",
    "m.nn.init.uniform_(m.empty(3), -2, 2, generator=g)",
    "m.nn.init.normal_(m.empty(3), 1, 3, generator=g)",
    "m.nn.init.kaiming_uniform_(m.empty(3, 2), generator=g)",
    "m.nn.init.xavier_uniform_(m.empty(3, 2), generator=g)",
]


@pytest.mark.parametrize("draw", DRAWS)
def test_a_generator_makes_draws_reproducible_and_independent(draw):
    other = draw.replace("generator=g", "generator=h")
    default = draw.replace(", generator=g", "")
    assert_like_torch(  # the same seed or state gives the same numbers; the stream moves on
        f"g = m.Generator().manual_seed(7)\na = {draw}.tolist()\nb = {draw}.tolist()\ng.manual_seed(7)\n"
        f"c = {draw}.tolist()\ns = g.get_state()\nd = {draw}.tolist()\ng.set_state(s)\n"
        f"a == c, a != b, b == {draw}.tolist(), d == {draw}.tolist()"
    )
    assert_like_torch(  # another generator, or the default one, drawing in between changes nothing
        f"g = m.Generator().manual_seed(7)\nh = m.Generator().manual_seed(7)\nfirst_h = {other}.tolist()\n"
        f"{other}\nm.manual_seed(0)\n{default}\nfirst_h == {draw}.tolist()"
    )
    assert_like_torch(  # and drawing from `g` leaves the default generator's stream as it was
        f"g = m.Generator().manual_seed(7)\nm.manual_seed(3)\na = {default}.tolist()\nm.manual_seed(3)\n"
        f"{draw}\n{draw}\na == {default}.tolist()"
    )


@pytest.mark.parametrize("draw", DRAWS[:7])
@pytest.mark.parametrize("bad", ["5", "'cpu'", "np.random.default_rng(0)"])
def test_a_generator_argument_that_is_no_generator_is_a_type_error(draw, bad):
    # torch's argument parser lists every overload of these in its message: the class is what matches
    assert_like_torch(draw.replace("generator=g", f"generator={bad}"), error="type")


@pytest.mark.parametrize("draw", DRAWS[7:])
def test_nn_init_names_the_generator_argument_like_torch(draw):
    assert_like_torch(draw.replace("generator=g", "generator=5"))
    assert_like_torch(draw.replace("generator=g", "generator=None") + ".shape")


def test_vmap_refuses_a_generator_in_error_mode_and_draws_once_with_same():
    x = bg.ones(4, 3)
    tx = torch.ones(4, 3)
    g, tg = bg.Generator(), torch.Generator()
    with pytest.raises(RuntimeError) as ours:
        vmap.vmap(lambda r: r + bg.rand(3, generator=g))(x)
    with pytest.raises(RuntimeError) as theirs:
        torch.func.vmap(lambda r: r + torch.rand(3, generator=tg))(tx)
    assert str(ours.value) == str(theirs.value)
    g.manual_seed(2)
    out = vmap.vmap(lambda r: r + bg.rand(3, generator=g), randomness="same")(x).numpy()
    assert np.array_equal(out, np.broadcast_to(out[0], out.shape))
    g.manual_seed(2)
    assert np.array_equal(out[0], 1 + bg.rand(3, generator=g).numpy())


def test_seed_is_new_each_call():
    g = bg.Generator()
    assert len({g.seed() for _ in range(4)}) == 4


@pytest.mark.slow
def test_the_default_generator_gets_a_new_seed_in_every_process_like_torch():
    def seeds(module):
        code = f"import {module}; print({module}.initial_seed())"
        return {
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)
        }

    assert len(seeds("torch")) == len(seeds("batched_grad")) == 2
