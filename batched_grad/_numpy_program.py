"""A jaxpr flattened into a Program for _numpy_eval.py: a list of steps over numbered registers, each a NumPy row
(_numpy_rows.py) or an elementwise region computed by an XLA kernel.

Calls of other jaxprs (jit, custom_jvp_call, custom_vjp_call, checkpoint) are inlined; the jaxprs a loop runs (scan,
while) are flattened into sub-Programs of their own, run once per iteration by the loop's row (_numpy_loops.py), whose
arrays count toward the program's size bound. The elementwise steps are then grouped into regions: the steps of one
result shape (operands of that shape or scalars), until something other than an elementwise step of that shape reads one
of their results. A region runs with NumPy, step by step, where that gives XLA's bits: where it holds only exact
operations and no product that is added or subtracted. Where it holds a transcendental function, or a product added to
something (which XLA's CPU code contracts into one fused multiply-add, rounded once), the region runs as one XLA kernel,
as it runs inside the op's own kernel: on its operands flattened, padded and cut into chunks of CHUNK elements, so that
it compiles once per region, never per shape or size (each element's value depends on its operands' elements alone, not
on where it sits in the array). In a program whose float64 values are its own wider precision (it takes and gives no
float64 array: an op computed in float64 for float32 operands, as tanh, its VJP, the VJP of that), the transcendental
functions and multiply-adds computed in float64 run with NumPy too (_numpy_rows.WIDENED): NumPy's and XLA's float64
values round to the same float32 one, as the hand-written host forms of tanh and its VJP already compute it. A pow whose
exponent the jaxpr fixes (a literal, or computed from literals: x ** 2 and its derivative 2 * x ** (2 - 1)) is no
transcendental function where that exponent is 0, 1, 2 or 3: XLA's simplifier computes it as 1, a, a * a or a * a * a,
and so do the rows (_EXACT_POWERS).

A Program is kept in the store across processes (_store.remembered): `dumps` pickles it with the primitives it
calls named by where JAX's modules hold them, so that a later process finds it without tracing the op's jaxpr."""

import functools
import importlib
import io
import pickle
import sys

import jax
import numpy as np
from jax.export import is_symbolic_dim, symbolic_shape
from jax.extend import core as jcore

from ._budget import Jitted
from ._numpy_loops import JAXPRS as LOOP_JAXPRS
from ._numpy_loops import ROWS as LOOP_ROWS
from ._numpy_rows import CALLS, ELEMENTWISE, MULTIPLE, ROWS, TRANSCENDENTAL, WIDENED
from ._x64 import set_x64, swap_x64

# the elements a region kernel computes per call: smaller regions are padded to it, larger ones run chunk by
# chunk (a call costs about 10 us; 1024 elements of exp about 1 us, of a float64 lgamma about 15 us)
CHUNK = 1024
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
_IGNORED_PARAMS = frozenset(
    {"sharding", "out_sharding", "precision", "weak_type", "update_jaxpr", "update_consts", "unroll", "linear",
     "_split_transpose"}
)  # fmt: skip
_NONE_ONLY = ("accuracy", "out_dtype")  # params the rows compute only at their default, None
# primitives that call a jaxpr (param name of the jaxpr): inlined
_CALLS = {
    "jit": "jaxpr",
    "pjit": "jaxpr",
    "closed_call": "call_jaxpr",
    "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr",
    "custom_vjp_call": "call_jaxpr",
    "remat2": "jaxpr",
    "checkpoint": "jaxpr",
}
_GROUPED = ELEMENTWISE | TRANSCENDENTAL
_PRODUCTS = frozenset({"mul", "square", "integer_pow"})
_SUMS = frozenset({"add", "add_any", "sub"})


def supported(dtype):
    """Whether arrays of `dtype` can be computed here: float32, float64, integers and bool."""
    return dtype.kind in "iub" or dtype == F32 or dtype == F64


class Unsupported(Exception):
    """A jaxpr that has no Program."""


class Program:
    """A jaxpr flattened: `steps` holds (function, argument registers, output registers, params, output dtypes,
    whether it gives a tuple); `registers` the initial registers (constants filled in); `names` the symbolic sizes
    the params and shapes may hold; `shapes` the shapes of every array, for the size bound; `in_shapes` and
    `in_slots` those of the arguments; `out_slots` and `out_avals` (shape, dtype) those of the outputs."""

    __slots__ = ("steps", "registers", "in_slots", "in_shapes", "out_slots", "out_avals", "shapes", "names")


