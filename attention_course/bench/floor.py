"""The floor under the ratios: one tile's torch operations, each timed alone, against SDPA.

Part of ``python -m attention_course.bench`` (with the ratios, `attention_course.bench.ratios`).
Why the torch tiled path computes its tiles with PyTorch's fused kernel on the
CPU (``tile_kernel="fused"``, `attention_lib.flash.fused_tiles`), measured on
the tile kernel it had before, which is still the path for masks, other
devices and non-finite inputs (``tile_kernel="ops"``, what every timing here
runs). That kernel's forward pass is, per tile after a row block's first,
three torch operations (`attention_lib.flash.torch_tiled`): the product of the
queries with a block of keys (the shift folded in), exp2 in place, and the
product of the weights with the values and a column of ones (the row sums
come with it).
Here each runs alone, on one thread, on operands laid out as the path lays
them out (rows padded by 64 bytes, a column more for the shift), again and
again on warm caches, and its time is divided by the tile's scores. Their
sum is the least any path built of these operations can spend per score;
beside it, SDPA's whole forward pass and ours per score, one thread each, on
B = 1, H = 8. So the table says how far the path is from its own floor
(Python between the operations, copies, the first tile of each row block,
caches colder than here), and how far the floor is from PyTorch's fused
kernel, which computes the exponentials, the maximum and the sums in one pass
over a tile that stays in cache.

`measure_threads_and_processes` adds the price of running the path's two
workers as threads of one process: each torch operation releases Python's
lock (the GIL) while it computes and takes it back after, so a thread whose
operation ends may wait for the other's Python. It times our forward pass on
B = 1, H = 8 with two torch threads (the path's two workers), then the same
heads split between two processes of one thread each, run at once (four
heads each; no lock shared), and SDPA with two threads.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "OPERATIONS",
    "PAD_FLOATS",
    "floor_cases",
    "format_floor",
    "format_threads_and_processes",
    "measure_floor",
    "measure_threads_and_processes",
]

PAD_FLOATS = 16  # the path's 64-byte padding of float32 rows
OPERATIONS = ("scores", "exp2", "weights x values")
_HEADERS = {"scores": "q k^T", "exp2": "exp2", "weights x values": "p [v,1]"}


def _per_call(fn: Callable[[], Any], rounds: int, calls: int) -> float:
    """Median seconds per call of ``fn`` over ``rounds`` timings of ``calls`` calls."""
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def _tile_operations(width: int, block_q: int, block_k: int) -> dict[str, Callable[[], Any]]:
    """The forward pass's three operations on one tile, as `_row_block` calls them (g = 1)."""
    import torch

    generator = torch.Generator().manual_seed(0)

    def padded(rows: int, cols: int) -> torch.Tensor:  # (1, rows, cols), rows 64 bytes longer
        return torch.randn(1, rows, width + PAD_FLOATS, generator=generator)[..., :cols]

    q = padded(block_q, width + 1)  # (1, bq, E + 1): scaled queries, -shift last
    key_t = padded(block_k, width + 1).transpose(-1, -2)  # (1, E + 1, bk)
    value = padded(block_k, width + 1)  # (1, bk, Ev + 1): values, ones last
    scores = torch.empty(1, block_q, block_k)  # (1, bq, bk)
    before = torch.rand(1, block_q, block_k, generator=generator) * -20  # scores - shift
    acc = torch.zeros(1, block_q, width + 1)  # (1, bq, Ev + 1): p v, the total last
    return {
        "scores": lambda: torch.bmm(q, key_t, out=scores),
        "exp2": lambda: torch.exp2(before, out=scores),  # reads a tile, writes one, as exp2_
        "weights x values": lambda: acc.baddbmm_(scores, value),
    }


def floor_cases(lengths: Sequence[int], widths: Sequence[int]) -> list[tuple[int, int]]:
    return [(length, width) for width in widths for length in lengths]


def measure_floor(length: int, width: int, rounds: int = 7) -> dict[str, Any]:
    """One row: ns per score of each operation, their sum, and SDPA's and ours, one thread."""
    import torch
    import torch.nn.functional as F

    from attention_lib.flash import flash_attention
    from attention_lib.flash.torch_tiled import default_blocks

    block_q, block_k = default_blocks(False)
    threads = torch.get_num_threads()
    tile = block_q * block_k
    torch.set_num_threads(1)  # the tiled path then runs in this thread, as each worker does
    try:
        ops = {
            name: _per_call(fn, rounds, 20) / tile * 1e9
            for name, fn in _tile_operations(width, block_q, block_k).items()
        }
        q, k, v = _inputs(8, length, width)
        scores = 8 * length * length
        whole = {
            "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
            "ours": lambda: flash_attention(q, k, v, backend="tiled", tile_kernel="ops"),
        }
        per_score = {name: _per_call(fn, rounds, 1) / scores * 1e9 for name, fn in whole.items()}
    finally:
        torch.set_num_threads(threads)
    floor = sum(ops.values())
    return {
        "length": length,
        "width": width,
        "block_q": block_q,
        "block_k": block_k,
        "threads": 1,
        "ns_per_score": ops,
        "operations_ns": floor,
        "sdpa_ns": per_score["sdpa"],
        "ours_ns": per_score["ours"],
        "floor_ratio": per_score["sdpa"] / floor,
        "ours_ratio": per_score["sdpa"] / per_score["ours"],
    }


