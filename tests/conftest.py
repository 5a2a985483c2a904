"""Shared fixtures; the helpers live in support.py, the array helpers and the `lib` fixture in
lib/tests/arrays.py (two conftest modules cannot both be imported by name, and tests/browser
has its own)."""

from __future__ import annotations

import matplotlib
from arrays import lib  # noqa: F401 (the fixture, registered here)
from support import stop_on_sigterm

matplotlib.use("Agg")  # explorers are driven in-process, without a display


def pytest_configure(config):
    stop_on_sigterm()  # a terminated run still stops the servers and browsers it started
