"""Notebook 01's "type your own sentence" explorer: the bars are the lesson's numbers, the
text alternative says them and follows the box, and a box the model cannot read shows its
one sentence in the picture and as the alternative, never an error."""

from __future__ import annotations

import html

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_hex
from support import frame_and_full_draw, texts_outside

from attention_course.explorers import OwnSentenceExplorer
from attention_course.explorers.base import one_line
from attention_course.explorers.own_sentence import FIRST_SENTENCE, NO_PICTURE
from attention_course.lessons.figures.style import BLUE, ORANGE, VERMILLION
from attention_course.lessons.own_sentence import OwnGaze, own_gaze
from labdriver.alternatives import check_alternative, control_values
from labdriver.kernel_probe import _browser_test_figure

pytestmark = pytest.mark.filterwarnings("error")

MAX_HEIGHT_PX = 640
CONTROL_ROW_PX = 40  # one row of ipywidgets controls, as JupyterLab draws them
ALT_PX = 40  # the text alternative under the picture, two lines


@pytest.fixture
def explorer():
    e = OwnSentenceExplorer()
    assert e.widget.children  # displayed: every change sends a frame and its alternative
    yield e
    plt.close(e.fig)


def shown(e) -> str:
    """The text alternative the page gets under the picture, unescaped."""
    return html.unescape(e.alt.value)


def check_said(e) -> None:
    """The alternative under the picture is `describe`, and says the figure's numbers."""
    alt = one_line(e.describe())
    assert shown(e) == alt
    check_alternative("OwnSentenceExplorer", alt, control_values(e), _browser_test_figure(e.fig))


def same_gaze(drawn, expected) -> bool:
    """Two `OwnGaze` of the same sentence and word, with the same weights."""
    return (
        isinstance(drawn, OwnGaze)
        and isinstance(expected, OwnGaze)
        and (drawn.sentence, drawn.query, drawn.words, drawn.head, drawn.guess)
        == (expected.sentence, expected.query, expected.words, expected.head, expected.guess)
        and np.array_equal(drawn.weights, expected.weights)
    )


def heights(e) -> np.ndarray:
    return np.array([bar.get_height() for bar in e.bars])


def test_the_first_sentence_shows_it_finding_the_one_drum(explorer):
    e = explorer
    assert e.sentence.value == FIRST_SENTENCE
    gaze = own_gaze(FIRST_SENTENCE)
    assert same_gaze(e.gaze, gaze)
    assert e.word.value == gaze.query == 9 and e.word.label == "it"
    n = len(gaze.words)
    np.testing.assert_array_equal(heights(e)[:n], gaze.weights)
    assert not heights(e)[n:].any()
    assert e.describe() == (
        '"it" looks most at "drum" (100%): nearly all on one word; shares: drum 100%, '
        'every other word <1%; The model\'s guess for the word after "it": "boomed"'
    )
    check_said(e)


def test_describe_follows_the_box_and_the_menu_and_says_the_drawn_numbers(explorer):
    e = explorer
    first = shown(e)
    e.sentence.value = "the cats were next to the drum and then they"
    assert shown(e) != first and shown(e).startswith('"they" looks most at "cats"')
    check_said(e)
    for option in e.word.options:  # every word of the sentence
        e.word.value = option[1]
        check_said(e)
        gaze = own_gaze(e.sentence.value, option[1])
        assert isinstance(gaze, OwnGaze)
        np.testing.assert_array_equal(heights(e)[: len(gaze.weights)], gaze.weights)
        drawn = [label.get_text() for label in e.labels if label.get_text()]
        assert len(drawn) == option[1] + 2  # the start marker, the words up to the chosen one
    e.word.value = 2  # "were": every word before it gets 1% or more, listed largest first
    said = shown(e)
    assert said.startswith('"were" looks most at "(start)"') and "every other word" not in said
    assert said.endswith('"next" (words in grey come later: it cannot look at them)')


def test_a_repeated_word_is_named_by_its_place_in_the_menu(explorer):
    e = explorer
    e.sentence.value = "the dog saw the cat and it"
    labels = [label for label, _ in e.word.options]
    assert labels == ["the (word 1)", "dog", "saw", "the (word 4)", "cat", "and", "it"]
    assert e.word.value == 6


