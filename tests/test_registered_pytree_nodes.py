"""Classes registered with torch.utils._pytree (register_pytree_node, register_dataclass) as inputs and outputs of
the torch.func transforms, against torch 2.13: the transforms flatten them as torch.func does."""

import dataclasses

import numpy as np
import torch
import torch.utils._pytree as torch_pytree

import batched_grad as bg
import batched_grad.utils._pytree as bg_pytree


class Positions:
    def __init__(self, positions, scale):
        self.positions, self.scale = positions, scale


@dataclasses.dataclass
class Pair:
    left: object
    right: object = None
    tag: object = None


def _flatten(node):
    return [node.positions], node.scale


def _unflatten(children, scale):
    return Positions(children[0], scale)


for _module in (torch_pytree, bg_pytree):
    _module.register_pytree_node(Positions, _flatten, _unflatten, serialized_type_name="tests.Positions")
    _module.register_dataclass(Pair, field_names=["left", "right"], drop_field_names=["tag"])


def _values(m, seed=0):
    a = np.random.default_rng(seed).standard_normal((5, 3))
    return m.tensor(a), m.tensor(a[0])


def _energy(m):
    def energy(inp):
        picked = inp.positions.index_select(0, m.arange(4)) * inp.scale
        return picked.sum(dim=1, keepdim=True)

    return energy


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), b.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_vjp_of_a_registered_node_returns_one():
    results = []
    for m in (bg, torch):
        x, _ = _values(m)
        y, vjp_fn = m.func.vjp(_energy(m), Positions(x, 2.0))
        (grads,) = vjp_fn(m.ones_like(y))
        assert type(grads) is Positions and grads.scale == 2.0
        results.append((y, grads.positions))
    for ours, theirs in zip(*results):
        _close(ours, theirs)


def test_grad_and_vmap_through_a_registered_dataclass():
    results = []
    for m in (bg, torch):
        x, w = _values(m)

        def loss(pair):
            return (pair.left * pair.right).sum() + (pair.left**2).sum()

        grads = m.func.grad(loss)(Pair(x, w, tag="kept out"))
        assert type(grads) is Pair and grads.tag is None
        rows = m.func.vmap(lambda pair: pair.left * pair.right)(Pair(x, m.ones(5, 3)))
        results.append((grads.left, grads.right, rows))
    for ours, theirs in zip(*results):
        _close(ours, theirs)


def test_field_names_must_be_the_init_fields_not_dropped():
    @dataclasses.dataclass
    class Three:
        a: object
        b: object
        c: object = None

    for module in (torch_pytree, bg_pytree):
        try:
            module.register_dataclass(Three, field_names=["a", "d"], drop_field_names=["c"])
        except ValueError as error:
            message = str(error).replace("{'b'}", "B").replace("{'d'}", "D")
        assert message.startswith("field_names does not include all dataclass fields.")
        assert "Missing fields in `field_names`: B." in message and "Unexpected fields in `field_names`: D." in message


def test_none_fields_of_a_dataclass_stay_out_of_the_leaves():
    ours = bg_pytree.tree_flatten(Pair(1.0, None))
    theirs = torch_pytree.tree_flatten(Pair(1.0, None))
    assert ours[0] == theirs[0] == [1.0] and repr(ours[1]) == repr(theirs[1])
    assert bg_pytree.tree_unflatten([2.0], ours[1]) == Pair(2.0, None)


def test_a_deregistered_class_is_a_leaf_again():
    class Box:
        def __init__(self, value):
            self.value = value

    for module in (torch_pytree, bg_pytree):
        module.register_pytree_node(Box, lambda b: ([b.value], None), lambda c, _: Box(c[0]))
        module._deregister_pytree_node(Box)
    box = Box(bg.ones(2))
    assert bg_pytree.tree_leaves(box) == [box]
    try:
        bg.func.grad(lambda b: b.value.sum())(box)
    except ValueError as error:
        assert "Thing passed to transform API must be Tensor" in str(error)
    else:
        raise AssertionError("a deregistered class must not be flattened by the transforms")
