"""The tiled path against PyTorch's fused kernel on the CPU: throughput ratios, idle and loaded.

Part of ``python -m attention_course.bench`` (``--ratios-only`` runs just this;
`attention_course.bench.cli`).
For each length, head width, causal setting and pass (forward, or forward +
backward), our torch tiled path (`attention_lib.flash_attention`,
``backend="tiled"``, on the tile kernel it picks: the fused tiles,
`attention_lib.flash.fused_tiles`), the same path on the torch operations'
tile kernel (``tile_kernel="ops"``, `attention_lib.flash.torch_tiled`) and
``torch.nn.functional.scaled_dot_product_attention`` are timed alternately,
``rounds`` times each, each call after a short rest (`QUIET_S`: the threads
of the call before have gone to sleep) and after each of the three equally
often (`balanced_orders`), B = 1, H = 8, float32, and each
ratio is ours / SDPA's throughput from the medians. The whole table is
measured twice in one run: on the machine as it is ("idle"), then with one
other busy process that this module starts and stops itself (a Python loop
spinning on one core, "loaded"). Beside them:

- the fraction of the L x S scores each case computes (`score_fraction`:
  causal tiles above the diagonal are skipped),
- the peak memory of our path beyond its inputs and outputs (gradients
  included) at a long length, forward and forward + backward,
- the numpy tiled loop against the numpy reference path, timed alternately,
- the floor under the ratios: one tile's torch operations timed alone, one
  thread, against SDPA per score, and our forward pass with its two workers
  as threads of one process against the same heads split between two
  processes (`attention_course.bench.floor`).

Ratios measured side by side are what to compare on a shared machine; the
machine, its torch threads and its load average as the run starts are
recorded with them (`attention_course.bench.machine.machine_info`).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from attention_lib.core import scaled_dot_product_attention
from attention_lib.flash import flash_attention
from attention_lib.flash.tiles import score_fraction

from .floor import (
    floor_cases,
    format_floor,
    format_threads_and_processes,
    measure_floor,
    measure_threads_and_processes,
)
from .machine import HostPeak, MachineLoad, MiB, machine_info

__all__ = [
    "BATCH_HEADS",
    "QUIET_S",
    "RatioCase",
    "balanced_orders",
    "busy_process",
    "default_cases",
    "format_ratios",
    "measure_memory",
    "measure_numpy",
    "measure_ratios",
    "memory_case",
    "run_ratios",
    "tiles_of",
]

BATCH_HEADS = 8


@dataclass(frozen=True)
class RatioCase:
    """One comparison: B = 1, H = 8, L = S = ``length``, E = Ev = ``width``, float32."""

    length: int
    width: int
    causal: bool
    backward: bool  # forward + backward when True

    @property
    def label(self) -> str:
        kind = "forward + backward" if self.backward else "forward"
        return f"{kind}{', causal' if self.causal else ''}"

    @property
    def flops(self) -> float:
        """FlashAttention's count: 4·B·H·L·S·E forward, 2.5 times that backward, halved causal."""
        n = 4.0 * BATCH_HEADS * self.length * self.length * self.width
        n *= 3.5 if self.backward else 1.0
        return n / 2 if self.causal else n


def default_cases(lengths: Sequence[int], widths: Sequence[int]) -> list[RatioCase]:
    return [
        RatioCase(length, width, causal, backward)
        for width in widths
        for length in lengths
        for backward in (False, True)
        for causal in (False, True)
    ]


def _inputs(case: RatioCase, seed: int = 0) -> tuple[Any, ...]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    shape = (1, BATCH_HEADS, case.length, case.width)
    q, k, v, grad = (torch.randn(shape, generator=generator) for _ in range(4))
    if case.backward:
        q, k, v = (x.requires_grad_() for x in (q, k, v))
    return q, k, v, grad


def _callables(case: RatioCase) -> dict[str, Callable[[], Any]]:
    """``{"ours": ..., "ops": ..., "sdpa": ...}``, each one forward (and backward) pass on the
    same inputs: our path as it runs by default, on the torch operations' tile kernel, SDPA."""
    import torch
    import torch.nn.functional as F

    q, k, v, grad = _inputs(case)

    def run(attention: Callable[..., Any]) -> Callable[[], Any]:
        def call() -> Any:
            out = attention(q, k, v, is_causal=case.causal)
            if case.backward:
                return torch.autograd.grad(out, (q, k, v), grad)  # no accumulation into .grad
            return out

        return call

    def ours(*args: Any, **kwargs: Any) -> Any:
        return flash_attention(*args, backend="tiled", **kwargs)

    def ops(*args: Any, **kwargs: Any) -> Any:
        return flash_attention(*args, backend="tiled", tile_kernel="ops", **kwargs)

    return {"ours": run(ours), "ops": run(ops), "sdpa": run(F.scaled_dot_product_attention)}


