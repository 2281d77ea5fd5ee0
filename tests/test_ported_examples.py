"""Scripts in the style of torch.func's tutorials (per-sample gradients, Jacobians and Hessians, neural tangent
kernels, model ensembling) and a physics-informed network, each written once as a function of a module `torch` and
run twice: with the real torch and with batched_grad passed in its place. Weights and data are made in NumPy and
loaded into both; every result of the two runs is compared."""

import copy
import functools

import numpy as np
import pytest
import torch as real_torch

import batched_grad
from ported._harness import assert_trees_close

LIBRARIES = {"torch": real_torch, "batched_grad": batched_grad}
FLOAT32 = {"rtol": 1e-4, "atol": 1e-5}
FLOAT64 = {"rtol": 1e-9, "atol": 1e-12}


def run_both(script, *args, tolerance=FLOAT32):
    """script(torch, *args) with torch and with batched_grad; asserts that the results agree and returns them."""
    expected = script(real_torch, *args)
    actual = script(batched_grad, *args)
    assert_trees_close(actual, expected, script.__name__, tolerance)
    return expected, actual


def _uniform_layer(rng, shape, fan_in):
    bound = 1 / np.sqrt(fan_in)
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def random_state(rng, shapes):
    """{name: float32 array} for a state_dict whose weights have the given shapes (biases follow their weights)."""
    state = {}
    for name, shape in shapes.items():
        fan_in = int(np.prod(shape[1:]))
        state[f"{name}.weight"] = _uniform_layer(rng, shape, fan_in)
        state[f"{name}.bias"] = _uniform_layer(rng, shape[:1], fan_in)
    return state


def load(torch, module, state):
    module.load_state_dict({name: torch.tensor(value) for name, value in state.items()})
    return module


# (a) Per-sample gradients of a small CNN: a loop over samples, and vmap(grad) of a functional_call.


def cnn_per_sample(torch, state, images, labels):
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3)
            self.conv2 = nn.Conv2d(4, 6, 3)
            self.fc1 = nn.Linear(6 * 4 * 4, 16)
            self.fc2 = nn.Linear(16, 3)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            return F.log_softmax(self.fc2(x), dim=1)

    model = load(torch, SmallCNN(), state)
    data, targets = torch.tensor(images), torch.tensor(labels)

    def loss_fn(predictions, targets):
        return F.nll_loss(predictions, targets)

    def loop_gradients(sample, target):
        loss = loss_fn(model(sample.unsqueeze(0)), target.unsqueeze(0))
        return torch.autograd.grad(loss, list(model.parameters()))

    looped = [loop_gradients(data[i], targets[i]) for i in range(len(data))]
    looped = [torch.stack(per_parameter) for per_parameter in zip(*looped)]

    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def compute_loss(params, buffers, sample, target):
        predictions = from_func.functional_call(model, (params, buffers), (sample.unsqueeze(0),))
        return loss_fn(predictions, target.unsqueeze(0))

    per_sample = from_func.vmap(from_func.grad(compute_loss), in_dims=(None, None, 0, 0))
    vmapped = per_sample(params, buffers, data, targets)
    with_losses = from_func.vmap(from_func.grad_and_value(compute_loss), in_dims=(None, None, 0, 0))
    grads_again, losses = with_losses(params, buffers, data, targets)
    for looped_grad, name in zip(looped, vmapped):
        assert torch.allclose(looped_grad, vmapped[name], atol=1e-5, rtol=1e-4), name
    return {
        "looped": looped,
        "vmapped": vmapped,
        "grads_again": grads_again,
        "losses": losses,
        "batch_loss": loss_fn(model(data), targets).detach(),
    }


@pytest.mark.slow  # several seconds: the default suite stays under 10 minutes on 2 cores
def test_per_sample_gradients_of_a_cnn():
    rng = np.random.default_rng(0)
    state = random_state(rng, {"conv1": (4, 1, 3, 3), "conv2": (6, 4, 3, 3), "fc1": (16, 96), "fc2": (3, 16)})
    images = rng.standard_normal((6, 1, 12, 12)).astype(np.float32)
    labels = rng.integers(0, 3, 6)
    run_both(cnn_per_sample, state, images, labels)


