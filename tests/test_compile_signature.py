"""bg.compile takes torch.compile's whole signature: each argument checked as torch checks it (its messages) and
mapped onto what bg.compile does (fullgraph, backend, disable, recompile_limit, name); used as a decorator with and
without arguments; compile(module) and Module.compile as torch's. Results are compared with torch run eagerly
(torch's eager backend: the results torch.compile gives, without a C++ toolchain)."""

import copy
import inspect
import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


def test_signature_is_torchs():
    ours, theirs = inspect.signature(bg.compile), inspect.signature(torch.compile)
    assert list(ours.parameters) == list(theirs.parameters)
    for name, p in theirs.parameters.items():
        expected = True if name == "fullgraph" else p.default  # SPEC section 5: a value read raises by default
        assert (ours.parameters[name].kind, ours.parameters[name].default) == (p.kind, expected), name


def _graph_break(m, x):
    y = x.sin() * 2
    if y.sum() > 0:  # a branch on a value: a graph break in torch, a value read here
        return y.exp()
    return y - 1


@pytest.mark.slow  # compiles several programs (the first: torch.compile's import)
def test_fullgraph_false_falls_back_with_torchs_results():
    step = bg.compile(lambda x: _graph_break(bg, x), fullgraph=False)
    t_step = torch.compile(lambda x: _graph_break(torch, x), backend="eager")
    for sign in (1.0, -1.0):  # one signature: both branches, after the one trace that read a value
        a = np.linspace(-1, 1, 6) * sign + 0.3 * sign
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = step(bg.tensor(a))
        assert [str(w.message) for w in caught if "these calls run eagerly" in str(w.message)] != [] or sign < 0
        assert_same(got, t_step(torch.tensor(a)), rtol=1e-12, atol=1e-12)


def test_a_trace_stopped_by_a_value_read_leaves_nothing_for_the_next_trace():
    # a stopped trace's notes of the NumPy memory it copied once matched, by a reused id, a later trace's constant
    for _ in range(2):
        with pytest.warns(UserWarning, match="these calls run eagerly"):
            bg.compile(lambda x: _graph_break(bg, x), fullgraph=False)(bg.tensor(np.linspace(-0.7, 1.3, 6)))
    assert bg.compile(lambda x: (x * 3).sum())(bg.ones(2)).item() == 6.0


def test_fullgraph_true_raises_where_no_whole_graph_exists():
    @bg.compile(fullgraph=True, name="branching_step")
    def step(x):
        return _graph_break(bg, x)

    with pytest.raises(RuntimeError, match=r"bg.compile\(branching_step\): the function reads a tensor's value"):
        step(bg.ones(3))


@pytest.mark.slow  # compiles several programs
def test_decorator_with_and_without_arguments_and_disable():
    def f(x):
        return (x * 3).sum()

    plain = bg.compile(f)
    assert isinstance(plain, bg._compile.CompiledFunction) and plain.__name__ == "f"
    decorated = bg.compile(mode="max-autotune", dynamic=True)(f)
    assert float(plain(bg.ones(2))) == float(decorated(bg.ones(2))) == 6.0
    assert plain.compiles == decorated.compiles == 1
    assert bg.compile(f, disable=True) is f and torch.compile(f, disable=True) is f
    for backend in ("eager", "aot_eager"):
        assert bg.compile(f, backend=backend) is f  # runs as it is: nothing recorded, nothing compiled
    assert bg.compile(f, backend="openxla")(bg.ones(2)).item() == 6.0


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(mode="fastest"),
        dict(mode="default", options={"max_autotune": True}),
        dict(backend="no_such_backend"),
    ],
    ids=["mode", "mode_and_options", "backend"],
)
def test_bad_settings_raise_torchs_errors(kwargs):
    def make(m):
        return m.compile(lambda x: x + 1, **kwargs)(m.ones(2))

    got, want = raises_like_torch(make)
    assert type(got).__name__ == type(want).__name__