def format_floor(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The floor table as lines of text (empty for no rows)."""
    if not rows:
        return []
    names = "  ".join(f"{_HEADERS[name]:>8}" for name in OPERATIONS)
    lines = [
        "the floor under tile_kernel='ops': one tile's torch operations (forward), each timed "
        "alone on warm caches, one thread, ns per score (q k^T: scores, p [v,1]: weights x "
        "values, and their row sums)",
        f"{'L':>6} {'E':>4} {'tiles':>9}  {names}  {'sum':>5}  {'SDPA':>5} {'ours':>5}  "
        f"{'SDPA/sum':>8} {'SDPA/ours':>9}",
    ]
    for r in rows:
        ops = "  ".join(f"{r['ns_per_score'][name]:>8.3f}" for name in OPERATIONS)
        lines.append(
            f"{r['length']:>6} {r['width']:>4} {r['block_q']:>4}x{r['block_k']:<4}  {ops}  "
            f"{r['operations_ns']:>5.2f}  {r['sdpa_ns']:>5.2f} {r['ours_ns']:>5.2f}  "
            f"{r['floor_ratio']:>8.2f} {r['ours_ratio']:>9.2f}"
        )
    lines.append(
        "(SDPA/sum: the best ratio a path of these operations could reach; "
        "SDPA/ours: tile_kernel='ops', forward, one thread)"
    )
    return lines


def _inputs(heads: int, length: int, width: int) -> tuple[Any, Any, Any]:
    import torch

    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(1, heads, length, width, generator=generator) for _ in "qkv")


def measure_threads_and_processes(length: int, width: int, rounds: int = 7) -> dict[str, Any]:
    """Seconds per forward pass (medians): ours with two threads, ours as two one-thread
    processes at once (half the heads each: the slower one's), and SDPA with two threads."""
    import torch
    import torch.nn.functional as F

    from attention_lib.flash import flash_attention

    command = [sys.executable, "-m", "attention_course.bench.floor", "--half"]
    command += [str(length), str(width), str(rounds)]
    children = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        for child in children:  # each has its inputs and has warmed up
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        for child in children:  # then both time at once
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        halves = [float(json.loads(child.communicate()[0])["seconds"]) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    q, k, v = _inputs(8, length, width)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        whole = {
            "ours_two_threads_s": lambda: flash_attention(
                q, k, v, backend="tiled", tile_kernel="ops"
            ),
            "sdpa_two_threads_s": lambda: F.scaled_dot_product_attention(q, k, v),
        }
        row = {name: _per_call(fn, rounds, 1) for name, fn in whole.items()}
    finally:
        torch.set_num_threads(threads)
    row["ours_two_processes_s"] = max(halves)
    return {
        "length": length,
        "width": width,
        **row,
        "threads_ratio": row["sdpa_two_threads_s"] / row["ours_two_threads_s"],
        "processes_ratio": row["sdpa_two_threads_s"] / row["ours_two_processes_s"],
    }


def format_threads_and_processes(rows: Sequence[dict[str, Any]]) -> list[str]:
    """`measure_threads_and_processes`' rows as lines of text (empty for no rows)."""
    if not rows:
        return []
    lines = [
        "tile_kernel='ops': two workers as threads of one process, or as two processes "
        "(half the heads each), forward, ms; ratio: SDPA (two threads) / ours",
        f"{'L':>6} {'E':>4}  {'threads':>8} {'processes':>9} {'SDPA':>7}  "
        f"{'ratio, threads':>14} {'processes':>9}",
    ]
    for r in rows:
        lines.append(
            f"{r['length']:>6} {r['width']:>4}  {r['ours_two_threads_s'] * 1e3:>8.1f} "
            f"{r['ours_two_processes_s'] * 1e3:>9.1f} {r['sdpa_two_threads_s'] * 1e3:>7.1f}  "
            f"{r['threads_ratio']:>14.2f} {r['processes_ratio']:>9.2f}"
        )
    return lines


def _half(length: int, width: int, rounds: int) -> None:
    """The child of `measure_threads_and_processes`: four heads, one thread, timed on "go"."""
    import torch

    from attention_lib.flash import flash_attention

    torch.set_num_threads(1)
    q, k, v = _inputs(4, length, width)
    for _ in range(2):
        flash_attention(q, k, v, backend="tiled", tile_kernel="ops")
    print("ready", flush=True)
    sys.stdin.readline()
    seconds = _per_call(
        lambda: flash_attention(q, k, v, backend="tiled", tile_kernel="ops"), rounds, 1
    )
    print(json.dumps({"seconds": seconds}))


if __name__ == "__main__":  # python -m attention_course.bench.floor --half L E ROUNDS
    if sys.argv[1:2] != ["--half"] or len(sys.argv) != 5:
        raise SystemExit("usage: python -m attention_course.bench.floor --half L E ROUNDS")
    _half(*(int(x) for x in sys.argv[2:]))
