"""Colab: the guarded set-up cell that opens every notebook, and the README's links.

Colab runs a notebook from GitHub in its own Python, which has torch, numpy,
matplotlib and ipywidgets but not the course. The first code cell of every
notebook (`setup_cell`) installs the course there, from this repository at the
notebook's own version (the tag ``v<version>``), with ``--no-deps`` so Colab's
torch and the rest stay as they are, plus the runtime requirements Colab
lacks. Anywhere else (``"google.colab"`` not imported) the cell does nothing
and prints nothing, so nbval sees no output from it.

Both the cell and the links are generated from pyproject.toml (`project`):
``python -m course colab`` rewrites them; ``--check`` fails on a difference
(the tests run it).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .paths import REPO
from .project import pin as _pin
from .project import repository, version

__all__ = [
    "COLAB_ONLY",
    "SETUP_TAG",
    "colab_link",
    "install_command",
    "main",
    "setup_cell_source",
    "sync_notebook",
]

SETUP_TAG = "colab-setup"
#: what Colab's own Python lacks of the course's runtime requirements (pyproject's pins)
COLAB_ONLY = ("array-api-compat", "isal")
_NOTEBOOKS = REPO / "notebooks"
_README = REPO / "README.md"
_LINKS_START = "<!-- colab links: python -m course colab -->"
_LINKS_END = "<!-- end of colab links -->"


def install_command() -> list[str]:
    """The pip arguments the set-up cell runs under Colab (after ``python -m pip``)."""
    owner, name = repository()
    course = f"attention-lib @ git+https://github.com/{owner}/{name}@v{version()}"
    return ["install", "--quiet", "--no-deps", course, *(_pin(n) for n in COLAB_ONLY)]


def setup_cell_source() -> str:
    """The first code cell of every notebook."""
    items = "".join(f"            {json.dumps(a)},\n" for a in ["-m", "pip", *install_command()])
    return (  # as ruff formats it: the notebooks are linted
        "# On Google Colab: install this course (this notebook's version) beside Colab's own\n"
        "# torch. Anywhere else this cell does nothing.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        "\n"
        "    subprocess.run(\n"
        "        [\n"
        "            sys.executable,\n"
        f"{items}"
        "        ],\n"
        "        check=True,\n"
        "    )\n"
    )


def colab_link(notebook: str) -> str:
    """The "Open in Colab" address of ``notebook`` (a file name) at the tagged version."""
    owner, name = repository()
    return (
        f"https://colab.research.google.com/github/{owner}/{name}/blob/v{version()}"
        f"/notebooks/{notebook}"
    )


def _setup_cell(existing: dict | None) -> dict:
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "id": (existing or {}).get("id", "colab-setup"),
        "metadata": {"jupyter": {"source_hidden": True}, "tags": [SETUP_TAG]},
        "outputs": [],
        "source": setup_cell_source().rstrip("\n").splitlines(keepends=True),
    }
    if existing is not None:  # keep what an execution recorded (nbval compares outputs: none)
        cell["execution_count"] = existing.get("execution_count")
        cell["metadata"] = {**existing.get("metadata", {}), **cell["metadata"]}
    return cell


def sync_notebook(path: Path, check: bool = False) -> bool:
    """Make ``path``'s first code cell the set-up cell; True if it was already. With
    ``check``, write nothing."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = nb["cells"]
    first = next(i for i, c in enumerate(cells) if c["cell_type"] == "code")
    existing = cells[first] if SETUP_TAG in cells[first]["metadata"].get("tags", []) else None
    cell = _setup_cell(existing)
    if existing is not None and existing == cell:
        return True
    if not check:
        if existing is not None:
            cells[first] = cell
        else:
            cells.insert(first, cell)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return False


def readme_links() -> str:
    """The README's table of "Open in Colab" links, one per notebook."""
    rows = [
        f"[{p.stem}]({colab_link(p.name)})" for p in sorted(_NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    ]
    return "\n".join([_LINKS_START, "Open in Colab: " + " · ".join(rows), _LINKS_END])


def sync_readme(check: bool = False) -> bool:
    """Rewrite the README's Colab links; True if they were already current."""
    text = _README.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(_LINKS_START) + r".*?" + re.escape(_LINKS_END), re.S)
    if not pattern.search(text):
        raise LookupError(f"README.md has no {_LINKS_START!r} ... {_LINKS_END!r} block")
    new = pattern.sub(lambda _: readme_links(), text)
    if new == text:
        return True
    if not check:
        _README.write_text(new, encoding="utf-8")
    return False


def main(argv: list[str] | None = None) -> int:
    """``python -m course colab [--check]``: write the set-up cells and the README's links."""
    check = "--check" in (argv or [])
    stale = [
        p.name for p in sorted(_NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if not sync_notebook(p, check)
    ]
    if not sync_readme(check):
        stale.append("README.md")
    if stale and check:
        print(f"out of date (run python -m course colab): {', '.join(stale)}", file=sys.stderr)
        return 1
    if stale:
        print(f"rewrote: {', '.join(stale)}")
    return 0
