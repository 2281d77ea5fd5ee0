"""torch.func programs of the kinds public code holds (the second part of test_fresh_programs_func2.py's round),
each run with torch and with batched_grad in its place (seeded alike, float64, compared to round-off): implicit
hypergradients by CG, Neumann and Nystrom inverse-Hessian products; velocities by dual tensors; DP-SGD over
vmap(grad) with buffers, chunk_size and randomness; a stacked ensemble of critics; ANIL, Reptile, CAVIA and
Meta-SGD; projected per-example gradients (TRAK-style); a tied-embedding language model and parametrized layers
under functional_call."""

import math

import pytest

from ported._harness import float64_program, mlp, run_with_each_library

TOLERANCE = {"rtol": 1e-8, "atol": 1e-10}


@float64_program
def implicit_hypergradients(torch):
    """hypergrad-style implicit differentiation: per-feature weight decay learned through the inner optimum, the
    inverse-Hessian-vector product by conjugate gradient, a Neumann series and a Nystrom approximation, on torch.func
    products over parameter dicts."""
    func = torch.func
    x_train, x_val = torch.randn(40, 5), torch.randn(20, 5)
    w_true = torch.tensor([1.0, -2.0, 0.0, 0.5, 0.0])
    y_train = x_train @ w_true + 0.3 * torch.randn(40)
    y_val = x_val @ w_true + 0.3 * torch.randn(20)
    model = torch.nn.Linear(5, 1)

    def inner_loss(params, hyper):
        pred = func.functional_call(model, params, (x_train,)).squeeze(-1)
        return ((pred - y_train) ** 2).mean() + (hyper["log_decay"].exp() * params["weight"][0] ** 2).sum()

    def outer_loss(params):
        return ((func.functional_call(model, params, (x_val,)).squeeze(-1) - y_val) ** 2).mean()

    def hvp(params, hyper, vector):
        return func.jvp(lambda p: func.grad(inner_loss)(p, hyper), (params,), (vector,))[1]

    def tree_dot(a, b):
        return sum((a[k] * b[k]).sum() for k in a)

    def conjugate_gradient(params, hyper, b, steps):
        x = {k: torch.zeros_like(v) for k, v in b.items()}
        r = dict(b)
        p = dict(b)
        for _ in range(steps):
            Ap = hvp(params, hyper, p)
            rr = tree_dot(r, r)
            alpha = rr / tree_dot(p, Ap)
            x = {k: x[k] + alpha * p[k] for k in x}
            r = {k: r[k] - alpha * Ap[k] for k in r}
            beta = tree_dot(r, r) / rr
            p = {k: r[k] + beta * p[k] for k in p}
        return x

    def neumann(params, hyper, b, steps, alpha=0.1):
        term, total = dict(b), dict(b)
        for _ in range(steps):
            hv = hvp(params, hyper, term)
            term = {k: term[k] - alpha * hv[k] for k in term}
            total = {k: total[k] + term[k] for k in total}
        return {k: alpha * v for k, v in total.items()}

    def nystrom(params, hyper, b, rank, rho=1e-2):
        flat = torch.cat([v.flatten() for v in params.values()])
        sizes = [v.numel() for v in params.values()]
        picks = torch.randperm(flat.numel())[:rank]
        columns = []
        for index in picks.tolist():
            unit = torch.zeros(flat.numel())
            unit[index] = 1.0
            pieces = dict(zip(params, [u.view_as(v) for u, v in zip(unit.split(sizes), params.values())]))
            columns.append(torch.cat([c.flatten() for c in hvp(params, hyper, pieces).values()]))
        C = torch.stack(columns, 1)
        W = C[picks]
        vec = torch.cat([v.flatten() for v in b.values()])
        inner = rho * W + C.T @ C
        solved = (vec - C @ torch.linalg.solve(inner, C.T @ vec)) / rho
        return dict(zip(params, [s.view_as(v) for s, v in zip(solved.split(sizes), params.values())]))

    hyper = {"log_decay": torch.full((5,), -2.0)}
    history = []
    for _ in range(3):
        params = {k: v.detach().clone() for k, v in model.named_parameters()}
        for _ in range(60):
            g = func.grad(inner_loss)(params, hyper)
            params = {k: params[k] - 0.1 * g[k] for k in params}
        val_grad = func.grad(outer_loss)(params)
        methods = {
            "cg": conjugate_gradient(params, hyper, val_grad, 6),
            "neumann": neumann(params, hyper, val_grad, 20),
            "nystrom": nystrom(params, hyper, val_grad, 4),
        }
        hypergrads = {}
        for name, ihvp in methods.items():
            _, mixed = func.vjp(lambda h: func.grad(inner_loss)(params, h), hyper)
            hypergrads[name] = -mixed(ihvp)[0]["log_decay"]
        hyper = {"log_decay": hyper["log_decay"] - 1.0 * hypergrads["cg"]}
        history.append((outer_loss(params).item(), hypergrads))
    return history


