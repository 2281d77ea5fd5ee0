"""Names that ordinary PyTorch programs call and expect to exist: torch.cuda's seeding and queries,
torch.backends' switches, new attributes on tensors, range indices, state_dicts of shared modules and the module
paths of torch.nn.modules; each compared with torch 2.13."""

import pytest

torch = pytest.importorskip("torch")

import batched_grad as bg  # noqa: E402

no_gpu = pytest.mark.skipif(bg.cuda.is_available(), reason="torch's behaviour without CUDA")


def _outcome(call):
    try:
        return ("returns", call())
    except Exception as error:  # noqa: BLE001  (compared with torch's)
        return (type(error).__name__, str(error))


@no_gpu
@pytest.mark.parametrize(
    "name, args",
    [
        ("manual_seed", (3,)),
        ("manual_seed_all", (3,)),
        ("is_available", ()),
        ("device_count", ()),
        ("is_initialized", ()),
        ("synchronize", ()),
        ("empty_cache", ()),
        ("current_device", ()),
        ("get_device_name", ()),
        ("memory_allocated", ()),
        ("max_memory_allocated", ()),
        ("is_bf16_supported", ()),
        ("seed", ()),
        ("seed_all", ()),
        ("get_rng_state_all", ()),
        ("set_rng_state_all", ([],)),
    ],
)
def test_cuda_calls_without_a_gpu_match_torch(name, args):
    ours = _outcome(lambda: getattr(bg.cuda, name)(*args))
    assert ours == _outcome(lambda: getattr(torch.cuda, name)(*args))


def test_cuda_manual_seed_leaves_the_host_stream_alone():
    bg.manual_seed(5)
    expected = bg.rand(3)
    bg.manual_seed(5)
    bg.cuda.manual_seed(11)
    bg.cuda.manual_seed_all(12)
    assert bg.equal(bg.rand(3), expected)


def test_cudnn_switches_are_settable_as_torch():
    cudnn = bg.backends.cudnn
    names = ("deterministic", "benchmark", "enabled", "allow_tf32")
    assert [getattr(cudnn, n) for n in names] == [getattr(torch.backends.cudnn, n) for n in names]
    saved = [getattr(cudnn, n) for n in names]
    try:
        cudnn.deterministic, cudnn.benchmark = True, True
        assert cudnn.deterministic and cudnn.benchmark
        with cudnn.flags(enabled=False):
            assert not cudnn.enabled and not cudnn.deterministic
        assert cudnn.enabled and cudnn.deterministic
    finally:
        for name, value in zip(names, saved):
            setattr(cudnn, name, value)


@no_gpu
def test_backend_queries_match_torch_without_accelerators():
    assert bg.backends.mps.is_available() is torch.backends.mps.is_available() is False
    assert bg.backends.mps.is_built() is torch.backends.mps.is_built()
    assert bg.backends.cudnn.is_available() is torch.backends.cudnn.is_available()
    assert bg.backends.cudnn.version() == torch.backends.cudnn.version()
    assert bg.backends.cuda.is_built() is torch.backends.cuda.is_built()


def test_cuda_matmul_switches_match_torch():
    names = ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")
    matmul = bg.backends.cuda.matmul
    assert [getattr(matmul, n) for n in names] == [getattr(torch.backends.cuda.matmul, n) for n in names]
    matmul.allow_tf32 = True
    try:
        assert matmul.allow_tf32 is True
    finally:
        matmul.allow_tf32 = False
    for lib in (torch, bg):
        with pytest.raises(AttributeError, match="Unknown attribute no_such_switch"):
            lib.backends.cuda.matmul.no_such_switch = 1
    bg.backends.cuda.enable_flash_sdp(False)
    assert bg.backends.cuda.flash_sdp_enabled() is False
    bg.backends.cuda.enable_flash_sdp(True)


# ---- attributes a program adds to tensors ----------------------------------------------------------------------
def test_tensors_and_parameters_take_new_attributes():
    for lib in (torch, bg):
        t = lib.ones(3)
        t.my_flag = 1
        p = lib.nn.Parameter(lib.zeros(2))
        p.hess = t
        assert t.my_flag == 1 and p.hess is t
        assert vars(t) == {"my_flag": 1}
        assert "my_flag" not in vars(t.detach()) and "my_flag" not in vars(t.clone())


def test_added_attributes_follow_deepcopy_and_pickle_as_torch():
    import copy
    import pickle

    for lib in (torch, bg):
        t = lib.ones(2)
        t.note = [1, 2]
        assert copy.deepcopy(t).note == [1, 2]
        assert copy.deepcopy(t).note is not t.note
        assert pickle.loads(pickle.dumps(t)).note == [1, 2]
        p = lib.nn.Parameter(lib.ones(2))
        p.hess = 3
        assert not hasattr(copy.deepcopy(p), "hess")  # torch's Parameter copy drops them


# ---- range indices -------------------------------------------------------------------------------------------------
RANGE_INDICES = {
    "rows": lambda lib: (range(2),),
    "rows-and-columns": lambda lib: (range(3), lib.tensor([0, 3, 1])),
    "two-ranges": lambda lib: (range(3), range(1, 4)),
    "stepped-columns": lambda lib: (slice(None), range(0, 4, 2)),
    "empty": lambda lib: (range(0),),
    "in-a-list": lambda lib: [range(2), [1, 2]],
}


