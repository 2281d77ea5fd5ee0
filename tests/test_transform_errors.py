"""What torch.func 2.13 refuses inside a function transform, refused the same way by batched_grad.func (exception
type and message against torch's): in-place writes into captured tensors under the grad-type transforms, aux
outputs that are not Tensors, requires_grad_() and retain_grad(), torch.autograd.functional, a custom Function
without setup_context, .item() or a branch on a batched value under vmap, backward() inside any transform and a
training batch norm of mapped rows into unmapped running statistics. Each case is written once against a
library `m` (torch or batched_grad) and its transforms `m.func`."""

import numpy as np
import pytest
import torch
import torch.func

import batched_grad as bg
import batched_grad.func
from oracle import raises_like_torch

X3 = np.array([0.5, -1.25, 2.0])


def _x(m, values=X3):
    return m.tensor(values)


# ---- in-place writes into a captured tensor ------------------------------------------------------------------------
WRITES = {  # a write into `c` (a captured tensor) from inside a function of `x`
    "copy_": lambda m, c, x: c.copy_(x),
    "add_ number": lambda m, c, x: c.add_(1),
    "mul_ tensor": lambda m, c, x: c.mul_(x),
    "zero_": lambda m, c, x: c.zero_(),
    "fill_ number": lambda m, c, x: c.fill_(2.0),
    "fill_ tensor": lambda m, c, x: c.fill_(x[0]),
    "pow_ number": lambda m, c, x: c.pow_(2),
    "pow_ tensor": lambda m, c, x: c.pow_(x),
    "div_ rounding": lambda m, c, x: c.div_(2, rounding_mode="floor"),
    "setitem slice": lambda m, c, x: c.__setitem__(slice(0, 2), x[:2]),
    "setitem index tensor": lambda m, c, x: c.__setitem__(m.tensor([0, 2]), x[:2].to(c.dtype)),
    "augmented +=": lambda m, c, x: c.__iadd__(x),
    "a view of it": lambda m, c, x: c[1:].sin_(),
    "its detach()": lambda m, c, x: c.detach().add_(x),
    "under no_grad": lambda m, c, x: _under_no_grad(m, lambda: c.copy_(x)),
}


def _under_no_grad(m, write):
    with m.no_grad():
        write()


def _writing(m, write, captured):
    def f(x):
        write(m, captured, x)
        return (x * captured).sum()

    return f


@pytest.mark.parametrize("write", list(WRITES))
def test_grad_refuses_a_write_into_a_captured_tensor(write):
    raises_like_torch(lambda m: m.func.grad(_writing(m, WRITES[write], _x(m, [1.0, 2.0, 3.0])))(_x(m)))


TRANSFORMS = {  # a transform of f(x) -> scalar, applied at x
    "vjp": lambda m, f, x: m.func.vjp(f, x),
    "jvp": lambda m, f, x: m.func.jvp(f, (x,), (m.ones_like(x),)),
    "jacrev": lambda m, f, x: m.func.jacrev(f)(x),
    "jacfwd": lambda m, f, x: m.func.jacfwd(f)(x),
    "hessian": lambda m, f, x: m.func.hessian(f)(x),
    "grad_and_value": lambda m, f, x: m.func.grad_and_value(f)(x),
    "vmap of grad": lambda m, f, x: m.func.vmap(m.func.grad(f))(m.stack([x, x])),
    "grad of vmap": lambda m, f, x: m.func.grad(lambda y: m.func.vmap(f)(m.stack([y, y])).sum())(x),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_every_grad_type_transform_refuses_a_write_into_a_captured_tensor(transform):
    raises_like_torch(
        lambda m: TRANSFORMS[transform](m, _writing(m, WRITES["add_ number"], _x(m, [1.0, 1.0, 1.0])), _x(m))
    )


def test_a_tensor_made_in_an_outer_grad_is_captured_by_the_inner_one():
    def outer(m):
        def f(a):
            made = a * 2  # made inside the outer grad, captured by the inner one
            return m.func.grad(lambda b: (made.add_(1), (b * made).sum())[1])(a).sum()

        return m.func.grad(f)(_x(m))

    raises_like_torch(outer)


def test_a_tensor_passed_to_an_inner_grad_is_still_captured_by_the_outer_one():
    def nested(m):
        z = m.zeros(3)

        def inner(a, zz):
            zz.add_(1)
            return (a * zz).sum()

        return m.func.grad(lambda a: m.func.grad(inner)(a, z).sum())(_x(m))

    raises_like_torch(nested)


def test_a_refused_write_leaves_the_captured_tensor_as_it_was():
    captured = bg.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="mutate a captured Tensor"):
        bg.func.jvp(_writing(bg, WRITES["copy_"], captured), (bg.tensor(X3),), (bg.ones(3),))
    np.testing.assert_array_equal(captured.numpy(), [1.0, 2.0, 3.0])  # a plain array again, not a leaked tracer
    np.testing.assert_array_equal((captured * 2).numpy(), [2.0, 4.0, 6.0])