@float64_program
def dual_velocities(torch):
    """Vertex velocities of an articulated chain by forward-mode AD: the pose and the clock enter as dual tensors
    (make_dual inside dual_level), unpack_dual gives the tangent; checked against jacfwd and a dual Jacobian."""
    fwAD = torch.autograd.forward_ad
    rest = torch.randn(3, 5, 3)

    def rotation(angles):
        x, y, z = angles.unbind(-1)
        c, s = torch.cos(z), torch.sin(z)
        zero, one = torch.zeros_like(z), torch.ones_like(z)
        rz = torch.stack([c, -s, zero, s, c, zero, zero, zero, one], -1).view(-1, 3, 3)
        c, s = torch.cos(x), torch.sin(x)
        rx = torch.stack([one, zero, zero, zero, c, -s, zero, s, c], -1).view(-1, 3, 3)
        return rz @ rx

    def world(pose, clock):
        rotations = rotation(pose.view(3, 3))
        transforms = [rotations[0]]
        for r in rotations[1:]:
            transforms.append(transforms[-1] @ r)
        stacked = torch.stack(transforms)
        sway = torch.stack([torch.sin(clock), torch.cos(clock) * 0.5, clock * 0.1])
        return torch.einsum("jab,jvb->jva", stacked, rest) + sway

    pose, rate = torch.randn(9), torch.randn(9)
    velocities = []
    for t in (0.0, 0.7):
        clock = torch.tensor(t)
        with fwAD.dual_level():
            vertices = world(fwAD.make_dual(pose, rate), fwAD.make_dual(clock, torch.ones_like(clock)))
            unpacked = fwAD.unpack_dual(vertices)
            velocities.append(unpacked.tangent.clone())
            primal = unpacked.primal.clone()
    jac_pose = torch.func.jacfwd(world)(pose, clock)
    jac_clock = torch.func.jacfwd(world, argnums=1)(pose, clock)
    combined = jac_pose @ rate + jac_clock
    columns = []
    with fwAD.dual_level():
        for i in range(9):
            dual = fwAD.make_dual(pose, torch.eye(9)[i])
            columns.append(fwAD.unpack_dual(world(dual, clock)).tangent)
    weight = torch.randn(4, 3) * 2
    with fwAD.dual_level():
        dual_weight = fwAD.make_dual(weight, torch.ones(4, 3))
        emb = torch.nn.functional.embedding(torch.tensor([[0, 1], [2, 2]]), dual_weight)
        emb_tangent = fwAD.unpack_dual(emb).tangent
        plain = fwAD.unpack_dual(primal * 2).tangent
    return [velocities, primal, combined, torch.stack(columns, -1), emb_tangent, plain is None]


@float64_program
def dp_sgd_vmap(torch):
    """DP-SGD with per-sample gradients from vmap(grad) over functional_call with (params, buffers), clipped,
    noised and averaged; chunk_size and randomness='different'/'same' with dropout in training mode."""
    func = torch.func
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 12), torch.nn.BatchNorm1d(12), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(12, 3)
    )
    model.train()
    model(torch.randn(32, 6))
    criterion = torch.nn.CrossEntropyLoss()
    inputs, labels = torch.randn(20, 6), torch.randint(0, 3, (20,))

    def compute_loss(params, buffers, sample, target):
        prediction = func.functional_call(model, (params, buffers), (sample.unsqueeze(0),))
        return criterion(prediction, target.unsqueeze(0))

    model.eval()
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    per_sample = func.vmap(func.grad(compute_loss), in_dims=(None, None, 0, 0))
    chunked = func.vmap(func.grad(compute_loss), in_dims=(None, None, 0, 0), chunk_size=3)
    losses, chunk_gaps = [], []
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        params = {k: v.detach() for k, v in model.named_parameters()}
        grads = per_sample(params, buffers, inputs, labels)
        again = chunked(params, buffers, inputs, labels)
        chunk_gaps.append(max((grads[k] - again[k]).abs().max().item() for k in grads))
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()], 1).norm(dim=1)
        factor = (1.0 / (norms / 1.0 + 1e-6)).clamp(max=1.0)
        for name, p in model.named_parameters():
            clipped = torch.einsum("i,i...->...", factor, grads[name])
            p.grad = (clipped + torch.normal(0.0, 0.8, size=p.shape)) / len(inputs)
        optimizer.step()
        losses.append(criterion(model(inputs), labels).item())
    model[3].train()
    params = {k: v.detach() for k, v in model.named_parameters()}
    repeated = inputs[:1].expand(6, 6)
    targets = labels[:1].expand(6)
    different = func.vmap(func.grad(compute_loss), in_dims=(None, None, 0, 0), randomness="different")(
        params, buffers, repeated, targets
    )
    same = func.vmap(func.grad(compute_loss), in_dims=(None, None, 0, 0), randomness="same", chunk_size=4)(
        params, buffers, repeated, targets
    )
    w = "4.weight"
    rows_same = all(torch.equal(same[w][0], same[w][i]) for i in range(6))
    dropped = (different["4.weight"] == 0).all(1).double().mean().item()
    return [
        losses,
        [gap < 1e-12 for gap in chunk_gaps],
        rows_same,
        0.0 < dropped < 1.0,
        tuple(different[w].shape),
        {k: tuple(v.shape) for k, v in same.items()},
    ]


