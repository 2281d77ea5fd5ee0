"""Command line: `python -m batched_grad demo` runs the demo workloads and checks them against the loop."""
from absl import app, flags, logging

flags.DEFINE_integer("repeats", 5, "timed repetitions per workload (the median is shown)")
FLAGS = flags.FLAGS
COMMANDS = ("demo",)


def main(argv):
    if len(argv) != 2 or argv[1] not in COMMANDS:
        raise app.UsageError(f"usage: python -m batched_grad {{{'|'.join(COMMANDS)}}} [--repeats=N]")
    logging.set_verbosity(logging.WARNING)  # keep JAX's backend discovery notes out of the demo's output
    from . import _demo

    if not _demo.run(repeats=FLAGS.repeats):
        raise SystemExit("a batched result differed from the per-row loop")


if __name__ == "__main__":
    app.run(main)
