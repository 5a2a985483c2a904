"""Ask before telling: a guess before the answer.

`Prediction` (and `predict_number`, `predict_choice`): the learner commits a
guess with a slider or a choice and presses "Lock in my guess"; only then is
the answer computed, compared with the guess and shown, with an optional
widget (an explorer's box) that stays hidden until then. (An exercise's hints
and solution wait in `attention_course.explorers.gate.ExerciseGate`.)

Its widget's display bundle also holds a one-line still version
(`attention_course.explorers.base.StillBox`), so a notebook opened without its
kernel shows what the box is for instead of the widget's text. A cell run
again closes the prediction its previous run made
(`attention_course.explorers.base.CellOwned`).

It marks its parts with CSS classes, the convention the browser test
``tests/browser/ask_before_telling.py`` reads: the box has `BOX`
(``al-reveal``), the widgets that hold the answer `ANSWER`
(``al-reveal-answer``, hidden until the reveal), the button that reveals it
`BUTTON` and the guess, if there is one, `GUESS`; the still version is a
paragraph of class `STILL`, so a saved notebook shows that it asks.
"""

from __future__ import annotations

import html
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as widgets

from .base import DESCRIBED, CellOwned, StillBox, text_alternative
from .controls import fit_label, fit_slider

__all__ = [
    "ANSWER",
    "BOX",
    "BUTTON",
    "GUESS",
    "STILL",
    "NoteBox",
    "Prediction",
    "answer_picture",
    "predict_choice",
    "predict_number",
    "show",
]

_HIDDEN = {"display": "none"}

# The convention the browser test reads (see the module docstring).
BOX = "al-reveal"
ANSWER = "al-reveal-answer"
BUTTON = "al-reveal-button"
GUESS = "al-reveal-guess"
STILL = "al-reveal-still"


def answer_picture(png: bytes, alt: str, width: int | None = None) -> widgets.VBox:
    """A PNG as an image widget (``width`` px wide at most, if given) that shrinks with its
    cell and never passes it, with its text alternative ``alt`` (what it shows, with its
    numbers) under it: a box of class `DESCRIBED`, as an explorer's.

    ipywidgets gives every widget a 2 px margin on each side, so with
    ``max-width: 100%`` alone a picture wider than its cell ended 2 px past
    the cell's right edge (01's answer picture at 1024 x 768 with the file
    browser open): the margin is taken off.
    """
    if not alt.strip():
        raise ValueError("a picture needs a text alternative that says what it shows")
    layout = {"max_width": "100%", "margin": "0"}
    if width is not None:
        layout["width"] = f"{width}px"
    picture = widgets.Image(value=png, format="png", layout=layout)
    box = widgets.VBox([picture, text_alternative(alt)])
    box.add_class(DESCRIBED)
    return box


def show(widget: widgets.Widget, shown: bool = True) -> widgets.Widget:
    """``widget`` shown (or hidden, ``shown`` False) where it sits; returns it."""
    widget.layout.display = None if shown else "none"
    return widget


class NoteBox(StillBox):
    """An ask-before-telling box (class `BOX`) whose still version is one line of text."""

    def __init__(self, children: list[widgets.Widget], note: str, **kwargs: Any) -> None:
        super().__init__(children, **kwargs)
        self.note = note
        self.add_class(BOX)

    def still_bundle(self) -> dict[str, Any]:
        still = f'<p class="{STILL}"><em>{html.escape(self.note)}</em></p>'
        return {"text/html": still, "text/plain": self.note}


# -- exercises -----------------------------------------------------------------------------