@float64_program
def ensemble_critics(torch):
    """A vectorized ensemble of Q-heads (stack_module_state + functional_call under vmap), trained through the stacked
    parameters with Adam; the TD target takes the min over two randomly chosen heads; dropout heads under
    randomness='different' and the legacy combine_state_for_ensemble."""
    func = torch.func
    heads = [mlp(torch, [5, 16, 1], torch.nn.Mish) for _ in range(5)]
    params, buffers = func.stack_module_state(heads)
    base = heads[0]

    def call(p, b, x):
        return func.functional_call(base, (p, b), (x,))

    ensemble = func.vmap(call, in_dims=(0, 0, None))
    stacked = [torch.nn.Parameter(v.detach().clone()) for v in params.values()]
    optimizer = torch.optim.Adam(stacked, lr=3e-3)
    states, rewards, next_states = torch.randn(32, 5), torch.randn(32, 1), torch.randn(32, 5)
    losses = []
    for _ in range(4):
        current = dict(zip(params, stacked))
        with torch.no_grad():
            picks = torch.randperm(5)[:2]
            target = rewards + 0.9 * ensemble(current, buffers, next_states)[picks].min(0).values
        q = ensemble(current, buffers, states)
        loss = ((q - target) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    dropout_heads = [
        torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Dropout(0.3), torch.nn.Linear(8, 1)) for _ in range(3)
    ]
    fparams, fbuffers = func.stack_module_state(dropout_heads)
    different = torch.vmap(
        lambda p, b, x: func.functional_call(dropout_heads[0], (p, b), (x,)),
        in_dims=(0, 0, None),
        randomness="different",
    )(fparams, fbuffers, states)
    for m in dropout_heads:
        m.eval()
    evaluated = torch.vmap(lambda p, b, x: func.functional_call(dropout_heads[0], (p, b), (x,)), (0, 0, None))
    eval_params, eval_buffers = func.stack_module_state(dropout_heads)
    eval_out = evaluated(eval_params, eval_buffers, states)
    return [losses, [p.detach() for p in stacked], tuple(different.shape), eval_out, fparams["0.weight"].requires_grad]


@float64_program
def anil_and_reptile(torch):
    """ANIL (inner steps on the head only, through functional_call, outer gradient into the body) and Reptile
    (inner SGD on a functional copy, outer interpolation of the weights) on sine regression tasks."""
    func = torch.func
    body = mlp(torch, [1, 20, 20], torch.nn.ReLU)
    head = torch.nn.Linear(20, 1)
    outer = torch.optim.Adam(list(body.parameters()) + list(head.parameters()), lr=1e-3)

    def task(n):
        amplitude, phase = torch.rand(1) * 4.9 + 0.1, torch.rand(1) * math.pi
        x = torch.rand(n, 1) * 10 - 5
        return x, amplitude * torch.sin(x + phase)

    anil = []
    for _ in range(3):
        outer.zero_grad()
        total = 0.0
        for _ in range(2):
            (xs, ys), (xq, yq) = task(10), task(10)
            fast = dict(head.named_parameters())
            features = body(xs)
            for _ in range(3):
                loss = torch.nn.functional.mse_loss(func.functional_call(head, fast, (features,)), ys)
                grads = torch.autograd.grad(loss, list(fast.values()), create_graph=True)
                fast = {k: v - 0.01 * g for (k, v), g in zip(fast.items(), grads)}
            query = torch.nn.functional.mse_loss(func.functional_call(head, fast, (body(xq),)), yq)
            query.backward()
            total += query.item()
        outer.step()
        anil.append(total)
    net = mlp(torch, [1, 16, 16, 1], torch.nn.Tanh)
    reptile = []
    for step in range(4):
        weights = {k: v.detach().clone().requires_grad_() for k, v in net.named_parameters()}
        x, y = task(10)
        for _ in range(3):
            loss = torch.nn.functional.mse_loss(func.functional_call(net, weights, (x,)), y)
            grads = torch.autograd.grad(loss, list(weights.values()))
            weights = {k: (v - 0.02 * g).detach().requires_grad_() for (k, v), g in zip(weights.items(), grads)}
        epsilon = 0.1 * (1 - step / 4)
        with torch.no_grad():
            for name, p in net.named_parameters():
                p.add_(epsilon * (weights[name] - p))
        reptile.append(loss.item())
    return [anil, reptile, [p.detach() for p in body.parameters()], [p.detach() for p in net.parameters()]]


