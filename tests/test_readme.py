"""The README's examples run and compute what they say."""

import pathlib
import re

import numpy as np
import pytest

import batched_grad as bg

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.slow
def test_readme_python_examples_run_and_give_the_shapes_they_promise():
    namespace = {}
    for block in re.findall(r"```python\n(.*?)```", README.read_text(), re.S):
        exec(compile(block, "README.md", "exec"), namespace)
    ns = {k: v.detach().numpy() if isinstance(v, bg.Tensor) else v for k, v in namespace.items()}
    x, W = ns["x"], ns["W"]
    jacobian = (1 - np.tanh(W @ x) ** 2)[:, None] * W
    for name in ("J", "J2", "J3", "J_split"):
        np.testing.assert_allclose(ns[name], jacobian, rtol=1e-5, atol=1e-6)
    for name in ("H", "H2"):
        np.testing.assert_allclose(ns[name], np.diag(6 * x))
    np.testing.assert_allclose(ns["Hv"], 6 * x)
    np.testing.assert_allclose(ns["HV"], ns["V"] * 6 * x, rtol=1e-6)
    np.testing.assert_allclose(ns["Jc"], np.diag(3 * x**2))
    assert "NumpyCubeBackward could not be vectorized" in str(namespace["caught"][0].message)
    assert ns["per_sample"].shape == (8, 4, 3)
    assert sum(ns["rows_per_device"]) == 4
