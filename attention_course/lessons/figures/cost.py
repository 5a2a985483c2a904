"""Notebook 05's still figures: the cost model's HBM traffic, and what the benchmarks measured.

`traffic_figure` (drawn by `plot_traffic`): HBM traffic per head, standard
against FlashAttention-2, counted from the papers' algorithms
(`attention_course.lessons.cost`). `benchmark_figure` (`plot_benchmark`): a CPU
run's time and memory against T with their fitted growth exponents;
`cpu_and_gpu_figure` (`plot_cpu_and_gpu`): a CPU run's throughput beside a GPU
run's, in one unit (both runs read by `attention_course.bench.results`). The
``plot_*`` functions draw on given axes; the ``*_figure`` ones make the
figure and its text alternative.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...bench.results import BenchmarkRun, GpuRun, benchmark_headline
from ..cost import attention_traffic
from ..gpu import NO_GPU_RESULTS, gpu_caption
from .still import StillFigure
from .style import SERIES_MARKERS, series_cycle, still_figure

__all__ = [
    "benchmark_figure",
    "cpu_and_gpu_figure",
    "plot_benchmark",
    "plot_cpu_and_gpu",
    "plot_traffic",
    "traffic_figure",
]

_STYLES = {"standard": "-", "flash2": "--"}
_MARKERS = {"forward": "o", "backward": "s"}


def _mib(x: float) -> str:
    """Three significant digits, never in exponent notation (read aloud as a number)."""
    return f"{x:,.0f}" if x >= 1000 else f"{x:.3g}"


def traffic_figure(
    lengths: Sequence[int], width: int = 64, block: int = 128, dtype: str = "float16"
) -> StillFigure:
    """`plot_traffic` on a figure of its own, with its text alternative: every line's MiB at
    the shortest and the longest T."""
    fig = still_figure(height=3.8)
    plot_traffic(fig.add_subplot(), lengths, width, block, dtype)
    lengths = sorted(int(t) for t in lengths)
    ends = []
    for path in _STYLES:
        for direction in _MARKERS:
            first, last = (
                attention_traffic(t, width, path, direction, block, block).bytes(dtype) / 2**20
                for t in (lengths[0], lengths[-1])
            )
            name = "standard" if path == "standard" else "FlashAttention-2"
            ends.append(f"{name} {direction} {_mib(first)} to {_mib(last)} MiB")
    alt = (
        f"Log-log chart of HBM reads and writes per head in MiB of {dtype} against T = "
        f"{', '.join(map(str, lengths))}, d = {width}: solid lines standard attention, dashed "
        f"FlashAttention-2, circles forward, squares backward. From T = {lengths[0]} to "
        f"{lengths[-1]}: " + "; ".join(ends) + "."
    )
    return StillFigure(fig, alt)


def plot_traffic(
    ax: Any,
    lengths: Sequence[int],
    width: int = 64,
    block: int = 128,
    dtype: str = "float16",
) -> None:
    """HBM traffic per head against T, log-log, in MiB of ``dtype``: the standard and
    FlashAttention-2 forward and backward passes (`attention_traffic`), four labelled lines.

    The title is computed from the counts: the backward ratio standard / FA-2 at
    the shortest and the longest T. Raises ValueError as `attention_traffic`.
    """
    lengths = sorted(int(t) for t in lengths)
    series_cycle(ax)
    ratios = []
    for path, style in _STYLES.items():
        for direction, marker in _MARKERS.items():
            counts = [attention_traffic(t, width, path, direction, block, block) for t in lengths]
            mib = [c.bytes(dtype) / 2**20 for c in counts]
            name = "standard" if path == "standard" else "FlashAttention-2"
            ax.loglog(lengths, mib, marker + style, ms=4, label=f"{name}, {direction}")
    for t in (lengths[0], lengths[-1]):
        std = attention_traffic(t, width, "standard", "backward")
        fa2 = attention_traffic(t, width, "flash2", "backward", block, block)
        ratios.append(std.elements / fa2.elements)
    ax.set_xticks(lengths, [str(t) for t in lengths], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("sequence length T (queries = keys)")
    ax.set_ylabel(f"HBM reads + writes per head (MiB, {dtype})")
    ax.set_title(
        f"d = {width}, FA-2 tiles {block} × {block}: the standard backward pass moves\n"
        f"{ratios[0]:.1f}× (T = {lengths[0]}) to {ratios[1]:.1f}× (T = {lengths[-1]}) "
        "the bytes of FA-2's",
        fontsize=9,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)


def plot_benchmark(
    run: BenchmarkRun, axes: Sequence[Any], width: int, causal: bool = False
) -> None:
    """Time and memory against T, log-log, every path of ``run``, on two matplotlib axes.

    Each line's legend label carries its fitted growth exponent; dotted grey
    guides show slopes 1 and 2 for reference. ``axes`` is (time_ax, memory_ax).
    """
    fits = run.exponents(width, causal)
    for ax in axes:
        series_cycle(ax)
    markers = dict(zip(run.paths, itertools.cycle(SERIES_MARKERS), strict=False))
    for ax, metric, ylabel in (
        (axes[0], "time", "median time per call (s)"),
        (axes[1], "memory", "peak memory beyond inputs (MiB)"),
    ):
        all_lengths: list[int] = []
        for path in run.paths:
            lengths, values = run.series(path, metric, width, causal)
            if not lengths:
                continue
            all_lengths += lengths
            slope = fits[path][metric]
            tag = "" if slope is None else f"  (slope {slope:.2f})"
            ax.loglog(lengths, values, markers[path] + "-", ms=4, label=path + tag)
        if all_lengths:
            _slope_guides(ax, min(all_lengths), max(all_lengths))
        ax.set_xlabel("sequence length T = L = S (tokens)")
        if all_lengths:  # the measured lengths as plain numbers, not powers of ten
            ticks = sorted(set(all_lengths))
            ax.set_xticks(ticks, [str(t) for t in ticks], fontsize=8)
            ax.minorticks_off()
        ax.set_ylabel(ylabel)
        ax.set_title(f"{metric} against T (log-log)", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, title="path (fitted exponent)", title_fontsize=7)


def _slope_guides(ax: Any, lo: int, hi: int) -> None:
    """Dotted lines of slope 1 and 2 through the lower-left of the data, to read slopes by eye."""
    ymin = min(line.get_ydata().min() for line in ax.get_lines())
    xs = np.array([lo, hi], dtype=float)  # (2,)
    for power in (1, 2):
        ax.loglog(xs, ymin * (xs / lo) ** power, ":", color="gray", lw=1)
        end = (hi, ymin * (hi / lo) ** power)
        label = "∝ T²" if power == 2 else "∝ T"
        ax.annotate(label, end, fontsize=7, color="gray", ha="right", va="bottom")


def _cpu_throughput(
    run: BenchmarkRun, path: str, width: int, causal: bool
) -> list[tuple[int, float]]:
    """(L, TFLOP/s) of ``path``'s measured rows in a CPU run, by length."""
    return sorted(
        (int(r["length"]), float(r["gflops"]) / 1e3)
        for r in run.rows
        if r["path"] == path
        and int(r["width"]) == width
        and bool(r["causal"]) == causal
        and r["status"] == "ok"
        and r.get("gflops")
    )