@pytest.mark.parametrize("api", ["grad", "jacrev"])
def test_writes_into_the_arguments_and_into_tensors_made_inside_are_allowed(api):
    def run(m):
        def f(x, y, z):
            y.copy_(x)  # an argument it does not differentiate
            z[0] = x[1]
            made = m.zeros(3)
            made.add_(x)  # made inside
            out = y * made + z
            return out.sum() if api == "grad" else out

        y, z = m.zeros(3), m.zeros(3)
        return getattr(m.func, api)(f)(_x(m), y, z), y, z

    for a, b in zip(run(bg), run(torch)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)


def test_grad_allows_writes_into_its_keyword_arguments():
    def run(m):
        z = m.zeros(3, dtype=m.float64)
        g = m.func.grad(lambda x, *, z: (z.copy_(x), (x * z).sum())[1])(_x(m), z=z)
        return g, z

    for a, b in zip(run(bg), run(torch)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)


def test_jvp_writes_into_its_primal():
    def run(m):
        x = _x(m)
        out, tangent = m.func.jvp(lambda p: p.mul_(3), (x,), (m.ones_like(x),))
        return out, tangent, x

    for a, b in zip(run(bg), run(torch)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)


# ---- aux outputs -----------------------------------------------------------------------------------------------------
AUX_APIS = {  # the transform of f(x) -> (output, aux), with has_aux=True
    "grad": lambda m, f, x: m.func.grad(lambda x: (f(x)[0].sum(), f(x)[1]), has_aux=True)(x),
    "grad_and_value": lambda m, f, x: m.func.grad_and_value(lambda x: (f(x)[0].sum(), f(x)[1]), has_aux=True)(x),
    "vjp": lambda m, f, x: m.func.vjp(f, x, has_aux=True),
    "jvp": lambda m, f, x: m.func.jvp(f, (x,), (m.ones_like(x),), has_aux=True),
    "jacrev": lambda m, f, x: m.func.jacrev(f, has_aux=True)(x),
    "jacfwd": lambda m, f, x: m.func.jacfwd(f, has_aux=True)(x),
}
NOT_TENSORS = {"int": 1, "float": 1.5, "str": "abc", "None": None, "bool": True}


@pytest.mark.parametrize("api", list(AUX_APIS))
@pytest.mark.parametrize("aux", list(NOT_TENSORS))
@pytest.mark.parametrize("nested", [False, True])
def test_aux_leaves_that_are_not_tensors_are_refused(api, aux, nested):
    value = NOT_TENSORS[aux]
    raises_like_torch(lambda m: AUX_APIS[api](m, lambda x: (x.sin(), [x.cos(), value] if nested else value), _x(m)))


