"""torch.optim.lr_scheduler: each scheduler, driven side by side with torch's over the same optimizer settings,
gives the same lr (and cycled momentum) at every step, float for float; state_dicts round-trip; the warnings are
torch's."""

import importlib
import inspect
import math
import warnings

import pytest

torch = pytest.importorskip("torch")

import batched_grad as bg  # noqa: E402
from batched_grad.optim import lr_scheduler as ours  # noqa: E402

STEPS = 30


def _optimizers(kind="SGD", groups=2, **settings):
    """The same optimizer in both libraries, over `groups` param groups with different lrs."""
    made = []
    for lib in (torch, bg):
        params = [{"params": [lib.nn.Parameter(lib.ones(3))], "lr": 0.1 * (i + 1)} for i in range(groups)]
        made.append(getattr(lib.optim, kind)(params, **settings))
    return made


def _half(epoch):
    return 0.5**epoch


def _decay(epoch):
    return 0.95


# (name, optimizer, settings, scheduler arguments as a function of the library's scheduler module)
CASES = {
    "LambdaLR": ("SGD", {}, lambda m: {"lr_lambda": _half}),
    "MultiplicativeLR": ("SGD", {}, lambda m: {"lr_lambda": _decay}),
    "StepLR": ("SGD", {}, lambda m: {"step_size": 4, "gamma": 0.3}),
    "MultiStepLR": ("SGD", {}, lambda m: {"milestones": [3, 7, 7, 20], "gamma": 0.5}),
    "ConstantLR": ("SGD", {}, lambda m: {"factor": 0.25, "total_iters": 6}),
    "LinearLR": ("SGD", {}, lambda m: {"start_factor": 0.1, "end_factor": 0.9, "total_iters": 12}),
    "ExponentialLR": ("SGD", {}, lambda m: {"gamma": 0.9}),
    "PolynomialLR": ("SGD", {}, lambda m: {"total_iters": 17, "power": 2.5}),
    "CosineAnnealingLR": ("SGD", {}, lambda m: {"T_max": 7, "eta_min": 0.001}),
    "CosineAnnealingWarmRestarts": ("SGD", {}, lambda m: {"T_0": 3, "T_mult": 2, "eta_min": 0.01}),
    "CyclicLR": ("SGD", {"momentum": 0.9}, lambda m: {"base_lr": 0.01, "max_lr": 0.2, "step_size_up": 4}),
    "CyclicLR-triangular2": (
        "SGD",
        {"momentum": 0.9},
        lambda m: {
            "base_lr": 0.01,
            "max_lr": [0.2, 0.3],
            "step_size_up": 3,
            "step_size_down": 5,
            "mode": "triangular2",
        },
    ),
    "CyclicLR-exp_range-Adam": (
        "Adam",
        {},
        lambda m: {"base_lr": 0.01, "max_lr": 0.2, "step_size_up": 5, "mode": "exp_range", "gamma": 0.97},
    ),
    "OneCycleLR": ("SGD", {"momentum": 0.9}, lambda m: {"max_lr": 0.5, "total_steps": STEPS + 1}),
    "OneCycleLR-three-linear-Adam": (
        "Adam",
        {},
        lambda m: {
            "max_lr": [0.5, 0.2],
            "epochs": 4,
            "steps_per_epoch": 8,
            "three_phase": True,
            "anneal_strategy": "linear",
        },
    ),
    "SequentialLR": (
        "SGD",
        {},
        lambda m: {"milestones": [5, 12]},
    ),
}


def _build(lib_module, opt, name):
    arguments = CASES[name][2]
    if name == "SequentialLR":
        inner = [
            lib_module.LinearLR(opt, start_factor=0.2, total_iters=5),
            lib_module.ExponentialLR(opt, gamma=0.8),
            lib_module.StepLR(opt, step_size=3, gamma=0.5),
        ]
        return lib_module.SequentialLR(opt, inner, **arguments(lib_module))
    return getattr(lib_module, name.split("-")[0])(opt, **arguments(lib_module))


def _hyper(opt):
    return [(g["lr"], g.get("momentum"), g.get("betas")) for g in opt.param_groups]


def _run(name, steps=STEPS):
    kind, settings, _ = CASES[name]
    trajectories = []
    for module, opt in zip((torch.optim.lr_scheduler, ours), _optimizers(kind, **settings)):
        scheduler = _build(module, opt, name)
        seen = [(scheduler.get_last_lr(), _hyper(opt))]
        for _ in range(steps):
            opt.step()
            scheduler.step()
            seen.append((scheduler.get_last_lr(), _hyper(opt)))
        trajectories.append(seen)
    return trajectories


@pytest.mark.parametrize("name", sorted(CASES))
def test_lr_sequence_matches_torch(name):
    expected, got = _run(name)
    assert got == expected


