"""The course the driver runs: the repository this package sits in.

The driver is installed in editable mode (``make``'s ``pip install -e``), so
the repository is this folder's parent: its ``scripts/lab`` (the command
``make lab`` runs) and its ``notebooks/``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["LAB_SCRIPT", "NOTEBOOK_GLOB", "REPO", "numbered_notebooks"]

REPO = Path(__file__).resolve().parents[1]
LAB_SCRIPT = REPO / "scripts" / "lab"
NOTEBOOK_GLOB = "notebooks/[0-9][0-9]_*.ipynb"


def numbered_notebooks() -> list[Path]:
    """The course's numbered notebooks (``notebooks/NN_*.ipynb``), in order."""
    return sorted(REPO.glob(NOTEBOOK_GLOB))
