"""Ask before telling, in a real browser: after Run All, no answer shows until it is asked for.

`check_answers_wait` is run by ``test_notebooks_in_browser.py`` on the page its other
tests use, straight after that page's one Run All (a Run All of its own per notebook
cost a minute of the suite each).

The convention this test reads (`attention_course.explorers.reveal`, used by every prediction
and every exercise's solution in the course, whatever notebook shows it):

- a box that asks before it tells has the CSS class ``al-reveal`` (`reveal.BOX`);
- the widgets that hold its answer have ``al-reveal-answer`` (`reveal.ANSWER`) and are not
  displayed until the answer is asked for;
- the button that asks has ``al-reveal-button`` (`reveal.BUTTON`): a prediction's "Lock in
  my guess", a solution's "Show the solution" (in an exercise's box,
  `attention_course.explorers.gate`, enabled once its hints are all open: the test
  opens them first, as the learner's "guess");
- a prediction's guess has ``al-reveal-guess`` (`reveal.GUESS`): a choice starts with
  nothing picked, so the test picks its first option; a slider keeps the value it shows;
- the box's still line, saved with the notebook's outputs, is a paragraph of class
  ``al-reveal-still`` (`reveal.STILL`). A notebook is opened here when its saved outputs
  hold such a line (or the still line of a box saved before the class existed), so a
  notebook that adds a prediction is checked without this file changing.

For each such notebook, after Run All Cells:

1. every box is in the page and none of its answers is displayed;
2. box by box, in page order: make a guess, press the button; every answer widget of that
   box is then displayed and holds text or a painted picture, and the boxes not asked yet
   still show none of theirs;
3. what the learner could read before asking holds no part of any answer: no run of
   `RUN` words of an answer's prose is in the page's visible text as it was after Run All,
   nor in any code cell's source (a prediction's visible source never holds its answer;
   a beginner cell's folded source can be opened); and no line of an answer's tables
   (preformatted lines with two or more numbers) is a line of that text. Code in an answer
   (a solution's code) is left out: a starter shares lines such as its ``def``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import labdriver
from attention_course.explorers import gate, reveal

#: A shared run of this many words between an answer's prose and what is on the page counts
#: as the answer being on the page (the lesson-overlap hook uses 8 for copied sentences).
RUN = 7
#: How long a reveal may take once its button is pressed (the kernel computes the answer).
REVEAL_TIMEOUT_MS = labdriver.MOVE_TIMEOUT_MS


def asks(name: str) -> bool:
    """Whether the saved notebook shows a box that asks before telling."""
    text = (labdriver.REPO / "notebooks" / name).read_text()
    markers = (
        f'class="{reveal.STILL}"',
        reveal.Prediction.STILL,
        gate.NOTE,
    )
    return any(marker in text for marker in markers)


# Every box, in page order: the cell it is in, and per answer widget whether it is displayed.
_JS_BOXES = f"""() => {{
  const cells = window.jupyterapp.shell.currentWidget.content.widgets;
  const shown = (n) => n.getClientRects().length > 0;
  return Array.from(document.querySelectorAll('.jp-Notebook .{reveal.BOX}')).map((box) => ({{
    cell: cells.findIndex((c) => c.node.contains(box)),
    answers: Array.from(box.querySelectorAll('.{reveal.ANSWER}')).map(shown),
    buttons: box.querySelectorAll('button.{reveal.BUTTON}').length,
    guess: !!box.querySelector('.{reveal.GUESS}'),
  }}));
}}"""

# What a learner can read in the page: its visible text.
_JS_PAGE_TEXT = "() => document.querySelector('.jp-Notebook').innerText"

# Box ``b``'s answers once shown: each displayed, its prose (code and tables left out),
# its preformatted lines, and whether it has text or a picture that was painted.
_JS_ANSWERS = f"""(b) => {{
  const box = document.querySelectorAll('.jp-Notebook .{reveal.BOX}')[b];
  return Array.from(box.querySelectorAll('.{reveal.ANSWER}')).map((node) => {{
    const prose = node.cloneNode(true);
    prose.querySelectorAll('pre, code').forEach((n) => n.remove());
    const images = node.tagName === 'IMG' ? [node] : Array.from(node.querySelectorAll('img'));
    return {{
      shown: node.getClientRects().length > 0,
      prose: prose.textContent,
      pre: Array.from(node.querySelectorAll('pre')).filter((p) => !p.querySelector('code'))
        .map((p) => p.textContent),
      text: node.innerText.trim().length > 0,
      painted: images.length > 0 && images.every((i) => i.complete && i.naturalWidth > 0),
    }};
  }});
}}"""

_JS_REVEALED = f"""(b) => {{
  const box = document.querySelectorAll('.jp-Notebook .{reveal.BOX}')[b];
  return Array.from(box.querySelectorAll('.{reveal.ANSWER}')).every(
    (n) => n.getClientRects().length > 0);
}}"""


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _runs(text: str, n: int = RUN) -> set[tuple[str, ...]]:
    words = _words(text)
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _table_lines(text: str) -> set[str]:
    """Lines with two or more numbers, whitespace collapsed: a table's rows."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    return {line for line in lines if len(re.findall(r"\d+(?:\.\d+)?", line)) >= 2}


