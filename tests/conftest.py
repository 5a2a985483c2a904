"""Shared fixtures; the array helpers live in support.py (two conftest modules
cannot both be imported by name, and tests/browser has its own)."""

from __future__ import annotations

import matplotlib
import pytest
from support import LIBS

matplotlib.use("Agg")  # explorers are driven in-process, without a display


@pytest.fixture(params=LIBS)
def lib(request):
    """Run a test once with numpy inputs and once with torch inputs."""
    return request.param