@pytest.mark.parametrize("api", list(AUX_APIS))
def test_aux_of_tensors_or_empty_containers_is_returned(api):
    def run(m):
        result = AUX_APIS[api](m, lambda x: (x.sin(), {"a": x.cos(), "b": [x.tan()], "c": ()}), _x(m))
        return result[-1] if api != "grad_and_value" else result[1][1]

    got, expected = run(bg), run(torch)
    assert got["c"] == expected["c"] == ()
    np.testing.assert_allclose(got["a"].numpy(), expected["a"].numpy(), rtol=1e-6)
    np.testing.assert_allclose(got["b"][0].numpy(), expected["b"][0].numpy(), rtol=1e-6)


# ---- requires_grad_() and retain_grad() ------------------------------------------------------------------------------
OUTER = {  # a transform of a scalar-valued f, at a vector (a scalar for grad of grad)
    "grad": lambda m, f: m.func.grad(f)(_x(m)),
    "vmap": lambda m, f: m.func.vmap(f)(_x(m)),
    "vmap of grad": lambda m, f: m.func.vmap(m.func.grad(f))(m.stack([_x(m), _x(m)])),
    "grad of grad": lambda m, f: m.func.grad(m.func.grad(f))(m.tensor(0.5)),
    "jvp": lambda m, f: m.func.jvp(f, (_x(m),), (m.ones(3),)),
    "jacrev": lambda m, f: m.func.jacrev(f)(_x(m)),
    "jacfwd": lambda m, f: m.func.jacfwd(f)(_x(m)),
}


@pytest.mark.parametrize("outer", list(OUTER))
@pytest.mark.parametrize("flag", [True, False])
def test_requires_grad_inside_a_transform_is_refused(outer, flag):
    def f(x):
        x.detach().requires_grad_(flag)
        return x.sin().sum()

    raises_like_torch(lambda m: OUTER[outer](m, f))


def test_requires_grad_of_a_captured_tensor_and_retain_grad_inside_grad_are_refused():
    raises_like_torch(lambda m: m.func.grad(lambda x: (m.zeros(2).requires_grad_(), x.sum())[1])(_x(m)))
    raises_like_torch(lambda m: m.func.grad(lambda x: (lambda y: (y.retain_grad(), y.sum())[1])(x.sin()))(_x(m)))
    # a tensor that does not require grad: torch's usual message comes first
    raises_like_torch(lambda m: m.func.grad(lambda x: (m.zeros(2).retain_grad(), x.sum())[1])(_x(m)))


def test_factories_with_requires_grad_still_work_inside_a_transform_and_requires_grad_after_it():
    g = bg.func.grad(lambda x: (bg.ones(3, requires_grad=True) * x).sum())(bg.tensor(X3))
    np.testing.assert_array_equal(g.detach().numpy(), np.ones(3))
    assert bg.zeros(2).requires_grad_().requires_grad


# ---- torch.autograd.functional inside a transform --------------------------------------------------------------------
FUNCTIONAL = {
    "jacobian": lambda m, x: m.autograd.functional.jacobian(lambda y: y.sin().sum(), x),
    "vjp": lambda m, x: m.autograd.functional.vjp(lambda y: y.sin().sum(), x)[1],
    "jvp": lambda m, x: m.autograd.functional.jvp(lambda y: y.sin().sum(), (x,), (m.ones_like(x),))[1],
    "hessian": lambda m, x: m.autograd.functional.hessian(lambda y: y.sin().sum(), x),
    "hvp": lambda m, x: m.autograd.functional.hvp(lambda y: y.sin().sum(), x, m.ones_like(x))[1],
}


@pytest.mark.parametrize("api", list(FUNCTIONAL))
@pytest.mark.parametrize("outer", ["vmap", "grad"])
def test_autograd_functional_inside_a_transform_is_refused(api, outer):
    def run(m):
        if outer == "vmap":
            return m.func.vmap(lambda x: FUNCTIONAL[api](m, x))(m.tensor([X3, X3]))
        return m.func.grad(lambda x: FUNCTIONAL[api](m, x).sum())(m.tensor(0.5))

    raises_like_torch(run)


