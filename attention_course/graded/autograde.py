"""Grade the submissions of one assignment: nbgrader's autograde, after a check of what came in.

``python -m course graded grade 02_scaling`` grades a checkout's teachers/graded; a course
directory elsewhere: ``python -m attention_course.graded grade 02_scaling --root DIR``.
Reads DIR/submitted/<student>/<assignment>/ (nbgrader's layout; ``nbgrader collect`` puts
them there on a hub), sets aside each file that is not a readable notebook (kept as
``<name>.not-a-notebook``, the untouched release graded in its place, 0 points, where
nbgrader would fail on it), puts a notebook whose cells were moved or deleted back in the
release's order (`reorder`), each with a one-line note in
DIR/feedback/<student>/<assignment>/<name>.txt, runs
``nbgrader autograde`` (a deleted or moved test cell is put back: nbgrader_config.py) and
``nbgrader generate_feedback``, and prints each student's score. Exit status: 0, or 1 when
nbgrader itself failed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from .edition import nbgrader_env

__all__ = ["SET_ASIDE", "grade", "not_a_notebook", "reorder", "scores", "set_aside"]

SET_ASIDE = ".not-a-notebook"


def not_a_notebook(path: Path) -> str:
    """Why ``path`` is not a notebook nbgrader can grade ("" when it is one)."""
    try:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
    except Exception as err:  # any unreadable file: say what, in one line
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        return f"{path.name} is not a Jupyter notebook ({type(err).__name__}: {reason})"
    return ""


def set_aside(root: Path, assignment: str) -> dict[Path, str]:
    """Prepare every submission of ``assignment`` for nbgrader: a file that is not a
    notebook is kept as ``<name>.not-a-notebook`` and the untouched release graded in its
    place (0 points, in the gradebook, where nbgrader would fail on it); a notebook with
    moved or deleted cells is put back in order (`reorder`). Returns, for each submission
    it changed, one line saying what and why."""
    said = {}
    for path in sorted((root / "submitted").glob(f"*/{assignment}/*.ipynb")):
        student = path.parents[1].name
        reason = not_a_notebook(path)
        release = root / "release" / assignment / path.name
        if not reason:
            moved = reorder(path, release) if release.exists() else ""
            if moved:
                said[path] = f"{student}: {moved}"
            continue
        path.rename(path.with_name(path.name + SET_ASIDE))
        if release.exists():
            shutil.copy(release, path)
        kept = f"kept as {path.name}{SET_ASIDE}, graded as unanswered (0)"
        said[path] = f"{student}: {reason}; {kept}"
    return said


def _notes(root: Path, assignment: str, said: dict[Path, str]) -> None:
    """Each message beside the learner's feedback, feedback/<student>/<a>/<name>.txt (after
    nbgrader's generate_feedback, which empties that folder)."""
    for path, message in said.items():
        note = root / "feedback" / path.parents[1].name / assignment / f"{path.stem}.txt"
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(message + "\n")


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def reorder(path: Path, release: Path) -> str:
    """Put a submission's cells back in the release's order if they were moved or deleted
    (nbgrader's own repair fails on moved cells), and say so ("" when nothing was off).

    Each answer is the learner's cell of that id, or the release's stub where they deleted
    it; every other cell of the release (prose, checks, tests) is the release's, as nbgrader
    restores it anyway; cells of the learner's own go before the first exercise, in their
    order, so that what they define is there for every answer.
    """
    notebook = nbformat.read(path, as_version=4)
    template = nbformat.read(release, as_version=4)
    theirs = [_grade_id(c) for c in notebook.cells if _grade_id(c)]
    wanted = [_grade_id(c) for c in template.cells]
    if theirs == [g for g in wanted if g in theirs] and set(wanted) <= set(theirs):
        return ""
    by_id = {_grade_id(c): c for c in notebook.cells if _grade_id(c)}
    own = [c for c in notebook.cells if not _grade_id(c)]
    cells = []
    for cell in template.cells:
        meta = cell.metadata.get("nbgrader", {})
        cells.append(by_id.get(meta["grade_id"], cell) if meta.get("solution") else cell)
        if meta["grade_id"] == "setup":
            cells += own
    notebook.cells = cells
    nbformat.write(notebook, path)
    missing = [g for g in wanted if g not in theirs]
    lost = f"; missing, taken from the release: {', '.join(missing)}" if missing else ""
    return f"{path.name} had cells moved or deleted: put back in the release's order{lost}"


def scores(root: Path, assignment: str) -> dict[str, tuple[float, float]]:
    """student -> (score, max score) from nbgrader's database."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        return {
            s.student_id: (s.score, s.max_score)
            for s in gradebook.assignment_submissions(assignment)
        }


def grade(root: Path, assignment: str) -> int:
    """Grade ``assignment``'s submissions under ``root``; print what was set aside or put back
    in order, and each student's score. 0, or 1 when one of nbgrader's steps failed."""
    said = set_aside(root, assignment)
    for message in said.values():
        print(message)
    status = 0
    # generate_assignment first: it records the assignment in this folder's gradebook
    # (release/ comes out as committed: the generator's own step)
    for step in (["generate_assignment"], ["autograde", "--create"], ["generate_feedback"]):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "nbgrader",
                step[0],
                assignment,
                *step[1:],
                "--force",
                f"--CourseDirectory.root={root}",
                "--log-level=WARN",
            ],
            cwd=root,
            env=nbgrader_env(),
            check=False,
        )
        status = status or done.returncode
    _notes(root, assignment, said)
    for student, (score, most) in sorted(scores(root, assignment).items()):
        print(f"{student}: {score:g} of {most:g}")
    return 1 if status else 0
