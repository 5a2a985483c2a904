"""FlashAttention-2's backward pass as three Triton kernels.

From the forward pass's output O and its per-row maximum m and log2 of the
row total (log2 units, kept apart so they do not cancel: see
`attention_lib.flash.triton.forward`), the weights of any tile are
recomputed, never stored: ``P = 2^((S·log2 e - m) - log2 total)`` (Dao,
FlashAttention-2, arXiv:2307.08691, algorithm 2, with the log-sum-exp
split in two). With δ = rowsum(dO ∘ O) and S = scale · Q Kᵀ:

    dV = Pᵀ dO        dP = dO Vᵀ        dS = P ∘ (dP - δ)
    dQ = scale · dS K                  dK = scale · dSᵀ Q

- `attention_delta`: δ, one program per BLOCK_M rows (a pass over O and dO).
- `attention_dkdv`: one program per BLOCK_N keys of one key/value head. dK
  and dV for those keys stay in registers while the query rows stream past,
  BLOCK_M at a time, for every query head of the key/value head's group, so
  grouped heads are summed inside the kernel with no expanded copy.
- `attention_dq`: one program per BLOCK_M query rows; dQ stays in registers
  while the keys stream past, BLOCK_N at a time.

Separate dK/dV and dQ programs (rather than atomic adds into dQ) follow
Triton's fused-attention tutorial: each gradient is written once, so the
result does not depend on the order programs finish.

As in the forward pass, exp2 replaces exp with log2(e) folded into the
scale and products accumulate in float32. For 16-bit inputs the weights P
and dS, computed in float32, enter the products dV += Pᵀ dO, dK += dSᵀ Q
and dQ += dS K as two parts in the inputs' dtype each (`split_dot`: hi =
round(x), lo = round(x - hi)): the products stay 16-bit tensor-core
products, and P and dS keep about 22 significant bits in float16 and 16
in bfloat16 (11 and 8 rounded once; PyTorch's CPU kernel keeps them in
float32). FlashAttention rounds them once, which made dK 2.3x PyTorch's
error in lib/tests/kernels/test_triton_flash.py; the cost is two more 16-bit
products per tile in `attention_dkdv` (six, not four) and one in
`attention_dq` (four, not three). The forward pass that hands its output
to these kernels splits its weights in the same way (``for_backward``).
Causal tiles wholly above the diagonal are skipped; tiles that cross it,
or the end of the rows or keys, are masked; the rest load with no mask at
all.

Non-finite inputs follow `attention_lib.nonfinite`'s rule: in a masked tile,
P and dS are 0 wherever a key is hidden (or a row is past the end) whatever
the scores hold, and in the tiles that cross the diagonal the products
dS·K (for dQ) and dSᵀ·Q (for dK) take a hidden non-finite key or query as
0 (`seen_dot`, which splits dS as `split_dot` does), so a NaN reaches only
the gradients of what sees it.
dQ, dK and dV are stored in the dtype of their buffers: the inputs' own,
or float32 where the caller sums them over broadcast dimensions.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .common import key_range, load_tile, operand, rounded, seen_dot, split_dot, store_tile

__all__ = ["attention_delta", "attention_dkdv", "attention_dq"]


@triton.jit
def attention_delta(
    Out, DOut, Delta,
    stride_ob, stride_oh, stride_om, stride_od,
    stride_gb, stride_gh, stride_gm, stride_gd,
    length_q,
    EV: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_M: tl.constexpr,
):  # fmt: skip
    """δ = rowsum(dO ∘ O) in float32 for BLOCK_M rows: grid (cdiv(L, BLOCK_M), H, B).

    Out and DOut (B, H, L, Ev) any strides; Delta (B, H, L) contiguous float32.
    """
    h = tl.program_id(1).to(tl.int64)
    b = tl.program_id(2).to(tl.int64)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    in_rows = rows < length_q  # (BLOCK_M,)
    dims_v = tl.arange(0, HEAD_DIM_V)  # (HEAD_DIM_V,)
    in_dims = dims_v < EV  # (HEAD_DIM_V,)
    pad = EV < HEAD_DIM_V
    Out += b * stride_ob + h * stride_oh
    DOut += b * stride_gb + h * stride_gh
    o = load_tile(
        Out + rows[:, None] * stride_om + dims_v[None, :] * stride_od, in_rows, in_dims, True, pad
    )  # (BLOCK_M, HEAD_DIM_V)
    do = load_tile(
        DOut + rows[:, None] * stride_gm + dims_v[None, :] * stride_gd, in_rows, in_dims, True, pad
    )  # (BLOCK_M, HEAD_DIM_V)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)  # (BLOCK_M,)
    tl.store(Delta + (b * tl.num_programs(1) + h) * length_q + rows, delta, mask=in_rows)


@triton.jit
def _dkdv_rows(
    dk, dv, k, v, Q, DO, RowMax, LogTotal, Delta,
    stride_qm, stride_qd, stride_gm, stride_gd,
    cols, start, stop, length_q, qk_scale,
    E: tl.constexpr, EV: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
    BLOCK_M: tl.constexpr, EDGE: tl.constexpr, IS_CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):  # fmt: skip
    """Add the query rows [start, stop) of one head to dK and dV (kept transposed-free).

    k (BLOCK_N, HEAD_DIM), v (BLOCK_N, HEAD_DIM_V) are this program's keys;
    ``EDGE`` row tiles may cross the diagonal or the end of the rows.
    """
    DTYPE = DO.dtype.element_ty  # the inputs' dtype, which P and dS are split into
    dims = tl.arange(0, HEAD_DIM)  # (HEAD_DIM,)
    dims_v = tl.arange(0, HEAD_DIM_V)  # (HEAD_DIM_V,)
    for r0 in range(start, stop, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query index
        in_rows = rows < length_q  # (BLOCK_M,)
        q_t = load_tile(
            Q + dims[:, None] * stride_qd + rows[None, :] * stride_qm,
            dims < E, in_rows, E < HEAD_DIM, EDGE,
        )  # fmt: skip  # (HEAD_DIM, BLOCK_M), Q^T
        q_t = operand(q_t, WIDEN)  # (HEAD_DIM, BLOCK_M)
        if EDGE:  # rows past the end: m = inf makes their weights 0
            row_max = tl.load(RowMax + rows, mask=in_rows, other=float("inf"))  # (BLOCK_M,)
            log_total = tl.load(LogTotal + rows, mask=in_rows, other=0.0)  # (BLOCK_M,)
            delta = tl.load(Delta + rows, mask=in_rows, other=0.0)  # (BLOCK_M,)
        else:
            row_max = tl.load(RowMax + rows)  # (BLOCK_M,), log2 units
            log_total = tl.load(LogTotal + rows)  # (BLOCK_M,), log2 units
            delta = tl.load(Delta + rows)  # (BLOCK_M,)
        s_t = tl.dot(k, q_t, input_precision=PRECISION) * qk_scale  # (BLOCK_N, BLOCK_M), log2
        p_t = tl.math.exp2((s_t - row_max[None, :]) - log_total[None, :])  # (BLOCK_N, BLOCK_M)
        if EDGE:  # hidden keys and rows past the end: exactly 0, whatever the scores hold
            keep_t = in_rows[None, :] & (cols[:, None] >= 0)  # (BLOCK_N, BLOCK_M)
            if IS_CAUSAL:
                keep_t = keep_t & (cols[:, None] <= rows[None, :])  # (BLOCK_N, BLOCK_M)
            p_t = tl.where(keep_t, p_t, 0.0)  # (BLOCK_N, BLOCK_M), weights P^T
        do = load_tile(
            DO + rows[:, None] * stride_gm + dims_v[None, :] * stride_gd,
            in_rows, dims_v < EV, EDGE, EV < HEAD_DIM_V,
        )  # fmt: skip  # (BLOCK_M, HEAD_DIM_V)
        do = operand(do, WIDEN)  # (BLOCK_M, HEAD_DIM_V)
        # P^T and dS^T enter the products as two 16-bit parts each (`split_dot`): PyTorch
        # keeps them in float32, and rounded once they cost up to 2.3x its error in dK
        dv = split_dot(p_t, do, dv, DTYPE, WIDEN, PRECISION, 2)  # (BLOCK_N, HEAD_DIM_V), += P^T dO
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)  # (BLOCK_N, BLOCK_M), (dO V^T)^T
        ds_t = p_t * (dp_t - delta[None, :])  # (BLOCK_N, BLOCK_M), dS^T / scale
        if EDGE:  # 0 x NaN where a hidden value made dP NaN
            ds_t = tl.where(keep_t, ds_t, 0.0)  # (BLOCK_N, BLOCK_M)
        q = tl.trans(q_t)  # (BLOCK_M, HEAD_DIM)
        if EDGE and IS_CAUSAL:  # a hidden query row may hold NaN
            dk = seen_dot(ds_t, q, dk, keep_t, DTYPE, WIDEN, PRECISION, 2)  # (BLOCK_N, HEAD_DIM)
        else:
            dk = split_dot(ds_t, q, dk, DTYPE, WIDEN, PRECISION, 2)  # (BLOCK_N, HEAD_DIM), dS^T Q
    return dk, dv


@triton.jit
def attention_dkdv(
    Q, K, V, DO, RowMax, LogTotal, Delta, DK, DV,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_gb, stride_gh, stride_gm, stride_gd,
    stride_dkb, stride_dkh, stride_dkn, stride_dkd,
    stride_dvb, stride_dvh, stride_dvn, stride_dvd,
    heads, group, length_q, length_k, scale, qk_scale,
    E: tl.constexpr, EV: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):  # fmt: skip
    """dK and dV for BLOCK_N keys of one key/value head: grid (cdiv(S, BLOCK_N), Hkv, B).

    Q and DO (B, H, L, ·), K, V, DK, DV (B, Hkv, S, ·), any strides; RowMax,
    LogTotal and Delta (B, H, L) contiguous float32. Key/value head j
    collects the gradients of query heads j·group ... j·group + group - 1.
    """
    h_kv = tl.program_id(1).to(tl.int64)
    b = tl.program_id(2).to(tl.int64)
    n0 = tl.program_id(0) * BLOCK_N
    cols = n0 + tl.arange(0, BLOCK_N)  # (BLOCK_N,) key index
    in_keys = cols < length_k  # (BLOCK_N,)
    dims = tl.arange(0, HEAD_DIM)  # (HEAD_DIM,)
    dims_v = tl.arange(0, HEAD_DIM_V)  # (HEAD_DIM_V,)
    k = load_tile(
        K + b * stride_kb + h_kv * stride_kh + cols[:, None] * stride_kn
        + dims[None, :] * stride_kd,
        in_keys, dims < E, True, E < HEAD_DIM,
    )  # fmt: skip  # (BLOCK_N, HEAD_DIM)
    v = load_tile(
        V + b * stride_vb + h_kv * stride_vh + cols[:, None] * stride_vn
        + dims_v[None, :] * stride_vd,
        in_keys, dims_v < EV, True, EV < HEAD_DIM_V,
    )  # fmt: skip  # (BLOCK_N, HEAD_DIM_V)
    k = operand(k, WIDEN)  # (BLOCK_N, HEAD_DIM)
    v = operand(v, WIDEN)  # (BLOCK_N, HEAD_DIM_V)
    dk = tl.zeros((BLOCK_N, HEAD_DIM), tl.float32)  # (BLOCK_N, HEAD_DIM)
    dv = tl.zeros((BLOCK_N, HEAD_DIM_V), tl.float32)  # (BLOCK_N, HEAD_DIM_V)

    # causal: rows before n0 see none of these keys; rows from n0 + BLOCK_N - 1 on see them all
    if IS_CAUSAL:
        start = n0
        diagonal = tl.minimum(n0 + tl.cdiv(BLOCK_N, BLOCK_M) * BLOCK_M, length_q)
    else:
        start = 0
        diagonal = 0
    inner = diagonal + tl.maximum(length_q - diagonal, 0) // BLOCK_M * BLOCK_M
    for g in range(0, group):
        h = h_kv * group + g  # a query head of this key/value head's group
        Qh = Q + b * stride_qb + h * stride_qh
        DOh = DO + b * stride_gb + h * stride_gh
        RowMax_h = RowMax + (b * heads + h) * length_q
        LogTotal_h = LogTotal + (b * heads + h) * length_q
        Delta_h = Delta + (b * heads + h) * length_q
        if IS_CAUSAL:  # the row tiles that cross the diagonal
            dk, dv = _dkdv_rows(
                dk, dv, k, v, Qh, DOh, RowMax_h, LogTotal_h, Delta_h,
                stride_qm, stride_qd, stride_gm, stride_gd,
                cols, start, diagonal, length_q, qk_scale,
                E=E, EV=EV, HEAD_DIM=HEAD_DIM, HEAD_DIM_V=HEAD_DIM_V, BLOCK_M=BLOCK_M,
                EDGE=True, IS_CAUSAL=IS_CAUSAL, PRECISION=PRECISION, WIDEN=WIDEN,
            )  # fmt: skip
        dk, dv = _dkdv_rows(
            dk, dv, k, v, Qh, DOh, RowMax_h, LogTotal_h, Delta_h,
            stride_qm, stride_qd, stride_gm, stride_gd,
            cols, tl.maximum(start, diagonal), inner, length_q, qk_scale,
            E=E, EV=EV, HEAD_DIM=HEAD_DIM, HEAD_DIM_V=HEAD_DIM_V, BLOCK_M=BLOCK_M,
            EDGE=False, IS_CAUSAL=IS_CAUSAL, PRECISION=PRECISION, WIDEN=WIDEN,
        )  # fmt: skip
        dk, dv = _dkdv_rows(
            dk, dv, k, v, Qh, DOh, RowMax_h, LogTotal_h, Delta_h,
            stride_qm, stride_qd, stride_gm, stride_gd,
            cols, tl.maximum(start, inner), length_q, length_q, qk_scale,
            E=E, EV=EV, HEAD_DIM=HEAD_DIM, HEAD_DIM_V=HEAD_DIM_V, BLOCK_M=BLOCK_M,
            EDGE=True, IS_CAUSAL=IS_CAUSAL, PRECISION=PRECISION, WIDEN=WIDEN,
        )  # fmt: skip

    dk = dk * scale  # (BLOCK_N, HEAD_DIM)
    store_tile(
        DK + b * stride_dkb + h_kv * stride_dkh + cols[:, None] * stride_dkn
        + dims[None, :] * stride_dkd,
        rounded(dk, DK.dtype.element_ty, WIDEN).to(DK.dtype.element_ty),
        in_keys, dims < E, True, E < HEAD_DIM,
    )  # fmt: skip
    store_tile(
        DV + b * stride_dvb + h_kv * stride_dvh + cols[:, None] * stride_dvn
        + dims_v[None, :] * stride_dvd,
        rounded(dv, DV.dtype.element_ty, WIDEN).to(DV.dtype.element_ty),
        in_keys, dims_v < EV, True, EV < HEAD_DIM_V,
    )  # fmt: skip


@triton.jit
def _dq_keys(
    dq, q, do, row_max, log_total, delta, K, V,
    stride_kn, stride_kd, stride_vn, stride_vd,
    rows, start, stop, length_k, qk_scale,
    E: tl.constexpr, EV: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
    BLOCK_N: tl.constexpr, EDGE: tl.constexpr, IS_CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):  # fmt: skip
    """Add the key tiles starting in [start, stop) to dQ / scale (BLOCK_M, HEAD_DIM)."""
    DTYPE = K.dtype.element_ty  # the inputs' dtype, which dS is split into
    dims = tl.arange(0, HEAD_DIM)  # (HEAD_DIM,)
    dims_v = tl.arange(0, HEAD_DIM_V)  # (HEAD_DIM_V,)
    for k0 in range(start, stop, BLOCK_N):
        cols = k0 + tl.arange(0, BLOCK_N)  # (BLOCK_N,) key index
        in_keys = cols < length_k  # (BLOCK_N,)
        k_t = load_tile(
            K + dims[:, None] * stride_kd + cols[None, :] * stride_kn,
            dims < E, in_keys, E < HEAD_DIM, EDGE,
        )  # fmt: skip  # (HEAD_DIM, BLOCK_N), K^T
        v_t = load_tile(
            V + dims_v[:, None] * stride_vd + cols[None, :] * stride_vn,
            dims_v < EV, in_keys, EV < HEAD_DIM_V, EDGE,
        )  # fmt: skip  # (HEAD_DIM_V, BLOCK_N), V^T
        k_t = operand(k_t, WIDEN)  # (HEAD_DIM, BLOCK_N)
        s = tl.dot(q, k_t, input_precision=PRECISION) * qk_scale  # (BLOCK_M, BLOCK_N), log2
        p = tl.math.exp2((s - row_max[:, None]) - log_total[:, None])  # (BLOCK_M, BLOCK_N)
        if EDGE:  # hidden keys: exactly 0, whatever their scores hold
            keep = in_keys[None, :] & (rows[:, None] >= 0)  # (BLOCK_M, BLOCK_N)
            if IS_CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])  # (BLOCK_M, BLOCK_N)
            p = tl.where(keep, p, 0.0)  # (BLOCK_M, BLOCK_N)
        dp = tl.dot(do, operand(v_t, WIDEN), input_precision=PRECISION)  # (BLOCK_M, BLOCK_N)
        ds = p * (dp - delta[:, None])  # (BLOCK_M, BLOCK_N), dS / scale
        if EDGE:  # 0 x NaN where a hidden value made dP NaN
            ds = tl.where(keep, ds, 0.0)  # (BLOCK_M, BLOCK_N)
        # dS enters the product as two 16-bit parts (`split_dot`), as in `_dkdv_rows`
        k = tl.trans(k_t)  # (BLOCK_N, HEAD_DIM)
        if EDGE and IS_CAUSAL:  # a hidden key may hold NaN
            dq = seen_dot(ds, k, dq, keep, DTYPE, WIDEN, PRECISION, 2)  # (BLOCK_M, HEAD_DIM)
        else:
            dq = split_dot(ds, k, dq, DTYPE, WIDEN, PRECISION, 2)  # (BLOCK_M, HEAD_DIM), dS K
    return dq


@triton.jit
def attention_dq(
    Q, K, V, DO, RowMax, LogTotal, Delta, DQ,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_gb, stride_gh, stride_gm, stride_gd,
    stride_dqb, stride_dqh, stride_dqm, stride_dqd,
    group, length_q, length_k, scale, qk_scale,
    E: tl.constexpr, EV: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):  # fmt: skip
    """dQ for BLOCK_M query rows of one head: grid (cdiv(L, BLOCK_M), H, B).

    Q, DO, DQ (B, H, L, ·), K, V (B, Hkv, S, ·), any strides; RowMax,
    LogTotal and Delta (B, H, L) contiguous float32.
    """
    block = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    b = tl.program_id(2).to(tl.int64)
    h_kv = h // group
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query index
    in_rows = rows < length_q  # (BLOCK_M,)
    dims = tl.arange(0, HEAD_DIM)  # (HEAD_DIM,)
    dims_v = tl.arange(0, HEAD_DIM_V)  # (HEAD_DIM_V,)
    q = load_tile(
        Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qm + dims[None, :] * stride_qd,
        in_rows, dims < E, True, E < HEAD_DIM,
    )  # fmt: skip  # (BLOCK_M, HEAD_DIM)
    do = load_tile(
        DO + b * stride_gb + h * stride_gh + rows[:, None] * stride_gm
        + dims_v[None, :] * stride_gd,
        in_rows, dims_v < EV, True, EV < HEAD_DIM_V,
    )  # fmt: skip  # (BLOCK_M, HEAD_DIM_V)
    row_stats = (b * tl.num_programs(1) + h) * length_q + rows  # (BLOCK_M,)
    row_max = tl.load(RowMax + row_stats, mask=in_rows, other=float("inf"))  # (BLOCK_M,), log2
    log_total = tl.load(LogTotal + row_stats, mask=in_rows, other=0.0)  # (BLOCK_M,), log2
    delta = tl.load(Delta + row_stats, mask=in_rows, other=0.0)  # (BLOCK_M,)
    q = operand(q, WIDEN)  # (BLOCK_M, HEAD_DIM)
    do = operand(do, WIDEN)  # (BLOCK_M, HEAD_DIM_V)
    dq = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)  # (BLOCK_M, HEAD_DIM)

    K += b * stride_kb + h_kv * stride_kh
    V += b * stride_vb + h_kv * stride_vh
    inner, stop = key_range(block, length_k, BLOCK_M, BLOCK_N, IS_CAUSAL)
    dq = _dq_keys(
        dq, q, do, row_max, log_total, delta, K, V, stride_kn, stride_kd, stride_vn, stride_vd,
        rows, 0, inner, length_k, qk_scale,
        E=E, EV=EV, HEAD_DIM=HEAD_DIM, HEAD_DIM_V=HEAD_DIM_V, BLOCK_N=BLOCK_N,
        EDGE=False, IS_CAUSAL=IS_CAUSAL, PRECISION=PRECISION, WIDEN=WIDEN,
    )  # fmt: skip
    dq = _dq_keys(
        dq, q, do, row_max, log_total, delta, K, V, stride_kn, stride_kd, stride_vn, stride_vd,
        rows, inner, stop, length_k, qk_scale,
        E=E, EV=EV, HEAD_DIM=HEAD_DIM, HEAD_DIM_V=HEAD_DIM_V, BLOCK_N=BLOCK_N,
        EDGE=True, IS_CAUSAL=IS_CAUSAL, PRECISION=PRECISION, WIDEN=WIDEN,
    )  # fmt: skip
    dq = dq * scale  # (BLOCK_M, HEAD_DIM)
    store_tile(
        DQ + b * stride_dqb + h * stride_dqh + rows[:, None] * stride_dqm
        + dims[None, :] * stride_dqd,
        rounded(dq, DQ.dtype.element_ty, WIDEN).to(DQ.dtype.element_ty),
        in_rows, dims < E, True, E < HEAD_DIM,
    )  # fmt: skip
