"""The nested containers of torch's pytrees: tuple, list, dict, OrderedDict, defaultdict, namedtuple, deque;
anything else (a Tensor, a number, None) is a leaf. Unlike jax.tree_util, dicts keep their insertion order, as
torch's do, and a structure prints as torch's TreeSpec (vmap's error messages show it)."""

import collections


def _is_namedtuple(kind):
    return issubclass(kind, tuple) and isinstance(getattr(kind, "_fields", None), tuple) and hasattr(kind, "_make")


# per container type: (name in a TreeSpec, context, children, rebuild(context, children))
_NODES = {
    tuple: ("tuple", lambda x: None, list, lambda c, xs: tuple(xs)),
    list: ("list", lambda x: None, list, lambda c, xs: list(xs)),
    dict: ("dict", list, lambda x: list(x.values()), lambda c, xs: dict(zip(c, xs))),
    collections.OrderedDict: (
        "OrderedDict",
        list,
        lambda x: list(x.values()),
        lambda c, xs: collections.OrderedDict(zip(c, xs)),
    ),
    collections.defaultdict: (
        "defaultdict",
        lambda x: [x.default_factory, list(x)],
        lambda x: list(x.values()),
        lambda c, xs: collections.defaultdict(c[0], zip(c[1], xs)),
    ),
    collections.deque: ("deque", lambda x: x.maxlen, list, lambda c, xs: collections.deque(xs, maxlen=c)),
}
_NAMEDTUPLE = ("namedtuple", type, list, lambda c, xs: c._make(xs))


def register_node(cls, flatten_fn, unflatten_fn):
    """Make instances of `cls` containers (torch.utils._pytree.register_pytree_node's functions):
    flatten_fn(node) -> (children, context), unflatten_fn(children, context) -> node."""
    _NODES[cls] = (
        cls.__name__,
        lambda x: flatten_fn(x)[1],
        lambda x: list(flatten_fn(x)[0]),
        lambda c, xs: unflatten_fn(xs, c),
    )


def deregister_node(cls):
    """Undo register_node(cls, ...)."""
    del _NODES[cls]


def _node(x):
    kind = type(x)
    node = _NODES.get(kind)
    if node is None and _is_namedtuple(kind):
        node = _NAMEDTUPLE
    return node


class TreeSpec:
    """The structure of a pytree: a leaf (`node` None), or a container with its context and child structures."""

    __slots__ = ("node", "context", "children", "num_leaves")

    def __init__(self, node=None, context=None, children=()):
        self.node, self.context, self.children = node, context, tuple(children)
        self.num_leaves = 1 if node is None else sum(c.num_leaves for c in self.children)

    def __repr__(self, indent=0):  # torch's TreeSpec.__repr__, character for character
        if self.node is None:
            return "*"
        text = f"TreeSpec({self.node[0]}, {self.context}, ["
        if self.children:
            indent += 2
            text += self.children[0].__repr__(indent) + ("," if len(self.children) > 1 else "")
            text += ",".join(["\n" + " " * indent + c.__repr__(indent) for c in self.children[1:]])
        return text + "])"

    def _key(self):
        if self.node is None:
            return None
        return self.node[0], id(self.node), _hashable(self.context), tuple([c._key() for c in self.children])

    def __eq__(self, other):
        return isinstance(other, TreeSpec) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def pprint(self):
        """The structure with * for each leaf, as torch's treespec_pprint shows it: `(*, {'a': *})`."""
        return repr(self.unflatten([_ASTERISK] * self.num_leaves))

    def unflatten(self, leaves):
        """The pytree of this structure with `leaves` (an iterable, consumed in order) at its leaves."""
        return self._build(iter(leaves))

    def _build(self, leaves):
        if self.node is None:
            return next(leaves)
        return self.node[3](self.context, [c._build(leaves) for c in self.children])


def _hashable(context):
    """A container's context (its keys, a deque's maxlen, a defaultdict's factory and keys) as a hashable value."""
    if isinstance(context, list):
        return tuple([_hashable(c) for c in context])
    try:
        hash(context)
    except TypeError:
        return id(context)
    return context


LEAF = TreeSpec()


class _Asterisk:
    def __repr__(self):
        return "*"


_ASTERISK = _Asterisk()


def flatten(tree):
    """(leaves in order, TreeSpec) of a pytree."""
    leaves = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    node = _node(tree)
    if node is None:
        leaves.append(tree)
        return LEAF
    return TreeSpec(node, node[1](tree), [_flatten(child, leaves) for child in node[2](tree)])


def broadcast_prefix(prefix, spec):
    """The leaves of `prefix` repeated over the subtrees of `spec` they stand for (torch's
    _broadcast_to_and_flatten), or None when `prefix` is not a prefix of `spec`'s structure. Dict entries are
    matched by key."""
    out = []
    return out if _broadcast(prefix, spec, out) else None


def _broadcast(prefix, spec, out):
    node = _node(prefix)
    if node is None:
        out.extend([prefix] * spec.num_leaves)
        return True
    if node is not spec.node or len(node[2](prefix)) != len(spec.children):
        return False
    context = node[1](prefix)
    if node[0] in ("dict", "OrderedDict", "defaultdict"):
        keys = context[-1] if node[0] == "defaultdict" else context
        wanted = spec.context[-1] if node[0] == "defaultdict" else spec.context
        if set(keys) != set(wanted):
            return False
        return all(_broadcast(prefix[k], child, out) for k, child in zip(wanted, spec.children))
    if context != spec.context:
        return False
    return all(_broadcast(p, child, out) for p, child in zip(node[2](prefix), spec.children))
