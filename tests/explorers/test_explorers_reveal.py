"""Ask before telling: solutions that wait for an attempt, guesses locked in before answers.

Driven as a learner drives them: the attempt's function is handed to the
gate, buttons are pressed with ``.click()``, guesses set through the widget's
value. What Run All does (the starter code, no button pressed) reveals nothing.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest

from attention_lib import softmax
from attention_lib.explorers import VolumeKnobExplorer
from attention_lib.explorers.reveal import (
    Prediction,
    SolutionGate,
    feedback,
    predict_choice,
    predict_number,
)
from attention_lib.lessons.exercises import check_attention, check_scale_rule

pytestmark = pytest.mark.filterwarnings("error")

SOLUTION = "def over_divided(d):\n    return 1 / d"


def scale_gate() -> SolutionGate:
    return SolutionGate(
        lambda fn: check_scale_rule(fn, expect="flatten", verbose=False),
        SOLUTION,
        lambda: check_scale_rule(lambda d: 1 / d, expect="flatten", verbose=False),
    )


def starter(d):
    return 1 / math.sqrt(d)  # the notebook's starter: holds, does not flatten


def attention_starter(q, k, v, mask=None):
    raise NotImplementedError("replace this line with your attention")


def reference_attention(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])  # (L, S)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return softmax(scores, axis=-1) @ v  # (L, dv)


def hidden(widget: widgets.Widget) -> bool:
    return widget.layout.display == "none"


# -- the solution gate -----------------------------------------------------------------


def test_the_starter_reveals_nothing_and_asks_a_question(capsys):
    gate = scale_gate()
    report = gate.attempt(starter)  # what Run All (and nbval) runs
    printed = capsys.readouterr().out
    assert not report.passed and gate.revealed is None
    assert hidden(gate.solution) and gate.solution.value == ""  # not in the widget's state
    assert not hidden(gate.button)
    assert "return 1 / d" not in printed
    assert "expected them to flatten instead" not in printed
    assert printed.rstrip().endswith("Which rule does that? Change it and run the cell again."), (
        printed
    )
    assert "Not yet: you are after weights that fall toward uniform, 1/6, as d grows." in printed


def test_a_passing_attempt_reveals_the_solution_and_its_check(capsys):
    gate = scale_gate()
    gate.attempt(lambda d: 1 / d)
    assert gate.revealed == "passed"
    assert not hidden(gate.solution) and hidden(gate.button)
    assert "return 1 / d" in gate.solution.value
    assert "your weights flatten as d grows" in gate.solution.value  # the solution's own check
    assert "passed" in gate.status.value
    assert "as expected." in capsys.readouterr().out


def test_the_button_reveals_on_request_once():
    calls = []
    gate = SolutionGate(lambda fn: check_scale_rule(fn, expect="flatten", verbose=False), SOLUTION)
    gate.solution_result = lambda: calls.append(1) or "checked"
    gate.button.click()
    assert gate.revealed == "asked" and "Here is one solution" in gate.status.value
    assert "checked" in gate.solution.value
    gate.button.click()
    gate.reveal("passed")
    assert gate.revealed == "asked" and calls == [1]


def test_an_unwritten_attention_gets_one_line_not_five_failures(capsys):
    gate = SolutionGate(lambda fn: check_attention(fn, verbose=False), "def my_attention(...): ...")
    gate.attempt(attention_starter)
    printed = capsys.readouterr().out
    assert "FAIL" not in printed and printed.count("\n") == 1, printed
    assert printed.startswith("Your function is not written yet")
    assert gate.revealed is None


def test_a_working_attention_opens_the_gate(capsys):
    gate = SolutionGate(lambda fn: check_attention(fn, verbose=False), "def my_attention(...): ...")
    gate.attempt(reference_attention)
    assert gate.revealed == "passed"
    assert "All 5 cases agree" in capsys.readouterr().out


def test_a_wrong_attention_is_told_what_looks_wrong(capsys):
    def no_mask(q, k, v, mask=None):
        return reference_attention(q, k, v)

    report = SolutionGate(lambda fn: check_attention(fn, verbose=False), "").attempt(no_mask)
    printed = capsys.readouterr().out
    assert report.cause == "mask ignored"
    assert "the mask had no effect" in printed and printed.rstrip().endswith("run again.")


def test_feedback_passes_other_reports_through():
    assert feedback("anything") == "anything"
    held = check_scale_rule(starter, expect="hold", verbose=False)
    assert feedback(held) == str(held)  # passed: nothing to ask


def test_the_gate_has_a_still_line_for_a_page_without_its_kernel():
    bundle = scale_gate().widget._repr_mimebundle_()
    assert SolutionGate.STILL in bundle["text/plain"] and SolutionGate.STILL in bundle["text/html"]


# -- predict, then reveal --------------------------------------------------------------


def test_a_choice_cannot_be_locked_before_one_is_made():
    asked = []
    prediction = predict_choice(
        "Divide by d instead of sqrt(d): as d grows, the top weight...",
        ["grows", "shrinks", "holds"],
        lambda: asked.append(1) or "shrinks",
    )
    assert prediction.guess.value is None and prediction.button.disabled
    with pytest.raises(ValueError, match="choose a guess"):
        prediction.lock()
    assert asked == [] and hidden(prediction.result)


def test_locking_in_a_choice_computes_and_shows_the_answer():
    explorer = VolumeKnobExplorer()
    box = explorer.widget
    prediction = predict_choice(
        "Turned all the way up, who gets the most attention?",
        ["Ana", "Ben", "everyone equally"],
        lambda: explorer.names[int(np.argmax(explorer.shares))],
        explain=lambda who: f"{who} has the highest relevance.",
        reveal=box,
    )
    assert hidden(box)
    prediction.guess.value = "Ben"
    assert not prediction.button.disabled
    prediction.button.click()
    assert prediction.answered == "Ana" and not hidden(box)
    assert prediction.verdict == (
        "Not this time: the answer is 'Ana' (you picked 'Ben').\nAna has the highest relevance."
    )
    assert prediction.guess.disabled and prediction.button.disabled
    assert "Ana has the highest relevance." in prediction.result.value


def test_a_number_guess_is_judged_with_its_tolerance():
    explorer = VolumeKnobExplorer()

    def loudest_share():
        explorer.volume.value = 100.0
        return float(explorer.shares.max())

    prediction = predict_number(
        "At volume 100, what share does Ana get?",
        loudest_share,
        low=0,
        high=1,
        step=0.05,
        tolerance=0.05,
    )
    prediction.guess.value = 0.95
    assert prediction.lock() == "Close: you said 95%, the answer is 100%."
    assert prediction.lock() == prediction.verdict  # a second press changes nothing
    far = predict_number("?", lambda: 0.2, low=0, high=1, step=0.05, tolerance=0.05)
    far.guess.value = 0.9
    assert far.lock().startswith("Not quite: you said 90%, the answer is 20%.")


def test_bad_predictions_are_refused():
    with pytest.raises(ValueError, match="at least two options"):
        predict_choice("?", ["only"], lambda: "only")
    with pytest.raises(ValueError, match="need low < high"):
        predict_number("?", lambda: 0.0, low=1, high=0, step=0.1, tolerance=0.1)
    odd = predict_choice("?", ["a", "b"], lambda: "c")
    odd.guess.value = "a"
    with pytest.raises(ValueError, match="'c' is not one of the options"):
        odd.lock()


def test_any_value_widget_can_carry_the_guess():
    slider = widgets.IntSlider(value=3, min=0, max=10)
    prediction = Prediction("How many?", slider, lambda: 4, lambda g, a: f"{g} vs {a}")
    assert prediction.lock() == "3 vs 4"
    assert Prediction.STILL in prediction.widget._repr_mimebundle_()["text/plain"]


def test_a_gate_for_a_solution_function_shows_that_function_checked(capsys):
    code = (
        "def my_attention(q, k, v, mask=None):\n"
        "    scores = q @ k.T / math.sqrt(q.shape[-1])  # (L, S)\n"
        "    if mask is not None:\n"
        "        scores = np.where(mask, scores, -np.inf)\n"
        "    return softmax(scores, axis=-1) @ v  # (L, dv)\n"
    )
    gate = SolutionGate.for_function(
        lambda fn: check_attention(fn, verbose=False),
        code,
        "my_attention",
        {"np": np, "math": math, "softmax": softmax},
        explanation="Scale the scores, mask before the softmax, softmax over the keys.",
    )
    gate.attempt(attention_starter)
    assert gate.revealed is None and gate.solution.value == ""
    gate.button.click()
    assert "All 5 cases agree" in gate.solution.value
    assert "q @ k.T / math.sqrt" in gate.solution.value
    assert gate.solution.value.rstrip().endswith(
        "<p>Scale the scores, mask before the softmax, softmax over the keys.</p>"
    )
    with pytest.raises(ValueError, match="does not define a function 'missing'"):
        SolutionGate.for_function(lambda fn: None, "x = 1", "missing")


# -- the convention the browser test reads, and the course's predictions -------------------


def _classes(widget: widgets.Widget) -> set[str]:
    return set(widget._dom_classes)


def test_every_ask_before_telling_box_marks_its_parts():
    from attention_lib.explorers import reveal

    gate = scale_gate()
    assert reveal.BOX in _classes(gate.widget)
    assert reveal.ANSWER in _classes(gate.solution) and reveal.BUTTON in _classes(gate.button)
    picture = widgets.Image()
    prediction = predict_number(
        "How many?", lambda: 3.0, low=0, high=10, step=1, tolerance=1, reveal=picture
    )
    assert reveal.BOX in _classes(prediction.widget)
    assert reveal.GUESS in _classes(prediction.guess)
    assert reveal.BUTTON in _classes(prediction.button)
    assert {reveal.ANSWER} <= _classes(prediction.result) & _classes(picture)
    # the saved notebook shows that the box asks: its still version carries the class
    for box in (gate.widget, prediction.widget):
        assert f'class="{reveal.STILL}"' in box._repr_mimebundle_()["text/html"]


def test_the_new_checkers_starters_ask_their_question(capsys):
    from attention_lib.lessons.exercises import (
        DecodeCheck,
        MaskCheck,
        check_combined_mask,
        check_decode_step,
    )

    def mask_starter(lengths, size):
        raise NotImplementedError("replace this line with your mask")

    def decode_starter(q, k, v, k_cache, v_cache):
        raise NotImplementedError("replace this line with your decode step")

    for check, fn, kind, cases in (
        (check_combined_mask, mask_starter, MaskCheck, 3),
        (check_decode_step, decode_starter, DecodeCheck, 4),
    ):
        gate = SolutionGate(lambda f, check=check: check(f, verbose=False), "def f(): pass")
        report = gate.attempt(fn)
        printed = capsys.readouterr().out.strip()
        assert printed == feedback(report)
        assert printed.startswith("Your function is not written yet")
        assert kind.QUESTION in printed and kind.QUESTION.endswith("?")
        assert f"compares it with {kind.SUBJECT} on {cases} cases" in printed
        assert gate.revealed is None and hidden(gate.solution)


@pytest.mark.parametrize("name", ["share", "spread", "divide_by_d"])
def test_the_course_predictions_keep_their_answer_until_locked_in(name):
    from attention_lib.explorers.crowded_room import share_prediction
    from attention_lib.explorers.gradients import spread_prediction
    from attention_lib.explorers.scaling import divide_by_d_prediction

    rng = np.random.default_rng(0)
    build = {
        "share": share_prediction,
        "spread": lambda: spread_prediction(64, samples=500),
        "divide_by_d": lambda: divide_by_d_prediction(
            {d: rng.normal(size=(500, 6)) * math.sqrt(d) for d in (4, 16, 64, 256)}
        ),
    }[name]
    prediction = build()
    assert prediction.answered is None and hidden(prediction.result)
    assert prediction.reveal is None or hidden(prediction.reveal)
    if prediction.guess.value is None:
        prediction.guess.value = prediction.guess.options[0]
    verdict = prediction.lock()
    assert not hidden(prediction.result) and verdict
    assert prediction.reveal is None or not hidden(prediction.reveal)
    expected = {
        "share": "57%",
        "spread": "The spread is √64 = 8 (measured",
        "divide_by_d": "it falls toward 1/6",
    }[name]
    assert expected in verdict, verdict


def test_the_share_prediction_shows_the_three_steps_only_when_locked():
    import html

    from attention_lib.explorers.crowded_room import (
        format_three_steps,
        share_prediction,
        three_steps,
    )

    prediction = share_prediction()
    numbers = [c for c in prediction.reveal.children if isinstance(c, widgets.HTML)]
    assert len(numbers) == 1 and html.escape(format_three_steps(three_steps())) in numbers[0].value
    assert hidden(prediction.reveal)
    with pytest.raises(ValueError, match="not one of the lesson's words"):
        share_prediction("cat")


def test_an_answer_picture_shrinks_with_its_cell_and_has_no_margin_to_pass_it():
    from attention_lib.explorers.crowded_room import share_prediction
    from attention_lib.explorers.reveal import answer_picture

    wide = answer_picture(b"\x89PNG", width=840)
    assert (wide.layout.width, wide.layout.max_width, wide.layout.margin) == ("840px", "100%", "0")
    assert answer_picture(b"\x89PNG").layout.width is None

    def images(widget):
        if isinstance(widget, widgets.Image):
            yield widget
        for child in getattr(widget, "children", ()):
            yield from images(child)

    (picture,) = images(share_prediction("dog").widget)
    assert picture.layout.margin == "0" and picture.layout.max_width == "100%"
