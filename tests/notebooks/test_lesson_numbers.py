"""Notebook 02's own code prints the lesson's numbers, and agrees with the library's copies.

The tables and the hand-checkable example are plain numpy on the page (issue 19): these
tests run the notebook's cells themselves, read from the committed .ipynb (the import
cell, then the cell with a given tag), so what they check is what a learner reads and runs.
Then they hold the output to the lesson's printout, digit for digit, and the same draws to
the library: `WidthSweep` (what `ScalingExplorer` and `check_scale_rule` compute with) on
the notebook's own scores, and the explorer's own draws within sampling error.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import FLOAT64, tagged_cell_id
from support import run_cells as notebook_cells

from attention_course.lessons.scaling import WidthSweep, sweep_widths
from attention_lib import scaled_dot_product_attention, softmax

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "02_developer_scaling.ipynb"

# The lesson's scaling.py output: its numbers (its headings are its own, not ours).
LESSON_SPREAD = [("4", "2.00", "1.00"), ("16", "4.01", "1.00"), ("64", "7.96", "1.00")]
LESSON_SPREAD += [("256", "16.06", "1.00")]
LESSON_TOP = [("4", "0.574", "0.399"), ("16", "0.776", "0.418"), ("64", "0.890", "0.422")]
LESSON_TOP += [("256", "0.946", "0.421")]
LESSON_HEADINGS = [
    "how big do raw dot products get as the head width d grows?",
    "what that does to attention weights over 6 keys (2000 random trials):",
    "mean top weight, no scaling",
    "weights (each row sums to 1) =",
    "row sums =",
]


def _code_cells() -> list[dict[str, Any]]:
    """The notebook's code cells after its Colab set-up cell (which does nothing here)."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return [
        c
        for c in cells
        if c["cell_type"] == "code" and "colab-setup" not in c["metadata"].get("tags", [])
    ]


def _source(cell: dict[str, Any]) -> str:
    return "".join(cell["source"])


