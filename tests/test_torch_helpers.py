"""Small torch modules library code imports, against torch 2.13: torch.nn.modules.utils (the argument normalizers),
torch.version (a CPU build's values) and torch.utils._pytree (flatten, unflatten, map, key paths, TreeSpec)."""

import collections
import operator
from collections import OrderedDict, defaultdict, deque, namedtuple

import pytest
import torch
import torch.nn.modules.utils
import torch.utils._pytree
import torch.version

import batched_grad as bg
from batched_grad.nn.modules.utils import _pair as imported_pair
from batched_grad.utils._pytree import tree_map as imported_tree_map

Point = namedtuple("Point", "x y")


@pytest.mark.parametrize("name", ["_single", "_pair", "_triple", "_quadruple"])
@pytest.mark.parametrize("value", [3, (1, 2), [4, 5, 6], 2.5])
def test_ntuple_helpers_match_torch(name, value):
    ours = getattr(bg.nn.modules.utils, name)
    theirs = getattr(torch.nn.modules.utils, name)
    assert ours(value) == theirs(value) and ours.__name__ == theirs.__name__


def test_padding_and_default_helpers_match_torch():
    for m in (bg, torch):
        utils = m.nn.modules.utils
        assert utils._reverse_repeat_tuple((1, 2, 3), 2) == (3, 3, 2, 2, 1, 1)
        assert utils._ntuple(3, "three")(7) == (7, 7, 7)
        assert utils._list_with_default([None, 4], [1, 2, 8, 9]) == [8, 4]
        assert utils._list_with_default(5, [1, 2]) == 5
        with pytest.raises(ValueError, match="Input dimension should be at least 3"):
            utils._list_with_default([None, 4], [1, 2])


def test_consume_prefix_matches_torch():
    results = []
    for m in (bg, torch):
        state = OrderedDict([("module.a", 1), ("module.b.c", 2), ("other", 3)])
        state._metadata = {"": {}, "module": {"v": 1}, "module.b": {"v": 2}}
        m.nn.modules.utils.consume_prefix_in_state_dict_if_present(state, "module.")
        results.append((list(state.items()), state._metadata))
    assert results[0] == results[1]


def test_version_is_a_cpu_builds():
    for name in ("cuda", "hip", "rocm", "xpu", "debug"):
        assert getattr(bg.version, name) == getattr(torch.version, name), name
    assert isinstance(bg.version.git_version, str) and bg.version.__version__ == bg.__version__


def test_version_compares_as_torch_213s_does():
    """Code that branches on the torch version takes torch 2.13's branch; the comparisons follow torch's
    TorchVersion (PEP 440 order against strings and tuples, string order for a string that is not a version)."""
    from torch.torch_version import TorchVersion

    assert bg.__version__.split("+")[0] == torch.__version__.split("+")[0] == "2.13.0"
    others = ["2.0", "2.13", "2.13.0", "2.13.0+cpu", "2.13.1", "2.14.0a0", "2.13.0rc1", "2.13.0.post1"]
    others += ["2.13.0.dev20250101", "1.13.0+cu117", "abc", (2, 13), (2, 12, 9), (1, 8), (2, 13, 0), 3]
    compare = (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne)
    for mine in ("2.13.0+cpu", "2.0.0a0", "1.13.1", "2.13.0", str(bg.__version__)):
        for other in others:
            for op in compare:
                want = _outcome(op, TorchVersion(mine), other)
                assert _outcome(op, bg.torch_version.TorchVersion(mine), other) == want, (mine, op, other)


def _outcome(op, version, other):
    try:
        return op(version, other)
    except TypeError as error:
        return type(error)


TREES = {
    "nested": {"a": [1, (2, None)], "b": OrderedDict(x=3)},
    "namedtuple": Point(1, [2, {"k": 3}]),
    "defaultdict": defaultdict(list, {"p": 1, "q": (2, 3)}),
    "deque": deque([1, [2]], maxlen=4),
    "leaf": 5,
    "empty": [(), {}],
}


