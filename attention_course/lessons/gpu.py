"""The GPU in the course: what the committed GPU results say, and a guarded live run.

`gpu_caption` puts the first committed GPU run (read by
`attention_course.bench.results.load_gpu_runs` from what ``make gpu-check``, or
``python -m attention_course.bench`` on a CUDA machine, wrote under
``attention_course/bench/measured/gpu-<device>/``) into one sentence, or says plainly
that none is committed yet (`NO_GPU_RESULTS`; the figure beside it is
`attention_course.lessons.figures.plot_cpu_and_gpu`). `live_comparison` times
our kernel against PyTorch's SDPA where a CUDA device is present and
returns None elsewhere; `describe_live` turns either into text, the same
text on every CPU machine, so a notebook that prints it checks the same
under nbval anywhere.

Importing this module imports neither torch nor triton.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass

from ..bench.results import GpuRun

__all__ = [
    "NO_GPU_RESULTS",
    "NO_LIVE_GPU",
    "LiveComparison",
    "describe_live",
    "gpu_caption",
    "live_comparison",
]

NO_GPU_RESULTS = (
    "No GPU results are committed yet. On a machine with an NVIDIA GPU, `make gpu-check` "
    "measures them, to be committed beside the CPU results."
)
NO_LIVE_GPU = "No CUDA device here, so there is no live GPU comparison on this machine."


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

    from attention_lib.flash import flash_attention

    from ..bench.gpu import GpuCase, fa2_shape

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
