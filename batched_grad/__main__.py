"""batched_grad's command line.

python -m batched_grad demo     a Jacobian, per-sample gradients and Hessian-vector products, each computed
                                batched and by the loop of unbatched calls: checked against each other, timed
python -m batched_grad bench    the benchmark scripts of a source checkout (quick runs; --full for full ones)
"""

from absl import app, flags, logging

from . import _bench, _demo

flags.DEFINE_integer("repeats", 5, "demo: timed calls per workload and mode (the median is shown)", lower_bound=1)
flags.DEFINE_multi_enum(
    "workload", None, list(_demo.WORKLOADS), "demo: run only this workload (repeatable); all three by default"
)
SIZE_HELP = {
    "width": "input size of the Jacobian's network, hidden width of the per-sample classifier, weights of the "
    "Hessian's loss",
    "outputs": "outputs of the Jacobian's network (rows of the Jacobian)",
    "batch": "samples of the per-sample gradients",
    "hvps": "Hessian-vector products",
}
for _name, _default in _demo.Sizes._field_defaults.items():
    flags.DEFINE_integer(_name, _default, f"demo: {SIZE_HELP[_name]}", lower_bound=1)
flags.DEFINE_bool("full", False, "bench: full runs of every benchmark script instead of quick ones")
flags.DEFINE_string(
    "benchmarks_dir",
    None,
    "bench: the folder of benchmark scripts (default: benchmarks/ of the "
    "source checkout this package is installed from)",
)
FLAGS = flags.FLAGS

COMMAND_FLAGS = {
    "demo": ("repeats", "workload", *_demo.Sizes._fields),
    "bench": ("full", "benchmarks_dir"),
}


def demo():
    """Run the demo; exit non-zero naming every workload whose batched result differs from its loop."""
    names = FLAGS.workload or list(_demo.WORKLOADS)
    sizes = _demo.Sizes(**{name: FLAGS[name].value for name in _demo.Sizes._fields})
    outcomes = _demo.run(_demo.build(names, sizes), repeats=FLAGS.repeats)
    print(_demo.table(outcomes))
    failed = [o.title for o in outcomes if not o.ok]
    if failed:
        raise SystemExit(f"error: the batched result differs from the loop's for: {', '.join(failed)}")


def bench():
    """Run the benchmark scripts; exit non-zero if one is missing or fails."""
    try:
        failed = _bench.run(_bench.locate(FLAGS.benchmarks_dir), full=FLAGS.full)
    except _bench.SetupError as e:
        raise SystemExit(f"error: {e}") from None
    if failed:
        raise SystemExit(f"error: these benchmark scripts failed: {', '.join(failed)}")


COMMANDS = {"demo": demo, "bench": bench}


def main(argv):
    """Check the command and its flags, then run it."""
    if len(argv) != 2 or argv[1] not in COMMANDS:
        given = " ".join(argv[1:]) or "nothing"
        raise app.UsageError(f"expected one command, {' or '.join(COMMANDS)}; got {given}")
    command = argv[1]
    foreign = [
        f"--{name}"
        for other, names in COMMAND_FLAGS.items()
        if other != command
        for name in names
        if FLAGS[name].present
    ]
    if foreign:
        raise app.UsageError(f"`{command}` does not take {', '.join(foreign)}")
    logging.set_verbosity(logging.WARNING)  # keep JAX's backend discovery notes out of the output
    COMMANDS[command]()


if __name__ == "__main__":
    app.run(main)
