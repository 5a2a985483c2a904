"""The learner's copies (course/my_notebooks.py, run by `make lab`): their work is never lost.

Each test builds a small course folder and a learner's folder under tmp_path;
the last two check, on a copy of the repo's own configuration, that the
learner's copies are neither collected by pytest nor linted by ruff, so
`make test` tests the course whatever the learner did.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course import my_notebooks
from course.__main__ import main as course_main

ROOT = Path(__file__).resolve().parents[2]


def notebook(source: str) -> str:
    """A one-cell notebook's JSON text."""
    cell = {"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
            "execution_count": None}  # fmt: skip
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


@pytest.fixture
def copies(tmp_path):
    course = tmp_path / "notebooks"
    course.mkdir()
    (course / "00_start_here.ipynb").write_text(notebook("print('hello')"))
    (course / "01_room.ipynb").write_text(notebook("x = 1"))
    return my_notebooks.Copies(course=course, mine=tmp_path / "my-notebooks")


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def test_first_start_copies_every_notebook_and_later_starts_change_nothing(copies):
    said = copies.sync()
    assert said == [
        "your own copies of the notebooks are in my-notebooks/: 00_start_here.ipynb, 01_room.ipynb"
    ]
    for source in copies.course_notebooks():
        assert (copies.mine / source.name).read_bytes() == source.read_bytes()
    before = {p.name: p.read_bytes() for p in copies.mine.iterdir()}
    assert copies.sync() == []
    assert {p.name: p.read_bytes() for p in copies.mine.iterdir()} == before


def test_an_edited_copy_survives_a_course_update_which_is_offered_beside_it(copies):
    copies.sync()
    mine = copies.mine / "01_room.ipynb"
    learner = notebook("x = 1\nmy_answer = 42  # the learner's attempt")
    mine.write_text(learner)  # edited and saved in JupyterLab
    update = notebook("x = 2  # the course, improved")
    (copies.course / "01_room.ipynb").write_text(update)

    said = copies.sync()
    assert mine.read_text() == learner, "the learner's copy was overwritten"
    offered = [n for n in names(copies.mine) if n.startswith("01_room.course-")]
    assert len(offered) == 1 and (copies.mine / offered[0]).read_text() == update
    assert said == [
        "01_room.ipynb: the course has a new version of this notebook; yours is unchanged, "
        f"and the new one is beside it as {offered[0]}"
    ]
    # later starts remind, and touch neither file (the learner may be editing the offer too)
    (copies.mine / offered[0]).write_text(notebook("x = 2\nmore = 'learner'"))
    edited_offer = (copies.mine / offered[0]).read_text()
    assert copies.sync() == [
        f"01_room.ipynb: the course's newer version is beside yours, {offered[0]}"
    ]
    assert mine.read_text() == learner and (copies.mine / offered[0]).read_text() == edited_offer
    # deleted by the learner: they have decided, no more reminders, nothing rewritten
    (copies.mine / offered[0]).unlink()
    assert copies.sync() == []
    assert names(copies.mine) == ["00_start_here.ipynb", "01_room.ipynb"]


def test_a_second_course_update_is_offered_in_a_file_of_its_own(copies):
    copies.sync()
    (copies.mine / "01_room.ipynb").write_text(notebook("mine"))
    for version in ("x = 2", "x = 3"):
        (copies.course / "01_room.ipynb").write_text(notebook(version))
        copies.sync()
    offered = [n for n in names(copies.mine) if n.startswith("01_room.course-")]
    assert len(offered) == 2
    texts = {json.loads((copies.mine / n).read_text())["cells"][0]["source"] for n in offered}
    assert texts == {"x = 2", "x = 3"}


def test_a_copy_never_saved_is_updated_in_place(copies):
    copies.sync()
    update = notebook("x = 2")
    (copies.course / "01_room.ipynb").write_text(update)
    assert copies.sync() == [
        "01_room.ipynb: updated to the course's new version (you had not changed it)"
    ]
    assert (copies.mine / "01_room.ipynb").read_text() == update
    assert names(copies.mine) == ["00_start_here.ipynb", "01_room.ipynb"]


def test_a_new_or_deleted_notebook_is_copied(copies):
    copies.sync()
    (copies.mine / "00_start_here.ipynb").unlink()
    (copies.course / "02_new.ipynb").write_text(notebook("y = 1"))
    assert copies.sync() == ["copied in my-notebooks/: 00_start_here.ipynb, 02_new.ipynb"]
    assert names(copies.mine) == ["00_start_here.ipynb", "01_room.ipynb", "02_new.ipynb"]


