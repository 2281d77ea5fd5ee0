"""Rows of the loop primitives, scan (lax.scan, fori_loop with a fixed trip count, the recurrent layers) and while
(lax.while_loop, fori_loop otherwise): a loop's body (and a while's condition) is a jaxpr of its own, flattened once
into a sub-Program with the same symbolic sizes as the program holding it (_numpy_program.py) and bound to the sizes
of a call with it (_numpy_eval.py), which gives the row a Body. The row runs the body in a Python loop, one step per
iteration, with the same rows and region kernels the body's values would have in a program of their own: no kernel
is compiled per loop length or size."""

import numpy as np

# the params of each loop primitive that hold a jaxpr: each is flattened into a sub-Program
JAXPRS = {"scan": ("jaxpr",), "while": ("cond_jaxpr", "body_jaxpr")}


class Body:
    """A loop's sub-Program bound to a call's sizes: `run(arrays)` gives its outputs (a list); `out_avals` their
    (shape, dtype) pairs."""

    __slots__ = ("run", "out_avals")

    def __init__(self, run, out_avals):
        self.run, self.out_avals = run, out_avals


def scan(*arrays, jaxpr, length, reverse, num_consts, num_carry):
    """lax.scan: the body reads (consts, carry, the xs' slices at step i) and gives (new carry, the ys' slices at
    step i), for i in 0 .. length - 1, or back from length - 1 with `reverse`; (final carry, ys stacked)."""
    consts = list(arrays[:num_consts])
    carry = list(arrays[num_consts : num_consts + num_carry])
    xs = arrays[num_consts + num_carry :]
    ys = [np.empty((length, *shape), dtype) for shape, dtype in jaxpr.out_avals[num_carry:]]
    for i in range(length - 1, -1, -1) if reverse else range(length):
        outs = jaxpr.run(consts + carry + [x[i] for x in xs])
        carry = outs[:num_carry]
        for y, value in zip(ys, outs[num_carry:]):
            y[i] = value
    return (*carry, *ys)


def while_loop(*arrays, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """lax.while_loop: the body (reading its consts and the carry) runs while the condition (reading its own consts
    and the carry) gives True; the final carry."""
    cond_consts = list(arrays[:cond_nconsts])
    body_consts = list(arrays[cond_nconsts : cond_nconsts + body_nconsts])
    carry = list(arrays[cond_nconsts + body_nconsts :])
    while cond_jaxpr.run(cond_consts + carry)[0]:
        carry = body_jaxpr.run(body_consts + carry)
    return tuple(carry)


ROWS = {"scan": scan, "while": while_loop}
