"""torch.utils._pytree's basics: nested containers (tuple, list, dict, OrderedDict, defaultdict, namedtuple, deque,
and the classes given to register_pytree_node) flattened into their leaves and a TreeSpec that rebuilds them.
As torch's: None is a leaf, dicts keep their insertion order, and TreeSpec prints as torch's does."""

import collections
import dataclasses

from vmap._pytree import deregister_node, register_node

__all__ = [
    "LeafSpec",
    "TreeSpec",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "tree_all",
    "tree_any",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_is_leaf",
    "tree_iter",
    "tree_leaves",
    "tree_map",
    "tree_map_",
    "tree_map_only",
    "tree_structure",
    "tree_unflatten",
]


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class MappingKey:
    key: object

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    name: str

    def __str__(self):
        return f".{self.name}"


def keystr(kp):
    """A key path as the indexing code that follows it (`['a'][1]`)."""
    return "".join(str(k) for k in kp)


# node type -> (flatten: node -> (children, context), unflatten: (children, context) -> node, keys of children)
_NODES = {}


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None):  # fmt: skip
    """Make instances of `cls` nodes: flatten_fn(node) -> (children, context), unflatten_fn(children, context);
    flatten_with_keys_fn(node) -> ([(key, child), ...], context) names the children in key paths."""
    if cls in _NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")

    def keys(node):
        if flatten_with_keys_fn is None:
            return [SequenceKey(i) for i in range(len(flatten_fn(node)[0]))]
        return [k for k, _ in flatten_with_keys_fn(node)[0]]

    _NODES[cls] = (flatten_fn, unflatten_fn, keys)
    register_node(cls, flatten_fn, unflatten_fn)  # the transforms' (torch.func's) flattening sees it too


def _deregister_pytree_node(cls):
    """Undo register_pytree_node(cls, ...) (torch's private helper, which its tests use to clean up)."""
    del _NODES[cls]
    deregister_node(cls)


def _check_field_names(cls, field_names, drop_field_names):
    expected = {f.name for f in dataclasses.fields(cls) if f.init} - set(drop_field_names)
    if expected == set(field_names):
        return
    message = "field_names does not include all dataclass fields.\n"
    if missing := expected - set(field_names):
        message += (
            f"Missing fields in `field_names`: {missing}. If you want to include these fields in the pytree, please "
            "add them to `field_names`, otherwise please add them to `drop_field_names`.\n"
        )
    if unexpected := set(field_names) - expected:
        message += (
            f"Unexpected fields in `field_names`: {unexpected}. Please remove these fields, or add them to "
            "`drop_field_names`.\n"
        )
    raise ValueError(message)


def register_dataclass(cls, *, field_names=None, drop_field_names=None, serialized_type_name=None):
    """Make instances of `cls`, a dataclass (or a class built from the keyword arguments `field_names`), nodes whose
    children are its fields' values; a field holding None is kept in the context, not a leaf. As torch's: a
    dataclass's fields are all its init fields unless `field_names` lists them, which must then be those not in
    `drop_field_names`."""
    if not dataclasses.is_dataclass(cls):
        if field_names is None:
            raise ValueError(
                f"field_names must be specified with a list of all fields used to initialize {cls}, as it is not a "
                "dataclass."
            )
    elif field_names is None:
        field_names = [f.name for f in dataclasses.fields(cls) if f.init]
    else:
        _check_field_names(cls, field_names, drop_field_names or ())
    names = list(field_names)

    def flatten(node):
        values = {name: getattr(node, name) for name in names}
        kept = [name for name in names if values[name] is not None]
        return [values[name] for name in kept], [kept, [name for name in names if values[name] is None]]

    def unflatten(children, context):
        kept, empty = context
        return cls(**dict(zip(kept, children)), **dict.fromkeys(empty))

    def flatten_with_keys(node):
        children, context = flatten(node)
        return [(GetAttrKey(name), child) for name, child in zip(context[0], children)], context

    register_pytree_node(
        cls, flatten, unflatten, serialized_type_name=serialized_type_name, flatten_with_keys_fn=flatten_with_keys
    )


def _is_namedtuple_instance(node):
    return isinstance(node, tuple) and hasattr(type(node), "_fields") and hasattr(type(node), "_make")


def _sequence_keys(node):
    return [SequenceKey(i) for i in range(len(node))]


def _mapping_keys(node):
    return [MappingKey(k) for k in node.keys()]


_NODES.update(
    {
        tuple: (lambda t: (list(t), None), lambda c, _: tuple(c), _sequence_keys),
        list: (lambda t: (list(t), None), lambda c, _: list(c), _sequence_keys),
        dict: (lambda d: (list(d.values()), list(d.keys())), lambda c, k: dict(zip(k, c)), _mapping_keys),
        collections.OrderedDict: (
            lambda d: (list(d.values()), list(d.keys())),
            lambda c, k: collections.OrderedDict(zip(k, c)),
            _mapping_keys,
        ),
        collections.defaultdict: (
            lambda d: (list(d.values()), [d.default_factory, list(d.keys())]),
            lambda c, ctx: collections.defaultdict(ctx[0], zip(ctx[1], c)),
            _mapping_keys,
        ),
        collections.deque: (lambda d: (list(d), d.maxlen), lambda c, m: collections.deque(c, maxlen=m), _sequence_keys),
        # torch's node type for every namedtuple class; the class is the context
        collections.namedtuple: (
            lambda t: (list(t), type(t)),
            lambda c, cls: cls(*c),
            lambda t: [GetAttrKey(f) for f in type(t)._fields],
        ),
    }
)


