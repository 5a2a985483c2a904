"""The Triton path: launchers for the forward and backward kernels, and its autograd Function.

    configs    the tile table (which tile each kernel runs)
    forward    the forward kernel             (output and row statistics)
    backward   the backward kernels           (δ, then dK and dV, then dQ)
    common     what the kernels share         (masked loads, rounding, split products, causal range)
    launch     this module: launches them on (B, H, length, width) tensors

Tensors reach the kernels as they are: any strides (transposed layouts,
slices, broadcast dimensions of stride 0), 16-bit inputs in their own dtype,
grouped key/value heads by index. The only memory a forward call allocates
is its output and two float32 numbers per row, the row's maximum score and
log2 of its total (``stats``, (2, B, H, L)), kept apart so that they do not
cancel in the backward pass; a backward call allocates the three gradients
and δ (B, H, L). An input broadcast along batch dimensions gets float32
gradients per entry (float32 buffers the size of the broadcast), summed in
float32 (float64 for float32 inputs) and rounded once to its dtype.

Every launch is a `Launch` record built by one of the ``*_launch``
functions from the tensors and a `Tile`: the launchers run them, and the
ahead-of-time compile test compiles the same records for sm_75, sm_80,
sm_86, sm_89 and sm_90 with no GPU present.

The GPU is read in one place, `gpu`: its compute capability picks the
tiles that fit its shared memory (`attention_lib.flash.triton.configs`),
and `refusal` turns away a dtype it cannot run (bfloat16 before sm_80) with
a message naming the GPU, before any kernel is compiled for it.

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

from ...backend import prod
from ..route import Tiling
from .backward import attention_delta, attention_dkdv, attention_dq
from .common import INTERPRETED as INTERPRETED  # re-exported: the tests ask
from .configs import (
    DELTA_TILE,
    DTYPES,
    HEAD_DIMS,
    KERNELS,
    MAX_HEAD_DIM,
    MIN_CAPABILITY,
    SHARED_MEMORY,
    Tile,
    candidates,
    choose,
    padded,
)
from .forward import attention_forward

__all__ = [
    "INTERPRETED",
    "Launch",
    "Layout",
    "TritonAttention",
    "delta_launch",
    "dkdv_launch",
    "dq_launch",
    "flash_backward",
    "flash_forward",
    "forward_launch",
    "gpu",
    "plan",
    "refusal",
    "tile_for",
    "triton_attention",
]

_LOG2E = math.log2(math.e)  # host side: folded into the scale once per call
_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
_MAX_GRID_YZ = 65535  # CUDA's limit on a grid's second and third dimensions


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


def gpu(device: torch.device) -> tuple[str, int] | None:
    """(name, compute capability as major * 10 + minor) of a CUDA device, e.g.
    ("Tesla T4", 75); None for any other device (the CPU, where Triton's
    interpreter runs the kernels). The one place the launcher reads the GPU."""
    if device.type != "cuda":
        return None
    major, minor = torch.cuda.get_device_capability(device)
    return torch.cuda.get_device_name(device), 10 * major + minor


def refusal(
    dtype: torch.dtype,
    device: torch.device,
    width: int = 1,
    kernels: tuple[str, ...] = ("forward",),
) -> ValueError | None:
    """Why the kernels cannot run ``dtype`` at head width ``width`` on ``device``'s GPU
    (a ValueError to raise, naming the GPU and what to use instead), or None when they can.

    The one place a call is matched against the GPU, before any kernel is
    compiled for it. ``kernels`` are the ones the call will launch: the
    forward kernel, and "dkdv" and "dq" when gradients are wanted.

    - bfloat16 needs sm_80 (Ampere) or newer (`configs.MIN_CAPABILITY`): for
      a T4 (sm_75) ptxas refuses the bfloat16 conversions Triton emits
      ("Feature '.bf16' requires .target sm_80 or higher",
      triton-lang/triton#1941), a crash at the first launch.
    - a kernel with no tile that fits the GPU's shared memory at this width
      (`configs.candidates` is empty: float32 gradients at widths over 128
      on sm_75) would fail to launch.

    Triton's interpreter (a CPU device) runs everything.
    """
    found = gpu(device)
    name = _DTYPES.get(dtype)
    if found is None or name is None:
        return None
    gpu_name, capability = found
    needed = MIN_CAPABILITY.get(name, 0)
    if capability < needed:
        others = " or ".join(d for d in DTYPES if MIN_CAPABILITY.get(d, 0) <= capability)
        return ValueError(
            f"{name} needs an sm_{needed} or newer GPU (Ampere); this {gpu_name} is "
            f"sm_{capability}: use {others}"
        )

    def fits(dtype_name: str, head_dim: int) -> bool:
        return all(candidates(k, head_dim, dtype_name, False, capability) for k in kernels)

    head_dim = padded(width)
    if fits(name, head_dim):
        return None
    forward_fits = bool(candidates("forward", head_dim, name, False, capability))
    what = "its gradients need" if forward_fits else "it needs"
    limit = SHARED_MEMORY.get(capability)
    limit_text = f" ({limit // 1024} KiB)" if limit else ""
    others = [
        d
        for d in DTYPES
        if d != name and MIN_CAPABILITY.get(d, 0) <= capability and fits(d, head_dim)
    ]
    narrower = [w for w in HEAD_DIMS if fits(name, w)]
    instead = [" or ".join(others)] if others else []
    instead += [f"head widths up to {narrower[-1]}"] if narrower else []
    return ValueError(
        f"{name} at head width {width} on this {gpu_name} (sm_{capability}): {what} more "
        f"shared memory per program than it has{limit_text}; use {', or '.join(instead)}, "
        "or backend='tiled'"
    )


def _capability(device: torch.device) -> int | None:
    """The compute capability `tile_for` takes for tensors on ``device`` (None: the CPU)."""
    found = gpu(device)
    return None if found is None else found[1]


@functools.lru_cache(maxsize=256)
def tile_for(
    kernel: str,
    dtype: torch.dtype,
    width: int,
    width_v: int,
    is_causal: bool,
    block_q: int | None = None,
    block_k: int | None = None,
    capability: int | None = None,
) -> Tile:
    """The table's tile for a kernel on a GPU, with the caller's block sizes where given.

    ``capability`` is the GPU's compute capability as major * 10 + minor
    (`gpu`), None for the main table (sm_80, sm_90 and the interpreter):
    GPUs with less shared memory get tiles that fit it (`configs.candidates`).
    ``block_q`` replaces BLOCK_M (query rows) and ``block_k`` BLOCK_N (keys)
    in every kernel; warps and stages stay the table's. Cached: a launch
    looks its tile up in a dictionary, not the table.
    """
    head_dim = padded(max(width, width_v))
    tile = choose(kernel, head_dim, _DTYPES[dtype], bool(is_causal), capability)
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
    **constexprs: Any,
) -> Launch:
    """A launch of the forward, dK/dV or dQ kernel, whose signatures share one layout.

    Each takes its tensors, then the four strides of every (B, H, length, width)
    tensor among them in the same order (the float32 row statistics, m,
    log2 total and δ (B, H, L), are contiguous and take none), then ``scalars``. The
    constexprs come from the first three tensors, query, key and value, and the tile,
    plus the kernel's own ``constexprs``.
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
            **constexprs,
        },
        tile,
    )