@float64_program
def cavia_and_meta_sgd(torch):
    """CAVIA (inner steps only on a context vector fed to the network, second order through create_graph) and
    Meta-SGD (learned per-parameter inner learning rates, functional_call on the adapted weights)."""
    func = torch.func
    net = mlp(torch, [1 + 4, 24, 1], torch.nn.ReLU)
    meta = torch.optim.Adam(net.parameters(), lr=1e-3)

    def task():
        amplitude, phase = torch.rand(1) * 4.9 + 0.1, torch.rand(1) * math.pi
        x = torch.rand(10, 1) * 10 - 5
        return x, amplitude * torch.sin(x + phase)

    def forward(x, context):
        return net(torch.cat([x, context.expand(x.shape[0], -1)], 1))

    cavia = []
    for _ in range(3):
        meta.zero_grad()
        for _ in range(2):
            (xs, ys), (xq, yq) = task(), task()
            context = torch.zeros(1, 4, requires_grad=True)
            for _ in range(2):
                loss = torch.nn.functional.mse_loss(forward(xs, context), ys)
                context = context - 1.0 * torch.autograd.grad(loss, context, create_graph=True)[0]
            query = torch.nn.functional.mse_loss(forward(xq, context), yq)
            query.backward()
            cavia.append(query.item())
        meta.step()

    learner = mlp(torch, [1, 16, 1], torch.nn.Tanh)
    rates = {k: torch.full_like(v, 0.01, requires_grad=True) for k, v in learner.named_parameters()}
    outer = torch.optim.Adam(list(learner.parameters()) + list(rates.values()), lr=1e-3)
    meta_sgd = []
    for _ in range(3):
        outer.zero_grad()
        (xs, ys), (xq, yq) = task(), task()
        weights = dict(learner.named_parameters())
        grads = func.grad(lambda w: torch.nn.functional.mse_loss(func.functional_call(learner, w, (xs,)), ys))(weights)
        adapted = {k: w - rates[k] * grads[k] for k, w in weights.items()}
        query = torch.nn.functional.mse_loss(func.functional_call(learner, adapted, (xq,)), yq)
        query.backward()
        outer.step()
        meta_sgd.append(query.item())
    return [cavia, meta_sgd, [p.detach() for p in net.parameters()], {k: v.detach() for k, v in rates.items()}]


@float64_program
def projected_gradient_attribution(torch):
    """TRAK/TracIn-style attribution: per-example gradients of a model with a buffer (vmap(grad) over
    functional_call with params and buffers, chunked), a random Gaussian projection, and kernel scores between test
    and train examples; compared with the gradients of one-example losses by autograd.grad."""
    func = torch.func
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.LayerNorm(7), torch.nn.GELU(), torch.nn.Linear(7, 3))
    model.register_buffer("temperature", torch.tensor(1.7))
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def margin(params, buffers, x, y):
        logits = func.functional_call(model, (params, buffers), (x[None],))[0] / buffers["temperature"]
        mask = torch.arange(3) == y
        correct = (logits * mask).sum()
        others = logits.masked_fill(mask, float("-inf"))
        return correct - torch.logsumexp(others, 0)

    per_example = func.vmap(func.grad(margin), in_dims=(None, None, 0, 0), chunk_size=4)
    train_x, train_y = torch.randn(10, 5), torch.randint(0, 3, (10,))
    test_x, test_y = torch.randn(3, 5), torch.randint(0, 3, (3,))
    n_params = sum(v.numel() for v in params.values())
    projection = torch.randn(n_params, 16) / 4

    def features(x, y):
        grads = per_example(params, buffers, x, y)
        return torch.cat([g.flatten(1) for g in grads.values()], 1) @ projection

    phi_train, phi_test = features(train_x, train_y), features(test_x, test_y)
    kernel = phi_train.T @ phi_train
    scores = phi_test @ torch.linalg.solve(kernel + 1e-3 * torch.eye(16), phi_train.T)
    direct = []
    for i in range(3):
        model.zero_grad()
        margin(dict(model.named_parameters()), buffers, train_x[i], train_y[i]).backward()
        direct.append(torch.cat([p.grad.flatten() for p in model.parameters()]) @ projection)
    return [scores, phi_train[:3], torch.stack(direct)]


