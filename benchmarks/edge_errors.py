"""Issue 40's edges, measured at an earlier commit and now, side by side (an accuracy report).

Each edge the issue lists, on fresh random draws (a fixed seed, so a rerun
prints the same figures), for ``BASE``'s `attention_lib` (taken out of git,
as `compare_commits` does) and this tree's:

- the non-finite edges: our output against PyTorch's, entry by entry (NaN
  equal to NaN), with the rows where PyTorch differs from the documented
  rule (`attention_lib.nonfinite`, "Where PyTorch differs") counted apart;
- the precision edges: FlashAttention's rule (`attention_lib.flash.accuracy`:
  at most twice PyTorch's error against float64, in the same dtype), as the
  share of draws past it and the largest error / allowed error.

    python benchmarks/edge_errors.py BASE [--draws 100] [--out FILE]

Writes the rows, as JSON, to ``FILE`` (default: print only).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import attention_lib
from attention_lib.flash.accuracy import Check, reference

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_commits import commit_of, import_at


def _same(ours: torch.Tensor, theirs: torch.Tensor) -> torch.Tensor:
    """Where two outputs agree, entry by entry, NaN equal to NaN: a boolean tensor."""
    return (ours == theirs) | (ours.isnan() & theirs.isnan())


def _check(name: str, ours: torch.Tensor, theirs: torch.Tensor, exact: torch.Tensor) -> Check:
    error = lambda x: (x.double() - exact).abs().max().item()  # noqa: E731
    dtype = str(ours.dtype).removeprefix("torch.")
    return Check(
        name, dtype, tuple(ours.shape), error(ours), error(theirs), exact.abs().max().item()
    )


def _paths(lib: Any) -> dict[str, Callable[..., Any]]:
    return {"reference": lib.scaled_dot_product_attention, "flash": lib.flash_attention}


# ------------------------------------------------------------------------ non-finite


def zero_width_infinite_value(lib: Any, draws: int) -> list[dict[str, Any]]:
    """E = 0, causal: row 0 sees key 0 alone with weight 1, and that key's value is +inf."""
    rows = []
    for dtype in (torch.float16, torch.float32):
        q, k = torch.zeros(1, 2, 0, dtype=dtype), torch.zeros(1, 2, 0, dtype=dtype)
        v = torch.tensor([[[math.inf], [1.0]]], dtype=dtype)  # (1, 2, 1)
        theirs = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        for path, fn in _paths(lib).items():
            ours = fn(q, k, v, is_causal=True)
            rows.append({
                "edge": "E = 0, +inf value", "path": path, "dtype": str(dtype)[6:],
                "ours": ours[0, 0, 0].item(), "pytorch": theirs[0, 0, 0].item(),
                "as_pytorch": bool(_same(ours, theirs).all()),
            })  # fmt: skip
    return rows


def nan_scale_half(lib: Any, draws: int) -> list[dict[str, Any]]:
    """One query, one key, float16, scale NaN: PyTorch's NaN."""
    g = torch.Generator().manual_seed(1)
    agree = 0
    for _ in range(draws):
        q, k, v = (torch.randn(1, 1, 4, generator=g).half() for _ in range(3))
        ours = lib.flash_attention(q, k, v, scale=math.nan)
        agree += bool(_same(ours, F.scaled_dot_product_attention(q, k, v, scale=math.nan)).all())
    return [{"edge": "NaN scale, one query and key", "path": "flash", "dtype": "float16",
             "draws": draws, "as_pytorch": agree}]  # fmt: skip