# (b) Jacobians and Hessians of tanh(linear(x)): jacrev, jacfwd, vjp rows, batched over inputs, Hessians, HVPs.


def jacobians_and_hessians(torch, weight, bias, x, xs, tangent):
    F, func = torch.nn.functional, torch.func
    weight, bias, x = (torch.tensor(a, dtype=torch.float64) for a in (weight, bias, x))
    xs, tangent = torch.tensor(xs, dtype=torch.float64), torch.tensor(tangent, dtype=torch.float64)

    def predict(weight, bias, x):
        return F.linear(x, weight, bias).tanh()

    results = {"jacrev": func.jacrev(predict, argnums=2)(weight, bias, x)}
    _, vjp_fn = func.vjp(functools.partial(predict, weight, bias), x)
    unit_vectors = torch.eye(weight.shape[0], dtype=torch.float64)
    (results["vmap_vjp"],) = func.vmap(vjp_fn)(unit_vectors)
    rows = [vjp_fn(v)[0] for v in unit_vectors]
    results["vjp_rows"] = torch.stack(rows)
    torch.testing.assert_close(results["vmap_vjp"], results["vjp_rows"])
    results["jacfwd"] = func.jacfwd(predict, argnums=2)(weight, bias, x)
    results["jacrev_weight_bias"] = func.jacrev(predict, argnums=(0, 1))(weight, bias, x)
    results["jacfwd_weight_bias"] = func.jacfwd(predict, argnums=(0, 1))(weight, bias, x)
    assert torch.allclose(results["jacrev"], results["jacfwd"])

    results["batched_jacrev"] = func.vmap(func.jacrev(predict, argnums=2), in_dims=(None, None, 0))(weight, bias, xs)
    results["batched_jacfwd"] = func.vmap(func.jacfwd(predict, argnums=2), in_dims=(None, None, 0))(weight, bias, xs)

    def predict_summed_over_batch(weight, bias, xs):
        return predict(weight, bias, xs).sum(0)

    results["sum_trick"] = func.jacrev(predict_summed_over_batch, argnums=2)(weight, bias, xs).movedim(1, 0)
    assert torch.allclose(results["sum_trick"], results["batched_jacrev"])

    results["hessian"] = func.hessian(predict, argnums=2)(weight, bias, x)
    results["jacfwd_jacfwd"] = func.jacfwd(func.jacfwd(predict, argnums=2), argnums=2)(weight, bias, x)
    results["jacrev_jacrev"] = func.jacrev(func.jacrev(predict, argnums=2), argnums=2)(weight, bias, x)
    results["jacfwd_jacrev"] = func.jacfwd(func.jacrev(predict, argnums=2), argnums=2)(weight, bias, x)
    results["batched_hessian"] = func.vmap(func.hessian(predict, argnums=2), in_dims=(None, None, 0))(weight, bias, xs)

    def scalar(x):
        return predict(weight, bias, x).sin().sum()

    results["hvp_fwd_over_rev"] = func.jvp(func.grad(scalar), (x,), (tangent,))[1]
    _, grad_vjp = func.vjp(func.grad(scalar), x)
    (results["hvp_rev_over_rev"],) = grad_vjp(tangent)
    value, linear_fn = func.linearize(functools.partial(predict, weight, bias), x)
    results["linearize"] = (value, linear_fn(tangent))
    return results


def test_jacobians_and_hessians():
    rng = np.random.default_rng(1)
    weight, bias = rng.standard_normal((4, 5)), rng.standard_normal(4)
    x, xs, tangent = rng.standard_normal(5), rng.standard_normal((3, 5)), rng.standard_normal(5)
    run_both(jacobians_and_hessians, weight, bias, x, xs, tangent, tolerance=FLOAT64)


# (c) The empirical neural tangent kernel of a small CNN: by contracting Jacobians, and by NTK-vector products.