def tiles_of(case: RatioCase) -> dict[str, Any]:
    """The tile kernel our path picks for ``case``, its default tiles and the fraction of the
    L x S scores those tiles cover (causal tiles above the diagonal are skipped)."""
    from attention_lib.flash import fused_tiles, torch_tiled
    from attention_lib.inputs import check, materialise

    q, k, v, _ = _inputs(RatioCase(1, case.width, case.causal, False))
    kernel = fused_tiles.kernel_name(materialise(check(q, k, v, None, case.causal, None, False)))
    module = fused_tiles if kernel == "fused" else torch_tiled
    block_q, block_k = module.default_blocks(case.causal)
    below = module.below_diagonal_width(block_k) if case.causal else None
    fraction = score_fraction(case.length, case.length, block_q, block_k, case.causal, below)
    return {
        "tile_kernel": kernel,
        "block_q": block_q,
        "block_k": block_k,
        "block_k_below": below,
        "score_fraction": fraction,
    }


#: seconds of rest before each timed call. After a parallel region torch's OpenMP threads
#: (and numpy's BLAS threads) spin for a while before they sleep: libgomp's default
#: GOMP_SPINCOUNT, 300 000 pauses, some milliseconds. A call timed while they spin shares the
#: cores with them, and is charged the previous call's spin. Resting first, every call starts as a
#: learner's single call would, on a quiet machine.
QUIET_S = 0.05


def balanced_orders(names: Sequence[str]) -> list[tuple[str, ...]]:
    """A cycle of rounds, each an order of ``names``, in which every name follows every name,
    itself included, equally often (the last call of a round before the first of the next,
    and the cycle's last round before its first).

    A call is timed after a rest, but not from a blank state: the call before it leaves its
    own memory in the caches and the allocator. Flipped every round, two functions each
    follow both equally; three do not: the middle one never follows itself, the outer two
    do half the time, and what ran just before a call changes its time by several percent.
    In these orders (`benchmarks/compare_commits.py` times so) each follows each equally
    often. Two names give the flip; three the six orders chained end to start. More than
    three are refused (none is timed so).
    """
    names = tuple(names)
    if len(names) <= 2:
        return [names, names[::-1]]
    if len(names) > 3:
        raise ValueError(f"balanced_orders takes at most three names, got {len(names)}")
    first, *rest = itertools.permutations(names)
    for chain in itertools.permutations(rest):
        calls = [name for order in (first, *chain) for name in order]
        follows = Counter(zip(calls, calls[1:] + calls[:1], strict=True))
        if len(follows) == len(names) ** 2 and len(set(follows.values())) == 1:
            return [first, *chain]
    raise AssertionError("no balanced chain of orders")  # pragma: no cover: one exists


def _alternate(
    fns: dict[str, Callable[[], Any]], rounds: int, quiet_s: float = QUIET_S
) -> dict[str, list[float]]:
    """Seconds per call of each function, timed in turn (round by round in `balanced_orders`:
    a number of rounds that the cycle divides balances it exactly), each after ``quiet_s`` of
    rest (`QUIET_S`)."""
    orders = balanced_orders(list(fns))
    for fn in fns.values():  # warm-up: thread pools, allocator, caches
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for index in range(rounds):
        for name in orders[index % len(orders)]:
            time.sleep(quiet_s)
            start = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - start)
    return times


def measure_ratios(cases: Sequence[RatioCase], rounds: int, load: str) -> list[dict[str, Any]]:
    """One row per case: median seconds, GFLOP/s and the throughput ratios ours / SDPA (our
    path as it runs, and on the torch operations' tile kernel), with the tiles it ran."""
    rows = []
    for case in cases:
        times = _alternate(_callables(case), rounds)
        ours, ops, sdpa = (statistics.median(times[name]) for name in ("ours", "ops", "sdpa"))
        rows.append(
            {
                **asdict(case),
                "load": load,
                "rounds": rounds,
                "ours_s": ours,
                "ops_s": ops,
                "sdpa_s": sdpa,
                "ours_gflops": case.flops / ours / 1e9,
                "ops_gflops": case.flops / ops / 1e9,
                "sdpa_gflops": case.flops / sdpa / 1e9,
                "ratio": sdpa / ours,
                "ops_ratio": sdpa / ops,
                **tiles_of(case),
            }
        )
        gc.collect()
    return rows


