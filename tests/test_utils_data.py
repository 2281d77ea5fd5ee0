"""batched_grad.utils.data against torch.utils.data (torch 2.13): the same datasets through both DataLoaders give
batches of the same structure, dtypes and values; samplers, splits and argument errors as torch's; worker processes;
a training loop over a DataLoader."""

import collections
import gc
import itertools
import pickle
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.utils.data as tud  # noqa: E402

import batched_grad as bg  # noqa: E402
import batched_grad.utils.data as bud  # noqa: E402
from _data_workers import Doubled, Draws, SizedSquares, Squares  # noqa: E402
from batched_grad.utils.data import DataLoader, TensorDataset  # noqa: E402

Point = collections.namedtuple("Point", "x y")


def assert_same_batch(ours, theirs):
    """Same nesting (types of containers), same tensor dtypes, shapes and values."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, bg.Tensor), type(ours)
        assert str(ours.dtype) == str(theirs.dtype)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        return
    assert type(ours) is type(theirs), (type(ours), type(theirs))
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs)
        for key in theirs:
            assert_same_batch(ours[key], theirs[key])
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same_batch(a, b)
    else:
        assert ours == theirs


def both_loaders(samples, **options):
    """The batches of `samples` (a list) through torch's DataLoader and through ours."""
    return list(DataLoader(samples, **options)), list(tud.DataLoader(samples, **options))


def mixed_samples(n):
    """Samples holding every kind default_collate handles: numbers, NumPy arrays and scalars, strings, dicts,
    tuples, lists, namedtuples."""
    return [
        {
            "number": float(i) / 2,
            "count": i,
            "flag": i % 2 == 0,
            "array": np.arange(3, dtype=np.float32) + i,
            "scalar": np.int16(i),
            "name": f"s{i}",
            "pair": (i, float(i)),
            "list": [np.float64(i), i + 1],
            "point": Point(x=i, y=np.arange(2) * i),
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("batch_size, drop_last", [(2, False), (2, True), (5, False), (None, False)])
def test_mixed_samples_batch_as_torch(batch_size, drop_last):
    ours, theirs = both_loaders(mixed_samples(5), batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert_same_batch(a, b)


def test_tensor_dataset_batches_as_torch():
    x, y = np.random.default_rng(0).normal(size=(7, 3)).astype(np.float32), np.arange(7)
    ours = DataLoader(TensorDataset(bg.tensor(x), bg.tensor(y)), batch_size=3)
    theirs = tud.DataLoader(tud.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=3)
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs):
        assert_same_batch(a, b)
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(bg.zeros(2), bg.zeros(3))


def test_default_collate_and_convert_as_torch():
    batch = [(np.float64(1.5), "a", np.ones((2,), np.int32)), (np.float64(2.5), "b", np.zeros((2,), np.int32))]
    assert_same_batch(bud.default_collate(batch), tud.default_collate(batch))
    assert_same_batch(bud.default_convert(batch[0]), tud.default_convert(batch[0]))
    assert_same_batch(bud.default_convert(Point(np.int64(1), 2)), tud.default_convert(Point(np.int64(1), 2)))
    for bad in ([object(), object()], [np.array(["x"]), np.array(["y"])]):
        with pytest.raises(TypeError) as theirs:
            tud.default_collate(bad)
        with pytest.raises(TypeError) as ours:
            bud.default_collate(bad)
        assert str(ours.value).split(";")[0] == str(theirs.value).split(";")[0]
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        bud.default_collate([[1, 2], [3]])


def test_private_utils_paths_import_the_same_collate_and_worker_modules_as_torch():
    import batched_grad.utils.data._utils.collate as our_collate
    import batched_grad.utils.data._utils.worker as our_worker
    import torch.utils.data._utils.collate as their_collate

    assert our_collate is bud.collate and our_worker.get_worker_info is bud.get_worker_info
    for name in ("default_collate", "default_convert", "collate", "default_collate_fn_map", "collate_tensor_fn"):
        assert hasattr(their_collate, name) and hasattr(our_collate, name), name
    batch = [{"a": np.arange(2), "b": [1.0, Point(2, 3)]}, {"a": np.arange(2) + 5, "b": [4.0, Point(5, 6)]}]
    assert_same_batch(our_collate.default_collate(batch), their_collate.default_collate(batch))
    assert our_collate.np_str_obj_array_pattern.pattern == their_collate.np_str_obj_array_pattern.pattern
    assert bud._utils.MP_STATUS_CHECK_INTERVAL == tud._utils.MP_STATUS_CHECK_INTERVAL


@pytest.mark.parametrize("batch_size, drop_last", [(3, False), (3, True), (None, False)])
def test_iterable_dataset_batches_as_torch(batch_size, drop_last):
    class TorchSquares(tud.IterableDataset):
        def __iter__(self):
            return iter(i * i for i in range(8))

    ours = list(DataLoader(Squares(8), batch_size=batch_size, drop_last=drop_last))
    theirs = list(tud.DataLoader(TorchSquares(), batch_size=batch_size, drop_last=drop_last))
    assert_same_batch(ours, theirs)


def test_samplers_yield_as_torch():
    data = list(range(10))
    for ours, theirs in [
        (bud.SequentialSampler(data), tud.SequentialSampler(data)),
        (bud.BatchSampler(range(10), 4, False), tud.BatchSampler(range(10), 4, False)),
        (bud.BatchSampler(range(10), 4, True), tud.BatchSampler(range(10), 4, True)),
    ]:
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_an_endless_sampler_with_replacement_draws_as_it_is_read():
    """num_samples=10**10 (an endless loader, as makemore's): its blocks are drawn as they are read, as torch's."""
    data = list(range(37))
    ours = bud.RandomSampler(data, replacement=True, num_samples=10**10, generator=bg.Generator().manual_seed(5))
    theirs = tud.RandomSampler(data, replacement=True, num_samples=10**10, generator=torch.Generator().manual_seed(5))
    assert list(itertools.islice(ours, 100)) == list(itertools.islice(theirs, 100))


def test_random_samplers_draw_valid_reproducible_indices():
    data = list(range(10))
    shuffled = list(bud.RandomSampler(data, generator=bg.Generator().manual_seed(3)))
    assert sorted(shuffled) == data
    assert shuffled == list(bud.RandomSampler(data, generator=bg.Generator().manual_seed(3)))
    drawn = bud.RandomSampler(data, replacement=True, num_samples=70)
    assert len(drawn) == 70 and len(list(drawn)) == 70 and set(drawn) <= set(data)
    assert len(list(bud.RandomSampler(data, num_samples=25))) == 25  # passes repeat without replacement
    subset = list(bud.SubsetRandomSampler([5, 7, 9]))
    assert sorted(subset) == [5, 7, 9]
    weighted = list(bud.WeightedRandomSampler([0.0, 1.0, 0.0, 2.0], 50))
    assert len(weighted) == 50 and set(weighted) <= {1, 3}
    assert sorted(bud.WeightedRandomSampler([1.0, 1.0, 1.0], 3, replacement=False)) == [0, 1, 2]


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.RandomSampler([1, 2], replacement=1),
        lambda m: m.RandomSampler([1, 2], num_samples=0),
        lambda m: m.WeightedRandomSampler([1.0, 2.0], 0),
        lambda m: m.WeightedRandomSampler([[1.0, 2.0]], 1),
        lambda m: m.BatchSampler(range(3), 0, False),
        lambda m: m.BatchSampler(range(3), 2, 1),
    ],
)
def test_sampler_argument_errors_as_torch(make):
    with pytest.raises(Exception) as theirs:
        make(tud)
    with pytest.raises(type(theirs.value), match=None) as ours:
        make(bud)
    assert str(ours.value) == str(theirs.value)