def _guess(page: labdriver.NotebookPage, b: int) -> None:
    """Make a guess in box ``b`` as a learner would: pick a choice's first option; in an
    exercise's box, open its hints one by one (its solution opens after the last)."""
    box = page.page.locator(f".jp-Notebook .{reveal.BOX}").nth(b)
    choice = box.locator(f".{reveal.GUESS} button")
    if choice.count():
        choice.first.click()
        page.quiet()
    hint = box.locator(f"button.{gate.HINT_BUTTON}")
    while hint.count() and not hint.is_disabled():
        hint.click()
        page.quiet()


def check_answers_wait(page: labdriver.NotebookPage, tmp_path: Path) -> None:
    """Points 1-3 above on ``page``, just after its Run All; fails the calling test."""
    boxes = page.page.evaluate(_JS_BOXES)
    assert boxes, "the saved notebook shows a box that asks, but the page after Run All has none"
    failures = [
        f"box {b} (cell {box['cell']}): an answer is displayed before it was asked for"
        for b, box in enumerate(boxes)
        if any(box["answers"])
    ]
    failures += [
        f"box {b} (cell {box['cell']}): {what}"
        for b, box in enumerate(boxes)
        for what, bad in (
            ("no answer widget", not box["answers"]),
            ("no button that reveals", box["buttons"] != 1),
        )
        if bad
    ]
    readable = page.page.evaluate(_JS_PAGE_TEXT)
    sources = [c["source"] for c in page.cells() if c["type"] == "code"]
    page_runs, page_lines = _runs(readable), _table_lines(readable)
    source_runs = set().union(*(_runs(s) for s in sources))

    for b, box in enumerate(boxes):
        where = f"box {b} (cell {box['cell']})"
        _guess(page, b)  # a choice to pick, or an exercise's hints to open first
        button = page.page.locator(f".jp-Notebook .{reveal.BOX}").nth(b)
        button = button.locator(f"button.{reveal.BUTTON}")
        if button.is_disabled():
            failures.append(f"{where}: the button stays disabled after a guess")
            continue
        button.click()
        page.quiet()
        try:
            page.page.wait_for_function(_JS_REVEALED, arg=b, timeout=REVEAL_TIMEOUT_MS)
        except labdriver.PlaywrightTimeout:
            failures.append(f"{where}: the answer did not appear after the button was pressed")
            continue
        answers = page.page.evaluate(_JS_ANSWERS, b)
        for k, answer in enumerate(answers):
            if not (answer["text"] or answer["painted"]):
                failures.append(f"{where}, answer {k}: shown, but empty")
            prose = answer["prose"]
            leaked = sorted(" ".join(r) for r in _runs(prose) & page_runs)
            in_source = sorted(" ".join(r) for r in _runs(prose) & source_runs)
            lines = sorted(set().union(*map(_table_lines, answer["pre"])) & page_lines)
            for what, found in (
                ("on the page before it was asked for", leaked),
                ("in a code cell's source", in_source),
                ("a table line on the page before it was asked for", lines),
            ):
                if found:
                    failures.append(f"{where}, answer {k}: {what}: {found[:3]}")
        later = page.page.evaluate(_JS_BOXES)[b + 1 :]
        failures += [
            f"box {b + 1 + j}: an answer showed when box {b} was asked"
            for j, other in enumerate(later)
            if any(other["answers"])
        ]

    if failures:
        shot = page.screenshot(tmp_path / f"{page.path.removesuffix('.ipynb')}-reveals.png")
        pytest.fail("\n".join([*failures, f"screenshot: {shot}"]))
    print(f"{page.path}: {len(boxes)} boxes kept their answers until asked, then showed them")
