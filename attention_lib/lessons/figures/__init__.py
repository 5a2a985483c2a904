"""Every still figure of the course, in one style (`attention_lib.lessons.figures.style`).

A still figure is a picture a notebook shows with ``display(fig)``: no
slider (those are `attention_lib.explorers`), its title computed from what
it draws, its axes labelled, at most 840 px wide. By the lesson it belongs to:

    room          notebook 01: one word sharing its attention (`sharing_picture`)
    saturation    notebook 04: raw scores' spread (`spread_figure`); a saturated head
                  learning (`retrieval_figure`)
    model         notebook 04 and ``make model``: the training report (`report_figure`)
    cost          notebook 05: HBM traffic, standard against FlashAttention-2 (`plot_traffic`);
                  the benchmarks' time and memory against T (`plot_benchmark`), CPU
                  beside GPU (`plot_cpu_and_gpu`)
    alternatives  notebook 06: timings, attention sinks, sigmoid and differential maps
    style         how a figure is made, sized and coloured, once

``python -m attention_lib.lessons.figures`` draws the committed training
report as ``report.png`` beside it (what ``make model`` runs after training).
"""

from .alternatives import sigmoid_differential_figure, sink_figure, timing_figure
from .cost import plot_benchmark, plot_cpu_and_gpu, plot_traffic
from .model import report_figure, save_report_figure
from .room import sharing_picture
from .saturation import retrieval_figure, spread_figure

__all__ = [
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
]
