"""Checkpoints written by torch.save, read by batched_grad.load: a model's state dict (with its metadata) loads into
the same batched_grad model with equal values; every dtype, views sharing a storage, parameters, sizes, dtypes,
optimizer state; weights_only refuses other objects, which weights_only=False unpickles."""

import collections
import pickle

import numpy as np
import pytest
import torch

import batched_grad as bg


class Note:
    """An object that is not a tensor or a container."""

    def __init__(self, text):
        self.text = text


def _model(lib):
    return lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.BatchNorm1d(2))


def test_a_state_dict_loads_into_the_same_model(tmp_path):
    torch.manual_seed(0)
    theirs = _model(torch)
    theirs(torch.randn(4, 3))  # running statistics and num_batches_tracked move
    torch.save(theirs.state_dict(), tmp_path / "model.pt")
    state = bg.load(tmp_path / "model.pt")
    assert list(state) == list(theirs.state_dict()) and state._metadata == theirs.state_dict()._metadata
    ours = _model(bg)
    ours.load_state_dict(state)
    for (name, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def test_values_dtypes_views_and_containers(tmp_path):
    base = torch.arange(10.0)
    saved = {
        "views": [base[2:5], base[::3], torch.arange(6).view(2, 3).t()],
        "dtypes": [torch.ones(2, dtype=d) for d in (torch.float16, torch.bfloat16, torch.float64, torch.int32)],
        "others": (torch.tensor([True, False]), torch.tensor([1 + 2j]), torch.Size([2, 3]), torch.float64, 3, "x"),
        "parameter": torch.nn.Parameter(torch.ones(2)),
    }
    torch.save(saved, tmp_path / "mixed.pt")
    loaded = bg.load(tmp_path / "mixed.pt")
    for a, b in zip(loaded["views"] + loaded["dtypes"], saved["views"] + saved["dtypes"]):
        assert str(a.dtype) == str(b.dtype)
        np.testing.assert_array_equal(a.float().numpy(), b.float().numpy())
    flags, number, size, dtype, count, text = loaded["others"]
    assert flags.tolist() == [True, False] and number.tolist() == [1 + 2j]
    assert (size, dtype, count, text) == (bg.Size([2, 3]), bg.float64, 3, "x")
    assert isinstance(loaded["parameter"], bg.nn.Parameter) and loaded["parameter"].requires_grad


def test_optimizer_state_resumes(tmp_path):
    torch.manual_seed(0)
    model = _model(torch)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    torch.save({"optimizer": optimizer.state_dict(), "epoch": 7}, tmp_path / "checkpoint.pt")
    checkpoint = bg.load(tmp_path / "checkpoint.pt")
    ours = bg.optim.Adam(_model(bg).parameters(), lr=0.5)
    ours.load_state_dict(checkpoint["optimizer"])
    assert checkpoint["epoch"] == 7 and ours.param_groups[0]["lr"] == 0.01
    np.testing.assert_array_equal(
        ours.state_dict()["state"][0]["exp_avg"].numpy(), optimizer.state_dict()["state"][0]["exp_avg"].numpy()
    )


def test_weights_only_refuses_other_objects(tmp_path):
    torch.save({"note": Note("hello")}, tmp_path / "note.pt")
    with pytest.raises(Exception, match="Weights only load failed"):
        bg.load(tmp_path / "note.pt")
    assert bg.load(tmp_path / "note.pt", weights_only=False)["note"].text == "hello"


def test_the_weights_only_containers_torch_accepts_load(tmp_path):
    """A MultiStepLR state dict keeps its milestones in a Counter; sets, bytes and bytearrays are the other
    containers torch's weights_only loader accepts (pickled under protocol 2's names)."""
    obj = {"milestones": collections.Counter([3, 3, 6]), "seen": {1, 2}, "raw": b"\x00ab", "buf": bytearray(b"xy")}
    path = tmp_path / "c.pt"
    torch.save(obj, path)
    assert torch.load(path) == obj
    got = bg.load(path)
    assert got == obj and [type(v) for v in got.values()] == [type(v) for v in obj.values()]


def test_safe_globals_let_weights_only_load_numpy_values_as_in_torch(tmp_path):
    """A checkpoint holding a NumPy scalar (a best metric) and array loads with weights_only only for globals the
    script allowed: inside safe_globals, or after add_safe_globals until clear_safe_globals."""
    path = tmp_path / "np.pt"
    torch.save({"best": np.float64(0.5), "seen": np.arange(3)}, path)
    allowed = [np._core.multiarray.scalar, np.dtype, np.dtypes.Float64DType, np.dtypes.Int64DType]
    allowed += [np._core.multiarray._reconstruct, np.ndarray]
    for lib in (torch, bg):
        with pytest.raises(pickle.UnpicklingError):
            lib.load(path)
        with lib.serialization.safe_globals(allowed):
            got = lib.load(path)
        assert got["best"] == 0.5 and type(got["best"]) is np.float64 and got["seen"].tolist() == [0, 1, 2]
        with pytest.raises(pickle.UnpicklingError):
            lib.load(path)
    bg.serialization.add_safe_globals(allowed)
    try:
        assert bg.serialization.get_safe_globals() == allowed and bg.load(path)["best"] == 0.5
    finally:
        bg.serialization.clear_safe_globals()
    assert bg.serialization.get_safe_globals() == []
    assert bg.serialization.save is bg.save and bg.serialization.load is bg.load
    moved = bg.serialization.default_restore_location(bg.ones(2), "cpu")
    assert moved.device == bg.device("cpu")


@pytest.mark.parametrize("writer", ["torch", "bg"])
def test_map_location_places_the_tensors_as_in_torch(tmp_path, writer):
    """A map_location function is called with each loaded storage (a tensor here) and the saved location, and
    what it returns is used (None: the default restore); dicts of location names, strings and devices move them."""
    path = tmp_path / "m.pt"
    (torch if writer == "torch" else bg).save({"w": (torch if writer == "torch" else bg).arange(3.0)}, path)
    for lib in (torch, bg) if writer == "torch" else (bg,):  # torch cannot read batched_grad's own format
        seen = []
        got = lib.load(path, map_location=lambda storage, location: seen.append(location))
        assert seen == ["cpu"] and got["w"].tolist() == [0.0, 1.0, 2.0]
        fairseq_style = lambda s, _: lib.serialization.default_restore_location(s, "cpu")  # noqa: E731
        for where in (fairseq_style, {"cpu": "cpu"}, "cpu", lib.device("cpu"), lambda storage, loc: storage):
            assert lib.load(path, map_location=where)["w"].device == lib.device("cpu")
