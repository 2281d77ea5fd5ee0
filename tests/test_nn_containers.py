"""nn.Sequential, ModuleList, ModuleDict, ParameterList and ParameterDict against torch.nn's: indexing, slicing,
mutation, iteration, parameter names and state_dict keys, repr (runs of equal modules collapsed as torch's), and
Module's registration checks."""

from collections import OrderedDict

import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch


def _same(got, want):
    """The two containers (or modules) print alike and name their parameters and state alike."""
    assert repr(got) == repr(want)
    assert [n for n, _ in got.named_parameters()] == [n for n, _ in want.named_parameters()]
    assert list(got.state_dict()) == list(want.state_dict())
    assert [n for n, _ in got.named_modules()] == [n for n, _ in want.named_modules()]


def _model(m):
    nn = m.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU(), nn.ReLU()])
            self.blocks.append(nn.Sequential(nn.Linear(2, 3), nn.Tanh()))
            self.blocks.extend([nn.Sequential(nn.Linear(2, 3), nn.Tanh()), nn.Linear(3, 1)])
            self.heads = nn.ModuleDict({"score": nn.Linear(1, 1), "norm": nn.BatchNorm1d(4)})
            self.scales = nn.ParameterList(
                [nn.Parameter(m.ones(2, 3)), m.zeros(4), "tag", m.zeros((), dtype=m.float64)]
            )
            self.table = nn.ParameterDict({"b": m.zeros(2), "a": nn.Parameter(m.ones(3, 1)), "c": 5})
            self.act = nn.Softplus(beta=2)

    return Net()


def test_a_model_of_containers_names_and_prints_as_torchs():
    _same(_model(bg), _model(torch))


@pytest.mark.parametrize("text", ["a=1\nb=2", "a=1\n\nb=2", "one line"])
def test_extra_repr_lines_print_as_torchs(text):
    def make(m):
        class Extra(m.nn.Module):
            def extra_repr(self):
                return text

        return Extra()

    assert repr(make(bg)) == repr(make(torch))
    with_child = make(bg), make(torch)
    for module, m in zip(with_child, (bg, torch)):
        module.child = m.nn.Linear(1, 1)
    assert repr(with_child[0]) == repr(with_child[1])


def test_module_list_indexing_slicing_and_mutation_match_torch():
    results = []
    for m in (bg, torch):
        layers = [m.nn.Linear(i + 1, i + 2) for i in range(5)]
        ml = m.nn.ModuleList(layers[:3])
        out = [ml[0] is layers[0], ml[-1] is layers[2], type(ml[1:]).__name__, len(ml[::2])]
        ml.insert(1, layers[3])
        ml += [layers[4]]
        out.append([layers.index(x) for x in ml])
        ml[0] = m.nn.Tanh()
        del ml[1]
        out.append([type(x).__name__ for x in ml])
        out.append(list(ml._modules))
        popped = ml.pop(-1)
        out += [popped is layers[4], len(ml), repr(ml + m.nn.ModuleList([m.nn.ReLU()]))]
        del ml[0:2]
        out += [list(ml._modules), [n for n, _ in ml.named_parameters()], repr(m.nn.ModuleList())]
        results.append(out)
    assert results[0] == results[1]


