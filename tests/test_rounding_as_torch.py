"""Values rounded as torch's CPU kernels round them, bit for bit in float32 and float64: input + alpha * other (add
and sub with an alpha), addcmul and lerp (one rounding of a fused multiply-add), addcdiv (tensor1 scaled first),
division by a number or a broadcast divisor (no multiplication by its reciprocal, at any size), and SGD's update;
and the graph torch records for add, sub, addcmul and addcdiv (one node whose edges are the tensors, the gradients it
gives). Each compared with torch."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import batched_grad as bg  # noqa: E402

CALLS = {
    "add_alpha": lambda L, a, b, c: L.add(a, b, alpha=0.37),
    "sub_alpha": lambda L, a, b, c: L.sub(a, b, alpha=-1.25),
    "tensor_alpha": lambda L, a, b, c: a.add(b, alpha=L.tensor(0.3)),
    "add_alpha_number": lambda L, a, b, c: L.add(a, 0.7, alpha=0.3),
    "add_in_place": lambda L, a, b, c: a.clone().add_(b, alpha=0.37),
    "sub_in_place": lambda L, a, b, c: a.clone().sub_(b, alpha=3),
    "addcmul": lambda L, a, b, c: L.addcmul(a, b, c, value=0.37),
    "addcmul_one": lambda L, a, b, c: L.addcmul(a, b, c),
    "addcdiv": lambda L, a, b, c: L.addcdiv(a, b, c, value=-0.37),
    "addcmul_in_place": lambda L, a, b, c: a.clone().addcmul_(b, c, value=0.1),
    "addcdiv_in_place": lambda L, a, b, c: a.clone().addcdiv_(b, c.abs() + 1, value=0.01),
    "lerp": lambda L, a, b, c: L.lerp(a, b, 0.3),
    "lerp_high_weight": lambda L, a, b, c: a.lerp(b, 0.8),
    "div_number": lambda L, a, b, c: a / 3.7,
    "div_zero_dim": lambda L, a, b, c: a.div(L.tensor(0.3, dtype=a.dtype)),
    "div_broadcast": lambda L, a, b, c: a.view(40, 50) / b[:50],
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_values_bit_for_bit_as_torch(name, dtype):
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(2000).astype(dtype) for _ in range(3)]
    expected = CALLS[name](torch, *map(torch.tensor, values)).numpy()
    actual = CALLS[name](bg, *map(bg.tensor, values)).numpy()
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["sub_alpha", "addcmul", "div_number", "div_broadcast", "lerp"])
def test_large_operands_round_as_torch(name, dtype):
    """Past the size computed on the host, the compiled kernels round the same way."""
    rng = np.random.default_rng(1)
    values = [rng.standard_normal(1 << 17).astype(dtype) for _ in range(3)]
    call = (lambda L, a, b, c: a.view(-1, 64) / b[:64]) if name == "div_broadcast" else CALLS[name]
    expected = call(torch, *map(torch.tensor, values)).numpy()
    np.testing.assert_array_equal(call(bg, *map(bg.tensor, values)).numpy(), expected)


@pytest.mark.parametrize(
    "options",
    [dict(momentum=0.9, weight_decay=0.01), dict(momentum=0.9, nesterov=True), dict(momentum=0.5, dampening=0.2)],
)
def test_sgd_steps_bit_for_bit_as_torch(options):
    rng = np.random.default_rng(2)
    start = rng.standard_normal(300).astype(np.float32)
    grads = [rng.standard_normal(300).astype(np.float32) for _ in range(6)]
    results = []
    for L in (torch, bg):
        p = L.tensor(start.copy(), requires_grad=True)
        optimizer = L.optim.SGD([p], lr=0.1, **options)
        for g in grads:
            p.grad = L.tensor(g)
            optimizer.step()
        results.append(p.detach().numpy())
    np.testing.assert_array_equal(results[1], results[0])


GRAPHS = {
    "add": lambda L, a, b: L.add(a, b, alpha=0.5),
    "sub": lambda L, a, b: a.sub(b, alpha=2.5),
    "addcmul": lambda L, a, b: L.addcmul(a, b, b, value=0.5),
    "addcdiv": lambda L, a, b: L.addcdiv(a, b, b + 3, value=0.5),
}


def _graph(L, call):
    a = L.tensor([0.5, -1.0, 2.0], dtype=L.float64, requires_grad=True)
    b = L.tensor([1.5, 0.25, -2.0], dtype=L.float64, requires_grad=True)
    out = call(L, a, b)
    edges = [None if f is None else type(f).__name__ for f, _ in out.grad_fn.next_functions]
    first = L.autograd.grad(out.pow(2).sum(), (a, b), create_graph=True)
    second = L.autograd.grad(sum(g.sum() for g in first), (a, b))
    out.sum().backward()
    out.sum().backward()  # nothing it saves is freed: torch's nodes save no tensor here but addcmul's and addcdiv's
    return type(out.grad_fn).__name__, edges, [g.detach().numpy() for g in (*first, *second, a.grad, b.grad)]


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_one_node_with_torchs_edges_and_gradients(name):
    try:
        expected = _graph(torch, GRAPHS[name])
    except RuntimeError as error:
        with pytest.raises(RuntimeError, match="second time"):
            _graph(bg, GRAPHS[name])
        assert "second time" in str(error)
        return
    actual = _graph(bg, GRAPHS[name])
    assert actual[:2] == expected[:2]
    for got, want in zip(actual[2], expected[2]):
        np.testing.assert_allclose(got, want, rtol=1e-14)


def test_integer_and_complex_alpha_results_as_torch():
    ints = [L.add(L.tensor([1, 2, 3]), L.tensor([4, 5, 6]), alpha=3).tolist() for L in (torch, bg)]
    assert ints[0] == ints[1]
    complex_results = [L.sub(L.tensor([1 + 2j, 3j]), L.tensor([0.5j, 1.0]), alpha=0.5).numpy() for L in (torch, bg)]
    np.testing.assert_allclose(complex_results[1], complex_results[0], rtol=1e-6)
