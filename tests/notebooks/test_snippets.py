"""Code the prose hands a learner to copy runs as written, where the notebook shows it.

Every fenced Python block in a markdown cell (```` ```python ````) is run in a
fresh kernel in its notebook's own context: the notebook is executed with each
snippet inserted as a code cell right after the markdown cell that shows it,
so the snippet sees what the cells above it made, as a learner pasting it
there would. A snippet that is not meant to run says so on its first line,
``# pseudo-code: <why>``, where the learner reads it; the test skips it and
prints the reason.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(REPO.glob("notebooks/[0-9][0-9]_*.ipynb"))
FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[ \t]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
PSEUDO = re.compile(r"#\s*pseudo-code:\s*(?P<why>\S.*)")


def snippets(notebook: dict) -> list[tuple[int, str]]:
    """(markdown cell index, code) of every fenced Python block, its indentation removed."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "markdown":
            for match in FENCE.finditer("".join(cell["source"])):
                found.append((index, textwrap.dedent(match.group("body"))))
    return found


def pseudo_code_reason(code: str) -> str | None:
    """The reason a snippet gives on its first line for not running, or None."""
    first = code.strip().splitlines()[0] if code.strip() else ""
    match = PSEUDO.fullmatch(first.strip())
    return match.group("why") if match else None


def test_the_snippet_finder_reads_indented_fences_and_pseudo_code():
    cell = {"cell_type": "markdown", "source": "* a list\n\n  ```python\n  x = 1\n  y = x\n  ```\n"}
    pseudo = {
        "cell_type": "markdown",
        "source": "```python\n# pseudo-code: shapes only\nf(...)\n```",
    }
    assert snippets({"cells": [cell, pseudo]}) == [
        (0, "x = 1\ny = x\n"),
        (1, "# pseudo-code: shapes only\nf(...)\n"),
    ]
    assert pseudo_code_reason("# pseudo-code: shapes only\nf(...)") == "shapes only"
    assert pseudo_code_reason("x = 1") is None


WITH_SNIPPETS = [p for p in NOTEBOOKS if snippets(json.loads(p.read_text(encoding="utf-8")))]


@pytest.mark.parametrize("path", WITH_SNIPPETS, ids=lambda p: p.stem[:2])
def test_every_fenced_snippet_runs_where_the_notebook_shows_it(path):
    notebook = nbformat.read(path, as_version=4)
    found = snippets(notebook)
    for index, code in reversed(found):  # from the end, so the earlier indexes hold
        why = pseudo_code_reason(code)
        if why:
            print(f"{path.name} cell {index}: pseudo-code, not run: {why}")
            continue
        snippet = nbformat.v4.new_code_cell(code, metadata={"snippet_of": index})
        notebook.cells.insert(index + 1, snippet)
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3", allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    )  # fmt: skip
    client.execute()
    failures = [
        f"the snippet in cell {cell.metadata['snippet_of']}: {o['ename']}: {o['evalue']}"
        for cell in notebook.cells
        if "snippet_of" in cell.metadata
        for o in cell.get("outputs", [])
        if o["output_type"] == "error"
    ]
    assert failures == [], f"{path.name}: snippets that fail as written: {failures}"
