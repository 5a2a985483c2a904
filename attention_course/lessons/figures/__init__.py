"""Every still figure of the course, in one style (`attention_course.lessons.figures.style`).

A still figure is a picture a notebook shows as a `StillFigure` (``still``):
the figure and its text alternative, displayed as a PNG with that ``alt``;
no slider (those are `attention_course.explorers`), its title and alternative
computed from what it draws, its axes labelled, at most 840 px wide. By the
lesson it belongs to:

    room          notebook 01: one word sharing its attention (`sharing_picture`)
    saturation    notebook 04: raw scores' spread (`spread_figure`); a saturated head
                  learning (`retrieval_figure`)
    model         notebook 04 and ``make model``: the training report (`report_figure`)
    cost          notebook 05: HBM traffic, standard against FlashAttention-2
                  (`traffic_figure`); the benchmarks' time and memory against T
                  (`benchmark_figure`), CPU beside GPU (`cpu_and_gpu_figure`)
    alternatives  notebook 06: timings, random features' error, attention sinks,
                  sigmoid and differential maps
    still         a figure with its text alternative, as a notebook displays it
    style         how a figure is made, sized and coloured, once

``python -m attention_course.lessons.figures`` draws the committed training
report as ``report.png`` beside it (what ``make model`` runs after training).
"""

from .alternatives import (
    feature_error_figure,
    sigmoid_differential_figure,
    sink_figure,
    timing_figure,
)
from .cost import (
    benchmark_figure,
    cpu_and_gpu_figure,
    plot_benchmark,
    plot_cpu_and_gpu,
    plot_traffic,
    traffic_figure,
)
from .model import report_figure, save_report_figure
from .room import sharing_picture
from .saturation import retrieval_figure, spread_figure
from .still import StillFigure

__all__ = [
    "StillFigure",
    "benchmark_figure",
    "cpu_and_gpu_figure",
    "feature_error_figure",
    "plot_benchmark",
    "plot_cpu_and_gpu",
    "plot_traffic",
    "report_figure",
    "retrieval_figure",
    "save_report_figure",
    "sharing_picture",
    "sigmoid_differential_figure",
    "sink_figure",
    "spread_figure",
    "timing_figure",
    "traffic_figure",
]
