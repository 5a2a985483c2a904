"""A checker's report as the learner reads it (the gates of notebooks 02 and 07, and the graded
edition's checks): no widgets and no solutions here, so a graded class's release can use it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import CheckReport
from .guards import SECONDS, TimeLimit, time_limit
from .scale_rule import ScaleRuleCheck

__all__ = ["checked", "feedback"]


def checked(
    check: Callable[[Any], Any], fn: Any, seconds: float | None = SECONDS, *, hints: bool = True
) -> tuple[Any, str]:
    """``check(fn)`` under a time limit: (the report, its `feedback`), or (None, one sentence
    on why it could not be checked). Whatever ``fn`` is or does (raises, returns a list or
    the wrong shape, writes into its arguments, never returns), no traceback from inside the
    checker escapes. ``seconds`` None: no limit here, for a checker that limits its own child
    process."""
    try:
        if seconds is None:
            report = check(fn)
        else:
            with time_limit(seconds):
                report = check(fn)
    except TimeLimit:
        return None, (
            f"Your function did not return within {seconds:g} s, so the check stopped "
            "it: is there a loop that never ends? Change it and run the cell again."
        )
    except NotImplementedError:  # a starter the checker calls directly (the scale rule's)
        return None, "Your function is not written yet: it raises NotImplementedError."
    except Exception as err:  # the learner's input, in one sentence, not a traceback
        said = str(err).rstrip(".") or type(err).__name__
        return None, f"The check could not run: {said}."
    return report, feedback(report, hints=hints)


def feedback(report: Any, *, hints: bool = True) -> str:
    """A checker's report as the learner reads it: a question while nothing is written yet,
    the report, and "Not yet" under a report that did not pass (pointing at the hints where
    ``hints``: the gates have them, the graded edition has none)."""
    if isinstance(report, CheckReport) and report.not_written:
        return (
            f"Your function is not written yet: it raises NotImplementedError. "
            f"{report.QUESTION} Write it and run the cell again; the checker holds it to "
            f"{report.SUBJECT} on {len(report.cases)} cases."
        )
    text = str(report)
    if getattr(report, "passed", False) or getattr(report, "cause", "") == "no triton":
        return text  # nothing of the learner's to fix where Triton cannot be installed
    if isinstance(report, ScaleRuleCheck) and not report.problem:
        text = "\n".join(text.splitlines()[:-1])  # "expected them to ...": the goal below says it
        return f"{text}\nNot yet: you are after weights that {report.expected} as d grows."
    more = " (or open a hint)" if hints else ""
    return f"{text}\nNot yet: fix what it points at and run the cell again{more}."
