"""The tiled path in torch: a fast forward and FlashAttention's backward pass.

`attention_lib.flash.loop` holds the readable version of the algorithm, written
once for numpy and torch through the array-API namespace. That namespace has
no in-place operations, so each key tile there allocates three fresh
(..., bq, bk) arrays (scores, scores - shift, their exponentials); on a CPU
that traffic, not the arithmetic, sets the speed. This module is the same
loop over the same tiles (`query_blocks`, `key_blocks`), with the same masks
(`mask_tile`, `apply_mask`) and the same running quantities (m, total, acc,
rescale), rewritten with torch's in-place operations on one reused tile of
scores and batched matrix products (``bmm``/``baddbmm``) on (N, L, E)
tensors, N the product of the batch dimensions (when query, key and value
batch dimensions broadcast instead, each keeps its own shape and the
products broadcast tile by tile). That makes it several times faster than
the generic loop on torch tensors, and lets it keep what the backward pass
needs.

Gradients follow FlashAttention (Dao et al., arXiv:2205.14135, section 3.1;
FlashAttention-2, arXiv:2307.08691, algorithm 2). The forward pass keeps
only the output O and the per-row log-sum-exp ``lse = m + log(total)``, not
the (L, S) weights. The backward pass recomputes each tile of weights from
them, ``P = exp(S - lse)``, and with ``D = rowsum(dO * O)``:

    dV += P^T dO          dP = dO V^T          dS = P * (dP - D)
    dQ += dS K * scale    dK += dS^T (Q * scale)

so it, too, never holds more than a tile of scores. `TiledAttention` is the
`torch.autograd.Function` that ties the two together; `tiled_attention` is
what `attention_lib.flash_attention` calls for torch tensors.

Importing this module imports torch: `attention_lib.flash.loop` imports it only
when a tensor arrives.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ..backend import namespace, prod
from ..inputs import AttentionProblem
from ..masks import apply_mask, mask_index, mask_tile
from .tiles import key_blocks, query_blocks, row_shift

__all__ = [
    "TORCH_BLOCK_K",
    "TORCH_BLOCK_Q",
    "TiledAttention",
    "tiled_attention",
    "tiled_backward",
    "tiled_forward",
]

# Tile sizes measured fastest on a 2-core CPU at L = S = 4096, B·H = 8, E = 64
# (between 256 x 512 and 1024 x 1024 the time changed by under 10%). A tile of
# scores is N·block_q·block_k floats: 16 MiB for N = 8 in float32.
TORCH_BLOCK_Q = 512
TORCH_BLOCK_K = 1024


def _tile(buffer: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A contiguous view of ``shape`` at the front of a flat reusable buffer."""
    return buffer[: prod(shape)].view(shape)


def _product_batch(*tensors: torch.Tensor) -> tuple[int, ...]:
    """The batch shape the tensors' batch dimensions (all but the last two) broadcast to."""
    return tuple(torch.broadcast_shapes(*(tuple(x.shape[:-2]) for x in tensors)))


def _add_product(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor, alpha: float = 1.0) -> None:
    """``acc += alpha * (a @ b)``, the product's batch summed down to ``acc``'s shape.

    Three-dimensional operands with one batch size take ``baddbmm_`` (one
    batched product, in place). Operands whose batch dimensions broadcast
    go through ``matmul``, which broadcasts one tile at a time (a tile-sized
    temporary), and the product is summed over the dimensions ``acc``
    broadcasts along: the gradient of an input that was broadcast.
    """
    if acc.dim() == a.dim() == b.dim() == 3 and acc.shape[0] == a.shape[0] == b.shape[0]:
        acc.baddbmm_(a, b, alpha=alpha)  # (N, m, n)
        return
    product = torch.matmul(a, b)  # (..., m, n), the broadcast batch
    if alpha != 1.0:
        product.mul_(alpha)
    acc.add_(product.sum_to_size(acc.shape))  # (*acc batch, m, n)


def _masked(
    scores: torch.Tensor,
    mask: torch.Tensor | None,
    is_causal: bool,
    rows: tuple[int, int],
    cols: tuple[int, int],
    batch: tuple[int, ...],
) -> torch.Tensor:
    """The tile of scores (..., bq, bk) with the user's mask and the causal mask applied.

    Tiles that need no mask are returned as they are (no copy); the others
    go through the shared `apply_mask`, viewed with the batch dimensions so a
    (..., L, S) mask broadcasts as it does on the reference path.
    """
    parts = mask_tile(namespace(scores), mask, is_causal, rows, cols, scores)
    if not parts:
        return scores
    bq, bk = scores.shape[-2:]
    tile = scores.view(*batch, bq, bk)  # (*batch, bq, bk)
    for part in parts:
        tile = apply_mask(namespace(scores), tile, part)  # (*batch, bq, bk), a new tensor
    return tile.reshape(scores.shape)


