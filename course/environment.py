"""The course's virtual environment, ``.venv``: made on first use, brought up to date when
the requirements change (its stamp, ``.venv/.installed``, is older than pyproject.toml,
lib/pyproject.toml or constraints.txt), as ``make`` did.

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
    "CONSTRAINTS",
    "EXTRAS",
    "LABEXTENSION",
    "REQUIREMENTS",
    "STAMP",
    "VENV",
    "ensure",
    "install_arguments",
    "install_labextension",
    "labextensions_dir",
    "venv_python",
]

VENV = REPO / ".venv"
STAMP = VENV / ".installed"
#: what the course's environment installs: the course with JupyterLab, its tests, Triton where
#: it runs, and the teaching tools (the graded edition's tests run nbgrader)
EXTRAS = "lab,dev,triton,teach"
#: the versions every test ran against, passed to every pip install of the course
CONSTRAINTS = REPO / "constraints.txt"
#: the files whose change means installing again
REQUIREMENTS = (REPO / "pyproject.toml", REPO / "lib" / "pyproject.toml", CONSTRAINTS)


def install_arguments(extras: str = EXTRAS, editable: bool = True) -> list[str]:
    """pip's arguments (after ``pip install``) for the library and the course from this
    checkout, with ``extras``, held to `CONSTRAINTS`."""
    lib, course = str(REPO / "lib"), f"{REPO}[{extras}]" if extras else str(REPO)
    if editable:
        return ["-c", str(CONSTRAINTS), "-e", lib, "-e", course]
    return ["-c", str(CONSTRAINTS), lib, course]


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


#: the .pth file that puts the checkout on .venv's path, so that its own packages (course,
#: labdriver: never installed, never in a wheel) import from any folder there, as the
#: benchmarks and scripts run as files need
CHECKOUT_PTH = "attention-course-checkout.pth"


def put_checkout_on_path(python: Path) -> Path:
    """Write `CHECKOUT_PTH` into the site-packages of ``python``'s environment; its path."""
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    pth = Path(purelib) / CHECKOUT_PTH
    pth.write_text(f"{REPO}\n", encoding="utf-8")
    return pth


def _current() -> bool:
    return STAMP.exists() and all(
        STAMP.stat().st_mtime >= path.stat().st_mtime for path in REQUIREMENTS
    )


def ensure(base_python: str = sys.executable) -> Path:
    """``.venv`` made with ``base_python`` if missing, the course installed into it unless
    the stamp is newer than the requirements, and the course's lab extension as built copied
    into it; returns its interpreter."""
    python = venv_python()
    if not python.exists():
        print(f"course: making {VENV.name}/ with {base_python}", file=sys.stderr)
        subprocess.run([base_python, "-m", "venv", str(VENV)], check=True)
    if not _current():
        for step in (
            ["-m", "pip", "install", "--upgrade", "pip"],
            ["-m", "pip", "install", *install_arguments()],
        ):
            subprocess.run([str(python), *step], cwd=REPO, check=True)
        put_checkout_on_path(python)
        STAMP.touch()
    install_labextension(VENV)
    return python