@contextlib.contextmanager
def busy_process() -> Iterator[subprocess.Popen[bytes]]:
    """One other busy process for the length of the block: a Python loop spinning on one core."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # let it get going
        yield busy
    finally:
        busy.kill()
        busy.wait()


def measure_memory(length: int, widths: Sequence[int]) -> list[dict[str, Any]]:
    """Our path's peak resident memory beyond its inputs and outputs at ``length``.

    Forward: beyond query, key, value and the output. Forward + backward:
    beyond those, the output's gradient and the three input gradients. Each
    case runs in a fresh Python process (`memory_case`), so that no memory
    freed by an earlier measurement is reused unseen; the peak is the
    process high-water mark (`attention_course.bench.machine.HostPeak`), None
    where it cannot be read.
    """
    rows = []
    for width in widths:
        for backward in (False, True):
            command = [sys.executable, "-m", "attention_course.bench.ratios", "--memory-case"]
            command += [str(length), str(width), str(int(backward))]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            rows.append(json.loads(done.stdout.splitlines()[-1]))
    return rows


def memory_case(length: int, width: int, backward: bool) -> dict[str, Any]:
    """One case of `measure_memory`, in this process: run it once, return its row."""
    case = RatioCase(length, width, False, backward)
    warm = _callables(RatioCase(256, width, False, backward))["ours"]
    warm()  # the worker threads start here, not in the measured call
    call = _callables(case)["ours"]
    outputs = BATCH_HEADS * length * width * 4 * (4 if backward else 1)  # and three gradients
    del warm
    gc.collect()
    peak = HostPeak()
    peak.reset()
    start = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - start
    beyond = peak.peak_beyond_base_mib()
    del result
    return {
        **asdict(case),
        **{name: x for name, x in tiles_of(case).items() if name != "score_fraction"},
        "seconds": seconds,
        "peak_mib_beyond_inputs_and_outputs": None if beyond is None else beyond - outputs / MiB,
    }


def measure_numpy(lengths: Sequence[int], width: int, rounds: int) -> list[dict[str, Any]]:
    """The numpy tiled loop against the numpy reference path, timed alternately."""
    rows = []
    for length in lengths:
        rng = np.random.default_rng(0)
        q, k, v = (rng.standard_normal((1, BATCH_HEADS, length, width), np.float32) for _ in "qkv")
        for causal in (False, True):
            args = (q, k, v)
            fns = {
                "tiled": lambda a=args, c=causal: flash_attention(*a, is_causal=c),
                "reference": lambda a=args, c=causal: scaled_dot_product_attention(*a, is_causal=c),
            }
            times = _alternate(fns, rounds)
            tiled, reference = (statistics.median(times[n]) for n in ("tiled", "reference"))
            rows.append(
                {
                    "length": length,
                    "width": width,
                    "causal": causal,
                    "rounds": rounds,
                    "tiled_s": tiled,
                    "reference_s": reference,
                    "ratio": reference / tiled,
                }
            )
    return rows


def run_ratios(
    lengths: Sequence[int],
    widths: Sequence[int],
    rounds: int,
    memory_length: int,
    numpy_lengths: Sequence[int],
    loaded: bool = True,
    after_sweep: bool = False,
) -> dict[str, Any]:
    """The whole comparison: idle and loaded ratios, memory, numpy. A dict for ratios.json.

    Its ``info`` is `machine_info`, taken as the run starts (the load average
    the idle ratios were measured at); ``machine_load`` the `MachineLoad`
    records of the idle and the loaded measurements: how much CPU time
    processes other than this one (and its busy process) took meanwhile.
    ``after_sweep``: this process ran the sweep just before, so the load
    average as the idle ratios start counts that (as it counts the idle
    ratios as the loaded ones start) and warns of nothing.
    """
    cases = default_cases(lengths, widths)
    result: dict[str, Any] = {"info": machine_info("cpu", "float32")}
    # how busy the machine was meanwhile, apart from this run (its busy process included)
    load = MachineLoad(load_before_counts=not after_sweep).start()
    result["ratios"] = measure_ratios(cases, rounds, "idle")
    result["machine_load"] = {"idle": load.stop().record()}
    if loaded:
        load = MachineLoad(load_before_counts=False).start()
        with busy_process():
            result["ratios"] += measure_ratios(cases, rounds, "loaded")
        result["machine_load"]["loaded"] = load.stop().record()
    result["memory"] = measure_memory(memory_length, widths) if memory_length else []
    result["numpy"] = measure_numpy(numpy_lengths, min(widths), rounds)
    cases_floor = floor_cases(lengths, widths)
    result["floor"] = [measure_floor(n, e, rounds) for n, e in cases_floor]
    result["threads_and_processes"] = [
        measure_threads_and_processes(n, e, rounds) for n, e in cases_floor
    ]
    return result


def _tiles(row: dict[str, Any]) -> str:
    """A case's tile kernel and tiles: block_q x block_k, and causal, /the width of the blocks
    below the diagonal (`attention_lib.flash.tiles.key_blocks`)."""
    below = row.get("block_k_below")
    kernel = row.get("tile_kernel", "ops")  # files written before the fused tiles: ops
    return f"{kernel} {row['block_q']}x{row['block_k']}" + (f"/{below}" if below else "")


def _ops(row: dict[str, Any]) -> str:
    """The ratio on the torch operations' tile kernel, or - in files written before it."""
    return f"{row['ops_ratio']:>5.2f}" if "ops_ratio" in row else f"{'-':>5}"