def infinite_scale_causal_grouped(lib: Any, draws: int) -> list[dict[str, Any]]:
    """query (2, 2, 2), key (1, 2, 2), value (1, 2, 1), float16, causal, grouped heads,
    scale +inf (every other draw with its two query heads equal, half of them with entries
    of -1, 0 and 1). Counted: rows that differ
    from PyTorch where its row hides a score of NaN or +inf (its NaN + -inf, documented) and
    where nothing explains it; rows with a seen score of NaN or +inf that are not NaN (the
    rule's (c)); calls whose equal heads give different rows."""
    g = torch.Generator().manual_seed(2)
    hidden = torch.ones(2, 2, dtype=torch.bool).triu(1)  # (L, S): causal
    rows = []
    for path, fn in _paths(lib).items():
        counts = dict.fromkeys(("unexplained", "documented", "seen_not_nan", "heads_uneven"), 0)
        for draw in range(draws):
            q, k = torch.randn(2, 2, 2, generator=g), torch.randn(1, 2, 2, generator=g)
            if draw % 4 >= 2:  # entries of -1, 0, 1: products of 0 and inf, NaN scores
                q, k = q.round().clamp(-1, 1), k.round().clamp(-1, 1)
            q, k = q.half(), k.half()
            if draw % 2:
                q[1] = q[0]
            v = torch.randn(1, 2, 1, generator=g).half()
            kw = {"is_causal": True, "scale": math.inf, "enable_gqa": True}
            ours, theirs = fn(q, k, v, **kw), F.scaled_dot_product_attention(q, k, v, **kw)
            scores = (q.double() * math.inf) @ k.double().transpose(-2, -1)  # (2, 2, 2)
            odd = scores.isnan() | (scores == math.inf)
            odd_hidden, odd_seen = (odd & hidden).any(-1), (odd & ~hidden).any(-1)  # (2, 2)
            differ = ~_same(ours, theirs).all(-1)  # (2, 2): rows
            counts["documented"] += int((differ & odd_hidden).sum())
            counts["unexplained"] += int((differ & ~odd_hidden).sum())
            counts["seen_not_nan"] += int((odd_seen & ~ours.isnan().all(-1)).sum())
            counts["heads_uneven"] += int(draw % 2 and not bool(_same(ours[0], ours[1]).all()))
        rows.append({"edge": "scale +inf, causal, grouped heads", "path": path,
                     "dtype": "float16", "rows": 4 * draws, **counts})  # fmt: skip
    return rows


# ------------------------------------------------------------------------- precision


def _share(name: str, path: str, checks: Iterator[Check]) -> dict[str, Any]:
    """The share of checks past the rule and the worst error / allowed error."""
    seen = list(checks)
    worst = max(seen, key=lambda c: c.ours / c.tolerance)
    return {
        "edge": name, "path": path, "dtype": worst.dtype, "checks": len(seen),
        "past_rule": sum(not c.passed for c in seen),
        "worst_over_allowed": worst.ours / worst.tolerance,
        "worst": {"ours": worst.ours, "allowed": worst.tolerance, "check": worst.name},
    }  # fmt: skip


def scale_50_hidden_key(lib: Any, draws: int) -> list[dict[str, Any]]:
    """query (1, 31, 4), key and value (1, 9, 4), float32, scale 50, a float mask hiding one
    key (-inf), one key a tile; and the reference path on the same draws."""
    calls = {
        "flash, block_k = 1": lambda *a, **kw: lib.flash_attention(*a, block_k=1, **kw),
        "reference": lib.scaled_dot_product_attention,
    }
    rows = []
    for path, fn in calls.items():
        g = torch.Generator().manual_seed(3)

        def checks(fn: Callable[..., Any] = fn, g: Any = g, path: str = path) -> Iterator[Check]:
            for _ in range(draws):
                q = torch.randn(1, 31, 4, generator=g)
                k, v = (torch.randn(1, 9, 4, generator=g) for _ in range(2))
                mask = torch.zeros(31, 9)
                mask[:, int(torch.randint(0, 9, (1,), generator=g))] = -math.inf
                kw = {"attn_mask": mask, "scale": 50.0}
                theirs = F.scaled_dot_product_attention(q, k, v, **kw)
                yield _check(path, fn(q, k, v, **kw), theirs, reference(q, k, v, **kw))

        rows.append(_share("scale 50, a hidden key", path, checks()))
    return rows


def one_query_value_gradient(lib: Any, draws: int) -> list[dict[str, Any]]:
    """dq, dk, dv of one query of width 31 against 16 keys, value width 1, float32."""
    g = torch.Generator().manual_seed(4)

    def checks() -> Iterator[Check]:
        for _ in range(draws):
            q = torch.randn(1, 1, 31, generator=g)
            k, v = torch.randn(1, 16, 31, generator=g), torch.randn(1, 16, 1, generator=g)
            upstream = torch.randn(1, 1, 1, generator=g)
            inputs = [q, k, v]
            ours = _grads(lib.flash_attention, inputs, upstream)
            theirs = _grads(F.scaled_dot_product_attention, inputs, upstream)
            exact = _grads(reference, [x.double() for x in inputs], upstream.double())
            for label, o, t, e in zip(("dq", "dk", "dv"), ours, theirs, exact, strict=True):
                yield _check(label, o, t, e)

    return [_share("gradients, one query of width 31", "flash", checks())]


