"""The alternatives explorer of notebook 06, driven in-process through its controls.

Every control is moved through its whole range with warnings as errors; the
drawn images must be the library's numbers and the titles must count them.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from attention_course.explorers.alternatives import PANELS, AlternativesExplorer
from attention_lib import entmax15, softmax, softmax1, sparsemax
from attention_lib.variants import cosine_logits

pytestmark = pytest.mark.filterwarnings("error")


@pytest.fixture
def explorer():
    yield AlternativesExplorer()
    plt.close("all")


@pytest.fixture
def fast_explorer(explorer, monkeypatch):
    """The explorer with rendering counted instead of done (a full Agg draw of the
    eight panels takes seconds); `test_extremes_render_without_warnings` renders."""
    draws = []
    monkeypatch.setattr(explorer.fig.canvas, "draw_idle", lambda: draws.append(1))
    explorer.draws = draws
    return explorer


def slider_values(slider):
    steps = round((slider.max - slider.min) / slider.step)
    return slider.base ** np.linspace(slider.min, slider.max, steps + 1)


def check_drawn(explorer):
    for name, w in explorer.weights().items():
        drawn = np.asarray(explorer.images[name].get_array())
        np.testing.assert_array_equal(drawn, w)
        assert np.isfinite(w).all() and (w >= 0).all()
        title = explorer.axes[name].get_title()
        if name == "softmax1":
            assert f"rows sum {w.sum(-1).min():.2f}" in title
            assert (w.sum(-1) < 1).all()
        else:
            assert f"{int(np.sum(w == 0))}/{w.size} zeros" in title
            np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-12)


def test_panels_are_the_library_normalisers(explorer):
    q, k = explorer.inputs()
    assert q.shape == (6, 16) and k.shape == (10, 16)
    logits = q @ k.T / 4.0  # c = 1, d = 16
    w = explorer.weights()
    assert list(w) == list(PANELS)
    for name, fn in (
        ("softmax", softmax),
        ("softmax1", softmax1),
        ("sparsemax", sparsemax),
        ("entmax15", entmax15),
    ):
        np.testing.assert_allclose(w[name], fn(logits), rtol=1e-12)
    np.testing.assert_allclose(w["cosine"], softmax(cosine_logits(q, k, 0.1)), rtol=1e-12)
    check_drawn(explorer)
    # the sparse maps give exact zeros here, the dense ones none
    assert (w["sparsemax"] == 0).sum() > (w["entmax15"] == 0).sum() > 0
    assert (w["softmax"] == 0).sum() == 0


def test_width_slider_through_its_range(fast_explorer):
    explorer = fast_explorer
    for _label, d in explorer.width.options[::-1]:
        explorer.width.value = d
        assert explorer.inputs()[0].shape == (6, d)
        check_drawn(explorer)
        assert f"d = {d}," in explorer.suptitle.get_text()
    assert len(explorer.draws) == len(explorer.width.options)  # the callback asked each time


def test_multiplier_and_tau_through_their_ranges_at_both_width_ends(fast_explorer):
    explorer = fast_explorer
    for d in (1, 256):
        explorer.width.value = d
        for c in slider_values(explorer.multiplier):
            explorer.multiplier.value = c
            check_drawn(explorer)
        for tau in slider_values(explorer.tau):
            explorer.tau.value = tau
            check_drawn(explorer)
            assert f"τ={explorer.tau.value:.2g}" in explorer.axes["cosine"].get_title()


@pytest.mark.slow  # make check's, not make test's (seconds)
def test_extremes_render_without_warnings(explorer):
    # every corner of the three controls, really drawn (Agg), warnings are errors
    for d in (1, 256):
        explorer.width.value = d
        for c in (explorer.multiplier.min, explorer.multiplier.max):
            explorer.multiplier.value = 10.0**c
            explorer.tau.value = 10.0**explorer.tau.min
            explorer.tau.value = 10.0**explorer.tau.max
            check_drawn(explorer)
    explorer.fig.canvas.draw()


def test_a_larger_multiplier_makes_sparsemax_sparser(fast_explorer):
    explorer = fast_explorer
    explorer.multiplier.value = 0.1
    calm = (explorer.weights()["sparsemax"] == 0).sum()
    explorer.multiplier.value = 10
    hot = (explorer.weights()["sparsemax"] == 0).sum()
    assert hot > calm
    # at c = 10 every sparsemax row is one-hot or nearly: at most 2 keys per row
    assert ((explorer.weights()["sparsemax"] > 0).sum(-1) <= 2).all()


def test_widget_stacks_controls_over_the_figure(explorer):
    box = explorer.widget
    assert list(box.children[0].children) == [explorer.width, explorer.multiplier, explorer.tau]
