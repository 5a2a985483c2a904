"""The GPU benchmark: our Triton kernels against PyTorch's SDPA backends, on one CUDA device.

    python -m attention_course.bench                   # on a machine with CUDA: this sweep
    python -m attention_course.bench --quick           # L 1024 and 4096 only
    python -m attention_course.bench --tune            # every tile candidate, each kernel alone

(the command line is `attention_course.bench.cli`; ``make gpu-check`` runs this
sweep after the kernels' correctness checks, scripts/gpu_check.py).

Shapes follow FlashAttention-2's benchmark: B·L = 16384 tokens and H·E = 2048
(so B = 16384 / L sequences of H = 2048 / E heads), q, k and v (B, H, L, E)
in float16 or bfloat16, standard-normal. Paths, each timed by
``triton.testing.do_bench`` (CUDA events, the L2 cache flushed before every
call, the median of the repeats):

    triton kernel     the kernels alone (`flash_forward`, then `flash_backward`)
    flash_attention   the same kernels through the public function (checks, views, autograd)
    sdpa flash        torch's scaled_dot_product_attention, one backend forced by name
    sdpa cudnn        (``torch.nn.attention.sdpa_kernel``); a backend this machine
    sdpa efficient    lacks is skipped, and the row says why

in two modes: "forward", and "forward+backward" (one forward and one
backward call, the gradient of the output standard-normal). FLOPs follow
FlashAttention-2's count: a forward pass is 4·B·H·L·S·E (two matrix products
of 2·L·S·E each), halved when causal; forward plus backward is 3.5 times
that (the backward pass is counted as 2.5 forward passes, its recomputation
of the scores not counted). TFLOP/s = FLOPs / median time.

Every row also records the tiles our kernels ran
(`attention_lib.flash.triton.configs`). The memory row checks that the
forward pass holds no score matrix: the bytes allocated beyond the inputs by
one forward call through `flash_attention` at B = 1, H = 16, L = 65536,
E = 128, bfloat16, causal, against the output plus the row statistics the
backward pass needs (two float32 per row: the row's maximum and log2 of its
total, `attention_lib.flash.triton.forward`), with 5% to spare. The
targets (`TARGETS`) are the throughput ratios the kernels were built to
reach, each checked on the rows measured side by side in the run. Results go to
``attention_course/bench/measured/gpu-<device>/`` (package data) as gpu_results.json,
gpu_results.csv and gpu_tflops.png.

Importing this module imports nothing heavy; torch and triton load in `run`.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .machine import CudaPeak, MiB, command_line, gpu_info

__all__ = [
    "DTYPES",
    "HIDDEN",
    "LENGTHS",
    "MEMORY_SHAPE",
    "MODES",
    "OURS",
    "PATHS",
    "QUICK_LENGTHS",
    "SDPA",
    "TARGETS",
    "TOKENS",
    "WIDTHS",
    "GpuCase",
    "GpuResult",
    "Target",
    "cases",
    "evaluate_targets",
    "fa2_shape",
    "plot",
    "ratios",
    "run",
    "summary",
    "targets_table",
    "tune",
    "tune_winners",
    "tuning_table",
    "write",
]

TOKENS = 16384  # B·L, FlashAttention-2's benchmark
HIDDEN = 2048  # H·E
LENGTHS = (1024, 2048, 4096, 8192, 16384)
QUICK_LENGTHS = (1024, 4096)
WIDTHS = (64, 128)
DTYPES = ("float16", "bfloat16")
MODES = ("forward", "forward+backward")
OURS = ("triton kernel", "flash_attention")
SDPA = {"sdpa flash": "FLASH_ATTENTION", "sdpa cudnn": "CUDNN_ATTENTION",
        "sdpa efficient": "EFFICIENT_ATTENTION"}  # fmt: skip
PATHS = (*OURS, *SDPA)
MEMORY_SHAPE = dict(batch=1, heads=16, length=65536, width=128, dtype="bfloat16", causal=True)


def fa2_shape(
    length: int, width: int, tokens: int = TOKENS, hidden: int = HIDDEN
) -> tuple[int, int]:
    """(batch, heads) with batch·length = tokens and heads·width = hidden.

    Raises ValueError when length does not divide tokens or width hidden.
    """
    if length < 1 or tokens % length or width < 1 or hidden % width:
        raise ValueError(
            f"FlashAttention-2's shapes need L to divide {tokens} and E to divide {hidden}, "
            f"got L = {length}, E = {width}"
        )
    return tokens // length, hidden // width


@dataclass(frozen=True)
class GpuCase:
    """One measurement: a path in one mode at one shape."""

    path: str
    mode: str  # "forward" or "forward+backward"
    dtype: str
    length: int  # L = S
    width: int  # E = Ev
    causal: bool
    batch: int
    heads: int

    @property
    def flops(self) -> float:
        """FlashAttention-2's count: 4·B·H·L·S·E forward, halved when causal; x3.5 with backward."""
        forward = 4.0 * self.batch * self.heads * self.length * self.length * self.width
        forward = forward / 2 if self.causal else forward
        return forward if self.mode == "forward" else 3.5 * forward