@torch.no_grad()
def tiled_forward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    is_causal: bool,
    scale: float,
    block_q: int,
    block_k: int,
    batch: tuple[int, ...],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention output and per-row log-sum-exp, one tile of scores at a time.

    query (..., L, E), key (..., S, E), value (..., S, Ev), one floating
    dtype, their batch dimensions broadcasting together to a shape of
    ``prod(batch)`` entries: ``batch`` itself, or (N,) flattened from it
    (three-dimensional tensors take the fastest products). ``mask`` is None
    or, with at least two dimensions, broadcasts to (*batch, L, S); a size-1
    dimension is not sliced. Returns out (..., L, Ev) and lse (..., L) with
    the broadcast batch: lse is the natural log of each row's sum of
    exp(scores), +inf for a row whose keys are all masked (its output is 0),
    so that the backward pass's exp(score - lse) is 0 there too.
    """
    tensor_batch = _product_batch(query, key, value)
    length, length_k, width_v = query.shape[-2], key.shape[-2], value.shape[-1]
    out = query.new_empty((*tensor_batch, length, width_v))  # (..., L, Ev)
    lse = query.new_full((*tensor_batch, length), math.inf)  # (..., L)
    buffer = query.new_empty(prod(tensor_batch) * min(block_q, length) * min(block_k, length_k))
    key_t = key.transpose(-1, -2)  # (..., E, S), a view
    for rows in query_blocks(length, block_q):
        r = slice(*rows)
        bq = rows[1] - rows[0]
        q = query[..., r, :] * scale  # (*Bq, bq, E), the scale folded in once
        # the tile of scores has the whole batch, even where only the value has it
        q = q.expand(*tensor_batch, bq, q.shape[-1])  # (..., bq, E), a view
        m = query.new_full((*tensor_batch, bq, 1), -math.inf)  # (..., bq, 1)
        total = query.new_zeros((*tensor_batch, bq, 1))  # (..., bq, 1)
        acc = query.new_zeros((*tensor_batch, bq, width_v))  # (..., bq, Ev), contiguous
        for cols in key_blocks(rows, length_k, block_k, is_causal):
            c = slice(*cols)
            s = _tile(buffer, (*tensor_batch, bq, cols[1] - cols[0]))  # (..., bq, bk)
            torch.matmul(q, key_t[..., c], out=s)  # (..., bq, bk)
            s = _masked(s, mask, is_causal, rows, cols, batch)  # (..., bq, bk)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., bq, 1)
            shift = row_shift(namespace(s), m_new)  # (..., bq, 1)
            p = s.sub_(shift).exp_()  # (..., bq, bk): the tile becomes exp(s - shift) in place
            rescale = (m - shift).exp_()  # (..., bq, 1), exp(old max - new max) <= 1
            total.mul_(rescale).add_(p.sum(dim=-1, keepdim=True))  # (..., bq, 1)
            _add_product(acc.mul_(rescale), p, value[..., c, :])  # (..., bq, Ev)
            m = m_new
        empty = total == 0  # (..., bq, 1): every key masked, or S = 0
        torch.div(acc, torch.where(empty, 1.0, total), out=out[..., r, :])
        lse[..., r] = torch.where(empty, math.inf, m + total.log()).squeeze(-1)
    return out, lse


@torch.no_grad()
def tiled_backward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    is_causal: bool,
    scale: float,
    block_q: int,
    block_k: int,
    batch: tuple[int, ...],
    out: torch.Tensor,
    lse: torch.Tensor,
    grad_out: torch.Tensor,
    mask_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Gradients of the attention output, recomputing each tile of weights from ``lse``.

    Arguments as `tiled_forward`, plus its outputs out (..., L, Ev) and lse
    (..., L) and the output's gradient grad_out (..., L, Ev). Returns
    dquery, dkey and dvalue, each in its input's own shape (summed over the
    batch dimensions it was broadcast along) and, when ``mask_grad`` (a
    float mask that requires grad), dmask in the mask's own shape and
    dtype, else None. A float mask is added to the scaled scores, so its
    gradient is dS, summed tile by tile into the mask's shape in the
    mask's dtype: pass the mask upcast (as `attention_lib.inputs.materialise`
    does) and a 16-bit mask's gradient is rounded once, by autograd.
    """
    tensor_batch = _product_batch(query, key, value)
    length, length_k = query.shape[-2], key.shape[-2]
    delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (..., L, 1), D = rowsum(dO * O)
    dquery = torch.zeros_like(query)  # (*Bq, L, E)
    # one contiguous accumulator per key block: baddbmm_ into a slice of a
    # (N, S, E) tensor would fall back to one small product per batch entry
    all_keys = key_blocks((0, length), length_k, block_k, False)
    dkeys = [key.new_zeros((*key.shape[:-2], c1 - c0, key.shape[-1])) for c0, c1 in all_keys]
    dvalues = [
        value.new_zeros((*value.shape[:-2], c1 - c0, value.shape[-1])) for c0, c1 in all_keys
    ]  # (*Bk, bk, E) and (*Bv, bk, Ev)
    dmask = torch.zeros_like(mask) if mask_grad else None  # the mask's own shape
    size = prod(tensor_batch) * min(block_q, length) * min(block_k, length_k)
    buffers = query.new_empty(size), query.new_empty(size)
    key_t, value_t = key.transpose(-1, -2), value.transpose(-1, -2)  # (..., E, S), (..., Ev, S)
    for rows in query_blocks(length, block_q):
        r = slice(*rows)
        bq = rows[1] - rows[0]
        q = query[..., r, :] * scale  # (*Bq, bq, E)
        q_all = q.expand(*tensor_batch, bq, q.shape[-1])  # (..., bq, E), a view, as forward
        d_out = grad_out[..., r, :]  # (..., bq, Ev)
        dq = torch.zeros_like(q)  # (*Bq, bq, E)
        for cols in key_blocks(rows, length_k, block_k, is_causal):
            c = slice(*cols)
            shape = (*tensor_batch, bq, cols[1] - cols[0])
            s = torch.matmul(q_all, key_t[..., c], out=_tile(buffers[0], shape))  # (..., bq, bk)
            s = _masked(s, mask, is_causal, rows, cols, batch)  # (..., bq, bk)
            p = s.sub_(lse[..., r, None]).exp_()  # (..., bq, bk): the forward's weights, recomputed
            _add_product(dvalues[cols[0] // block_k], p.transpose(-1, -2), d_out)  # (*Bv, bk, Ev)
            dp = torch.matmul(d_out, value_t[..., c], out=_tile(buffers[1], shape))  # (..., bq, bk)
            ds = dp.sub_(delta[..., r, :]).mul_(p)  # (..., bq, bk), gradient of the scaled scores
            if dmask is not None:
                target = dmask[mask_index(dmask, rows, cols)]  # (..., bq or 1, bk or 1), a view
                target += ds.view(*batch, *shape[-2:]).sum_to_size(target.shape)
            _add_product(dq, ds, key[..., c, :], alpha=scale)  # (*Bq, bq, E)
            _add_product(dkeys[cols[0] // block_k], ds.transpose(-1, -2), q)  # (*Bk, bk, E)
        dquery[..., r, :] = dq
    dkey = torch.cat(dkeys, dim=-2) if dkeys else torch.zeros_like(key)  # (*Bk, S, E)
    dvalue = torch.cat(dvalues, dim=-2) if dvalues else torch.zeros_like(value)  # (*Bv, S, Ev)
    return dquery, dkey, dvalue, dmask


class TiledAttention(torch.autograd.Function):
    """Attention on (..., L, E) tensors with FlashAttention's memory-light backward.

    ``apply(query, key, value, mask, is_causal, scale, block_q, block_k,
    batch)`` with the arguments of `tiled_forward`; returns out (..., L, Ev).
    Saves the inputs, the output and the log-sum-exp (..., L), never the
    (L, S) weights. Not twice differentiable.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None,
        is_causal: bool,
        scale: float,
        block_q: int,
        block_k: int,
        batch: tuple[int, ...],
    ) -> torch.Tensor:
        config = (is_causal, scale, block_q, block_k, batch)
        out, lse = tiled_forward(query, key, value, mask, *config)
        ctx.save_for_backward(query, key, value, mask, out, lse)
        ctx.config = config
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        query, key, value, mask, out, lse = ctx.saved_tensors
        mask_grad = mask is not None and ctx.needs_input_grad[3]
        grads = tiled_backward(
            query, key, value, mask, *ctx.config, out, lse, grad_out, mask_grad=mask_grad
        )
        return (*grads, None, None, None, None, None)


def tiled_attention(problem: AttentionProblem, block_q: int, block_k: int) -> torch.Tensor:
    """The tiled path for a validated problem with torch tensors: output (..., L, Ev).

    When query, key and value share the batch shape, it is flattened to one
    dimension (views for contiguous inputs) and the tiles take the batched
    ``bmm`` products; when their batch dimensions broadcast, each keeps its
    own shape and the products broadcast tile by tile, so no input is copied
    to the broadcast size. Runs `TiledAttention`; differentiable with
    respect to query, key, value and a float mask, each gradient in its own
    shape. The result is in the accumulation dtype (the caller casts it back).
    """
    q, k, v = problem.query, problem.key, problem.value
    batch, length = problem.batch, q.shape[-2]
    if all(tuple(x.shape[:-2]) == batch for x in (q, k, v)):
        n = prod(batch)
        q, k, v = (x.reshape(n, *x.shape[-2:]) for x in (q, k, v))  # (N, ·, ·)
    args = (problem.mask, problem.is_causal, problem.scale, block_q, block_k, batch)
    out = TiledAttention.apply(q, k, v, *args)  # (N or *batch, L, Ev)
    return out.reshape(*batch, length, v.shape[-1])  # (..., L, Ev)
