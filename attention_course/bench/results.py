"""The readers of the benchmarks' results files, and what their fits say against the cost model.

`load_benchmarks` reads every ``<root>/<machine>/results.json`` (root: `MEASURED`)
(the CPU sweep's, `attention_course.bench.cpu`) into a `BenchmarkRun`: its
machine, its rows, each path's measurements against the length
(`BenchmarkRun.series`) and their fitted growth exponents
(`growth_exponents`, the same fit the sweep writes into its file).
`load_gpu_runs` reads ``<root>/gpu-<device>/gpu_results.json``
(the GPU sweep's, `attention_course.bench.gpu`) into a `GpuRun`.

Against the cost model (`attention_course.lessons.cost`), time grows like T²
on every path, memory like T² where the score matrix is held and like T
where it is not (`expected_exponent`): `describe_exponents` and
`benchmark_headline` say which fits come within `NEAR` of that, and
`time_steps` finds where a path's time per score steps up, the usual
reason a fitted time slope comes out above 2. Notebook 05 draws them
(`attention_course.lessons.figures.plot_benchmark`, `plot_cpu_and_gpu`).

Importing this module imports numpy only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attention_lib.backend import itemsize
from attention_lib.fits import fit_exponent, log_log_slope

__all__ = [
    "MEASURED",
    "NEAR",
    "BenchmarkRun",
    "GpuRun",
    "TimeSteps",
    "benchmark_headline",
    "describe_exponents",
    "expected_exponent",
    "growth_exponents",
    "load_benchmarks",
    "load_gpu_runs",
    "time_steps",
]

#: the committed results, shipped with the package (package data), where `make bench` and the
#: GPU check write them: the notebooks read them from an installed course as from a checkout
MEASURED = Path(__file__).resolve().parent / "measured"

_METRICS = {"time": "median_s", "memory": "peak_mib_beyond_inputs"}


def _series(
    rows: Sequence[dict[str, Any]], path: str, metric: str, width: int, causal: bool
) -> tuple[list[int], list[float]]:
    """`BenchmarkRun.series` of any rows in the results file's layout."""
    if metric not in _METRICS:
        raise ValueError(f"metric must be one of {sorted(_METRICS)}, got {metric!r}")
    key = _METRICS[metric]
    points = sorted(
        (int(r["length"]), float(r[key]))
        for r in rows
        if r["path"] == path
        and int(r["width"]) == width
        and bool(r["causal"]) == causal
        and r["status"] == "ok"
        and r.get(key) is not None
    )
    return [p[0] for p in points], [p[1] for p in points]


def growth_exponents(
    rows: Sequence[dict[str, Any]], width: int, causal: bool = False, points: int = 3
) -> dict[str, dict[str, float | None]]:
    """Fitted growth exponents in T per path, in the rows' order: {"time": slope, "memory": slope}.

    ``rows`` are in the layout of ``results.json``'s (path, length, width,
    causal, status, median_s, peak_mib_beyond_inputs); each slope is
    `attention_lib.fits.fit_exponent` over the largest ``points`` lengths
    of the path's successful measurements at ``width`` and ``causal`` (None
    where fewer than two usable points exist). What the CPU sweep writes
    into its results and what a reader of them fits are this one function.
    """
    return {
        path: {
            metric: fit_exponent(*_series(rows, path, metric, width, causal), points=points)
            for metric in _METRICS
        }
        for path in dict.fromkeys(r["path"] for r in rows)
    }


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
        return _series(self.rows, path, metric, width, causal)

    def exponents(
        self, width: int, causal: bool = False, points: int = 3
    ) -> dict[str, dict[str, float | None]]:
        """`growth_exponents` of this run's rows."""
        return growth_exponents(self.rows, width, causal, points)


def load_benchmarks(root: str | Path = MEASURED) -> list[BenchmarkRun]:
    """Every ``<root>/<machine>/results.json``, sorted by machine directory name.

    An absent or empty ``root`` gives an empty list. Raises ValueError for a
    file that is not a results file of `attention_course.bench` (naming it).
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


# --- the GPU sweep's results ---------------------------------------------------------


@dataclass
class GpuRun:
    """One GPU's ``gpu_results.json``: the machine, one row per measurement, targets, memory."""

    source: Path
    info: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    targets: list[dict[str, Any]] = field(default_factory=list)
    memory: dict[str, Any] | None = None
    command: str = ""

    @property
    def gpu(self) -> str:
        return str(self.info.get("gpu", self.info.get("machine", self.source.parent.name)))

    def series(
        self, path: str, mode: str, dtype: str, width: int, causal: bool
    ) -> tuple[list[int], list[float]]:
        """(lengths, TFLOP/s) of one path's successful measurements, sorted by length."""
        points = sorted(
            (int(r["length"]), float(r["tflops"]))
            for r in self.rows
            if r["path"] == path
            and r["mode"] == mode
            and r["dtype"] == dtype
            and int(r["width"]) == width
            and bool(r["causal"]) == causal
            and r["status"] == "ok"
            and r.get("tflops")
        )
        return [p[0] for p in points], [p[1] for p in points]

    @property
    def paths(self) -> list[str]:
        return list(dict.fromkeys(r["path"] for r in self.rows))


def load_gpu_runs(root: str | Path = MEASURED) -> list[GpuRun]:
    """Every ``<root>/gpu-*/gpu_results.json``, sorted by directory name ([] when none).

    Raises ValueError naming a file that is not a GPU results file.
    """
    runs = []
    for source in sorted(Path(root).glob("gpu-*/gpu_results.json")):
        try:
            payload = json.loads(source.read_text())
            runs.append(
                GpuRun(
                    source,
                    dict(payload["info"]),
                    list(payload["results"]),
                    list(payload.get("targets", [])),
                    payload.get("memory"),
                    str(payload.get("command", "")),
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(
                f"{source} is not a GPU results file ({type(err).__name__}: {err})"
            ) from None
    return runs
