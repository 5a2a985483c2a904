"""The graded edition's checks (teachers/graded): the course's checkers, by exercise name.

A graded notebook calls `check(name, fn)` under each answer, which prints
the checker's feedback as the course's gates do (no hints: a graded class has
none), and its hidden tests call `grade(name, fn)`, which raises AssertionError
with that same feedback unless the checker passes: nbgrader scores the cell by
whether it raised, and keeps the message as the learner's feedback.

Neither imports the solutions, so a graded class's release works where they
are not installed. One exception, on the grader's side only: ``key_loop`` and
``flash_forward`` call the learner's ``online_update`` (exercise 1), and
`grade` runs them with the course's own (`BUILDS_ON`), so that a wrong
exercise 1 costs exercise 1's points and not theirs as well; that needs the
solutions, which the teacher's environment has.

Raises KeyError for a name that is not an exercise (`EXERCISES`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .attention import check_attention
from .base import SECONDS
from .combined_mask import check_combined_mask
from .decode import check_decode_step
from .feedback import checked
from .flash_backward import check_flash_backward
from .flash_forward import check_flash_forward
from .flash_steps import check_diagonal_mask, check_key_loop, check_key_stop
from .key_block import check_key_block
from .multi_head import check_multi_head
from .online_update import check_online_update
from .scale_rule import check_scale_rule
from .solutions import BUILDS_ON

__all__ = ["EXERCISES", "check", "grade"]

#: exercise name (its function's name) -> the checker call its notebook's gate makes
EXERCISES: dict[str, Callable[[Any], Any]] = {
    # notebook 02
    "under_divided": lambda fn: check_scale_rule(fn, expect="sharpen", divides=True, verbose=False),
    "my_attention": lambda fn: check_attention(fn, verbose=False),
    "combined_mask": lambda fn: check_combined_mask(fn, verbose=False),
    "decode_step": lambda fn: check_decode_step(fn, verbose=False),
    "multi_head": lambda fn: check_multi_head(fn, verbose=False),
    # notebook 07
    "online_update": lambda fn: check_online_update(fn, verbose=False),
    "key_loop": lambda fn: check_key_loop(fn, verbose=False),
    "key_stop": lambda fn: check_key_stop(fn, verbose=False),
    "diagonal_mask": lambda fn: check_diagonal_mask(fn, verbose=False),
    "flash_forward": lambda fn: check_flash_forward(fn, verbose=False),
    "flash_backward": lambda fn: check_flash_backward(fn, verbose=False),
    "key_block": lambda fn: check_key_block(fn, verbose=False),
}

#: the Triton exercise's checker limits its own child process (`check_key_block`)
_OWN_LIMIT = {"key_block"}


def _run(name: str, fn: Any) -> tuple[Any, str]:
    if name not in EXERCISES:
        raise KeyError(f"no exercise {name!r}; there are {sorted(EXERCISES)}")
    seconds = None if name in _OWN_LIMIT else SECONDS
    return checked(EXERCISES[name], fn, seconds, hints=False)


def check(name: str, fn: Any) -> Any:
    """Run exercise ``name``'s checker on ``fn`` and print its feedback; return the report
    (None when the check could not run)."""
    report, text = _run(name, fn)
    print(text)
    return report


@contextmanager
def _with_course_functions(name: str, fn: Any) -> Iterator[None]:
    """``fn``'s module namespace holding the course's versions of the functions it builds on,
    for the length of the block (restored after, also on failure)."""
    before = BUILDS_ON.get(name, ())
    space = getattr(fn, "__globals__", None)
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


def grade(name: str, fn: Any) -> None:
    """The hidden test of exercise ``name``: returns if ``fn`` passes its checker, else raises
    AssertionError with the feedback the learner reads (the mistake named as the checker
    names it)."""
    if fn is None:
        raise AssertionError(
            f"{name}: there is no function {name} in this notebook to grade (was its cell "
            "deleted or moved below this one, or the function renamed?)"
        )
    with _with_course_functions(name, fn):
        report, text = _run(name, fn)
    if not getattr(report, "passed", False):
        raise AssertionError(f"{name}: not yet.\n{text}")
    print(f"{name}: passed.\n{text}")
