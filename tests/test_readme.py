"""The README's examples run, and the demo command checks batched results against the loop."""
import pathlib
import re

import numpy as np

import batched_grad as bg

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run_and_give_the_shapes_they_promise():
    namespace = {}
    for block in re.findall(r"```python\n(.*?)```", README.read_text(), re.S):
        exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["J"].shape == (4, 3)
    np.testing.assert_allclose(namespace["H"].numpy(), np.diag([6.0, 12.0, 18.0]))
    assert namespace["per_sample"].shape == (8, 4, 3)


def test_demo_passes_its_checks():
    from batched_grad import _demo

    lines = []
    assert _demo.run(repeats=1, out=lines.append)
    assert len(lines) == 1 + len(_demo.WORKLOADS) and all(line.endswith("ok") for line in lines[1:])
