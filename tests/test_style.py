"""The code base's complexity bound: no function above cyclomatic complexity 25 (as radon counts it)."""

import pathlib

import pytest

radon_complexity = pytest.importorskip("radon.complexity")

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAX_COMPLEXITY = 25


def test_no_function_is_above_the_complexity_bound():
    too_complex = [
        f"{path.relative_to(ROOT)}:{block.lineno} {block.fullname} ({block.complexity})"
        for folder in ("batched_grad", "vmap", "benchmarks", "tests")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for block in radon_complexity.cc_visit(path.read_text())
        if block.complexity > MAX_COMPLEXITY
    ]
    assert not too_complex, "functions above complexity 25:\n" + "\n".join(too_complex)
