"""Where the course is: the repository this package sits in."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO"]

REPO = Path(__file__).resolve().parents[1]