@pytest.mark.parametrize(
    ("typed", "begins"),
    [
        ("", "The box is empty: type a sentence"),
        ("the dgo was next to the bells and then it", 'The model does not know this word: "dgo"'),
        ("the dog " * 7, "That sentence is 14 words long, and the model reads at most 12"),
    ],
)
def test_a_box_the_model_cannot_read_shows_its_sentence_not_an_error(explorer, typed, begins):
    e = explorer
    e.sentence.value = typed
    said = own_gaze(typed)
    assert isinstance(said, str) and said.startswith(begins)
    assert e.gaze is None and e.problem == said
    assert e.describe() == said and shown(e) == said  # the alternative, shown under the picture
    assert " ".join(e.message.get_text().split()) == said  # and in the picture
    assert e.ax.get_title() == NO_PICTURE
    assert not heights(e).any() and not any(t.get_text() for t in e.words)
    assert e.word.disabled and e.word.options == ()
    check_said(e)
    e.sentence.value = FIRST_SENTENCE  # and back: the picture returns
    assert same_gaze(e.gaze, own_gaze(FIRST_SENTENCE)) and not e.word.disabled
    assert e.message.get_text() == ""
    check_said(e)


def test_one_change_of_the_box_draws_once(explorer, monkeypatch):
    e = explorer
    frames = []
    refresh = e.refresh
    monkeypatch.setattr(e, "refresh", lambda: (frames.append(1), refresh()))
    e.sentence.value = "Ana put the kettle near the frogs and they"
    assert len(frames) == 1, "the menu's new options drew a frame of their own"
    e.word.value = 3
    assert len(frames) == 2


def test_every_frame_matches_a_full_redraw(explorer):
    e = explorer
    e.blit = True
    e.fig.canvas.draw()
    moves = [
        (e.word, 2),
        (e.sentence, "after the kettle passed the frogs , they croaked"),
        (e.word, 1),
        (e.sentence, ""),
        (e.sentence, "the lamps that Omar found were old"),
        (e.sentence, "xyz"),
        (e.sentence, FIRST_SENTENCE),
    ]
    for control, value in moves:
        control.value = value
        frame, full = frame_and_full_draw(e)
        wrong = int(np.any(frame != full, axis=-1).sum())
        assert wrong == 0, f"after {control.description!r} = {value!r}: {wrong} stale pixels"


def test_the_longest_words_stay_inside_the_figure_and_it_fits_a_laptop(explorer):
    e = explorer
    for typed in (
        "the kettles that Maria dropped hit the lamps so they flickered",
        "the horse near the kettles whistled , flickered , neighed .",
        "the dgo " * 10,
    ):
        e.sentence.value = typed
        for _, word in [*e.word.options[:1], *e.word.options[-1:]]:  # grey words, then none
            e.word.value = word
            assert texts_outside(e.fig) == [], (typed, word)
        assert texts_outside(e.fig) == [], typed
    _, height = e.fig.bbox.size
    assert height + 2 * CONTROL_ROW_PX + ALT_PX <= MAX_HEIGHT_PX


def test_the_controls_are_named_and_each_has_a_row(explorer):
    e = explorer
    assert isinstance(e.sentence, widgets.Text) and isinstance(e.word, widgets.Dropdown)
    assert e.sentence.description == "your sentence" and not e.sentence.continuous_update
    assert e.word.description == "the word that looks"
    assert e.controls == [e.sentence, e.word]
    rows = e.widget.children[0]
    assert [row.children[0] for row in rows.children] == [e.sentence, e.word]
    assert "al-controls" in rows._dom_classes


def test_okabe_ito_colours_mark_the_top_word_and_the_chosen_one(explorer):
    e = explorer
    n = len(e.gaze.words)
    colours = [to_hex(bar.get_facecolor()) for bar in e.bars[:n]]
    top = int(np.argmax(e.gaze.weights))
    assert colours[top] == ORANGE.lower()
    assert {c for i, c in enumerate(colours) if i != top} == {BLUE.lower()}
    chosen = e.words[n - 1]
    assert to_hex(chosen.get_color()) == VERMILLION.lower() and chosen.get_fontweight() == "bold"
    assert e.ax.get_ylabel() and e.ax.get_xlabel()  # labelled axes