def test_chained_scheduler_matches_torch():
    runs = []
    for module, opt in zip((torch.optim.lr_scheduler, ours), _optimizers()):
        chain = module.ChainedScheduler(
            [module.ConstantLR(opt, factor=0.5, total_iters=4), module.ExponentialLR(opt, 0.9)]
        )
        lrs = [chain.get_last_lr()]
        for _ in range(STEPS):
            opt.step()
            chain.step()
            lrs.append(chain.get_last_lr())
        runs.append(lrs)
    assert runs[1] == runs[0]


def test_reduce_lr_on_plateau_matches_torch():
    metrics = [1.0, 0.9, 0.9, 0.95, 0.9, 0.91, 0.92, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6] * 2
    runs = []
    for module, opt in zip((torch.optim.lr_scheduler, ours), _optimizers()):
        plateau = module.ReduceLROnPlateau(opt, patience=2, cooldown=1, factor=0.5, min_lr=[0.0, 0.04])
        lrs = []
        for metric in metrics:
            opt.step()
            plateau.step(metric)
            lrs.append((plateau.get_last_lr(), plateau.num_bad_epochs, plateau.best, plateau.last_epoch))
        runs.append(lrs)
    assert runs[1] == runs[0]


@pytest.mark.parametrize("name", ["StepLR", "CosineAnnealingLR", "CyclicLR", "OneCycleLR", "SequentialLR", "LambdaLR"])
def test_state_dict_round_trip_resumes_the_schedule(name):
    """A scheduler rebuilt and loaded from another's state_dict halfway continues exactly as the original."""
    kind, settings, _ = CASES[name]
    _, opt = _optimizers(kind, **settings)
    first = _build(ours, opt, name)
    for _ in range(10):
        opt.step()
        first.step()
    saved = first.state_dict()
    assert "optimizer" not in saved
    _, other = _optimizers(kind, **settings)
    second = _build(ours, other, name)
    second.load_state_dict(saved)
    other.load_state_dict(opt.state_dict())
    for _ in range(10):
        opt.step(), other.step()
        first.step(), second.step()
        assert second.get_last_lr() == first.get_last_lr()
        assert second.last_epoch == first.last_epoch


def test_state_dict_keys_match_torch():
    for name in ("StepLR", "LambdaLR", "CyclicLR", "SequentialLR", "OneCycleLR"):
        kind, settings, _ = CASES[name]
        mine = [_build(m, o, name) for m, o in zip((torch.optim.lr_scheduler, ours), _optimizers(kind, **settings))]
        assert set(mine[1].state_dict()) <= set(mine[0].state_dict()), name


def test_initial_lr_base_lrs_and_last_epoch():
    for module, opt in zip((torch.optim.lr_scheduler, ours), _optimizers()):
        scheduler = module.StepLR(opt, step_size=2)
        assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.2]
        assert scheduler.base_lrs == [0.1, 0.2]
        assert scheduler.last_epoch == 0


def test_resuming_without_initial_lr_is_a_key_error():
    _, opt = _optimizers()
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\]"):
        ours.StepLR(opt, step_size=2, last_epoch=3)


def _warnings_of(make_and_step):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_and_step()
    return [str(w.message) for w in caught]


def test_warns_when_scheduler_steps_before_optimizer():
    found = []
    for module, opt in zip((torch.optim.lr_scheduler, ours), _optimizers()):
        found.append(_warnings_of(lambda m=module, o=opt: m.StepLR(o, 3).step()))
    assert found[1] == found[0]
    assert any("before `optimizer.step()`" in text for text in found[1])

    _, opt = _optimizers()
    scheduler = ours.StepLR(opt, 3)

    def in_order():
        opt.step()
        scheduler.step()

    assert _warnings_of(in_order) == []


def test_epoch_argument_is_deprecated_and_uses_the_closed_form():
    results = []
    for module, opt in zip((torch.optim.lr_scheduler, ours), _optimizers()):
        scheduler = module.StepLR(opt, step_size=3, gamma=0.5)
        opt.step()
        texts = _warnings_of(lambda s=scheduler: s.step(7))
        results.append((texts, scheduler.get_last_lr(), scheduler.last_epoch))
    assert results[1] == results[0]
    assert any("epoch parameter" in t for t in results[1][0])


def test_get_lr_outside_step_warns():
    _, opt = _optimizers()
    scheduler = ours.ExponentialLR(opt, 0.5)
    assert any("get_last_lr()" in t for t in _warnings_of(scheduler.get_lr))


def test_errors_match_torch():
    for make in (
        lambda m, o: m.ConstantLR(o, factor=2.0),
        lambda m, o: m.LinearLR(o, start_factor=0.0),
        lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=0),
        lambda m, o: m.OneCycleLR(o, max_lr=1.0),
        lambda m, o: m.CyclicLR(o, 0.1, [1.0]),
        lambda m, o: m.LambdaLR(o, [_half]),
        lambda m, o: m.ReduceLROnPlateau(o, factor=1.0),
        lambda m, o: m.StepLR(object(), 3),
    ):
        errors = []
        for module, opt in zip((torch.optim.lr_scheduler, ours), _optimizers("SGD")):
            with pytest.raises(Exception) as info:
                make(module, opt)
            errors.append((type(info.value), str(info.value)))
        assert errors[1] == errors[0]


