"""The graded edition's checks (teachers/graded): the course's checkers, by exercise name.

A graded notebook calls `check(name, fn)` under each answer, which prints the
checker's feedback as the course's gates do (on cases drawn for the attempt;
no hints: a graded class has none), and its hidden tests call
`grade(name, fn, seed)`, which raises AssertionError with that same feedback
unless the checker passes on the assignment's own cases: ``seed`` was drawn
once for the assignment and is stored in its hidden tests
(teachers/graded/generate.py), so that every submission is graded on the same
cases, which the learners never saw. nbgrader scores the cell by whether it
raised, and keeps the message as the learner's feedback. Both run the
exercise exactly as the notebook's gate does
(`attention_course.lessons.exercises.registry`): one verdict for one attempt on
one seed.

Neither imports the solutions, so a graded class's release works where they
are not installed. One exception, on the grader's side only: ``key_loop`` and
``flash_forward`` call the learner's ``online_update`` (exercise 1), and
``FlashAttention`` their ``flash_forward`` and ``flash_backward``, and `grade`
runs them with the course's own (`BUILDS_ON`), so that a wrong earlier
exercise costs that exercise's points and not theirs as well; that needs the
solutions, which the teacher's environment has.

Raises KeyError for a name that is not an exercise (`EXERCISES`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .flash_layer import namespace_of
from .registry import EXERCISES as EXERCISES
from .registry import run
from .solutions import BUILDS_ON

__all__ = ["EXERCISES", "check", "grade"]


def check(name: str, fn: Any, seed: int | None = None) -> Any:
    """Run exercise ``name``'s checker on ``fn`` and print its feedback; return the report
    (None when the check could not run). ``seed`` draws the cases (None: the attempt's own,
    from the function's source, as in the course's notebooks)."""
    report, text = run(name, fn, seed, hints=False)
    print(text)
    return report


@contextmanager
def _with_course_functions(name: str, fn: Any) -> Iterator[None]:
    """``fn``'s module namespace holding the course's versions of the functions it builds on,
    for the length of the block (restored after, also on failure)."""
    before = BUILDS_ON.get(name, ())
    space = namespace_of(fn)  # a function's globals, or a class's methods' (FlashAttention)
    if not before or not isinstance(space, dict):
        yield
        return
    from .solutions import INSTALLED, solution_function  # the grader's environment only

    if not INSTALLED:
        raise RuntimeError(
            f"grading {name!r} needs the course's solutions (it calls {', '.join(before)}): "
            "grade in the teacher's environment, where they are installed"
        )
    saved = {n: space[n] for n in before if n in space}
    try:
        space.update({n: solution_function(n) for n in before})
        yield
    finally:
        for n in before:
            space.pop(n, None)
        space.update(saved)


def grade(name: str, fn: Any, seed: int = 0) -> None:
    """The hidden test of exercise ``name``: returns if ``fn`` passes its checker on the cases
    of ``seed`` (the assignment's), else raises AssertionError with the feedback the learner
    reads (the mistake named as the checker names it)."""
    if fn is None:
        raise AssertionError(
            f"{name}: there is no function {name} in this notebook to grade (was its cell "
            "deleted or moved below this one, or the function renamed?)"
        )
    with _with_course_functions(name, fn):
        report, text = run(name, fn, seed, hints=False)
    if not getattr(report, "passed", False):
        raise AssertionError(f"{name}: not yet.\n{text}")
    print(f"{name}: passed.\n{text}")
