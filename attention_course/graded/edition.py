"""The graded edition of notebooks 02 and 07, generated from the course notebooks.

For each assignment this writes nbgrader's source notebook, source/<a>/<a>.ipynb (the
exercises' prose from the course notebook, each answer cell holding the course's solution
between nbgrader's solution markers, each exercise's hidden test a call of the course's
checker on the assignment's own cases), then runs nbgrader's generate_assignment, which
writes the learners' release, release/<a>/<a>.ipynb: the solutions cut to a stub, the hidden
tests cut out, no outputs.

An assignment's cases are drawn once, from its ``seed`` (`Assignment`), which is stored in
its hidden tests: every submission is graded on the same cases, which no learner sees (the
check cell under each answer draws its own cases from the learner's function, as the
course's gates do). To grade a new class on new cases, draw a new seed (any int below a
million, e.g. ``python -c "import secrets; print(secrets.randbelow(10**6))"``), put it in
`ASSIGNMENTS` and regenerate.
A checkout commits both under teachers/graded (``python -m course graded`` writes them,
``--check`` regenerates into a scratch folder and names every file that differs:
tests/teachers/test_graded.py). Runs in the teacher's environment: nbgrader, and the course
with its solutions installed.
"""

from __future__ import annotations

import ast
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..lessons.exercises.grading import EXERCISES
from ..lessons.exercises.solutions import FLASH_SOLUTIONS, INSTALLED, SOLUTIONS

__all__ = [
    "ASSIGNMENTS",
    "CONFIG",
    "GENERATED",
    "Assignment",
    "differences",
    "generate",
    "nbgrader_env",
    "source_notebook",
]

#: what is generated (and committed) under nbgrader's course directory
GENERATED = ("source", "release")
#: nbgrader's configuration, in the course directory beside what is generated
CONFIG = "nbgrader_config.py"


@dataclass(frozen=True)
class Assignment:
    """One graded notebook: the course notebook it comes from, points per exercise, its
    first cells (title, set-up), the course cell its first exercise's prose starts at, and
    the seed its hidden tests draw their cases from."""

    name: str
    course: str
    title: str
    points: dict[str, int]
    setup: str
    start: str  # the first line of the course's markdown cell where the exercises begin
    seed: int  # drawn once (secrets.randbelow(10**6)), stored with the assignment


ASSIGNMENTS = (
    Assignment(
        "02_scaling",
        "02_developer_scaling.ipynb",
        "02 · The scaling problem: graded exercises",
        {
            "under_divided": 1,
            "my_attention": 2,
            "combined_mask": 2,
            "decode_step": 2,
            "multi_head": 3,
        },
        "import math\n\nimport numpy as np\n\nfrom attention_lib import softmax\n"
        "from attention_course.lessons.exercises.grading import check",
        "## Try it yourself",
        58277,
    ),
    Assignment(
        "07_flash",
        "07_researcher_build_flash_attention.ipynb",
        "07 · FlashAttention, built by hand: graded exercises",
        {
            "online_update": 2,
            "key_loop": 1,
            "key_stop": 1,
            "diagonal_mask": 1,
            "flash_forward": 2,
            "flash_backward": 3,
            "FlashAttention": 2,
            "row_softmax": 1,
            "online_softmax": 1,
            "key_block": 2,
        },
        "import math\n\nimport numpy as np\nimport torch\n\n"
        "from attention_lib import attention_weights\n"
        "from attention_course.lessons.exercises import skeleton_source\n"
        "from attention_course.lessons.exercises.grading import check\n\n"
        "np.set_printoptions(precision=4, suppress=True)  # short rows when you print arrays",
        "**Before you start.**",
        406253,
    ),
)

#: prose about what a graded edition has not: the course's hint and solution gates, and
#: starters that run as they stand (its answers start as nbgrader's stub)
_GATE_WORDS = re.compile(
    r"Show hint|solution stays hidden|solution waits|hints|starter below|starter cell|_gate\b",
    re.IGNORECASE,
)


