"""Colour is never the only carrier: every figure's series stay apart for every kind of vision.

For each still figure the course draws, and each explorer's figure as it is first drawn
(every registered build), the series a legend tells apart (its
lines, bars and patches, and a figure-level legend's) are taken as the page
shows them (a colour with its alpha, over white) and simulated for
deuteranopia, protanopia and tritanopia with colorspacious (Machado, Oliveira
and Fernandes' model at full severity). Every pair of differently coloured
series must be at least `MIN_DELTA_E` apart in CAM02-UCS under each (about 1
is a just noticeable difference; a grey reference line is told apart by its
lightness), and every pair must also differ by line style, marker, hatching,
fill or outline, so that a reader who tells no colours apart still can. A heatmap's
colour map must be one that reads in lightness order for every kind of vision.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import numpy as np
import pytest
from colorspacious import cspace_convert, deltaE
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from attention_course.bench.results import BenchmarkRun
from attention_course.explorers.registry import builds
from attention_course.lessons.alternatives import FeatureErrorRow, SinkRun, TimingRow
from attention_course.lessons.figures import (
    benchmark_figure,
    cpu_and_gpu_figure,
    feature_error_figure,
    report_figure,
    retrieval_figure,
    sharing_picture,
    sigmoid_differential_figure,
    sink_figure,
    spread_figure,
    timing_figure,
    traffic_figure,
)
from attention_course.lessons.figures.style import MODEL_COLOURS, SERIES_COLOURS, WORD_COLOURS
from attention_course.lessons.saturation import RetrievalRun
from attention_course.model.report import load_report

VISIONS = ("deuteranomaly", "protanomaly", "tritanomaly")
MIN_DELTA_E = 10.0
GREYISH = 5.0  # chroma in CAM02-UCS below which a colour is a grey: lightness tells those apart
SAFE_MAPS = {"viridis", "cividis", "magma", "inferno", "plasma", "RdBu", "RdBu_r", "PuOr", "Greys"}


@dataclass(frozen=True)
class Series:
    label: str
    rgb: tuple[float, float, float]
    cue: tuple  # what besides colour tells it apart: line style, marker, hatch, fill


def _over_white(rgba) -> tuple[float, float, float]:
    r, g, b, a = mcolors.to_rgba(rgba)
    return tuple(float(c * a + (1 - a)) for c in (r, g, b))


def _series(handle, label: str) -> Series | None:
    if isinstance(handle, (BarContainer, ErrorbarContainer)):
        handle = handle.patches[0] if isinstance(handle, BarContainer) else handle.lines[0]
    if isinstance(handle, Line2D):
        if handle.get_linestyle() in ("None", "none", "") and handle.get_marker() in (None, "None"):
            return None
        colour = handle.get_color()
        cue = (handle.get_linestyle(), handle.get_marker())
    elif isinstance(handle, Patch):
        filled = handle.get_fill() and mcolors.to_rgba(handle.get_facecolor())[3] > 0
        colour = handle.get_facecolor() if filled else handle.get_edgecolor()
        edged = mcolors.to_rgba(handle.get_edgecolor())[3] > 0 and handle.get_linewidth() > 0
        outline = round(handle.get_linewidth(), 1) if edged else 0.0  # a thick outline is a cue
        cue = (handle.get_hatch() or "", filled, handle.get_linestyle(), outline)
    else:
        return None
    return Series(label, _over_white(colour), cue)


def series_by_legend(fig: Figure) -> list[list[Series]]:
    """The series each axes' legend (and each figure legend) tells apart."""
    groups = []
    legends = [(ax.get_legend_handles_labels()) for ax in fig.axes]
    legends += [(leg.legend_handles, [t.get_text() for t in leg.texts]) for leg in fig.legends]
    for handles, labels in legends:
        found = [_series(h, label) for h, label in zip(handles, labels, strict=True)]
        groups.append([s for s in found if s is not None])
    return groups


def _simulated(rgb, vision: str) -> np.ndarray:
    if vision == "normal":
        return np.asarray(rgb)
    space = {"name": "sRGB1+CVD", "cvd_type": vision, "severity": 100}
    return np.clip(cspace_convert(rgb, space, "sRGB1"), 0, 1)


def distance(a, b) -> float:
    """The smallest CAM02-UCS distance between two colours over normal vision and each CVD."""
    return min(
        float(deltaE(_simulated(a, v), _simulated(b, v), input_space="sRGB1"))
        for v in ("normal", *VISIONS)
    )


def _greyish(rgb) -> bool:
    _, a, b = cspace_convert(rgb, "sRGB1", "CAM02-UCS")
    return float(np.hypot(a, b)) < GREYISH