def test_shuffle_is_reproducible_under_manual_seed():
    def one_pass(seed):
        bg.manual_seed(seed)
        return [b.tolist() for b in DataLoader(range(20), batch_size=6, shuffle=True)]

    first = one_pass(7)
    assert first == one_pass(7) and first != one_pass(8)
    assert sorted(sum(first, [])) == list(range(20))
    with_generator = [DataLoader(range(20), shuffle=True, generator=bg.Generator().manual_seed(1)) for _ in "ab"]
    assert [b.tolist() for b in with_generator[0]] == [b.tolist() for b in with_generator[1]]


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.3, 0.4], [0.5, 0.5], [1 / 3] * 3])
def test_random_split_lengths_as_torch(lengths):
    ours = bud.random_split(range(10), lengths, generator=bg.Generator().manual_seed(0))
    theirs = tud.random_split(range(10), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert sorted(i for s in ours for i in s) == list(range(10))
    again = bud.random_split(range(10), lengths, generator=bg.Generator().manual_seed(0))
    assert [list(s) for s in ours] == [list(s) for s in again]


def test_random_split_errors_as_torch():
    for module in (tud, bud):
        with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
            module.random_split(range(10), [3, 3])
        with pytest.raises(ValueError, match="Fraction at index 1 is not between 0 and 1"):
            module.random_split(range(10), [0.5, 1.5, -1.0])


def test_concat_chain_subset_datasets():
    joined = bud.TensorDataset(bg.arange(3)) + bud.TensorDataset(bg.arange(10, 12))
    assert isinstance(joined, bud.ConcatDataset) and len(joined) == 5
    assert [int(joined[i][0]) for i in range(-5, 5)] == [0, 1, 2, 10, 11] * 2
    assert list(Squares(3) + Squares(2)) == [0, 1, 4, 0, 1]
    subset = bud.Subset(joined, [4, 0])
    assert [int(s[0]) for s in subset] == [11, 0] and len(subset) == 2
    stacked = bud.StackDataset(a=range(3), b="xyz")
    assert stacked[1] == {"a": 1, "b": "y"} and len(stacked) == 3
    with pytest.raises(AssertionError, match="ConcatDataset does not support IterableDataset"):
        bud.ConcatDataset([Squares(1)])


@pytest.mark.parametrize(
    "options",
    [
        dict(shuffle=True, sampler=[0, 1]),
        dict(batch_sampler=[[0]], batch_size=2),
        dict(batch_sampler=[[0]], drop_last=True),
        dict(batch_size=None, drop_last=True),
        dict(num_workers=-1),
        dict(timeout=-1),
        dict(prefetch_factor=2),
        dict(persistent_workers=True),
        dict(multiprocessing_context="spawn"),
        dict(num_workers=1, multiprocessing_context="no-such-method"),
        dict(num_workers=1, multiprocessing_context=3),
    ],
)
def test_dataloader_argument_errors_as_torch(options):
    with pytest.raises(Exception) as theirs:
        tud.DataLoader(list(range(4)), **options)
    with pytest.raises(type(theirs.value)) as ours:
        DataLoader(list(range(4)), **options)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("options", [dict(shuffle=True), dict(sampler=[0]), dict(batch_sampler=[[0]])])
def test_iterable_dataset_option_errors_as_torch(options):
    class TorchSquares(tud.IterableDataset):
        def __iter__(self):
            return iter(range(2))

    with pytest.raises(ValueError) as theirs:
        tud.DataLoader(TorchSquares(), **options)
    with pytest.raises(ValueError) as ours:
        DataLoader(Squares(2), **options)
    assert str(ours.value).split("got")[0] == str(theirs.value).split("got")[0]


def test_loader_len_attributes_and_frozen_options():
    loader = DataLoader(list(range(10)), batch_size=4, drop_last=True)
    assert len(loader) == 2 and loader.batch_size == 4 and loader.drop_last
    with pytest.raises(TypeError):  # an IterableDataset without __len__
        len(DataLoader(Squares(10), batch_size=4))
    sized = bud.ChainDataset([bud.ChainDataset([]), SizedSquares(10)])
    assert len(DataLoader(sized, batch_size=4)) == 3 and len(DataLoader(sized, batch_size=4, drop_last=True)) == 2
    understated = DataLoader(bud.Subset(SizedSquares(3), []), batch_size=None)  # a map-style one: no check
    assert len(understated) == 0 and list(understated) == []
    lying = DataLoader(SizedSquares(3), batch_size=None)
    lying.dataset.n = 1
    assert len(lying) == 1
    lying.dataset.n = 3
    with pytest.warns(UserWarning, match="was reported to be 1"):
        list(lying)
    with pytest.raises(ValueError, match="batch_size attribute should not be set after DataLoader is initialized"):
        loader.batch_size = 3
    assert len(DataLoader(list(range(10)), batch_sampler=[[0, 1], [2]])) == 2


def test_worker_processes_give_the_single_process_batches():
    expected = list(DataLoader(Doubled(11), batch_size=3))
    loader = DataLoader(Doubled(11), batch_size=3, num_workers=2)
    for _ in range(2):  # a second pass starts new workers
        got = list(loader)
        assert len(got) == len(expected) == 4
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())
            assert a[1].tolist() == b[1].tolist() and a[1].dtype == bg.int64
    stream = DataLoader(Squares(9), batch_size=2, num_workers=2, persistent_workers=True)
    for _ in range(2):  # the same workers serve both passes
        assert sorted(v for batch in stream for v in batch.tolist()) == [i * i for i in range(9)]


