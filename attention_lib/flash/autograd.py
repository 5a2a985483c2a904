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
tensors, N the product of the batch dimensions. That makes it several times
faster than the generic loop on torch tensors, and lets it keep what the
backward pass needs.

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
from ..masks import apply_mask, mask_tile
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


def _tile(buffer: torch.Tensor, shape: tuple[int, int, int]) -> torch.Tensor:
    """A contiguous (N, bq, bk) view of the front of a flat reusable buffer."""
    return buffer[: prod(shape)].view(shape)


def _masked(
    scores: torch.Tensor,
    mask: torch.Tensor | None,
    is_causal: bool,
    rows: tuple[int, int],
    cols: tuple[int, int],
    batch: tuple[int, ...],
) -> torch.Tensor:
    """The (N, bq, bk) tile of scores with the user's mask and the causal mask applied.

    Tiles that need no mask are returned as they are (no copy); the others
    go through the shared `apply_mask`, viewed with the batch dimensions so a
    (..., L, S) mask broadcasts as it does on the reference path.
    """
    parts = mask_tile(namespace(scores), mask, is_causal, rows, cols, scores)
    if not parts:
        return scores
    n, bq, bk = scores.shape
    tile = scores.view(*batch, bq, bk)  # (..., bq, bk)
    for part in parts:
        tile = apply_mask(namespace(scores), tile, part)  # (..., bq, bk), a new tensor
    return tile.reshape(n, bq, bk)


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

    query (N, L, E), key (N, S, E), value (N, S, Ev), one floating dtype;
    ``batch`` is the shape N was flattened from (``prod(batch) == N``) and
    ``mask`` is None or broadcasts to (*batch, L, S). Returns out (N, L, Ev)
    and lse (N, L), the natural log of each row's sum of exp(scores): +inf
    for a row whose keys are all masked (its output is 0), so that the
    backward pass's exp(score - lse) is 0 there too.
    """
    n, length, _ = query.shape
    length_k, width_v = key.shape[1], value.shape[2]
    out = query.new_empty((n, length, width_v))  # (N, L, Ev)
    lse = query.new_full((n, length), math.inf)  # (N, L)
    buffer = query.new_empty(n * min(block_q, length) * min(block_k, length_k))
    key_t = key.transpose(1, 2)  # (N, E, S), a view
    for rows in query_blocks(length, block_q):
        bq = rows[1] - rows[0]
        q = query[:, rows[0] : rows[1]] * scale  # (N, bq, E), the scale folded in once
        m = query.new_full((n, bq, 1), -math.inf)  # (N, bq, 1)
        total = query.new_zeros((n, bq, 1))  # (N, bq, 1)
        acc = query.new_zeros((n, bq, width_v))  # (N, bq, Ev), contiguous for baddbmm_
        for cols in key_blocks(rows, length_k, block_k, is_causal):
            s = _tile(buffer, (n, bq, cols[1] - cols[0]))  # (N, bq, bk)
            torch.bmm(q, key_t[:, :, cols[0] : cols[1]], out=s)  # (N, bq, bk)
            s = _masked(s, mask, is_causal, rows, cols, batch)  # (N, bq, bk)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (N, bq, 1)
            shift = row_shift(namespace(s), m_new)  # (N, bq, 1)
            p = s.sub_(shift).exp_()  # (N, bq, bk): the tile becomes exp(s - shift) in place
            rescale = (m - shift).exp_()  # (N, bq, 1), exp(old max - new max) <= 1
            total.mul_(rescale).add_(p.sum(dim=-1, keepdim=True))  # (N, bq, 1)
            acc.mul_(rescale).baddbmm_(p, value[:, cols[0] : cols[1]])  # (N, bq, Ev)
            m = m_new
        empty = total == 0  # (N, bq, 1): every key masked, or S = 0
        torch.div(acc, torch.where(empty, 1.0, total), out=out[:, rows[0] : rows[1]])
        lse[:, rows[0] : rows[1]] = torch.where(empty, math.inf, m + total.log()).squeeze(-1)
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

    Arguments as `tiled_forward`, plus its outputs out (N, L, Ev) and lse
    (N, L) and the output's gradient grad_out (N, L, Ev). Returns dquery
    (N, L, E), dkey (N, S, E), dvalue (N, S, Ev) and, when ``mask_grad`` (a
    float mask that requires grad), dmask in the mask's shape, else None.
    A float mask is added to the scaled scores, so its gradient is dS.
    """
    n, length, _ = query.shape
    length_k = key.shape[1]
    delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (N, L, 1), D = rowsum(dO * O)
    dquery = torch.zeros_like(query)  # (N, L, E)
    # one contiguous accumulator per key block: baddbmm_ into a slice of a
    # (N, S, E) tensor would fall back to one small product per batch entry
    all_keys = key_blocks((0, length), length_k, block_k, False)
    dkeys = [key.new_zeros((n, c1 - c0, key.shape[2])) for c0, c1 in all_keys]  # (N, bk, E)
    dvalues = [value.new_zeros((n, c1 - c0, value.shape[2])) for c0, c1 in all_keys]  # (N, bk, Ev)
    dmask = query.new_zeros(mask.shape) if mask_grad else None  # (..., L, S)
    size = n * min(block_q, length) * min(block_k, length_k)
    buffers = query.new_empty(size), query.new_empty(size)
    key_t, value_t = key.transpose(1, 2), value.transpose(1, 2)  # (N, E, S), (N, Ev, S)
    for rows in query_blocks(length, block_q):
        r = slice(*rows)
        bq = rows[1] - rows[0]
        q = query[:, r] * scale  # (N, bq, E)
        d_out = grad_out[:, r]  # (N, bq, Ev)
        dq = torch.zeros_like(q)  # (N, bq, E)
        for cols in key_blocks(rows, length_k, block_k, is_causal):
            c = slice(*cols)
            shape = (n, bq, cols[1] - cols[0])
            s = torch.bmm(q, key_t[:, :, c], out=_tile(buffers[0], shape))  # (N, bq, bk)
            s = _masked(s, mask, is_causal, rows, cols, batch)  # (N, bq, bk)
            p = s.sub_(lse[:, r, None]).exp_()  # (N, bq, bk): the forward's weights, recomputed
            dvalues[cols[0] // block_k].baddbmm_(p.transpose(1, 2), d_out)  # (N, bk, Ev)
            dp = torch.bmm(d_out, value_t[:, :, c], out=_tile(buffers[1], shape))  # (N, bq, bk)
            ds = dp.sub_(delta[:, r]).mul_(p)  # (N, bq, bk), gradient of the scaled scores
            if dmask is not None:
                target = dmask[..., r, c]  # (..., bq, bk), the mask's own leading dims
                target += ds.view(*batch, *shape[1:]).sum_to_size(target.shape)
            dq.baddbmm_(ds, key[:, c], alpha=scale)  # (N, bq, E)
            dkeys[cols[0] // block_k].baddbmm_(ds.transpose(1, 2), q)  # (N, bk, E)
        dquery[:, r] = dq
    dkey = torch.cat(dkeys, dim=1) if dkeys else torch.zeros_like(key)  # (N, S, E)
    dvalue = torch.cat(dvalues, dim=1) if dvalues else torch.zeros_like(value)  # (N, S, Ev)
    if dmask is not None:
        dmask = dmask.to(mask.dtype)
    return dquery, dkey, dvalue, dmask


class TiledAttention(torch.autograd.Function):
    """Attention on (N, L, E) tensors with FlashAttention's memory-light backward.

    ``apply(query, key, value, mask, is_causal, scale, block_q, block_k,
    batch)`` with the arguments of `tiled_forward`; returns out (N, L, Ev).
    Saves the inputs, the output and the log-sum-exp (N, L), never the
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

    Flattens the batch dimensions to one (key and value are first expanded
    to the query's batch, a copy only where they broadcast), runs
    `TiledAttention` and restores the shape. Differentiable with respect to
    query, key, value and a float mask; the result is in the accumulation
    dtype (the caller casts it back).
    """
    q, k, v = problem.query, problem.key, problem.value
    batch = tuple(q.shape[:-2])
    n, length = prod(batch), q.shape[-2]
    q3 = q.reshape(n, length, q.shape[-1])  # (N, L, E)
    k3 = k.expand(*batch, *k.shape[-2:]).reshape(n, *k.shape[-2:])  # (N, S, E)
    v3 = v.expand(*batch, *v.shape[-2:]).reshape(n, *v.shape[-2:])  # (N, S, Ev)
    args = (problem.mask, problem.is_causal, problem.scale, block_q, block_k, batch)
    out = TiledAttention.apply(q3, k3, v3, *args)  # (N, L, Ev)
    return out.reshape(*batch, length, v.shape[-1])  # (..., L, Ev)
