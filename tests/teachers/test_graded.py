"""The graded edition (teachers/graded): generated, free of solutions, graded by the checkers.

- The committed source/ and release/ are what the generator makes now.
- The release holds none of the solutions' code lines in any cell, output or metadata, and a
  graded install (`python -m course graded strip`) reaches none: answers.py gone, the
  loader empty, the release's code runs, the gate gives feedback without a solution.
- Each assignment's hidden tests grade on the cases of its own seed, drawn once and stored
  in the source notebook, never in the release; the checks under the answers draw their own.
- nbgrader's real autograde (marked ``grading``: make test-graded, a CI step) gives the
  course's solutions full marks, an untouched release zero, each typical wrong answer the
  loss of its own exercise's points with the checker's words as feedback, and a file that
  is not a notebook, or a notebook with cells moved and deleted, a clear message.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from support import server_extensions_on

from attention_course.graded import autograde as grader
from attention_course.graded import edition as generate
from attention_course.lessons.exercises import grading
from attention_course.lessons.exercises.registry import run
from attention_course.lessons.exercises.solutions import (
    BUILDS_ON,
    FLASH_SOLUTIONS,
    SOLUTIONS,
    solution_function,
)
from attention_lib import softmax
from course.graded import FOLDER, NOTEBOOKS, strip

ALL = {**SOLUTIONS, **FLASH_SOLUTIONS}
POINTS = {a.name: a.points for a in generate.ASSIGNMENTS}
SEEDS = {a.name: a.seed for a in generate.ASSIGNMENTS}
SEED_OF = {name: SEEDS[a] for a, points in POINTS.items() for name in points}

#: a typical wrong answer per exercise: (the solution's text, what the learner wrote instead)
WRONG = {
    "under_divided": ("d**-0.25", "1 / d"),
    "my_attention": ("/ math.sqrt(q.shape[-1])", "/ q.shape[-1]"),
    "combined_mask": ("np.tril(", "np.triu("),
    "decode_step": (", k=S - T)", ")"),
    "multi_head": ("math.sqrt(d_head)", "math.sqrt(d_model)"),
    "online_update": ("rescale * total +", "total +"),
    "key_loop": (".T * scale", ".T"),
    "key_stop": ("min(length_k, r1)", "min(length_k, r1 - 1)"),
    "diagonal_mask": ("cols <= rows", "cols < rows"),
    "flash_forward": ("out[r0:r1] = acc / total", "out[r0:r1] = acc"),
    "flash_backward": ("p * (dp - delta)", "p * dp"),
    "FlashAttention": ("return dq, dk, dv, None", "return dq, dk, dv"),
    "row_softmax": ('other=float("-inf")', "other=0.0"),
    "online_softmax": ("total * tl.exp(m - m_new) +", "total +"),
    "key_block": ("keep = cols[None, :] < length_k", "keep = cols[None, :] >= 0"),
}
#: the exercises whose answer is Triton code, checked as text in a child process
TRITON = ("row_softmax", "online_softmax", "key_block")


def _mistake(report, text: str) -> str:
    """What the checker names: a report's hint, or the scale rule's line of verdict."""
    return getattr(report, "hint", "") or next(
        (ln for ln in text.splitlines() if ln.startswith("your weights")), text.splitlines()[0]
    )


def _graded(name: str, fn) -> tuple:
    """The report and feedback the hidden test of ``name`` gives ``fn`` (its assignment's
    seed)."""
    return run(name, fn, SEED_OF[name], hints=False)


def _code_lines(name: str) -> list[str]:
    """A solution's code lines past its def line (the starter's), stripped, none empty; a
    class's decorators and def lines are the starter's too."""
    lines = [ln.strip() for ln in ALL[name].code.splitlines()[1:] if ln.strip()]
    return [ln for ln in lines if not ln.startswith(("@", "def "))]


def _wrong(name: str) -> str:
    old, new = WRONG[name]
    assert old in ALL[name].code, f"{name}: {old!r} is not in the solution"
    return ALL[name].code.replace(old, new)


def _function(name: str, code: str):
    """The function ``code`` defines, in a notebook-like namespace (Triton code: its text)."""
    if name in TRITON:
        return code
    import torch

    scope = {"np": np, "math": math, "softmax": softmax, "torch": torch}
    for before in BUILDS_ON.get(name, ()):
        scope[before] = solution_function(before)
    exec(compile(code, f"<{name}>", "exec"), scope)
    return scope[name]


# -- generated, never hand-kept --------------------------------------------------------


def test_the_committed_edition_is_what_the_generator_makes(tmp_path: Path) -> None:
    generate.generate(tmp_path, NOTEBOOKS, FOLDER / generate.CONFIG)
    assert generate.differences(tmp_path, FOLDER) == []
    (tmp_path / "release" / "07_flash" / "07_flash.ipynb").write_text("{}")  # a stale copy
    assert generate.differences(tmp_path, FOLDER) == ["release/07_flash/07_flash.ipynb"]


@pytest.mark.slow
def test_the_teachers_command_checks_the_committed_edition() -> None:
    """``python -m course graded --check`` runs the course's graded package (by module, not
    a script's path) on teachers/graded."""
    done = subprocess.run(
        [sys.executable, "-m", "course", "graded", "--check"],
        cwd=FOLDER.parents[1],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the graded edition is up to date" in done.stdout


# -- no solution in the release, none in a graded install ---------------------------------


def _release(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(FOLDER / "release" / assignment / f"{assignment}.ipynb", as_version=4)


def test_the_hidden_tests_grade_on_the_assignments_own_cases() -> None:
    for assignment, points in POINTS.items():
        source = nbformat.read(FOLDER / "source" / assignment / f"{assignment}.ipynb", 4)
        text = json.dumps(_release(assignment))
        assert len(set(SEEDS.values())) == len(SEEDS)  # each assignment its own draw
        for name in points:
            (test,) = [
                c
                for c in source.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == f"{name}_test"
            ]
            assert (
                f'grade("{name}", globals().get("{name}"), seed={SEEDS[assignment]})' in test.source
            )
            (check,) = [
                c
                for c in source.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == f"{name}_check"
            ]
            assert check.source == f'report = check("{name}", {name})'  # its own cases
        assert f"seed={SEEDS[assignment]}" not in text  # the learners never see the cases


def test_every_exercise_is_graded_with_its_points() -> None:
    for assignment, points in POINTS.items():
        source = nbformat.read(FOLDER / "source" / assignment / f"{assignment}.ipynb", 4)
        tests = {
            c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
            for c in source.cells
            if c.metadata.get("nbgrader", {}).get("grade")
        }
        assert tests == {f"{n}_test": p for n, p in points.items()}
    assert set(POINTS["02_scaling"]) == set(SOLUTIONS)
    assert set(POINTS["07_flash"]) == set(FLASH_SOLUTIONS)


@pytest.mark.parametrize("assignment", list(POINTS))
def test_the_release_holds_no_solution_code(assignment: str) -> None:
    release = _release(assignment)
    text = json.dumps(release)  # every cell's source, outputs and metadata, the notebook's too
    source = (FOLDER / "source" / assignment / f"{assignment}.ipynb").read_text()
    for name in POINTS[assignment]:
        lines = _code_lines(name)
        assert all(json.dumps(ln)[1:-1] in source for ln in lines)  # the scan can find them
        found = [ln for ln in lines if json.dumps(ln)[1:-1] in text]
        assert found == [], f"{assignment}: {name}'s solution lines in the release: {found}"
        assert "BEGIN HIDDEN TESTS" not in text and f'grade("{name}"' not in text
    assert not any(c.get("outputs") for c in release.cells)
    imported = "\n".join(c.source for c in release.cells if c.cell_type == "code")
    assert "gate" not in imported and "solutions" not in imported and "answers" not in imported


def test_a_graded_install_reaches_no_solution(tmp_path: Path) -> None:
    site = tmp_path / "site"
    root = Path(grading.__file__).parents[3]
    skip = shutil.ignore_patterns("__pycache__")
    for package in (root / "lib" / "attention_lib", root / "attention_course"):
        shutil.copytree(package, site / package.name, ignore=skip)
    python = tmp_path / "python"  # the library and the course "installed" in site/, as pip would
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    assert strip(str(python)) == 0
    package = site / "attention_course"
    everything = "\n".join(p.read_text(errors="replace") for p in package.rglob("*") if p.is_file())
    for name, solution in ALL.items():
        assert solution.code.strip() not in everything, name
        assert solution.explanation not in everything, name
    # what a release notebook can import, and the gate, in that environment
    cells = "\n\n".join(c.source for c in _release("02_scaling").cells if c.cell_type == "code")
    probe = f"""
import importlib.util
assert importlib.util.find_spec("attention_course.lessons.exercises.answers") is None
from attention_course.lessons.exercises import solutions
from attention_course.explorers.gate import ExerciseGate
assert solutions.SOLUTIONS == {{}} and solutions.FLASH_SOLUTIONS == {{}} and not solutions.INSTALLED
{cells}
gate = ExerciseGate("multi_head")
gate.reveal("asked")
assert gate.revealed is None and gate.answer.value == "" and gate.button.disabled
print("stripped:", solutions.__file__)
"""
    done = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"stripped: {package}" in done.stdout
    assert "Your function is not written yet" in done.stdout  # the release's checks ran
    # an editable install (this checkout) is refused: its answers.py is the course's source
    assert strip(sys.executable) == 1
    assert (root / "attention_course" / "lessons" / "exercises" / "answers.py").exists()


def test_the_wrong_answers_fail_their_checker_and_the_solutions_pass(capsys) -> None:
    for name in ALL:
        grading.grade(name, _function(name, ALL[name].code), SEED_OF[name])
        assert f"{name}: passed." in capsys.readouterr().out
        report, text = _graded(name, _function(name, _wrong(name)))
        assert report is not None and not report.passed and _mistake(report, text), (name, text)
        with pytest.raises(AssertionError, match=f"^{name}: not yet"):
            grading.grade(name, _function(name, _wrong(name)), SEED_OF[name])


# -- nbgrader's autograde on real submissions ---------------------------------------------


def _typed(assignment: str, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The release with ``answers`` (name -> code of the whole function) in its answer cells."""
    notebook = _release(assignment)
    for cell in notebook.cells:
        name = cell.metadata.get("nbgrader", {}).get("grade_id")
        if name in answers:
            cell.source = answers[name]
    return notebook


def _submit(root: Path, student: str, assignment: str, notebook) -> None:
    folder = root / "submitted" / student / assignment
    folder.mkdir(parents=True)
    path = folder / f"{assignment}.ipynb"
    if isinstance(notebook, str):
        path.write_text(notebook)
    else:
        nbformat.write(notebook, path)


def _test_output(root: Path, student: str, assignment: str, name: str) -> str:
    graded = nbformat.read(root / "autograded" / student / assignment / f"{assignment}.ipynb", 4)
    (cell,) = [
        c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == f"{name}_test"
    ]
    return json.dumps(cell.outputs, ensure_ascii=False)


def _scores(root: Path, assignment: str) -> dict[str, dict[str, float]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        return {
            student: {
                g.name.removesuffix("_test"): g.score
                for g in gradebook.find_submission_notebook(assignment, assignment, student).grades
            }
            for student in ("course", "untouched", "odd", "even", "shuffled", "junk")
        }


@pytest.mark.grading
@pytest.mark.parametrize("assignment", list(POINTS))
def test_nbgrader_grades_real_submissions(
    assignment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "course"
    root.mkdir()
    for part in ("nbgrader_config.py", "source", "release"):
        copy = shutil.copytree if (FOLDER / part).is_dir() else shutil.copy
        copy(FOLDER / part, root / part)
    names = list(POINTS[assignment])
    right = {n: ALL[n].code for n in names}
    _submit(root, "course", assignment, _typed(assignment, right))
    _submit(root, "untouched", assignment, _release(assignment))
    for student, parity in (("odd", 1), ("even", 0)):  # every other exercise wrong
        answers = {n: _wrong(n) if i % 2 == parity else right[n] for i, n in enumerate(names)}
        _submit(root, student, assignment, _typed(assignment, answers))
    shuffled = _typed(assignment, right)
    first, last = names[0], names[-1]
    shuffled.cells = [  # the last exercise's test cell and the first answer deleted, reversed
        c
        for c in reversed(shuffled.cells)
        if c.metadata.get("nbgrader", {}).get("grade_id") not in (f"{last}_test", first)
    ]
    _submit(root, "shuffled", assignment, shuffled)
    _submit(root, "junk", assignment, "my answers are in the email I sent you")

    status = grader.grade(root, assignment)
    said = capsys.readouterr().out
    assert status == 0, said
    scores = _scores(root, assignment)
    points = POINTS[assignment]
    assert scores["course"] == points
    assert scores["untouched"] == dict.fromkeys(points, 0)
    assert scores["junk"] == dict.fromkeys(points, 0)
    assert f"junk: {assignment}.ipynb is not a Jupyter notebook (" in said
    note = root / "feedback" / "junk" / assignment / f"{assignment}.txt"
    assert "graded as unanswered (0)" in note.read_text()
    for student, parity in (("odd", 1), ("even", 0)):
        for i, name in enumerate(names):
            wrong = i % 2 == parity
            assert scores[student][name] == (0 if wrong else points[name]), (student, name)
            if wrong:  # the feedback names the mistake as the checker does
                report, text = _graded(name, _function(name, _wrong(name)))
                output = _test_output(root, student, assignment, name)
                named = json.dumps(_mistake(report, text), ensure_ascii=False)[1:-1]
                assert named in output, (name, named, output[:2000])
    if assignment == "02_scaling":
        output = _test_output(
            root, "odd" if names.index("multi_head") % 2 else "even", assignment, "multi_head"
        )
        assert "you divided by √" in output and "the model width; each head is" in output
    # moved cells are put back in order, the deleted test cell too; the deleted answer is a stub
    assert "shuffled: " in said and "had cells moved or deleted" in said
    note = root / "feedback" / "shuffled" / assignment / f"{assignment}.txt"
    assert f"missing, taken from the release: {first}, {last}_test" in note.read_text()
    assert scores["shuffled"][first] == 0
    assert "Your function is not written yet" in _test_output(root, "shuffled", assignment, first)
    assert scores["shuffled"] == {**points, first: 0}
    for student in ("course", "untouched", "odd", "shuffled"):
        assert (root / "feedback" / student / assignment / f"{assignment}.html").exists()
    kept = root / "submitted" / "junk" / assignment / f"{assignment}.ipynb{grader.SET_ASIDE}"
    assert kept.read_text() == "my answers are in the email I sent you"
    assert f"junk: 0 of {sum(points.values())}" in said


def test_the_learners_lab_does_not_load_nbgrader() -> None:
    """The teach extra is in the course's environment; the course's JupyterLab (make lab,
    with jupyter/ first on JUPYTER_CONFIG_PATH) lists nbgrader's extension as disabled."""
    jupyter = Path(sys.executable).parent / "jupyter"
    root = FOLDER.parents[1]
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(root / "jupyter"), "NO_COLOR": "1"}
    listed = subprocess.run(
        [str(jupyter), "labextension", "list"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    lines = [ln for ln in (listed.stdout + listed.stderr).splitlines() if "nbgrader v" in ln]
    assert lines and all("disabled" in ln for ln in lines), lines


def test_the_learners_lab_server_loads_no_nbgrader_extension() -> None:
    """Nor its server extensions (formgrader and the assignment lists: a second of import
    and their memory in every learner's server): jupyter/jupyter_server_config.d turns them
    off for the course's JupyterLab, ahead of the environment's own config."""
    root = FOLDER.parents[1]
    assert [k for k in server_extensions_on(str(root / "jupyter")) if "nbgrader" in k] == []
    # and without the course's folder they are on: the setting is what turns them off
    assert any("nbgrader" in k for k in server_extensions_on(None))