def problems(fig: Figure) -> list[str]:
    """Pairs of series told apart by colour alone, or by colours too close for some vision;
    heatmaps in a colour map that does not read in order for every vision."""
    found = []
    for group in series_by_legend(fig):
        for a, b in itertools.combinations(group, 2):
            if a.label == b.label:
                continue
            if a.cue == b.cue:
                found.append(f"{a.label!r} and {b.label!r} differ by colour alone")
            # the same colour on purpose (a fitted line in its data's colour) or a grey beside a
            # colour (a reference line): told apart by their cue and lightness, checked above
            if a.rgb != b.rgb and not (_greyish(a.rgb) or _greyish(b.rgb)):
                d = distance(a.rgb, b.rgb)
                if d < MIN_DELTA_E:
                    found.append(f"{a.label!r} and {b.label!r} are {d:.1f} apart for some vision")
    for ax in fig.axes:
        for image in ax.images:
            if image.get_cmap().name not in SAFE_MAPS:
                found.append(f"a heatmap in {image.get_cmap().name}")
    return found


def test_the_course_palettes_stay_apart_for_every_vision():
    for palette in (SERIES_COLOURS, WORD_COLOURS, tuple(MODEL_COLOURS.values())):
        for a, b in itertools.combinations(palette, 2):
            assert distance(mcolors.to_rgb(a), mcolors.to_rgb(b)) >= MIN_DELTA_E, (a, b)


def test_the_check_fails_matplotlibs_red_and_green_and_colour_alone():
    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([0, 1], color="tab:red", label="a")
    ax.plot([1, 0], color="tab:green", label="b")
    ax.legend()
    assert problems(fig) == [
        "'a' and 'b' differ by colour alone",
        "'a' and 'b' are 5.2 apart for some vision",
    ]


# -- every still figure ---------------------------------------------------------------------


def _benchmark() -> BenchmarkRun:
    rows = [
        {"path": path, "length": t, "width": 64, "causal": False, "status": "ok",
         "median_s": 1e-9 * t**power, "peak_mib_beyond_inputs": 1e-4 * t**power, "gflops": 2.0}
        for path, power in (("numpy reference", 2.0), ("numpy tiled", 2.1), ("torch reference", 2),
                            ("torch SDPA", 1.9), ("torch tiled", 2.0))
        for t in (512, 1024, 2048, 4096)
    ]  # fmt: skip
    return BenchmarkRun(Path("cpu-x/results.json"), {"machine": "cpu-x"}, rows)


def _sinks() -> dict:
    rng = np.random.default_rng(0)
    return {
        (norm, first): SinkRun(
            norm, first, 0.1, 0.1, 0.9, 0.5, 0.5, 1.0, rng.random((4, 3 + first)), np.ones(4)
        )
        for first in (False, True)
        for norm in ("softmax", "softmax1")
    }


def _runs() -> tuple[RetrievalRun, RetrievalRun]:
    steps = np.arange(40)
    return (
        RetrievalRun(1.0, 64, 16, np.full(40, 1.5), np.full(40, 0.1)),
        RetrievalRun(0.125, 64, 16, np.exp(-steps / 5), np.linspace(2.5, 0.3, 40)),
    )


FIGURES = {
    "retrieval": lambda: retrieval_figure(*_runs()).fig,
    "report": lambda: report_figure(load_report()).fig,
    "spread": lambda: spread_figure(width=16, samples=500),
    "sharing": lambda: sharing_picture([0.1, 0.6, 0.3], words=("the", "dog", "it")),
    "timing": lambda: (
        timing_figure([TimingRow(t, 1e-9 * t**2, 1e-7 * t) for t in (1, 2, 4, 8)]).fig
    ),
    "feature error": lambda: (
        feature_error_figure([FeatureErrorRow(m, m**-0.4, 0.01) for m in (16, 64)]).fig
    ),
    "sinks": lambda: sink_figure(_sinks()).fig,
    "sigmoid and differential": lambda: (
        sigmoid_differential_figure(np.eye(4, 8), np.ones((5, 8)), lam=0.5).fig
    ),
    "traffic": lambda: traffic_figure([256, 1024, 4096]).fig,
    "benchmark": lambda: benchmark_figure(_benchmark(), 64).fig,
    "cpu and gpu": lambda: cpu_and_gpu_figure(_benchmark(), [], 64).fig,
}


@pytest.mark.parametrize("name", FIGURES)
def test_every_still_figure_passes_for_every_kind_of_vision(name):
    fig = FIGURES[name]()
    assert problems(fig) == []


# -- every explorer, as first drawn ---------------------------------------------------------


@pytest.mark.parametrize("test_id", list(builds(loads_model=None)))
def test_every_explorers_figure_passes_for_every_kind_of_vision(test_id):
    _, build = builds(loads_model=None)[test_id]
    explorer = build()
    try:
        assert problems(explorer.fig) == []
    finally:
        plt.close(explorer.fig)