class Prediction(CellOwned):
    """A question, a guess the learner commits to, then the answer.

    ``guess`` is any value widget (a slider, toggle buttons...). "Lock in my
    guess" disables it, calls ``answer()`` (computed only now), and shows
    ``judge(guess, answer)``; ``reveal`` (an explorer's box, a figure in an
    Output) is hidden until then. A guess of None (nothing chosen yet)
    cannot be locked in. The cell that makes it closes it when run again
    (`close`: its widgets and ``reveal``, with the widgets under them).
    """

    STILL = "A question to answer before the picture is shown (run the notebook first)."

    def __init__(
        self,
        question: str,
        guess: widgets.ValueWidget,
        answer: Callable[[], Any],
        judge: Callable[[Any, Any], str],
        reveal: widgets.Widget | None = None,
    ) -> None:
        self._replace_in_cell()
        self.guess = guess
        self.answer = answer
        self.judge = judge
        self.answered: Any = None
        self.verdict = ""
        self.locked = False
        self._on_lock: list[Callable[[], Callable[[], None] | None]] = []
        self.question = widgets.HTML(f"<b>{html.escape(question)}</b>")
        self.button = widgets.Button(description="Lock in my guess", icon="lock")
        self.button.layout.width = "auto"
        self.button.on_click(lambda _button: self.lock())
        self.button.add_class(BUTTON)
        guess.add_class(GUESS)
        self.result = widgets.HTML(layout=_HIDDEN)
        self.result.add_class(ANSWER)
        self.reveal = reveal
        children = [self.question, widgets.HBox([guess, self.button]), self.result]
        if reveal is not None:
            show(reveal, False)
            reveal.add_class(ANSWER)
            children.append(reveal)
        self.widget = NoteBox(children, self.STILL)
        guess.observe(self._allow, names="value")
        self._allow()

    def _allow(self, _change: dict | None = None) -> None:
        self.button.disabled = self.locked or self.guess.value is None

    def lock(self) -> str:
        """Commit the guess, compute and show the answer; returns the verdict shown."""
        if self.guess.value is None:
            raise ValueError("choose a guess before locking it in")
        if not self.locked:
            self.locked = True
            self.guess.disabled = True
            self._allow()
            self.answered = self.answer()
            self.verdict = self.judge(self.guess.value, self.answered)
            self.result.value = html.escape(self.verdict).replace("\n", "<br>")
            show(self.result)
            if self.reveal is not None:
                show(self.reveal)
            for held in self._on_lock:
                callback = held()
                owner = getattr(callback, "__self__", None)
                if callback is not None and not (isinstance(owner, CellOwned) and owner.closed):
                    callback()
        return self.verdict

    def when_locked(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once the guess is locked in (at once if it already is): for a
        later picture on the page that would give the answer away before then.

        A method of a closed object (`CellOwned`: an explorer whose cell ran
        again) is not called; the prediction holds a method weakly, so it keeps
        no replaced explorer alive.
        """
        if self.locked:
            callback()
        elif hasattr(callback, "__self__") and hasattr(callback, "__func__"):
            self._on_lock.append(weakref.WeakMethod(callback))
        else:
            self._on_lock.append(lambda: callback)


def predict_number(
    question: str,
    answer: Callable[[], float],
    *,
    low: float,
    high: float,
    step: float,
    start: float | None = None,
    label: str = "my guess",
    tolerance: float,
    fmt: str = "{:.0%}",
    explain: Callable[[float], str] | None = None,
    reveal: widgets.Widget | None = None,
) -> Prediction:
    """A `Prediction` answered with a slider from ``low`` to ``high``.

    The verdict names the guess and the answer (both written with ``fmt``),
    says "close" when they are within ``tolerance`` and adds ``explain(answer)``.
    Raises ValueError unless low < high and step > 0.
    """
    if not (low < high and step > 0):
        raise ValueError(f"need low < high and step > 0, got {low}, {high}, {step}")
    slider = fit_slider(
        widgets.FloatSlider(
            value=low if start is None else start,
            min=low,
            max=high,
            step=step,
            description=label,
            readout_format=".2f",
        )
    )

    def judge(guess: float, truth: float) -> str:
        verdict = "Close" if abs(guess - truth) <= tolerance + 1e-9 else "Not quite"  # slider steps
        line = f"{verdict}: you said {fmt.format(guess)}, the answer is {fmt.format(truth)}."
        return line + (f"\n{explain(truth)}" if explain else "")

    return Prediction(question, slider, answer, judge, reveal)


def predict_choice(
    question: str,
    options: Sequence[str],
    answer: Callable[[], str],
    *,
    explain: Callable[[str], str] | None = None,
    reveal: widgets.Widget | None = None,
) -> Prediction:
    """A `Prediction` answered by picking one of ``options`` (nothing picked at first).

    ``answer()`` must return one of the options. The verdict says whether the
    pick was right and adds ``explain(answer)``. Raises ValueError for fewer
    than two options, and (when locked) for an answer not among them.
    """
    options = list(options)
    if len(options) < 2:
        raise ValueError(f"a choice needs at least two options, got {options}")
    choice = fit_label(widgets.ToggleButtons(options=options, value=None, description="my guess"))
    choice.style.button_width = "auto"
    choice.layout.width = "auto"

    def judge(guess: str, truth: str) -> str:
        if truth not in options:
            raise ValueError(f"the answer {truth!r} is not one of the options {options}")
        verdict = "Right" if guess == truth else f"Not this time: the answer is {truth!r}"
        line = f"{verdict} (you picked {guess!r})."
        return line + (f"\n{explain(truth)}" if explain else "")

    return Prediction(question, choice, answer, judge, reveal)