def plot_cpu_and_gpu(
    cpu_run: BenchmarkRun | None,
    gpu_runs: list[GpuRun],
    axes: Any,
    width: int = 64,
    dtype: str = "float16",
    causal: bool = False,
) -> None:
    """Throughput against L on two axes: a CPU run's paths (left), a GPU run's (right).

    Both in TFLOP/s on a log scale (the CPU run's GFLOP/s / 1000), so the
    gap between them reads off directly. The GPU panel shows its forward
    rows at ``width``, ``dtype`` and ``causal``; with no GPU runs it holds
    `NO_GPU_RESULTS` as text instead of lines.
    """
    cpu_ax, gpu_ax = (series_cycle(ax) for ax in axes)
    if cpu_run is not None:
        for path in cpu_run.paths:
            points = _cpu_throughput(cpu_run, path, width, causal)
            if points:
                marker = SERIES_MARKERS[cpu_run.paths.index(path) % len(SERIES_MARKERS)]
                cpu_ax.plot(*zip(*points, strict=True), marker + "-", ms=3, label=path)
        cpu_ax.set_title(f"CPU: {cpu_run.machine}", fontsize=9)
    else:
        cpu_ax.set_title("CPU: no results", fontsize=9)
    if gpu_runs:
        run = gpu_runs[0]
        for path in run.paths:
            lengths, tflops = run.series(path, "forward", dtype, width, causal)
            if lengths:
                marker = SERIES_MARKERS[run.paths.index(path) % len(SERIES_MARKERS)]
                gpu_ax.plot(lengths, tflops, marker + "-", ms=3, label=path)
        gpu_ax.set_title(f"GPU: {run.gpu}, {dtype}", fontsize=9)
    else:
        text = textwrap.fill(NO_GPU_RESULTS, 36, break_on_hyphens=False)
        gpu_ax.text(0.5, 0.5, text, ha="center", va="center", transform=gpu_ax.transAxes)
        gpu_ax.set_title("GPU", fontsize=9)
        gpu_ax.set_xticks([])
        gpu_ax.set_yticks([])
    for ax in axes:
        if ax.get_lines():
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("sequence length L = S (tokens)")
            ax.set_ylabel("TFLOP/s (4·B·H·L·S·E, half if causal)")
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=7, title=f"forward, E = {width}", title_fontsize=7)


