"""FlashAttention's forward pass as a Triton kernel.

The kernel is the loop of `attention_lib.flash.loop` written for a GPU: one
program per (block of BLOCK_M query rows, batch entry and head), walking the
keys BLOCK_N at a time and keeping the same running quantities per row:

    m      the largest score seen so far, in log2 units    (BLOCK_M,)
    total  the sum of 2^(score - m) so far (the papers' l)  (BLOCK_M,)
    acc    the sum of 2^(score - m) * value so far          (BLOCK_M, HEAD_DIM_V)

The GPU's fast exponential is base 2, so log2(e) is folded into the scale
once (``qk_scale = scale * log2(e)``) and ``exp2`` replaces ``exp``:
2^(x·log2 e) = e^x, the same weights. Products are accumulated in float32
whatever the input dtype (float16, bfloat16 or float32); the output is
rounded once, at the end. Each program also writes its rows' log-sum-exp
(natural log), which the backward pass recomputes the weights from.

Causal attention (top-left aligned, as in PyTorch, also for L != S) visits
the key tiles in two stages, as Triton's fused-attention tutorial does: the
tiles wholly below the diagonal with no mask at all, then the tiles that
cross the diagonal or the end of the keys, masked. Tiles wholly above the
diagonal are never visited. Head widths up to 256 are padded to a power of
two (at least 16, the smallest matrix-product tile) with masked loads; any
L and S work, the edges handled by masked loads and stores.

Not handled here: ``attn_mask`` (a (..., L, S) mask broadcast over several
batch dimensions has no single stride per program; `flash_attention` runs
masked calls on the torch tiled path instead), float64, dropout. Gradients:
`TritonAttention.backward` reuses the torch tiled backward pass
(`attention_lib.flash.autograd.tiled_backward`) with the log-sum-exp this
kernel saved.

On the CPU the same kernel source runs in Triton's interpreter when
TRITON_INTERPRET=1 is set before triton is imported (the tests do so in a
child process). Importing this module imports torch and triton; the rest of
the library imports it only when the Triton path is asked for.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch
import triton
import triton.language as tl

from ..backend import prod
from ..inputs import AttentionSpec
from .autograd import TORCH_BLOCK_K, TORCH_BLOCK_Q, tiled_backward

__all__ = ["INTERPRETED", "MAX_HEAD_DIM", "TritonAttention", "refusal", "triton_attention"]

LOG2E = 1.4426950408889634  # log2(e): e^x = 2^(x·log2 e)
LN2 = 0.6931471805599453  # ln(2): turns a log2 back into a natural log
MAX_HEAD_DIM = 256
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _operand(x, WIDEN: tl.constexpr):
    """A matrix-product operand as loaded, or widened to float32 (see `_widen_bfloat16`)."""
    if WIDEN:
        x = x.to(tl.float32)
    return x


@triton.jit
def _rounded(x, DTYPE: tl.constexpr, WIDEN: tl.constexpr):
    """float32 ``x`` rounded to DTYPE, to nearest with ties to even.

    With WIDEN (bfloat16 in Triton's interpreter, whose float32 -> bfloat16
    cast truncates) the rounding is done on the bits and the result, exactly
    a bfloat16 number, stays in float32.
    """
    if WIDEN:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.to(tl.float32, bitcast=True)
    else:
        return x.to(DTYPE)


@triton.jit
def _visit_key_tiles(
    acc,
    total,
    m,
    q,
    K,
    V,
    stride_kn,
    stride_kd,
    stride_vn,
    stride_vd,
    rows,
    start,
    stop,
    length_k,
    qk_scale,
    E: tl.constexpr,
    EV: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_V: tl.constexpr,
    BLOCK_N: tl.constexpr,
    EDGE: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
    WIDEN: tl.constexpr,
):
    """The online softmax over the key tiles starting in [start, stop).

    ``EDGE`` tiles may cross the diagonal (causal) or the end of the keys:
    their scores are masked. Other tiles need no mask.
    """
    dims = tl.arange(0, HEAD_DIM)  # (HEAD_DIM,) query/key feature index
    dims_v = tl.arange(0, HEAD_DIM_V)  # (HEAD_DIM_V,) value feature index
    for k0 in range(start, stop, BLOCK_N):
        cols = k0 + tl.arange(0, BLOCK_N)  # (BLOCK_N,) key index
        in_keys = cols < length_k  # (BLOCK_N,), all true outside EDGE tiles
        k_t = tl.load(
            K + cols[None, :] * stride_kn + dims[:, None] * stride_kd,
            mask=in_keys[None, :] & (dims[:, None] < E),
            other=0.0,
        )  # (HEAD_DIM, BLOCK_N), K^T
        s = (
            tl.dot(q, _operand(k_t, WIDEN), input_precision=PRECISION) * qk_scale
        )  # (BLOCK_M, BLOCK_N), log2 units
        if EDGE:
            keep = in_keys[None, :]  # (1, BLOCK_N)
            if IS_CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])  # (BLOCK_M, BLOCK_N)
            s = tl.where(keep, s, float("-inf"))  # (BLOCK_M, BLOCK_N)
        m_new = tl.maximum(m, tl.max(s, 1))  # (BLOCK_M,)
        # a row with every key so far masked has m_new = -inf; shift it by 0
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # (BLOCK_M,)
        p = tl.exp2(s - shift[:, None])  # (BLOCK_M, BLOCK_N)
        rescale = tl.exp2(m - shift)  # (BLOCK_M,), 2^(old max - new max) <= 1
        total = rescale * total + tl.sum(p, 1)  # (BLOCK_M,)
        v = tl.load(
            V + cols[:, None] * stride_vn + dims_v[None, :] * stride_vd,
            mask=in_keys[:, None] & (dims_v[None, :] < EV),
            other=0.0,
        )  # (BLOCK_N, HEAD_DIM_V)
        acc = acc * rescale[:, None]  # (BLOCK_M, HEAD_DIM_V)
        p = _rounded(p, V.dtype.element_ty, WIDEN)  # to the inputs' dtype, as FlashAttention does
        acc = tl.dot(p, _operand(v, WIDEN), acc, input_precision=PRECISION)  # acc + p @ v
        m = m_new
    return acc, total, m


@triton.jit
def _flash_forward(
    Q,
    K,
    V,
    Out,
    Lse,
    stride_qb,
    stride_qh,
    stride_qm,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vn,
    stride_vd,
    stride_ob,
    stride_oh,
    stride_om,
    stride_od,
    heads,
    group,
    length_q,
    length_k,
    qk_scale,
    E: tl.constexpr,
    EV: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_V: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
    WIDEN: tl.constexpr,
):
    """One program: the output and log-sum-exp of BLOCK_M query rows of one (batch, head)."""
    block = tl.program_id(0)  # which block of query rows
    batch_head = tl.program_id(1)  # which (batch, head) pair
    b = (batch_head // heads).to(tl.int64)
    h = (batch_head % heads).to(tl.int64)
    h_kv = h // group  # grouped-query attention: `group` query heads share a key/value head
    Q += b * stride_qb + h * stride_qh
    K += b * stride_kb + h_kv * stride_kh
    V += b * stride_vb + h_kv * stride_vh
    Out += b * stride_ob + h * stride_oh

    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query index
    dims = tl.arange(0, HEAD_DIM)  # (HEAD_DIM,)
    dims_v = tl.arange(0, HEAD_DIM_V)  # (HEAD_DIM_V,)
    q = tl.load(
        Q + rows[:, None] * stride_qm + dims[None, :] * stride_qd,
        mask=(rows[:, None] < length_q) & (dims[None, :] < E),
        other=0.0,
    )  # (BLOCK_M, HEAD_DIM)
    q = _operand(q, WIDEN)  # (BLOCK_M, HEAD_DIM)
    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)  # (BLOCK_M,)
    total = tl.zeros((BLOCK_M,), tl.float32)  # (BLOCK_M,)
    acc = tl.zeros((BLOCK_M, HEAD_DIM_V), tl.float32)  # (BLOCK_M, HEAD_DIM_V)

    if IS_CAUSAL:
        # rows [r0, r0 + BLOCK_M) see keys up to their own index: none from r0 + BLOCK_M on,
        # every key before r0
        stop = tl.minimum(length_k, (block + 1) * BLOCK_M)
        below = tl.minimum(stop, block * BLOCK_M)
    else:
        stop = length_k
        below = length_k
    inner = below // BLOCK_N * BLOCK_N  # key tiles before this need no mask
    acc, total, m = _visit_key_tiles(
        acc, total, m, q, K, V, stride_kn, stride_kd, stride_vn, stride_vd,
        rows, 0, inner, length_k, qk_scale,
        E, EV, HEAD_DIM, HEAD_DIM_V, BLOCK_N, False, IS_CAUSAL, PRECISION, WIDEN,
    )  # fmt: skip
    acc, total, m = _visit_key_tiles(
        acc, total, m, q, K, V, stride_kn, stride_kd, stride_vn, stride_vd,
        rows, inner, stop, length_k, qk_scale,
        E, EV, HEAD_DIM, HEAD_DIM_V, BLOCK_N, True, IS_CAUSAL, PRECISION, WIDEN,
    )  # fmt: skip

    empty = total == 0.0  # (BLOCK_M,): no key at all (S = 0)
    out = acc / tl.where(empty, 1.0, total)[:, None]  # (BLOCK_M, HEAD_DIM_V)
    lse = tl.where(empty, float("inf"), (m + tl.log2(total)) * LN2)  # (BLOCK_M,), natural log
    in_rows = rows < length_q  # (BLOCK_M,)
    tl.store(
        Out + rows[:, None] * stride_om + dims_v[None, :] * stride_od,
        _rounded(out, Out.dtype.element_ty, WIDEN).to(Out.dtype.element_ty),
        mask=in_rows[:, None] & (dims_v[None, :] < EV),
    )
    tl.store(Lse + batch_head.to(tl.int64) * length_q + rows, lse, mask=in_rows)


try:  # the kernel object tells whether this process runs Triton's interpreter
    from triton.runtime.interpreter import InterpretedFunction

    INTERPRETED = isinstance(_flash_forward, InterpretedFunction)
except ImportError:  # pragma: no cover - layout of other triton versions
    INTERPRETED = False


def _widen_bfloat16(dtype: torch.dtype) -> bool:
    """Whether the kernel must work around the interpreter's bfloat16 (the WIDEN flag).

    Triton's interpreter multiplies the raw bit patterns of bfloat16 matrix
    operands (triton-lang/triton#11584: bfloat16 is unsupported there) and
    truncates float32 -> bfloat16 casts instead of rounding to nearest. Under
    it, bfloat16 operands are widened to float32 after rounding them by hand:
    products of bfloat16 numbers are exact in float32, so the result is what
    a GPU's bfloat16 product with float32 accumulation gives. On a GPU the
    flag is off and the kernel reads bfloat16 as it is.
    """
    return INTERPRETED and dtype == torch.bfloat16


def _padded(width: int) -> int:
    """The kernel's tile width for a head width: a power of two, at least 16."""
    return max(16, triton.next_power_of_2(width))


def _default_blocks(head_dim: int, dtype: torch.dtype) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) for a padded head width.

    Wider heads and float32 need more registers and shared memory per tile,
    so they get smaller tiles. These follow Triton's fused-attention
    tutorial; they were not tuned on a GPU here.
    """
    wide = head_dim * (2 if dtype == torch.float32 else 1)
    if wide <= 64:
        return 128, 64, 4, 3
    if wide <= 128:
        return 128, 64, 8, 3
    return 64, 32, 4, 2


def _is_tile(size: int | None) -> bool:
    return size is None or (16 <= size <= 256 and size & (size - 1) == 0)


def refusal(spec: AttentionSpec, block_q: int | None, block_k: int | None) -> Exception | None:
    """Why the kernel cannot run this validated call (an exception to raise), or None.

    RuntimeError when this process cannot launch it on the tensors' device;
    ValueError for what the kernel does not handle (a mask, float64, head
    widths over 256, block sizes that are not powers of two from 16 to 256,
    more than 65535 batch·head pairs, grouped key and value heads of two
    different counts, neither of them 1). ``spec`` holds the caller's own
    tensors, so the dtype checked is the inputs' own.
    """
    device = spec.query.device
    if device.type != "cuda" and not INTERPRETED:
        return RuntimeError(
            f"backend='triton' needs CUDA tensors, got tensors on {device}; to run the kernel "
            "on the CPU, set TRITON_INTERPRET=1 before triton is first imported"
        )
    if spec.mask is not None:
        return ValueError(
            "backend='triton' does not take attn_mask (only is_causal); "
            "use backend='tiled' or 'auto' for masks"
        )
    if spec.out_dtype not in _DTYPES:
        return ValueError(
            f"backend='triton' takes float16, bfloat16 or float32, got {spec.out_dtype}"
        )
    if not all(1 <= w <= MAX_HEAD_DIM for w in (spec.width, spec.width_v)):
        return ValueError(
            f"backend='triton' takes head widths from 1 to {MAX_HEAD_DIM}, got E = {spec.width} "
            f"and Ev = {spec.width_v}"
        )
    for name, size in (("block_q", block_q), ("block_k", block_k)):
        if not _is_tile(size):
            return ValueError(
                f"backend='triton' needs {name} to be a power of two from 16 to 256, got {size}"
            )
    if spec.enable_gqa and spec.heads_k != spec.heads_v and 1 not in (spec.heads_k, spec.heads_v):
        return ValueError(
            "backend='triton' maps one group size to key and value heads, got "
            f"{spec.heads_k} key and {spec.heads_v} value heads; use backend='tiled'"
        )
    pairs = prod(spec.batch)
    if pairs > 65535:
        return ValueError(f"backend='triton' launches at most 65535 batch·head pairs, got {pairs}")
    return None


def flash_forward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    is_causal: bool,
    scale: float,
    block_m: int | None = None,
    block_n: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch the kernel: out (B, H, L, Ev) in the query's dtype and lse (B, H, L) in float32.

    query (B, H, L, E), key (B, Hkv, S, E), value (B, Hkv, S, Ev), any
    strides, H a multiple of Hkv (query head h reads key/value head
    h // (H // Hkv)). No checks: `refusal` and `triton_attention` do them.
    """
    batch, heads, length_q, width = query.shape
    heads_kv, length_k, width_v = key.shape[1], key.shape[2], value.shape[3]
    out = query.new_empty((batch, heads, length_q, width_v))  # (B, H, L, Ev)
    lse = torch.full(
        (batch, heads, length_q), math.inf, dtype=torch.float32, device=query.device
    )  # (B, H, L)
    if out.numel() == 0 or length_k == 0:  # nothing to launch: no rows, or no keys (zeros)
        return out.zero_(), lse
    head_dim = _padded(max(width, width_v))
    default_m, default_n, warps, stages = _default_blocks(head_dim, query.dtype)
    block_m = default_m if block_m is None else block_m
    block_n = default_n if block_n is None else block_n
    grid = (triton.cdiv(length_q, block_m), batch * heads)
    _flash_forward[grid](
        query, key, value, out, lse,
        *query.stride(), *key.stride(), *value.stride(), *out.stride(),
        heads, heads // heads_kv, length_q, length_k, scale * LOG2E,
        E=width, EV=width_v, HEAD_DIM=_padded(width), HEAD_DIM_V=_padded(width_v),
        BLOCK_M=block_m, BLOCK_N=block_n, IS_CAUSAL=bool(is_causal),
        PRECISION="ieee" if query.dtype == torch.float32 else "tf32",
        WIDEN=_widen_bfloat16(query.dtype),
        num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out, lse


class TritonAttention(torch.autograd.Function):
    """The Triton forward with the torch tiled backward, on (B, H, L, E) tensors.

    ``apply(query, key, value, is_causal, scale, block_m, block_n)`` with the
    arguments of `flash_forward`; returns out (B, H, L, Ev). The backward
    pass upcasts to float32, expands the grouped key/value heads, runs
    `tiled_backward` from the kernel's log-sum-exp and sums each group's
    gradients back onto its key/value head.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        is_causal: bool,
        scale: float,
        block_m: int | None,
        block_n: int | None,
    ) -> torch.Tensor:
        out, lse = flash_forward(query, key, value, is_causal, scale, block_m, block_n)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.config = (is_causal, scale)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        query, key, value, out, lse = ctx.saved_tensors
        is_causal, scale = ctx.config
        batch, heads, length_q, _ = query.shape
        heads_kv, length_k = key.shape[1], key.shape[2]
        group = heads // heads_kv

        def flat(x: torch.Tensor, repeat: int = 1) -> torch.Tensor:
            x = x.float().repeat_interleave(repeat, dim=1) if repeat > 1 else x.float()
            return x.reshape(batch * heads, *x.shape[2:])  # (B·H, length, width)

        dq, dk, dv, _ = tiled_backward(
            flat(query), flat(key, group), flat(value, group), None, is_causal, scale,
            TORCH_BLOCK_Q, TORCH_BLOCK_K, (batch * heads,),
            flat(out), lse.reshape(batch * heads, length_q), flat(grad_out),
        )  # fmt: skip

        def per_kv_head(grad: torch.Tensor) -> torch.Tensor:
            # (B·H, S, w) -> (B, Hkv, S, w): a key/value head's gradient sums over its group
            return grad.view(batch, heads_kv, group, length_k, -1).sum(dim=2)

        return (
            dq.view(query.shape).to(query.dtype),
            per_kv_head(dk).to(key.dtype),
            per_kv_head(dv).to(value.dtype),
            None,
            None,
            None,
            None,
        )


def triton_attention(spec: AttentionSpec, block_q: int | None, block_k: int | None) -> torch.Tensor:
    """The Triton path for a call `refusal` accepted: output (*batch, L, Ev) in the query's dtype.

    Reads the caller's own tensors (the kernel takes 16-bit inputs as they
    are, any strides, and maps grouped heads itself) as (B, H, length,
    width) views: H is the last batch dimension, B the ones before it, and
    every batch dimension an input broadcasts along is an ``expand`` view
    (stride 0), never a copy. When several leading dimensions cannot merge
    into one B as a view, the kernel runs once per entry of all but the
    last of them, and the outputs are stacked (one copy, the output's size).
    """
    batch, length_q, width_v = spec.batch, spec.length_q, spec.width_v
    heads = batch[-1] if batch else 1
    outer = batch[:-1]
    heads_kv = heads
    if spec.enable_gqa:  # key and value heads as the kernel maps them: h -> h // group
        heads_kv = spec.heads_k if spec.heads_k != 1 else spec.heads_v

    def expanded(x: torch.Tensor, h: int) -> torch.Tensor:
        return x.expand(*outer, h, *x.shape[-2:])  # (*outer, h, length, width), a view

    views = [expanded(spec.query, heads), *(expanded(x, heads_kv) for x in (spec.key, spec.value))]
    args = (spec.is_causal, spec.scale, block_q, block_k)
    try:  # (B, h, length, width): merging the outer dimensions is a view for most strides
        q4, k4, v4 = (x.view(prod(outer), *x.shape[-3:]) for x in views)
    except RuntimeError:  # dimensions broadcast apart: one launch per leading entry
        leading = itertools.product(*(range(n) for n in outer[:-1]))  # row-major
        outs = [TritonAttention.apply(*(x[i] for x in views), *args) for i in leading]
        return torch.stack(outs).reshape(*batch, length_q, width_v)  # (..., L, Ev)
    out = TritonAttention.apply(q4, k4, v4, *args)  # (B, H, L, Ev)
    return out.reshape(*batch, length_q, width_v)  # (..., L, Ev)