def _node_type(tree):
    if _is_namedtuple_instance(tree):
        return collections.namedtuple
    return type(tree)


def tree_is_leaf(tree, is_leaf=None):
    """Whether `tree` is a leaf: not an instance of a node type (or `is_leaf(tree)` says so)."""
    if is_leaf is not None and is_leaf(tree):
        return True
    return _node_type(tree) not in _NODES


class TreeSpec:
    """The structure of a pytree: its node `type`, `context` (keys, the namedtuple class, ...) and children's specs;
    a leaf's type is None."""

    def __init__(self, type, context, children_specs):  # noqa: A002  (torch's name)
        self.type, self._context, self._children = type, context, list(children_specs)
        self.num_leaves = 1 if type is None else sum(c.num_leaves for c in self._children)
        self.num_nodes = 1 + sum(c.num_nodes for c in self._children)
        self.num_children = len(self._children)

    @property
    def context(self):
        return self._context

    @property
    def children_specs(self):
        return self._children

    def is_leaf(self):
        return self.type is None

    def children(self):
        return list(self._children)

    def child(self, index):
        return self._children[index]

    def __repr__(self, indent=0):
        if self.is_leaf():
            return "*"
        text = f"TreeSpec({self.type.__name__}, {self._context}, ["
        if self._children:
            indent += 2
            text += self._children[0].__repr__(indent) + ("," if len(self._children) > 1 else "")
            text += ",".join("\n" + " " * indent + c.__repr__(indent) for c in self._children[1:])
        return text + "])"

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (
            str(self.type) == str(other.type) and self._context == other._context and self._children == other._children
        )

    def __hash__(self):
        return hash((str(self.type), repr(self._context), tuple(self._children)))

    def unflatten(self, leaves):
        """The pytree of this structure holding `leaves` in order."""
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(
                f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers to a pytree that "
                f"holds {self.num_leaves} items ({self!r})."
            )
        return self._build(iter(leaves))

    def _build(self, leaves):
        if self.is_leaf():
            return next(leaves)
        children = [c._build(leaves) for c in self._children]
        return _NODES[self.type][1](children, self._context)


def LeafSpec():  # noqa: N802  (torch's name for the leaf's spec)
    """The spec of a single leaf."""
    return TreeSpec(None, None, [])


def _flatten(tree, is_leaf, leaves, path, paths):
    if tree_is_leaf(tree, is_leaf):
        leaves.append(tree)
        if paths is not None:
            paths.append(tuple(path))
        return LeafSpec()
    kind = _node_type(tree)
    flatten, _, keys = _NODES[kind]
    children, context = flatten(tree)
    names = keys(tree) if paths is not None else [None] * len(children)
    specs = [_flatten(c, is_leaf, leaves, path + [k], paths) for c, k in zip(children, names)]
    return TreeSpec(kind, context, specs)


def tree_flatten(tree, is_leaf=None):
    """(the leaves of `tree` in order, its TreeSpec)."""
    leaves = []
    spec = _flatten(tree, is_leaf, leaves, [], None)
    return leaves, spec


def tree_flatten_with_path(tree, is_leaf=None):
    """([(key path, leaf), ...], its TreeSpec)."""
    leaves, paths = [], []
    spec = _flatten(tree, is_leaf, leaves, [], paths)
    return list(zip(paths, leaves)), spec


def tree_unflatten(leaves, treespec):
    """The pytree of structure `treespec` holding `leaves`."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"Expected `treespec` to be an instance of PyTreeSpec but got item of type {type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_leaves(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[0]


def tree_iter(tree, is_leaf=None):
    yield from tree_leaves(tree, is_leaf)


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def _flatten_up_to(spec, tree):
    """The subtrees of `tree` at the leaves of `spec` (tree must have spec's structure above them)."""
    if spec.is_leaf():
        return [tree]
    kind = _node_type(tree)
    children, context = _NODES[kind][0](tree) if kind in _NODES else (None, None)
    if kind is not spec.type and str(kind) != str(spec.type):
        raise ValueError(f"Node type mismatch; expected {spec.type!r}, but got {kind!r}.")
    if len(children) != spec.num_children:
        raise ValueError(f"Node arity mismatch; expected {spec.num_children}, but got {len(children)}.")
    if context != spec.context:
        raise ValueError(f"Node context mismatch for custom node type {spec.type!r}.")
    return [x for child_spec, child in zip(spec.children(), children) for x in _flatten_up_to(child_spec, child)]


def tree_map(func, tree, *rests, is_leaf=None):
    """`tree` with each leaf x replaced by func(x, *(the matching leaves of rests))."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(spec, r) for r in rests]
    return spec.unflatten(func(*xs) for xs in zip(leaves, *others))


def tree_map_(func, tree, *rests, is_leaf=None):
    """func called on each leaf (and the matching leaves of rests) for its effect; returns `tree`."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(spec, r) for r in rests]
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def tree_map_only(type_or_types, func, tree, is_leaf=None):
    """tree_map applying `func` only to the leaves of `type_or_types` (the others stay)."""
    return tree_map(lambda x: func(x) if isinstance(x, type_or_types) else x, tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    return all(map(pred, tree_leaves(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    return any(map(pred, tree_leaves(tree, is_leaf)))