def cases(
    lengths: Sequence[int],
    widths: Sequence[int],
    dtypes: Sequence[str],
    modes: Sequence[str] = MODES,
    paths: Sequence[str] = PATHS,
) -> Iterator[GpuCase]:
    for dtype in dtypes:
        for width in widths:
            for causal in (False, True):
                for length in lengths:
                    batch, heads = fa2_shape(length, width)
                    for mode in modes:
                        for path in paths:
                            yield GpuCase(path, mode, dtype, length, width, causal, batch, heads)


@dataclass
class GpuResult:
    """What one `GpuCase` measured; ``status`` is "ok", "skipped" or "failed"."""

    case: GpuCase
    status: str
    median_ms: float | None = None
    peak_mib: float | None = None  # allocated beyond the inputs, forward mode only
    note: str = ""
    tiles: dict[str, Any] = field(default_factory=dict)

    @property
    def tflops(self) -> float | None:
        return self.case.flops / (self.median_ms * 1e-3) / 1e12 if self.median_ms else None

    def row(self) -> dict[str, Any]:
        return {
            **asdict(self.case),
            "status": self.status,
            "median_ms": self.median_ms,
            "tflops": self.tflops,
            "peak_mib_beyond_inputs": self.peak_mib,
            "tiles": json.dumps(self.tiles, sort_keys=True) if self.tiles else "",
            "note": self.note,
        }


# --- targets: the ratios the kernels aim at, each read from one run's side-by-side rows --


@dataclass(frozen=True)
class Target:
    """ours / theirs >= ratio, for the rows of one mode from ``min_length`` on."""

    name: str
    ours: str
    theirs: str
    mode: str
    ratio: float
    min_length: int


TARGETS = (
    Target("forward, kernel alone vs SDPA flash", "triton kernel", "sdpa flash", "forward",
           1.25, 4096),
    Target("forward, kernel alone vs SDPA cuDNN", "triton kernel", "sdpa cudnn", "forward",
           0.9, 4096),
    Target("forward, through flash_attention vs kernel alone", "flash_attention", "triton kernel",
           "forward", 0.9, 2048),
    Target("forward+backward, through flash_attention vs kernel alone", "flash_attention",
           "triton kernel", "forward+backward", 0.9, 2048),
    Target("forward+backward, kernel alone vs SDPA flash", "triton kernel", "sdpa flash",
           "forward+backward", 1.0, 4096),
    Target("forward+backward, through flash_attention vs SDPA flash", "flash_attention",
           "sdpa flash", "forward+backward", 1.0, 4096),
)  # fmt: skip


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["mode"], r["dtype"], r["width"], bool(r["causal"]), r["length"])


def ratios(rows: Sequence[dict[str, Any]], ours: str, theirs: str, mode: str) -> dict[tuple, float]:
    """{(mode, dtype, E, causal, L): ours' TFLOP/s / theirs'}, where both ran."""
    speed = {(r["path"], _key(r)): r["tflops"] for r in rows if r["status"] == "ok" and r["tflops"]}
    out = {}
    for (path, key), value in speed.items():
        if path == ours and key[0] == mode and (theirs, key) in speed:
            out[key] = value / speed[(theirs, key)]
    return out


