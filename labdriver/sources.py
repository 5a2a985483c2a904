"""The programs the driver sends elsewhere, read from the files that hold them.

- JavaScript for the page, in ``js/`` beside this module (package data). Two
  kinds: page scripts (``init.js``, ``trace.js``), statements that
  `NotebookPage.open` installs before JupyterLab loads; and functions (every
  other file), one function expression each, after a comment saying what it
  returns, which ``page.evaluate`` and ``page.wait_for_function`` call with
  their argument. The driver joins them where one calls another (a move's end
  reads the page's state: ``move_done.js`` takes ``state.js``'s function).
- Python for the notebook's kernel: ``kernel_probe.py``, sent as source.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

__all__ = ["js", "kernel_probe"]


@cache
def js(name: str) -> str:
    """The source of ``js/<name>.js``; FileNotFoundError names the file if there is none."""
    return (files(__package__) / "js" / f"{name}.js").read_text(encoding="utf-8")


@cache
def kernel_probe() -> str:
    """The source of ``kernel_probe.py``, the program `NotebookPage.probe` runs in the kernel."""
    return (files(__package__) / "kernel_probe.py").read_text(encoding="utf-8")
