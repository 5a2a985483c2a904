"""Two sets of latency runs compared control by control: is any control slower, beyond the noise?

`benchmarks/latency.py` records, per control, each browser move's key-press-to-
picture time (``samples_ms``, 20 a run) and its stages. One run's p50 of a
control moves by several ms from run to run on the same code (the machine's
other work, the page's animation frames 16.7 ms apart), so "slower" cannot be
read from one run against another. Here the runs of each side (``--before``,
``--after``: several runs each, alternated in one session) are pooled per
control, and each control's after-minus-before p50 gets a bootstrap 95%
interval (`BOOTSTRAP` resamples of each side's moves, a fixed seed). A control
is *slower* when its whole interval is above zero, *faster* when below.

With two runs on a side, the same comparison between that side's own runs
(first against second) is printed too: how many controls identical code calls
"slower", the noise to read the verdict against.

Per side it also gives the median over controls of the p50, the p95 range,
and each stage's median p50 and p95 (where the time goes).

    python benchmarks/latency_pair.py --before A1.json A2.json --after B1.json B2.json
                                      [--write benchmarks/results/latency-pair-<machine>.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

BOOTSTRAP = 4000
STAGES = ("to kernel", "in kernel", "to page", "to screen")

Control = tuple[str, int, str]  # (notebook's number, box, the control's description)


def controls(runs: list[dict[str, Any]]) -> dict[Control, dict[str, list]]:
    """Each control's moves pooled over ``runs`` (latency.py records): samples and stages."""
    pooled: dict[Control, dict[str, list]] = {}
    for run in runs:
        for notebook in run["results"]:
            for b in notebook["browser"]:
                key = (notebook["notebook"][:2], b["box"], b["description"])
                into = pooled.setdefault(key, {"samples": [], "stages": []})
                into["samples"] += b.get("samples_ms", [])
                into["stages"] += [s for s in b.get("stages_ms", []) if s is not None]
    return pooled


def p50_difference(
    before: list[float], after: list[float], rng: np.random.Generator
) -> tuple[float, float, float]:
    """After's p50 minus before's (ms), with its bootstrap 95% interval (low, high)."""
    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    draws_a = np.median(rng.choice(a, size=(BOOTSTRAP, a.size)), axis=1)  # (BOOTSTRAP,)
    draws_b = np.median(rng.choice(b, size=(BOOTSTRAP, b.size)), axis=1)  # (BOOTSTRAP,)
    low, high = np.percentile(draws_b - draws_a, [2.5, 97.5])
    return float(np.median(b) - np.median(a)), float(low), float(high)


def compare(
    before: dict[Control, dict[str, list]], after: dict[Control, dict[str, list]], seed: int = 0
) -> dict[str, Any]:
    """Per control present on both sides: p50 and p95 each side, the p50 difference and its
    interval, and the verdict; the counts of slower and faster controls."""
    rng = np.random.default_rng(seed)
    rows = []
    for key in sorted(set(before) & set(after)):
        a, b = before[key]["samples"], after[key]["samples"]
        if not a or not b:
            continue
        diff, low, high = p50_difference(a, b, rng)
        verdict = "slower" if low > 0 else "faster" if high < 0 else "same"
        rows.append(
            {
                "control": list(key),
                "n": [len(a), len(b)],
                "p50": [float(np.median(a)), float(np.median(b))],
                "p95": [float(np.percentile(a, 95)), float(np.percentile(b, 95))],
                "p50_difference": diff,
                "interval_95": [low, high],
                "verdict": verdict,
            }
        )
    return {
        "controls": len(rows),
        "slower": sum(r["verdict"] == "slower" for r in rows),
        "faster": sum(r["verdict"] == "faster" for r in rows),
        "rows": rows,
    }


def side_summary(pooled: dict[Control, dict[str, list]]) -> dict[str, Any]:
    """Median over controls of each control's p50; the p95 range; each stage's median p50/p95."""
    p50 = [float(np.median(c["samples"])) for c in pooled.values() if c["samples"]]
    p95 = [float(np.percentile(c["samples"], 95)) for c in pooled.values() if c["samples"]]
    stages = {}
    for stage in STAGES:
        per_control = [
            [s[stage] for s in c["stages"] if s.get(stage) is not None] for c in pooled.values()
        ]
        per_control = [v for v in per_control if v]
        stages[stage] = [
            statistics.median(float(np.median(v)) for v in per_control),
            statistics.median(float(np.percentile(v, 95)) for v in per_control),
        ]
    return {
        "median_p50": statistics.median(p50),
        "p95_range": [min(p95), max(p95)],
        "p95_under_100": sum(v < 100 for v in p95),
        "controls": len(p50),
        "stages_median_p50_p95": stages,
    }


def report(before_files: list[Path], after_files: list[Path]) -> dict[str, Any]:
    runs_a = [json.loads(p.read_text(encoding="utf-8")) for p in before_files]
    runs_b = [json.loads(p.read_text(encoding="utf-8")) for p in after_files]
    a, b = controls(runs_a), controls(runs_b)
    out: dict[str, Any] = {
        "before": [str(p) for p in before_files],
        "after": [str(p) for p in after_files],
        "loads": {
            str(p): r.get("load", {}).get("load_average_before")
            for p, r in zip(before_files + after_files, runs_a + runs_b, strict=True)
        },
        "summary": {"before": side_summary(a), "after": side_summary(b)},
        "after_against_before": compare(a, b),
    }
    for side, runs in (("before", runs_a), ("after", runs_b)):
        if len(runs) == 2:  # the noise: one side's own runs against each other
            out[f"{side}_run_2_against_run_1"] = compare(controls(runs[:1]), controls(runs[1:]))
    return out


def print_report(out: dict[str, Any]) -> None:
    for side in ("before", "after"):
        s = out["summary"][side]
        stages = ", ".join(
            f"{k} {v[0]:.1f}/{v[1]:.1f}" for k, v in s["stages_median_p50_p95"].items()
        )
        print(
            f"{side:6s}: median p50 {s['median_p50']:.1f} ms; p95 {s['p95_range'][0]:.1f}-"
            f"{s['p95_range'][1]:.1f}, under 100 on {s['p95_under_100']} of {s['controls']}; "
            f"stages p50/p95: {stages}"
        )
    c = out["after_against_before"]
    print(
        f"after against before: {c['slower']} of {c['controls']} controls slower, "
        f"{c['faster']} faster (95% interval of the p50 difference clear of zero)"
    )
    for r in c["rows"]:
        low, high = r["interval_95"]
        print(
            f"  {r['control'][0]} box {r['control'][1]} {r['control'][2][:34]:34s} "
            f"p50 {r['p50'][0]:5.1f} -> {r['p50'][1]:5.1f} ({r['p50_difference']:+5.1f}, "
            f"{low:+5.1f} to {high:+5.1f})  p95 {r['p95'][0]:5.1f} -> {r['p95'][1]:5.1f}"
            f"  {r['verdict']}"
        )
    for side in ("before", "after"):
        noise = out.get(f"{side}_run_2_against_run_1")
        if noise:
            print(
                f"noise, {side}'s run 2 against its run 1: {noise['slower']} of "
                f"{noise['controls']} slower, {noise['faster']} faster"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", nargs="+", type=Path, required=True)
    parser.add_argument("--after", nargs="+", type=Path, required=True)
    parser.add_argument("--write", type=Path, help="also write the comparison as JSON here")
    args = parser.parse_args()
    out = report(args.before, args.after)
    print_report(out)
    if args.write:
        args.write.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
