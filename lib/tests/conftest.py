"""The library's fixtures: each test with numpy inputs, and again with torch inputs where torch
is installed (`attention_lib` needs only numpy; its torch cases skip without torch)."""

from __future__ import annotations

from arrays import lib  # noqa: F401 (the fixture, registered here)


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
