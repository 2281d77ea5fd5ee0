"""torch names that public code uses, against torch: Module.get_submodule/get_parameter/get_buffer, memory formats,
the random module, the CPU-only cuda functions and nn.utils.rnn's padding and packing."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


def _net(lib):
    torch.manual_seed(0)
    net = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3))
    net.add_module("head", lib.nn.Sequential(lib.nn.ReLU()))
    return net


def test_get_submodule_parameter_and_buffer():
    for lib in (bg, torch):
        net = _net(lib)
        assert net.get_submodule("") is net
        assert net.get_submodule("head.0") is net.head[0]
        assert net.get_parameter("0.weight") is net[0].weight
        assert net.get_buffer("1.running_mean") is net[1].running_mean


@pytest.mark.parametrize(
    "lookup",
    [
        lambda net: net.get_submodule("head.missing"),
        lambda net: net.get_submodule("0.weight.x"),
        lambda net: net.get_parameter("1.running_var"),
        lambda net: net.get_parameter("head.0.nothing"),
        lambda net: net.get_buffer("0.weight"),
        lambda net: net.get_buffer("9.running_mean"),
    ],
)
def test_get_member_errors_as_torch(lookup):
    raises_like_torch(lambda lib: lookup(_net(lib)))


FORMATS = ("preserve_format", "contiguous_format", "channels_last", "channels_last_3d")
FORMAT_TAKERS = {  # name: fn(lib, tensor, memory format)
    "clone": lambda lib, x, f: x.clone(memory_format=f),
    "torch.clone": lambda lib, x, f: lib.clone(x, memory_format=f),
    "contiguous": lambda lib, x, f: x.contiguous(memory_format=f),
    "to": lambda lib, x, f: x.to(lib.float64, memory_format=f),
    "empty_like": lambda lib, x, f: lib.empty_like(x, memory_format=f).shape,
    "zeros_like": lambda lib, x, f: lib.zeros_like(x, memory_format=f),
    "ones_like": lambda lib, x, f: lib.ones_like(x, memory_format=f),
    "full_like": lambda lib, x, f: lib.full_like(x, 2.5, memory_format=f),
    "rand_like": lambda lib, x, f: lib.rand_like(x, memory_format=f).shape,
    "randn_like": lambda lib, x, f: lib.randn_like(x, memory_format=f).shape,
}


def test_memory_format_objects_print_as_torch():
    for name in FORMATS:
        fmt = getattr(bg, name)
        assert isinstance(fmt, bg.memory_format)
        assert (repr(fmt), str(fmt)) == (repr(getattr(torch, name)), str(getattr(torch, name)))
    import pickle

    assert pickle.loads(pickle.dumps(bg.channels_last)) is bg.channels_last


@pytest.mark.parametrize("taker", FORMAT_TAKERS)
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 3)])
def test_memory_format_keyword_keeps_values(taker, shape):
    fn = FORMAT_TAKERS[taker]
    x = bg.arange(float(np.prod(shape))).reshape(shape)
    for name in FORMATS:
        if name.startswith("channels_last") and len(shape) != (4 if name == "channels_last" else 5):
            raises_like_torch(lambda lib: fn(lib, lib.ones(shape), getattr(lib, name)))
            continue
        got, want = fn(bg, x, getattr(bg, name)), fn(torch, torch.tensor(x.numpy()), getattr(torch, name))
        if isinstance(got, bg.Tensor):
            assert_same(got, want)
            assert got.is_contiguous()
        else:
            assert tuple(got) == tuple(want)


def test_memory_format_of_wrong_type_raises_as_torch():
    raises_like_torch(lambda lib: lib.ones(2).clone(memory_format="channels_last"))


def test_module_to_accepts_memory_format():
    layer = bg.nn.Conv2d(2, 3, 1).to(memory_format=bg.channels_last)
    out = layer(bg.ones(1, 2, 4, 4))
    assert tuple(out.shape) == (1, 3, 4, 4)


def test_random_module_seeds_and_restores_the_default_generator():
    assert bg.random.default_generator is bg.default_generator
    bg.random.manual_seed(3)
    assert bg.random.initial_seed() == 3
    state = bg.random.get_rng_state()
    first = bg.rand(3)
    bg.random.set_rng_state(state)
    assert_same(bg.rand(3), first)


@pytest.mark.parametrize("lib", [bg, torch])
def test_fork_rng_restores_the_state_after_the_block(lib):
    lib.manual_seed(5)
    with lib.random.fork_rng():
        inside = lib.rand(4)
    after = lib.rand(4)
    assert np.array_equal(np.asarray(inside), np.asarray(after))
    with pytest.raises(KeyError), lib.random.fork_rng(devices=[]):
        lib.rand(2)
        raise KeyError
    assert not np.array_equal(np.asarray(lib.rand(4)), np.asarray(after))
    with lib.random.fork_rng(enabled=False):
        lib.rand(1)


@pytest.mark.skipif(bg.cuda.is_available(), reason="compares with torch built without CUDA")
@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.cuda.set_device(0),
        lambda lib: lib.cuda.set_device("cpu"),
        lambda lib: lib.cuda.reset_peak_memory_stats(),
        lambda lib: lib.cuda.get_device_properties(0),
    ],
)
def test_cuda_calls_without_a_gpu_raise_as_torch(call):
    raises_like_torch(call)


@pytest.mark.skipif(bg.cuda.is_available(), reason="compares with torch built without CUDA")
def test_cuda_memory_counts_without_a_gpu_are_zero_as_torch():
    for name in ("memory_reserved", "max_memory_reserved", "memory_allocated", "max_memory_allocated"):
        assert getattr(bg.cuda, name)() == getattr(torch.cuda, name)() == 0
    assert bg.cuda.set_device(-1) is torch.cuda.set_device(-1) is None


def _sequences(lib, lengths=(2, 4, 3), features=2):
    rng = np.random.default_rng(7)
    return [lib.tensor(rng.standard_normal((n, features)), requires_grad=True) for n in lengths]


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_as_torch(batch_first, side):
    def run(lib):
        seqs = _sequences(lib)
        padded = lib.nn.utils.rnn.pad_sequence(seqs, batch_first=batch_first, padding_value=-1.5, padding_side=side)
        (padded * padded).sum().backward()
        return padded, [s.grad for s in seqs]

    (got, got_grads), (want, want_grads) = run(bg), run(torch)
    assert_same(got, want)
    for g, w in zip(got_grads, want_grads):
        assert_same(g, w)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [False, True])
def test_pack_and_pad_packed_sequence_as_torch(batch_first, enforce_sorted):
    lengths = [4, 3, 2] if enforce_sorted else [2, 4, 3]

    def run(lib):
        rnn = lib.nn.utils.rnn
        seqs = _sequences(lib, lengths)
        padded = rnn.pad_sequence(seqs, batch_first=batch_first)
        packed = rnn.pack_padded_sequence(padded, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
        unpacked, out_lengths = rnn.pad_packed_sequence(packed, batch_first=batch_first, total_length=5)
        (unpacked.cumsum(0) ** 2).sum().backward()
        return packed, unpacked, out_lengths, [s.grad for s in seqs]

    got, want = run(bg), run(torch)
    for field in ("data", "batch_sizes", "sorted_indices", "unsorted_indices"):
        g, w = getattr(got[0], field), getattr(want[0], field)
        assert (g is None) == (w is None)
        if g is not None:
            assert_same(g, w)
    for g, w in zip(got[1:3] + tuple(got[3]), want[1:3] + tuple(want[3])):
        assert_same(g, w)


def test_pack_sequence_round_trip():
    seqs = _sequences(bg, (3, 1, 2))
    packed = bg.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=False)
    assert isinstance(packed, tuple) and packed._fields == torch.nn.utils.rnn.PackedSequence._fields
    for got, want in zip(bg.nn.utils.rnn.unpack_sequence(packed), seqs):
        assert_same(got, want.detach().numpy())


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.nn.utils.rnn.pad_sequence([lib.ones(2)], padding_side="middle"),
        lambda lib: lib.nn.utils.rnn.pad_sequence([]),
        lambda lib: lib.nn.utils.rnn.pack_padded_sequence(lib.ones(3, 2), [1, 3]),
        lambda lib: lib.nn.utils.rnn.pack_padded_sequence(lib.ones(3, 2), [0, 3], enforce_sorted=False),
        lambda lib: lib.nn.utils.rnn.pad_packed_sequence(
            lib.nn.utils.rnn.pack_padded_sequence(lib.ones(3, 2), [3, 2]), total_length=2
        ),
    ],
)
def test_rnn_utils_errors_as_torch(call):
    raises_like_torch(call)