def neural_tangent_kernels(torch, state, x_train, x_test):
    nn, func = torch.nn, torch.func

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(2, 4, (3, 3))
            self.conv2 = nn.Conv2d(4, 4, (3, 3))
            self.fc = nn.Linear(4 * 3 * 3, 3)

        def forward(self, x):
            x = self.conv1(x).relu()
            x = self.conv2(x).relu()
            return self.fc(x.flatten(1))

    device = "cuda" if torch.cuda.device_count() > 0 else "cpu"
    net = load(torch, CNN(), state).to(device)
    x1, x2 = torch.tensor(x_train).to(device), torch.tensor(x_test).to(device)
    params = {k: v.detach() for k, v in net.named_parameters()}

    def fnet_single(params, x):
        return func.functional_call(net, params, (x.unsqueeze(0),)).squeeze(0)

    def ntk_by_jacobians(x1, x2, contraction):
        jac1 = func.vmap(func.jacrev(fnet_single), (None, 0))(params, x1)
        jac2 = func.vmap(func.jacrev(fnet_single), (None, 0))(params, x2)
        jac1 = [j.flatten(2) for j in jac1.values()]
        jac2 = [j.flatten(2) for j in jac2.values()]
        einsum = {"full": "Naf,Mbf->NMab", "trace": "Naf,Maf->NM", "diagonal": "Naf,Maf->NMa"}[contraction]
        return torch.stack([torch.einsum(einsum, j1, j2) for j1, j2 in zip(jac1, jac2)]).sum(0)

    def ntk_by_products(x1, x2, contraction):
        def get_ntk(x1, x2):
            def func_x1(params):
                return fnet_single(params, x1)

            def func_x2(params):
                return fnet_single(params, x2)

            output, vjp_fn = func.vjp(func_x2, params)

            def get_ntk_slice(vec):
                (vjps,) = vjp_fn(vec)
                _, jvps = func.jvp(func_x1, (params,), (vjps,))
                return jvps

            basis = torch.eye(output.numel(), dtype=output.dtype, device=output.device).view(output.numel(), -1)
            return func.vmap(get_ntk_slice)(basis)

        result = func.vmap(func.vmap(get_ntk, (None, 0)), (0, None))(x1, x2)
        if contraction == "trace":
            return torch.einsum("NMKK->NM", result)
        if contraction == "diagonal":
            return torch.einsum("NMKK->NMK", result)
        return torch.einsum("NMba->NMab", result)  # row b of a kernel block is its product with basis vector b

    results = {}
    for contraction in ("full", "trace", "diagonal"):
        by_jacobians = ntk_by_jacobians(x1, x2, contraction)
        by_products = ntk_by_products(x1, x2, contraction)
        assert torch.allclose(by_jacobians, by_products, atol=1e-5, rtol=1e-4), contraction
        results[contraction] = (by_jacobians, by_products)
    return results


@pytest.mark.slow  # several seconds: the default suite stays under 10 minutes on 2 cores
def test_neural_tangent_kernels():
    rng = np.random.default_rng(2)
    state = random_state(rng, {"conv1": (4, 2, 3, 3), "conv2": (4, 4, 3, 3), "fc": (3, 36)})
    x_train = rng.standard_normal((4, 2, 7, 7)).astype(np.float32)
    x_test = rng.standard_normal((3, 2, 7, 7)).astype(np.float32)
    run_both(neural_tangent_kernels, state, x_train, x_test)


# (d) Model ensembling: stack_module_state + vmap over the models, one minibatch for all or one per model.


def _ensemble_members(torch, states):
    nn, F = torch.nn, torch.nn.functional

    class SimpleMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(12, 16)
            self.fc2 = nn.Linear(16, 16)
            self.fc3 = nn.Linear(16, 4)

        def forward(self, x):
            x = x.flatten(1)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    return [load(torch, SimpleMLP(), state) for state in states]


def _ensemble(torch, models, base_model, minibatches):
    func = torch.func
    minibatches = torch.tensor(minibatches)
    minibatch = minibatches[0]
    loop_same = [model(minibatch) for model in models]
    loop_different = [model(batch) for model, batch in zip(models, minibatches)]
    params, buffers = func.stack_module_state(models)

    def fmodel(params, buffers, x):
        return func.functional_call(base_model, (params, buffers), (x,))

    same = func.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)
    different = func.vmap(fmodel)(params, buffers, minibatches)
    assert torch.allclose(same, torch.stack(loop_same), atol=1e-5, rtol=1e-4)
    assert torch.allclose(different, torch.stack(loop_different), atol=1e-5, rtol=1e-4)
    # the stacked parameters are leaves: an ensemble's loss differentiates to each member's parameters
    loss = different.square().mean()
    grads = torch.autograd.grad(loss, list(params.values()))
    return {
        "same": same,
        "different": different,
        "grads": dict(zip(params, grads)),
        "param_names": list(params),
        "stacked_shapes": [list(p.shape) for p in params.values()],
    }