def test_one_cycle_past_total_steps_raises():
    _, opt = _optimizers("SGD", momentum=0.9)
    scheduler = ours.OneCycleLR(opt, max_lr=1.0, total_steps=2)
    opt.step()
    scheduler.step()
    scheduler.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        scheduler.step()


def test_cosine_warm_restarts_fractional_epochs_match_torch():
    runs = []
    for module, opt in zip((torch.optim.lr_scheduler, ours), _optimizers()):
        scheduler = module.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=3)
        lrs = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for epoch in (0.5, 1.25, 2.0, 7.5, 11.0, 30.2):
                scheduler.step(epoch)
                lrs.append(scheduler.get_last_lr())
        runs.append(lrs)
    assert runs[1] == runs[0]


def test_legacy_alias_and_subclassing():
    assert issubclass(ours._LRScheduler, ours.LRScheduler)

    class Halving(ours.LRScheduler):
        def get_lr(self):
            return [base * 0.5**self.last_epoch for base in self.base_lrs]

    _, opt = _optimizers()
    scheduler = Halving(opt)
    opt.step()
    scheduler.step()
    assert scheduler.get_last_lr() == [0.05, 0.1]
    assert math.isclose(opt.param_groups[1]["lr"], 0.1)


def test_importable_as_torch():
    from batched_grad.optim.lr_scheduler import StepLR

    assert bg.optim.lr_scheduler.StepLR is StepLR
    assert set(torch.optim.lr_scheduler.__all__) <= set(dir(ours))


def test_cycling_momentum_needs_an_optimizer_with_momentum():
    errors = []
    for lib, module in ((torch, torch.optim.lr_scheduler), (bg, ours)):
        opt = lib.optim.Adagrad([lib.nn.Parameter(lib.ones(2))])
        with pytest.raises(ValueError) as info:
            module.OneCycleLR(opt, max_lr=1.0, total_steps=5)
        errors.append(str(info.value))
    assert errors[1] == errors[0]


@pytest.mark.parametrize("fuse_after", [0, 10**9], ids=["program", "on_host"])
def test_cycled_sgd_momentum_does_not_recompile_the_step(fuse_after, monkeypatch):
    """OneCycleLR changes SGD's momentum every step: the compiled update takes it as an argument, and so does the
    update run on the host (its jaxpr, traced once)."""
    from batched_grad import _lazy, _numpy_eval
    from batched_grad.optim import sgd

    monkeypatch.setattr(_lazy, "FUSE_AFTER", fuse_after)
    param = bg.nn.Parameter(bg.ones(4))
    opt = bg.optim.SGD([param], lr=0.1, momentum=0.9)
    scheduler = ours.OneCycleLR(opt, max_lr=0.5, total_steps=8)
    param.grad = bg.ones(4)
    for _ in range(2):  # the first step has no momentum buffer yet: a program of its own
        opt.step()
        scheduler.step()
    traced, compiled, programs = sgd._sgd.jitted.traced[0], bg.compile_count(), len(_numpy_eval._programs)
    for _ in range(4):
        opt.step()
        scheduler.step()
    assert (sgd._sgd.jitted.traced[0], bg.compile_count()) == (traced, compiled)
    assert len(_numpy_eval._programs) == programs


@pytest.mark.parametrize("namespace", ["optim", "optim.lr_scheduler", "distributions.transforms"])
def test_classes_name_the_module_torch_defines_them_in(namespace):
    """d2l's training loop steps a scheduler when `scheduler.__module__ == torch.optim.lr_scheduler.__name__` and
    otherwise calls it as a function of the epoch: a class's module is torch's, in our package."""
    theirs, mine = (importlib.import_module(f"{root}.{namespace}") for root in ("torch", "batched_grad"))
    for name, cls in inspect.getmembers(theirs, inspect.isclass):
        ours_cls = getattr(mine, name, None)
        if cls.__module__ == theirs.__name__ and ours_cls is not None and not name.startswith("__"):
            assert ours_cls.__module__ == mine.__name__, name


def test_a_torch_scheduler_is_recognised_by_its_module():
    model = bg.nn.Linear(2, 1)
    optimizer = bg.optim.SGD(model.parameters(), lr=0.5)
    scheduler = ours.MultiStepLR(optimizer, milestones=[1], gamma=0.5)
    assert scheduler.__module__ == bg.optim.lr_scheduler.__name__
    scheduler.step()
    assert scheduler.get_last_lr() == [0.25]
