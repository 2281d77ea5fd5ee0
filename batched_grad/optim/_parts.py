"""How an update of many parameters runs (an optimizer's step, gradient clipping): one compiled program over them
all once it pays for its compile (XLA's compile of it grows with the number of parameters), before that parameter by
parameter, on the host where a parameter fits there (Update), else by a program per shape and dtype."""

import functools
import inspect
import threading

import jax
import numpy as np

from .. import _lazy, _payback
from .._budget import Jitted
from .._host import host_arrays
from .._numpy_eval import derived_function
from .._tracing import compiling


def values(tensors):
    """The values of a list of Tensors (None stays None) where they are: host data stays on the host, for an update
    computed there (Update); inside bg.compile's trace, the JAX arrays its program reads."""
    if compiling.name is not None:
        return [None if t is None else t._value for t in tensors]
    return [None if t is None else t._held for t in tensors]


# the compile of one parameter's update in a program of many, in the cost model's ops of unknown kinds (about 0.03 s
# each): an Adam chain takes 30-90 ms on the 2-core benchmark machine (XLA's CPU backend compiles each chain apart)
_OPS_PER_PARAMETER = 2


def in_parts(key, count, update):
    """`update(indices)` (a tuple of lists, an entry per parameter at the positions `indices`) for the `count`
    parameters of the update structure `key`: one program for them all once running them one by one has cost what
    its compile is estimated to (_lazy.should_fuse; XLA's compile of such a program grows with the number of
    parameters: 5 s for 100), else one by one, each on the host where it fits there (Update), else by the program
    each parameter of that shape and dtype shares. Inside bg.compile's trace, one program."""
    if compiling.name is not None or _lazy.should_fuse(key, _OPS_PER_PARAMETER * count):
        return update(list(range(count)))
    start = _payback.clock()
    _one_by_one.flag = True
    try:
        parts = [update([i]) for i in range(count)]
    finally:
        _one_by_one.flag = False
    _payback.note_unfused(key, _payback.clock() - start)
    return tuple([part[j][0] for part in parts] for j in range(len(parts[0])))


class _OneByOne(threading.local):
    flag = False  # in in_parts' loop over the parameters


_one_by_one = _OneByOne()


# the largest parameter updated on the host: Adam's update of 16384 elements takes 0.25 ms there, as in its program
# (whose compile, 50 ms per shape, it saves); of 65536, 3 ms against 0.7
ON_HOST_ELEMENTS = 16384


class Update:
    """An optimizer's update, a pure JAX function of lists of parameters (and their gradients, states and
    hyperparameters): compiled (Jitted, one program per structure and shapes) for a group; for a parameter updated
    one by one (in_parts) whose arrays are on the host (the CPU backend, at most `largest` elements), computed
    with NumPy from its jaxpr, traced once per pattern of shapes (_numpy_eval.py): a new shape compiles nothing, and
    the values are the program's (exact operations, and fused multiply-adds rounded once either way; sums in
    NumPy's order)."""

    def __init__(self, fn, static_argnames=(), largest=ON_HOST_ELEMENTS):
        self.fn, self.static_argnames, self.largest = fn, static_argnames, largest
        self.jitted = Jitted(fn, static_argnames=static_argnames)
        self.arguments = tuple(inspect.signature(fn).parameters)

    def __call__(self, *args, **kwargs):
        if _one_by_one.flag:
            named = dict(zip(self.arguments, args), **kwargs)
            static = tuple([(k, named.pop(k)) for k in self.static_argnames if k in named])
            out = self._on_host(named, static)
            if out is not None:
                return out
        return self.jitted(*args, **kwargs)

    def _on_host(self, named, static):
        leaves, tree = jax.tree_util.tree_flatten(named)
        if any([np.size(a) > self.largest for a in leaves]):
            return None
        numbers = frozenset([i for i, a in enumerate(leaves) if type(a) in (int, float)])  # weakly typed in a trace
        arrays = host_arrays([a for i, a in enumerate(leaves) if i not in numbers])
        if arrays is None:
            return None
        arrays = iter(arrays)
        leaves = [np.asarray(a) if i in numbers else next(arrays) for i, a in enumerate(leaves)]
        call = functools.partial(_flat_call, self.fn, tree, static)
        outs = derived_function((self.fn, str(tree), static), call, leaves, numbers)  # a key the store can name
        if outs is None:
            return None
        return jax.tree_util.tree_unflatten(_out_tree(call.args, leaves, numbers), outs)


def _flat_call(fn, tree, static, *leaves):
    return tuple(jax.tree_util.tree_leaves(fn(**jax.tree_util.tree_unflatten(tree, leaves), **dict(static))))


_out_trees = {}


def _out_tree(key, leaves, numbers):
    """The structure of what the update `key` names returns (its flat outputs come from a program that may have been
    traced in another process): found once per structure of arguments, by an abstract evaluation."""
    found = _out_trees.get(key)
    if found is None:
        fn, tree, static = key
        structs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=i in numbers) for i, a in enumerate(leaves)]
        named = jax.tree_util.tree_unflatten(tree, structs)
        shapes = jax.eval_shape(lambda arguments: fn(**arguments, **dict(static)), named)
        found = _out_trees[key] = jax.tree_util.tree_structure(shapes)
    return found


def shapes_of(tensors):
    """The shapes and dtypes of `tensors`, which (with the flags) make an update's structure."""
    return tuple([(tuple(t.shape), t.dtype) for t in tensors])
