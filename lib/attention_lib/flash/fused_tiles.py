"""The torch tiled path with fused tiles: each tile one call of PyTorch's fused CPU kernel.

`attention_lib.flash.torch_tiled` computes a tile with torch operations, one
pass over the tile each (the product, the exponential, the product with the
values). On a CPU those passes, and the moments between them, are what keep
it below PyTorch's fused kernel: each operation timed alone sums to about
SDPA's whole time per score (`attention_course.bench.floor`). Here the work
inside a tile is done by that kernel (``aten::_scaled_dot_product_flash_
attention_for_cpu``, the one SDPA calls on the CPU), which keeps its own
small blocks in cache and runs in one parallel region; what is ours is
everything between the tiles:

- **the tiles**: the same query and key blocks (`query_blocks`,
  `key_blocks`), so the path visits exactly the tiles the notebooks draw;
- **the online softmax across them**: a tile gives its rows' output O_t,
  normalised over the tile's keys, and their log-sum-exp lse_t. Two
  normalised partial results merge as

      lse = log(e^lse_a + e^lse_b)
      O   = O_a e^(lse_a - lse) + O_b e^(lse_b - lse)
          = O_a + w (O_b - O_a),  w = e^(lse_b - lse) = sigmoid(lse_b - lse_a)

  FlashAttention's rescaling written for normalised outputs (the merge
  FlashAttention-2's split-KV decoding and ring attention use), one pass
  over the rows (``lerp_``) per tile after a row block's first, kept in
  float64 and rounded once (`merge`);
- **causal skipping**: tiles wholly above the diagonal are never called, the
  keys below a row block's diagonal come in unmasked tiles, and only the
  tile that crosses it is masked (the kernel's ``is_causal``, aligned at
  the tile's first key: `first_row` leaves out the rows above it);
- **the backward pass, tile by tile**: with the whole rows' O and lse, the
  kernel's backward on one tile gives exactly that tile's share of dQ and
  the tile's dK and dV (FlashAttention-2, arXiv:2307.08691, algorithm 2:
  P = exp(S - lse), D = rowsum(dO * O), both from whole rows); the shares
  are summed;
- **the threads**: on a large problem the calls run on
  `attention_lib.flash.workers`' threads, as many as torch has, each call
  single-threaded, work items (one head, one row block) handed to
  whichever thread is free. On the kernel's own threads every call would
  end waiting for the slowest, so one other busy process would slow every
  call; on the workers it slows only its own items (`python -m
  attention_course.bench` measures both, idle and loaded).

It takes what the kernel takes and our rules agree with: CPU tensors,
float32 or float64, E = Ev, no mask, batch dimensions that merge into one
(no broadcast), a last dimension of stride 1, and finite inputs and scale
(a masked key holding NaN would reach the output through the kernel's
0 x NaN; the rule in `attention_lib.flash.tiles`). `eligible` says whether
a problem qualifies; everything else runs on `attention_lib.flash.torch_tiled`.

Importing this module imports torch.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ..backend import has_float64, namespace, prod
from ..inputs import AttentionProblem, scores_past_bound
from . import workers
from .route import Tiling
from .tiles import all_finite, first_row, key_blocks, query_blocks
from .torch_tiled import PARALLEL_MIN_SCORES

__all__ = [
    "FUSED_BLOCK_K",
    "FUSED_BLOCK_Q",
    "FUSED_CAUSAL_BLOCK",
    "FusedTilesFunction",
    "NotFinite",
    "Tile",
    "below_diagonal_width",
    "default_blocks",
    "eligible",
    "fused_tiles",
    "fused_tiles_attention",
    "kernel_name",
    "merge",
]

# Wide tiles: every tile after a row block's first costs one merge (a pass over its rows'
# output), and the kernel inside a tile already works in cache-sized blocks of keys, so
# fewer, wider tiles are faster; causal, the kernel skips its own blocks above the diagonal
# inside the one masked tile of a row block, so a wide causal tile skips as much. The sizes
# were chosen by `python -m attention_course.bench` against SDPA (benchmarks/results/).
FUSED_BLOCK_Q = 2048
FUSED_BLOCK_K = 2048
FUSED_CAUSAL_BLOCK = 2048

_FORWARD = "_scaled_dot_product_flash_attention_for_cpu"
_BACKWARD = "_scaled_dot_product_flash_attention_for_cpu_backward"

_XP = namespace(torch.empty(0))

#: one tile: query rows [r0, r1), keys [c0, c1), and whether the kernel masks it causally
Tile = tuple[tuple[int, int], tuple[int, int], bool]


class NotFinite(Exception):
    """An input or the fused tiles' output is not finite, or (``bounded``) a score may
    outgrow float32: `fused_tiles_attention` gives None, and its caller decides again."""


def default_blocks(is_causal: bool) -> tuple[int, int]:
    """The fused tiles' (block_q, block_k) when the caller gives none."""
    if is_causal:
        return FUSED_CAUSAL_BLOCK, FUSED_CAUSAL_BLOCK
    return FUSED_BLOCK_Q, FUSED_BLOCK_K