def format_ratios(result: dict[str, Any]) -> str:
    """The table `run_ratios` measured, as text: idle and loaded side by side, with the
    warnings that the machine was busy (`attention_course.bench.machine.busy_warnings`) first
    and last."""
    rows = result["ratios"]
    by_load = {(r["length"], r["width"], r["causal"], r["backward"], r["load"]): r for r in rows}
    load = result["info"]["load_average"]
    machine_load = result.get("machine_load", {})  # absent in files written before it was kept
    warnings = list(dict.fromkeys(w for rec in machine_load.values() for w in rec["warnings"]))
    own = not machine_load.get("idle", {}).get("load_average_before_counts", True)
    lines = [
        *warnings,
        f"ours / SDPA (throughput), timed alternately, median of {rows[0]['rounds']} each; "
        f"{result['info']['torch_threads']} torch threads; load average before: "
        + " ".join(f"{x:.2f}" for x in load)
        + (" (this run's own sweep just before)" if own else ""),
        *_others_share(machine_load),
        f"{'L':>6} {'E':>4}  {'pass':<27} {'tiles':>20} {'scores':>6}  "
        f"{'idle: ours':>10} {'SDPA':>6} {'ratio':>5} {'ops':>5}  "
        f"{'loaded: ours':>12} {'SDPA':>6} {'ratio':>5} {'ops':>5}  {'kept':>5}",
    ]
    for r in rows:
        if r["load"] != "idle":
            continue
        key = (r["length"], r["width"], r["causal"], r["backward"])
        line = (
            f"{r['length']:>6} {r['width']:>4}  {RatioCase(*key).label:<27} "
            f"{_tiles(r):>20} {r['score_fraction']:>6.3f}  "
            f"{r['ours_gflops']:>10.0f} {r['sdpa_gflops']:>6.0f} {r['ratio']:>5.2f} "
            f"{_ops(r)}"
        )
        loaded = by_load.get((*key, "loaded"))
        if loaded is not None:
            line += (
                f"  {loaded['ours_gflops']:>12.0f} {loaded['sdpa_gflops']:>6.0f} "
                f"{loaded['ratio']:>5.2f} {_ops(loaded)}  {loaded['ratio'] / r['ratio']:>5.2f}"
            )
        lines.append(line)
    lines.append(
        "(GFLOP/s; tiles: the tile kernel our path ran, block_q x block_k, causal /the key "
        "blocks' width below the diagonal; scores: the fraction of L x S its tiles cover "
        "(inside a diagonal tile the kernel skips its own blocks above the diagonal); "
        "ops: the ratio on tile_kernel='ops'; kept: loaded ratio / idle ratio)"
    )
    for m in result["memory"]:
        peak = m["peak_mib_beyond_inputs_and_outputs"]
        text = "-" if peak is None else f"{peak:.1f} MiB"
        lines.append(
            f"memory, ours ({m.get('tile_kernel', 'ops')} tiles), L = {m['length']}, "
            f"E = {m['width']}, "
            f"{RatioCase(m['length'], m['width'], False, m['backward']).label}: "
            f"{text} beyond inputs and outputs ({m['seconds']:.1f} s)"
        )
    for n in result["numpy"]:
        lines.append(
            f"numpy tiled / numpy reference (throughput), L = {n['length']}, E = {n['width']}"
            f"{', causal' if n['causal'] else ''}: {n['ratio']:.2f} "
            f"({n['tiled_s']:.3f} s against {n['reference_s']:.3f} s)"
        )
    lines += format_floor(result.get("floor", []))  # absent in files written before it was
    lines += format_threads_and_processes(result.get("threads_and_processes", []))
    return "\n".join([*lines, *warnings])


def _others_share(machine_load: dict[str, Any]) -> list[str]:
    """Others' share of the CPU time during the idle and the loaded measurement, one line."""
    shares = [
        f"{phase} {record['others_cpu_share']:.0%}"
        for phase, record in machine_load.items()
        if record["others_cpu_share"] is not None
    ]
    return ["other processes' share of the CPU time: " + ", ".join(shares)] if shares else []


if __name__ == "__main__":  # python -m attention_course.bench.ratios --memory-case L E BACKWARD
    if sys.argv[1:2] != ["--memory-case"] or len(sys.argv) != 5:
        raise SystemExit("usage: python -m attention_course.bench.ratios --memory-case L E 0|1")
    length, width, backward = (int(x) for x in sys.argv[2:])
    print(json.dumps(memory_case(length, width, bool(backward))))