@pytest.mark.parametrize("name", sorted(RANGE_INDICES))
def test_range_indices_as_torch(name):
    import numpy as np

    results = []
    for lib in (torch, bg):
        x = lib.arange(12.0).reshape(3, 4).requires_grad_()
        index = RANGE_INDICES[name](lib)
        with pytest.warns(UserWarning) if isinstance(index, list) and lib is torch else _nothing():
            y = x[index if isinstance(index, list) else tuple(index)]
        (y * y).sum().backward()
        results.append((np.asarray(y.detach().tolist()), np.asarray(x.grad.tolist())))
    assert results[1][0].shape == results[0][0].shape
    np.testing.assert_array_equal(results[1][0], results[0][0])
    np.testing.assert_array_equal(results[1][1], results[0][1])


def test_range_index_assignment_and_bounds_as_torch():
    outcomes = []
    for lib in (torch, bg):
        x = lib.zeros(3, 4)
        x[range(3), range(3)] = 1.0
        outcomes.append(x.tolist())
        with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
            x[range(4)]
    assert outcomes[1] == outcomes[0]


def _nothing():
    import contextlib

    return contextlib.nullcontext()


# ---- state_dicts of shared modules and parameters ------------------------------------------------------------------
def _shared_models(lib):
    """A model with one Linear registered twice, and one Parameter under two names."""
    lin = lib.nn.Linear(2, 2)
    model = lib.nn.Sequential(lib.nn.ModuleList([lin, lib.nn.ReLU(), lin]), lib.nn.Linear(2, 1))
    model[1].tied = model[1].weight
    return model


def test_state_dict_keeps_every_name_of_a_shared_module():
    mine, theirs = _shared_models(bg), _shared_models(torch)
    assert list(mine.state_dict()) == list(theirs.state_dict())
    assert len(list(mine.parameters())) == len(list(theirs.parameters())) == 4
    assert [n for n, _ in mine.named_parameters()] == [n for n, _ in theirs.named_parameters()]


def test_load_state_dict_of_a_shared_module_as_torch():
    mine, source = _shared_models(bg), _shared_models(bg)
    mine.load_state_dict(source.state_dict())
    for key, value in source.state_dict().items():
        assert bg.equal(mine.state_dict()[key], value)
    errors = []
    for model in (mine, _shared_models(torch)):
        state = {k: v for k, v in model.state_dict().items() if not k.startswith("0.2.")}
        with pytest.raises(RuntimeError) as info:
            model.load_state_dict(state)
        errors.append(str(info.value).split("\n", 1)[1])
    assert errors[0] == errors[1]


# ---- torch.nn.modules' file layout --------------------------------------------------------------------------------
def _layout_classes():
    from batched_grad.nn.modules import TORCH_FILES

    return [(file, name) for file, names in TORCH_FILES.items() for name in names.split()]


def test_nn_modules_paths_name_torchs_classes():
    import importlib

    for file, name in _layout_classes():
        ours = importlib.import_module(f"batched_grad.nn.modules.{file}")
        theirs = importlib.import_module(f"torch.nn.modules.{file}")
        assert getattr(ours, name).__name__ == getattr(theirs, name).__name__ == name
        if not name.startswith("_") and hasattr(torch.nn, name):
            assert getattr(ours, name) is getattr(bg.nn, name)
            assert getattr(bg.nn.modules, name) is getattr(bg.nn, name)


def test_nn_modules_class_hierarchy_matches_torch():
    """Every subclass relation among the classes of the layout is torch's (so isinstance against a private base
    such as _BatchNorm, _NormBase, _ConvNd, _Loss or _DropoutNd answers as in torch)."""
    import importlib

    pairs = [
        (importlib.import_module(f"batched_grad.nn.modules.{f}"), importlib.import_module(f"torch.nn.modules.{f}"), n)
        for f, n in _layout_classes()
    ]
    wrong = [
        (a_name, b_name)
        for a_ours, a_theirs, a_name in pairs
        for b_ours, b_theirs, b_name in pairs
        if issubclass(getattr(a_ours, a_name), getattr(b_ours, b_name))
        != issubclass(getattr(a_theirs, a_name), getattr(b_theirs, b_name))
    ]
    assert not wrong


def test_isinstance_against_private_bases_as_torch():
    from batched_grad.nn.modules.batchnorm import _BatchNorm, _NormBase

    for norm in (bg.nn.BatchNorm1d(3), bg.nn.BatchNorm2d(3), bg.nn.BatchNorm3d(3)):
        assert isinstance(norm, _BatchNorm) and isinstance(norm, _NormBase)
    assert not isinstance(bg.nn.InstanceNorm2d(3), _BatchNorm)
    assert isinstance(bg.nn.InstanceNorm2d(3), _NormBase)
    assert isinstance(bg.nn.CrossEntropyLoss(), bg.nn.modules.loss._WeightedLoss)
    assert isinstance(bg.nn.Conv2d(1, 1, 1), bg.nn.modules.conv._ConvNd)


def test_a_checkpoint_of_cpu_and_gpu_rng_states_resumes_the_stream():
    """Training scripts save torch.get_rng_state() with torch.cuda.get_rng_state_all() and restore both: the
    stream continues where it was."""
    bg.manual_seed(0)
    saved = {"cpu": bg.get_rng_state(), "cuda": bg.cuda.get_rng_state_all()}
    expected = bg.rand(4)
    bg.rand(7)
    bg.set_rng_state(saved["cpu"])
    bg.cuda.set_rng_state_all(saved["cuda"])
    assert bg.equal(bg.rand(4), expected)
    with pytest.raises(TypeError, match="expected uint8 state tensors"):
        bg.cuda.set_rng_state_all([bg.zeros(3)])
    import batched_grad.utils.data.dataloader as loader_module

    assert loader_module.get_worker_info is bg.utils.data.get_worker_info
