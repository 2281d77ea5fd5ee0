"""Module.state_dict / load_state_dict through torch's extension points, checked against torch 2.13 side by side:
per-module _save_to_state_dict/_load_from_state_dict overrides, versioned _metadata, extra state, the four hooks,
strict error messages, assign=True and the BatchNorm/InstanceNorm checkpoint migrations."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch

LIBS = (torch, bg)


def seeded_pair(build):
    """build(lib) for torch and batched_grad, with batched_grad's tensors set to torch's values."""
    torch.manual_seed(0)
    theirs, ours = build(torch), build(bg)
    pairs = zip([*theirs.parameters(), *theirs.buffers()], [*ours.parameters(), *ours.buffers()])
    with bg.no_grad():
        for t, o in pairs:
            o.copy_(bg.tensor(t.detach().numpy()))
    return theirs, ours


def net(lib):
    return lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.Sequential(lib.nn.BatchNorm1d(2), lib.nn.Tanh()))


def assert_same_state(ours, theirs):
    assert list(ours) == list(theirs)
    for key in theirs:
        if isinstance(theirs[key], torch.Tensor):
            assert_same(ours[key], theirs[key])
        else:
            assert ours[key] == theirs[key]


def test_metadata_records_each_module_version_under_its_prefix():
    theirs, ours = seeded_pair(net)
    assert dict(ours.state_dict()._metadata) == dict(theirs.state_dict()._metadata)
    assert dict(ours.state_dict()._metadata)["1.0"] == {"version": 2}  # BatchNorm's version
    prefixed_ours, prefixed_theirs = ours.state_dict(prefix="net."), theirs.state_dict(prefix="net.")
    assert_same_state(prefixed_ours, prefixed_theirs)
    assert list(prefixed_ours._metadata) == list(prefixed_theirs._metadata)
    plain = {}  # a destination without _metadata gets none
    assert list(ours.state_dict(destination=plain)) == list(theirs.state_dict(destination={}))
    assert not hasattr(plain, "_metadata")


def test_positional_arguments_warn_and_still_work():
    theirs, ours = seeded_pair(net)
    with pytest.warns(FutureWarning, match="Positional args are being deprecated"):
        got = ours.state_dict(None, "p.", True)
    with pytest.warns(FutureWarning, match="Positional args are being deprecated"):
        want = theirs.state_dict(None, "p.", True)
    assert list(got) == list(want)
    assert got["p.0.weight"] is ours[0].weight


class Scaled:
    """A Linear whose checkpoint holds weight * 2 under 'doubled' (an override of both halves of the protocol)."""

    @staticmethod
    def build(lib):
        class ScaledLinear(lib.nn.Linear):
            def _save_to_state_dict(self, destination, prefix, keep_vars):
                destination[prefix + "doubled"] = self.weight.detach() * 2
                destination[prefix + "bias"] = self.bias.detach()

            def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
                state_dict[prefix + "weight"] = state_dict.pop(prefix + "doubled") / 2
                super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)

        return lib.nn.Sequential(ScaledLinear(2, 2))


def test_overridden_save_and_load_round_trip():
    theirs, ours = seeded_pair(Scaled.build)
    saved_ours, saved_theirs = ours.state_dict(), theirs.state_dict()
    assert_same_state(saved_ours, saved_theirs)
    assert list(saved_ours) == ["0.doubled", "0.bias"]
    fresh_theirs, fresh_ours = Scaled.build(torch), Scaled.build(bg)
    assert repr(fresh_ours.load_state_dict(saved_ours)) == repr(fresh_theirs.load_state_dict(saved_theirs))
    assert repr(fresh_ours.load_state_dict(saved_ours)) == "<All keys matched successfully>"
    assert_same(fresh_ours[0].weight, fresh_theirs[0].weight)
    assert "0.doubled" in saved_ours  # load_state_dict works on a copy


def counter(lib, with_setter=True):
    class Counter(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.steps, self.scale = 0, lib.nn.Parameter(lib.ones(1))

        def get_extra_state(self):
            return {"steps": self.steps}

        if with_setter:

            def set_extra_state(self, state):
                self.steps = state["steps"]

    return Counter()


def test_extra_state_round_trip():
    saved = {}
    for lib in LIBS:
        outer = lib.nn.Sequential(counter(lib))
        outer[0].steps = 7
        saved[lib] = outer.state_dict()
        assert saved[lib]["0._extra_state"] == {"steps": 7}
        fresh = lib.nn.Sequential(counter(lib))
        fresh.load_state_dict(saved[lib])
        assert fresh[0].steps == 7
    assert list(saved[bg]) == list(saved[torch]) == ["0.scale", "0._extra_state"]


def test_extra_state_strict_errors():
    def missing_extra(lib):
        m = counter(lib)
        m.load_state_dict({"scale": lib.ones(1)})

    def no_setter(lib):
        counter(lib, with_setter=False).load_state_dict({"scale": lib.ones(1), "_extra_state": 1})

    def plain_module_given_extra(lib):
        lib.nn.Linear(1, 1).load_state_dict({"weight": lib.ones(1, 1), "bias": lib.ones(1), "_extra_state": 1})

    for case in (missing_extra, plain_module_given_extra):
        ours, theirs = raises_like_torch(case)
        assert str(ours) == str(theirs)
    raises_like_torch(no_setter)  # the base set_extra_state's "should never be called"
    for lib in LIBS:
        assert "_extra_state" not in lib.nn.Linear(1, 1).state_dict()


def test_state_dict_pre_and_post_hooks():
    logs = {}
    for lib in LIBS:
        log = logs[lib] = []
        outer = net(lib)
        inner = outer[1]
        inner.register_state_dict_pre_hook(lambda m, prefix, keep_vars: log.append(("pre", prefix, keep_vars)))

        def post(m, state, prefix, local_metadata, log=log):
            log.append(("post", prefix, dict(local_metadata), len(state)))
            state[prefix + "note"] = 1

        handle = inner.register_state_dict_post_hook(post)
        state = outer.state_dict(keep_vars=True)
        assert state["1.note"] == 1
        handle.remove()
        assert "1.note" not in outer.state_dict()
    assert logs[bg] == logs[torch]
    assert logs[bg][0] == ("pre", "1.", True)


def test_state_dict_post_hook_return_values():
    def public_returns(lib):
        m = lib.nn.Linear(1, 1)
        m.register_state_dict_post_hook(lambda *args: {})
        m.state_dict()

    ours, theirs = raises_like_torch(public_returns)
    assert str(ours) == "state_dict post-hook must return None"

    def registered_twice(lib):
        m, hook = lib.nn.Linear(1, 1), (lambda *args: None)
        m.register_state_dict_post_hook(hook)
        m._register_state_dict_hook(hook)

    raises_like_torch(registered_twice)
    for lib in LIBS:  # the private form's returned dict replaces the root's result
        m = lib.nn.Linear(1, 1)
        m._register_state_dict_hook(lambda module, state, prefix, meta: {"only": 1})
        assert m.state_dict() == {"only": 1}


def test_load_pre_hook_migrates_a_renamed_key():
    results = {}
    for lib in LIBS:
        outer = lib.nn.Sequential(lib.nn.Linear(2, 2))
        seen = []

        def rename(module, state, prefix, local_metadata, strict, missing, unexpected, errors, seen=seen):
            seen.append((type(module).__name__, prefix, dict(local_metadata), strict))
            if prefix + "w" in state:
                state[prefix + "weight"] = state.pop(prefix + "w")

        outer[0].register_load_state_dict_pre_hook(rename)
        source = {"0.w": lib.full((2, 2), 3.0), "0.bias": lib.zeros(2)}
        result = outer.load_state_dict(source)
        results[lib] = (seen, repr(result), outer[0].weight.detach().numpy().tolist(), list(source))
    assert results[bg] == results[torch]
    assert results[bg][0] == [("Linear", "0.", {}, True)]


def test_load_post_hook_sees_and_edits_incompatible_keys():
    results = {}
    for lib in LIBS:
        outer = lib.nn.Sequential(lib.nn.Linear(2, 2))
        seen = []

        def forgive(module, incompatible, seen=seen):
            seen.append((type(module).__name__, list(incompatible.missing_keys), list(incompatible.unexpected_keys)))
            incompatible.missing_keys.clear()
            incompatible.unexpected_keys.clear()

        outer[0].register_load_state_dict_post_hook(forgive)
        outer.register_load_state_dict_post_hook(lambda module, incompatible, seen=seen: seen.append("root"))
        result = outer.load_state_dict({"0.weight": lib.ones(2, 2), "extra": lib.ones(1)})
        results[lib] = (seen, repr(result))
    assert results[bg] == results[torch]
    assert results[bg][0][0] == ("Linear", ["0.bias"], ["extra"])

    def returns_value(lib):
        m = lib.nn.Linear(1, 1)
        m.register_load_state_dict_post_hook(lambda module, incompatible: incompatible)
        m.load_state_dict(m.state_dict())

    raises_like_torch(returns_value)


def test_strict_error_messages_match():
    def bad_load(lib):
        m = net(lib)
        state = m.state_dict()
        del state["0.bias"]
        state["0.weight"] = lib.ones(4, 3)
        state["1.0.running_mean"] = [0.0, 0.0]
        state["1.2.weight"] = lib.ones(1)
        state["stray"] = lib.ones(1)
        m.load_state_dict(state)

    ours, theirs = raises_like_torch(bad_load)
    assert str(ours) == str(theirs)
    assert str(ours).startswith(
        'Error(s) in loading state_dict for Sequential:\n\tMissing key(s) in state_dict: "0.bias"'
    )

    for lib in LIBS:
        with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
            lib.nn.Linear(1, 1).load_state_dict([("weight", lib.ones(1, 1))])


def test_non_strict_reports_keys_and_still_checks_shapes():
    got = {}
    for lib in LIBS:
        m = net(lib)
        result = m.load_state_dict({"0.weight": lib.full((2, 3), 2.0), "1.9.x": lib.ones(1)}, strict=False)
        got[lib] = (repr(result), result.missing_keys, m[0].weight.detach().numpy().tolist())
    assert got[bg] == got[torch]

    def bad_shape(lib):
        lib.nn.Linear(2, 2).load_state_dict({"weight": lib.ones(3, 2)}, strict=False)

    ours, theirs = raises_like_torch(bad_shape)
    assert str(ours) == str(theirs)


def test_one_element_vector_loads_into_a_scalar_buffer():
    for lib in LIBS:
        bn = lib.nn.BatchNorm1d(2)
        state = bn.state_dict()
        state["num_batches_tracked"] = lib.tensor([5])
        bn.load_state_dict(state)
        assert bn.num_batches_tracked.shape == () and int(bn.num_batches_tracked) == 5


def test_assign_uses_the_checkpoint_tensors():
    for lib in LIBS:
        bn = lib.nn.BatchNorm1d(2)
        bn.weight.requires_grad_(False)
        weight, mean = lib.full((2,), 4.0, dtype=lib.float64), lib.full((2,), 0.5)
        state = dict(bn.state_dict(), weight=weight, running_mean=mean)
        bn.load_state_dict(state, assign=True)
        assert type(bn.weight).__name__ == "Parameter" and not bn.weight.requires_grad
        assert bn.weight.dtype == lib.float64  # the checkpoint's dtype, not the module's
        assert bn.running_mean is mean
        bn.load_state_dict(dict(state, bias=lib.nn.Parameter(lib.ones(2), requires_grad=False)), assign=True)
        assert bn.bias.requires_grad  # the module's requires_grad wins
    seen = {}
    for lib in LIBS:
        m = lib.nn.Linear(1, 1)
        m.register_load_state_dict_pre_hook(lambda module, sd, prefix, meta, *rest, lib=lib: seen.setdefault(lib, meta))
        m.load_state_dict(m.state_dict(), assign=True)
    assert seen[bg] == seen[torch] == {"version": 1, "assign_to_params_buffers": True}


def legacy_batchnorm_state(lib, version):
    state = lib.nn.BatchNorm1d(2).state_dict()
    del state["num_batches_tracked"]
    state._metadata[""] = {"version": version}
    return state


@pytest.mark.parametrize("version", [1, 2])
def test_batchnorm_migrates_checkpoints_without_num_batches_tracked(version):
    results = {}
    for lib in LIBS:
        bn = lib.nn.BatchNorm1d(2)
        bn.num_batches_tracked.fill_(3)
        try:
            results[lib] = repr(bn.load_state_dict(legacy_batchnorm_state(lib, version)))
        except RuntimeError as error:
            results[lib] = str(error)
        results[lib] = (results[lib], int(bn.num_batches_tracked))
    assert results[bg] == results[torch]
    assert results[bg][0].startswith("<All keys" if version == 1 else "Error(s)")


def test_instance_norm_rejects_unversioned_running_stats():
    def old_checkpoint(lib):
        lib.nn.InstanceNorm1d(2).load_state_dict({"running_mean": lib.zeros(2), "running_var": lib.ones(2)})

    ours, theirs = raises_like_torch(old_checkpoint)
    assert str(ours) == str(theirs)
    for lib in LIBS:  # a versioned checkpoint reports them as unexpected instead
        state = lib.nn.InstanceNorm1d(2).state_dict()
        state.update(running_mean=lib.zeros(2))
        assert lib.nn.InstanceNorm1d(2).load_state_dict(state, strict=False).unexpected_keys == ["running_mean"]


def test_hook_registries_survive_deepcopy_and_missing_in_old_pickles():
    import copy

    m = bg.nn.Linear(1, 1)
    m.register_state_dict_pre_hook(lambda *a: None)
    clone = copy.deepcopy(m)
    assert len(clone._state_dict_pre_hooks) == 1
    state = dict(m.__dict__)
    del state["_load_state_dict_post_hooks"]
    restored = bg.nn.Linear.__new__(bg.nn.Linear)
    restored.__setstate__(state)
    assert restored.load_state_dict(m.state_dict()).missing_keys == []
