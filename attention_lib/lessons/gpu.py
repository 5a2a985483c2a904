"""The GPU in the course: committed GPU results next to the CPU ones, and a guarded live run.

`load_gpu_runs` reads what ``make gpu-check`` (or ``python -m
attention_lib.bench`` on a CUDA machine) wrote under
``benchmarks/results/gpu-<device>/gpu_results.json``; `plot_cpu_and_gpu`
draws a CPU run's throughput and a GPU run's side by side, in one unit
(TFLOP/s, FlashAttention-2's FLOP count), and says so plainly when no GPU
results are committed yet. `live_comparison` times our kernel against
PyTorch's SDPA where a CUDA device is present and returns None elsewhere;
`describe_live` turns either into text, the same text on every CPU
machine, so a notebook that prints it checks the same under nbval anywhere.

Importing this module imports neither torch nor triton.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cost import BenchmarkRun

__all__ = [
    "NO_GPU_RESULTS",
    "NO_LIVE_GPU",
    "GpuRun",
    "LiveComparison",
    "describe_live",
    "gpu_caption",
    "live_comparison",
    "load_gpu_runs",
    "plot_cpu_and_gpu",
]

NO_GPU_RESULTS = (
    "No GPU results are committed yet. On a machine with an NVIDIA GPU, `make gpu-check` "
    "measures them into benchmarks/results/gpu-<device>/."
)
NO_LIVE_GPU = "No CUDA device here, so there is no live GPU comparison on this machine."


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


def load_gpu_runs(root: str | Path = "benchmarks/results") -> list[GpuRun]:
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


def gpu_caption(
    runs: list[GpuRun], width: int = 64, dtype: str = "float16", causal: bool = False
) -> str:
    """One sentence on the first GPU run at its longest length, or `NO_GPU_RESULTS`."""
    if not runs:
        return NO_GPU_RESULTS
    run = runs[0]
    speeds = {}
    for path in run.paths:
        lengths, tflops = run.series(path, "forward", dtype, width, causal)
        if lengths:
            speeds[path] = (lengths[-1], tflops[-1])
    if not speeds:
        return (
            f"{run.gpu}: no forward measurement at E = {width}, {dtype}, "
            f"{'causal' if causal else 'not causal'} in {run.source}."
        )
    longest = max(length for length, _ in speeds.values())
    at = {p: s for p, (length, s) in speeds.items() if length == longest}
    parts = ", ".join(f"{p} {s:.0f}" for p, s in sorted(at.items(), key=lambda kv: -kv[1]))
    return (
        f"Forward pass on {run.gpu} at L = {longest}, E = {width}, {dtype}, "
        f"{'causal' if causal else 'not causal'}, in TFLOP/s: {parts} (measured by "
        f"`{run.command}`)."
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
    cpu_ax, gpu_ax = axes
    if cpu_run is not None:
        for path in cpu_run.paths:
            points = sorted(
                (int(r["length"]), float(r["gflops"]) / 1e3)
                for r in cpu_run.rows
                if r["path"] == path
                and int(r["width"]) == width
                and bool(r["causal"]) == causal
                and r["status"] == "ok"
                and r.get("gflops")
            )
            if points:
                cpu_ax.plot(*zip(*points, strict=True), "o-", ms=3, label=path)
        cpu_ax.set_title(f"CPU: {cpu_run.machine}", fontsize=9)
    else:
        cpu_ax.set_title("CPU: no results", fontsize=9)
    if gpu_runs:
        run = gpu_runs[0]
        for path in run.paths:
            lengths, tflops = run.series(path, "forward", dtype, width, causal)
            if lengths:
                gpu_ax.plot(lengths, tflops, "o-", ms=3, label=path)
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


@dataclass(frozen=True)
class LiveComparison:
    """A live timing on this machine's GPU: TFLOP/s per path and length."""

    gpu: str
    dtype: str
    width: int
    causal: bool
    tflops: dict[str, dict[int, float]]  # path -> {L: TFLOP/s}


def _cuda_present() -> bool:
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def live_comparison(
    lengths: tuple[int, ...] = (1024, 4096),
    width: int = 64,
    dtype: str = "float16",
    causal: bool = False,
) -> LiveComparison | None:
    """Our kernel (through `flash_attention`) against SDPA's default choice, timed live.

    None where no CUDA device (or no triton) is present, and then no torch
    work is done. Shapes are FlashAttention-2's (B·L = 16384, H·E = 2048);
    the timer is ``triton.testing.do_bench`` (median).
    """
    if not _cuda_present():
        return None
    import torch
    import torch.nn.functional as F
    import triton.testing

    from ..bench_gpu import GpuCase, fa2_shape
    from ..flash import flash_attention

    results: dict[str, dict[int, float]] = {"flash_attention": {}, "torch SDPA": {}}
    for length in lengths:
        batch, heads = fa2_shape(length, width)
        g = torch.Generator(device="cuda").manual_seed(0)
        shape = (batch, heads, length, width)  # (B, H, L, E)
        q, k, v = (
            torch.randn(shape, generator=g, device="cuda", dtype=getattr(torch, dtype))
            for _ in range(3)
        )
        flops = GpuCase("", "forward", dtype, length, width, causal, batch, heads).flops
        for name, fn in (
            ("flash_attention", flash_attention),
            ("torch SDPA", F.scaled_dot_product_attention),
        ):
            ms = triton.testing.do_bench(
                functools.partial(fn, q, k, v, is_causal=causal), return_mode="median"
            )
            results[name][length] = flops / (ms * 1e-3) / 1e12
    return LiveComparison(torch.cuda.get_device_name(), dtype, width, causal, results)


def describe_live(result: LiveComparison | None) -> str:
    """A table of a live comparison, or `NO_LIVE_GPU` (the same on every CPU machine)."""
    if result is None:
        return NO_LIVE_GPU
    lengths = sorted(next(iter(result.tflops.values())))
    lines = [
        f"live on {result.gpu}, E = {result.width}, {result.dtype}, "
        f"{'causal' if result.causal else 'not causal'}, forward TFLOP/s:",
        f"{'L':>7} " + " ".join(f"{p:>16}" for p in result.tflops) + "   ours / SDPA",
    ]
    for length in lengths:
        values = [result.tflops[p][length] for p in result.tflops]
        lines.append(
            f"{length:>7} "
            + " ".join(f"{x:16.1f}" for x in values)
            + f"   {values[0] / values[1]:.2f}x"
        )
    return "\n".join(lines)