def test_workers_draw_as_torchs_and_take_the_default_dtype():
    """Each worker's NumPy, Python and library generators start where torch's do (NumPy from a SeedSequence over
    the worker id and base seed's two halves), and a Python float there takes the main process's default dtype."""
    passes = []
    for lib in (bg, torch):
        lib.manual_seed(0)
        lib.set_default_dtype(lib.float64)
        try:
            loader = lib.utils.data.DataLoader(Draws(6, lib.__name__), batch_size=2, num_workers=2, collate_fn=list)
            passes.append([sample for batch in loader for sample in batch])
        finally:
            lib.set_default_dtype(lib.float32)
    assert passes[0] == passes[1]
    assert {dtype for _, dtype in passes[0]} == {"torch.float64"}


@pytest.mark.parametrize("persistent", [False, True])
def test_workers_that_cannot_start_draw_in_process_as_torchs_would(persistent):
    """A dataset defined in a function cannot reach a worker process, so its batches load in the main process;
    each is still read under the generators of the worker torch hands it to (batch i to worker i % 2), seeded as
    that worker and moved by its own reads only, get_worker_info() and worker_init_fn included, over two passes."""
    import random

    def run(lib):
        class Local:
            def __getitem__(self, i):
                info = lib.utils.data.get_worker_info()
                return [i, info.id, int(np.random.randint(10**6)), random.randrange(100), float(lib.rand(()))]

            def __len__(self):
                return 7

        def init(worker_id):
            np.random.seed(np.random.randint(1000) + 17 * worker_id)

        lib.manual_seed(3)
        loader = lib.utils.data.DataLoader(
            Local(), batch_size=2, shuffle=True, num_workers=2, worker_init_fn=init, persistent_workers=persistent
        )
        main_draw = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # batched_grad's: the workers cannot start
            passes = [[sample for batch in loader for sample in zip(*batch)] for _ in range(2)]
        main_draw.append(float(lib.rand(())))
        return [[[float(v) for v in sample] for sample in p] for p in passes], main_draw

    state = (random.getstate(), np.random.get_state())
    got = run(bg)
    random.setstate(state[0])
    np.random.set_state(state[1])
    assert got == run(torch)


