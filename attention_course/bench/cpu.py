"""The CPU benchmark: every attention path, measured side by side in one run.

Run by ``python -m attention_course.bench`` (`attention_course.bench.cli`). For
each path, sequence length, head width and causal setting it records the
median time over repeats, the achieved GFLOP/s (4·B·H·L·S·E FLOPs, halved for
causal, as FlashAttention's benchmark counts them), the peak memory beyond the
inputs (the process high-water mark on the CPU, `max_memory_allocated` on a
GPU; `attention_course.bench.machine`), and each as a fraction of a plain matrix
product timed in the same run, the machine's practical limit. Ratios measured
in one run are what to compare: these machines are shared and noisy. Sizes
that would not fit are refused and recorded as such. Results go to
``attention_course/bench/measured/<machine>/`` (package data) as JSON, CSV and PNG plots, with the
machine, versions, thread count and load average (`machine_info`), and the
growth exponents in L fitted on them (`attention_course.bench.results`).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attention_lib.core import scaled_dot_product_attention
from attention_lib.flash import flash_attention
from attention_lib.memory import AttentionMemoryError

from .machine import CudaPeak, HostPeak, command_line, machine_info
from .results import growth_exponents

__all__ = [
    "FULL_LENGTHS",
    "PATHS",
    "QUICK_LENGTHS",
    "AttentionPath",
    "Case",
    "Result",
    "Runner",
    "cases",
    "plot",
    "rows",
    "run_suite",
    "summary",
    "write",
]

FULL_LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384)
QUICK_LENGTHS = (256, 512, 1024)


@dataclass(frozen=True)
class Case:
    """One measurement: a path at one size."""

    path: str
    length: int
    width: int
    causal: bool
    batch_heads: int = 8

    @property
    def flops(self) -> float:
        """4·B·H·L·S·E (two matmuls of 2·L·S·E each), halved when causal."""
        n = 4.0 * self.batch_heads * self.length * self.length * self.width
        return n / 2 if self.causal else n


@dataclass
class Result:
    """What one `Case` measured; ``status`` is "ok", "refused" or "failed"."""

    case: Case
    status: str
    times_s: list[float] = field(default_factory=list)
    peak_mib: float | None = None  # memory beyond the inputs
    note: str = ""

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.times_s) if self.times_s else None

    @property
    def gflops(self) -> float | None:
        t = self.median_s
        return self.case.flops / t / 1e9 if t else None


# --- the paths ------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionPath:
    """A named way to compute attention, and the array library it runs in."""

    name: str
    library: str  # "numpy" or "torch"
    run: Callable[[Any, Any, Any, bool], Any]
    gpu_only: bool = False


def _torch_sdpa(q: Any, k: Any, v: Any, causal: bool) -> Any:
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


PATHS = {
    p.name: p
    for p in [
        AttentionPath(
            "numpy reference",
            "numpy",
            lambda q, k, v, c: scaled_dot_product_attention(q, k, v, is_causal=c),
        ),
        AttentionPath(
            "numpy tiled",
            "numpy",
            lambda q, k, v, c: flash_attention(q, k, v, is_causal=c, backend="tiled"),
        ),
        AttentionPath(
            "torch reference",
            "torch",
            lambda q, k, v, c: scaled_dot_product_attention(q, k, v, is_causal=c),
        ),
        AttentionPath("torch SDPA", "torch", _torch_sdpa),
        AttentionPath(
            "torch tiled",
            "torch",
            lambda q, k, v, c: flash_attention(q, k, v, is_causal=c, backend="tiled"),
        ),
        AttentionPath(
            "triton",
            "torch",
            lambda q, k, v, c: flash_attention(q, k, v, is_causal=c, backend="triton"),
            gpu_only=True,
        ),
    ]
}


class Runner:
    """Makes inputs, times and measures one case at a time on one device."""

    def __init__(self, device: str, dtype: str, repeats: int, min_seconds: float) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.dtype = dtype
        self.repeats = repeats
        self.min_seconds = min_seconds
        self.on_gpu = self.device.type == "cuda"

    def inputs(self, case: Case, library: str) -> tuple[Any, Any, Any]:
        shape = (1, case.batch_heads, case.length, case.width)  # (B, H, L, E)
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(shape, dtype=np.float32) for _ in range(3)]
        if library == "numpy":
            return tuple(a.astype(self.dtype, copy=False) for a in arrays)  # type: ignore[return-value]
        dt = getattr(self.torch, self.dtype)
        return tuple(self.torch.from_numpy(a).to(self.device, dt) for a in arrays)  # type: ignore[return-value]

    def sync(self) -> None:
        if self.on_gpu:
            self.torch.cuda.synchronize()

    def measure(self, case: Case) -> Result:
        """Time ``case`` here (repeats, medians); measure its memory in a fresh process.

        On the CPU the memory run is one call in a new Python process
        (`peak_here`), after a short warm-up there: in this one, memory
        freed by earlier cases is reused without raising the high-water
        mark, and a run could show less than its own output.
        """
        path = PATHS[case.path]
        if path.gpu_only and not self.on_gpu:
            return Result(case, "skipped", note="needs a CUDA GPU")
        q, k, v = self.inputs(case, path.library)
        on_device = self.on_gpu and path.library == "torch"
        peak = CudaPeak(self.torch) if on_device else None
        gc.collect()
        try:
            with self.torch.no_grad():
                if peak is not None:
                    peak.reset()
                start = time.perf_counter()
                path.run(q, k, v, case.causal)  # the warm-up (and the memory run on a GPU)
                self.sync()
                first = time.perf_counter() - start
                peak_mib = peak.peak_beyond_base_mib() if peak is not None else None
                # a long first run is a fair sample too: its few extra page faults are
                # lost in the arithmetic, and skipping it would double the sweep
                times: list[float] = [first] if first > 5 * self.min_seconds else []
                # ``repeats`` runs, or fewer once they add up to 10 x min_seconds
                while len(times) < self.repeats and sum(times) < 10 * self.min_seconds:
                    start = time.perf_counter()
                    path.run(q, k, v, case.causal)
                    self.sync()
                    times.append(time.perf_counter() - start)
        except AttentionMemoryError as err:
            return Result(case, "refused", note=str(err))
        except Exception as err:  # recorded, not fatal: one bad path must not lose the run
            return Result(case, "failed", note=f"{type(err).__name__}: {err}")
        if peak is None:
            del q, k, v
            peak_mib = self.fresh_peak(case)
        return Result(case, "ok", times, peak_mib)

    def fresh_peak(self, case: Case) -> float | None:
        """`peak_here` in a new Python process (None if it cannot say)."""
        fields = ", ".join(repr(x) for x in dataclasses.astuple(case))
        code = (
            "import json; from attention_course.bench.cpu import Case, Runner; "
            f"print(json.dumps(Runner('cpu', {self.dtype!r}, 1, 0.0).peak_here(Case({fields}))))"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"memory run of {case} failed: {done.stderr.strip()[-500:]}", file=sys.stderr)
            return None
        return json.loads(done.stdout.splitlines()[-1])

    def peak_here(self, case: Case) -> float | None:
        """Peak memory beyond the inputs of one call of ``case``, in this process (MiB).

        A call at a short length first sets up what every call shares (the
        libraries' buffers, the tiled path's threads), so it is not counted.
        """
        path = PATHS[case.path]
        warm = dataclasses.replace(case, length=min(case.length, 128))
        with self.torch.no_grad():
            path.run(*self.inputs(warm, path.library), warm.causal)
            q, k, v = self.inputs(case, path.library)
            gc.collect()
            peak = HostPeak()
            peak.reset()
            path.run(q, k, v, case.causal)
            return peak.peak_beyond_base_mib()

    def matmul_gflops(self, library: str, n: int = 2048) -> float:
        """GFLOP/s of an n x n x n matrix product in ``library``: the practical limit."""
        rng = np.random.default_rng(1)
        a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
        if library == "torch":
            dt = getattr(self.torch, self.dtype)
            a, b = (self.torch.from_numpy(x).to(self.device, dt) for x in (a, b))
        times = []
        for _ in range(5):
            start = time.perf_counter()
            a @ b
            self.sync()
            times.append(time.perf_counter() - start)
        return 2.0 * n**3 / statistics.median(times) / 1e9


# --- the sweep --------------------------------------------------------------------


def cases(
    paths: Sequence[str], lengths: Sequence[int], widths: Sequence[int], batch_heads: int
) -> Iterator[Case]:
    for width in widths:
        for causal in (False, True):
            for length in lengths:
                for path in paths:
                    yield Case(path, length, width, causal, batch_heads)


def run_suite(args: argparse.Namespace) -> dict[str, Any]:
    from tqdm import tqdm

    runner = Runner(args.device, args.dtype, args.repeats, args.min_seconds)
    info = machine_info(runner.device, runner.dtype)
    paths = [p for p in args.paths if runner.on_gpu or not PATHS[p].gpu_only]
    limits = {
        lib: runner.matmul_gflops(lib, args.matmul_size)
        for lib in {PATHS[p].library for p in paths}
    }
    todo = list(cases(paths, args.lengths, args.widths, args.batch_heads))
    results: list[Result] = []
    given_up: set[tuple[str, int, bool]] = set()  # a refused length refuses every longer one
    for case in tqdm(todo, desc="attention benchmark", unit="case"):
        key = (case.path, case.width, case.causal)
        if key in given_up:
            results.append(Result(case, "refused", note="a shorter length was already refused"))
            continue
        result = runner.measure(case)
        if result.status == "refused" or (result.median_s or 0) > args.max_seconds:
            given_up.add(key)
            if result.status == "ok":
                result.note = f"longer lengths skipped: this one took {result.median_s:.1f} s"
        results.append(result)
    return {"info": info, "matmul_gflops": limits, "results": results, "args": vars(args)}


# --- output -------------------------------------------------------------------------


def rows(suite: dict[str, Any]) -> list[dict[str, Any]]:
    limits = suite["matmul_gflops"]
    out = []
    for r in suite["results"]:
        limit = limits.get(PATHS[r.case.path].library)
        out.append(
            {
                **dataclasses.asdict(r.case),
                "status": r.status,
                "median_s": r.median_s,
                "repeats": len(r.times_s),
                "gflops": r.gflops,
                "fraction_of_matmul": r.gflops / limit if r.gflops and limit else None,
                "peak_mib_beyond_inputs": r.peak_mib,
                "note": r.note,
            }
        )
    return out


def plot(
    table: list[dict[str, Any]], fits: dict[str, Any], width: int, out: Path, title: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for metric, label, fname in [
        ("median_s", "median time per call (s)", "time_vs_length.png"),
        ("peak_mib_beyond_inputs", "peak memory beyond inputs (MiB)", "memory_vs_length.png"),
    ]:
        fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
        for path, fit in fits.items():
            sel = [
                r
                for r in table
                if r["path"] == path
                and r["width"] == width
                and not r["causal"]
                and r["status"] == "ok"
                and r[metric]
            ]
            if not sel:
                continue
            slope = fit["time" if metric == "median_s" else "memory"]
            tag = f" (slope {slope:.2f})" if slope is not None else ""
            ax.loglog([r["length"] for r in sel], [r[metric] for r in sel], "o-", label=path + tag)
        ax.set_xlabel("sequence length L = S (tokens)")
        ax.set_ylabel(label)
        ax.set_title(f"{label.split(' (')[0]} against length, E = {width}, B·H = 8\n{title}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(title="path (fitted growth exponent in L)", fontsize=8)
        fig.savefig(out / fname, dpi=100)
        plt.close(fig)


def write(suite: dict[str, Any], out_root: Path) -> Path:
    out = out_root / suite["info"]["machine"]
    out.mkdir(parents=True, exist_ok=True)
    table = rows(suite)
    width = min(suite["args"]["widths"])
    fits = growth_exponents(table, width)
    payload = {
        "command": command_line(),
        "info": suite["info"],
        "matmul_gflops": suite["matmul_gflops"],
        "growth_exponents": {"width": width, "causal": False, "fits": fits},
        "results": table,
    }
    (out / "results.json").write_text(json.dumps(payload, indent=2) + "\n")
    with (out / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    plot(table, fits, width, out, suite["info"]["machine"])
    return out


def summary(suite: dict[str, Any]) -> str:
    """A plain-text table of the run, then the fitted growth exponents."""
    columns = [  # header, row key, width, number format
        ("path", "path", -16, ""),
        ("L", "length", 6, ""),
        ("E", "width", 4, ""),
        ("causal", "causal", 6, ""),
        ("time s", "median_s", 9, ".4f"),
        ("GFLOP/s", "gflops", 8, ".1f"),
        ("of mm", "fraction_of_matmul", 6, ".2f"),
        ("peak MiB", "peak_mib_beyond_inputs", 9, ".1f"),
        ("status", "status", -8, ""),
    ]

    def cell(text: str, width: int) -> str:  # negative width: left-aligned
        return text.ljust(-width) if width < 0 else text.rjust(width)

    lines = [f"matrix product (practical limit), GFLOP/s: {suite['matmul_gflops']}"]
    lines.append(" ".join(cell(h, w) for h, _, w, _ in columns))
    table = rows(suite)
    for r in table:
        texts = (
            "-" if r[k] is None else format(r[k], f) if f else str(r[k]) for _, k, _, f in columns
        )
        lines.append(" ".join(cell(t, w) for t, (_, _, w, _) in zip(texts, columns, strict=True)))
    width = min(suite["args"]["widths"])
    for path, fit in growth_exponents(table, width).items():
        t, m = (None if x is None else round(x, 2) for x in (fit["time"], fit["memory"]))
        lines.append(f"growth exponent in L, {path} (E={width}): time {t}, memory {m}")
    return "\n".join(lines)