@pytest.mark.parametrize(
    "case",
    [
        lambda m: m.nn.ModuleList([m.nn.ReLU()])[1],
        lambda m: m.nn.ModuleList([m.nn.ReLU()])[-2],
        lambda m: m.nn.ModuleList([m.nn.ReLU()])["0"],
        lambda m: m.nn.ModuleList(5),
        lambda m: m.nn.ModuleList().extend(3),
        lambda m: m.nn.ModuleList([3]),
        lambda m: m.nn.Sequential(m.nn.ReLU())[3],
        lambda m: m.nn.Sequential(m.nn.ReLU()) + [m.nn.ReLU()],
        lambda m: m.nn.Sequential(m.nn.ReLU()).insert(5, m.nn.ReLU()),
        lambda m: m.nn.ModuleDict(5),
        lambda m: m.nn.ModuleDict([("a", m.nn.ReLU(), 1)]),
        lambda m: m.nn.ModuleDict([5]),
        lambda m: m.nn.ModuleDict({"a.b": m.nn.ReLU()}),
        lambda m: m.nn.ModuleDict({"": m.nn.ReLU()}),
        lambda m: m.nn.ModuleDict({"forward": m.nn.ReLU()}),
        lambda m: m.nn.ModuleDict({1: m.nn.ReLU()}),
        lambda m: m.nn.ModuleDict()["missing"],
        lambda m: m.nn.ParameterList([m.zeros(1)])[2],
        lambda m: m.nn.ParameterList(m.zeros(2)),
        lambda m: m.nn.ParameterList()(m.zeros(1)),
        lambda m: m.nn.ParameterDict({1: m.zeros(1)}),
        lambda m: m.nn.ParameterDict({"a.b": m.zeros(1)}),
        lambda m: m.nn.ParameterDict(3),
        lambda m: m.nn.ParameterDict([("a",)]),
        lambda m: m.nn.ParameterDict()(m.zeros(1)),
        lambda m: m.nn.ParameterDict()["missing"],
    ],
)
def test_container_errors_match_torch(case):
    raises_like_torch(case)


def test_sequential_mutation_matches_torch():
    results = []
    for m in (bg, torch):
        seq = m.nn.Sequential(
            OrderedDict([("first", m.nn.Linear(2, 3)), ("act", m.nn.Tanh()), ("last", m.nn.Linear(3, 1))])
        )
        out = [list(seq._modules), type(seq[1:]).__name__, list(seq[1:]._modules)]
        seq[1] = m.nn.ReLU()
        out.append(repr(seq))
        del seq[0]  # the keys become positions again
        out.append(list(seq._modules))
        seq.insert(-1, m.nn.Sigmoid())
        seq.insert(3, m.nn.GELU())
        out.append(repr(seq))
        seq.append(m.nn.Tanh()).extend(m.nn.Sequential(m.nn.ReLU()))
        out += [list(seq._modules), repr(seq), repr(seq + m.nn.Sequential(m.nn.GELU()))]
        seq += m.nn.Sequential(m.nn.Tanh())
        out += [type(seq.pop(0)).__name__, repr(seq)]
        results.append(out)
    assert results[0] == results[1]


def test_sequential_runs_its_modules_in_order_like_torch():
    torch.manual_seed(0)
    t_seq = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    seq = bg.nn.Sequential(bg.nn.Linear(3, 4), bg.nn.Tanh(), bg.nn.Linear(4, 2)).double()
    seq.load_state_dict({k: bg.tensor(v.detach().numpy()) for k, v in t_seq.state_dict().items()})
    x = bg.tensor([[0.1, -0.2, 0.3], [1.0, 2.0, -1.0]], dtype=bg.float64)
    assert seq(x).detach().numpy() == pytest.approx(t_seq(torch.tensor(x.numpy())).detach().numpy(), rel=1e-12)


def test_module_dict_matches_torch():
    results = []
    for m in (bg, torch):
        md = m.nn.ModuleDict([("b", m.nn.ReLU()), ("a", m.nn.Linear(1, 2))])
        md.update({"c": m.nn.Tanh()})
        md.update(m.nn.ModuleDict({"d": m.nn.GELU()}))
        md["e"] = m.nn.Linear(2, 2)
        out = [list(md), list(md.keys()), [type(v).__name__ for v in md.values()], "a" in md, len(md)]
        out.append([n for n, _ in md.named_parameters()])
        out.append(type(md.pop("a")).__name__)
        del md["b"]
        out += [list(md.items())[0][0], repr(md)]
        md.clear()
        out += [len(md), repr(md)]
        results.append(out)
    assert results[0] == results[1]