# ---- a custom Function without setup_context -------------------------------------------------------------------------
def _sine(m):
    class OldStyleSine(m.autograd.Function):  # forward(ctx, ...): no setup_context
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * x.cos()

    return OldStyleSine


@pytest.mark.parametrize("transform", ["vmap", "grad", "jacrev", "jacfwd", "grad_and_value", "hessian"])
def test_function_without_setup_context_is_refused_by_every_transform(transform):
    raises_like_torch(lambda m: getattr(m.func, transform)(lambda x: _sine(m).apply(x).sum())(_x(m)))


def test_function_without_setup_context_is_refused_under_vjp_and_jvp_but_works_outside():
    raises_like_torch(lambda m: m.func.vjp(_sine(m).apply, _x(m)))
    raises_like_torch(lambda m: m.func.jvp(_sine(m).apply, (_x(m),), (m.ones(3),)))
    x = bg.tensor(X3, requires_grad=True)
    (g,) = bg.autograd.grad(_sine(bg).apply(x).sum(), x)
    np.testing.assert_allclose(g.numpy(), np.cos(X3), rtol=1e-6)


# ---- .item() and branches on values under vmap -----------------------------------------------------------------------
READS = {
    "item": lambda m, x: x * x.sum().item(),
    "float": lambda m, x: x * float(x.sum()),
    "int": lambda m, x: x * int(x.sum()),
    "if on a value": lambda m, x: x if x.sum() > 0 else -x,
    "bool of a one-element row": lambda m, x: x if x[0] else -x,
}


@pytest.mark.parametrize("read", list(READS))
def test_vmap_refuses_to_read_a_batched_value(read):
    raises_like_torch(lambda m: m.func.vmap(lambda x: READS[read](m, x))(m.tensor([X3, -X3])))


def test_values_that_do_not_vary_across_the_rows_can_be_read_under_vmap():
    def run(m):
        scale = m.tensor(2.0)
        return m.func.vmap(lambda x: x * scale.item() if scale > 1 else x)(m.tensor([X3, -X3]))

    np.testing.assert_allclose(run(bg).numpy(), run(torch).numpy(), rtol=1e-6)


def test_grad_of_a_function_that_reads_values_still_works():
    def run(m):
        return m.func.grad(lambda x: (x * x.detach().sum().item()).sum() if x.sum() > 0 else x.sum())(_x(m))

    np.testing.assert_allclose(run(bg).numpy(), run(torch).numpy(), rtol=1e-6)


COMPLEX_CASES = {
    "complex_input": (lambda m, x: x.conj(), lambda m: m.tensor([1.0 + 2.0j, -0.5j])),
    "complex_output": (lambda m, x: m.conj(x * 0.5j), lambda m: m.tensor([1.0, 2.0])),
    "complex_output_among_several": (lambda m, x: (x.sin(), x * 1j), lambda m: m.tensor([1.0, 2.0])),
    "complex_output_of_a_function_that_reads_values": (
        lambda m, x: x * (1j if float(x.sum()) > 0 else -1j),
        lambda m: m.tensor([1.0, 2.0]),
    ),
}


@pytest.mark.parametrize("case", list(COMPLEX_CASES))
def test_jacfwd_refuses_complex_tensors_like_torch(case):
    f, make_x = COMPLEX_CASES[case]
    raises_like_torch(lambda m: m.func.jacfwd(lambda x: f(m, x))(make_x(m)))


def test_hessian_refuses_a_complex_input_in_its_outer_jacfwd_like_torch():
    f, make_x = COMPLEX_CASES["complex_input"]
    raises_like_torch(lambda m: m.func.hessian(lambda x: f(m, x).abs().sum())(make_x(m)))


def test_jacfwd_refuses_complex_outputs_with_randomness_different_and_allows_complex_aux():
    raises_like_torch(lambda m: m.func.jacfwd(lambda x: x * 1j, randomness="different")(m.tensor([1.0])))
    jacobian, aux = bg.func.jacfwd(lambda x: (x.sin(), x * 1j), has_aux=True)(bg.tensor([0.0, 1.0]))
    assert aux.dtype.is_complex and not jacobian.dtype.is_complex


