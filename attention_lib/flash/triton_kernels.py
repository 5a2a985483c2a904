"""The Triton path: launchers for the forward and backward kernels, and its autograd Function.

    triton_configs   the tile table (which tile each kernel runs)
    triton_forward   the forward kernel             (output and log-sum-exp)
    triton_backward  the backward kernels           (δ, then dK and dV, then dQ)
    triton_kernels   this module: launches them on (B, H, length, width) tensors

Tensors reach the kernels as they are: any strides (transposed layouts,
slices, broadcast dimensions of stride 0), 16-bit inputs in their own dtype,
grouped key/value heads by index. The only memory a forward call allocates
is its output and the log-sum-exp (B, H, L) in float32; a backward call
allocates the three gradients and δ (B, H, L).

Every launch is a `Launch` record built by one of the ``*_launch``
functions from the tensors and a `Tile`: the launchers run them, and the
ahead-of-time compile test compiles the same records for sm_80 and sm_90
with no GPU present.

On the CPU the same kernel source runs in Triton's interpreter when
TRITON_INTERPRET=1 is set before triton is imported (the tests do so in a
child process). Importing this module imports torch and triton; the rest of
the library imports it only when the Triton path is asked for.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ..backend import prod
from .triton_backward import attention_delta, attention_dkdv, attention_dq
from .triton_common import INTERPRETED
from .triton_configs import DELTA_TILE, MAX_HEAD_DIM, Tile, choose, padded
from .triton_forward import attention_forward

__all__ = [
    "INTERPRETED",
    "MAX_HEAD_DIM",
    "Launch",
    "TritonAttention",
    "delta_launch",
    "dkdv_launch",
    "dq_launch",
    "flash_backward",
    "flash_forward",
    "forward_launch",
    "refusal",
    "tile_for",
    "triton_attention",
]

LOG2E = math.log2(math.e)  # host side: folded into the scale once per call
DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
MAX_GRID_YZ = 65535  # CUDA's limit on a grid's second and third dimensions


@dataclass(frozen=True)
class Launch:
    """One kernel launch: the kernel, its grid, runtime arguments, constexprs and tile."""

    kernel: Any
    grid: tuple[int, int, int]
    args: tuple[Any, ...]
    constexprs: dict[str, Any]
    tile: Tile

    def __call__(self) -> None:
        self.kernel[self.grid](
            *self.args,
            **self.constexprs,
            num_warps=self.tile.num_warps,
            num_stages=self.tile.num_stages,
        )


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


def _shared(dtype: torch.dtype, width: int, width_v: int, is_causal: bool) -> dict[str, Any]:
    """The constexprs every attention kernel takes, from the dtype and head widths."""
    return {
        "E": width,
        "EV": width_v,
        "HEAD_DIM": padded(width),
        "HEAD_DIM_V": padded(width_v),
        "IS_CAUSAL": bool(is_causal),
        # float32 inputs are multiplied in full float32 (TF32 would lose the 2x-error rule)
        "PRECISION": "ieee" if dtype == torch.float32 else "tf32",
        "WIDEN": _widen_bfloat16(dtype),
    }


@functools.lru_cache(maxsize=256)
def tile_for(
    kernel: str,
    dtype: torch.dtype,
    width: int,
    width_v: int,
    is_causal: bool,
    block_q: int | None = None,
    block_k: int | None = None,
) -> Tile:
    """The table's tile for a kernel, with the caller's block sizes where given.

    ``block_q`` replaces BLOCK_M (query rows) and ``block_k`` BLOCK_N (keys)
    in every kernel; warps and stages stay the table's. Cached: a launch
    looks its tile up in a dictionary, not the table.
    """
    head_dim = padded(max(width, width_v))
    tile = choose(kernel, head_dim, DTYPES[dtype], bool(is_causal))
    if block_q is None and block_k is None:
        return tile
    return Tile(
        tile.block_m if block_q is None else block_q,
        tile.block_n if block_k is None else block_k,
        tile.num_warps,
        tile.num_stages,
        "block_q/block_k given by the caller",
    )


def _cdiv(a: int, b: int) -> int:
    return -(a // -b)


def _attention_launch(
    kernel: Any,
    grid: tuple[int, int, int],
    tensors: tuple[torch.Tensor, ...],
    scalars: tuple[Any, ...],
    is_causal: bool,
    tile: Tile,
) -> Launch:
    """A launch of the forward, dK/dV or dQ kernel, whose signatures share one layout.

    Each takes its tensors, then the four strides of every (B, H, length, width)
    tensor among them in the same order (the float32 rows statistics, lse and
    δ (B, H, L), are contiguous and take none), then ``scalars``. The
    constexprs come from the first three tensors, query, key and value.
    """
    query, _, value = tensors[:3]
    strides = [s for t in tensors if t.dim() == 4 for s in t.stride()]
    return Launch(
        kernel,
        grid,
        (*tensors, *strides, *scalars),
        {
            **_shared(query.dtype, query.shape[3], value.shape[3], is_causal),
            "BLOCK_M": tile.block_m,
            "BLOCK_N": tile.block_n,
        },
        tile,
    )


def forward_launch(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    is_causal: bool,
    scale: float,
    tile: Tile,
) -> Launch:
    """The forward kernel's launch on query (B, H, L, E), key (B, Hkv, S, E), value (B, Hkv, S, Ev).

    out (B, H, L, Ev) and lse (B, H, L) (contiguous, float32) are written.
    """
    batch, heads, length_q = query.shape[:3]
    heads_kv, length_k = key.shape[1], key.shape[2]
    return _attention_launch(
        attention_forward,
        (_cdiv(length_q, tile.block_m), heads, batch),
        (query, key, value, out, lse),
        (heads // heads_kv, length_q, length_k, scale * LOG2E),
        is_causal,
        tile,
    )


def delta_launch(out: torch.Tensor, grad_out: torch.Tensor, delta: torch.Tensor) -> Launch:
    """δ = rowsum(dO ∘ O) into delta (B, H, L) float32, from out and grad_out (B, H, L, Ev)."""
    batch, heads, length_q, width_v = out.shape
    return Launch(
        attention_delta,
        (_cdiv(length_q, DELTA_TILE.block_m), heads, batch),
        (out, grad_out, delta, *out.stride(), *grad_out.stride(), length_q),
        {"EV": width_v, "HEAD_DIM_V": padded(width_v), "BLOCK_M": DELTA_TILE.block_m},
        DELTA_TILE,
    )


def dkdv_launch(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    grad_out: torch.Tensor,
    lse: torch.Tensor,
    delta: torch.Tensor,
    dkey: torch.Tensor,
    dvalue: torch.Tensor,
    is_causal: bool,
    scale: float,
    tile: Tile,
) -> Launch:
    """The dK/dV kernel's launch: dkey (B, Hkv, S, E) and dvalue (B, Hkv, S, Ev) are written."""
    batch, heads, length_q = query.shape[:3]
    heads_kv, length_k = key.shape[1], key.shape[2]
    return _attention_launch(
        attention_dkdv,
        (_cdiv(length_k, tile.block_n), heads_kv, batch),
        (query, key, value, grad_out, lse, delta, dkey, dvalue),
        (heads, heads // heads_kv, length_q, length_k, scale, scale * LOG2E),
        is_causal,
        tile,
    )


def dq_launch(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    grad_out: torch.Tensor,
    lse: torch.Tensor,
    delta: torch.Tensor,
    dquery: torch.Tensor,
    is_causal: bool,
    scale: float,
    tile: Tile,
) -> Launch:
    """The dQ kernel's launch: dquery (B, H, L, E) is written."""
    batch, heads, length_q = query.shape[:3]
    heads_kv, length_k = key.shape[1], key.shape[2]
    return _attention_launch(
        attention_dq,
        (_cdiv(length_q, tile.block_m), heads, batch),
        (query, key, value, grad_out, lse, delta, dquery),
        (heads // heads_kv, length_q, length_k, scale, scale * LOG2E),
        is_causal,
        tile,
    )


def flash_forward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    is_causal: bool,
    scale: float,
    block_q: int | None = None,
    block_k: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward kernel alone: out (B, H, L, Ev) in the query's dtype, lse (B, H, L) float32.

    query (B, H, L, E), key (B, Hkv, S, E), value (B, Hkv, S, Ev), one dtype
    (float16, bfloat16 or float32), any strides, H a multiple of Hkv (query
    head h reads key/value head h // (H // Hkv)). lse is each row's
    log-sum-exp in log2 units, log2 of the sum of 2^(score·log2 e) (the
    natural one times log2 e, what the backward kernels read), +inf where
    there are no keys (S = 0, where the output is 0). No checks: `refusal`
    does them.
    """
    batch, heads, length_q, width = query.shape
    length_k, width_v = key.shape[2], value.shape[3]
    out = query.new_empty((batch, heads, length_q, width_v))  # (B, H, L, Ev)
    if length_k == 0:  # no keys: zeros, and an infinite log-sum-exp
        return out.zero_(), query.new_full((batch, heads, length_q), math.inf, dtype=torch.float32)
    lse = query.new_empty((batch, heads, length_q), dtype=torch.float32)  # (B, H, L)
    if out.numel() == 0:
        return out, lse
    tile = tile_for("forward", query.dtype, width, width_v, is_causal, block_q, block_k)
    forward_launch(query, key, value, out, lse, is_causal, scale, tile)()
    return out, lse


def flash_backward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    grad_out: torch.Tensor,
    is_causal: bool,
    scale: float,
    block_q: int | None = None,
    block_k: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients (dquery, dkey, dvalue), each in its input's shape and dtype, contiguous.

    Arguments as `flash_forward`, plus its out and lse and the output's
    gradient grad_out (B, H, L, Ev), any strides. dkey and dvalue of a
    grouped key/value head sum over its query heads inside the kernel.
    """
    batch, heads, length_q, width = query.shape
    length_k, width_v = key.shape[2], value.shape[3]
    dquery = torch.empty(query.shape, dtype=query.dtype, device=query.device)  # (B, H, L, E)
    dkey = torch.empty(key.shape, dtype=key.dtype, device=key.device)  # (B, Hkv, S, E)
    dvalue = torch.empty(value.shape, dtype=value.dtype, device=value.device)  # (B, Hkv, S, Ev)
    if length_k == 0 or length_q == 0 or batch * heads == 0:
        return dquery.zero_(), dkey.zero_(), dvalue.zero_()
    delta = lse.new_empty(lse.shape)  # (B, H, L) float32
    delta_launch(out, grad_out, delta)()
    kw = (query.dtype, width, width_v, is_causal, block_q, block_k)
    dkdv_tile, dq_tile = tile_for("dkdv", *kw), tile_for("dq", *kw)
    dkdv_launch(
        query, key, value, grad_out, lse, delta, dkey, dvalue, is_causal, scale, dkdv_tile
    )()
    dq_launch(query, key, value, grad_out, lse, delta, dquery, is_causal, scale, dq_tile)()
    return dquery, dkey, dvalue


class TritonAttention(torch.autograd.Function):
    """The Triton forward and backward kernels, on (B, H, L, E) tensors.

    ``apply(query, key, value, is_causal, scale, block_q, block_k)`` with the
    arguments of `flash_forward`; returns out (B, H, L, Ev). Saves the
    inputs (no copies), the output and the log-sum-exp; not twice
    differentiable.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        is_causal: bool,
        scale: float,
        block_q: int | None,
        block_k: int | None,
    ) -> torch.Tensor:
        out, lse = flash_forward(query, key, value, is_causal, scale, block_q, block_k)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.config = (is_causal, scale, block_q, block_k)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        query, key, value, out, lse = ctx.saved_tensors
        grads = flash_backward(query, key, value, out, lse, grad_out, *ctx.config)
        return (*grads, None, None, None, None)


def _is_tile(size: int | None) -> bool:
    return size is None or (16 <= size <= 256 and size & (size - 1) == 0)


def _kv_heads(spec: Any, heads: int) -> tuple[int, int, int] | None:
    """(key heads, value heads, heads both are read as) for query heads ``heads``, or None.

    Key and value heads are 1 (broadcast over the query's heads), ``heads``,
    or with grouped-query attention a divisor of it. The kernels take one
    group size for both: a single head broadcasts (stride 0) to the other's
    count; two different counts, neither 1, cannot be mapped.
    """

    def count(x: Any, grouped: int | None) -> int:
        if grouped is not None:
            return grouped
        return x.shape[-3] if x.ndim >= 3 else 1  # 1 or heads: it broadcasts

    gqa = bool(spec.enable_gqa)
    h_k = count(spec.key, spec.heads_k if gqa else None)
    h_v = count(spec.value, spec.heads_v if gqa else None)
    if h_k != h_v and 1 not in (h_k, h_v):
        return None
    return h_k, h_v, max(h_k, h_v)


def refusal(spec: Any, block_q: int | None, block_k: int | None) -> Exception | None:
    """Why the kernels cannot run this validated call (an exception to raise), or None.

    ``spec`` is `attention_lib.inputs.AttentionSpec`: the caller's own
    tensors and the sizes they imply. RuntimeError when this process cannot
    launch the kernels on the tensors' device; ValueError for what they do
    not handle: a mask, float64, head widths over 256, block sizes that are
    not powers of two from 16 to 256, more than 65535 heads or batch entries,
    grouped key and value heads of two different counts.
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
    if spec.out_dtype not in DTYPES:
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
    batch = tuple(spec.batch)
    heads = batch[-1] if batch else 1
    if _kv_heads(spec, heads) is None:
        return ValueError(
            "backend='triton' reads key and value heads with one group size, got "
            f"{spec.heads_k} key and {spec.heads_v} value heads; use backend='tiled'"
        )
    if heads > MAX_GRID_YZ or (batch[-2] if len(batch) > 1 else 1) > MAX_GRID_YZ:
        return ValueError(
            f"backend='triton' launches at most {MAX_GRID_YZ} heads and {MAX_GRID_YZ} batch "
            f"entries per launch, got batch dimensions {batch}"
        )
    return None


def _as_heads(x: torch.Tensor, outer: tuple[int, ...], heads: int) -> torch.Tensor:
    """x (..., h, length, width) as an (*outer, heads, length, width) view (stride 0 where it
    broadcasts); never a copy."""
    return x.expand(*outer, heads, *x.shape[-2:])


def triton_attention(spec: Any, block_q: int | None, block_k: int | None) -> torch.Tensor:
    """The Triton path for a call `refusal` accepted: output (*batch, L, Ev) in the query's dtype.

    Reads the caller's own tensors: 16-bit inputs as they are, any strides,
    as (B, H, length, width) views, H the last batch dimension and B the
    ones before it. A dimension an input broadcasts along is an ``expand``
    view (stride 0); key and value heads shared by a group of query heads
    (grouped-query attention, or one head broadcast to all) are read by
    index and their gradients summed inside the kernels. When the leading
    dimensions cannot merge into one B as a view (broadcast in one and not
    another), the kernels run once per entry of all but the last, and the
    outputs are stacked: one copy, the output's size. No input is copied.
    Without autograd (no input requires grad, or grad mode is off) the
    forward kernel runs alone.
    """
    batch = tuple(spec.batch)
    heads = batch[-1] if batch else 1
    outer = batch[:-1]
    _, _, heads_kv = _kv_heads(spec, heads)  # type: ignore[misc]
    views = (
        _as_heads(spec.query, outer, heads),  # (*outer, H, L, E)
        _as_heads(spec.key, outer, heads_kv),  # (*outer, Hkv, S, E)
        _as_heads(spec.value, outer, heads_kv),  # (*outer, Hkv, S, Ev)
    )
    config = (spec.is_causal, spec.scale, block_q, block_k)
    grad = torch.is_grad_enabled() and any(x.requires_grad for x in views)

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if grad:
            return TritonAttention.apply(q, k, v, *config)  # (B, H, L, Ev)
        return flash_forward(q, k, v, *config)[0]  # (B, H, L, Ev)

    try:  # (B, h, length, width): merging the leading dimensions is a view for most strides
        if prod(outer) > MAX_GRID_YZ:
            raise RuntimeError("more batch entries than one launch takes")
        q4, k4, v4 = (x.view(prod(outer), *x.shape[-3:]) for x in views)
    except RuntimeError:  # they broadcast apart: one launch per entry of all but the last
        firsts = [range(n) for n in outer[:-1]]
        outs = [attend(*(x[i] for x in views)) for i in _product(firsts)]
        return torch.stack(outs).view(*batch, spec.length_q, spec.width_v)  # (..., L, Ev)
    return attend(q4, k4, v4).view(*batch, spec.length_q, spec.width_v)  # (..., L, Ev)


def _product(ranges: list[range]) -> list[tuple[int, ...]]:
    """Every index tuple of the ranges, the last varying fastest (row-major)."""
    import itertools

    return list(itertools.product(*ranges))
