"""An exercise's hints and solution, kept behind the learner's own attempt (notebooks 02, 07).

`ExerciseGate` is one box per exercise:

- ``attempt(fn)`` (in the learner's cell) runs the exercise's checker
  (`attention_course.lessons.exercises.registry`, the one the graded edition
  runs) on their function, on cases drawn for the attempt, under a time limit,
  and prints `feedback`; a passing report opens the solution. Whatever the
  function does (raises, returns a list or the wrong shape, writes into its
  arguments, never returns) and whatever is passed instead of a function, the
  learner reads one sentence, never a traceback from inside the checker.
- "Show a hint" opens the exercise's hints one at a time, in the order the
  `Solution` keeps them: the idea, the shapes, the one line that matters.
- "Show the solution" is disabled until the last hint is open; pressed then,
  it shows the solution, the checker's report on it, and the explanation.

Run All runs the starter, which does not pass, and presses no button: no
hint and no solution opens. The box marks its parts with the CSS classes
the browser tests read (``tests/browser/ask_before_telling.py`` and
``tests/browser/test_hint_ladder.py``): the box `BOX`, the solution `ANSWER`
(hidden until revealed), its button `BUTTON`; each hint `HINT` (hidden until
asked for), the hint button `HINT_BUTTON`; the box's still version, saved
with the notebook, is a paragraph of class `STILL`. `BOX`, `ANSWER`,
`BUTTON` and `STILL` are the ask-before-telling convention that
`attention_course.explorers.reveal` also follows. A cell run again closes the
gate its previous run made (`attention_course.explorers.base.CellOwned`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
import numpy as np

from attention_lib.normalisers import softmax

from ..lessons.exercises.base import Solution, attempt_seed
from ..lessons.exercises.feedback import checked
from ..lessons.exercises.registry import exercise
from ..lessons.exercises.solutions import FLASH_SOLUTIONS, SOLUTIONS, TRITON, solution_scope
from .base import CellOwned
from .reveal import ANSWER as ANSWER
from .reveal import BOX as BOX
from .reveal import BUTTON as BUTTON
from .reveal import STILL as STILL
from .reveal import NoteBox, show

__all__ = [
    "ANSWER",
    "BOX",
    "BUTTON",
    "HINT",
    "HINT_BUTTON",
    "NOTE",
    "STILL",
    "ExerciseGate",
]

# the ask-before-telling classes of the reveal widgets: a gate is one more of them

HINT = "al-hint"
HINT_BUTTON = "al-hint-button"
#: the box's still version, saved with the notebook (the browser tests look for it)
NOTE = "Hints and a solution open here once the notebook runs."


def _solution_function(solution: Solution) -> Callable[..., Any] | None:
    """The function the solution's code defines (None for Triton code, run elsewhere)."""
    if solution.name in FLASH_SOLUTIONS:
        if solution.name in TRITON:
            return None
        scope = solution_scope(solution.name)
    else:
        scope = {"np": np, "math": math, "softmax": softmax}
    exec(compile(solution.code, f"<solution {solution.name}>", "exec"), scope)
    return scope[solution.name]


_OWN_LIMIT: Any = object()  # the exercise's own time limit


