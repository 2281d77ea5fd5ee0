"""bg.save / bg.load: tensors, model and optimizer state dicts round trip through a path or a file object, and the
file loads without running code unless weights_only=False is asked for."""

import collections
import io
import pickle
import zipfile

import numpy as np
import pytest

import batched_grad as bg


def _round_trip(obj, **load_kw):
    buffer = io.BytesIO()
    bg.save(obj, buffer)
    buffer.seek(0)
    return bg.load(buffer, **load_kw)


def test_tensors_of_every_dtype_keep_values_dtype_and_requires_grad():
    for d in (bg.float32, bg.float64, bg.bfloat16, bg.float16, bg.int64, bg.int8, bg.uint8, bg.bool, bg.complex64):
        t = (bg.arange(6) - 2).reshape(2, 3).to(d)
        got = _round_trip(t)
        assert got.dtype is d and tuple(got.shape) == (2, 3)
        np.testing.assert_array_equal(got.to(bg.float64 if not d.is_complex else d).numpy(), t.to(got.dtype).numpy())
    leaf = bg.randn(3, requires_grad=True)
    got = _round_trip(leaf)
    assert got.requires_grad and got.is_leaf
    assert not _round_trip(bg.randn(2)).requires_grad


def test_nested_containers_numbers_strings_and_shared_tensors():
    t = bg.randn(4)
    obj = {
        "a": [t, (1, 2.5, "x", None, True)],
        "b": collections.OrderedDict(w=t, n=float("inf")),
        3: {"dtype": bg.float64, "size": bg.Size([2, 3]), "z": 1 + 2j, "nan": float("nan")},
    }
    got = _round_trip(obj)
    assert type(got["b"]) is collections.OrderedDict and isinstance(got["a"][1], tuple)
    assert got["a"][1] == (1, 2.5, "x", None, True) and got["b"]["n"] == float("inf")
    assert got[3]["dtype"] is bg.float64 and got[3]["size"] == bg.Size([2, 3]) and got[3]["z"] == 1 + 2j
    assert got["a"][0] is got["b"]["w"]  # saved once, loaded as one tensor
    np.testing.assert_array_equal(got["a"][0].numpy(), t.numpy())


def _model():
    return bg.nn.Sequential(bg.nn.Linear(3, 5), bg.nn.BatchNorm1d(5), bg.nn.Tanh(), bg.nn.Linear(5, 2))


def test_model_state_dict_through_a_path_gives_identical_outputs(tmp_path):
    bg.manual_seed(0)
    model = _model()
    model(bg.randn(8, 3))  # updates the batch norm's running statistics
    bg.save(model.state_dict(), tmp_path / "model.pt")
    bg.manual_seed(1)
    fresh = _model()
    fresh.load_state_dict(bg.load(tmp_path / "model.pt"))
    model.eval(), fresh.eval()
    x = bg.randn(4, 3)
    np.testing.assert_array_equal(fresh(x).detach().numpy(), model(x).detach().numpy())
    assert isinstance(next(iter(fresh.parameters())), bg.nn.Parameter)


def _train(model, optimizer, steps, seed):
    bg.manual_seed(seed)
    for _ in range(steps):
        optimizer.zero_grad()
        model.train()
        model(bg.randn(8, 3)).pow(2).mean().backward()
        optimizer.step()


def test_optimizer_state_dict_continues_training_identically(tmp_path):
    bg.manual_seed(0)
    model = _model()
    optimizer = bg.optim.Adam(model.parameters(), lr=0.01)
    _train(model, optimizer, 3, seed=1)
    path = str(tmp_path / "checkpoint.pt")
    bg.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3}, path)
    _train(model, optimizer, 2, seed=2)

    checkpoint = bg.load(path)
    bg.manual_seed(5)
    restored = _model()
    restored.load_state_dict(checkpoint["model"])
    restored_optimizer = bg.optim.Adam(restored.parameters(), lr=0.5)
    restored_optimizer.load_state_dict(checkpoint["optimizer"])
    assert checkpoint["epoch"] == 3 and restored_optimizer.param_groups[0]["lr"] == 0.01
    _train(restored, restored_optimizer, 2, seed=2)
    for a, b in zip(model.parameters(), restored.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


class _Custom:
    def __init__(self, value):
        self.value = value


def test_other_objects_load_only_without_weights_only():
    obj = {"custom": _Custom(bg.ones(2))}
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        _round_trip(obj)
    got = _round_trip(obj, weights_only=False)
    np.testing.assert_array_equal(got["custom"].value.numpy(), np.ones(2, np.float32))


def test_the_weights_file_holds_no_pickle(tmp_path):
    path = tmp_path / "w.pt"
    bg.save({"w": bg.randn(3)}, path)
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == ["structure.json", "tensors/0.npy"]
    assert bg.load(path, map_location="cpu")["w"].shape == (3,)


def test_counters_sets_and_bytes_load_with_weights_only_as_in_torch():
    """What torch's weights_only loader accepts besides dicts and lists (a MultiStepLR state dict keeps its
    milestones in a Counter) goes into the code-free file, not the pickle."""
    obj = {"milestones": collections.Counter([3, 3, 6]), "seen": {1, 2}, "raw": b"\x00ab", "buf": bytearray(b"xy")}
    got = _round_trip(obj)
    assert got == obj and [type(v) for v in got.values()] == [type(v) for v in obj.values()]
    optimizer = bg.optim.SGD(_model().parameters(), lr=1.0)
    scheduler = bg.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 2, 5], gamma=0.5)
    restored = bg.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[9])
    restored.load_state_dict(_round_trip(scheduler.state_dict()))
    assert restored.milestones == collections.Counter({2: 2, 5: 1})
