"""The machinery of optimizers whose update is elementwise per parameter: per-parameter state (arrays, and the
float32 scalars torch keeps as tensors), step counting, and one compiled update per group of parameters at the same
step, with the step-dependent scalars computed on the host in double precision as torch's single-tensor code does.
Inside bg.compile's trace the counts and scalars are values of the program: each parameter's scalars are computed
by it, in double precision, from the counts and scalars it reads (the functions below take host floats or arrays)."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._factories import tensor
from .._tensor import Tensor
from .._tracing import compiling
from ._parts import Update, in_parts, shapes_of, values
from .optimizer import Optimizer, complex_from_pairs, real_pairs


def sqrt(x):
    return jnp.sqrt(x) if isinstance(x, jax.Array) else math.sqrt(x)


def maximum(a, b):
    return jnp.maximum(a, b) if isinstance(a, jax.Array) or isinstance(b, jax.Array) else max(a, b)


def float32_product(a, b):
    """a * b as torch computes it in float32 tensors, as a double."""
    if isinstance(a, jax.Array) or isinstance(b, jax.Array):
        return (jnp.float32(a) * jnp.float32(b)).astype(jnp.float64)
    return float(np.float32(a) * np.float32(b))


def check_range(name, value, low=0.0, high=None, low_open=False):
    """torch's ValueError for a hyperparameter outside [low, high) (or (low, ...) when low_open)."""
    if value < low or (low_open and value == low) or (high is not None and value >= high):
        raise ValueError(f"Invalid {name}: {value}")


@functools.cache
def _compiled(rule):
    return Update(
        lambda params, grads, states, hyper, flags: _apply_all(rule, params, grads, states, hyper, flags),
        static_argnames=("flags",),
    )


def _apply_all(rule, params, grads, states, hyper, flags):
    new_params, new_states = [], []
    for p, g, s in zip(params, grads, states):
        new_p, new_s = rule(real_pairs(p), real_pairs(g), {n: real_pairs(a) for n, a in s.items()}, hyper, dict(flags))
        new_params.append(complex_from_pairs(new_p, p))
        new_states.append({n: complex_from_pairs(a, s.get(n)) for n, a in new_s.items()})
    return new_params, new_states


class ElementwiseOptimizer(Optimizer):
    """Subclasses give `arrays` (state name -> function of (parameter, group) making its initial array),
    `scalars` (state name -> initial value, a float32 0-dim tensor in state), `_flags(group)` (static options),
    `_hyper(group, step, scalars)` (the host scalars of a step: (tuple for the rule, new scalar values)) and
    `_rule(p, g, states, hyper, flags)`, a pure JAX function of one parameter."""

    arrays, scalars = {}, {}

    def _init_state(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = tensor(0.0)
            for name, initial in self.scalars.items():
                state[name] = tensor(float(initial(group) if callable(initial) else initial))
            for name, make in self.arrays.items():
                array = make(p, group)
                if array is not None:
                    state[name] = array
        return state

    def _update(self, group, params):
        states = [self._init_state(p, group) for p in params]
        if compiling.name is not None:  # bg.compile traces the step
            self._update_traced(group, params, states)
            return
        keys = [(float(s["step"].item()) + 1,) + tuple(float(s[n].item()) for n in self.scalars) for s in states]
        flags = tuple(sorted(self._flags(group).items()))
        for key in sorted(set(keys)):
            chosen = [i for i, k in enumerate(keys) if k == key]
            hyper, new_scalars = self._hyper(group, key[0], dict(zip(self.scalars, key[1:])))
            names = [n for n in self.arrays if n in states[chosen[0]]]
            new_params, new_states = in_parts(
                (type(self).__name__, flags, tuple(names), shapes_of([params[i] for i in chosen])),
                len(chosen),
                lambda part: _compiled(type(self)._rule)(
                    values([params[chosen[i]] for i in part]),
                    values([params[chosen[i]].grad for i in part]),
                    [dict(zip(names, values([states[chosen[i]][n] for n in names]))) for i in part],
                    hyper,
                    flags,
                ),
            )
            self._write([params[i] for i in chosen], new_params)
            for k, i in enumerate(chosen):
                states[i]["step"] = tensor(key[0])
                states[i].update({n: Tensor._wrap(a) for n, a in new_states[k].items()})
                states[i].update({n: tensor(float(np.float32(v))) for n, v in new_scalars.items()})

    def _update_traced(self, group, params, states):
        """Inside bg.compile's trace: each parameter with the scalars of its own step count, its state written in
        place (the program writes it back after every call)."""
        flags = tuple(sorted(self._flags(group).items()))
        for p, s in zip(params, states):
            step = s["step"]._value.astype(jnp.float64) + 1
            hyper, new_scalars = self._hyper(group, step, {n: s[n]._value.astype(jnp.float64) for n in self.scalars})
            names = [n for n in self.arrays if n in s]
            (new_param,), (new_state,) = _compiled(type(self)._rule)(
                values([p]), values([p.grad]), [{n: s[n]._value for n in names}], hyper, flags
            )
            self._write([p, *(s[n] for n in names)], [new_param, *(new_state[n] for n in names)])
            self._write([s["step"], *(s[n] for n in new_scalars)], [step, *new_scalars.values()])

    def _flags(self, group):
        return {}