def _forward_jacobian(m, x):
    return m.autograd.functional.jacobian(lambda y: y.sin().sum(), x, strategy="forward-mode", vectorize=True)


def _forward_hessian(m, x):
    f = lambda y: y.sin().sum()  # noqa: E731
    return m.autograd.functional.hessian(f, x, outer_jacobian_strategy="forward-mode", vectorize=True)


FORWARD_FUNCTIONAL_PLACES = {
    "vmap": lambda m, g: m.func.vmap(g)(m.tensor([X3, X3])),
    "jvp": lambda m, g: m.func.jvp(g, (m.tensor(X3),), (m.tensor(X3),)),
    "jacfwd": lambda m, g: m.func.jacfwd(g)(m.tensor(X3)),
    "hessian": lambda m, g: m.func.hessian(lambda x: g(x).sum())(m.tensor(X3)),
    "dual_level": lambda m, g: _under_dual_level(m, g),
}


def _under_dual_level(m, g):
    with m.autograd.forward_ad.dual_level():
        return g(m.tensor(X3))


@pytest.mark.parametrize("where", list(FORWARD_FUNCTIONAL_PLACES))
@pytest.mark.parametrize("api", ["jacobian", "hessian"])
def test_autograd_functional_forward_mode_refuses_where_torchs_forward_ad_level_cannot_run(api, where):
    of = _forward_jacobian if api == "jacobian" else _forward_hessian
    raises_like_torch(lambda m: FORWARD_FUNCTIONAL_PLACES[where](m, lambda x: of(m, x)))


def test_forward_mode_hessian_inside_grad_is_refused_and_a_captured_input_under_vmap_is_not():
    raises_like_torch(lambda m: m.func.grad(lambda x: _forward_hessian(m, m.tensor(X3)).sum() * x)(m.tensor(1.0)))

    def captured(m):
        return m.func.vmap(lambda s: _forward_jacobian(m, m.tensor(X3)) * s)(m.tensor([1.0, 2.0]))

    np.testing.assert_allclose(captured(bg).numpy(), captured(torch).numpy(), rtol=1e-6)


def _backward_inside(m, a):
    (a**2).sum().backward()
    return a.sum()


@pytest.mark.parametrize(
    "transform",
    [
        lambda m, f: m.func.grad(f)(_x(m)),
        lambda m, f: m.func.vmap(f)(m.stack([_x(m), _x(m)])),
        lambda m, f: m.func.jvp(f, (_x(m),), (_x(m),)),
        lambda m, f: m.func.vjp(f, _x(m)),
    ],
    ids=["grad", "vmap", "jvp", "vjp"],
)
def test_backward_inside_a_transform_is_refused(transform):
    raises_like_torch(lambda m: transform(m, lambda a: _backward_inside(m, a)))


@pytest.mark.parametrize("running", ["both", "mean only"])
def test_training_batch_norm_of_mapped_rows_into_unmapped_running_stats_is_refused(running):
    def normalize(m):
        mean, var = m.zeros(3), (m.ones(3) if running == "both" else None)
        rows = m.tensor(np.arange(24.0).reshape(2, 4, 3))
        return m.func.vmap(lambda r: m.nn.functional.batch_norm(r, mean, var, training=True))(rows)

    raises_like_torch(normalize)


def test_batch_norm_module_in_training_mode_under_vmap_is_refused_but_runs_in_eval_mode():
    def run(m, training):
        m.manual_seed(0)
        norm = m.nn.BatchNorm1d(3).train(training)
        rows = m.tensor(np.linspace(-1.0, 1.0, 24, dtype=np.float32).reshape(2, 4, 3))
        return m.func.vmap(norm)(rows)

    raises_like_torch(lambda m: run(m, True))
    np.testing.assert_allclose(run(bg, False).detach().numpy(), run(torch, False).detach().numpy(), rtol=1e-6)
