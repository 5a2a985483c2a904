"""Ask before telling: guesses locked in before answers.

Driven as a learner drives them: buttons are pressed with ``.click()``,
guesses set through the widget's value. What Run All does (no button
pressed) reveals nothing. (The exercises' gate, hints and solutions:
tests/lessons/test_exercise_gate.py.)
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest

from attention_course.explorers import VolumeKnobExplorer
from attention_course.explorers.reveal import Prediction, predict_choice, predict_number

pytestmark = pytest.mark.filterwarnings("error")


def hidden(widget: widgets.Widget) -> bool:
    return widget.layout.display == "none"


# -- predictions ------------------------------------------------------------------------


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


# -- the convention the browser test reads, and the course's predictions -------------------


def _classes(widget: widgets.Widget) -> set[str]:
    return set(widget._dom_classes)


def test_every_ask_before_telling_box_marks_its_parts():
    from attention_course.explorers import reveal

    picture = widgets.Image()
    prediction = predict_number(
        "How many?", lambda: 3.0, low=0, high=10, step=1, tolerance=1, reveal=picture
    )
    assert reveal.BOX in _classes(prediction.widget)
    assert reveal.GUESS in _classes(prediction.guess)
    assert reveal.BUTTON in _classes(prediction.button)
    assert {reveal.ANSWER} <= _classes(prediction.result) & _classes(picture)
    # the saved notebook shows that the box asks: its still version carries the class
    assert f'class="{reveal.STILL}"' in prediction.widget._repr_mimebundle_()["text/html"]


@pytest.mark.parametrize("name", ["share", "spread", "divide_by_d"])
def test_the_course_predictions_keep_their_answer_until_locked_in(name):
    from attention_course.explorers.crowded_room import share_prediction
    from attention_course.explorers.gradients import spread_prediction
    from attention_course.explorers.scaling import divide_by_d_prediction

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

    from attention_course.explorers.crowded_room import (
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
    from attention_course.explorers.crowded_room import share_prediction
    from attention_course.explorers.reveal import answer_picture

    wide = answer_picture(b"\x89PNG", alt="a picture", width=840).children[0]
    assert (wide.layout.width, wide.layout.max_width, wide.layout.margin) == ("840px", "100%", "0")
    assert answer_picture(b"\x89PNG", alt="a picture").children[0].layout.width is None

    def images(widget):
        if isinstance(widget, widgets.Image):
            yield widget
        for child in getattr(widget, "children", ()):
            yield from images(child)

    (picture,) = images(share_prediction("dog").widget)
    assert picture.layout.margin == "0" and picture.layout.max_width == "100%"
