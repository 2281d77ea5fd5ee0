"""The default device and the legacy default tensor type, against torch 2.13: set_default_device, `with device(...)`
blocks (a module built on the meta device without values), set_default_tensor_type's forms and errors, and the
in-place random fills of meta tensors, which draw nothing."""

import warnings

import pytest
import torch

import batched_grad as bg

LIBRARIES = (torch, bg)


@pytest.fixture(autouse=True)
def restore_defaults():
    yield
    for lib in LIBRARIES:
        lib.set_default_device(None)
        lib.set_default_dtype(lib.float32)


def devices(lib, make):
    return [str(t.device) for t in make(lib)]


MADE = {
    "factories": lambda m: [m.zeros(2), m.ones(2, 3), m.empty(1), m.randn(2), m.arange(3), m.tensor([1.0]), m.eye(2)],
    "like": lambda m: [m.zeros_like(m.ones(2, device="cpu")), m.ones(2, device="cpu").new_zeros(3)],
    "explicit": lambda m: [m.ones(2, device="cpu")],
    "module": lambda m: list(m.nn.Sequential(m.nn.Linear(3, 2), m.nn.Conv1d(1, 2, 3), m.nn.LayerNorm(2)).parameters()),
}


@pytest.mark.parametrize("kind", MADE)
def test_a_device_block_makes_tensors_there_as_torch(kind):
    for lib in LIBRARIES:
        with lib.device("meta"):
            inside = devices(lib, MADE[kind])
            default = str(lib.get_default_device())
        outside = devices(lib, MADE[kind])
        if lib is torch:
            expected = inside, default, outside
    assert (inside, default, outside) == expected


def test_device_blocks_nest_and_restore():
    for lib in LIBRARIES:
        with lib.device("meta"):
            with lib.device("cpu"):
                assert lib.ones(1).device.type == "cpu"
            assert lib.ones(1).device.type == "meta"
        assert lib.ones(1).device.type == "cpu"


def test_set_default_device_until_reset():
    for lib in LIBRARIES:
        lib.set_default_device("meta")
        assert lib.ones(2).device.type == "meta" and str(lib.get_default_device()) == "meta"
        lib.set_default_device(None)
        assert lib.ones(2).device.type == "cpu" and str(lib.get_default_device()) == "cpu"
    with pytest.raises(TypeError, match="set_default_device\\(\\): expected a device"):
        bg.set_default_device(1.5)


def test_a_module_built_on_meta_gets_values_from_to_empty_and_draws_nothing():
    for lib in LIBRARIES:
        lib.manual_seed(0)
        with lib.device("meta"):
            model = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.LSTM(2, 3), lib.nn.Embedding(4, 2))
        assert {p.device.type for p in model.parameters()} == {"meta"}
        model.to_empty(device="cpu")
        assert {p.device.type for p in model.parameters()} == {"cpu"}
        drawn = lib.rand(3).tolist()
        if lib is torch:
            expected = drawn
    assert drawn == expected  # the meta fills took nothing from the generator


@pytest.mark.parametrize(
    "fill",
    [
        lambda t, m: t.uniform_(),
        lambda t, m: t.normal_(2.0, 3.0),
        lambda t, m: t.bernoulli_(0.3),
        lambda t, m: t.bernoulli_(m.ones(2, 3, device="meta")),
        lambda t, m: t.exponential_(),
        lambda t, m: t.random_(0, 5),
    ],
)
def test_random_fills_of_a_meta_tensor_stay_meta(fill):
    for lib in LIBRARIES:
        t = lib.empty(2, 3, device="meta")
        out = fill(t, lib)
        assert out is t and out.device.type == "meta" and out.shape == (2, 3)


def test_set_default_tensor_type_sets_the_dtype_as_torch():
    for lib in LIBRARIES:
        with pytest.warns(UserWarning, match="set_default_tensor_type\\(\\) is deprecated"):
            lib.set_default_tensor_type(lib.DoubleTensor)
        assert lib.get_default_dtype() == lib.float64
        assert lib.tensor([1.0]).dtype == lib.float64 and lib.nn.Linear(2, 2).weight.dtype == lib.float64
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.set_default_tensor_type("torch.FloatTensor")
        assert lib.get_default_dtype() == lib.float32


@pytest.mark.parametrize("bad", ["torch.cuda.FloatTensor", "LongTensor", "float64"])
def test_set_default_tensor_type_errors_as_torch(bad):
    messages = []
    for lib in LIBRARIES:
        argument = bad if bad.startswith("torch.") else getattr(lib, bad)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(TypeError) as caught:
                lib.set_default_tensor_type(argument)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_an_unknown_tensor_type_name_is_named():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match="expected the name of a typed tensor class, got 'torch.Foo'"):
            bg.set_default_tensor_type("torch.Foo")
