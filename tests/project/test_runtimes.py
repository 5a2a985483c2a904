"""00's sentence on how long the notebooks run agrees with their execution metadata.

`course.runtimes` writes it from the times recorded on every executed cell;
this fails when a notebook was executed again and the sentence was not
(``python -m course.runtimes``, which ``make notebooks`` runs).
"""

from __future__ import annotations

import json
import shutil

import pytest

from course import runtimes
from course.paths import REPO


def test_00_says_what_the_committed_notebooks_metadata_says():
    assert runtimes.main(["--check"]) == 0, "run python -m course.runtimes"
    cells = json.loads((REPO / "notebooks" / "00_start_here.ipynb").read_text("utf-8"))["cells"]
    assert runtimes.sentence() in "".join(cells[1]["source"])


def _stamp(cells, start, end):
    for cell in cells:
        if cell["cell_type"] == "code":
            cell["metadata"]["execution"] = {
                "iopub.execute_input": f"2026-12-06T10:00:{start:02d}.000000Z",
                "shell.execute_reply": f"2026-12-06T10:00:{end:02d}.500000Z",
            }


def test_a_notebook_executed_again_makes_the_sentence_stale_until_it_is_rewritten(tmp_path):
    for path in REPO.glob("notebooks/[0-9][0-9]_*.ipynb"):
        shutil.copy(path, tmp_path / path.name)
    slow = tmp_path / "03_developer_pytorch_and_mistakes.ipynb"
    notebook = json.loads(slow.read_text(encoding="utf-8"))
    _stamp(notebook["cells"], 0, 59)  # 59.5 s
    slow.write_text(json.dumps(notebook))
    assert runtimes.sync(check=True, folder=tmp_path) is False
    assert runtimes.sync(folder=tmp_path) is False  # rewritten
    assert runtimes.sync(check=True, folder=tmp_path) is True
    assert "03 the slowest (about 60 s)" in runtimes.sentence(tmp_path)


def test_a_notebook_never_executed_is_named(tmp_path):
    path = tmp_path / "09_never.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": "1"}]}))
    with pytest.raises(LookupError, match=r"09_never\.ipynb records no execution times"):
        runtimes.notebook_seconds(path)