def evaluate_targets(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each target: how many of its measured cases meet it, and the worst ratio and where."""
    report = []
    for t in TARGETS:
        found = {k: v for k, v in ratios(rows, t.ours, t.theirs, t.mode).items()
                 if k[4] >= t.min_length}  # fmt: skip
        worst = min(found.items(), key=lambda kv: kv[1]) if found else None
        report.append(
            {
                **asdict(t),
                "cases": len(found),
                "met": sum(v >= t.ratio for v in found.values()),
                "worst_ratio": worst[1] if worst else None,
                "worst_case": "dtype {1}, E {2}, {3}, L {4}".format(
                    *worst[0][:3], "causal" if worst[0][3] else "not causal", worst[0][4]
                )
                if worst
                else None,
            }
        )
    return report


# --- measuring (CUDA only) ---------------------------------------------------------------


class _Runner:
    """Makes inputs and times one case at a time on one CUDA device."""

    def __init__(self, device: str, warmup_ms: int, rep_ms: int) -> None:
        import torch
        import torch.nn.functional as F
        import triton.testing
        from torch.nn.attention import SDPBackend, sdpa_kernel

        from attention_lib.flash import flash_attention
        from attention_lib.flash.triton import launch as tk

        self.torch, self.F, self.tk = torch, F, tk
        self.flash_attention = flash_attention
        self.do_bench = triton.testing.do_bench
        self.sdpa_kernel, self.backends = sdpa_kernel, SDPBackend
        self.device = torch.device(device)
        self.warmup_ms, self.rep_ms = warmup_ms, rep_ms

    def inputs(self, case: GpuCase, grad: bool) -> tuple[Any, ...]:
        torch = self.torch
        g = torch.Generator(device=self.device).manual_seed(0)
        shape = (case.batch, case.heads, case.length, case.width)  # (B, H, L, E)
        dtype = getattr(torch, case.dtype)
        q, k, v, do = (
            torch.randn(shape, generator=g, device=self.device, dtype=dtype) for _ in range(4)
        )
        for x in (q, k, v):
            x.requires_grad_(grad)
        return q, k, v, do

    def function(self, case: GpuCase, q: Any, k: Any, v: Any, do: Any) -> Callable[[], Any]:
        """The call to time: forward, or forward then backward."""
        scale = case.width**-0.5
        tk, causal = self.tk, case.causal
        if case.path == "triton kernel":
            q, k, v = q.detach(), k.detach(), v.detach()
            if case.mode == "forward":
                return lambda: tk.flash_forward(q, k, v, causal, scale)

            def kernels() -> None:  # the forward for a backward pass: P V in two parts
                out, lse = tk.flash_forward(q, k, v, causal, scale, for_backward=True)
                tk.flash_backward(q, k, v, out, lse, do, causal, scale)

            return kernels
        if case.path == "flash_attention":
            run = lambda: self.flash_attention(q, k, v, is_causal=causal)  # noqa: E731
        else:
            run = lambda: self.F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
        if case.mode == "forward":
            return run
        return lambda: run().backward(do)

    def tiles(self, case: GpuCase) -> dict[str, Any]:
        if case.path not in OURS:
            return {}
        dtype = getattr(self.torch, case.dtype)
        kernels = ("forward",) if case.mode == "forward" else ("forward", "dkdv", "dq")
        return {
            kernel: self.tk.tile_for(kernel, dtype, case.width, case.width, case.causal).as_dict()
            for kernel in kernels
        }

    def measure(self, case: GpuCase) -> GpuResult:
        torch = self.torch
        grad = case.mode == "forward+backward"
        q, k, v, do = self.inputs(case, grad)
        fn = self.function(case, q, k, v, do)
        tiles = self.tiles(case)
        context = (
            self.sdpa_kernel(getattr(self.backends, SDPA[case.path]))
            if case.path in SDPA
            else contextlib.nullcontext()
        )
        try:
            with context, torch.set_grad_enabled(grad):
                try:
                    memory = CudaPeak(torch)
                    memory.reset()
                    fn()  # the memory run, also the first warm-up (and the JIT compile)
                    peak = memory.peak_beyond_base_mib()
                except RuntimeError as err:
                    if case.path in SDPA:  # this machine or shape lacks the backend
                        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                        return GpuResult(case, "skipped", note=f"backend unavailable: {first}")
                    raise
                for x in (q, k, v):
                    x.grad = None
                ms = self.do_bench(
                    fn,
                    warmup=self.warmup_ms,
                    rep=self.rep_ms,
                    grad_to_none=[q, k, v] if grad else None,
                    return_mode="median",
                )
        except Exception as err:  # recorded, not fatal: one bad path must not lose the run
            return GpuResult(case, "failed", note=f"{type(err).__name__}: {err}"[:500], tiles=tiles)
        peak_mib = peak if case.mode == "forward" else None
        return GpuResult(case, "ok", float(ms), peak_mib, tiles=tiles)

    def memory(self) -> dict[str, Any]:
        """`MEMORY_SHAPE`'s figure: bytes beyond the inputs of one forward call through
        flash_attention, against the output and row statistics (+5%)."""
        torch = self.torch
        s = MEMORY_SHAPE
        shape = (s["batch"], s["heads"], s["length"], s["width"])  # (B, H, L, E)
        dtype = getattr(torch, s["dtype"])
        q, k, v = (torch.randn(shape, device=self.device, dtype=dtype) for _ in range(3))
        memory = CudaPeak(torch)
        memory.reset()
        with torch.no_grad():
            out = self.flash_attention(q, k, v, is_causal=s["causal"])
        beyond = memory.peak_beyond_base_bytes()
        output = out.numel() * out.element_size()
        lse = s["batch"] * s["heads"] * s["length"] * 8  # two float32 per row
        return {
            **s,
            "beyond_inputs_mib": beyond / MiB,
            "output_mib": output / MiB,
            "lse_mib": lse / MiB,
            "limit_mib": 1.05 * (output + lse) / MiB,
            "met": beyond <= 1.05 * (output + lse),
        }


def _tune_shape(runner: _Runner, case: GpuCase) -> list[dict[str, Any]]:
    """Every tile candidate of each kernel, timed alone at one shape."""
    from attention_lib.flash.triton.configs import candidates, padded

    torch, tk = runner.torch, runner.tk
    q, k, v, do = (x.detach() for x in runner.inputs(case, False))  # (B, H, L, E)
    causal, scale = case.causal, case.width**-0.5
    out, lse = tk.flash_forward(q, k, v, causal, scale)
    delta = torch.empty_like(lse[0])  # (B, H, L); lse is the (2, B, H, L) row statistics
    tk.delta_launch(out, do, delta)()
    dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
    launches = {
        "forward": lambda t: tk.forward_launch(q, k, v, out, lse, causal, scale, t),
        "dkdv": lambda t: tk.dkdv_launch(q, k, v, do, lse, delta, dk, dv, causal, scale, t),
        "dq": lambda t: tk.dq_launch(q, k, v, do, lse, delta, dq, causal, scale, t),
    }
    # each kernel's matrix products: 2, 4 and 3 of 2·L·S·E FLOPs, halved when causal (the
    # second 16-bit parts of P and dS in dkdv and dq are extra work, not counted, as the
    # scores' recomputation is not)
    products = {"forward": 2, "dkdv": 4, "dq": 3}
    per_product = 2.0 * case.batch * case.heads * case.length**2 * case.width
    per_product /= 2 if causal else 1
    rows = []
    for kernel, launch in launches.items():
        for tile in candidates(kernel, padded(case.width), case.dtype, causal):
            row = {"kernel": kernel, "dtype": case.dtype, "width": case.width,
                   "causal": causal, "length": case.length, **tile.as_dict()}  # fmt: skip
            try:
                ms = float(runner.do_bench(launch(tile), warmup=runner.warmup_ms,
                                           rep=runner.rep_ms, return_mode="median"))  # fmt: skip
                tflops = products[kernel] * per_product / (ms * 1e-3) / 1e12
                row.update(status="ok", median_ms=ms, tflops=tflops, note="")
            except Exception as err:  # a tile that does not fit this GPU
                note = f"{type(err).__name__}: {err}"[:300]
                row.update(status="failed", median_ms=None, tflops=None, note=note)
            rows.append(row)
    return rows


def tune(
    runner: _Runner, lengths: Sequence[int], widths: Sequence[int], dtypes: Sequence[str]
) -> list[dict[str, Any]]:
    """Time every tile candidate of every kernel alone; one row per (kernel, shape, tile)."""
    todo = cases(lengths, widths, dtypes, modes=("forward",), paths=("triton kernel",))
    return [row for case in todo for row in _tune_shape(runner, case)]


def tune_winners(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fastest tile per (kernel, dtype, E, causal, L), and whether the table leads with it."""
    from attention_lib.flash.triton.configs import Tile, choose, padded

    best: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        if r["status"] != "ok":
            continue
        key = (r["kernel"], r["dtype"], r["width"], r["causal"], r["length"])
        if key not in best or r["median_ms"] < best[key]["median_ms"]:
            best[key] = r
    winners = []
    for (kernel, dtype, width, causal, _), r in best.items():
        tile = Tile(r["block_m"], r["block_n"], r["num_warps"], r["num_stages"])
        chosen = choose(kernel, padded(width), dtype, causal)
        winners.append({**r, "table_leads_with_it": tile == chosen})
    return winners


# --- output ----------------------------------------------------------------------------


def write(payload: dict[str, Any], out_root: Path) -> Path:
    """gpu_results.json, gpu_results.csv and gpu_tflops.png under out_root/<machine>/."""
    out = Path(out_root) / payload["info"]["machine"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_results.json").write_text(json.dumps(payload, indent=2) + "\n")
    rows = payload["results"]
    if rows:
        with (out / "gpu_results.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        plot(rows, out / "gpu_tflops.png", payload["info"].get("gpu", payload["info"]["machine"]))
    if payload.get("tuning"):
        (out / "gpu_tuning.json").write_text(json.dumps(payload["tuning"], indent=2) + "\n")
    return out


def plot(rows: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """TFLOP/s against L: a row of panels per (mode, dtype), a column per (E, causal)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted(
        {(r["mode"], r["dtype"]) for r in rows}, key=lambda g: (MODES.index(g[0]), g[1])
    )
    columns = sorted({(r["width"], bool(r["causal"])) for r in rows})
    if not groups or not columns:
        return
    fig, axes = plt.subplots(
        len(groups), len(columns), figsize=(3.2 * len(columns), 2.8 * len(groups) + 0.6),
        squeeze=False, sharex=True, layout="constrained",
    )  # fmt: skip
    for i, (mode, dtype) in enumerate(groups):
        for j, (width, causal) in enumerate(columns):
            ax = axes[i][j]
            for p in PATHS:
                pts = sorted(
                    (r["length"], r["tflops"])
                    for r in rows
                    if r["path"] == p
                    and (r["mode"], r["dtype"], r["width"]) == (mode, dtype, width)
                    and bool(r["causal"]) == causal
                    and r["status"] == "ok"
                    and r["tflops"]
                )
                if pts:
                    style = "o-" if p in OURS else "s--"
                    ax.plot([x for x, _ in pts], [y for _, y in pts], style, label=p, ms=3)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{mode}, {dtype}\nE = {width}, {'causal' if causal else 'not causal'}",
                         fontsize=8)  # fmt: skip
            ax.grid(True, alpha=0.3)
            if j == 0:
                ax.set_ylabel("TFLOP/s (FA2 count)")
            if i == len(groups) - 1:
                ax.set_xlabel("sequence length L (B·L = 16384)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=len(PATHS), fontsize=8)
    fig.suptitle(f"attention throughput on {title}: higher is better", fontsize=10)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def summary(payload: dict[str, Any]) -> str:
    """A plain-text table: TFLOP/s per path side by side, our ratios, then the targets."""
    rows = payload["results"]
    lines = []
    names = ("kernel", "through", "flash", "cudnn", "effic.")
    head = f"{'mode':<16} {'dtype':<8} {'E':>3} {'causal':<6} {'L':>6} " + " ".join(
        f"{n:>7}" for n in names
    )
    lines.append("TFLOP/s (FlashAttention-2's FLOP count), median of do_bench")
    lines.append(head + "  kernel/flash  kernel/cudnn  through/kernel")
    speed = {(r["path"], _key(r)): r for r in rows}
    for key in sorted({_key(r) for r in rows}, key=lambda k: (MODES.index(k[0]), *k[1:])):
        cells = []
        for p in PATHS:
            r = speed.get((p, key))
            ok = r is not None and r["status"] == "ok" and r["tflops"]
            cells.append(
                f"{r['tflops']:7.1f}" if ok else f"{'-' if r is None else r['status'][:7]:>7}"
            )

        def ratio(a: str, b: str, key: tuple = key) -> str:
            ra, rb = speed.get((a, key)), speed.get((b, key))
            if ra and rb and ra["status"] == rb["status"] == "ok" and ra["tflops"] and rb["tflops"]:
                return f"{ra['tflops'] / rb['tflops']:.2f}x"
            return "-"

        mode, dtype, width, causal, length = key
        lines.append(
            f"{mode:<16} {dtype:<8} {width:>3} {causal!s:<6} {length:>6} " + " ".join(cells)
            + f"  {ratio('triton kernel', 'sdpa flash'):>12}"
            f"  {ratio('triton kernel', 'sdpa cudnn'):>12}"
            f"  {ratio('flash_attention', 'triton kernel'):>14}"
        )  # fmt: skip
    skipped = sorted({(r["path"], r["note"]) for r in rows if r["status"] == "skipped"})
    for path, note in skipped:
        lines.append(f"skipped {path}: {note}")
    failed = [r for r in rows if r["status"] == "failed"]
    for r in failed[:10]:
        lines.append(f"failed {r['path']} {r['mode']} {r['dtype']} E{r['width']} L{r['length']}: "
                     f"{r['note']}")  # fmt: skip
    lines.append(targets_table(payload))
    return "\n".join(lines)


def targets_table(payload: dict[str, Any]) -> str:
    """The targets, one line each: met in how many cases, the worst ratio and where; memory."""
    lines = ["targets (measured side by side in this run):"]
    for t in payload.get("targets", []):
        if not t["cases"]:
            lines.append(f"  {t['name']} >= {t['ratio']}x (L >= {t['min_length']}): not measured")
            continue
        lines.append(
            f"  {t['name']} >= {t['ratio']}x (L >= {t['min_length']}): met in {t['met']} of "
            f"{t['cases']}, worst {t['worst_ratio']:.2f}x at {t['worst_case']}"
        )
    m = payload.get("memory")
    if m:
        lines.append(
            f"  memory, B {m['batch']} H {m['heads']} L {m['length']} E {m['width']} "
            f"{m['dtype']}: {m['beyond_inputs_mib']:.0f} MiB beyond the inputs, limit "
            f"{m['limit_mib']:.0f} MiB (output {m['output_mib']:.0f} + lse {m['lse_mib']:.0f}, "
            f"+5%): {'met' if m['met'] else 'NOT met'}"
        )
    return "\n".join(lines)


def tuning_table(winners: Sequence[dict[str, Any]]) -> str:
    lines = ["fastest tile per kernel and shape (block_m, block_n, warps, stages):"]
    for w in sorted(winners, key=lambda w: (w["kernel"], w["dtype"], w["width"], w["causal"])):
        lines.append(
            f"  {w['kernel']:<8} {w['dtype']:<8} E {w['width']:>3} "
            f"{'causal' if w['causal'] else 'not causal':<10} L {w['length']:>6}: "
            f"({w['block_m']}, {w['block_n']}, {w['num_warps']}, {w['num_stages']}) "
            f"{w['tflops']:.0f} TFLOP/s"
            + ("" if w["table_leads_with_it"] else "  <- not the table's first: update it")
        )
    return "\n".join(lines)


# --- the run ---------------------------------------------------------------------------


def run(
    args: argparse.Namespace, command: str | None = None, echo: Callable[[str], None] = print
) -> dict[str, Any]:
    """Measure what ``args`` (`attention_course.bench.cli.parse_gpu`) asks for on the CUDA device;
    the payload `write` stores.

    ``command`` is recorded as the command that produced it (default: this
    process's command line). Raises RuntimeError where no CUDA device is visible.
    """
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(
            "the GPU benchmark needs a CUDA device and none is visible; "
            "on the CPU, run python -m attention_course.bench --device cpu"
        )
    from tqdm import tqdm

    runner = _Runner(args.device, args.warmup_ms, args.rep_ms)
    info = gpu_info(runner.device)
    payload: dict[str, Any] = {
        "command": command or command_line(),
        "info": info,
        "flops": "FlashAttention-2's count: forward 4·B·H·L·S·E, halved when causal; "
        "forward+backward 3.5 times the forward",
        "shapes": f"B·L = {TOKENS} tokens, H·E = {HIDDEN}; q, k, v (B, H, L, E)",
        "timer": f"triton.testing.do_bench, median, warmup {args.warmup_ms} ms, "
        f"rep {args.rep_ms} ms, L2 flushed before each call",
        "results": [],
    }
    if args.tune:
        rows = tune(runner, args.lengths, args.widths, args.dtypes)
        payload["tuning"] = {"rows": rows, "winners": tune_winners(rows)}
        echo(tuning_table(payload["tuning"]["winners"]))
        return payload
    todo = list(cases(args.lengths, args.widths, args.dtypes, args.modes, args.paths))
    results = [runner.measure(c) for c in tqdm(todo, desc="GPU benchmark", unit="case")]
    payload["results"] = [r.row() for r in results]
    payload["targets"] = evaluate_targets(payload["results"])
    if not args.no_memory:
        payload["memory"] = runner.memory()
    return payload
