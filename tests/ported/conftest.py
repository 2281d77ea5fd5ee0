"""The ported programs each train a model with both libraries (0.5-4 s apiece, most of it first compiles): they run
in CI's slow step (pytest -m slow)."""

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "ported" in item.path.parts:
            item.add_marker(pytest.mark.slow)
