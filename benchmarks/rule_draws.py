"""How often FlashAttention's rule fails by chance: float32 paths against each other.

`attention_lib.flash.accuracy` holds a path to at most twice PyTorch's
float32 error (against float64), plus a floor. Each error is the maximum
over a tensor, so on a few small heads it is one draw. This script draws
small random problems (L and S from 1 to 39, head width 4, 8 or 16, causal
or not, blocks 1 to 5, queries scaled by 1, 2 or 4 for peaked rows) and,
for each pair of float32 paths (A, B), counts the problems where A's error
in the output or a gradient is past the rule with B as "PyTorch":

- ``fused``: our tiles on PyTorch's fused CPU kernel (``tile_kernel="fused"``);
- ``ops``: our tiles on torch operations (``tile_kernel="ops"``);
- ``kernel``: PyTorch's SDPA as it runs on the CPU (its fused kernel);
- ``math``: PyTorch's SDPA with its math backend.

Once with each problem on 2 x 2 heads, once on as many heads as `stable_batch` gives its
length (`STABLE_ROWS` query rows in all).

    python benchmarks/rule_draws.py [--problems 400] [--seed 0] [--write FILE]

Prints a table; ``--write`` also stores it with the machine's processor as JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import attention_lib as al
from attention_course.bench.machine import cpu_model
from attention_lib.flash.accuracy import STABLE_ROWS, Check, reference, stable_batch

PATHS = ("fused", "ops", "kernel", "math")
PAIRS = [("fused", "kernel"), ("ops", "kernel"), ("kernel", "fused"), ("math", "kernel")]


def _math(*args: Any, **kw: Any) -> torch.Tensor:
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(*args, **kw)


def _paths(is_causal: bool, block_q: int, block_k: int) -> dict[str, Callable[..., Any]]:
    tiled = dict(is_causal=is_causal, block_q=block_q, block_k=block_k, backend="tiled")
    return {
        "fused": lambda *a: al.flash_attention(*a, tile_kernel="fused", **tiled),
        "ops": lambda *a: al.flash_attention(*a, tile_kernel="ops", **tiled),
        "kernel": lambda *a: F.scaled_dot_product_attention(*a, is_causal=is_causal),
        "math": lambda *a: _math(*a, is_causal=is_causal),
    }


def _results(fn: Callable[..., Any], inputs: list[torch.Tensor], upstream: torch.Tensor) -> list:
    """The output and the three gradients, as float64."""
    leaves = [x.detach().requires_grad_() for x in inputs]
    out = fn(*leaves)
    out.backward(upstream)
    return [t.detach().double() for t in (out, *(x.grad for x in leaves))]


def problem(rng: np.random.Generator, stable: bool) -> dict[str, Any]:
    """One random small problem on 2 x 2 heads, or (``stable``) on `stable_batch`'s."""
    length, keys = (int(n) for n in rng.integers(1, 40, size=2))
    batch = stable_batch((2, 2), length) if stable else (2, 2)
    width = int(rng.choice([4, 8, 16]))
    seed = int(rng.integers(2**31))
    peak = float(rng.choice([1.0, 2.0, 4.0]))
    g = torch.Generator().manual_seed(seed)
    q, k, v, up = (
        torch.randn(*batch, n, width, generator=g) for n in (length, keys, keys, length)
    )  # (*batch, n, E)
    return {
        "length": length, "keys": keys, "width": width, "seed": seed,
        "is_causal": bool(rng.integers(2)),
        "block_q": int(rng.integers(1, 6)), "block_k": int(rng.integers(1, 6)),
        "peak": peak, "batch": list(batch), "inputs": [q * peak, k, v], "upstream": up,
    }  # fmt: skip


def count(problems: int, seed: int, stable: bool) -> dict[str, Any]:
    """For each pair (A, B): problems where A is past the rule with B's error as PyTorch's."""
    rng = np.random.default_rng(seed)
    past = {f"{a} vs {b}": 0 for a, b in PAIRS}
    cases: dict[str, list[dict[str, Any]]] = {name: [] for name in past}
    for _ in range(problems):
        p = problem(rng, stable)
        causal = p["is_causal"]
        exact = _results(
            lambda *a, causal=causal: reference(*a, is_causal=causal),
            [x.double() for x in p["inputs"]],
            p["upstream"].double(),
        )
        paths = _paths(p["is_causal"], p["block_q"], p["block_k"])
        got = {name: _results(paths[name], p["inputs"], p["upstream"]) for name in PATHS}
        for a, b in PAIRS:
            checks = (
                Check("", "float32", (), (x - w).abs().max().item(), (y - w).abs().max().item(),
                      w.abs().max().item())
                for x, y, w in zip(got[a], got[b], exact, strict=True)
            )  # fmt: skip
            named = zip(("out", "dq", "dk", "dv"), checks, strict=True)
            failed = [(n, c) for n, c in named if not c.passed]
            past[f"{a} vs {b}"] += bool(failed)
            if failed and len(cases[f"{a} vs {b}"]) < 5:  # a few, to rerun by their seed
                shown = {n: x for n, x in p.items() if n not in ("inputs", "upstream")}
                cases[f"{a} vs {b}"].append(
                    {**shown, "past": {n: [c.ours, c.tolerance] for n, c in failed}}
                )
    heads = "2 x 2" if not stable else f"{STABLE_ROWS} rows"
    return {"heads": heads, "problems": problems, "past_rule": past, "first_cases": cases}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the same summation order wherever it runs
    rows = [count(args.problems, args.seed, stable) for stable in (False, True)]
    print(f"{cpu_model()}: problems past the rule, 'A vs B' = A's error with B's as PyTorch's")
    width = max(len(k) for k in rows[0]["past_rule"])
    for name, row in itertools.product(rows[0]["past_rule"], rows):
        past = row["past_rule"][name]
        print(f"  {name:{width}}  {row['heads']:9}  {past:4} of {row['problems']}")
    if args.write:
        record = {"processor": cpu_model(), "torch": torch.__version__, "seed": args.seed,
                  "command": "python benchmarks/rule_draws.py", "rows": rows}  # fmt: skip
        args.write.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
