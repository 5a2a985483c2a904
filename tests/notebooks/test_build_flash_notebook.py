"""Notebook 07 as a learner meets it: nothing given away, and every gate opens for a right answer.

- The committed notebook (what Run All leaves) shows no line of any
  solution, in a cell's source or in an output, and each starter's output
  is its checker's question, not a failure.
- A copy with our solutions typed into the starter cells (one per exercise
  of 07 in the registry), run in a
  real kernel (nbclient, as nbval runs it): every checker passes and every
  gate reports "passed". This is where `inspect.getsource` reads a function
  defined in a notebook cell, and where the Triton check starts its child
  process from inside a kernel.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from attention_course.lessons.exercises import FLASH_SOLUTIONS, skeleton_source
from attention_course.lessons.exercises.registry import EXERCISES

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOK = NOTEBOOKS / "07_researcher_build_flash_attention.ipynb"
STARTERS = tuple(name for name, e in EXERCISES.items() if e.notebook == "07")


def _cells() -> list[dict]:
    return json.loads(NOTEBOOK.read_text())["cells"]


def _text(cell: dict) -> str:
    parts = ["".join(cell["source"])]
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        parts += [
            "".join(v) if isinstance(v, list) else str(v) for v in out.get("data", {}).values()
        ]
    return "\n".join(parts)


def _is_starter(source: str, name: str) -> bool:
    return source.startswith((f"def {name}(", f"class {name}("))


def _solution_lines() -> list[str]:
    """Every line of every solution that does more than open the function or return
    (and is not in the kernel skeleton or a starter, which the notebook shows on purpose)."""
    starters = [
        "".join(c["source"])
        for c in _cells()
        if any(_is_starter("".join(c["source"]), name) for name in STARTERS)
    ]
    given = skeleton_source() + "\n".join(starters)
    lines = []
    for solution in FLASH_SOLUTIONS.values():
        for line in solution.code.splitlines()[1:]:
            body = line.split("#")[0].strip()
            if len(body) > 12 and not body.startswith("return") and body not in given:
                lines.append(body)
    return lines


def test_the_committed_notebook_gives_no_solution_away():
    page = "\n".join(_text(c) for c in _cells())
    shown = [line for line in _solution_lines() if line in page]
    assert not shown, f"solution lines visible in notebook 07: {shown}"
    for name in STARTERS:
        starter = next(c for c in _cells() if _is_starter("".join(c["source"]), name))
        assert "raise NotImplementedError" in "".join(starter["source"])
        said = "".join("".join(o.get("text", "")) for o in starter["outputs"])
        assert said.startswith("Your function is not written yet"), (name, said)


def _solved() -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    solved = copy.deepcopy(notebook)
    for cell in solved.cells:
        for name in STARTERS:
            if _is_starter(cell.source, name):
                cell.source = (
                    FLASH_SOLUTIONS[name].code + cell.source[cell.source.index("\n\n\n") :]
                )
        if cell.source.endswith("_gate.widget"):
            cell.source = f"print({cell.source.removesuffix('.widget')}.revealed)"
    return solved


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="exercise 4 needs triton (Linux only)"
)
def test_the_solutions_typed_into_the_starters_open_every_gate():
    solved = _solved()
    client = NotebookClient(solved, timeout=600, resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    said = {
        name: "".join(o.get("text", "") for o in c.outputs)
        for c in solved.cells
        for name in STARTERS
        if c.cell_type == "code" and _is_starter(c.source, name)
    }
    assert set(said) == set(STARTERS), sorted(said)
    for name, text in said.items():
        assert text.startswith("All ") and " cases agree with " in text, (name, text)
    revealed = [
        "".join(o.get("text", "") for o in c.outputs)
        for c in solved.cells
        if c.source.startswith("print(") and ".revealed" in c.source
    ]
    assert revealed == ["passed\n"] * len(STARTERS), revealed