class _Step:
    __slots__ = ("eqn", "ins", "outs", "row", "power", "bodies")

    def __init__(self, eqn, ins, outs, row, power=None, bodies=None):
        self.eqn, self.ins, self.outs, self.row = eqn, ins, outs, row
        self.power = power  # a pow's exponent where XLA computes it exactly (_EXACT_POWERS)
        self.bodies = bodies  # a loop's sub-Programs, by the name of the param holding each one's jaxpr

    @property
    def name(self):
        return self.eqn.primitive.name

    def shape(self):
        """The shape of an elementwise step's region (its result's), or None where it joins none."""
        eqn = self.eqn
        if eqn.primitive.name not in _GROUPED or len(eqn.outvars) != 1:
            return None
        shape = tuple(eqn.outvars[0].aval.shape)
        for a in eqn.invars:  # operands of its shape, scalars, or broadcasting along dimensions of 1
            dims = tuple(a.aval.shape)
            if dims and (len(dims) != len(shape) or not all([d == 1 or d == n for d, n in zip(dims, shape)])):
                return None
        return shape


def _exact_power(power):
    """pow(a, b) where b is `power` throughout, as XLA's simplifier computes it for an exponent it knows: 1, a, a * a
    or a * a * a (bit for bit, measured on the CPU backend; other exponents it computes by its general pow)."""

    def power_of(a, b):
        r = np.ones_like(a) if power == 0 else a if power == 1 else a * a if power == 2 else a * a * a
        return r if r.shape == b.shape or b.ndim == 0 else np.broadcast_to(r, np.broadcast_shapes(r.shape, b.shape))

    return power_of


_EXACT_POWERS = {p: _exact_power(p) for p in (0.0, 1.0, 2.0, 3.0)}
_MOVES = frozenset(
    {"broadcast_in_dim", "reshape", "squeeze", "expand_dims"}
)  # keep a value that is the same throughout


class _Flattener:
    def __init__(self, names, widened):
        self.registers, self.steps, self.shapes, self.slots = [], [], [], {}
        self.names, self.widened = names, widened  # those of the program, and of the loop bodies it holds
        self.uniform = {}  # register -> the one value (0-d) all its elements hold, where the jaxpr alone fixes it

    def new(self, value=None):
        self.registers.append(value)
        return len(self.registers) - 1

    def define(self, var):
        aval = var.aval
        if not isinstance(aval, jax.core.ShapedArray) or not supported(np.dtype(aval.dtype)):
            raise Unsupported(f"an array of {aval}")
        self.shapes.append(tuple(aval.shape))
        self.slots[var] = slot = self.new()
        return slot

    def read(self, atom):
        if isinstance(atom, jcore.Literal):
            return self.constant(np.asarray(atom.val, atom.aval.dtype))
        return self.slots[atom]

    def constant(self, value):
        slot = self.new(value)
        if 0 < value.size <= CHUNK and (value == value.flat[0]).all():
            self.uniform[slot] = value.reshape(-1)[0:1].reshape(())
        return slot

    def fold(self, name, row, ins, outs, params):
        """Note the value of an elementwise step or a move whose operands each hold one value throughout."""
        if len(outs) != 1 or not ins or any([i not in self.uniform for i in ins]):
            return
        if name in _MOVES:
            self.uniform[outs[0]] = self.uniform[ins[0]]
        elif name in ELEMENTWISE:
            try:
                with np.errstate(all="ignore"):
                    value = np.asarray(row(*[self.uniform[i] for i in ins], **params))
            except Exception:  # a row that needs more than 0-d operands: not folded
                return
            if value.ndim == 0:
                self.uniform[outs[0]] = value

    def jaxpr(self, jaxpr, consts, in_slots):
        """Add the steps of `jaxpr` reading `in_slots`; the registers of its outputs."""
        if jaxpr.effects:
            raise Unsupported("effects")
        for var, value in zip(jaxpr.constvars, consts):
            self.slots[var] = self.constant(np.asarray(value))
        for var, slot in zip(jaxpr.invars, in_slots):
            self.slots[var] = slot
        for eqn in jaxpr.eqns:
            self.equation(eqn)
        return [self.read(a) for a in jaxpr.outvars]

    def equation(self, eqn):
        name = eqn.primitive.name
        ins = tuple([self.read(a) for a in eqn.invars])
        if name in _CALLS and eqn.params.get("name") in CALLS:  # a function one row computes
            self.steps.append(_Step(eqn, ins, tuple([self.define(v) for v in eqn.outvars]), CALLS[eqn.params["name"]]))
            return
        if name in _CALLS:
            sub = eqn.params[_CALLS[name]]
            inner, consts = (sub.jaxpr, sub.consts) if isinstance(sub, jcore.ClosedJaxpr) else (sub, ())
            if len(inner.invars) != len(ins):
                raise Unsupported(f"{name} with {len(ins)} operands for {len(inner.invars)} inputs")
            for var, slot in zip(eqn.outvars, self.jaxpr(inner, consts, ins)):
                self.slots[var] = slot
            return
        if name in LOOP_ROWS:
            self.loop(eqn, ins)
            return
        row, power = ROWS.get(name), None
        if name == "pow" and ins[1] in self.uniform:  # an exponent the jaxpr fixes: XLA knows it when it compiles
            power = float(self.uniform[ins[1]])
            row = _EXACT_POWERS.get(power)
            power = power if row is not None else None
        if row is None and name not in TRANSCENDENTAL:
            raise Unsupported(f"no row for {name}")
        if row is not None and any([eqn.params.get(k) is not None for k in _NONE_ONLY]):
            raise Unsupported(f"{name} with {eqn.params}")
        outs = tuple([self.define(v) for v in eqn.outvars])
        if row is not None:
            self.fold(name, row, ins, outs, _params(eqn))
        self.steps.append(_Step(eqn, ins, outs, row, power))

    def loop(self, eqn, ins):
        """A loop's step: each jaxpr it runs flattened into a sub-Program (_numpy_loops.py), whose arrays count
        toward the size bound of this one."""
        bodies = {}
        for param in LOOP_JAXPRS[eqn.primitive.name]:
            bodies[param] = body = flatten(eqn.params[param], self.names, self.widened)
            self.shapes.extend(body.shapes)
        outs = tuple([self.define(v) for v in eqn.outvars])
        self.steps.append(_Step(eqn, ins, outs, LOOP_ROWS[eqn.primitive.name], bodies=bodies))