def _grads(fn: Callable[..., Any], inputs: list[Any], upstream: Any) -> list[Any]:
    leaves = [x.detach().requires_grad_() for x in inputs]
    fn(*leaves).backward(upstream)
    return [x.grad for x in leaves]


def numpy_weights(lib: Any, draws: int) -> list[dict[str, Any]]:
    """`attention_weights` on float32 numpy arrays (L, S in 1-32, E in 1-32), default scale,
    against float64; PyTorch's error is its float32 softmax of the same scores."""
    rng = np.random.default_rng(5)

    def checks() -> Iterator[Check]:
        for _ in range(draws):
            length, keys, width = (int(n) for n in rng.integers(1, 33, 3))
            q = rng.standard_normal((length, width), dtype=np.float32)
            k = rng.standard_normal((keys, width), dtype=np.float32)
            scale = 1 / math.sqrt(width)
            exact = torch.softmax(torch.from_numpy(q).double() @ torch.from_numpy(k).double().T
                                  * scale, -1)  # fmt: skip
            theirs = torch.softmax(torch.from_numpy(q) @ torch.from_numpy(k).T * scale, -1)
            ours = torch.from_numpy(np.asarray(lib.attention_weights(q, k)))
            yield _check("weights", ours, theirs, exact)

    return [_share("attention_weights, numpy float32", "reference", checks())]


def scale_100(lib: Any, draws: int) -> list[dict[str, Any]]:
    """Forward at scale 100, float32, (1, 2, L, 8) with L, S in 1-32, both paths."""
    rows = []
    for path, fn in _paths(lib).items():
        g = torch.Generator().manual_seed(6)

        def checks(fn: Callable[..., Any] = fn, g: Any = g, path: str = path) -> Iterator[Check]:
            for _ in range(draws):
                length, keys = (int(n) for n in torch.randint(1, 33, (2,), generator=g))
                q = torch.randn(1, 2, length, 8, generator=g)
                k, v = (torch.randn(1, 2, keys, 8, generator=g) for _ in range(2))
                theirs = F.scaled_dot_product_attention(q, k, v, scale=100.0)
                exact = reference(q, k, v, scale=100.0)
                yield _check(path, fn(q, k, v, scale=100.0), theirs, exact)

        rows.append(_share("scale 100", path, checks()))
    return rows


EDGES = (
    zero_width_infinite_value,
    nan_scale_half,
    infinite_scale_causal_grouped,
    scale_50_hidden_key,
    one_query_value_gradient,
    numpy_weights,
    scale_100,
)


def measure(lib: Any, draws: int) -> dict[str, list[dict[str, Any]]]:
    """Every edge's rows for one version of the library (an error it raised, as a row)."""
    report = {}
    for edge in EDGES:
        try:
            report[edge.__name__] = edge(lib, draws)
        except Exception as err:  # an earlier commit may refuse an edge: that is its result
            report[edge.__name__] = [{"edge": edge.__name__, "raised": repr(err)}]
    return report


def _shown(row: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in row.items() if k not in ("edge", "worst"))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base", help="the earlier commit (e.g. 51c7112: before issue 40)")
    parser.add_argument("--draws", type=int, default=100, help="random draws per edge")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    base = commit_of(args.base)
    with tempfile.TemporaryDirectory() as folder:
        versions = {base[:7]: import_at(base, Path(folder)), "now": attention_lib}
        report = {label: measure(lib, args.draws) for label, lib in versions.items()}
    for edge in EDGES:
        print(edge.__doc__.split("\n")[0])
        for label, rows in report.items():
            for row in rows[edge.__name__]:
                print(f"    {label:8s} {_shown(row)}")
    if args.out:
        record = {"command": "python benchmarks/edge_errors.py " + " ".join(argv or sys.argv[1:]),
                  "base": base, "torch": torch.__version__, "draws": args.draws,
                  "rows": report}  # fmt: skip
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
