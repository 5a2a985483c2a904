"""The course's virtual environment, ``.venv``: made on first use, brought up to date when
pyproject.toml changes (its stamp, ``.venv/.installed``, is older), as ``make`` did.

The course's JupyterLab extension (built in ``jupyter/labextensions``) goes where a
JupyterLab, Notebook 7 or Voila of an environment finds prebuilt extensions,
``<prefix>/share/jupyter/labextensions`` (`install_labextension`). A wheel's install puts it
there itself (pyproject.toml's data files); an editable install (``.venv``, Binder) does
not, so `ensure` copies it there (again whenever the build changes), and so does Binder's
postBuild (``python -m course labextension``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .paths import REPO

__all__ = [
    "EXTRAS",
    "LABEXTENSION",
    "STAMP",
    "VENV",
    "ensure",
    "install_labextension",
    "labextensions_dir",
    "venv_python",
]

VENV = REPO / ".venv"
STAMP = VENV / ".installed"
#: what the course's environment installs: the library, its tests, Triton where it runs, and
#: the teaching tools (the graded edition's tests run nbgrader)
EXTRAS = "dev,triton,teach"
#: the course's JupyterLab extension as built (its source: jupyter/a11y-extension)
LABEXTENSION = REPO / "jupyter" / "labextensions" / "attention-course-a11y"


def venv_python(venv: Path = VENV) -> Path:
    """The environment's interpreter (``bin/python``, or ``Scripts\\python.exe`` on Windows)."""
    if os.name == "nt":
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def labextensions_dir(prefix: Path) -> Path:
    """Where the JupyterLab of the environment at ``prefix`` finds prebuilt extensions."""
    return prefix / "share" / "jupyter" / "labextensions"


def install_labextension(prefix: Path = VENV) -> Path:
    """The course's built extension copied into ``prefix``'s labextensions folder, unless the
    copy there is of this build already (its ``source.sha256``); returns the installed
    folder. A copy, not a link: Voila serves no extension file that lies outside the
    folder (403, "not in root static directory")."""
    target = labextensions_dir(prefix) / LABEXTENSION.name
    stamp = "source.sha256"
    if (
        target.is_dir()
        and not target.is_symlink()
        and (target / stamp).is_file()
        and (target / stamp).read_bytes() == (LABEXTENSION / stamp).read_bytes()
    ):
        return target
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(LABEXTENSION, target)
    return target


def _current() -> bool:
    pyproject = REPO / "pyproject.toml"
    return STAMP.exists() and STAMP.stat().st_mtime >= pyproject.stat().st_mtime


def ensure(base_python: str = sys.executable) -> Path:
    """``.venv`` made with ``base_python`` if missing, the course installed into it unless
    the stamp is newer than pyproject.toml, and the course's lab extension as built copied
    into it; returns its interpreter."""
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
    install_labextension(VENV)
    return python
