"""Fixtures shared by the explorer tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def kernel_process(monkeypatch):
    """This test process taken for a kernel's: ipykernel's app initialized, which
    `attention_course.explorers.canvas.timers_fire` asks (with a running loop) before it
    lets a timer go on the loop."""
    from ipykernel.kernelapp import IPKernelApp

    monkeypatch.setattr(IPKernelApp, "initialized", classmethod(lambda cls: True))
