"""What attention costs: the arithmetic, the memory, and what the benchmarks measured.

Counted per head for a sequence of T queries and T keys (the lesson's cost
section):

- QK^T: 2·T²·d_k FLOPs (each of T² scores is a d_k-long dot product, a
  multiply and an add per term), producing a T x T score matrix;
- softmax: O(T²) elementwise work, one exponential per score;
- AV: 2·T²·d_v FLOPs;
- memory: the explicit score matrix holds T² numbers per head.

The tiled path (`attention_lib.flash.loop`) never holds that matrix: one tile of
``block_q x block_k`` scores at a time, plus per query row the running
maximum m, the running sum l and the accumulator of d_v numbers that becomes
the output row. That is linear in T.

The second half reads the benchmark suite's results files
(``benchmarks/results/<machine>/results.json``, written by
`attention_lib.bench`) into rows for plotting, with growth exponents fitted
by `attention_lib.bench.fit_exponent`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..bench import fit_exponent
from ..memory import format_bytes

__all__ = [
    "BenchmarkRun",
    "HeadCost",
    "TiledMemory",
    "describe_exponents",
    "expected_exponent",
    "format_cost_table",
    "format_memory_table",
    "head_cost",
    "load_benchmarks",
    "plot_benchmark",
    "tiled_memory",
]


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _itemsize(dtype: str) -> int:
    """Bytes per number of a dtype named as numpy or torch names it ('bfloat16' too)."""
    if dtype == "bfloat16":
        return 2
    try:
        return np.dtype(dtype).itemsize
    except TypeError:
        raise ValueError(f"unknown dtype {dtype!r}; use e.g. 'float32', 'float16'") from None


@dataclass(frozen=True)
class HeadCost:
    """The cost of one attention head over T queries and T keys.

    ``qk_flops`` = 2·T²·d_k, ``softmax_exps`` = T² (one exponential per
    score; the O(T²) elementwise work), ``av_flops`` = 2·T²·d_v,
    ``score_elements`` = T², ``score_bytes`` = T² times the dtype's size.
    """

    length: int
    width_k: int
    width_v: int
    dtype: str
    qk_flops: int
    softmax_exps: int
    av_flops: int
    score_elements: int
    score_bytes: int

    @property
    def matmul_flops(self) -> int:
        """The two matrix products together: 2·T²·(d_k + d_v)."""
        return self.qk_flops + self.av_flops


def head_cost(
    length: int, width_k: int = 64, width_v: int | None = None, dtype: str = "float32"
) -> HeadCost:
    """Operation counts and score-matrix memory of one head at sequence length T = ``length``.

    ``width_v`` defaults to ``width_k``; ``dtype`` names the score matrix's
    element type ('float32', 'float16', 'bfloat16', 'float64'). Raises
    ValueError for a length or width that is not a positive integer, or an
    unknown dtype.
    """
    t = _positive_int("length", length)
    dk = _positive_int("width_k", width_k)
    dv = dk if width_v is None else _positive_int("width_v", width_v)
    scores = t * t
    return HeadCost(
        length=t,
        width_k=dk,
        width_v=dv,
        dtype=dtype,
        qk_flops=2 * scores * dk,  # T² dot products of length d_k
        softmax_exps=scores,
        av_flops=2 * scores * dv,  # T x T weights times T x d_v values
        score_elements=scores,
        score_bytes=scores * _itemsize(dtype),
    )


def format_cost_table(lengths: Iterable[int], width: int = 64, dtype: str = "float32") -> str:
    """A text table of `head_cost` at each length: FLOPs and score-matrix memory per head."""
    lines = [
        f"per head, d_k = d_v = {width}, scores in {dtype}",
        f"{'T':>7} {'QK^T FLOPs':>16} {'softmax exps':>14} {'AV FLOPs':>16} {'score matrix':>13}",
    ]
    for t in lengths:
        c = head_cost(t, width, dtype=dtype)
        lines.append(
            f"{t:>7} {c.qk_flops:>16,} {c.softmax_exps:>14,} {c.av_flops:>16,} "
            f"{format_bytes(c.score_bytes):>13}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class TiledMemory:
    """Numbers held per head by the tiled path, part by part (elements, not bytes).

    ``tile``: one block_q x block_k tile of scores; ``stats``: m and l for
    each of the ``rows`` query rows held; ``accumulator``: rows x d_v.
    """

    rows: int
    tile: int
    stats: int
    accumulator: int

    @property
    def total(self) -> int:
        return self.tile + self.stats + self.accumulator


def tiled_memory(
    length: int,
    width_v: int,
    block_q: int,
    block_k: int,
    rows: int | None = None,
    length_k: int | None = None,
) -> TiledMemory:
    """What the tiled path holds for one head instead of the L x S score matrix.

    ``length`` is L (query rows), ``length_k`` is S (keys; default L).
    ``rows`` is how many query rows keep running statistics at once: by
    default all L of them (on a GPU every query block runs at the same time,
    and FlashAttention keeps each row's log-sum-exp for the backward pass);
    ``rows=block_q`` is one query block, as the numpy loop holds it. Block
    sizes beyond L (block_q) or S (block_k) are capped there, as the tiled
    path's last tile is.

    Raises ValueError for sizes that are not positive integers, or ``rows``
    above ``length``.
    """
    t = _positive_int("length", length)
    s = t if length_k is None else _positive_int("length_k", length_k)
    dv = _positive_int("width_v", width_v)
    bq = min(_positive_int("block_q", block_q), t)
    bk = min(_positive_int("block_k", block_k), s)
    r = t if rows is None else _positive_int("rows", rows)
    if r > t:
        raise ValueError(f"rows ({r}) cannot exceed the sequence length ({t})")
    return TiledMemory(rows=r, tile=bq * bk, stats=2 * r, accumulator=r * dv)


def format_memory_table(
    lengths: Iterable[int],
    width_v: int = 64,
    block_q: int = 128,
    block_k: int = 128,
    dtype: str = "float32",
) -> str:
    """A text table per head: the T² score matrix against the tiled path's tile + m, l, acc."""
    size = _itemsize(dtype)
    lines = [
        f"per head, d_v = {width_v}, tiles {block_q} x {block_k}, {dtype}",
        f"{'T':>7} {'score matrix T²':>16} {'tiled: tile':>12} {'+ m, l':>10} "
        f"{'+ acc T·d_v':>12} {'= total':>11} {'matrix / tiled':>15}",
    ]
    for t in lengths:
        full = head_cost(t, width_v, dtype=dtype).score_bytes
        tm = tiled_memory(t, width_v, block_q, block_k)
        lines.append(
            f"{t:>7} {format_bytes(full):>16} {format_bytes(tm.tile * size):>12} "
            f"{format_bytes(tm.stats * size):>10} {format_bytes(tm.accumulator * size):>12} "
            f"{format_bytes(tm.total * size):>11} {full / (tm.total * size):>14.1f}x"
        )
    return "\n".join(lines)


# --- benchmark results --------------------------------------------------------------

_METRICS = {"time": "median_s", "memory": "peak_mib_beyond_inputs"}


@dataclass
class BenchmarkRun:
    """One machine's ``results.json``: who measured, and one row per measurement.

    ``rows`` keep the file's keys (path, length, width, causal, status,
    median_s, peak_mib_beyond_inputs, gflops, ...). ``machine`` is the name
    the suite recorded in ``info``; ``label`` adds the GPU or processor and
    the dtype, for plot titles.
    """

    source: Path
    info: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    command: str = ""  # the command line that produced the file

    @property
    def machine(self) -> str:
        return str(self.info.get("machine", self.source.parent.name))

    @property
    def is_gpu(self) -> bool:
        return "gpu" in self.info or str(self.info.get("device", "")).startswith("cuda")

    @property
    def label(self) -> str:
        hardware = self.info.get("gpu") or (
            f"{self.info.get('cpu_count', '?')} CPU cores, "
            f"{self.info.get('torch_threads', '?')} torch threads"
        )
        return f"{self.machine} ({hardware}, {self.info.get('dtype', '?')})"

    @property
    def paths(self) -> list[str]:
        """The attention paths measured, in the file's order."""
        return list(dict.fromkeys(r["path"] for r in self.rows))

    @property
    def widths(self) -> list[int]:
        return sorted({int(r["width"]) for r in self.rows})

    def series(
        self, path: str, metric: str, width: int, causal: bool = False
    ) -> tuple[list[int], list[float]]:
        """(lengths, values) of the successful measurements of one path, sorted by length.

        ``metric`` is "time" (median seconds per call) or "memory" (peak MiB
        beyond the inputs). Measurements that were refused, failed, skipped
        or have no value are left out. Raises ValueError for another metric.
        """
        if metric not in _METRICS:
            raise ValueError(f"metric must be one of {sorted(_METRICS)}, got {metric!r}")
        key = _METRICS[metric]
        points = sorted(
            (int(r["length"]), float(r[key]))
            for r in self.rows
            if r["path"] == path
            and int(r["width"]) == width
            and bool(r["causal"]) == causal
            and r["status"] == "ok"
            and r.get(key) is not None
        )
        return [p[0] for p in points], [p[1] for p in points]

    def exponents(
        self, width: int, causal: bool = False, points: int = 3
    ) -> dict[str, dict[str, float | None]]:
        """Fitted growth exponents in T per path: {"time": slope, "memory": slope}.

        Each slope is `attention_lib.bench.fit_exponent` over the largest
        ``points`` lengths (None where fewer than two usable points exist).
        """
        return {
            path: {
                metric: fit_exponent(*self.series(path, metric, width, causal), points=points)
                for metric in _METRICS
            }
            for path in self.paths
        }


def load_benchmarks(root: str | Path = "benchmarks/results") -> list[BenchmarkRun]:
    """Every ``<root>/<machine>/results.json``, sorted by machine directory name.

    An absent or empty ``root`` gives an empty list. Raises ValueError for a
    file that is not a results file of `attention_lib.bench` (naming it).
    """
    runs = []
    for source in sorted(Path(root).glob("*/results.json")):
        try:
            payload = json.loads(source.read_text())
            run = BenchmarkRun(
                source,
                dict(payload["info"]),
                list(payload["results"]),
                str(payload.get("command", "")),
            )
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(
                f"{source} is not a benchmark results file ({type(err).__name__}: {err})"
            ) from None
        runs.append(run)
    return runs


# What the lesson and the kernel issue expect: time grows like T² on every path; memory like
# T² where the score matrix is materialised (the reference paths) and like T where it is not.
_EXPECTED_MEMORY = {"numpy reference": 2, "torch reference": 2}
_TOLERANCE = 0.35


def expected_exponent(path: str, metric: str) -> int:
    """The growth exponent the cost model predicts for a path: 2, or 1 for tiled memory."""
    if metric == "time":
        return 2
    return _EXPECTED_MEMORY.get(path, 1)


def describe_exponents(run: BenchmarkRun, width: int, causal: bool = False) -> str:
    """One line per path with the fitted exponents and whether each is near the prediction,
    then a summary line per metric.

    "near" means within 0.35 of the predicted 2 (time; reference memory) or
    1 (memory of the paths that never hold the score matrix: tiled, SDPA,
    Triton). Small lengths are dominated by fixed costs, so a short sweep
    may well miss; the text says what the data shows, not what it should.
    """
    lines = [f"{run.machine}, E = {width}, {'causal' if causal else 'not causal'}:"]
    near: dict[str, list[bool]] = {metric: [] for metric in _METRICS}
    slopes: dict[str, list[float]] = {metric: [] for metric in _METRICS}
    for path, fit in run.exponents(width, causal).items():
        parts = []
        for metric in _METRICS:
            slope, want = fit[metric], expected_exponent(path, metric)
            if slope is None:
                parts.append(f"{metric} -")
                continue
            ok = abs(slope - want) <= _TOLERANCE
            near[metric].append(ok)
            slopes[metric].append(slope)
            parts.append(f"{metric} {slope:5.2f} ({'near' if ok else 'NOT near'} {want})")
        lines.append(f"  {path:<16} " + ", ".join(parts))
    for metric, oks in near.items():
        if oks:
            lo, hi = min(slopes[metric]), max(slopes[metric])
            lines.append(
                f"  {metric}: {sum(oks)} of {len(oks)} paths near the predicted exponent "
                f"(fitted {lo:.2f} to {hi:.2f})"
            )
    return "\n".join(lines)


def plot_benchmark(
    run: BenchmarkRun, axes: Sequence[Any], width: int, causal: bool = False
) -> None:
    """Time and memory against T, log-log, every path of ``run``, on two matplotlib axes.

    Each line's legend label carries its fitted growth exponent; dotted grey
    guides show slopes 1 and 2 for reference. ``axes`` is (time_ax, memory_ax).
    """
    fits = run.exponents(width, causal)
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
            ax.loglog(lengths, values, "o-", ms=4, label=path + tag)
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
