"""The explorers on the trained model: frames, layout, plain words, and what they show."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.text import Text
from support import control_values, frame_and_full_draw, legends_over_bars

from attention_course.explorers import HeadMapsExplorer, WhereItLooksExplorer
from attention_course.explorers.base import ExplorerBox
from attention_course.explorers.canvas import STILL_NOTE
from attention_course.explorers.registry import builds
from attention_course.explorers.trained import masked_staircase, volume_words

pytestmark = pytest.mark.filterwarnings("error")

#: the registry's explorers of this module (on the trained model): {test id: build}
EXPLORERS = {
    test_id: build
    for test_id, (entry, build) in builds(loads_model=True).items()
    if entry.cls.__module__ == "attention_course.explorers.trained"
}
CONTROL_ROW_PX = 40  # one row of ipywidgets controls, as JupyterLab draws them
MAX_HEIGHT_PX = 640
SMALL_CELL_PX = 577  # a 1024 x 768 screen's output area, JupyterLab's file browser open


@pytest.fixture
def explorer(request):
    e = EXPLORERS[request.param]()
    yield e
    plt.close(e.fig)


def every_value(explorer):
    for control in explorer.controls:
        for value in control_values(control):
            control.value = value
            yield control, value


@pytest.mark.parametrize("explorer", list(EXPLORERS), indirect=True)
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_every_frame_matches_a_full_redraw(explorer):
    explorer.blit = True
    explorer.fig.canvas.draw()
    for control, value in every_value(explorer):
        frame, full = frame_and_full_draw(explorer)
        wrong = int(np.any(frame != full, axis=-1).sum())
        assert wrong == 0, f"after {control.description!r} = {value!r}: {wrong} stale pixels"


def _cycle_sentences(e):
    """Every sentence, then back to the first, each followed by a move of another control;
    each frame against a full redraw (which, a full draw, also drops the shown background)."""
    other = e.controls[-1]  # the head
    for sentence in [*e.sentence.options, e.sentence.options[0]]:
        e.sentence.value = sentence
        for _ in range(2):
            frame, full = frame_and_full_draw(e)
            assert int(np.any(frame != full, axis=-1).sum()) == 0, sentence
            other.value = next(v for v in control_values(other) if v != other.value)


@pytest.mark.parametrize("explorer", ["HeadMaps", "WhereItLooks"], indirect=True)
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_a_sentence_once_drawn_keeps_its_background(explorer, monkeypatch):
    from attention_course.explorers.base import Explorer

    explorer.blit = True
    explorer.fig.canvas.draw()
    _cycle_sentences(explorer)  # draws each sentence's background once, and keeps it
    kept = set(explorer._backgrounds)
    assert {k[0] for k in kept} == set(explorer.sentence.options)
    monkeypatch.setattr(Explorer, "_draw_background", lambda self: pytest.fail("drawn again"))
    _cycle_sentences(explorer)  # restores the kept ones: the same pixels as full redraws
    assert set(explorer._backgrounds) == kept
    monkeypatch.undo()
    explorer.fig.set_size_inches(6, 4)  # a new size: new backgrounds, the old ones let go
    explorer.fig.canvas.draw()
    explorer.sentence.value = explorer.sentence.options[1]
    assert [k[1] for k in explorer._backgrounds] == [(600, 400)]


@pytest.mark.parametrize("explorer", ["HeadMaps", "WhereItLooks"], indirect=True)
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_every_sentences_background_is_drawn_while_idle(explorer, monkeypatch):
    """Agg's timers never fire, so the test ticks the prefetch itself, as ipympl's would."""
    from attention_course.explorers.base import Explorer

    e = explorer
    e.blit = True
    e.fig.canvas.draw()  # shown: the prefetch would start now
    frame, _ = frame_and_full_draw(e)  # a frame on the canvas before the prefetch
    words = [t.get_text() for t in e.fig.findobj(Text)]
    ticks = 0
    while e._prefetch_one():
        ticks += 1
    assert ticks == len(e.sentence.options)  # one background a tick (the shown one too)
    assert not e._prefetch_one(), "nothing left: the timer stops"
    shown = np.asarray(e.fig.canvas.buffer_rgba())
    assert e.sentence.value == e.sentence.options[0]
    assert [t.get_text() for t in e.fig.findobj(Text)] == words  # shown again
    monkeypatch.setattr(Explorer, "_draw_background", lambda self: pytest.fail("not drawn ahead"))
    other = e.controls[-1]  # the head map's head, the beginner's volume
    other.value = next(v for v in control_values(other) if v != other.value)  # kept background
    frame, full = frame_and_full_draw(e)
    assert int(np.any(frame != full, axis=-1).sum()) == 0
    assert shown.shape == frame.shape
    _cycle_sentences(e)  # every first visit a blit


def control_rows(box: widgets.Box) -> list[widgets.HBox]:
    """The rows of controls above the figure: HBoxes in the box, or in its controls' VBox."""
    rows = []
    for child in box.children:
        if isinstance(child, widgets.HBox):
            rows.append(child)
        elif isinstance(child, widgets.VBox) and "al-controls" in child._dom_classes:
            rows += [row for row in child.children if isinstance(row, widgets.HBox)]
    return rows


@pytest.mark.parametrize("explorer", list(EXPLORERS), indirect=True)
def test_it_fits_a_laptop_screen_with_its_controls(explorer):
    width, height = explorer.fig.get_size_inches()
    assert width <= 8
    rows = control_rows(explorer.widget)
    assert height * explorer.fig.dpi + CONTROL_ROW_PX * len(rows) <= MAX_HEIGHT_PX
    shown = {id(c) for row in rows for c in row.children}
    assert shown == {id(c) for c in explorer.controls}, "every control is displayed"


