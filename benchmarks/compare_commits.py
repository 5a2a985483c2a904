"""Our tiled path at an earlier commit and now, timed alternately in one process (a benchmark).

Two runs of ``python -m attention_course.bench --ratios-only``, one per commit,
compare two runs: on a shared machine their ratios to SDPA moved by up to 17%
either way with no change to the code in between, so a change of a few percent
cannot be read from them. This times the three calls side by side instead,
case by case, in the way `attention_course.bench.ratios` times its own
(`ratios._alternate`: each call after a short rest, the rounds in
`ratios.balanced_orders`, so that each of the three follows each equally
often; the order flipped every round put this tree's call always in the
middle, never after itself, and made it 6-17% slower than BASE's on the
same code): ``BASE``'s `flash_attention` (its ``attention_lib`` taken out of
git into a temporary folder and imported under another name), this tree's, and
PyTorch's ``scaled_dot_product_attention``. Whatever the machine does, it does
to all three within a round.

For each case (the ratio benchmark's: B = 1, H = 8, float32, forward and
forward + backward, causal or not) it prints each commit's ratio to SDPA
(SDPA's time / ours, from the medians) and the change: the median over rounds
of this tree's time / BASE's time in the same round, with the spread of those
per-round ratios (their interquartile range), and writes them, with the
machine and its load, to
``benchmarks/results/<machine>/compare-<base>-<head>.json``.

    python benchmarks/compare_commits.py BASE [--lengths 2048 4096] [--widths 64 128]
                                              [--rounds 18] [--machine NAME]
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import attention_lib
from attention_course.bench.machine import MachineLoad, busy_warnings, cpu_slug, machine_info
from attention_course.bench.ratios import RatioCase, _alternate, _inputs, default_cases

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def default_folder() -> str:
    """``cpu-<cores>core-<processor>``, e.g. ``cpu-2core-intel-xeon``: one folder per model."""
    model = cpu_slug().rsplit("-", 1)[0]  # without its "-<n>cpu"
    return f"cpu-{os.cpu_count()}core-{model}"


def commit_of(revision: str) -> str:
    """The full hash of a git revision of this repository."""
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if found.returncode:
        raise SystemExit(f"compare_commits: {revision!r} is not a commit of this repository")
    return found.stdout.strip()


def _has(commit: str, path: str) -> bool:
    found = subprocess.run(
        ["git", "cat-file", "-e", f"{commit}:{path}"], cwd=REPO, capture_output=True, check=False
    )
    return found.returncode == 0


def import_at(commit: str, folder: Path) -> Any:
    """``attention_lib`` as it was at ``commit``, imported as ``attention_lib_<hash>`` from
    ``folder`` (its modules import each other relatively, so the copy is self-contained)."""
    name = f"attention_lib_{commit[:12]}"
    # the library's folder at that commit: lib/attention_lib, or attention_lib before the
    # course moved out of it into a package of its own
    where = next(path for path in ("lib/attention_lib", "attention_lib") if _has(commit, path))
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, where],
        cwd=REPO, capture_output=True, check=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    (folder / where).rename(folder / name)
    sys.path.insert(0, str(folder))
    return importlib.import_module(name)


def _callables(case: RatioCase, paths: dict[str, Any]) -> dict[str, Any]:
    """One forward (and backward) pass per path on the same inputs, as `ratios._callables`."""
    import torch

    q, k, v, grad = _inputs(case)

    def run(attention: Any) -> Any:
        def call() -> Any:
            out = attention(q, k, v, is_causal=case.causal)
            if case.backward:
                return torch.autograd.grad(out, (q, k, v), grad)
            return out

        return call

    return {name: run(fn) for name, fn in paths.items()}


def compare(cases: list[RatioCase], base: Any, rounds: int) -> list[dict[str, Any]]:
    """One row per case: median seconds of BASE, this tree and SDPA, each commit's ratio to
    SDPA, and this tree / BASE per round (median and interquartile range)."""
    import torch.nn.functional as F

    paths = {
        "base": lambda *a, **kw: base.flash_attention(*a, backend="tiled", **kw),
        "head": lambda *a, **kw: attention_lib.flash_attention(*a, backend="tiled", **kw),
        "sdpa": F.scaled_dot_product_attention,
    }
    rows = []
    for case in cases:
        times = _alternate(_callables(case, paths), rounds)
        medians = {name: statistics.median(seconds) for name, seconds in times.items()}
        paired = [h / b for h, b in zip(times["head"], times["base"], strict=True)]
        quartiles = statistics.quantiles(paired, n=4)
        rows.append(
            {
                "length": case.length,
                "width": case.width,
                "causal": case.causal,
                "backward": case.backward,
                "rounds": rounds,
                **{f"{name}_s": value for name, value in medians.items()},
                "base_ratio": medians["sdpa"] / medians["base"],
                "head_ratio": medians["sdpa"] / medians["head"],
                "head_over_base": statistics.median(paired),
                "head_over_base_iqr": [quartiles[0], quartiles[2]],
            }
        )
        print(format_row(rows[-1]), flush=True)
    return rows


def format_row(row: dict[str, Any]) -> str:
    kind = "fwd+bwd" if row["backward"] else "forward"
    low, high = row["head_over_base_iqr"]
    return (
        f"  L={row['length']:5d} E={row['width']:3d} {kind:7s} causal={row['causal']!s:5s}"
        f"  ratio to SDPA: base {row['base_ratio']:.3f}  now {row['head_ratio']:.3f}"
        f"  time now/base {row['head_over_base']:.3f} (IQR {low:.3f}-{high:.3f})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the earlier commit (any git revision)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--widths", type=int, nargs="+", default=[64, 128])
    parser.add_argument(
        "--rounds", type=int, default=18, help="timings of each path per case (6 orders: 18)"
    )
    parser.add_argument(
        "--machine",
        default=None,
        help="results folder (default: the ratio benchmark's for this CPU)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error(f"--rounds {args.rounds}: at least 2 (each case's spread needs two)")
    base_commit = commit_of(args.base)
    head = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    cases = default_cases(args.lengths, args.widths)
    load = MachineLoad().start()
    with tempfile.TemporaryDirectory(prefix="compare-commits-") as folder:
        base = import_at(base_commit, Path(folder))
        print(f"base {base_commit[:12]} against this tree ({head}), {args.rounds} rounds a case")
        rows = compare(cases, base, args.rounds)
    load.stop()
    changes = [row["head_over_base"] for row in rows]
    summary = {
        "median_time_now_over_base": statistics.median(changes),
        "range": [min(changes), max(changes)],
    }
    print(
        f"time now / base: median {summary['median_time_now_over_base']:.3f}, "
        f"cases {summary['range'][0]:.3f} to {summary['range'][1]:.3f}"
    )
    for warning in busy_warnings(load):
        print(warning)
    folder = RESULTS / (args.machine or default_folder())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"compare-{base_commit[:7]}-{head}.json"
    record = {
        "command": "python benchmarks/compare_commits.py " + " ".join(argv or sys.argv[1:]),
        "base": base_commit,
        "head": head,
        "machine": machine_info(),
        "load": load.record(),
        "rows": rows,
        "summary": summary,
    }
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"written to {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
