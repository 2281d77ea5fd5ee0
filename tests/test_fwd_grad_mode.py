"""Forward gradients switched off and on (torch.autograd.forward_ad._set_fwd_grad_enabled, _is_fwd_grad_enabled)
against torch 2.13: dual tensors under a dual level, torch.func's jvp/jacfwd/hessian of functions with a region
switched off, and the mode inside custom Functions and transforms."""

import torch

import batched_grad as bg
from oracle import assert_same


def _dual_tensors_while_off(m):
    fw = m.autograd.forward_ad
    seen = []
    with fw.dual_level():
        x = fw.make_dual(m.tensor([1.0, 2.0]), m.tensor([1.0, 1.0]))
        with fw._set_fwd_grad_enabled(False):
            seen.append(fw._is_fwd_grad_enabled())
            product = x * x
            made = fw.make_dual(m.ones(2), m.tensor([3.0, 4.0]))
            seen += [fw.unpack_dual(t).tangent for t in (product, x, made, x.clone())]
        seen += [fw.unpack_dual(x * x).tangent, fw.unpack_dual(made).tangent]  # tangents made while off reappear
    seen.append(fw._is_fwd_grad_enabled())
    return seen


def test_dual_tensors_show_and_compute_no_tangent_while_off():
    ours, theirs = _dual_tensors_while_off(bg), _dual_tensors_while_off(torch)
    assert ours[0] is theirs[0] is False and ours[-1] is theirs[-1] is True
    assert_same(ours[1:-1], theirs[1:-1])


def test_the_mode_switches_when_made_and_back_when_exited():
    def run(m):
        fw = m.autograd.forward_ad
        switch = fw._set_fwd_grad_enabled(False)
        made = fw._is_fwd_grad_enabled()
        switch.__exit__(None, None, None)
        return made, fw._is_fwd_grad_enabled()

    assert run(bg) == run(torch) == (False, True)


def _shifted_square(m):
    def f(x):
        with m.autograd.forward_ad._set_fwd_grad_enabled(False):
            shift = x**2  # a constant to forward mode
        return x**2 - shift

    return f


def _transforms_of_shifted_square(m):
    f, x, t = _shifted_square(m), m.tensor(0.7), m.tensor(1.0)
    xs = m.tensor([0.7, 0.2])
    results = list(m.func.jvp(f, (x,), (t,)))
    results += list(m.func.jvp(lambda y: m.func.jvp(f, (y,), (t,))[1], (x,), (t,)))
    with m.autograd.forward_ad._set_fwd_grad_enabled(True):
        results += list(m.func.jvp(f, (x,), (t,)))
    results += [m.func.jacfwd(f)(xs), m.func.hessian(f)(xs)]
    return results


def test_a_region_switched_off_is_constant_to_jvp_and_jacfwd():
    ours, theirs = _transforms_of_shifted_square(bg), _transforms_of_shifted_square(torch)
    assert_same(ours, [t.detach() for t in theirs])


def _transforms_under_off(m):
    fw, modes = m.autograd.forward_ad, []

    def noting_mode(x):
        modes.append(fw._is_fwd_grad_enabled())
        return x.sin()

    x = m.tensor([1.0, 2.0])
    with fw._set_fwd_grad_enabled(False):
        results = [m.func.jvp(noting_mode, (x,), (m.ones(2),))[1], m.func.jacfwd(noting_mode)(x)]
        results += [m.func.vmap(noting_mode)(x), m.func.grad(lambda y: noting_mode(y).sum())(x)]
        leaf = m.tensor(0.7, requires_grad=True)
        (leaf * leaf).backward()  # reverse mode is unaffected
    return modes[:1] + modes[-2:], results + [leaf.grad]


def test_jvp_and_jacfwd_switch_forward_gradients_on_for_the_function_and_nothing_else_does():
    ours, theirs = _transforms_under_off(bg), _transforms_under_off(torch)
    assert ours[0] == theirs[0] == [True, False, False]
    assert_same(ours[1], theirs[1])


def _modes_in_function(m):
    fw, modes = m.autograd.forward_ad, []

    class Double(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            modes.append(("forward", fw._is_fwd_grad_enabled()))
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            modes.append(("jvp", fw._is_fwd_grad_enabled()))
            return t * 2

    with fw.dual_level():
        x = fw.make_dual(m.tensor([1.0, 2.0]), m.tensor([1.0, 1.0]))
        tangent = fw.unpack_dual(Double.apply(x)).tangent
        with fw._set_fwd_grad_enabled(False):
            off = fw.unpack_dual(Double.apply(x)).tangent
    return modes, tangent, off


def test_custom_functions_run_forward_and_jvp_with_forward_gradients_off():
    ours, theirs = _modes_in_function(bg), _modes_in_function(torch)
    assert ours[0] == theirs[0]
    assert_same(list(ours[1:]), list(theirs[1:]))
