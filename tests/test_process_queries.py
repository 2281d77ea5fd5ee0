"""The queries scripts guard their code with. torch.distributed's: with no process groups here, is_available() is
False, nothing is initialized, and the calls that need the default group raise torch's error for a process that has
none. torch.cpu's: one device, always available."""

import pytest
import torch.distributed as torch_dist

import batched_grad as bg


def test_guards_keep_a_script_off_its_distributed_branch():
    assert bg.distributed.is_available() is False
    assert bg.distributed.is_initialized() is torch_dist.is_initialized() is False
    assert not (bg.distributed.is_available() and bg.distributed.is_initialized())
    assert not any(f() for f in (bg.distributed.is_nccl_available, bg.distributed.is_mpi_available))


def test_torchelastic_launch_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert bg.distributed.is_torchelastic_launched() is torch_dist.is_torchelastic_launched() is False
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "run-1")
    assert bg.distributed.is_torchelastic_launched() is torch_dist.is_torchelastic_launched() is True


@pytest.mark.parametrize("name", ["get_rank", "get_world_size"])
def test_calls_needing_the_default_group_fail_as_in_torch(name):
    with pytest.raises(ValueError) as theirs:
        getattr(torch_dist, name)()
    with pytest.raises(ValueError) as ours:
        getattr(bg.distributed, name)()
    assert str(ours.value) == str(theirs.value)


def test_starting_a_process_group_is_refused_by_name():
    with pytest.raises(RuntimeError, match="no torch.distributed process groups"):
        bg.distributed.init_process_group("gloo", rank=0, world_size=1)


def test_cpu_queries_answer_as_torch():
    import torch

    for name in ("is_available", "device_count", "current_device", "synchronize"):
        assert getattr(bg.cpu, name)() == getattr(torch.cpu, name)(), name


def test_onnx_module_imports_and_reports_no_export_in_progress():
    import torch.onnx as torch_onnx

    import batched_grad.onnx

    assert batched_grad.onnx.is_in_onnx_export() is torch_onnx.is_in_onnx_export() is False
    assert bg.onnx is batched_grad.onnx


def test_onnx_export_is_refused_with_the_exporter_error():
    with pytest.raises(RuntimeError, match="cannot be exported to ONNX") as caught:
        bg.onnx.export(bg.nn.Linear(2, 1), (bg.zeros(1, 2),), "model.onnx")
    assert type(caught.value).__name__ == "OnnxExporterError"


def test_accelerator_queries_answer_as_torch_without_one():
    import torch

    assert bg.accelerator.is_available() is torch.accelerator.is_available() is False
    assert bg.accelerator.current_accelerator() is torch.accelerator.current_accelerator() is None
    assert bg.accelerator.device_count() == torch.accelerator.device_count() == 0
    # the device choice recent programs make
    chosen = bg.accelerator.current_accelerator() if bg.accelerator.is_available() else bg.device("cpu")
    assert chosen == bg.device("cpu")


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.accelerator.current_device_index(),
        lambda m: m.accelerator.synchronize(),
        lambda m: m.accelerator.empty_cache(),
        lambda m: m.accelerator.memory_allocated(),
        lambda m: m.accelerator.set_device_index(0),
        lambda m: m.xpu.synchronize(),
        lambda m: m.xpu.current_device(),
    ],
    ids=[
        "current_device_index",
        "synchronize",
        "empty_cache",
        "memory_allocated",
        "set_device_index",
        "xpu-sync",
        "xpu-device",
    ],
)
def test_calls_needing_a_device_fail_as_in_torch_without_one(call):
    import torch

    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(bg)
    assert str(ours.value) == str(theirs.value)


def test_xpu_guards_and_seeding_answer_as_torch_without_xpu():
    import torch

    for name in ("is_available", "device_count", "is_initialized", "empty_cache"):
        assert getattr(bg.xpu, name)() == getattr(torch.xpu, name)(), name
    assert bg.xpu.manual_seed(3) is torch.xpu.manual_seed(3) is None
    assert bg.xpu.manual_seed_all(3) is torch.xpu.manual_seed_all(3) is None