def below_diagonal_width(block_k: int) -> int:
    """Causal: the width of the key blocks wholly below a row block's diagonal.

    Those tiles are unmasked and each costs a merge, so they are at least
    `FUSED_CAUSAL_BLOCK` wide; ``block_k`` is the width of the blocks from
    the row block's first row on (`key_blocks`).
    """
    return max(block_k, FUSED_CAUSAL_BLOCK)


def kernel_name(problem: AttentionProblem) -> str:
    """The tile kernel ``tile_kernel="auto"`` gives ``problem`` with finite inputs: "fused"
    or "ops"."""
    return "ops" if eligible(problem) is not None else "fused"


def _kernel_present() -> bool:
    return hasattr(torch.ops.aten, _FORWARD) and hasattr(torch.ops.aten, _BACKWARD)


def _merged(x: torch.Tensor, batch: tuple[int, ...]) -> torch.Tensor | None:
    """``x`` (*batch, n, e) as a (1, N, n, e) view, or None where it has none (a broadcast)."""
    if tuple(x.shape[:-2]) != batch or (x.shape[-1] > 1 and x.stride(-1) != 1):
        return None
    try:
        return x.view(1, prod(batch), *x.shape[-2:])  # (1, N, n, e)
    except RuntimeError:
        return None


def eligible(problem: AttentionProblem) -> str | None:
    """None when the fused tiles can run ``problem``, else why not (a short phrase).

    Checks everything but the inputs' values; `fused_tiles_attention`
    checks those (finite) as it runs.
    """
    query, key, value = problem.query, problem.key, problem.value
    if not _kernel_present():
        return "this torch has no fused CPU attention kernel"
    if query.device.type != "cpu":
        return f"the fused kernel runs on the CPU, not on {query.device.type}"
    if not has_float64(query):  # only where the CPU plays a device without it, in tests
        return "the fused tiles merge in float64, which this device lacks"
    if query.dtype not in (torch.float32, torch.float64):
        return f"the fused tiles compute in float32 or float64, not {query.dtype}"
    if problem.mask is not None:
        return "a mask runs on the torch operations (masked keys are never read there)"
    if value.shape[-1] != query.shape[-1]:
        return f"the fused kernel needs E = Ev, got E = {query.shape[-1]}, Ev = {value.shape[-1]}"
    if 0 in (query.shape[-2], key.shape[-2], query.shape[-1]):
        return "an empty sequence or head width runs on the torch operations"
    if any(_merged(x, problem.batch) is None for x in (query, key, value)):
        return "inputs whose batch dimensions broadcast or do not merge into one"
    return None


def fused_tiles(
    length_q: int, length_k: int, block_q: int, block_k: int, is_causal: bool
) -> list[Tile]:
    """Every tile the fused path calls the kernel on, row blocks outer, keys in order.

    The tiles of `key_blocks` (causal: blocks `below_diagonal_width` wide
    below a row block's diagonal, unmasked, then ``block_k`` wide from its
    first row), each with the rows that see any of its keys (`first_row`).
    A tile from the row block's first row on is masked by the kernel's
    top-left causal mask, which is then aligned: its first row and first
    key are the same position. A row block's first tile starts at key 0 and
    covers all its rows.
    """
    below = below_diagonal_width(block_k) if is_causal else None
    return [
        ((first_row(rows, cols, is_causal), rows[1]), cols, is_causal and cols[0] >= rows[0])
        for rows in query_blocks(length_q, block_q)
        for cols in key_blocks(rows, length_k, block_k, is_causal, below)
    ]


