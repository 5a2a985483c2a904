"""The exercises' hint ladders, used as a learner uses them: JupyterLab in Chromium.

For notebooks 02 and 07, after Run All Cells:

1. every exercise's box is on the page with no hint open, its solution hidden and its
   "Show the solution" button disabled: Run All opens nothing;
2. in the last exercise's box, "Show hint" opens one hint per click, in order (the idea,
   the shapes, the line), each with text, the later ones still hidden; the solution's
   button stays disabled until the last hint is open, and the other boxes stay closed;
3. pressed then, it shows the solution's code;
4. what a learner may hand the checker by mistake, typed into the kernel as a cell would:
   a name that is not a function, a function that returns a list, one that raises, one
   that never returns. Each is answered in one sentence, with no traceback, and the
   kernel is free again afterwards (the time limit stopped the loop).

The box's parts are marked with `attention_course.explorers.gate`'s CSS classes.
"""

from __future__ import annotations

import pytest

import labdriver
from attention_course.explorers import gate
from attention_course.lessons.exercises.registry import EXERCISES

pytestmark = pytest.mark.browser

#: (notebook, the gate of its last exercise, a call of it with an argument list)
LAST = {
    "02_developer_scaling.ipynb": ("heads_gate", "(x, w_q, w_k, w_v, w_o, n_heads)"),
    "07_researcher_build_flash_attention.ipynb": (
        "kernel_gate",
        "(q, k, v, m, total, acc, rows, cols, length_k, qk_scale, IS_CAUSAL)",
    ),
}

_JS_GATES = f"""() => Array.from(document.querySelectorAll('.jp-Notebook .{gate.BOX}'))
  .filter((box) => box.querySelector('.{gate.HINT_BUTTON}'))
  .map((box) => ({{
    hints: Array.from(box.querySelectorAll('.{gate.HINT}')).map((h) => ({{
      shown: h.getClientRects().length > 0, text: h.innerText.trim() }})),
    answer: Array.from(box.querySelectorAll('.{gate.ANSWER}')).map((a) => ({{
      shown: a.getClientRects().length > 0, text: a.innerText }}))[0],
    solution_disabled: box.querySelector('button.{gate.BUTTON}').disabled,
    hint_label: box.querySelector('button.{gate.HINT_BUTTON}').innerText.trim(),
  }}))"""


def _gates(page: labdriver.NotebookPage) -> list[dict]:
    return page.page.evaluate(_JS_GATES)


def _click(page: labdriver.NotebookPage, index: int, css: str) -> None:
    boxes = page.page.locator(f".jp-Notebook .{gate.BOX}").filter(
        has=page.page.locator(f".{gate.HINT_BUTTON}")
    )
    boxes.nth(index).locator(f"button.{css}").click()
    page.quiet()


@pytest.fixture(scope="module")
def page(request, lab_server, chromium):
    name = request.param
    opened = labdriver.open_notebook(
        chromium, lab_server, name, workspace=f"hints-{name.removesuffix('.ipynb')}"
    )
    try:
        opened.run_all()
        yield opened
    finally:
        opened.close()


@pytest.mark.parametrize("page", list(LAST), indirect=True, ids=lambda n: n[:2])
def test_hints_open_one_at_a_time_and_the_solution_waits(page) -> None:
    boxes = _gates(page)
    expected = sum(e.notebook == page.path[:2] for e in EXERCISES.values())  # a box per gate
    assert len(boxes) == expected, boxes
    for b, box in enumerate(boxes):  # 1: Run All opened nothing
        assert not any(h["shown"] for h in box["hints"]), f"box {b}: a hint open after Run All"
        assert not box["answer"]["shown"], f"box {b}: the solution shows after Run All"
        assert box["solution_disabled"], f"box {b}: the solution button is enabled before hints"
        assert box["hint_label"] == "Show hint 1 of 3", box["hint_label"]

    last = len(boxes) - 1
    for opened, word in enumerate(("The idea", "The shapes", "The line"), start=1):
        _click(page, last, gate.HINT_BUTTON)
        page.page.wait_for_function(
            f"(n) => ({_JS_GATES})()[{last}].hints.filter((h) => h.shown).length === n",
            arg=opened,
            timeout=labdriver.MOVE_TIMEOUT_MS,
        )
        box = _gates(page)[last]
        shown = [h for h in box["hints"] if h["shown"]]
        assert len(shown) == opened and shown[-1]["text"].startswith(f"Hint {opened}. {word}")
        assert box["solution_disabled"] == (opened < 3), (opened, box)
        assert not box["answer"]["shown"]
    others = _gates(page)[:last]
    assert not any(h["shown"] for box in others for h in box["hints"]), "another box opened"

    _click(page, last, gate.BUTTON)
    page.page.wait_for_function(
        f"() => ({_JS_GATES})()[{last}].answer.shown", timeout=labdriver.MOVE_TIMEOUT_MS
    )
    name = LAST[page.path][0].removesuffix("_gate")
    assert "def " in _gates(page)[last]["answer"]["text"], name


@pytest.mark.parametrize("page", ["02_developer_scaling.ipynb"], indirect=True, ids=["02"])
def test_bad_attempts_get_one_sentence_and_never_hang_the_kernel(page) -> None:
    name, args = LAST[page.path]
    attempts = {
        f"{name}.attempt('multi_head')": "The check could not run: check_multi_head needs a "
        "function, got str.",
        f"{name}.attempt(lambda x, *w: [0.0])": "the output is a Python list, not a numpy array",
        f"{name}.attempt(lambda x, *w: 1 / 0)": "raised ZeroDivisionError: division by zero",
    }
    for code, words in attempts.items():
        out = page.execute(code)
        assert words in out and "Traceback" not in out, (code, out)
    forever = f"def forever{args}:\n    while True:\n        pass\n"
    out = page.execute(f"{forever}{name}.seconds = 2\n{name}.attempt(forever)")
    assert out.startswith("Your function did not return within 2 s"), out
    assert page.execute("print(1 + 1)").strip() == "2"  # the kernel is free again