class ExerciseGate(CellOwned):
    """One exercise's attempt, hint ladder and solution (see the module docstring).

    ``key`` is the exercise's checker (``check_attention``) or its name
    (``"my_attention"``, its key in `registry.EXERCISES`, `SOLUTIONS` or
    `FLASH_SOLUTIONS`): the gate runs that exercise as the graded edition does,
    with its hints and solution. ``seconds`` limits each attempt (default: the
    exercise's own; None: no limit here, for a checker that limits its own
    child process). Display `widget` where the hints belong. Raises KeyError
    for anything that is not an exercise.
    """

    WAITING = (
        "Hints open one at a time; the solution waits until your attempt passes, "
        "or until you have read every hint and ask for it."
    )
    NOT_INSTALLED = (
        "This installation holds no hints or solutions (a graded class): "
        "the checker's report above is your feedback."
    )

    def __init__(self, key: Any, *, seconds: float | None = _OWN_LIMIT) -> None:
        self.exercise = exercise(key)
        self._replace_in_cell()
        name = self.exercise.name
        found = SOLUTIONS.get(name) or FLASH_SOLUTIONS.get(name)
        if found is None:  # a graded class: feedback, no hints or solution
            found = Solution(name, "", "")
        self.solution = found
        self.seconds = self.exercise.seconds if seconds is _OWN_LIMIT else seconds
        self.seed: int | None = None  # the last attempt's seed
        self.report: Any = None  # the last attempt's report (None: none yet, or it could not run)
        self.opened = 0  # hints open so far
        self.revealed: str | None = None  # "passed" or "asked" once the solution shows
        waiting = self.WAITING if found.code else self.NOT_INSTALLED
        self.status = widgets.HTML(f"<em>{html.escape(waiting)}</em>")
        # empty until opened: a hidden widget's value is still in the page and the saved state
        self.hints = [show(widgets.HTML(), False) for _ in found.hints]
        for hint in self.hints:
            hint.add_class(HINT)
        self.hint_button = widgets.Button(icon="lightbulb-o", layout={"width": "auto"})
        self.hint_button.add_class(HINT_BUTTON)
        self.hint_button.on_click(lambda _button: self.hint())
        self.button = widgets.Button(
            description="Show the solution", icon="eye", layout={"width": "auto"}
        )
        self.button.add_class(BUTTON)
        self.button.on_click(lambda _button: self.reveal("asked"))
        self.answer = show(widgets.HTML(), False)
        self.answer.add_class(ANSWER)
        buttons = widgets.HBox([self.hint_button, self.button])
        self.widget = NoteBox([self.status, *self.hints, buttons, self.answer], NOTE)
        self._buttons()

    def _buttons(self) -> None:
        """The hint button counts the hints left; the solution's waits for the last hint."""
        left = len(self.hints) - self.opened
        self.hint_button.description = (
            f"Show hint {self.opened + 1} of {len(self.hints)}" if left else "No more hints"
        )
        self.hint_button.disabled = left == 0 or self.revealed is not None
        self.button.disabled = (left > 0 and self.revealed is None) or not self.solution.code

    def hint(self) -> str:
        """Open the next hint and return its text ("" when none is left)."""
        if self.opened >= len(self.hints) or self.revealed is not None:
            return ""
        text = self.solution.hints[self.opened]
        self.hints[self.opened].value = f"<p><b>Hint {self.opened + 1}.</b> {html.escape(text)}</p>"
        show(self.hints[self.opened])
        self.opened += 1
        self._buttons()
        if self.opened == len(self.hints):
            self.status.value = "<em>That was the last hint. The solution opens on request.</em>"
        return self.solution.hints[self.opened - 1]

    def check(self, fn: Any, seed: int | None = None) -> Any:
        """The exercise's report on ``fn`` (not printed), on the cases of ``seed`` (None: the
        attempt's own, from the function's source)."""
        return self.exercise.check(fn, seed)

    def attempt(self, fn: Any, seed: int | None = None) -> Any:
        """Check ``fn`` and print `feedback`, or one sentence on why it could not be checked.

        ``seed`` draws the cases (None: from the function's source, so that the
        same function meets the same cases and a changed one new cases; the
        report names the seed). Returns the report (None when the check could
        not run). A passing report opens the solution.
        """
        if seed is None and self.exercise.seeded and (callable(fn) or isinstance(fn, str)):
            seed = attempt_seed(fn)
        self.seed = seed
        report, text = checked(lambda f: self.check(f, seed), fn, self.seconds)
        self.report = report
        print(text)
        if getattr(report, "passed", False):
            self.reveal("passed")
        return report

    def reveal(self, reason: str = "asked") -> None:
        """Show the solution: "passed", or "asked" once every hint is open (else nothing)."""
        if self.revealed is not None or (reason == "asked" and self.opened < len(self.hints)):
            return
        if not self.solution.code:  # none installed (a graded class)
            return
        self.revealed = reason
        parts = [f"<pre><code>{html.escape(self.solution.code.strip())}</code></pre>"]
        fn = _solution_function(self.solution)
        if fn is not None:  # on the cases of the last attempt, where there was one
            report = self.check(fn, self.seed if self.seed is not None else 0)
            parts.append(f"<pre>{html.escape(str(report))}</pre>")
        parts.append(f"<p>{html.escape(self.solution.explanation)}</p>")
        self.answer.value = "\n".join(parts)
        show(self.answer)
        said = "Your attempt passed: here is ours to compare." if reason == "passed" else ""
        self.status.value = f"<b>{html.escape(said or 'Here is one solution.')}</b>"
        self._buttons()
        self.button.disabled = True