def merge(out: torch.Tensor, lse: torch.Tensor, out_t: torch.Tensor, lse_t: torch.Tensor) -> None:
    """Fold one tile's normalised output into the rows' running result, in place.

    ``out`` (..., n, Ev) and ``lse`` (..., n) hold the rows' result over the
    keys so far, ``out_t`` and ``lse_t`` the tile's over its own keys; after
    the call they hold the result over both (the formula in the module's
    docstring). The weight of the new tile is sigmoid(lse_t - lse), which
    neither overflows nor loses the smaller share (``lerp_`` starts from the
    nearer end). Callers keep ``out`` and ``lse`` in float64 across a row
    block's tiles and round once at the end: in float32 every merge rounds
    the output once more, and a dozen merges made it the least accurate part
    of the path, with FlashAttention's D = rowsum(dO * O) in the backward
    pass taking that error into every gradient.
    """
    out.lerp_(out_t, torch.sigmoid(lse_t - lse).unsqueeze(-1))  # (..., n, Ev), one pass
    torch.logaddexp(lse, lse_t, out=lse)  # (..., n)


def _one_key_rows(rows: tuple[int, int], cols: tuple[int, int], causal: bool, length_k: int) -> int:
    """How many of a tile's first rows see exactly one key in all: their weight there is 1.

    Such a row's dS = P (dP - D) is exactly 0 (D = rowsum(dO * O) and O is
    that key's value), so its dQ and its share of dK are 0 and its share of
    dV is dO. The kernel computes dP as a product and D as a row sum, which
    round differently and leave about 1e-7 where PyTorch's math backend and
    our torch operations give 0. Such rows: every row when there
    is one key, and row 0 of a causal call, which sees key 0 alone.
    """
    if length_k == 1:
        return rows[1] - rows[0]
    return 1 if causal and rows[0] == 0 and cols[0] == 0 else 0


def _rows(x: torch.Tensor, span: tuple[int, int]) -> torch.Tensor:
    """Positions [a, b) of a (1, N, n, e) or (1, N, n) tensor, a view."""
    return x[:, :, span[0] : span[1]]


def _row_blocks(tiles: list[Tile]) -> list[list[Tile]]:
    """``tiles`` cut into row blocks (consecutive tiles ending at the same row)."""
    return [list(block) for _, block in itertools.groupby(tiles, key=lambda t: t[0][1])]


def _head_groups(size: int, length_q: int, length_k: int) -> list[tuple[int, int]]:
    """The heads [n0, n1) of each work item: one head each on `workers`' threads, or all of
    them in one item (a small problem, or fewer heads than threads: the kernel's own threads)."""
    threads = workers.thread_count()
    if threads > 1 and size >= threads and size * length_q * length_k >= PARALLEL_MIN_SCORES:
        return [(n, n + 1) for n in range(size)]
    return [(0, size)]


def _threads(groups: list[tuple[int, int]]) -> int:
    """How many threads run the work items: torch's count on `workers`' threads, or 1 for one
    group of every head (the items then run on the caller's thread, the kernel on torch's
    own threads). Never one thread per head: eight single-threaded threads on two cores
    take turns, each evicting the others' blocks from the cache (forward, L = 2048, E = 64
    and 128, causal: 0.82-0.89 of SDPA on eight threads, 0.92-0.96 on two)."""
    return workers.thread_count() if len(groups) > 1 else 1


def _heads(x: torch.Tensor, heads: tuple[int, int]) -> torch.Tensor:
    return x[:, heads[0] : heads[1]]  # (1, n1 - n0, ...), a view


