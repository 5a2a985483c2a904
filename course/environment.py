"""The course's virtual environment, ``.venv``: made on first use, brought up to date when
pyproject.toml changes (its stamp, ``.venv/.installed``, is older), as ``make`` did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .paths import REPO

__all__ = ["EXTRAS", "STAMP", "VENV", "ensure", "venv_python"]

VENV = REPO / ".venv"
STAMP = VENV / ".installed"
#: what the course's environment installs: the library, its tests, Triton where it runs, and
#: the teaching tools (the graded edition's tests run nbgrader)
EXTRAS = "dev,triton,teach"


def venv_python(venv: Path = VENV) -> Path:
    """The environment's interpreter (``bin/python``, or ``Scripts\\python.exe`` on Windows)."""
    if os.name == "nt":
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def _current() -> bool:
    pyproject = REPO / "pyproject.toml"
    return STAMP.exists() and STAMP.stat().st_mtime >= pyproject.stat().st_mtime


def ensure(base_python: str = sys.executable) -> Path:
    """``.venv`` made with ``base_python`` if missing, the course installed into it unless
    the stamp is newer than pyproject.toml; returns its interpreter."""
    python = venv_python()
    if not python.exists():
        print(f"course: making {VENV.name}/ with {base_python}", file=sys.stderr)
        subprocess.run([base_python, "-m", "venv", str(VENV)], check=True)
    if not _current():
        for step in (
            ["-m", "pip", "install", "--upgrade", "pip"],
            ["-m", "pip", "install", "-e", f".[{EXTRAS}]"],
        ):
            subprocess.run([str(python), *step], cwd=REPO, check=True)
        STAMP.touch()
    return python