def run_cells(*tags: str) -> tuple[str, dict[str, Any]]:
    """Run the notebook's import cell, then the cells tagged ``tags``; (stdout, names)."""
    ids = [_code_cells()[0]["id"], *(tagged_cell_id(NOTEBOOK, tag) for tag in tags)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        scope = notebook_cells(NOTEBOOK, ids)
    return out.getvalue(), scope


@pytest.fixture(scope="module")
def tables() -> tuple[str, dict[str, Any]]:
    return run_cells("scaling-tables")


def _rows(text: str, width: int) -> list[tuple[str, ...]]:
    """The lines of ``text`` that are ``width`` numbers: a width, then values."""
    return [
        tuple(line.split())
        for line in text.splitlines()
        if re.fullmatch(rf"\s*\d+(\s+[\d.]+){{{width - 1}}}", line)
    ]


def test_the_tables_print_the_lessons_numbers_digit_for_digit(tables) -> None:
    printed, _ = tables
    rows = _rows(printed, 3)
    assert rows == LESSON_SPREAD + LESSON_TOP, printed


def test_the_tables_headings_are_our_own_words(tables) -> None:
    printed, _ = tables
    copied = [h for h in LESSON_HEADINGS if h.lower() in printed.lower()]
    assert not copied, f"headings copied from the lesson's program output: {copied}"


def test_the_second_table_agrees_with_the_explorers_statistics_on_its_draws(tables) -> None:
    # The same draws through WidthSweep (the explorer's and check_scale_rule's arithmetic).
    printed, names = tables
    scores = names["scores"]  # d -> (trials, 6) raw q·k
    sweep = WidthSweep(tuple(scores), 2_000, 6, scores)
    unscaled, scaled = sweep.stats("none"), sweep.stats("1/sqrt(d)")
    shown = [(f"{u.top:.3f}", f"{s.top:.3f}") for u, s in zip(unscaled, scaled, strict=True)]
    assert shown == [row[1:] for row in _rows(printed, 3)[4:]]
    # and to rounding, not just to the three decimals printed
    for d, u in zip(scores, unscaled, strict=True):
        assert abs(softmax(scores[d], axis=-1).max(axis=-1).mean() - u.top) < 1e-12


def _mean_and_error(tops: np.ndarray) -> tuple[float, float]:
    return float(tops.mean()), float(tops.std() / math.sqrt(tops.size))


def test_the_tables_agree_with_the_explorers_own_draws_within_sampling_error(tables) -> None:
    # ScalingExplorer draws 2,000 trials of its own per width (seed [0, d]): another sample of
    # the same experiment. Its mean top weight and the table's differ by less than four
    # standard errors of their difference (a miss that large is a 1-in-16,000 event).
    _, names = tables
    scores, spread = names["scores"], names["spread"]
    explorer = sweep_widths(trials=2_000, keys=6, seed=0)  # what ScalingExplorer() draws
    for d in scores:
        for scale in (1.0, 1 / math.sqrt(d)):
            ours = softmax(scores[d] * scale, axis=-1).max(axis=-1)  # (trials,)
            theirs = softmax(explorer.logits[d] * scale, axis=-1).max(axis=-1)  # (trials,)
            (m1, e1), (m2, e2) = _mean_and_error(ours), _mean_and_error(theirs)
            assert abs(m1 - m2) < 4 * math.hypot(e1, e2), (d, scale, m1, m2)
        # the spread: both near sqrt(d) (relative standard errors about 1% each)
        assert abs(spread[d] / explorer.logits[d].std() - 1) < 0.05, d


def test_the_prediction_is_answered_from_the_tables_own_trials(tables) -> None:
    _, names = tables
    scores = names["scores"]
    scope = dict(names)
    exec(compile(_source(_prediction_cell()), "02: prediction", "exec"), scope)
    prediction = scope["prediction"]
    assert prediction.result.layout.display == "none" and not prediction.verdict
    prediction.guess.value = prediction.guess.options[0]
    verdict = prediction.lock()
    tops = [softmax(scores[d] / d, axis=-1).max(axis=-1).mean() for d in scores]
    assert prediction.answered == "it falls toward 1/6"
    assert f"{tops[0]:.3f} -> {tops[-1]:.3f}" in verdict, verdict
    assert "the table's own 2,000 trials" in verdict


def _prediction_cell() -> dict[str, Any]:
    found = [c for c in _code_cells() if "divide_by_d_prediction(" in _source(c)]
    assert len(found) == 1, "expected one cell that builds the divide-by-d prediction"
    return found[0]


def test_the_scale_exercise_reruns_the_second_table(tables) -> None:
    # "check_scale_rule(..., logits=scores) reruns the second table": its 1/sqrt(d) column is
    # the table's, digit for digit.
    _, names = tables
    gate_cell = next(c for c in _code_cells() if "scale_gate = ExerciseGate" in _source(c))
    scope = dict(names)
    exec(compile(_source(gate_cell), "02: scale gate", "exec"), scope)
    report = scope["scale_gate"].check(lambda d: 1 / math.sqrt(d))
    assert [f"{t:.3f}" for t in report.tops] == [row[2] for row in LESSON_TOP]
    assert report.widths == (4, 16, 64, 256)


def test_the_hand_checkable_example() -> None:
    printed, names = run_cells("hand-example")
    numbers = re.findall(r"-?\d+\.\d*", printed)
    logits = ["0.707", "0.", "0.707", "0.", "0.707", "0.707"]
    weights = ["0.401", "0.198", "0.401", "0.198", "0.401", "0.401"]
    row_totals, output = ["1.", "1."], ["6.017", "3.983", "3.983", "6.017"]
    assert numbers == [*logits, *weights, *row_totals, *output], printed
    q, k, v = names["Q"], names["K"], names["V"]
    a = np.exp(1 / np.sqrt(2))  # query one's weights are e^a / (2 e^a + 1) and 1 / (2 e^a + 1)
    np.testing.assert_allclose(names["weights"][0], [a, 1, a] / (2 * a + 1), rtol=1e-14)
    np.testing.assert_allclose(names["output"], scaled_dot_product_attention(q, k, v), **FLOAT64)
