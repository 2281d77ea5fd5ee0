"""batched_grad.multiprocessing against torch.multiprocessing: Python's multiprocessing names, the sharing-strategy
settings and spawn (fn(i, *args) in each process; the first failure raised in the parent)."""

import multiprocessing

import pytest
import torch.multiprocessing as torch_mp

import batched_grad.multiprocessing as mp
from _mp_workers import exit_with_code, raise_on_rank_one, write_rank


def test_the_names_of_pythons_multiprocessing_are_there():
    for name in multiprocessing.__all__:
        assert getattr(mp, name) is getattr(multiprocessing, name), name
    assert mp.cpu_count() == torch_mp.cpu_count()


def test_sharing_strategies_as_torch():
    assert mp.get_all_sharing_strategies() == torch_mp.get_all_sharing_strategies()
    assert mp.get_sharing_strategy() == torch_mp.get_sharing_strategy()
    mp.set_sharing_strategy("file_system")
    try:
        assert mp.get_sharing_strategy() == "file_system"
    finally:
        mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(AssertionError, match="invalid sharing strategy 'bogus'"):
        mp.set_sharing_strategy("bogus")


@pytest.mark.slow  # each child process imports batched_grad
def test_spawn_runs_fn_with_each_rank(tmp_path):
    assert mp.spawn(write_rank, args=(str(tmp_path), "r"), nprocs=3) is None
    assert sorted(p.read_text() for p in tmp_path.iterdir()) == ["r0", "r1", "r2"]


@pytest.mark.slow  # each child process imports batched_grad
def test_spawn_without_join_returns_the_context(tmp_path):
    context = mp.start_processes(write_rank, args=(str(tmp_path), "x"), nprocs=2, join=False)
    assert len(context.pids()) == 2
    while not context.join():
        pass
    assert context.join() is True
    assert sorted(p.read_text() for p in tmp_path.iterdir()) == ["x0", "x1"]


@pytest.mark.slow  # each child process imports batched_grad
def test_a_failing_rank_is_raised_with_its_traceback():
    with pytest.raises(mp.ProcessRaisedException, match="rank one failed on purpose") as caught:
        mp.spawn(raise_on_rank_one, nprocs=2)
    assert caught.value.error_index == 1
    assert "-- Process 1 terminated with the following error:" in str(caught.value)


@pytest.mark.slow  # each child process imports batched_grad
def test_an_exit_code_is_raised_as_torch_names_it():
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit code 3") as caught:
        mp.spawn(exit_with_code, args=(3,), nprocs=1)
    assert caught.value.exit_code == 3
