"""FlashAttention's forward pass as a Triton kernel.

The kernel is the loop of `attention_lib.flash.loop` written for a GPU: one
program per (block of BLOCK_M query rows, head, batch entry), walking the
keys BLOCK_N at a time and keeping the same running quantities per row:

    m      the largest score seen so far, in log2 units    (BLOCK_M,)
    total  the sum of 2^(score - m) so far (the papers' l)  (BLOCK_M,)
    acc    the sum of 2^(score - m) * value so far          (BLOCK_M, HEAD_DIM_V)

The GPU's fast exponential is base 2, so log2(e) is folded into the scale
once (``qk_scale = scale * log2(e)``) and ``exp2`` replaces ``exp``:
2^(x·log2 e) = e^x, the same weights. Products are accumulated in float32
whatever the input dtype (float16, bfloat16 or float32); the output is
rounded once, at the end. Each program also writes two numbers per row for
the backward pass, in the same log2 units: the row's maximum ``m`` and
``log2(total)``. The backward pass recomputes the weights as
``2^((s - m) - log2(total))``. Kept apart, they do not cancel: their sum,
the log-sum-exp, would be rounded at the size of ``m``, and at |s| = 1e9
float32's spacing (128 in log2 units) swallows log2(total) whole (a padding
row's weights come back as 1 instead of 1/S); at |s| in the hundreds it
costs a relative 1e-4 in every weight. ``s - m`` is exact near the maximum.

For 16-bit inputs the weights P enter P V in the inputs' dtype: rounded
once (PARTS = 1), as FlashAttention does, when no gradient is wanted, or
as two 16-bit parts (PARTS = 2, `split_dot`) when the output will be
differentiated. The backward pass reads O back in δ = rowsum(dO ∘ O), and
O from weights rounded once gave dK 3.2x PyTorch's error (its CPU kernel
keeps the weights in float32; lib/tests/kernels/test_triton_flash.py). The two
outputs can differ in the last bit.

Non-finite inputs follow `attention_lib.nonfinite`'s rule. A hidden score
(causal, in the tiles that cross the diagonal) is replaced by -inf whatever
it holds; a non-finite value there is kept out of the weighted sum (0 × NaN
would be NaN): when the tile's values hold one, the product takes them as
0 and a second product counts, per output entry, the non-finite values it
sees, making those entries NaN. Tiles wholly below the diagonal see every
key and need no such care; finite values skip it at the cost of one check.

Causal attention (top-left aligned, as in PyTorch, also for L != S) visits
the key tiles in two stages, as Triton's fused-attention tutorial does: the
tiles wholly below the diagonal and inside the keys with no mask at all,
then the tiles that cross the diagonal or the end of the keys, masked. Tiles
wholly above the diagonal are never visited. Head widths up to 256 are
padded to a power of two (at least 16, the smallest matrix-product tile)
with masked loads, compiled away when the width is already a power of two.

Every tensor comes with its own four strides (batch, head, row, feature),
so the kernel reads transposed, sliced or broadcast (stride 0) inputs as
they are, and grouped-query heads by index: query head h reads key/value
head h // group.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .common import key_range, load_tile, operand, rounded, seen_dot, split_dot

__all__ = ["attention_forward"]


@triton.jit
def _visit_key_tiles(
    acc, total, m, q, K, V,
    stride_kn, stride_kd, stride_vn, stride_vd,
    rows, start, stop, length_k, qk_scale,
    E: tl.constexpr, EV: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
    BLOCK_N: tl.constexpr, EDGE: tl.constexpr, IS_CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr, PARTS: tl.constexpr,
):  # fmt: skip
    """The online softmax over the key tiles starting in [start, stop).

    ``EDGE`` tiles may cross the diagonal (causal) or the end of the keys:
    their loads and scores are masked. Other tiles need no mask.
    """
    dims = tl.arange(0, HEAD_DIM)  # (HEAD_DIM,) query/key feature index
    dims_v = tl.arange(0, HEAD_DIM_V)  # (HEAD_DIM_V,) value feature index
    for k0 in range(start, stop, BLOCK_N):
        cols = k0 + tl.arange(0, BLOCK_N)  # (BLOCK_N,) key index
        in_keys = cols < length_k  # (BLOCK_N,)
        k_t = load_tile(
            K + dims[:, None] * stride_kd + cols[None, :] * stride_kn,
            dims < E, in_keys, E < HEAD_DIM, EDGE,
        )  # fmt: skip  # (HEAD_DIM, BLOCK_N), K^T
        s = tl.dot(q, operand(k_t, WIDEN), input_precision=PRECISION)  # (BLOCK_M, BLOCK_N)
        s = s * qk_scale  # (BLOCK_M, BLOCK_N), log2 units
        if EDGE:
            keep = in_keys[None, :]  # (1, BLOCK_N)
            if IS_CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])  # (BLOCK_M, BLOCK_N)
            s = tl.where(keep, s, float("-inf"))  # (BLOCK_M, BLOCK_N)
        m_new = tl.maximum(m, tl.max(s, 1))  # (BLOCK_M,)
        # a row with every key so far masked has m_new = -inf; shift it by 0
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # (BLOCK_M,)
        p = tl.math.exp2(s - shift[:, None])  # (BLOCK_M, BLOCK_N)
        rescale = tl.math.exp2(m - shift)  # (BLOCK_M,), 2^(old max - new max) <= 1
        total = rescale * total + tl.sum(p, 1)  # (BLOCK_M,)
        v = load_tile(
            V + cols[:, None] * stride_vn + dims_v[None, :] * stride_vd,
            in_keys, dims_v < EV, EDGE, EV < HEAD_DIM_V,
        )  # fmt: skip  # (BLOCK_N, HEAD_DIM_V)
        acc = acc * rescale[:, None]  # (BLOCK_M, HEAD_DIM_V)
        v = operand(v, WIDEN)  # (BLOCK_N, HEAD_DIM_V)
        # p in PARTS 16-bit parts: once, as FlashAttention rounds it, or two for a backward pass
        if EDGE and IS_CAUSAL:  # hidden values in this tile: no 0 x NaN
            acc = seen_dot(p, v, acc, keep, V.dtype.element_ty, WIDEN, PRECISION, PARTS)  # + p @ v
        else:
            acc = split_dot(p, v, acc, V.dtype.element_ty, WIDEN, PRECISION, PARTS)  # + p @ v
        m = m_new
    return acc, total, m


@triton.jit
def attention_forward(
    Q, K, V, Out, RowMax, LogTotal,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    group, length_q, length_k, qk_scale,
    E: tl.constexpr, EV: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr, PARTS: tl.constexpr,
):  # fmt: skip
    """One program: the output and row statistics of BLOCK_M query rows of one (batch, head).

    Grid (cdiv(L, BLOCK_M), H, B). Out (B, H, L, Ev) any strides; RowMax and
    LogTotal (B, H, L) contiguous float32, in log2 units: each row's largest
    score m and log2 of its sum of 2^(score - m). PARTS: 1 or 2, how the
    weights enter P V (`split_dot`).
    """
    block = tl.program_id(0)  # which block of query rows
    h = tl.program_id(1).to(tl.int64)  # query head
    b = tl.program_id(2).to(tl.int64)  # batch entry
    h_kv = h // group  # grouped-query attention: `group` query heads share a key/value head
    Q += b * stride_qb + h * stride_qh
    K += b * stride_kb + h_kv * stride_kh
    V += b * stride_vb + h_kv * stride_vh
    Out += b * stride_ob + h * stride_oh
    row_stats = (b * tl.num_programs(1) + h) * length_q
    RowMax += row_stats
    LogTotal += row_stats

    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query index
    in_rows = rows < length_q  # (BLOCK_M,)
    dims = tl.arange(0, HEAD_DIM)  # (HEAD_DIM,)
    dims_v = tl.arange(0, HEAD_DIM_V)  # (HEAD_DIM_V,)
    q = load_tile(
        Q + rows[:, None] * stride_qm + dims[None, :] * stride_qd,
        in_rows, dims < E, True, E < HEAD_DIM,
    )  # fmt: skip  # (BLOCK_M, HEAD_DIM)
    q = operand(q, WIDEN)  # (BLOCK_M, HEAD_DIM)
    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)  # (BLOCK_M,)
    total = tl.zeros((BLOCK_M,), tl.float32)  # (BLOCK_M,)
    acc = tl.zeros((BLOCK_M, HEAD_DIM_V), tl.float32)  # (BLOCK_M, HEAD_DIM_V)

    inner, stop = key_range(block, length_k, BLOCK_M, BLOCK_N, IS_CAUSAL)
    acc, total, m = _visit_key_tiles(
        acc, total, m, q, K, V, stride_kn, stride_kd, stride_vn, stride_vd,
        rows, 0, inner, length_k, qk_scale,
        E=E, EV=EV, HEAD_DIM=HEAD_DIM, HEAD_DIM_V=HEAD_DIM_V, BLOCK_N=BLOCK_N,
        EDGE=False, IS_CAUSAL=IS_CAUSAL, PRECISION=PRECISION, WIDEN=WIDEN,
        PARTS=PARTS,
    )  # fmt: skip
    acc, total, m = _visit_key_tiles(
        acc, total, m, q, K, V, stride_kn, stride_kd, stride_vn, stride_vd,
        rows, inner, stop, length_k, qk_scale,
        E=E, EV=EV, HEAD_DIM=HEAD_DIM, HEAD_DIM_V=HEAD_DIM_V, BLOCK_N=BLOCK_N,
        EDGE=True, IS_CAUSAL=IS_CAUSAL, PRECISION=PRECISION, WIDEN=WIDEN,
        PARTS=PARTS,
    )  # fmt: skip

    empty = total == 0.0  # (BLOCK_M,): no key at all (S = 0 is not launched; kept for safety)
    out = acc / tl.where(empty, 1.0, total)[:, None]  # (BLOCK_M, HEAD_DIM_V)
    # an empty row gets m = inf: the backward pass's 2^(s - m) is then 0
    row_max = tl.where(empty, float("inf"), m)  # (BLOCK_M,), log2 units
    log_total = tl.where(empty, 0.0, tl.math.log2(total))  # (BLOCK_M,), log2 units
    out = rounded(out, Out.dtype.element_ty, WIDEN).to(Out.dtype.element_ty)  # (BLOCK_M, Ev)
    tl.store(
        Out + rows[:, None] * stride_om + dims_v[None, :] * stride_od,
        out,
        mask=in_rows[:, None] & (dims_v[None, :] < EV),
    )
    tl.store(RowMax + rows, row_max, mask=in_rows)
    tl.store(LogTotal + rows, log_total, mask=in_rows)