@torch.no_grad()
def _forward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    tiles: list[Tile],
    scale: float,
    bounded: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """out (1, N, L, Ev) and lse (1, N, L) from query (1, N, L, E), key and value (1, N, S, E).

    Work items are (heads, row block), the longest row blocks first, on
    `workers`' threads (each item's calls single-threaded): a thread that
    another process slows delays only its own items, where the kernel's own
    threads would all wait for it at the end of every call.
    Raises `NotFinite` when an input or the output is not finite. The
    checks run in the items, not on torch's threads before and after them:
    after a parallel operation torch's OpenMP threads spin for several
    milliseconds (libgomp's ``GOMP_SPINCOUNT``), and a spinning thread takes
    a core from the workers.
    ``bounded``: each item also checks that its scores stay within float32's
    bound (`attention_lib.inputs.scores_past_bound`, each head's rows against
    its keys, in the pass the finite check makes over them), and raises
    `NotFinite` past it. Per head, so that the decision does not depend on
    how many heads an item holds (the threads); it depends on the row blocks
    (``block_q``), as the order of the sums does.
    """
    kernel = getattr(torch.ops.aten, _FORWARD)
    out = value.new_empty((*query.shape[:-1], value.shape[-1]))  # (1, N, L, Ev)
    lse = query.new_empty(query.shape[:-1])  # (1, N, L)
    groups = _head_groups(query.shape[1], query.shape[2], key.shape[2])
    blocks = sorted(_row_blocks(tiles), key=lambda block: -sum(t[1][1] - t[1][0] for t in block))
    items = [(heads, block) for heads in groups for block in blocks]

    def item(work: tuple[tuple[int, int], list[Tile]], scratch: dict[str, Any]) -> None:
        heads, block = work
        q_h, k_h, v_h = (_heads(x, heads) for x in (query, key, value))  # (1, h, n, E)
        out_h, lse_h = _heads(out, heads), _heads(lse, heads)
        block_rows = block[0][0]  # the first tile starts at key 0 and holds all the block's rows
        # the rows' result over the tiles so far: float64 where a merge follows (`merge`)
        wide = torch.float64 if len(block) > 1 else out.dtype  # `eligible`: it has float64
        acc = _rows(out_h, block_rows).to(wide)  # (1, h, bq, Ev), a copy unless one tile
        acc_lse = _rows(lse_h, block_rows).to(wide)  # (1, h, bq)
        if bounded:  # the norms are finite only where the rows and keys are
            if scores_past_bound(_XP, scale, _rows(q_h, block_rows), k_h, per_entry=True):
                raise NotFinite
            if not all_finite(_XP, v_h):
                raise NotFinite
        elif not all_finite(_XP, _rows(q_h, block_rows), k_h, v_h):  # every item: all keys
            raise NotFinite
        for rows, cols, causal in block:
            q, k, v = _rows(q_h, rows), _rows(k_h, cols), _rows(v_h, cols)  # (1, h, bq|bk, E)
            out_t, lse_t = kernel(q, k, v, 0.0, causal, scale=scale)  # (1, h, bq, Ev), (1, h, bq)
            span = (rows[0] - block_rows[0], rows[1] - block_rows[0])  # rows within the block
            if cols[0] == 0:  # a row block's first tile: all its rows, nothing to merge with
                _rows(acc, span).copy_(out_t)
                _rows(acc_lse, span).copy_(lse_t)
            else:
                merge(_rows(acc, span), _rows(acc_lse, span), out_t.to(wide), lse_t.to(wide))
        if len(block) > 1:  # rounded once
            _rows(out_h, block_rows).copy_(acc)
            _rows(lse_h, block_rows).copy_(acc_lse)
        if not all_finite(_XP, _rows(out_h, block_rows)):  # scores so large that exp overflows
            raise NotFinite

    workers.run(item, items, _threads(groups))
    return out, lse