def model_ensemble(torch, states, minibatches):
    models = _ensemble_members(torch, states)
    return _ensemble(torch, models, copy.deepcopy(models[0]), minibatches)


def model_ensemble_on_meta_base(torch, states, minibatches):
    """The tutorial's form: the base model's own parameters are moved to the meta device (they are never read)."""
    models = _ensemble_members(torch, states)
    return _ensemble(torch, models, copy.deepcopy(models[0]).to("meta"), minibatches)


def _ensemble_inputs():
    rng = np.random.default_rng(3)
    shapes = {"fc1": (16, 12), "fc2": (16, 16), "fc3": (4, 16)}
    states = [random_state(rng, shapes) for _ in range(3)]
    return states, rng.standard_normal((3, 5, 3, 4)).astype(np.float32)


def test_model_ensembling():
    run_both(model_ensemble, *_ensemble_inputs())


def test_model_ensembling_on_a_meta_base_model():
    run_both(model_ensemble_on_meta_base, *_ensemble_inputs())


# (e) A physics-informed network for Burgers' equation: u_t + u u_x = nu u_xx, derivatives by autograd.grad.


def burgers_pinn(torch, state, interior, initial, boundary, steps=4):
    nn, F = torch.nn, torch.nn.functional
    net = load(torch, nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1)), state)
    viscosity = 0.01 / torch.pi
    interior, initial, boundary = (torch.tensor(a) for a in (interior, initial, boundary))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)

    def residual(points):
        x = points[:, 0:1].clone().requires_grad_(True)
        t = points[:, 1:2].clone().requires_grad_(True)
        u = net(torch.cat([x, t], dim=1))
        ones = torch.ones_like(u)
        u_x, u_t = torch.autograd.grad(u, (x, t), grad_outputs=ones, create_graph=True)
        (u_xx,) = torch.autograd.grad(u_x, x, grad_outputs=torch.ones_like(u_x), create_graph=True)
        return u_t + u * u_x - viscosity * u_xx, (u, u_x, u_t, u_xx)

    def loss_terms():
        pde, derivatives = residual(interior)
        u0 = -torch.sin(torch.pi * initial[:, 0:1])
        initial_loss = F.mse_loss(net(initial), u0)
        boundary_loss = net(boundary).pow(2).mean()
        return pde.pow(2).mean() + initial_loss + boundary_loss, derivatives

    _, first_derivatives = loss_terms()
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss, _ = loss_terms()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    xs, ts = torch.meshgrid(torch.linspace(-1, 1, 5), torch.linspace(0, 1, 4), indexing="ij")
    with torch.no_grad():
        u_grid = net(torch.stack([xs.flatten(), ts.flatten()], dim=1)).reshape(xs.shape)
    return {
        "derivatives": tuple(d.detach() for d in first_derivatives),
        "losses": losses,
        "final": {k: v.detach() for k, v in net.state_dict().items()},
        "u_on_grid": u_grid,
    }


@pytest.mark.slow  # several seconds: the default suite stays under 10 minutes on 2 cores
def test_burgers_pinn_training():
    rng = np.random.default_rng(4)
    state = random_state(rng, {"0": (16, 2), "2": (16, 16), "4": (1, 16)})
    interior = np.stack([rng.uniform(-1, 1, 32), rng.uniform(0, 1, 32)], axis=1).astype(np.float32)
    initial = np.stack([np.linspace(-1, 1, 9), np.zeros(9)], axis=1).astype(np.float32)
    boundary = np.stack([np.repeat([-1.0, 1.0], 4), np.tile(np.linspace(0, 1, 4), 2)], axis=1).astype(np.float32)
    run_both(burgers_pinn, state, interior, initial, boundary)
