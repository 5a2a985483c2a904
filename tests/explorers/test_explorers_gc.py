"""Once an explorer's background is drawn, the kernel's long-lived objects leave the collector.

A full garbage collection walks every object the kernel tracks (some
200,000 after a notebook: 65 ms on the course machine), and one landing in
a slider move made it late (explorers/base.py, `settle_long_lived`). The
explorer's idle-time work freezes what survives; these tests pin that it
does, and that freezing keeps no garbage alive for good.
"""

from __future__ import annotations

import gc
import platform
import weakref

import matplotlib

matplotlib.use("Agg")

import pytest

from attention_course.explorers import VolumeKnobExplorer
from attention_course.explorers import base as explorer_base
from attention_course.explorers.base import live_explorers, settle_long_lived


@pytest.fixture(autouse=True)
def unfrozen():
    """Leave the test process's collector as it was: nothing frozen."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def tracked(obj) -> bool:
    """Whether the collector's generations (not the frozen ones) hold ``obj``."""
    return any(o is obj for o in gc.get_objects())


def prepared_on_idle(explorer: VolumeKnobExplorer) -> None:
    """Run what the kernel's event loop runs once idle after a full draw (no loop here)."""
    explorer.blit = True
    explorer.fig.canvas.draw()  # schedules the background's preparation on a timer
    timer = explorer._timers["background"]
    for callback, args, kwargs in timer.callbacks:
        callback(*args, **kwargs)


def test_the_idle_background_preparation_freezes_the_explorer():
    explorer = VolumeKnobExplorer()
    assert tracked(explorer.fig) and gc.get_freeze_count() == 0
    prepared_on_idle(explorer)
    assert explorer._background is not None
    assert gc.get_freeze_count() > 0
    assert not tracked(explorer.fig), "the figure is still walked by every full collection"


def test_what_one_settle_froze_and_was_dropped_since_is_freed_by_the_next():
    """Frozen objects are never walked: without unfreezing first, a cycle dropped after a
    freeze (an old figure of a cell run again) would stay for the kernel's life."""

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: refcounting alone never frees it
    cycle = weakref.ref(a)
    settle_long_lived()
    assert cycle() is not None  # still referenced, now frozen
    del a, b
    settle_long_lived()
    assert cycle() is None


def test_frozen_explorers_are_still_found_oldest_first():
    """The kernel-side probes (labdriver's, the latency benchmark's) list the explorers;
    gc.get_objects() leaves frozen ones out, `live_explorers` does not."""
    first, second = VolumeKnobExplorer(), VolumeKnobExplorer()
    prepared_on_idle(first)
    assert not tracked(first) and not tracked(second)
    found = live_explorers()
    assert found.index(first) < found.index(second)


def test_settling_gives_the_freed_pages_back_where_the_c_library_can(monkeypatch):
    """glibc keeps freed pages in its heaps (some 40 MiB after a Run All of 01 and 02):
    `settle_long_lived` trims them; tests/notebooks/test_rerun_memory.py measures it."""
    trims = []
    monkeypatch.setattr(explorer_base, "_MALLOC_TRIM", trims.append)
    settle_long_lived()
    assert trims == [0]
    if platform.libc_ver()[0] == "glibc":
        assert explorer_base._malloc_trim() is not None
    monkeypatch.setattr(explorer_base, "_MALLOC_TRIM", None)  # macOS, Windows, musl
    settle_long_lived()
