"""Shared fixtures; the array helpers live in support.py (two conftest modules
cannot both be imported by name, and tests/browser has its own)."""

from __future__ import annotations

import matplotlib
import pytest
from support import LIBS, stop_on_sigterm

matplotlib.use("Agg")  # explorers are driven in-process, without a display


def pytest_configure(config):
    stop_on_sigterm()  # a terminated run still stops the servers and browsers it started


@pytest.fixture(params=LIBS)
def lib(request):
    """Run a test once with numpy inputs and once with torch inputs."""
    return request.param


def pytest_collection_modifyitems(config, items):
    """test_without_float64.py runs other files' torch cases again: their numpy cases are
    left out there (a device without float64 is a torch device)."""
    left_out = [
        item
        for item in items
        if item.path.name == "test_without_float64.py"
        and getattr(item, "callspec", None) is not None
        and item.callspec.params.get("lib") == "numpy"
    ]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]
