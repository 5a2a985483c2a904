"""What pyproject.toml says about the course (its version and its repository's address, and the
addresses built from them: the repository's page, Binder's), and constraints.txt's pins."""

from __future__ import annotations

import re
from functools import cache

from .paths import REPO

__all__ = ["binder_link", "pin", "pins", "repository", "repository_url", "version"]


@cache
def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def version() -> str:
    """The course's version, e.g. ``"0.1.0"`` (a release is tagged ``v<version>``)."""
    return _pyproject()["project"]["version"]


def repository() -> tuple[str, str]:
    """(owner, name) of the course's GitHub repository, from ``[project.urls] Repository``."""
    url = _pyproject()["project"]["urls"]["Repository"]
    found = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", url)
    if not found:
        raise ValueError(f"pyproject.toml's Repository URL {url!r} is not a GitHub repository")
    return found.group(1), found.group(2)


def repository_url() -> str:
    """The repository's address on GitHub, ``https://github.com/<owner>/<name>``."""
    owner, name = repository()
    return f"https://github.com/{owner}/{name}"


def binder_link(notebook: str = "00_start_here.ipynb") -> str:
    """The Binder address that opens ``notebook`` in JupyterLab at the course's tagged
    version (``v<version>``, as the Colab links), from pyproject.toml's Repository."""
    owner, name = repository()
    return (
        f"https://mybinder.org/v2/gh/{owner}/{name}/v{version()}"
        f"?urlpath=lab/tree/notebooks/{notebook}"
    )


def pins() -> dict[str, str]:
    """constraints.txt's pins, the versions every test ran against: {name: ``name==x.y.z``
    (without its environment marker)}, names in lower case."""
    text = (REPO / "constraints.txt").read_text(encoding="utf-8")
    found = re.findall(r"^([A-Za-z0-9_.-]+)==([^;\s]+)", text, flags=re.MULTILINE)
    return {name.lower(): f"{name}=={version}" for name, version in found}


def pin(name: str) -> str:
    """constraints.txt's exact pin of requirement ``name`` (``name==x.y.z``)."""
    try:
        return pins()[name.lower()]
    except KeyError:
        raise LookupError(f"constraints.txt pins no {name}") from None