@torch.no_grad()
def _backward(
    saved: tuple[torch.Tensor, ...], grad_out: torch.Tensor, tiles: list[Tile], scale: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dquery, dkey, dvalue (each as its (1, N, n, E) input): every tile's share, summed.

    One work item per head (every tile of it), so that no two threads add
    into the same rows of dK and dV. Each item zeroes its own heads'
    gradients (on torch's threads, the fill would leave them spinning while
    the items run; `_forward`).
    """
    kernel = getattr(torch.ops.aten, _BACKWARD)
    query, key, value, out, lse = saved
    grads = [torch.empty_like(x) for x in (query, key, value)]  # zeroed by the items
    groups = _head_groups(query.shape[1], query.shape[2], key.shape[2])

    def item(heads: tuple[int, int], scratch: dict[str, Any]) -> None:
        query_h, grad_h, out_h, lse_h, key_h, value_h = (
            _heads(x, heads) for x in (query, grad_out, out, lse, key, value)
        )
        dquery, dkey, dvalue = (_heads(g, heads).zero_() for g in grads)  # summed tile by tile
        for rows, cols, causal in tiles:
            q, d_out, o, l_rows = (_rows(x, rows) for x in (query_h, grad_h, out_h, lse_h))
            k, v = _rows(key_h, cols), _rows(value_h, cols)  # (1, h, bk, E)
            ones = _one_key_rows(rows, cols, causal, key.shape[2])
            if ones:  # their whole gradient is dO into dV; the kernel sees a zero dO there
                _rows(dvalue, (cols[0], cols[0] + 1)).add_(d_out[:, :, :ones].sum(-2, True))
                if ones == rows[1] - rows[0]:
                    continue
                d_out = d_out.clone()  # (1, h, bq, Ev)
                d_out[:, :, :ones] = 0
            dq, dk, dv = kernel(d_out, q, k, v, o, l_rows, 0.0, causal, scale=scale)
            _rows(dquery, rows).add_(dq)  # (1, h, bq, E): this tile's share of dQ
            _rows(dkey, cols).add_(dk)  # (1, h, bk, E)
            _rows(dvalue, cols).add_(dv)  # (1, h, bk, Ev)

    workers.run(item, groups, _threads(groups))
    dquery, dkey, dvalue = grads
    return dquery, dkey, dvalue


class FusedTilesFunction(torch.autograd.Function):
    """Attention on (1, N, n, E) views, tile by tile on the fused kernel, with its backward.

    ``apply(query, key, value, tiles, scale, bounded)``: query (1, N, L, E),
    key and value (1, N, S, E), ``tiles`` from `fused_tiles`. Returns out
    (1, N, L, E). Saves the inputs, the output and one number per row (lse),
    never the (L, S) weights. Raises `NotFinite` when an input or the output
    is not finite, or (``bounded``) a score may outgrow float32 (`_forward`).
    Not twice differentiable.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        tiles: list[Tile],
        scale: float,
        bounded: bool = False,
    ) -> torch.Tensor:
        out, lse = _forward(query, key, value, tiles, scale, bounded)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.tiles, ctx.scale = tiles, scale
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        grads = _backward(ctx.saved_tensors, grad_out, ctx.tiles, ctx.scale)
        return (*grads, None, None, None)


def fused_tiles_attention(
    problem: AttentionProblem, tiling: Tiling, bounded: bool = False
) -> torch.Tensor | None:
    """The fused tiles' output (*batch, L, E) for an `eligible` problem, or None.

    None when an input or the scale is not finite, or the output is not
    (scores so large that exp overflows): the caller then runs the torch
    operations, which follow the library's rule for non-finite values. (The
    kernel scales q k^T after the product and gives a row of NaN scores
    zeros: with a NaN or infinite scale its rows would be finite where the
    rule, and PyTorch's math backend, give NaN.) ``tiling`` gives the tile
    sizes (`default_blocks` where None). ``bounded``: None also when a work
    item's scores may outgrow float32 (`_forward`). Differentiable with
    respect to query, key and value.
    """
    if not math.isfinite(tiling.scale):
        return None
    inputs = [_merged(x, problem.batch) for x in (problem.query, problem.key, problem.value)]
    sized = tiling.sized(*default_blocks(tiling.is_causal))
    length_q, length_k = problem.query.shape[-2], problem.key.shape[-2]
    tiles = fused_tiles(length_q, length_k, sized.block_q, sized.block_k, tiling.is_causal)
    try:
        out = FusedTilesFunction.apply(*inputs, tiles, tiling.scale, bounded)  # (1, N, L, E)
    except NotFinite:
        return None
    return out.view(problem.shape)  # (*batch, L, E)
