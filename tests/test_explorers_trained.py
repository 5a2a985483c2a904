"""The explorers on the trained model: frames, layout, plain words, and what they show."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.text import Text
from support import control_values, frame_and_full_draw

from attention_lib.explorers import HeadMapsExplorer, WhereItLooksExplorer
from attention_lib.explorers.trained import volume_words

pytestmark = pytest.mark.filterwarnings("error")

EXPLORERS = {"WhereItLooks": WhereItLooksExplorer, "HeadMaps": HeadMapsExplorer}
CONTROL_ROW_PX = 40  # one row of ipywidgets controls, as JupyterLab draws them
MAX_HEIGHT_PX = 640


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
def test_every_frame_matches_a_full_redraw(explorer):
    explorer.blit = True
    explorer.fig.canvas.draw()
    for control, value in every_value(explorer):
        frame, full = frame_and_full_draw(explorer)
        wrong = int(np.any(frame != full, axis=-1).sum())
        assert wrong == 0, f"after {control.description!r} = {value!r}: {wrong} stale pixels"


@pytest.mark.parametrize("explorer", list(EXPLORERS), indirect=True)
def test_it_fits_a_laptop_screen_with_its_controls(explorer):
    width, height = explorer.fig.get_size_inches()
    assert width <= 8
    rows = [c for c in explorer.widget.children if isinstance(c, widgets.HBox)]
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


def test_the_volume_knob_shows_mush_and_winner_takes_all_on_learned_scores():
    e = WhereItLooksExplorer()
    e.volume.value = 10**e.volume.min
    assert "mush" in e.ax.get_title()
    e.volume.value = 10**e.volume.max
    assert "winner takes all" in e.ax.get_title()
    e.volume.value = 1.0
    assert e.gaze.guess == e.gaze.answer and "(right)" in e.guess_text.get_text()
    assert e.shares.sum() == pytest.approx(1.0)
    plt.close(e.fig)


def test_volume_words():
    assert volume_words(0.11, 10) == "spread almost evenly: mush"
    assert volume_words(0.96, 10) == "nearly all on one word: winner takes all"
    assert volume_words(0.5, 10) == "some words clearly more than others"


def test_the_head_map_hatches_the_masked_cells_and_names_the_pronouns_row():
    e = HeadMapsExplorer()
    for control, _ in every_value(e):
        n = len(e.maps.words)
        data = e.image.get_array()
        assert np.ma.getmaskarray(data)[np.triu_indices(n, k=1)].all()
        title = e.ax.get_title()
        assert title.startswith(f"layer {e.layer.value}, head {e.head.value}:"), control
        assert f'"{e.maps.words[e.maps.query]}" puts' in title
    plt.close(e.fig)


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
