"""The course the driver runs: the repository this package sits in.

The driver works from the checkout (it is never installed), so the repository
is this folder's parent: its ``course`` package (whose
``python -m course serve`` is how ``make lab`` serves) and its ``notebooks/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["LAB_COMMAND", "NOTEBOOK_GLOB", "REPO", "numbered_notebooks"]

REPO = Path(__file__).resolve().parents[1]
#: JupyterLab served as ``make lab`` serves it (course/lab.py), in this environment
LAB_COMMAND = (sys.executable, "-m", "course", "serve")
NOTEBOOK_GLOB = "notebooks/[0-9][0-9]_*.ipynb"


def numbered_notebooks() -> list[Path]:
    """The course's numbered notebooks (``notebooks/NN_*.ipynb``), in order."""
    return sorted(REPO.glob(NOTEBOOK_GLOB))


def notebook_names(given: list[str]) -> list[str]:
    """The file names of the notebooks ``given`` (paths or names), or of every numbered
    notebook when none is: what a benchmark's command line asks to measure."""
    return [Path(n).name for n in given] or [p.name for p in numbered_notebooks()]
