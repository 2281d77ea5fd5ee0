"""The op database (tests/op_db.py) against the op table: every public op has a record, no record is stale, and
every record the sweeps leave out says why."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad._ops as ops
import op_db

SWEEPS = {"batched", "oracle", "elementwise", "property", "compile"}
RESULTS = {"float", "bool", "int", "python"}


def missing_records(public, names):
    """The public ops without a record."""
    return sorted(set(public) - set(names))


def stale_records(public, names, module):
    """The records naming no public op: an op-table name not in `public`, or a dotted name that does not resolve."""
    stale = []
    for name in names:
        if "." not in name:
            stale += [] if name in public else [name]
            continue
        try:
            op_db.resolve(module, name)
        except AttributeError:
            stale.append(name)
    return sorted(stale)


def test_every_public_op_has_a_record():
    assert missing_records(ops.__all__, op_db.BY_NAME) == []


def test_no_record_is_stale():
    assert stale_records(ops.__all__, op_db.BY_NAME, bg) == []


def test_the_checks_see_a_missing_and_a_stale_record():
    public = list(ops.__all__)
    assert missing_records([*public, "an_op_without_a_record"], op_db.BY_NAME) == ["an_op_without_a_record"]
    assert stale_records(public[1:], op_db.BY_NAME, bg) == [public[0]]
    assert stale_records(public, [*op_db.BY_NAME, "linalg.no_such_op"], bg) == ["linalg.no_such_op"]


@pytest.mark.parametrize("entry", op_db.ENTRIES, ids=lambda e: e.name)
def test_a_record_is_consistent(entry):
    assert set(entry.why) <= SWEEPS and set(entry.xfail) <= SWEEPS
    assert all(entry.why.values()) and all(entry.xfail.values()), "a reason for each sweep that leaves the op out"
    assert entry.result in RESULTS
    assert all(isinstance(a, op_db.Arg) for a in entry.args)
    assert entry.alias_of is None or entry.alias_of in op_db.BY_NAME
    if entry.batched:
        assert entry.differentiable, "the batched sweep takes differentiable ops only"
    else:
        assert entry.why.get("batched"), "an op the batched sweep leaves out says why"
    if not entry.differentiable:
        assert not entry.gradgrad and not entry.batched and not entry.composable


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


@pytest.mark.parametrize("entry", op_db.entries(batched=False), ids=lambda e: e.name)
def test_the_samples_of_ops_outside_the_batched_sweep_run(entry):
    """(test_batched_ops.py runs the others.) A result kind other than "float" is what the op gives."""
    args = op_db.make_args(entry, bg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated ops (torch's warnings)
        outs = [o for call in entry.calls().values() for o in _flat(call(bg, *args))]
    tensors = [o for o in outs if isinstance(o, bg.Tensor)]
    if entry.result == "python":
        assert not tensors
    elif entry.result in ("bool", "int"):
        assert tensors and all(not o.is_floating_point() for o in tensors)
        assert not any(o.requires_grad for o in tensors)


@pytest.mark.parametrize("entry", [e for e in op_db.ENTRIES if e.composable], ids=lambda e: e.name)
def test_a_composable_op_maps_3_by_3_tensors_to_one_in_both_libraries(entry):
    """(test_property.py chains them in random graphs of (3, 3) tensors, in batched_grad and in torch.)"""
    for m in (bg, torch):
        args = [m.tensor(np.full((3, 3), 0.5)) for _ in entry.args]
        assert tuple(entry.call(m, *args).shape) == (3, 3)
