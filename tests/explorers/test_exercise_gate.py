"""The exercise gate: hints one at a time, the solution after a pass or the last hint, and
one sentence for whatever a learner passes it (the browser test drives the same box)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_course.explorers.gate import ExerciseGate
from attention_course.lessons.exercises import (
    FLASH_SOLUTIONS,
    SOLUTIONS,
    check_attention,
    check_flash_forward,
    check_key_block,
    check_multi_head,
    check_scale_rule,
)
from attention_course.lessons.exercises.base import attempt_seed
from attention_course.lessons.exercises.feedback import feedback
from attention_course.lessons.exercises.registry import EXERCISES
from attention_lib import softmax


def attention_gate(**kwargs) -> ExerciseGate:
    return ExerciseGate(check_attention, **kwargs)


def starter(q, k, v, mask=None):
    raise NotImplementedError("replace this line with your attention")


def right(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return softmax(scores, axis=-1) @ v


@pytest.mark.parametrize("name", [*SOLUTIONS, *FLASH_SOLUTIONS])
def test_every_exercise_has_three_hints_idea_shapes_line(name) -> None:
    hints = {**SOLUTIONS, **FLASH_SOLUTIONS}[name].hints
    assert [h.split(":")[0] for h in hints][:2] == ["The idea", "The shapes"]
    assert len(hints) == 3 and hints[2].startswith("The line")


def test_a_gate_is_built_from_its_checker_or_its_name_and_runs_the_registrys_check() -> None:
    assert ExerciseGate(check_attention).exercise is EXERCISES["my_attention"]
    assert ExerciseGate("my_attention").exercise is EXERCISES["my_attention"]
    assert ExerciseGate(check_scale_rule).exercise.name == "under_divided"
    # the scale rule's gate runs the exercise's own cases: the second table's widths
    assert ExerciseGate(check_scale_rule).check(lambda d: d**-0.25).widths == (4, 16, 64, 256)
    assert ExerciseGate(check_key_block).seconds is None  # its child process has its own limit
    assert ExerciseGate(check_multi_head).seconds == 20


def test_a_run_of_the_starter_opens_no_hint_and_no_solution(capsys) -> None:
    gate = attention_gate()
    assert gate.attempt(starter).not_written
    assert "Your function is not written yet" in capsys.readouterr().out
    assert gate.opened == 0 and gate.revealed is None
    assert all(h.layout.display == "none" for h in gate.hints)
    assert gate.answer.layout.display == "none" and gate.button.disabled


def test_each_attempt_draws_its_cases_from_the_functions_source(capsys) -> None:
    gate = attention_gate()
    report = gate.attempt(right)
    assert report.seed == gate.seed == attempt_seed(right)
    assert f"cases drawn with seed {report.seed}" in capsys.readouterr().out

    def also_right(q, k, v, mask=None):  # another function: other cases
        return right(q, k, v, mask)

    assert gate.attempt(also_right).seed == attempt_seed(also_right) != report.seed
    assert gate.attempt(right).seed == report.seed  # the same function: the same cases
    assert gate.attempt(right, seed=5).seed == 5  # a failing case drawn again


def test_hints_open_one_at_a_time_and_the_solution_waits_for_the_last() -> None:
    gate = attention_gate()
    gate.reveal("asked")  # before any hint: refused
    assert gate.revealed is None and gate.button.disabled
    assert gate.hint_button.description == "Show hint 1 of 3"
    assert gate.hint().startswith("The idea")
    assert [h.layout.display for h in gate.hints] == [None, "none", "none"]
    assert "Hint 1." in gate.hints[0].value and gate.hints[1].value == ""
    assert gate.hint().startswith("The shapes") and gate.button.disabled
    assert gate.hint().startswith("The line") and not gate.button.disabled
    assert gate.hint_button.disabled and gate.hint() == ""
    gate.button.click()
    assert gate.revealed == "asked" and gate.answer.layout.display is None
    assert "All 7 cases agree" in gate.answer.value and "def my_attention" in gate.answer.value


def test_a_passing_attempt_opens_the_solution_run_on_the_attempts_cases(capsys) -> None:
    gate = attention_gate()
    assert gate.attempt(right, seed=123).passed
    assert gate.revealed == "passed" and gate.opened == 0
    assert "Your attempt passed" in gate.status.value
    assert "cases drawn with seed 123" in gate.answer.value


def test_skipped_cases_do_not_open_the_solution(capsys) -> None:
    gate = attention_gate()
    report = gate.attempt(lambda q, k, v: right(q, k, v))
    assert not report.passed and gate.revealed is None
    assert "Not yet" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("attempt", "words"),
    [
        ("my_attention", "check_attention needs a function fn(q, k, v), got str."),
        (None, "check_attention needs a function fn(q, k, v), got NoneType."),
    ],
)
def test_something_that_is_not_a_function_gets_one_sentence(capsys, attempt, words) -> None:
    assert attention_gate().attempt(attempt) is None
    out = capsys.readouterr().out
    assert out == f"The check could not run: {words}\n" and "Traceback" not in out


def test_a_function_that_never_returns_is_stopped(capsys) -> None:
    def forever(q, k, v, mask=None):
        while True:
            pass

    gate = attention_gate(seconds=0.5)
    assert gate.attempt(forever) is None
    assert capsys.readouterr().out.startswith("Your function did not return within 0.5 s")
    assert gate.attempt(right).passed  # the timer is gone: the next attempt runs as usual


def test_a_raising_or_misshapen_function_is_reported_case_by_case(capsys) -> None:
    gate = ExerciseGate(check_multi_head)
    report = gate.attempt(lambda x, *w: x.T)
    assert report.cause == "shape" and "Traceback" not in capsys.readouterr().out
    assert gate.attempt(lambda x, *w: [0.0]).cause == "not an array"


def test_the_scale_rule_feedback_names_the_goal_or_the_problem() -> None:
    under = check_scale_rule(lambda d: d**-0.1, expect="hold", verbose=False)
    assert feedback(under).endswith("Not yet: you are after weights that hold as d grows.")
    none = check_scale_rule(lambda d: 1.0, expect="sharpen", divides=True, verbose=False)
    assert "not passed: your rule does not divide at all" in feedback(none)
    assert feedback(none).endswith(
        "Not yet: fix what it points at and run the cell again (or open a hint)."
    )


def test_the_flash_gate_shows_the_solution_run_through_its_checker() -> None:
    gate = ExerciseGate(check_flash_forward)
    for _ in range(3):
        gate.hint()
    gate.reveal("asked")
    assert "All 7 cases agree" in gate.answer.value


def test_an_unknown_exercise_is_refused() -> None:
    with pytest.raises(KeyError, match="no exercise 'nope'"):
        ExerciseGate("nope")
    with pytest.raises(KeyError, match="no exercise <built-in function print>"):
        ExerciseGate(print)


def test_without_triton_the_kernel_gate_says_so_in_one_line(monkeypatch, capsys) -> None:
    import importlib.util as util

    real = util.find_spec
    monkeypatch.setattr(util, "find_spec", lambda n, *a: None if n == "triton" else real(n, *a))
    gate = ExerciseGate(check_key_block)
    source = FLASH_SOLUTIONS["key_block"].code
    assert gate.attempt(source).cause == "no triton"
    out = capsys.readouterr().out
    assert out.startswith("Triton is not installed here") and "Not yet" not in out
    assert out.strip().endswith("the solution below opens on request, after its hints")
