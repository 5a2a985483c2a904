"""What attention costs: the arithmetic and the memory, and what the benchmarks measured.

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
the output row. That is linear in T. `attention_traffic` counts the bytes
each path moves to and from a GPU's main memory, forward and backward
(its figure: `attention_lib.lessons.figures.plot_traffic`).

The second part of this module, below the line "benchmark results", reads
the benchmark suite's results files (``benchmarks/results/<machine>/results.json``,
written by `attention_lib.bench`) into rows for plotting, with growth
exponents fitted by `attention_lib.bench.fit_exponent`, and reads a path's
time for steps in its time per score (`time_steps`): where a fitted slope
above 2 comes from. It moves to the benchmarks' own room with the benchmark
command; nothing above the line uses it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..backend import itemsize
from ..bench import fit_exponent
from ..fits import log_log_slope
from ..inputs import positive_integer
from ..memory import format_bytes

__all__ = [
    "HeadCost",
    "TiledMemory",
    "Traffic",
    "attention_traffic",
    "format_cost_table",
    "format_memory_table",
    "format_traffic_table",
    "head_cost",
    "tiled_memory",
]


# -- the arithmetic -------------------------------------------------------------------------


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
    t = positive_integer("length", length)
    dk = positive_integer("width_k", width_k)
    dv = dk if width_v is None else positive_integer("width_v", width_v)
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
        score_bytes=scores * itemsize(dtype),
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
    t = positive_integer("length", length)
    s = t if length_k is None else positive_integer("length_k", length_k)
    dv = positive_integer("width_v", width_v)
    bq = min(positive_integer("block_q", block_q), t)
    bk = min(positive_integer("block_k", block_k), s)
    r = t if rows is None else positive_integer("rows", rows)
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
    size = itemsize(dtype)
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


# --- memory traffic, forward and backward -------------------------------------------------
#
# Counted in elements read from and written to the GPU's main memory (HBM) by one head over
# N = T queries and keys of width d, following the papers' own algorithms step by step:
#
# - standard forward: FlashAttention (Dao et al., 2022, arXiv:2205.14135), Algorithm 0:
#   read Q, K, write S; read S, write P; read P, V, write O.
# - standard backward: the same paper, Appendix B.4, Algorithm 3 (P is kept from the forward
#   pass): read P, dO, write dV; read dO, V, write dP; read P, dP, write dS; read dS, K,
#   write dQ; read dS, Q, write dK.
# - FlashAttention-2 forward (Dao, 2023, arXiv:2307.08691), Algorithm 1: per query block read
#   Q_i once and every K_j, V_j; write O_i and the log-sum-exp L_i.
# - FlashAttention-2 backward, Algorithm 2: D = rowsum(dO ∘ O) (read dO, O; write D);
#   dQ = 0 written; per key block read K_j, V_j and write dK_j, dV_j; for every (key block,
#   query block) pair read Q_i, O_i, dO_i, dQ_i, L_i, D_i and write dQ_i back. S and P are
#   recomputed from Q, K and L instead of read: 2N²d more FLOPs, no N² traffic. (Line 9
#   loads O_i although only D_i is used after line 4; we count the algorithm as written.)
#
# Matrix-product FLOPs: forward 2·2N²d (QKᵀ, PV); backward 4·2N²d (dV, dP, dQ, dK), plus
# 2N²d for the recomputed QKᵀ in FlashAttention-2. Causal masking, which lets both skip
# about half the work, is not counted.


@dataclass(frozen=True)
class Traffic:
    """One pass of one head: HBM ``reads`` and ``writes`` (elements), matrix-product
    ``flops``, and ``saved``: what the forward pass keeps for the backward one (the N x N
    weights P on the standard path, the N log-sum-exps L on FlashAttention-2's)."""

    path: str
    direction: str
    length: int
    width: int
    reads: int
    writes: int
    flops: int
    saved: int

    @property
    def elements(self) -> int:
        """reads + writes."""
        return self.reads + self.writes

    def bytes(self, dtype: str = "float16") -> int:
        return self.elements * itemsize(dtype)


def _blocks(n: int, size: int) -> int:
    return -(-n // size)  # ceil(n / size): the last block may be short


def attention_traffic(
    length: int,
    width: int = 64,
    path: str = "standard",
    direction: str = "backward",
    block_q: int = 128,
    block_k: int = 128,
) -> Traffic:
    """HBM traffic of one head's ``direction`` pass ("forward" or "backward") on ``path``
    ("standard" or "flash2"), counted from the papers' algorithms (see the comment above).

    ``block_q`` (B_r) and ``block_k`` (B_c) are FlashAttention-2's tile sizes;
    the standard path ignores them. Raises ValueError for sizes that are not
    positive integers, or an unknown path or direction.
    """
    n = positive_integer("length", length)
    d = positive_integer("width", width)
    br = positive_integer("block_q", block_q)
    bc = positive_integer("block_k", block_k)
    if path not in ("standard", "flash2"):
        raise ValueError(f"path must be 'standard' or 'flash2', got {path!r}")
    if direction not in ("forward", "backward"):
        raise ValueError(f"direction must be 'forward' or 'backward', got {direction!r}")
    nn, nd = n * n, n * d
    if path == "standard":
        saved = nn  # P, kept for the backward pass
        if direction == "forward":
            # read Q, K | write S | read S | write P | read P, V | write O
            reads, writes, flops = 2 * nd + nn + nn + nd, nn + nn + nd, 4 * nn * d
        else:
            # 1: P, dO -> dV   2: dO, V -> dP   3: P, dP -> dS   4: dS, K -> dQ   5: dS, Q -> dK
            reads = (nn + nd) + 2 * nd + 2 * nn + (nn + nd) + (nn + nd)
            writes = nd + nn + nn + nd + nd
            flops = 8 * nn * d
    else:
        saved = n  # L, one log-sum-exp per query row
        if direction == "forward":
            t_r = _blocks(n, br)
            reads, writes, flops = nd + t_r * 2 * nd, nd + n, 4 * nn * d
        else:
            t_c = _blocks(n, bc)
            per_key_block = 4 * nd + 2 * n  # Q_i, O_i, dO_i, dQ_i and L_i, D_i over all i
            reads = 2 * nd + 2 * nd + t_c * per_key_block  # D's dO, O; K_j, V_j; inner loop
            writes = n + nd + 2 * nd + t_c * nd  # D; dQ = 0; dK_j, dV_j; dQ_i written back
            flops = 10 * nn * d
    return Traffic(path, direction, n, d, reads, writes, flops, saved)


def format_traffic_table(
    lengths: Iterable[int],
    width: int = 64,
    block: int = 128,
    dtype: str = "float16",
) -> str:
    """Per head: the backward pass's HBM traffic, standard against FlashAttention-2, with
    what each forward pass saves for it, in ``dtype`` bytes."""
    size = itemsize(dtype)
    lines = [
        f"backward pass, per head, d = {width}, FlashAttention-2 tiles {block} x {block}, {dtype}",
        f"{'T':>7} {'standard':>11} {'FA-2':>11} {'ratio':>7}   "
        f"{'saved: P (N²)':>14} {'saved: L (N)':>13}",
    ]
    for t in lengths:
        std = attention_traffic(t, width, "standard", "backward")
        fa2 = attention_traffic(t, width, "flash2", "backward", block, block)
        lines.append(
            f"{t:>7} {format_bytes(std.bytes(dtype)):>11} {format_bytes(fa2.bytes(dtype)):>11} "
            f"{std.elements / fa2.elements:>6.1f}x   {format_bytes(std.saved * size):>14} "
            f"{format_bytes(fa2.saved * size):>13}"
        )
    return "\n".join(lines)


# ===========================================================================================
# -- benchmark results: the readers of the benchmark suite's files (they move with it) -------
# ===========================================================================================

__all__ += [
    "NEAR",
    "BenchmarkRun",
    "TimeSteps",
    "benchmark_headline",
    "describe_exponents",
    "expected_exponent",
    "load_benchmarks",
    "plot_benchmark",
    "time_steps",
]

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

    @property
    def batch_heads(self) -> int | None:
        """B·H, the heads every measurement ran at once: a CPU row's ``batch_heads``, a GPU
        row's ``batch`` times ``heads`` (None when the rows do not say or do not agree)."""
        found = {
            r.get("batch_heads") or r.get("batch", 0) * r.get("heads", 0) or None for r in self.rows
        }
        return int(found.pop()) if len(found) == 1 and None not in found else None

    def score_bytes(self, length: int) -> int | None:
        """Bytes of one score tensor of the run at T = ``length``: B·H·T² numbers in the
        run's dtype (None when `batch_heads` is)."""
        heads = self.batch_heads
        if heads is None:
            return None
        return heads * length**2 * itemsize(self.info.get("dtype", "float32"))

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
#: how close a fitted exponent must come to the predicted one to count as near it
NEAR = 0.35


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
            ok = abs(slope - want) <= NEAR
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


@dataclass(frozen=True)
class TimeSteps:
    """One path's time against T, read for steps in the time per score (time / T²).

    Attention's arithmetic grows like T², so a fitted time slope well above 2 means the
    time per score itself rises inside the fitted range. ``lengths`` and ``per_score``
    (seconds / T²) are the measurements; ``local`` the slope of log(time) on log(T)
    between each pair of neighbouring lengths; ``steps`` the pairs (T_lo, T_hi) whose
    local slope is more than ``tolerance`` above 2; ``past`` the lengths from the last
    step's upper end on (every length when there is no step), and ``fitted`` the slope
    over them: None with fewer than two, a step at the end of the sweep leaving nothing to
    fit.
    """

    lengths: list[int]
    per_score: list[float]
    local: list[float]
    steps: list[tuple[int, int]]
    past: list[int]
    fitted: float | None


def time_steps(
    lengths: Sequence[int], times: Sequence[float], tolerance: float = NEAR
) -> TimeSteps:
    """`TimeSteps` of one path's (lengths, median times), e.g. from `BenchmarkRun.series`.

    Raises ValueError, naming the counts or the value, for fewer than two measurements,
    lists of different lengths, or a length or time that is not positive.
    """
    if len(lengths) != len(times):
        raise ValueError(f"need one time per length, got {len(lengths)} and {len(times)}")
    pairs = sorted(zip(lengths, times, strict=True))
    if len(pairs) < 2:
        raise ValueError(f"need two or more measurements to read steps, got {len(pairs)}")
    bad = [p for p in pairs if not (p[0] > 0 and p[1] > 0)]
    if bad:
        raise ValueError(f"lengths and times must be positive, got (length, time) {bad[0]}")
    ts = [int(p[0]) for p in pairs]
    ys = [float(p[1]) for p in pairs]
    local = [log_log_slope(ts[i : i + 2], ys[i : i + 2]) for i in range(len(ts) - 1)]
    steps = [(ts[i], ts[i + 1]) for i, s in enumerate(local) if s > 2 + tolerance]
    start = ts.index(steps[-1][1]) if steps else 0
    past = ts[start:]
    fitted = log_log_slope(past, ys[start:]) if len(past) >= 2 else None
    return TimeSteps(
        ts, [y / t**2 for t, y in zip(ts, ys, strict=True)], local, steps, past, fitted
    )


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


def benchmark_headline(run: BenchmarkRun, width: int, causal: bool = False) -> str:
    """A figure title computed from ``run``'s fitted exponents (two lines).

    Time: the range of every path's slope and how many are within 0.35 of 2.
    Memory: the same, separately for the paths that store the score matrix
    (predicted 2) and those that never hold it (predicted 1). Paths without
    a fit are left out.
    """
    groups: dict[tuple[str, int], list[float]] = {}
    for path, fit in run.exponents(width, causal).items():
        for metric in _METRICS:
            if fit[metric] is not None:
                key = (metric, expected_exponent(path, metric))
                groups.setdefault(key, []).append(float(fit[metric]))

    def says(metric: str, want: int) -> str | None:
        slopes = groups.get((metric, want))
        if not slopes:
            return None
        near = sum(abs(s - want) <= NEAR for s in slopes)
        return f"{min(slopes):.2f}–{max(slopes):.2f} ({near} of {len(slopes)} near {want})"

    time = says("time", 2)
    stored, never = says("memory", 2), says("memory", 1)
    memory = "; ".join(
        text
        for text in (
            stored and f"paths that store the scores {stored}",
            never and f"the others {never}",
        )
        if text
    )
    lines = [f"time slopes {time}" if time else "", f"memory slopes: {memory}" if memory else ""]
    return "\n".join(line for line in lines if line) or "no fitted slopes"
