"""What attention costs: the arithmetic, the memory and the memory traffic, counted.

Counted per head for a sequence of T queries and T keys (the lesson's cost
section):

- QK^T: 2·T²·d_k FLOPs (each of T² scores is a d_k-long dot product, a
  multiply and an add per term), producing a T x T score matrix;
- softmax: O(T²) elementwise work, one exponential per score;
- AV: 2·T²·d_v FLOPs;
- memory: the explicit score matrix holds T² numbers per head.

The tiled path (`attention_lib.flash.loop`) never holds that matrix: one tile of
``block_q x block_k`` scores at a time, plus per query row the running
maximum m, the running sum l and the accumulator of d_v numbers that becomes
the output row. That is linear in T. `attention_traffic` counts the bytes
each path moves to and from a GPU's main memory, forward and backward
(its figure: `attention_course.lessons.figures.plot_traffic`).

What the benchmarks measured against these counts is read by
`attention_course.bench.results` (the fitted growth exponents, the steps in
the time per score) and drawn by `attention_course.lessons.figures.plot_benchmark`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from attention_lib.backend import itemsize
from attention_lib.inputs import positive_integer
from attention_lib.memory import format_bytes

__all__ = [
    "HeadCost",
    "TiledMemory",
    "Traffic",
    "attention_traffic",
    "format_cost_table",
    "format_memory_table",
    "format_traffic_table",
    "head_cost",
    "tiled_memory",
]


# -- the arithmetic -------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadCost:
    """The cost of one attention head over T queries and T keys.

    ``qk_flops`` = 2·T²·d_k, ``softmax_exps`` = T² (one exponential per
    score; the O(T²) elementwise work), ``av_flops`` = 2·T²·d_v,
    ``score_elements`` = T², ``score_bytes`` = T² times the dtype's size.
    """

    length: int
    width_k: int
    width_v: int
    dtype: str
    qk_flops: int
    softmax_exps: int
    av_flops: int
    score_elements: int
    score_bytes: int

    @property
    def matmul_flops(self) -> int:
        """The two matrix products together: 2·T²·(d_k + d_v)."""
        return self.qk_flops + self.av_flops


def head_cost(
    length: int, width_k: int = 64, width_v: int | None = None, dtype: str = "float32"
) -> HeadCost:
    """Operation counts and score-matrix memory of one head at sequence length T = ``length``.

    ``width_v`` defaults to ``width_k``; ``dtype`` names the score matrix's
    element type ('float32', 'float16', 'bfloat16', 'float64'). Raises
    ValueError for a length or width that is not a positive integer, or an
    unknown dtype.
    """
    t = positive_integer("length", length)
    dk = positive_integer("width_k", width_k)
    dv = dk if width_v is None else positive_integer("width_v", width_v)
    scores = t * t
    return HeadCost(
        length=t,
        width_k=dk,
        width_v=dv,
        dtype=dtype,
        qk_flops=2 * scores * dk,  # T² dot products of length d_k
        softmax_exps=scores,
        av_flops=2 * scores * dv,  # T x T weights times T x d_v values
        score_elements=scores,
        score_bytes=scores * itemsize(dtype),
    )


def format_cost_table(lengths: Iterable[int], width: int = 64, dtype: str = "float32") -> str:
    """A text table of `head_cost` at each length: FLOPs and score-matrix memory per head."""
    lines = [
        f"per head, d_k = d_v = {width}, scores in {dtype}",
        f"{'T':>7} {'QK^T FLOPs':>16} {'softmax exps':>14} {'AV FLOPs':>16} {'score matrix':>13}",
    ]
    for t in lengths:
        c = head_cost(t, width, dtype=dtype)
        lines.append(
            f"{t:>7} {c.qk_flops:>16,} {c.softmax_exps:>14,} {c.av_flops:>16,} "
            f"{format_bytes(c.score_bytes):>13}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class TiledMemory:
    """Numbers held per head by the tiled path, part by part (elements, not bytes).

    ``tile``: one block_q x block_k tile of scores; ``stats``: m and l for
    each of the ``rows`` query rows held; ``accumulator``: rows x d_v.
    """

    rows: int
    tile: int
    stats: int
    accumulator: int

    @property
    def total(self) -> int:
        return self.tile + self.stats + self.accumulator


def tiled_memory(
    length: int,
    width_v: int,
    block_q: int,
    block_k: int,
    rows: int | None = None,
    length_k: int | None = None,
) -> TiledMemory:
    """What the tiled path holds for one head instead of the L x S score matrix.

    ``length`` is L (query rows), ``length_k`` is S (keys; default L).
    ``rows`` is how many query rows keep running statistics at once: by
    default all L of them (on a GPU every query block runs at the same time,
    and FlashAttention keeps each row's log-sum-exp for the backward pass);
    ``rows=block_q`` is one query block, as the numpy loop holds it. Block
    sizes beyond L (block_q) or S (block_k) are capped there, as the tiled
    path's last tile is.

    Raises ValueError for sizes that are not positive integers, or ``rows``
    above ``length``.
    """
    t = positive_integer("length", length)
    s = t if length_k is None else positive_integer("length_k", length_k)
    dv = positive_integer("width_v", width_v)
    bq = min(positive_integer("block_q", block_q), t)
    bk = min(positive_integer("block_k", block_k), s)
    r = t if rows is None else positive_integer("rows", rows)
    if r > t:
        raise ValueError(f"rows ({r}) cannot exceed the sequence length ({t})")
    return TiledMemory(rows=r, tile=bq * bk, stats=2 * r, accumulator=r * dv)


def format_memory_table(
    lengths: Iterable[int],
    width_v: int = 64,
    block_q: int = 128,
    block_k: int = 128,
    dtype: str = "float32",
) -> str:
    """A text table per head: the T² score matrix against the tiled path's tile + m, l, acc."""
    size = itemsize(dtype)
    lines = [
        f"per head, d_v = {width_v}, tiles {block_q} x {block_k}, {dtype}",
        f"{'T':>7} {'score matrix T²':>16} {'tiled: tile':>12} {'+ m, l':>10} "
        f"{'+ acc T·d_v':>12} {'= total':>11} {'matrix / tiled':>15}",
    ]
    for t in lengths:
        full = head_cost(t, width_v, dtype=dtype).score_bytes
        tm = tiled_memory(t, width_v, block_q, block_k)
        lines.append(
            f"{t:>7} {format_bytes(full):>16} {format_bytes(tm.tile * size):>12} "
            f"{format_bytes(tm.stats * size):>10} {format_bytes(tm.accumulator * size):>12} "
            f"{format_bytes(tm.total * size):>11} {full / (tm.total * size):>14.1f}x"
        )
    return "\n".join(lines)


# --- memory traffic, forward and backward -------------------------------------------------
#
# Counted in elements read from and written to the GPU's main memory (HBM) by one head over
# N = T queries and keys of width d, following the papers' own algorithms step by step:
#
# - standard forward: FlashAttention (Dao et al., 2022, arXiv:2205.14135), Algorithm 0:
#   read Q, K, write S; read S, write P; read P, V, write O.
# - standard backward: the same paper, Appendix B.4, Algorithm 3 (P is kept from the forward
#   pass): read P, dO, write dV; read dO, V, write dP; read P, dP, write dS; read dS, K,
#   write dQ; read dS, Q, write dK.
# - FlashAttention-2 forward (Dao, 2023, arXiv:2307.08691), Algorithm 1: per query block read
#   Q_i once and every K_j, V_j; write O_i and the log-sum-exp L_i.
# - FlashAttention-2 backward, Algorithm 2: D = rowsum(dO ∘ O) (read dO, O; write D);
#   dQ = 0 written; per key block read K_j, V_j and write dK_j, dV_j; for every (key block,
#   query block) pair read Q_i, O_i, dO_i, dQ_i, L_i, D_i and write dQ_i back. S and P are
#   recomputed from Q, K and L instead of read: 2N²d more FLOPs, no N² traffic. (Line 9
#   loads O_i although only D_i is used after line 4; we count the algorithm as written.)
#
# Matrix-product FLOPs: forward 2·2N²d (QKᵀ, PV); backward 4·2N²d (dV, dP, dQ, dK), plus
# 2N²d for the recomputed QKᵀ in FlashAttention-2. Causal masking, which lets both skip
# about half the work, is not counted.


@dataclass(frozen=True)
class Traffic:
    """One pass of one head: HBM ``reads`` and ``writes`` (elements), matrix-product
    ``flops``, and ``saved``: what the forward pass keeps for the backward one (the N x N
    weights P on the standard path, the N log-sum-exps L on FlashAttention-2's)."""

    path: str
    direction: str
    length: int
    width: int
    reads: int
    writes: int
    flops: int
    saved: int

    @property
    def elements(self) -> int:
        """reads + writes."""
        return self.reads + self.writes

    def bytes(self, dtype: str = "float16") -> int:
        return self.elements * itemsize(dtype)


def _blocks(n: int, size: int) -> int:
    return -(-n // size)  # ceil(n / size): the last block may be short


def attention_traffic(
    length: int,
    width: int = 64,
    path: str = "standard",
    direction: str = "backward",
    block_q: int = 128,
    block_k: int = 128,
) -> Traffic:
    """HBM traffic of one head's ``direction`` pass ("forward" or "backward") on ``path``
    ("standard" or "flash2"), counted from the papers' algorithms (see the comment above).

    ``block_q`` (B_r) and ``block_k`` (B_c) are FlashAttention-2's tile sizes;
    the standard path ignores them. Raises ValueError for sizes that are not
    positive integers, or an unknown path or direction.
    """
    n = positive_integer("length", length)
    d = positive_integer("width", width)
    br = positive_integer("block_q", block_q)
    bc = positive_integer("block_k", block_k)
    if path not in ("standard", "flash2"):
        raise ValueError(f"path must be 'standard' or 'flash2', got {path!r}")
    if direction not in ("forward", "backward"):
        raise ValueError(f"direction must be 'forward' or 'backward', got {direction!r}")
    nn, nd = n * n, n * d
    if path == "standard":
        saved = nn  # P, kept for the backward pass
        if direction == "forward":
            # read Q, K | write S | read S | write P | read P, V | write O
            reads, writes, flops = 2 * nd + nn + nn + nd, nn + nn + nd, 4 * nn * d
        else:
            # 1: P, dO -> dV   2: dO, V -> dP   3: P, dP -> dS   4: dS, K -> dQ   5: dS, Q -> dK
            reads = (nn + nd) + 2 * nd + 2 * nn + (nn + nd) + (nn + nd)
            writes = nd + nn + nn + nd + nd
            flops = 8 * nn * d
    else:
        saved = n  # L, one log-sum-exp per query row
        if direction == "forward":
            t_r = _blocks(n, br)
            reads, writes, flops = nd + t_r * 2 * nd, nd + n, 4 * nn * d
        else:
            t_c = _blocks(n, bc)
            per_key_block = 4 * nd + 2 * n  # Q_i, O_i, dO_i, dQ_i and L_i, D_i over all i
            reads = 2 * nd + 2 * nd + t_c * per_key_block  # D's dO, O; K_j, V_j; inner loop
            writes = n + nd + 2 * nd + t_c * nd  # D; dQ = 0; dK_j, dV_j; dQ_i written back
            flops = 10 * nn * d
    return Traffic(path, direction, n, d, reads, writes, flops, saved)


def format_traffic_table(
    lengths: Iterable[int],
    width: int = 64,
    block: int = 128,
    dtype: str = "float16",
) -> str:
    """Per head: the backward pass's HBM traffic, standard against FlashAttention-2, with
    what each forward pass saves for it, in ``dtype`` bytes."""
    size = itemsize(dtype)
    lines = [
        f"backward pass, per head, d = {width}, FlashAttention-2 tiles {block} x {block}, {dtype}",
        f"{'T':>7} {'standard':>11} {'FA-2':>11} {'ratio':>7}   "
        f"{'saved: P (N²)':>14} {'saved: L (N)':>13}",
    ]
    for t in lengths:
        std = attention_traffic(t, width, "standard", "backward")
        fa2 = attention_traffic(t, width, "flash2", "backward", block, block)
        lines.append(
            f"{t:>7} {format_bytes(std.bytes(dtype)):>11} {format_bytes(fa2.bytes(dtype)):>11} "
            f"{std.elements / fa2.elements:>6.1f}x   {format_bytes(std.saved * size):>14} "
            f"{format_bytes(fa2.saved * size):>13}"
        )
    return "\n".join(lines)