@pytest.mark.parametrize("tree", TREES.values(), ids=TREES.keys())
def test_pytree_flatten_unflatten_and_map_match_torch(tree):
    ours_leaves, ours_spec = bg.utils._pytree.tree_flatten(tree)
    their_leaves, their_spec = torch.utils._pytree.tree_flatten(tree)
    assert ours_leaves == their_leaves
    assert repr(ours_spec) == repr(their_spec)
    assert (ours_spec.num_leaves, ours_spec.num_nodes) == (their_spec.num_leaves, their_spec.num_nodes)
    replaced = list(range(10, 10 + len(ours_leaves)))
    assert bg.utils._pytree.tree_unflatten(replaced, ours_spec) == torch.utils._pytree.tree_unflatten(
        replaced, their_spec
    )
    double = lambda x: None if x is None else 2 * x  # noqa: E731
    assert bg.utils._pytree.tree_map(double, tree) == torch.utils._pytree.tree_map(double, tree)
    ours_paths = [(bg.utils._pytree.keystr(p), v) for p, v in bg.utils._pytree.tree_flatten_with_path(tree)[0]]
    their_paths = [(torch.utils._pytree.keystr(p), v) for p, v in torch.utils._pytree.tree_flatten_with_path(tree)[0]]
    assert ours_paths == their_paths


def test_pytree_helpers_match_torch():
    tree = {"w": bg.ones(2), "n": 3, "nested": [bg.zeros(1), "s"]}
    for pytree, m in ((bg.utils._pytree, bg), (torch.utils._pytree, torch)):
        t = pytree.tree_map(lambda x: m.ones(2) if isinstance(x, bg.Tensor) else x, tree)
        doubled = pytree.tree_map_only(m.Tensor, lambda x: x * 2, t)
        assert [float(x.sum()) if isinstance(x, m.Tensor) else x for x in pytree.tree_leaves(doubled)] == [
            4.0,
            3,
            4.0,
            "s",
        ]
        assert pytree.tree_map(lambda a, b: a + b, [1, (2, 3)], [10, (20, 30)]) == [11, (22, 33)]
        assert pytree.tree_all(lambda x: x > 0, [1, [2]]) and not pytree.tree_any(lambda x: x > 5, (1, 2))
        assert pytree.tree_structure([1, 2]) == pytree.tree_structure([3, 4])
        assert pytree.tree_structure([1, 2]) != pytree.tree_structure((3, 4))
        seen = []
        assert pytree.tree_map_(seen.append, [1, [2]]) == [1, [2]] and seen == [1, 2]
        assert list(pytree.tree_iter({"a": 1, "b": [2]})) == [1, 2]
        assert pytree.tree_leaves([1, [2]], is_leaf=lambda x: isinstance(x, list) and len(x) == 1) == [1, [2]]


@pytest.mark.parametrize(
    "call",
    [
        lambda p: p.tree_unflatten([1], p.tree_structure([1, 2])),
        lambda p: p.tree_map(lambda a, b: a + b, [1, 2], [3]),
        lambda p: p.tree_unflatten([1], [1]),
    ],
    ids=["leaf_count", "arity", "not_a_spec"],
)
def test_pytree_errors_match_torch(call):
    with pytest.raises(Exception) as theirs:
        call(torch.utils._pytree)
    with pytest.raises(type(theirs.value)) as ours:
        call(bg.utils._pytree)
    assert str(ours.value) == str(theirs.value)


def test_custom_node_registration():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    bg.utils._pytree.register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda c, _: Pair(*c))
    out = bg.utils._pytree.tree_map(lambda x: x + 1, [Pair(1, 2)])
    assert (out[0].a, out[0].b) == (2, 3)
    with pytest.raises(ValueError, match="already registered"):
        bg.utils._pytree.register_pytree_node(Pair, lambda p: ([], None), lambda c, _: Pair(0, 0))


def test_import_forms():
    assert imported_pair is bg.nn.modules.utils._pair and imported_tree_map is bg.utils._pytree.tree_map
    assert isinstance(bg.utils._pytree.tree_structure(collections.OrderedDict()), bg.utils._pytree.TreeSpec)
