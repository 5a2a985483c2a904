"""Notebook 03's mistakes as code: the explorer's numbers are the lesson's, and tables are tables.

Each `MistakeExplorer` builds its inputs the way the ``run_*`` function of the
same mistake does; these tests hold the two to the same numbers, so the
picture and the printed measurement cannot drift apart.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from support import FLOAT64

from attention_course.explorers.mistakes import (
    MISTAKES,
    MistakeExplorer,
    MistakeTable,
    code_pair_html,
)
from attention_course.lessons.mistakes import (
    run_mask_after_softmax,
    run_model_width_scale,
    run_scale_as_knob,
    run_wrong_axis,
)

pytestmark = pytest.mark.filterwarnings("error")


def test_model_width_numbers_are_the_lessons():
    run = run_model_width_scale(d_model=512, n_heads=8)
    explorer = MistakeExplorer("model width")
    for version, key in (("mistake", "mistaken"), ("fix", "right")):
        explorer.version.value = version
        tops = explorer.consequence["mean top weight per head"]  # (H,)
        assert tops.shape == (8,)
        assert tops.mean() == pytest.approx(run.numbers[f"mean top weight, {key}"], rel=1e-12)
    assert explorer.weights.shape == (16, 16)


def test_wrong_axis_row_sums_are_the_lessons():
    run = run_wrong_axis()
    explorer = MistakeExplorer("wrong axis")
    sums = explorer.consequence["row sums"]
    assert sums.min() == pytest.approx(run.numbers["smallest row sum, mistaken"], rel=1e-12)
    assert sums.max() == pytest.approx(run.numbers["largest row sum, mistaken"], rel=1e-12)
    explorer.version.value = "fix"
    np.testing.assert_allclose(explorer.consequence["row sums"], 1.0, **FLOAT64)


def test_mask_after_softmax_leaks_as_the_check_says():
    run = run_mask_after_softmax()
    explorer = MistakeExplorer("mask after softmax")
    assert explorer.consequence["row sums"][0] == pytest.approx(
        run.numbers["row sum of the first query, mistaken"], rel=1e-12
    )
    leak = re.search(r"by up to ([\d.]+)", run.caught).group(1)
    assert f"{explorer.consequence['future leak']:.3g}" == leak
    assert np.all(explorer.weights[np.triu_indices(6, 1)] == 0)  # zeroed, yet rows short of 1
    explorer.version.value = "fix"
    assert explorer.consequence["future leak"] <= 1e-12
    assert "cannot move earlier outputs" in explorer.finding


def test_scale_as_a_knob_collapses_only_with_the_tuned_scale():
    run = run_scale_as_knob(width=64, growths=(1, 2, 4, 8), tuned_at=2)
    explorer = MistakeExplorer("scale as a knob")
    for g in (1, 2, 4, 8):
        explorer.growth.value = g
        for version, name in (("mistake", "top weight, tuned"), ("fix", "top weight, QK norm")):
            explorer.version.value = version
            top = explorer.consequence["mean top weight"]
            assert top == pytest.approx(run.numbers[f"g={g}: {name}"], rel=1e-12)
    explorer.version.value = "mistake"
    explorer.growth.value = 8
    assert "collapsed (above 0.9)" in explorer.finding
    explorer.version.value = "fix"
    assert "not collapsed" in explorer.finding


def test_the_code_shows_both_lines_with_the_one_in_use_marked():
    explorer = MistakeExplorer("wrong axis")
    html = explorer.code.value
    assert "softmax(scores, axis=0)" in html and "softmax(scores, axis=-1)" in html
    assert "the mistake (in use)" in html and "the fix (in use)" not in html
    explorer.version.value = "fix"
    assert "the fix (in use)" in explorer.code.value
    assert explorer.code in explorer.widget.children  # shown between the controls and the figure
    assert explorer.widget.children.index(explorer.code) == 1


def test_code_is_escaped():
    html = code_pair_html("a < b & c", "x > y", "fix")
    assert "a &lt; b &amp; c" in html and "x &gt; y" in html


def test_code_wraps_between_words_never_inside_one():
    """A line longer than its box goes on at a space ("# 512: the whole l / ayer" was seen)."""
    html = code_pair_html("scale = 1 / math.sqrt(d_model)  # 512: the whole layer", "x", "fix")
    pre = re.search(r'<pre style="([^"]*)"', html).group(1)
    rules = dict(rule.split(":", 1) for rule in pre.replace(" ", "").split(";") if rule)
    assert rules["white-space"] == "pre-wrap"
    assert rules["overflow-wrap"] == "normal" and rules["word-break"] == "normal"
    assert rules["overflow-x"] == "auto"


def test_every_mistake_has_both_lines():
    for name, mistake in MISTAKES.items():
        assert mistake.mistake != mistake.fix, name
        MistakeExplorer(name)  # draws without a warning
    with pytest.raises(ValueError, match="unknown mistake 'typo'"):
        MistakeExplorer("typo")


def test_a_run_renders_as_a_table():
    table = MistakeTable(run_wrong_axis())
    html = table._repr_html_()
    assert html.count("<table>") == 2 and "<th>measurement</th>" in html
    assert "<td>smallest row sum, mistaken</td><td>0.3212</td>" in html
    # rounding noise is printed as a bound, never its digits
    assert "2.22e-16" not in html and "&lt; 1e-12" in html
    text = str(table)
    assert text.splitlines()[0] == "2. softmax over the query axis instead of the key axis"
    assert all(line == line.rstrip() for line in text.splitlines())


def test_growth_measurements_become_one_row_per_growth():
    table = MistakeTable(run_scale_as_knob(width=64, growths=(1, 2, 4, 8), tuned_at=2))
    header, rows = table.rows()
    assert header[0] == "growth" and "top weight, tuned" in header
    assert [row[0] for row in rows] == ["1", "2", "4", "8"]
    assert rows[3][header.index("top weight, tuned")] == "0.9392"
    assert ("the fix", "passes") in table.checks()


def _contrast(first: str, second: str) -> float:
    """WCAG 2.1's contrast ratio of two colours (#rrggbb)."""

    def luminance(colour: str) -> float:
        channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("active", ["mistake", "fix"])
def test_the_code_pair_reads_at_4_5_to_1_in_any_theme(active):
    """Every text colour of the pair is set, not inherited (a dark theme's light text on the
    blocks' light backgrounds read at 1.1:1), and is at least 4.5:1 on its background."""
    page = code_pair_html("a = 1", "a = 2", active)
    blocks = re.findall(r"background: (#\w{6}); color: (#\w{6});", page)
    assert len(blocks) == 2, page
    labels = re.findall(r"font-weight: bold; color: (#\w{6});", page)
    for (background, text), label in zip(blocks, labels, strict=True):
        assert _contrast(text, background) >= 4.5, (text, background)
        assert _contrast(label, background) >= 4.5, (label, background)
    assert page.count("(in use)") == 1  # which one runs is said, not only coloured