def test_worker_exception_reaches_the_main_process():
    loader = DataLoader(Doubled(6, fail=True), batch_size=2, num_workers=2)
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 1"):
        list(loader)


def test_workers_of_a_pass_collected_in_a_cycle_exit_promptly():
    def failed_pass():
        try:
            list(DataLoader(Doubled(6, fail=True), batch_size=2, num_workers=2))
        except KeyError as error:
            return error  # its traceback holds the pass's iterator in a reference cycle

    error = failed_pass()
    workers = error.__traceback__.tb_next.tb_frame.f_locals["self"]._workers
    del error
    gc.collect()
    # each exited by itself when told to (exit code 0), none terminated after the join's timeout
    assert [w.exitcode for w in workers] == [0] * len(workers)


def test_training_loop_over_a_dataloader():
    bg.manual_seed(0)
    x = bg.randn(64, 3)
    y = x @ bg.tensor([[1.0], [-2.0], [0.5]]) + 0.3
    model = bg.nn.Linear(3, 1)
    optimizer = bg.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = bg.nn.MSELoss()
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    for _ in range(30):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
    assert float(loss_fn(model(x), y).detach()) < 1e-3


def test_loader_iterator_cannot_be_pickled():
    with pytest.raises(NotImplementedError):
        pickle.dumps(iter(DataLoader([1, 2])))


class TorchSamples(tud.Dataset):
    """A dataset from a torch-based library (as torchvision's, whose transforms end in torch tensors)."""

    def __len__(self):
        return 5

    def __getitem__(self, i):
        image = torch.arange(6, dtype=torch.float32).reshape(2, 3) * i
        return image, torch.tensor(i), {"mask": torch.tensor([i % 2 == 0]), "half": torch.ones(2, dtype=torch.float16)}


@pytest.mark.parametrize("batch_size", [None, 2])
def test_torch_tensors_of_a_dataset_become_batches_as_in_torch(batch_size):
    ours = list(DataLoader(TorchSamples(), batch_size=batch_size))
    theirs = list(tud.DataLoader(TorchSamples(), batch_size=batch_size))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert_same_batch(a, b)


def test_a_dataset_torch_tensor_that_requires_grad_is_refused():
    samples = [torch.ones(2, requires_grad=True)] * 2
    with pytest.raises(TypeError, match="a torch.Tensor was passed"):
        bud.default_collate(samples)
    with pytest.raises(TypeError, match="a torch.Tensor was passed"):
        bud.default_convert(samples[0])


@pytest.mark.parametrize(
    "n, replicas, shuffle, drop_last",
    [(10, 3, True, False), (10, 3, True, True), (7, 2, False, False), (2, 5, True, False), (12, 4, False, True)],
)
def test_distributed_sampler_shares_as_torch(n, replicas, shuffle, drop_last):
    import torch.utils.data.distributed as tdist

    from batched_grad.utils.data.distributed import DistributedSampler

    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle=shuffle, seed=3, drop_last=drop_last)
        theirs = tdist.DistributedSampler(range(n), replicas, rank, shuffle=shuffle, seed=3, drop_last=drop_last)
        for epoch in (0, 4):
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)
    loader = DataLoader(range(n), batch_size=2, sampler=bud.DistributedSampler(range(n), replicas, 0, seed=1))
    assert [b.tolist() for b in loader] == [
        b.tolist()
        for b in tud.DataLoader(range(n), batch_size=2, sampler=tdist.DistributedSampler(range(n), replicas, 0, seed=1))
    ]


def test_distributed_sampler_errors_as_torch():
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
        bud.DistributedSampler(range(4), num_replicas=3, rank=3)
    with pytest.raises(RuntimeError, match="Requires distributed package to be available"):
        bud.DistributedSampler(range(4))