def test_reset_brings_the_course_version_back_and_keeps_the_learners(copies):
    copies.sync()
    mine = copies.mine / "01_room.ipynb"
    mine.write_text(notebook("broken("))
    (copies.course / "01_room.ipynb").write_text(notebook("x = 2"))
    copies.sync()  # an offer beside it
    said = copies.reset("01")
    assert mine.read_text() == (copies.course / "01_room.ipynb").read_text()
    (kept,) = (copies.mine / "old-copies").iterdir()
    assert kept.read_text() == notebook("broken(") and kept.name.startswith("01_room.")
    back = "01_room.ipynb: the course's version is back in my-notebooks/"
    assert said == f"{back}; yours is kept as old-copies/{kept.name}"
    assert copies.sync() == [], "reset to the current version: nothing to offer"
    assert copies.reset("01_room.ipynb").startswith("01_room.ipynb: the course's version is back")


@pytest.mark.parametrize("name", ["07", "room", "0", ""])
def test_reset_of_an_unknown_notebook_names_the_choices(copies, name):
    with pytest.raises(SystemExit, match=r"no single course notebook is called .*00_start_here"):
        copies.reset(name)


def test_reset_from_the_command_line_without_a_name_is_refused(capsys):
    assert course_main(["reset"]) == 2
    assert "usage: python -m course reset 01" in capsys.readouterr().err


@pytest.fixture
def repo_with_a_learners_copy(tmp_path):
    """The repo's pytest and ruff configuration, one course notebook, and a learner's
    copy with an error in it and a line ruff would flag."""
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", repo)
    shutil.copy(ROOT / "notebooks" / "sanitize.cfg", repo / "notebooks")
    (repo / "notebooks" / "00_ok.ipynb").write_text(notebook('print("course")'))
    (repo / "my-notebooks").mkdir()
    (repo / "my-notebooks" / "00_ok.ipynb").write_text(notebook("import os\nraise ValueError"))
    return repo


def test_pytest_does_not_collect_the_learners_copies(repo_with_a_learners_copy):
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=repo_with_a_learners_copy,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "notebooks/00_ok.ipynb" in result.stdout
    assert "my-notebooks" not in result.stdout


def test_ruff_does_not_lint_the_learners_copies(repo_with_a_learners_copy):
    ruff = Path(sys.executable).parent / "ruff"
    flagged = subprocess.run(
        [str(ruff), "check", "--no-cache", "my-notebooks/00_ok.ipynb", "--isolated"],
        cwd=repo_with_a_learners_copy,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert flagged.returncode == 1, "the copy should have something ruff flags (F401)"
    for command in (["check"], ["format", "--check"]):
        result = subprocess.run(
            [str(ruff), *command, "--no-cache", "."],
            cwd=repo_with_a_learners_copy,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_work_done_in_the_course_folder_before_is_kept_as_the_learners(tmp_path):
    """A learner who edited notebooks/ itself (before my-notebooks/ existed) gets that work
    as their copy, and the course update after `git checkout` and `git pull` is offered
    beside it, not written over it."""

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    repo = tmp_path / "repo"
    course = repo / "notebooks"
    course.mkdir(parents=True)
    git("init", "-q")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    (course / "01_room.ipynb").write_text(notebook("x = 1"))
    git("add", ".")
    git("commit", "-q", "-m", "course")
    learner = notebook("x = 1\nmy_answer = 42")
    (course / "01_room.ipynb").write_text(learner)  # saved over the committed notebook
    copies = my_notebooks.Copies(course=course, mine=repo / "my-notebooks")
    copies.sync()
    assert (copies.mine / "01_room.ipynb").read_text() == learner
    git("checkout", "--", "notebooks")  # now safe: the work is in my-notebooks/
    update = notebook("x = 2")
    (course / "01_room.ipynb").write_text(update)
    git("commit", "-qam", "course update")  # as a git pull would bring it
    said = copies.sync()
    assert (copies.mine / "01_room.ipynb").read_text() == learner
    assert len(said) == 1 and "the course has a new version" in said[0]
    (offer,) = copies.mine.glob("01_room.course-*.ipynb")
    assert offer.read_text() == update
