"""``python -m course graded``: the graded edition of notebooks 02 and 07 (teachers/graded).

python -m course graded [--check]         # generate source/ and release/ (or check them)
python -m course graded grade ASSIGNMENT  # grade DIR/submitted/*/ASSIGNMENT (nbgrader)
python -m course graded strip [PYTHON]    # a graded class's install: the solutions removed

The first two run the course's graded package (``python -m attention_course.graded``) on
teachers/graded, in this interpreter (the teacher's environment: the course and its teach
extra). ``strip`` removes the solutions' one data module
(attention_course/lessons/exercises/answers.py, and its compiled copies) from the
environment of PYTHON (default: this one), after ``pip install ./lib .`` there; it refuses a
course that is installed from this checkout (editable), whose answers.py is the course's
own source.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from .paths import REPO

__all__ = ["FOLDER", "NOTEBOOKS", "main", "solutions", "strip"]

FOLDER = REPO / "teachers" / "graded"
NOTEBOOKS = REPO / "notebooks"
_FIND = (
    "import importlib.util as u; s = u.find_spec('attention_course.lessons.exercises'); "
    "print(s.submodule_search_locations[0])"
)


def solutions(python: str) -> tuple[Path | None, str]:
    """Where the course installed for ``python`` keeps its solutions (its exercises package's
    answers.py, which may be absent: stripped), or None with the reason it cannot say."""
    found = subprocess.run(  # not from this folder: `python -c` puts the working folder first
        [python, "-c", _FIND],
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),
    )
    if found.returncode:
        return None, f"{python} has no attention_course installed"
    package = Path(found.stdout.strip()).resolve()
    if package.is_relative_to(REPO.resolve()):
        return None, (
            f"{python} runs the course from this checkout ({package}), an editable install: "
            "strip a learners' environment made with pip install ./lib ."
        )
    return package / "answers.py", ""


def strip(python: str) -> int:
    """Remove the solutions from the course installed for ``python``; 0, or 1 with a reason."""
    answers, why = solutions(python)
    if answers is None:
        print(f"course graded strip: {why}", file=sys.stderr)
        return 1
    removed = [p for p in [answers, *answers.parent.glob("__pycache__/answers.*")] if p.exists()]
    for path in removed:
        path.unlink()
    package = answers.parent
    print(f"solutions removed from {package}" if removed else f"no solutions in {package}")
    return 0


def main(args: list[str]) -> int:
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if args[:1] == ["strip"]:
        if len(args) > 2:
            print("usage: python -m course graded strip [PYTHON]", file=sys.stderr)
            return 2
        return strip(args[1] if len(args) == 2 else sys.executable)
    where = [] if "--root" in args else ["--root", str(FOLDER)]  # a --root given wins
    if args[:1] != ["grade"]:
        where += ["--notebooks", str(NOTEBOOKS)]
    command = [sys.executable, "-m", "attention_course.graded", *args, *where]
    return subprocess.call(command, cwd=REPO)
