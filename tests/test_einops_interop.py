"""einops on batched_grad tensors, with torch + einops as the oracle: the functional API (rearrange, reduce, repeat,
einsum, pack/unpack, parse_shape, asnumpy) through einops' backend for batched_grad, and einops' layers as
batched_grad modules (batched_grad.einops_layers in place of einops.layers.torch)."""

import copy
import pickle
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("einops")
import einops  # noqa: E402
import einops.layers.torch  # noqa: E402
import torch  # noqa: E402
from einops._backends import get_backend  # noqa: E402

import batched_grad as bg  # noqa: E402
import batched_grad.einops_layers  # noqa: E402
from oracle import assert_same, check_both, raises_like, to_torch  # noqa: E402


def _layers(lib):
    return bg.einops_layers if lib is bg else einops.layers.torch


FUNCTIONAL = {
    "rearrange_merge": (lambda lib, x: einops.rearrange(x, "b c (h p) w -> b (h w) (p c)", p=2), (2, 3, 4, 2)),
    "rearrange_ellipsis": (lambda lib, x: einops.rearrange(x, "b ... c -> c b ..."), (2, 3, 4, 2)),
    "rearrange_list": (lambda lib, x: einops.rearrange(list(x), "n c h w -> c n (h w)"), (2, 3, 4, 2)),
    "reduce_mean": (lambda lib, x: einops.reduce(x, "b c (h h2) w -> b c h", "mean", h2=2), (2, 3, 4, 2)),
    "reduce_max": (lambda lib, x: einops.reduce(x, "b c h w -> c", "max"), (2, 3, 4, 2)),
    "reduce_min": (lambda lib, x: einops.reduce(x, "b c h w -> b () h ()", "min"), (2, 3, 4, 2)),
    "reduce_sum": (lambda lib, x: einops.reduce(x, "b c h w -> b w", "sum"), (2, 3, 4, 2)),
    "reduce_prod": (lambda lib, x: einops.reduce(x, "b c h w -> h", "prod"), (2, 3, 4, 2)),
    "repeat_new_axis": (lambda lib, x: einops.repeat(x, "b c h w -> b r c h w", r=3), (2, 3, 4, 2)),
    "repeat_tile": (lambda lib, x: einops.repeat(x, "b c h w -> b c (h r) (w s)", r=2, s=3), (2, 3, 4, 2)),
    "einsum": (lambda lib, x: einops.einsum(x, x, "b c h w, b d h w -> b c d"), (2, 3, 4, 2)),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_functional_values_and_grads(name):
    fn, shape = FUNCTIONAL[name]
    x = bg.tensor(np.random.default_rng(0).uniform(0.5, 1.5, size=shape), requires_grad=True)
    check_both(fn, (x,), batched=name in ("rearrange_merge", "repeat_tile", "reduce_max"))


def test_pack_unpack_round_trip_and_grads():
    def fn(lib, a, b):
        packed, shapes = einops.pack([a, b, lib.ones(2)], "b *")
        assert [tuple(s) for s in shapes] == [(3, 4), (3,), ()]
        return packed, *einops.unpack(packed * 2, shapes, "b *")

    rng = np.random.default_rng(1)
    a, b = (bg.tensor(rng.standard_normal(s), requires_grad=True) for s in [(2, 3, 4), (2, 3)])
    check_both(fn, (a, b))


def test_parse_shape_asnumpy_and_boolean_reductions():
    x = bg.randn(2, 3, 4)
    assert einops.parse_shape(x, "b _ w") == einops.parse_shape(to_torch(x), "b _ w") == {"b": 2, "w": 4}
    np.testing.assert_array_equal(einops.asnumpy(x), x.numpy())
    for reduction in ("any", "all"):
        got = einops.reduce(x > 0, "b c w -> c", reduction)
        assert_same(got, einops.reduce(to_torch(x) > 0, "b c w -> c", reduction))


def test_backend_is_registered_for_tensor_and_parameter_and_names_its_layers():
    backend = get_backend(bg.zeros(1))
    assert backend.framework_name == "batched_grad"
    assert get_backend(bg.nn.Parameter(bg.zeros(1))) is backend
    assert backend.layers() is bg.einops_layers
    assert get_backend(torch.zeros(1)).framework_name == "torch"


def test_errors_are_einops_own():
    def bad_pattern(lib, x):
        return einops.rearrange(x, "b c -> b c d")

    def wrong_length(lib, x):
        return einops.rearrange(x, "b (c p) -> b c p", p=4)

    for fn in (bad_pattern, wrong_length):
        raises_like(fn, (bg.randn(2, 6),), match="Error while processing")


def test_einops_under_vmap_and_grad_transforms():
    def per_sample(lib, x):
        return einops.reduce(einops.rearrange(x, "(h p) w -> h (p w)", p=2) ** 2, "h pw -> h", "sum")

    x = bg.randn(3, 4, 2, dtype=bg.float64)
    got = bg.func.vmap(bg.func.grad(lambda r: per_sample(bg, r).sum()))(x)
    expected = torch.func.vmap(torch.func.grad(lambda r: per_sample(torch, r).sum()))(to_torch(x, False))
    assert_same(got, expected)


@pytest.mark.parametrize("kind", ["Rearrange", "Reduce"])
def test_pattern_layers_in_sequential(kind):
    def fn(lib, x):
        layers = _layers(lib)
        head = (
            layers.Rearrange("b c h w -> b (c h w)") if kind == "Rearrange" else layers.Reduce("b c h w -> b c", "max")
        )
        model = lib.nn.Sequential(head, lib.nn.Flatten())
        assert repr(model[0]) == repr(head)
        return model(x)

    check_both(fn, (bg.tensor(np.random.default_rng(2).standard_normal((2, 3, 4, 2)), requires_grad=True),))


def test_einmix_parameters_draw_and_gradients_match_torch():
    def build(lib):
        lib.manual_seed(0)
        return _layers(lib).EinMix("b (h p) c -> b h d", weight_shape="p c d", bias_shape="d", p=2, c=3, d=5).double()

    mix, t_mix = build(bg), build(torch)
    assert list(mix.state_dict()) == list(t_mix.state_dict())
    for p, tp in zip(mix.parameters(), t_mix.parameters()):
        assert_same(p, tp)
    x = np.random.default_rng(3).standard_normal((2, 4, 3))
    loss, t_loss = mix(bg.tensor(x)).square().sum(), t_mix(torch.tensor(x)).square().sum()
    loss.backward()
    t_loss.backward()
    assert_same(loss, t_loss)
    for p, tp in zip(mix.parameters(), t_mix.parameters()):
        assert_same(p.grad, tp.grad)


def test_layers_copy_and_pickle_keep_the_pattern():
    layer = bg.einops_layers.Reduce("b (h 2) -> b h", "mean")
    for clone in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
        assert repr(clone) == repr(layer)
        x = bg.randn(3, 4)
        assert_same(clone(x), torch.tensor(layer(x).numpy()))


def test_torch_einops_pattern_layers_in_batched_grad_modules_become_batched_grad_layers():
    def run(lib, x):
        head = einops.layers.torch.Reduce("b (o k) -> b o", "max", k=2)
        model = lib.nn.Sequential(einops.layers.torch.Rearrange("b c h -> b (c h)"), lib.nn.Linear(6, 4), head)
        model.transpose = einops.layers.torch.Rearrange("b o -> o b")
        assert repr(model[2]) == repr(head)
        return model.transpose(model(x))

    x = bg.tensor(np.random.default_rng(4).standard_normal((2, 3, 2)), dtype=bg.float32)
    bg.manual_seed(0)
    got = run(bg, x)
    torch.manual_seed(0)
    assert_same(got, run(torch, to_torch(x)), rtol=1e-6, atol=1e-6)


def test_torch_einmix_in_a_batched_grad_module_keeps_its_weights():
    torch.manual_seed(0)
    mix = einops.layers.torch.EinMix("b (t c) -> b t d", weight_shape="c d", bias_shape="d", c=2, d=3)
    model = bg.nn.Sequential(mix)
    assert isinstance(model[0], bg.einops_layers.EinMix) and repr(model[0]) == repr(mix)
    assert [name for name, _ in model.named_parameters()] == ["0.weight", "0.bias"]
    x = np.random.default_rng(5).standard_normal((2, 4)).astype(np.float32)
    assert_same(model(bg.tensor(x)), mix(torch.tensor(x)), rtol=1e-6, atol=1e-6)


def test_other_values_in_a_container_are_refused_as_torch():
    with pytest.raises(TypeError, match=r"^int is not a Module subclass$"):
        bg.nn.Sequential(3)


@pytest.mark.slow
def test_without_torch_einops_torch_layers_are_batched_grad_layers():
    program = """
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, NoTorch())
import batched_grad
from einops.layers.torch import Rearrange, Reduce, EinMix
layer = Reduce("b c -> b", "sum")
model = batched_grad.nn.Sequential(Rearrange("a b -> b a"), layer)
print(type(layer).__module__, model(batched_grad.ones(2, 3)).tolist())
"""
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["batched_grad.einops_layers", "[2.0,", "2.0,", "2.0]"]