def test_model_none_and_arguments_of_the_wrong_kind():
    raises_like_torch(lambda m: m.compile()(None))
    for kwargs, match in [
        (dict(fullgraph="yes"), "argument 'fullgraph' must be a bool, but got str"),
        (dict(dynamic="maybe"), "argument 'dynamic' must be a bool or None, but got str"),
        (dict(options=["max_autotune"]), "argument 'options' must be a dict or None, but got list"),
        (dict(recompile_limit=2.5), "argument 'recompile_limit' must be an int or None, but got float"),
        (dict(backend=3), "argument 'backend' must be a str or a callable, but got int"),
    ]:
        with pytest.raises(TypeError, match=match):
            bg.compile(lambda x: x, **kwargs)
    with pytest.raises(NotImplementedError, match="backend='tvm' is one of torch's own compilers"):
        bg.compile(lambda x: x, backend="tvm")
    with pytest.raises(NotImplementedError, match="callable backend"):
        bg.compile(lambda x: x, backend=lambda gm, example_inputs: gm)
    with pytest.raises(NotImplementedError, match="shapes_spec"):
        bg.compile(lambda x: x, shapes_spec=object())


@pytest.mark.slow  # compiles several programs
def test_recompile_limit_runs_further_signatures_eagerly_or_raises():
    step = bg.compile(lambda x: x * 2, recompile_limit=2, fullgraph=False)
    for n in (1, 2):
        assert step(bg.ones(n)).sum().item() == 2 * n
    with pytest.warns(UserWarning, match="past recompile_limit=2: these calls run eagerly"):
        assert step(bg.ones(3)).sum().item() == 6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert step(bg.ones(3)).sum().item() == 6 and step(bg.ones(1)).sum().item() == 2
    assert step.compiles == 2
    strict = bg.compile(lambda x: x * 2, recompile_limit=1, fullgraph=True)
    strict(bg.ones(1))
    with pytest.raises(RuntimeError, match="FailOnRecompileLimitHit"):
        strict(bg.ones(2))


def _net(m):
    m.manual_seed(0)
    return m.nn.Sequential(m.nn.Linear(4, 8), m.nn.Tanh(), m.nn.Linear(8, 2))


def _same_weights(net, t_net):
    with torch.no_grad():
        for p, t_p in zip(net.parameters(), t_net.parameters()):
            t_p.copy_(torch.from_numpy(np.array(p.detach().numpy())))


@pytest.mark.slow  # compiles several programs
def test_module_compile_in_place_trains_like_torch():
    net, t_net = _net(bg), _net(torch)
    _same_weights(net, t_net)
    keys = list(net.state_dict())
    net.compile()
    t_net.compile(backend="eager")
    assert list(net.state_dict()) == keys == list(t_net.state_dict())
    x = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    opt, t_opt = bg.optim.SGD(net.parameters(), lr=0.1), torch.optim.SGD(t_net.parameters(), lr=0.1)
    with pytest.warns(UserWarning, match="results require grad"):  # said once: that signature then runs eagerly
        net(bg.tensor(x))
    for _ in range(3):
        loss = net(bg.tensor(x)).square().mean()
        t_loss = t_net(torch.tensor(x)).square().mean()
        opt.zero_grad()
        t_opt.zero_grad()
        loss.backward()
        t_loss.backward()
        opt.step()
        t_opt.step()
        assert_same(loss, t_loss, rtol=1e-5, atol=1e-6)
    with bg.no_grad(), torch.no_grad():  # no graph needed: the compiled program runs
        assert_same(net(bg.tensor(x)), t_net(torch.tensor(x)), rtol=1e-5, atol=1e-6)
    assert net._compiled_call_impl.compiles == 1
    copied = copy.deepcopy(net)  # as torch's: what compile() made is left out of copies and pickles
    assert "_compiled_call_impl" not in copied.__dict__ and list(copied.state_dict()) == keys


def test_compile_of_a_module_is_torchs_optimized_module():
    net = _net(bg)
    compiled, t_compiled = bg.compile(net), torch.compile(_net(torch), backend="eager")
    assert bg.compile(bg.nn.Linear(3, 2)).in_features == 3
    assert type(compiled).__name__ == type(t_compiled).__name__ == "OptimizedModule"
    assert list(compiled.state_dict()) == list(t_compiled.state_dict())  # "_orig_mod.0.weight", ...
    assert compiled._orig_mod is net and compiled.training  # other attributes read from the original
    with bg.no_grad():
        assert_same(compiled(bg.ones(3, 4)), net(bg.ones(3, 4)), rtol=1e-6, atol=1e-7)
    assert bg.compile(net, disable=True) is net