@float64_program
def tied_language_model_grads(torch):
    """A tiny language model whose output layer shares the embedding (tied weights): per-sequence gradients by
    vmap(grad) over functional_call (tie_weights and strict as given), chunked, with a GRU-free causal mixer; the
    tied gradient equals the sum of both uses' gradients from autograd.grad."""
    func = torch.func

    class TinyLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(11, 6)
            self.mix = torch.nn.Linear(12, 6)
            self.out = torch.nn.Linear(6, 11, bias=False)
            self.out.weight = self.embed.weight

        def forward(self, tokens):
            e = self.embed(tokens)
            previous = torch.cat([torch.zeros_like(e[..., :1, :]), e[..., :-1, :]], -2)
            h = torch.tanh(self.mix(torch.cat([e, previous], -1)))
            return self.out(h)

    model = TinyLM()
    tokens = torch.randint(0, 11, (5, 7))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(params, seq):
        logits = func.functional_call(model, params, (seq[:-1],), strict=True)
        return torch.nn.functional.cross_entropy(logits, seq[1:])

    per_seq = func.vmap(func.grad(loss), in_dims=(None, 0), chunk_size=2)(params, tokens)
    untied = dict(params, **{"out.weight": params["embed.weight"].clone()})
    separate = func.vmap(
        func.grad(
            lambda p, s: torch.nn.functional.cross_entropy(
                func.functional_call(model, p, (s[:-1],), tie_weights=False), s[1:]
            )
        ),
        in_dims=(None, 0),
    )(untied, tokens)
    mean_loss = torch.stack([loss(dict(model.named_parameters()), s) for s in tokens]).mean()
    direct = torch.autograd.grad(mean_loss, [model.embed.weight, model.mix.weight])
    return [
        sorted(per_seq),
        per_seq["embed.weight"].mean(0),
        direct,
        separate["embed.weight"] + separate["out.weight"],
        per_seq["mix.bias"],
    ]


@float64_program
def parametrized_functional_call(torch):
    """Weight-normalized and orthogonal layers (nn.utils.parametrizations) under functional_call: gradients and
    Jacobians with respect to the parametrization's original tensors, per-sample by vmap."""
    func = torch.func
    model = torch.nn.Sequential(
        torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 5)),
        torch.nn.Tanh(),
        torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(5, 5)),
        torch.nn.Linear(5, 2),
    )
    names = [k for k, _ in model.named_parameters()]
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(6, 4), torch.randn(6, 2)

    def loss(params, xi, yi):
        return ((func.functional_call(model, params, (xi,)) - yi) ** 2).sum()

    per_sample = func.vmap(func.grad(loss), in_dims=(None, 0, 0))(params, x, y)
    jac = func.jacrev(lambda p: func.functional_call(model, p, (x,)))(params)
    model.zero_grad()
    sum(loss(dict(model.named_parameters()), xi, yi) for xi, yi in zip(x, y)).backward()
    return [
        names,
        {k: v.sum(0) for k, v in per_sample.items()},
        {k: p.grad for k, p in model.named_parameters()},
        {k: v.shape == (6, 2) + params[k].shape for k, v in jac.items()},
        jac["0.parametrizations.weight.original1"],
    ]


PROGRAMS = [
    implicit_hypergradients,
    dual_velocities,
    dp_sgd_vmap,
    ensemble_critics,
    anil_and_reptile,
    cavia_and_meta_sgd,
    projected_gradient_attribution,
    tied_language_model_grads,
    parametrized_functional_call,
]
# the programs whose two runs take under ~2 s from a cold compilation cache
FAST = {"dual_velocities", "tied_language_model_grads"}


@pytest.mark.parametrize(
    "program",
    [pytest.param(p, id=p.__name__, marks=[] if p.__name__ in FAST else [pytest.mark.slow]) for p in PROGRAMS],
)
def test_program_matches_torch(program):
    run_with_each_library(program, TOLERANCE)