def _nbgrader(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _cell(kind: str, source: str, grade_id: str, **nbgrader) -> nbformat.NotebookNode:
    make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
    cell = make(source, metadata=_nbgrader(grade_id, **nbgrader))
    cell.id = grade_id.replace("_", "-")  # stable ids: the same notebook on every run
    return cell


def _prose(source: str) -> str:
    """A course markdown cell without its sentences about hints and the solution gate."""
    kept = []
    for paragraph in source.split("\n\n"):
        if _GATE_WORDS.search(paragraph):
            # sentences and the whitespace before each: [s0, sep1, s1, sep2, s2, ...]
            parts = re.split(r"(?<=[.!?])(\s+)(?=[A-Z*(])", paragraph)
            seps, sentences = ["", *parts[1::2]], parts[0::2]
            paragraph = "".join(
                (sep if i else "") + sentence
                for i, (sep, sentence) in enumerate(zip(seps, sentences, strict=True))
                if not _GATE_WORDS.search(sentence)
            ).strip()
        if paragraph:
            kept.append(paragraph)
    return "\n\n".join(kept)


def _answer(starter: str, name: str) -> str:
    """The starter's ``def`` line and docstring, then the course's solution body between
    nbgrader's markers (the release keeps the def and docstring, and a stub for the body)."""
    lines = starter.split("\n\n\n")[0].splitlines()
    head = [lines[0]] + [ln for ln in lines[1:2] if ln.strip().startswith('"""')]
    solution = (SOLUTIONS.get(name) or FLASH_SOLUTIONS[name]).code.rstrip().splitlines()
    if solution[0] != lines[0]:
        raise ValueError(f"{name}: the solution's def line {solution[0]!r} is not the starter's")
    return "\n".join([*head, "    ### BEGIN SOLUTION", *solution[1:], "    ### END SOLUTION"])


def _class_answer(starter: str, name: str) -> str:
    """A class's answer: the starter's ``class`` line and docstring, then the course's
    solution with each method's body between nbgrader's markers (the release keeps every
    decorator and ``def`` line, and a stub for each body)."""
    lines = starter.split("\n\n\n")[0].splitlines()
    head = [lines[0]] + [ln for ln in lines[1:2] if ln.strip().startswith('"""')]
    code = (SOLUTIONS.get(name) or FLASH_SOLUTIONS[name]).code.rstrip()
    solution = code.splitlines()
    if solution[0] != lines[0]:
        raise ValueError(f"{name}: the solution's class line {solution[0]!r} is not the starter's")
    (cls,) = ast.parse(code).body
    out = [*head]
    for method in cls.body:
        first = (method.decorator_list[0] if method.decorator_list else method).lineno
        body = method.body[0].lineno
        indent = " " * (method.body[0].col_offset)
        out += ["", *solution[first - 1 : body - 1], f"{indent}### BEGIN SOLUTION"]
        out += [*solution[body - 1 : method.end_lineno], f"{indent}### END SOLUTION"]
    return "\n".join(out)


def source_notebook(assignment: Assignment, notebooks: Path) -> nbformat.NotebookNode:
    """nbgrader's source notebook of ``assignment``, from its course notebook in ``notebooks``."""
    course = nbformat.read(notebooks / assignment.course, as_version=4)
    total = sum(assignment.points.values())
    intro = (
        f"# {assignment.title}\n\n"
        f"Write each function where it says `YOUR CODE HERE`, keeping its name and arguments. "
        f"The cell under it runs the course's checker and prints its report: run it as often "
        f"as you like; each change to your function draws new cases. Your grade comes from "
        f"the same checker, run again when your notebook is graded, on cases drawn for this "
        f"assignment: {total} points in all, each exercise's points given when its checker "
        f"passes. Keep the cells where they are; a deleted test cell is put back when grading."
    )
    cells = [
        _cell("markdown", intro, "intro", locked=True),
        _cell("code", assignment.setup, "setup", locked=True),
    ]
    names = iter(assignment.points)
    name, started = next(names, None), False
    for cell in course.cells:
        text = cell.source
        started = started or (cell.cell_type == "markdown" and text.startswith(assignment.start))
        if not started or name is None:
            continue
        if cell.cell_type == "markdown":
            prose = _prose(text)
            if prose:
                cells.append(_cell("markdown", prose, f"{name}_prose_{len(cells)}", locked=True))
        elif text.startswith((f"def {name}(", f"class {name}(")):
            points = assignment.points[name]
            answer = _class_answer if text.startswith("class ") else _answer
            cells += [
                _cell("code", answer(text, name), name, solution=True),
                _cell("code", f'report = check("{name}", {name})', f"{name}_check", locked=True),
                _cell(
                    "code",
                    f"# exercise {name!r}: the course's checker, run again when grading "
                    f"({points} point{'s' * (points > 1)})\n"
                    "### BEGIN HIDDEN TESTS\n"
                    "from attention_course.lessons.exercises.grading import grade\n\n"
                    f'grade("{name}", globals().get("{name}"), seed={assignment.seed})\n'
                    "### END HIDDEN TESTS",
                    f"{name}_test",
                    grade=True,
                    locked=True,
                    points=points,
                ),
            ]
            name = next(names, None)
        elif not any(w in text for w in ("Gate", "gate", "Explorer", "explorer", "display(")):
            cells.append(_cell("code", text, f"{name}_code_{len(cells)}", locked=True))
    if name is not None:
        raise ValueError(f"{assignment.course}: no starter cell for exercise {name!r}")
    unknown = set(assignment.points) - set(EXERCISES)
    if unknown:
        raise ValueError(f"{assignment.name}: no checker for {sorted(unknown)}")
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {"kernelspec": course.metadata["kernelspec"]}
    return notebook


def nbgrader_env() -> dict[str, str]:
    """This environment's variables, its bin/ first on PATH (nbgrader runs ``alembic`` from
    there), and a fixed hash seed (the same output on every run)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "PYTHONHASHSEED": "0"}


def generate(root: Path, notebooks: Path, config: Path) -> None:
    """Write source/ and release/ of every assignment under ``root`` (nbgrader's course
    directory: ``config``, its nbgrader_config.py, is copied there) from the course notebooks
    in ``notebooks``; nbgrader's database goes to a scratch folder."""
    if not INSTALLED:
        raise SystemExit("the course's solutions are not installed here (a graded install)")
    root.mkdir(parents=True, exist_ok=True)
    if (root / CONFIG).resolve() != config.resolve():
        shutil.copy(config, root / CONFIG)
    for kind in GENERATED:
        shutil.rmtree(root / kind, ignore_errors=True)
    for assignment in ASSIGNMENTS:
        folder = root / "source" / assignment.name
        folder.mkdir(parents=True)
        made = source_notebook(assignment, notebooks)
        nbformat.write(made, folder / f"{assignment.name}.ipynb")
    with tempfile.TemporaryDirectory() as scratch:
        for assignment in ASSIGNMENTS:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "nbgrader",
                    "generate_assignment",
                    assignment.name,
                    "--force",
                    "--log-level=WARN",
                    f"--CourseDirectory.root={root}",
                    f"--CourseDirectory.db_url=sqlite:///{scratch}/gradebook.db",
                ],
                cwd=root,
                check=True,
                env=nbgrader_env(),
            )


def differences(root: Path, committed: Path) -> list[str]:
    """The generated files under ``root`` that differ from (or are missing beside) the
    committed ones under ``committed``, as paths relative to it."""
    differ = []
    for kind in GENERATED:
        made = {p.relative_to(root) for p in (root / kind).rglob("*") if p.is_file()}
        kept = {p.relative_to(committed) for p in (committed / kind).rglob("*") if p.is_file()}
        for path in sorted(made | kept):
            a, b = root / path, committed / path
            if not (a.is_file() and b.is_file() and filecmp.cmp(a, b, shallow=False)):
                differ.append(str(path))
    return differ