def test_parameter_list_matches_torch():
    results = []
    for m in (bg, torch):
        plain = m.ones(2)
        pl = m.nn.ParameterList([plain, m.nn.Parameter(m.zeros(3), requires_grad=False)])
        pl.append("label").extend([m.zeros(1, 2, dtype=m.float64)])
        pl += [m.ones(())]
        out = [
            len(pl),
            type(pl[0]).__name__,
            pl[0] is plain,
            pl[0].requires_grad,
            pl[1].requires_grad,
            pl[2],
            [type(v).__name__ for v in pl],
            [n for n, _ in pl.named_parameters()],
            list(pl.state_dict()),
            repr(pl),
            repr(pl[1:4]),
            repr(m.nn.ParameterList()),
        ]
        pl[2] = m.zeros(5)
        out += [type(pl[2]).__name__, [n for n, _ in pl.named_parameters()]]
        results.append(out)
    assert results[0] == results[1]


def test_parameter_dict_matches_torch():
    results = []
    for m in (bg, torch):
        pd = m.nn.ParameterDict({"z": m.zeros(2), "a": m.nn.Parameter(m.ones(1, 3)), "m": "text"})  # sorted keys
        pd.update([("y", m.zeros(1)), ("b", 1.5)])  # pairs keep their order
        pd.update(OrderedDict([("x", m.ones(2)), ("c", m.ones(2))]))
        pd["n"] = m.zeros(4, dtype=m.float64)
        out = [
            list(pd),
            [n for n, _ in pd.named_parameters()],
            list(pd.state_dict()),
            repr(pd),
            len(pd),
            "a" in pd,
            list(reversed(pd)),
            pd.get("missing", 7),
            type(pd.setdefault("s", m.ones(1))).__name__,
        ]
        out += [
            pd.popitem()[0],
            type(pd.pop("a")).__name__,
            list(pd.copy()),
            list(pd | m.nn.ParameterDict({"q": 1})),
            list(pd.fromkeys(["k1", "k2"])),
        ]
        del pd["z"]
        out.append(list(pd.keys()))
        pd.clear()
        out += [len(pd), repr(pd)]
        results.append(out)
    assert results[0] == results[1]


def test_containers_move_with_the_module_and_feed_the_optimizer():
    pl = bg.nn.ParameterList([bg.ones(2), bg.zeros(3)])
    pd = bg.nn.ParameterDict({"w": bg.ones(2)})
    holder = bg.nn.ModuleList([bg.nn.Linear(2, 2)])
    holder.append(bg.nn.Module())
    holder[1].pl, holder[1].pd = pl, pd
    holder.double()
    assert {p.dtype for p in holder.parameters()} == {bg.float64}
    assert pl[0].dtype is bg.float64 and pd["w"].dtype is bg.float64
    opt = bg.optim.SGD(holder.parameters(), lr=0.5)
    (pl[0].sum() + pd["w"].sum() * 2).backward()
    opt.step()
    assert pl[0].tolist() == [0.5, 0.5] and pd["w"].tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    "case",
    [
        lambda m: m.nn.Linear(1, 1).register_parameter("a.b", None),
        lambda m: m.nn.Linear(1, 1).register_parameter("", None),
        lambda m: m.nn.Linear(1, 1).register_parameter(3, None),
        lambda m: m.nn.Linear(1, 1).register_parameter("forward", None),
        lambda m: m.nn.Linear(1, 1).register_buffer("a.b", m.zeros(1)),
        lambda m: m.nn.Linear(1, 1).register_buffer("weight", m.zeros(1)),
        lambda m: m.nn.Linear(1, 1).register_buffer("", m.zeros(1)),
        lambda m: m.nn.Linear(1, 1).add_module("x.y", m.nn.ReLU()),
        lambda m: m.nn.Linear(1, 1).add_module("weight", m.nn.ReLU()),
        lambda m: m.nn.Linear(1, 1).add_module("z", 3),
    ],
)
def test_registration_errors_match_torch(case):
    got, want = raises_like_torch(case)
    assert str(got) == str(want)