def forward_launch(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    stats: torch.Tensor,
    is_causal: bool,
    scale: float,
    tile: Tile,
    for_backward: bool = False,
) -> Launch:
    """The forward kernel's launch on query (B, H, L, E), key (B, Hkv, S, E), value (B, Hkv, S, Ev).

    out (B, H, L, Ev) and stats (2, B, H, L) (contiguous, float32: each row's
    maximum score and log2 of its total, in log2 units) are written.
    ``for_backward``: 16-bit weights enter P V as two parts, not rounded
    once (`attention_lib.flash.triton.forward`), for an output the backward
    kernels will read.
    """
    batch, heads, length_q = query.shape[:3]
    heads_kv, length_k = key.shape[1], key.shape[2]
    return _attention_launch(
        attention_forward,
        (_cdiv(length_q, tile.block_m), heads, batch),
        (query, key, value, out, stats[0], stats[1]),
        (heads // heads_kv, length_q, length_k, scale * _LOG2E),
        is_causal,
        tile,
        PARTS=2 if for_backward else 1,
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
    stats: torch.Tensor,
    delta: torch.Tensor,
    dkey: torch.Tensor,
    dvalue: torch.Tensor,
    is_causal: bool,
    scale: float,
    tile: Tile,
) -> Launch:
    """The dK/dV kernel's launch: dkey (B, Hkv, S, E) and dvalue (B, Hkv, S, Ev) are written,
    in their own dtype (the inputs', or float32)."""
    batch, heads, length_q = query.shape[:3]
    heads_kv, length_k = key.shape[1], key.shape[2]
    return _attention_launch(
        attention_dkdv,
        (_cdiv(length_k, tile.block_n), heads_kv, batch),
        (query, key, value, grad_out, stats[0], stats[1], delta, dkey, dvalue),
        (heads, heads // heads_kv, length_q, length_k, scale, scale * _LOG2E),
        is_causal,
        tile,
    )


def dq_launch(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    grad_out: torch.Tensor,
    stats: torch.Tensor,
    delta: torch.Tensor,
    dquery: torch.Tensor,
    is_causal: bool,
    scale: float,
    tile: Tile,
) -> Launch:
    """The dQ kernel's launch: dquery (B, H, L, E) is written, in its own dtype."""
    batch, heads, length_q = query.shape[:3]
    heads_kv, length_k = key.shape[1], key.shape[2]
    return _attention_launch(
        attention_dq,
        (_cdiv(length_q, tile.block_m), heads, batch),
        (query, key, value, grad_out, stats[0], stats[1], delta, dquery),
        (heads // heads_kv, length_q, length_k, scale, scale * _LOG2E),
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
    for_backward: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward kernel alone: out (B, H, L, Ev) in the query's dtype, stats (2, B, H, L).

    query (B, H, L, E), key (B, Hkv, S, E), value (B, Hkv, S, Ev), one dtype
    (float16, bfloat16 or float32), any strides, H a multiple of Hkv (query
    head h reads key/value head h // (H // Hkv)). stats is float32, in log2
    units (of 2^(score·log2 e)): stats[0] each row's largest score m,
    stats[1] log2 of the row's sum of 2^(score - m); their sum is the
    row's log-sum-exp (the natural one times log2 e). Where there are no
    keys (S = 0, where the output is 0) m is +inf. ``for_backward``: out
    will be handed to `flash_backward` (16-bit weights enter P V as two
    parts, not rounded once: see `attention_lib.flash.triton.forward`). The
    tiles are the GPU's own (`gpu`, `tile_for`). Checks only the dtype
    against the GPU (`refusal`, a ValueError); `plan` does the rest.
    """
    batch, heads, length_q, width = query.shape
    length_k, width_v = key.shape[2], value.shape[3]
    capability = _capability(query.device)
    refused = refusal(query.dtype, query.device, max(width, width_v))
    if refused is not None:
        raise refused
    out = query.new_empty((batch, heads, length_q, width_v))  # (B, H, L, Ev)
    stats = query.new_empty((2, batch, heads, length_q), dtype=torch.float32)  # (2, B, H, L)
    if length_k == 0:  # no keys: zeros, an infinite maximum and an empty total
        stats[0], stats[1] = math.inf, 0.0
        return out.zero_(), stats
    if out.numel() == 0:
        return out, stats
    tile = tile_for("forward", query.dtype, width, width_v, is_causal, block_q, block_k, capability)
    forward_launch(query, key, value, out, stats, is_causal, scale, tile, for_backward)()
    return out, stats


def flash_backward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    stats: torch.Tensor,
    grad_out: torch.Tensor,
    is_causal: bool,
    scale: float,
    block_q: int | None = None,
    block_k: int | None = None,
    into: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients (dquery, dkey, dvalue), each in its input's shape.

    Arguments as `flash_forward`, plus its out and stats and the output's
    gradient grad_out (B, H, L, Ev), any strides. dkey and dvalue of a
    grouped key/value head sum over its query heads inside the kernel, in
    float32. The gradients are new contiguous tensors in the inputs'
    dtype, or written ``into`` three given tensors of the inputs' shapes,
    any strides, in the inputs' dtype or float32 (kept unrounded for a sum
    the caller takes). Checks only the call against the GPU (`refusal`, a
    ValueError); `plan` does the rest.
    """
    batch, heads, length_q, width = query.shape
    length_k, width_v = key.shape[2], value.shape[3]
    refused = refusal(query.dtype, query.device, max(width, width_v), ("dkdv", "dq"))
    if refused is not None:
        raise refused
    if into is None:
        into = tuple(
            torch.empty(x.shape, dtype=x.dtype, device=x.device) for x in (query, key, value)
        )
    dquery, dkey, dvalue = into  # (B, H, L, E), (B, Hkv, S, E), (B, Hkv, S, Ev)
    if length_k == 0 or length_q == 0 or batch * heads == 0:
        return dquery.zero_(), dkey.zero_(), dvalue.zero_()
    delta = stats.new_empty(stats.shape[1:])  # (B, H, L) float32
    delta_launch(out, grad_out, delta)()
    kw = (query.dtype, width, width_v, is_causal, block_q, block_k, _capability(query.device))
    dkdv_tile, dq_tile = tile_for("dkdv", *kw), tile_for("dq", *kw)
    dkdv_launch(
        query, key, value, grad_out, stats, delta, dkey, dvalue, is_causal, scale, dkdv_tile
    )()
    dq_launch(query, key, value, grad_out, stats, delta, dquery, is_causal, scale, dq_tile)()
    return dquery, dkey, dvalue


@dataclass(frozen=True)
class Layout:
    """How a call's tensors become (B, h, length, width) launches.

    ``outer`` are the batch dimensions before the heads, ``heads`` the query
    heads and ``heads_kv`` the heads key and value are read as.
    """

    outer: tuple[int, ...]
    heads: int
    heads_kv: int

    def views(self, query: Any, key: Any, value: Any) -> tuple[Any, Any, Any]:
        """query (*outer, H, L, E), key (*outer, Hkv, S, E), value (*outer, Hkv, S, Ev): views."""
        return (
            _as_heads(query, self.outer, self.heads),
            _as_heads(key, self.outer, self.heads_kv),
            _as_heads(value, self.outer, self.heads_kv),
        )

    def launches(self, *views: Any) -> list[tuple[Any, tuple[Any, ...]]]:
        """(index, (B, h, length, width) views) per launch: one launch when the leading
        dimensions merge into one B as a view, else one per entry of all but the last
        (index None for the one launch, else the entry's index tuple)."""
        try:  # merging the leading dimensions is a view for most strides
            if prod(self.outer) > _MAX_GRID_YZ:
                raise RuntimeError("more batch entries than one launch takes")
            return [(None, tuple(x.view(prod(self.outer), *x.shape[-3:]) for x in views))]
        except RuntimeError:  # they broadcast apart
            firsts = [range(n) for n in self.outer[:-1]]
            return [(i, tuple(x[i] for x in views)) for i in _product(firsts)]


def _reads_twice(view: torch.Tensor) -> bool:
    """Whether a view reads some element for more than one index (stride 0, size > 1)."""
    return any(st == 0 and n > 1 for n, st in zip(view.shape, view.stride(), strict=True))


def _summed(grad: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A float32 gradient of a broadcast view summed to ``like``'s shape and rounded once to
    its dtype: summed in float32 for 16-bit inputs, in float64 for float32 ones."""
    wide = grad.double() if like.dtype == torch.float32 else grad
    return wide.sum_to_size(like.shape).to(like.dtype)


def _forward_all(
    layout: Layout, inputs: tuple[Any, ...], tiling: Tiling, for_backward: bool
) -> tuple[Any, list]:
    """The forward kernel on every launch: out (*outer, H, L, Ev) and each launch's (out, stats);
    ``for_backward`` as `flash_forward`'s."""
    runs = []
    settings = (tiling.is_causal, tiling.scale, tiling.block_q, tiling.block_k)
    for _, (q, k, v) in layout.launches(*layout.views(*inputs)):
        runs.append(flash_forward(q, k, v, *settings, for_backward))  # (B, H, L, Ev), (2, B, H, L)
    outs = [o for o, _ in runs]
    out = outs[0] if len(outs) == 1 else torch.stack(outs)
    return out.view(*layout.outer, *out.shape[-3:]), runs  # (*outer, H, L, Ev)


class TritonAttention(torch.autograd.Function):
    """The Triton forward and backward kernels on the caller's tensors.

    ``apply(query, key, value, layout, tiling)``:
    query (..., L, E), key (..., S, E), value (..., S, Ev) as given, read
    through `Layout` views; returns out (*outer, H, L, Ev). Saves the
    inputs (no copies), the outputs and row statistics of each launch. The
    gradient of an input each launch reads unbroadcast is the kernels'
    own, in its dtype; one read through a broadcast (stride 0) gets float32
    gradients per entry, summed (`_summed`) and rounded once. Not twice
    differentiable.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        layout: Layout,
        tiling: Tiling,
    ) -> torch.Tensor:
        out, runs = _forward_all(layout, (query, key, value), tiling, for_backward=True)
        ctx.save_for_backward(query, key, value, *(t for run in runs for t in run))
        ctx.layout, ctx.tiling = layout, tiling
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        query, key, value, *saved = ctx.saved_tensors
        inputs = (query, key, value)
        layout = ctx.layout
        views = layout.views(*inputs)  # (*outer, h, length, width)
        wide = [_reads_twice(x) for x in views]
        grads = [
            torch.empty(x.shape, dtype=torch.float32 if w else x.dtype, device=x.device)
            for x, w in zip(views, wide, strict=True)
        ]  # (*outer, h, length, width)
        flat = grad_out.reshape(prod(layout.outer), *grad_out.shape[-3:])  # (B, H, L, Ev)
        for n, (index, qkv) in enumerate(layout.launches(*views)):
            out, stats = saved[2 * n], saved[2 * n + 1]
            if index is None:  # one launch: the kernels write the whole gradients
                upstream = flat
                into = tuple(g.view(x.shape) for g, x in zip(grads, qkv, strict=True))
            else:  # this entry's part of them (contiguous)
                upstream, into = grad_out[index], tuple(g[index] for g in grads)
            t = ctx.tiling
            flash_backward(
                *qkv, out, stats, upstream, t.is_causal, t.scale, t.block_q, t.block_k, into=into
            )
        results = [
            _summed(g, x) if w else g.view(x.shape)
            for g, x, w in zip(grads, inputs, wide, strict=True)
        ]
        return (*results, None, None)


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


def plan(spec: Any, tiling: Tiling) -> Layout:
    """How the kernels run this validated call (the launches' `Layout`); raises where they
    cannot, saying why. Decided once: `triton_attention` runs the layout as given.

    ``spec`` is `attention_lib.inputs.AttentionSpec`: the caller's own
    tensors and the sizes they imply. RuntimeError when this process cannot
    launch the kernels on the tensors' device; ValueError for what they do
    not handle: a mask, float64, a call the GPU cannot run (`refusal`:
    bfloat16 before sm_80; float32 gradients at widths over 128 on sm_75),
    head widths over 256, block sizes that are
    not powers of two from 16 to 256, more than 65535 heads or batch entries,
    grouped key and value heads of two different counts, a NaN or infinite
    scale (the kernels scale q · k after the product, where the library's
    rule for non-finite inputs takes query times scale: `attention_lib.nonfinite`).
    """
    device = spec.query.device
    if device.type != "cuda" and not INTERPRETED:
        raise RuntimeError(
            f"backend='triton' needs CUDA tensors, got tensors on {device}; to run the kernel "
            "on the CPU, set TRITON_INTERPRET=1 before triton is first imported"
        )
    if spec.mask is not None:
        raise ValueError(
            "backend='triton' does not take attn_mask (only is_causal); "
            "use backend='tiled' or 'auto' for masks"
        )
    if not math.isfinite(spec.scale):
        raise ValueError(
            f"backend='triton' takes a finite scale, got scale = {spec.scale}; "
            "backend='tiled' or 'auto' follows the rule for non-finite inputs"
        )
    if spec.out_dtype not in _DTYPES:
        raise ValueError(
            f"backend='triton' takes float16, bfloat16 or float32, got {spec.out_dtype}"
        )
    inputs = (spec.query, spec.key, spec.value)
    grads = torch.is_grad_enabled() and any(getattr(x, "requires_grad", False) for x in inputs)
    kernels = KERNELS if grads else ("forward",)  # KERNELS: forward, dkdv, dq
    refused = refusal(spec.out_dtype, device, max(spec.width, spec.width_v), kernels)
    if refused is not None:
        raise refused
    if not all(1 <= w <= MAX_HEAD_DIM for w in (spec.width, spec.width_v)):
        raise ValueError(
            f"backend='triton' takes head widths from 1 to {MAX_HEAD_DIM}, got E = {spec.width} "
            f"and Ev = {spec.width_v}"
        )
    for name, size in (("block_q", tiling.block_q), ("block_k", tiling.block_k)):
        if not _is_tile(size):
            raise ValueError(
                f"backend='triton' needs {name} to be a power of two from 16 to 256, got {size}"
            )
    batch = tuple(spec.batch)
    heads = batch[-1] if batch else 1
    kv_heads = _kv_heads(spec, heads)
    if kv_heads is None:
        raise ValueError(
            "backend='triton' reads key and value heads with one group size, got "
            f"{spec.heads_k} key and {spec.heads_v} value heads; use backend='tiled'"
        )
    if heads > _MAX_GRID_YZ or (batch[-2] if len(batch) > 1 else 1) > _MAX_GRID_YZ:
        raise ValueError(
            f"backend='triton' launches at most {_MAX_GRID_YZ} heads and {_MAX_GRID_YZ} batch "
            f"entries per launch, got batch dimensions {batch}"
        )
    return Layout(batch[:-1], heads, kv_heads[2])


def _as_heads(x: torch.Tensor, outer: tuple[int, ...], heads: int) -> torch.Tensor:
    """x (..., h, length, width) as an (*outer, heads, length, width) view (stride 0 where it
    broadcasts); never a copy."""
    return x.expand(*outer, heads, *x.shape[-2:])


def triton_attention(spec: Any, layout: Layout, tiling: Tiling) -> torch.Tensor:
    """The Triton path for a call `plan` accepted, run as its ``layout`` says: output
    (*batch, L, Ev) in the query's dtype.

    Reads the caller's own tensors: 16-bit inputs as they are, any strides,
    as (B, H, length, width) views, H the last batch dimension and B the
    ones before it. A dimension an input broadcasts along is an ``expand``
    view (stride 0); key and value heads shared by a group of query heads
    (grouped-query attention) are read by index and their gradients summed
    inside the kernels. When the leading dimensions cannot merge into one B
    as a view (broadcast in one and not another), the kernels run once per
    entry of all but the last, and the outputs are stacked: one copy, the
    output's size. No input is copied. The gradient of a broadcast input is
    summed in float32 (float64 for float32 inputs) and rounded once.
    Without autograd (no input requires grad, or grad mode is off) the
    forward kernel runs alone, its 16-bit weights rounded once, as
    FlashAttention does; with autograd it runs ``for_backward`` (the
    weights in two 16-bit parts), so the two outputs can differ in the last
    bit (`attention_lib.flash.triton.forward`).
    """
    inputs = (spec.query, spec.key, spec.value)
    if torch.is_grad_enabled() and any(x.requires_grad for x in inputs):
        out = TritonAttention.apply(*inputs, layout, tiling)  # (*outer, H, L, Ev)
    else:
        out = _forward_all(layout, inputs, tiling, for_backward=False)[0]  # (*outer, H, L, Ev)
    return out.view(*spec.batch, spec.length_q, spec.width_v)  # (..., L, Ev)


def _product(ranges: list[range]) -> list[tuple[int, ...]]:
    """Every index tuple of the ranges, the last varying fastest (row-major)."""
    import itertools

    return list(itertools.product(*ranges))
