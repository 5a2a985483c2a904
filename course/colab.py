"""Colab: the guarded set-up cell that opens every notebook; the addresses the docs give.

Colab runs a notebook from GitHub in its own Python, which has torch, numpy,
matplotlib and ipywidgets but not the course. The first code cell of every
notebook (`setup_cell`) installs the course there, from this repository at the
notebook's own version (the tag ``v<version>``): the library from its folder
(``lib/``) and the course beside it. Their requirements are ranges that Colab's
own torch, numpy, matplotlib and ipywidgets (7.7.1) meet, so pip adds only what
Colab lacks and replaces nothing. Anywhere else (``"google.colab"`` not
imported) the cell does nothing and prints nothing, so nbval sees no output
from it.

The cell and every address the documentation gives are generated from
pyproject.toml's version and ``[project.urls] Repository`` (`project`): the
README's Colab links and Binder badge, and the hub's clone command and
nbgitpuller link in docs/teachers.md (`REGIONS` names each region and its
file). ``python -m course colab`` rewrites them all, so publishing the course
at another address is that one edit and that one command; ``--check`` fails on
a difference (the tests run it).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .paths import REPO
from .project import binder_link, repository, repository_url, version

__all__ = [
    "REGIONS",
    "SETUP_TAG",
    "colab_link",
    "install_command",
    "main",
    "region",
    "setup_cell_source",
    "sync_notebook",
    "sync_regions",
]

SETUP_TAG = "colab-setup"
_NOTEBOOKS = REPO / "notebooks"
#: the generated regions, each between ``<!-- NAME: python -m course colab -->`` and
#: ``<!-- end of NAME -->``, and the file that holds it (a path from the repository's root)
REGIONS = {
    "colab links": "README.md",
    "binder badge": "README.md",
    "clone command": "docs/teachers.md",
    "hub link": "docs/teachers.md",
}


def install_command() -> list[str]:
    """The pip arguments the set-up cell runs under Colab (after ``python -m pip``)."""
    source = f"git+{repository_url()}@v{version()}"
    return [
        "install",
        "--quiet",
        f"attention-lib @ {source}#subdirectory=lib",
        f"attention-course @ {source}",
    ]


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


def region(name: str) -> str:
    """What the generated region ``name`` (one of `REGIONS`) holds, between its markers."""
    from .hub import pull_link  # the hub's module, which imports nbgrader's settings

    if name == "colab links":
        links = [f"[{p.stem}]({colab_link(p.name)})" for p in _NOTEBOOKS.glob("[0-9][0-9]_*")]
        return "\nOpen in Colab: " + " · ".join(sorted(links)) + "\n"
    if name == "binder badge":
        return f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder_link()})"
    if name == "clone command":  # an indented code block, apart from its markers
        lines = [
            "sudo apt-get install python3-venv npm git",
            f"git clone {repository_url()} && cd {repository()[1]}",
            "sudo python3 -m course hub install",
        ]
        return "\n\n" + "".join(f"    {line}\n" for line in lines) + "\n"
    if name == "hub link":
        return f"\n\n    {pull_link('https://hub.example.org')}\n\n"
    raise KeyError(f"no generated region {name!r}; the regions are {list(REGIONS)}")


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}: python -m course colab -->", f"<!-- end of {name} -->"


def sync_regions(check: bool = False) -> list[str]:
    """Rewrite every generated region in its file (`REGIONS`); the files that were not
    current (all current: none). With ``check``, write nothing."""
    stale = []
    for file in dict.fromkeys(REGIONS.values()):
        path = REPO / file
        text = path.read_text(encoding="utf-8")
        new = text
        for name in (n for n, f in REGIONS.items() if f == file):
            start, end = _markers(name)
            pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
            if not pattern.search(new):
                raise LookupError(f"{file} has no {start!r} ... {end!r} region")
            new = pattern.sub(lambda _, n=name, s=start, e=end: s + region(n) + e, new)
        if new != text:
            stale.append(file)
            if not check:
                path.write_text(new, encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    """``python -m course colab [--check]``: write (or check) the set-up cells and every
    generated region (`REGIONS`)."""
    check = "--check" in (argv or [])
    stale = [
        p.name for p in sorted(_NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if not sync_notebook(p, check)
    ]
    stale += sync_regions(check)
    if stale and check:
        print(f"out of date (run python -m course colab): {', '.join(stale)}", file=sys.stderr)
        return 1
    if stale:
        print(f"rewrote: {', '.join(stale)}")
    return 0