@pytest.mark.parametrize("explorer", list(EXPLORERS), indirect=True)
def test_every_label_is_inside_the_figure(explorer):
    renderer = explorer.fig.canvas.get_renderer()
    box = explorer.fig.bbox
    for control, value in every_value(explorer):
        explorer.fig.canvas.draw()
        for text in explorer.fig.findobj(Text):
            if not text.get_visible() or not text.get_text().strip():
                continue
            extent = text.get_window_extent(renderer)
            assert (
                extent.x0 >= box.x0 - 1
                and extent.x1 <= box.x1 + 1
                and extent.y0 >= box.y0 - 1
                and extent.y1 <= box.y1 + 1
            ), f"{text.get_text()!r} is cut off after {control.description} = {value!r}"
        hidden = legends_over_bars(explorer.fig, draw=False)
        where = f"{control.description} = {value!r}"
        assert hidden == [], f"a legend hides bars after {where}: {hidden}"


def test_the_beginner_explorer_leaves_a_still_picture_and_fits_a_small_screen():
    e = WhereItLooksExplorer()
    box = e.widget
    assert isinstance(box, ExplorerBox) and box is e.widget, "one still-picture box"
    assert "al-explorer" in box._dom_classes
    bundle = box._repr_mimebundle_()
    assert STILL_NOTE in bundle["text/html"] and STILL_NOTE in bundle["text/plain"]
    assert "VBox(" not in bundle["text/plain"]
    assert '<img src="data:image/png;base64,' in bundle["text/html"]
    controls, *_, note = box.children
    assert "al-controls" in controls._dom_classes and "al-note" in note._dom_classes
    assert [row.children for row in controls.children] == [(c,) for c in e.controls]
    for control in e.controls:  # labels whole, the slider's track at least 150 px
        assert control.style.description_width == "initial", control.description
    total = int(e.volume.layout.width.removesuffix("px"))
    assert total - 7.5 * len(e.volume.description) - 72 - 30 >= 150
    assert total <= SMALL_CELL_PX and int(e.sentence.layout.width[:-2]) <= SMALL_CELL_PX
    plt.close(e.fig)


def test_the_beginner_explorer_speaks_plain_words():
    e = WhereItLooksExplorer()
    jargon = ("softmax", "logit", "query", "key", "sqrt", "√", "tensor", "scale", "q·k", "exp")
    for control, _ in every_value(e):
        texts = [t.get_text() for t in e.fig.findobj(Text)]
        texts += [c.description for c in e.controls]
        texts += [label for label, _ in e.head.options]
        for text in texts:
            assert not any(word in text.lower() for word in jargon), (text, control.description)
    plt.close(e.fig)


def test_the_volume_knob_shows_mush_and_nearly_all_on_one_word_on_learned_scores():
    e = WhereItLooksExplorer()
    e.volume.value = 10**e.volume.min
    assert "mush" in e.ax.get_title()
    e.volume.value = 10**e.volume.max
    assert e.ax.get_title().endswith("nearly all on one word")
    e.volume.value = 1.0
    assert e.gaze.guess == e.gaze.answer and "(right)" in e.guess_text.get_text()
    assert e.shares.sum() == pytest.approx(1.0)
    plt.close(e.fig)


def test_volume_words():
    assert volume_words(0.11, 10) == "spread almost evenly: mush"
    assert volume_words(0.96, 10) == "nearly all on one word"
    assert volume_words(0.5, 10) == "some words clearly more than others"


def test_the_head_map_hatches_the_masked_cells_and_names_the_pronouns_row():
    e = HeadMapsExplorer()
    for control, _ in every_value(e):
        n = len(e.maps.words)
        data = e.image.get_array()
        assert np.ma.getmaskarray(data)[np.triu_indices(n, k=1)].all()
        title = e.ax.get_title()
        # counted from 1, as every notebook counts layers and heads
        assert title.startswith(f"layer {e.layer.value + 1}, head {e.head.value + 1}:"), control
        assert e.layer.label == str(e.layer.value + 1) and e.head.label == str(e.head.value + 1)
        assert f'"{e.maps.words[e.maps.query]}" puts' in title
    plt.close(e.fig)


@pytest.mark.parametrize("t", [1, 2, 5, 13])
def test_the_hatched_staircase_covers_exactly_the_masked_cells(t):
    from matplotlib.path import Path

    outline = Path(masked_staircase(t))  # contains_points closes it, as the patch does
    i, j = np.indices((t, t))  # (t, t) query and key of every cell
    centres = np.stack([j.ravel(), i.ravel()], axis=1).astype(float)  # (t*t, 2) as x, y
    inside = outline.contains_points(centres).reshape(t, t)
    np.testing.assert_array_equal(inside, j > i)


def test_the_head_map_keeps_its_still_picture_for_a_page_without_a_kernel():
    e = HeadMapsExplorer()
    box = e.widget
    assert box is e.widget, "one box per explorer"
    bundle = box._repr_mimebundle_()
    assert bundle["text/html"].startswith('<div class="al-still"><img src="data:image/png;base64,')
    assert bundle["text/plain"].startswith("layer ")
    rows = [c for c in box.children if "al-controls" in c._dom_classes]
    assert [len(r.children) for r in rows] == [2, 2]
    plt.close(e.fig)