def flatten(closed, names, widened=None):
    """The Program of `closed` (a ClosedJaxpr) whose shapes may hold the symbolic sizes `names`; raises Unsupported
    where it has none. `widened`: whether its float64 values are a wider precision of its own (default: whether it
    takes and gives no float64 array; a loop's body has the program's holding it)."""
    widened = _widened(closed) if widened is None else widened
    flat = _Flattener(names, widened)
    in_slots = [flat.define(v) for v in closed.jaxpr.invars]
    out_slots = flat.jaxpr(closed.jaxpr, closed.consts, in_slots)
    program = Program()
    program.steps = _grouped(flat.steps, flat.registers, out_slots, widened)
    program.registers, program.shapes = flat.registers, list(set(flat.shapes))
    program.in_slots, program.out_slots, program.names = tuple(in_slots), tuple(out_slots), names
    program.in_shapes = [tuple(v.aval.shape) for v in closed.jaxpr.invars]
    program.out_avals = [(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in closed.jaxpr.outvars]
    return program


def _widened(closed):
    """Whether the float64 values of a jaxpr are its own wider precision: it takes and gives no float64 array."""
    return not any([np.dtype(v.aval.dtype) == F64 for v in closed.jaxpr.invars + closed.jaxpr.outvars])


def _params(eqn):
    return {k: v for k, v in eqn.params.items() if k not in _IGNORED_PARAMS and k not in _NONE_ONLY}


def _row_step(step):
    eqn = step.eqn
    if step.name in _CALLS:  # a function computed by one row, on the call's operands alone
        return (step.row, step.ins, step.outs, {}, (np.dtype(eqn.outvars[0].aval.dtype),), False)
    params = _params(eqn) if step.bodies is None else {**_params(eqn), **step.bodies}
    dtypes = tuple([np.dtype(v.aval.dtype) for v in eqn.outvars])
    row = step.row if step.row is not None else WIDENED[step.name]
    return (row, step.ins, step.outs, params, dtypes, step.name in MULTIPLE or step.bodies is not None)


def _grouped(steps, registers, out_slots, widened):
    """The steps as run: NumPy rows, and elementwise regions grouped (the module's docstring)."""
    readers = {}  # register -> the steps reading it
    for i, step in enumerate(steps):
        for slot in step.ins:
            readers.setdefault(slot, set()).add(i)
    producer = {slot: i for i, step in enumerate(steps) for slot in step.outs}
    region_of, open_regions, out = {}, {}, []

    def close(shape):
        region = open_regions.pop(shape)
        out.extend(_region_steps([steps[i] for i in region], region, registers, readers, out_slots, widened))

    for i, step in enumerate(steps):
        shape = step.shape()
        for slot in step.ins:  # a region read by anything but a step joining it is complete
            j = producer.get(slot)
            if j is not None and j in region_of and region_of[j] in open_regions and region_of[j] != shape:
                close(region_of[j])
        if shape is None:
            out.append(_row_step(step))
            continue
        open_regions.setdefault(shape, []).append(i)
        region_of[i] = shape
    for shape in list(open_regions):
        close(shape)
    return out


def _needs_kernel(members, widened):
    """Whether a region's values differ with NumPy: it computes a transcendental function, or adds a product (XLA
    contracts `a * b + c` into a fused multiply-add). Not where that is done in float64 in a `widened` program (one
    whose float64 values are rounded to a narrower dtype before they leave it): NumPy's float64 value and XLA's round
    to the same float32 one."""
    made = {slot: step for step in members for slot in step.outs}
    for step in members:
        wide = widened and np.dtype(step.eqn.outvars[0].aval.dtype) == F64
        if step.name in TRANSCENDENTAL and step.row is None:
            if not (wide and step.name in WIDENED and step.eqn.params.get("accuracy") is None):
                return True
        elif step.name in _SUMS and np.dtype(step.eqn.outvars[0].aval.dtype).kind == "f" and not wide:
            for slot in step.ins:
                source = made.get(slot)
                if source is not None and source.name == "neg":
                    source = made.get(source.ins[0])
                if source is not None and (source.name in _PRODUCTS or source.power in (2.0, 3.0)):
                    if source.name != "integer_pow" or abs(source.eqn.params["y"]) >= 2:
                        return True
    return False


def _region_steps(members, indices, registers, readers, out_slots, widened):
    """The steps running a region: its members as NumPy rows, or one XLA kernel."""
    if not _needs_kernel(members, widened):
        return [_row_step(step) for step in members]
    inside, inputs, full, structure = set(indices), [], [], []
    value = {}  # register -> ("value", member, output) within the region
    for m, step in enumerate(members):
        refs = []
        for slot, var in zip(step.ins, step.eqn.invars):
            if slot in value:
                refs.append(value[slot])
            elif registers[slot] is not None and np.ndim(registers[slot]) == 0:  # a literal: a constant there too
                constant = registers[slot]
                refs.append(("constant", constant.dtype.str, constant.tobytes()))
            else:
                if slot not in inputs:
                    inputs.append(slot)
                    full.append(tuple(var.aval.shape) != ())  # else a scalar, passed as it is
                refs.append(("input", inputs.index(slot)))
        for k, slot in enumerate(step.outs):
            value[slot] = ("value", m, k)
        structure.append((step.eqn.primitive, tuple(sorted(step.eqn.params.items())), tuple(refs)))
    results, dtypes = [], []
    for step in members:
        for slot, var in zip(step.outs, step.eqn.outvars):
            if slot in out_slots or readers.get(slot, set()) - inside:  # read after the region
                results.append(slot)
                dtypes.append(np.dtype(var.aval.dtype))
    kernel = _region_kernel(tuple(structure), tuple([value[s] for s in results]))
    run = functools.partial(_run_region, kernel, tuple(full))
    return [(run, tuple(inputs), tuple(results), {}, tuple(dtypes), True)]


@functools.lru_cache(maxsize=1024)
def _region_kernel(structure, results):
    """The XLA kernel of a region's `structure` (per member its primitive, params and operands) giving `results`."""

    def region(*inputs):
        values = []
        for primitive, params, refs in structure:
            args = []
            for ref in refs:
                if ref[0] == "input":
                    args.append(inputs[ref[1]])
                elif ref[0] == "value":
                    args.append(values[ref[1]][ref[2]])
                else:
                    args.append(np.frombuffer(ref[2], np.dtype(ref[1])).reshape(()))
            out = primitive.bind(*args, **dict(params))
            values.append(out if primitive.multiple_results else (out,))
        return tuple([values[m][k] for _, m, k in results])

    return Jitted(region, name=("region", structure, results))


def _run_region(kernel, full, *arrays):
    """A region's results on `arrays`: those not scalars (`full`) broadcast to its shape, flattened, padded with zeros
    to a multiple of CHUNK, and computed CHUNK elements a call."""
    shapes = [a.shape for a, f in zip(arrays, full) if f]
    if not shapes:  # scalars only
        return tuple([np.asarray(o) for o in _call(kernel, arrays)])
    shape = np.broadcast_shapes(*shapes)
    n = int(np.prod(shape, dtype=np.int64))
    chunks = max(1, -(-n // CHUNK))
    args = []
    for a, f in zip(arrays, full):
        if f:
            flat = np.broadcast_to(a, shape).reshape(-1)
            # padded with the last element: values the region computes at its usual speed (zeros may take slow
            # paths, as pow(0, y) and the subnormal numbers it can make)
            a = np.empty(chunks * CHUNK, a.dtype)
            a[:n] = flat
            a[n:] = flat[n - 1] if n else 0
        args.append(a)
    if chunks == 1:
        return tuple([np.asarray(o)[:n].reshape(shape) for o in _call(kernel, args)])
    results = None
    for c in range(chunks):
        part = slice(c * CHUNK, (c + 1) * CHUNK)
        outs = _call(kernel, [a[part] if f else a for a, f in zip(args, full)])
        if results is None:
            results = [np.empty(chunks * CHUNK, np.asarray(o).dtype) for o in outs]
        for r, o in zip(results, outs):
            r[part] = o
    return tuple([r[:n].reshape(shape) for r in results])


def _call(kernel, args):
    previous = swap_x64(True)
    try:
        return kernel(*args)
    finally:
        set_x64(previous)


# ---- a Program kept across processes (_store.remembered) -----------------------------------------------------------
class _Pickler(pickle.Pickler):
    """Pickles a Program: a JAX primitive by where its module holds it (the live object is found again), a row by
    its primitive's name, a region's kernel by its structure (made again by _region_kernel); the rest as usual."""

    def reducer_override(self, obj):
        if isinstance(obj, jcore.Primitive):
            return _primitive_at, _place_of(obj)
        if is_symbolic_dim(obj):  # its own pickling hashes it before its state is set
            return _symbolic_dim, (str(obj),)
        if type(obj) is Jitted and obj.name is not None and obj.name[0] == "region":
            return _region_kernel, obj.name[1:]
        name = _row_names().get(id(obj)) if callable(obj) else None
        if name is not None:
            return _row, (name,)
        return NotImplemented


def dumps(program):
    """A Program's bytes (raises where it holds what cannot be pickled)."""
    with io.BytesIO() as f:
        _Pickler(f, protocol=pickle.HIGHEST_PROTOCOL).dump(program)
        return f.getvalue()


def loads(data):
    """The Program of `dumps`'s bytes."""
    return pickle.loads(data)


@functools.cache
def _row_names():
    names = {id(fn): name for name, fn in ROWS.items()}
    names.update({id(fn): ("widened", name) for name, fn in WIDENED.items()})
    names.update({id(fn): ("power", p) for p, fn in _EXACT_POWERS.items()})
    return names


def _row(name):
    if type(name) is tuple:
        return WIDENED[name[1]] if name[0] == "widened" else _EXACT_POWERS[name[1]]
    return ROWS[name]


@functools.lru_cache(maxsize=4096)
def _symbolic_dim(text):
    """A symbolic size from its text (a Program only evaluates its sizes: each may have a scope of its own)."""
    return symbolic_shape(f"({text},)")[0]


_places = {}  # id(primitive) -> (module, attribute, name), found once


def _place_of(primitive):
    """(module, attribute, primitive name) of a module attribute holding `primitive` (JAX's modules searched)."""
    place = _places.get(id(primitive))
    if place is None:
        for module_name, module in list(sys.modules.items()):
            if module is None or not module_name.startswith("jax"):
                continue
            for attribute, value in list(vars(module).items()):
                if isinstance(value, jcore.Primitive):
                    _places.setdefault(id(value), (module_name, attribute, value.name))
        place = _places.get(id(primitive))
        if place is None:
            raise pickle.PicklingError(f"primitive {primitive.name} is held by no module of JAX")
    return place


def _primitive_at(module_name, attribute, name):
    primitive = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(primitive, jcore.Primitive) or primitive.name != name:
        raise pickle.UnpicklingError(f"{module_name}.{attribute} is not the primitive {name}")
    return primitive