def test_reassigning_a_parameter_keeps_its_place_and_an_attribute_can_become_one():
    for m in (bg, torch):
        lin = m.nn.Linear(2, 2)
        lin.weight = m.nn.Parameter(m.zeros(2, 2))
        lin.extra = 3
        lin.extra = m.nn.Parameter(m.ones(1))
        lin.sub = m.nn.Tanh()
        lin.sub = m.nn.Parameter(m.ones(1))
        assert [n for n, _ in lin.named_parameters()] == ["weight", "bias", "extra", "sub"]
        assert list(lin._modules) == []


def _shared_layers(m):
    """A model whose two children share one Linear, and a parameter registered under two names."""
    shared = m.nn.Linear(2, 2)
    model = m.nn.Sequential(shared, m.nn.Tanh(), shared)
    model.scale = m.nn.Parameter(m.ones(1))
    model.tail = m.nn.Linear(2, 1)
    model.tail.gain = model.scale
    model.register_buffer("steps", m.zeros(1))
    model.tail.register_buffer("steps_again", model.steps)
    return model


def test_traversals_with_and_without_duplicates_as_torchs():
    seen = []
    for m in (bg, torch):
        model = _shared_layers(m)
        seen.append(
            [
                [name for name, _ in model.named_parameters(remove_duplicate=flag)]
                + [name for name, _ in model.named_buffers(remove_duplicate=flag)]
                + [type(sub).__name__ for sub in model.modules(remove_duplicate=flag)]
                for flag in (True, False)
            ]
        )
    assert seen[0] == seen[1]
    assert len(seen[0][1]) > len(seen[0][0])


def test_set_submodule_replaces_as_torchs():
    def replace(m, target, strict, module=None):
        model = m.nn.Sequential(m.nn.Linear(2, 2), m.nn.Sequential(m.nn.ReLU()))
        model.scale = m.nn.Parameter(m.ones(1))
        model.set_submodule(target, m.nn.Tanh() if module is None else module, strict=strict)
        return [type(sub).__name__ for sub in model.modules()]

    for target, strict in [("1.0", False), ("1.0", True), ("1.extra", False), ("0", True)]:
        assert replace(bg, target, strict) == replace(torch, target, strict)
    for target, strict, module in [("", False, None), ("1.extra", True, None), ("scale", False, None)]:
        raises_like_torch(lambda m: replace(m, target, strict, module))
    raises_like_torch(lambda m: replace(m, "0", False, "not a module"))
    raises_like_torch(lambda m: replace(m, "missing.path", False))


def test_train_and_eval_reach_a_childs_own_train_override():
    """torch's Module.train sets its own flag and calls each child's train(mode): a child that overrides train (LoRA
    layers merge their update into the weight on eval) runs its override."""

    def run(m):
        class Merging(m.nn.Linear):
            merged = False

            def train(self, mode=True):
                m.nn.Linear.train(self, mode)
                self.merged = not mode
                return self

        model = m.nn.Sequential(m.nn.Sequential(Merging(2, 2)), m.nn.ReLU())
        model.eval()
        after_eval = (model[0][0].merged, model[0][0].training, model.training)
        model.train()
        return after_eval, (model[0][0].merged, model[0][0].training, model[1].training)

    assert run(bg) == run(torch) == ((True, False, False), (False, True, True))


def test_a_child_under_two_names_is_one_child_as_torchs():
    """A model whose last layer is also kept as `.fc` drops it with list(children())[:-1] (the captioning
    tutorials' encoder built from a classifier): children name it once, under its first name."""

    def run(m):
        model = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.ReLU(), m.nn.Linear(4, 2))
        model.fc = model[2]
        applied = []
        model.apply(lambda sub: applied.append(type(sub).__name__))
        trunk = m.nn.Sequential(*list(model.children())[:-1])
        return [name for name, _ in model.named_children()], applied, [type(sub).__name__ for sub in trunk]

    assert run(bg) == run(torch)