def benchmark_figure(run: BenchmarkRun, width: int, causal: bool = False) -> StillFigure:
    """`plot_benchmark` of ``run`` on a figure of its own, titled by `benchmark_headline`; the
    text alternative gives every path's fitted exponents."""
    fig = still_figure(height=4.2)
    plot_benchmark(run, fig.subplots(1, 2), width=width, causal=causal)
    headline = benchmark_headline(run, width, causal)
    fig.suptitle(
        f"{run.machine}, E = {width}, {'causal' if causal else 'not causal'}; fitted on the 3 "
        f"largest T:\n{headline}",
        fontsize=9,
    )
    fits = []
    for path, fit in run.exponents(width, causal).items():
        found = [f"{m} {fit[m]:.2f}" for m in ("time", "memory") if fit[m] is not None]
        if found:
            fits.append(f"{path}: {', '.join(found)}")
    lengths = sorted({int(r["length"]) for r in run.rows})
    alt = (
        f"Two log-log charts for {run.machine}, E = {width}: median time per call and peak "
        f"memory against T = {', '.join(map(str, lengths))}, one line and marker per path, "
        "with dotted guides of slope 1 and 2. Fitted exponents: "
        + "; ".join(fits)
        + ". "
        + " ".join(headline.splitlines())
    )
    return StillFigure(fig, alt)


def cpu_and_gpu_figure(
    cpu_run: BenchmarkRun | None,
    gpu_runs: list[GpuRun],
    width: int = 64,
    dtype: str = "float16",
    causal: bool = False,
) -> StillFigure:
    """`plot_cpu_and_gpu` on a figure of its own; the text alternative gives each CPU path's
    throughput at its shortest and longest L, and `gpu_caption` for the GPU panel."""
    fig = still_figure(height=3.6)
    plot_cpu_and_gpu(cpu_run, gpu_runs, fig.subplots(1, 2), width, dtype, causal)
    fig.suptitle("forward pass throughput against L, CPU and GPU, in one unit", fontsize=10)
    parts = []
    if cpu_run is not None:
        for path in cpu_run.paths:
            points = _cpu_throughput(cpu_run, path, width, causal)
            if points:
                (l0, t0), (l1, t1) = points[0], points[-1]
                parts.append(f"{path} {t0:.2g} TFLOP/s at L = {l0} to {t1:.2g} at L = {l1}")
    cpu = (
        f"CPU, {cpu_run.machine}: " + "; ".join(parts) if cpu_run is not None else "CPU: no results"
    )
    alt = (
        f"Two charts of forward throughput in TFLOP/s against L, E = {width}, log scales. "
        f"{cpu}. GPU: {gpu_caption(gpu_runs, width, dtype, causal)}"
    )
    return StillFigure(fig, alt)
