"""torch.compile's arguments, checked with torch's messages and mapped onto what bg.compile does.

backend: "inductor" (torch's default) and "openxla" compile into one XLA program; "eager" and "aot_eager" run the
function as it is (torch's debugging backends, whose results are eager ones). torch's other registered backends
(tvm, cudagraphs, the minifier and testing ones) are refused by name; any other string is torch's InvalidBackend.
mode and options select inductor's kernels, autotuning and CUDA graphs: speed, not results; XLA compiles the same
program whatever they say. They are checked as torch checks them (a mode torch does not know raises its error)."""

COMPILING_BACKENDS = ("inductor", "openxla")
EAGER_BACKENDS = ("eager", "aot_eager")
TORCH_ONLY_BACKENDS = (
    "aot_eager_decomp_partition",
    "aot_eager_decomp_partition_crossref",
    "aot_eager_decomp_partition_with_mode",
    "aot_eager_default_partitioner",
    "aot_ts",
    "cudagraphs",
    "dynamo_accuracy_minifier_backend",
    "dynamo_minifier_backend",
    "eager_debug",
    "eager_noexcept",
    "invoke_subgraph",
    "openxla_eval",
    "pre_dispatch_eager",
    "ts",
    "tvm",
)
MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")


class InvalidBackend(RuntimeError):
    """torch._dynamo.exc.InvalidBackend: a backend name torch does not know."""

    def __init__(self, name):
        super().__init__(f"Invalid backend: {name!r}, see `torch._dynamo.list_backends()` for available backends.")


def _check_type(name, value, kinds, expected):
    if not isinstance(value, kinds):
        raise TypeError(f"compile(): argument '{name}' must be {expected}, but got {type(value).__name__}")


def eager_backend(backend):
    """Whether `backend` runs the function eagerly; raises for a backend bg.compile has no form of."""
    if backend is None or backend in COMPILING_BACKENDS:
        return False
    if backend in EAGER_BACKENDS:
        return True
    if callable(backend):
        raise NotImplementedError(
            "compile(): a callable backend is given torch's FX graph of the function, which batched_grad does not "
            "make; pass backend='inductor' (one XLA program) or backend='eager'"
        )
    _check_type("backend", backend, str, "a str or a callable")
    if backend in TORCH_ONLY_BACKENDS:
        raise NotImplementedError(
            f"compile(): backend={backend!r} is one of torch's own compilers, which batched_grad does not have; "
            f"the backends here are {', '.join(repr(b) for b in COMPILING_BACKENDS + EAGER_BACKENDS)}"
        )
    raise InvalidBackend(backend)


def check(*, fullgraph, dynamic, mode, options, name, disable, recompile_limit, isolate_recompiles, shapes_spec):
    """torch's checks of compile()'s keyword arguments (its messages where torch has them)."""
    _check_type("fullgraph", fullgraph, bool, "a bool")
    _check_type("disable", disable, bool, "a bool")
    _check_type("isolate_recompiles", isolate_recompiles, bool, "a bool")
    if dynamic is not None:
        _check_type("dynamic", dynamic, bool, "a bool or None")
    if name is not None:
        _check_type("name", name, str, "a str or None")
    if recompile_limit is not None:
        _check_type("recompile_limit", recompile_limit, int, "an int or None")
        if recompile_limit < 1:
            raise ValueError(f"compile(): recompile_limit must be at least 1, but got {recompile_limit}")
    if options is not None:
        _check_type("options", options, dict, "a dict or None")
    if shapes_spec is not None:
        raise NotImplementedError(
            "compile(): shapes_spec (torch's symbolic-shape specification) is not supported: a program here is "
            "compiled for the shapes it is called with; pass shapes_spec=None"
        )
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode is not None and mode not in MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(MODES)}")
