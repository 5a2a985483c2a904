"""The tiled path in torch, each tile as torch operations: forward and FlashAttention's backward.

`attention_lib.flash.loop` holds the readable version of the algorithm, written
once for numpy and torch through the array-API namespace. This module is the
same loop over the same tiles (`query_blocks`, `key_blocks`) with the same
running quantities (m, total, acc, rescale, shift), written for speed on a
CPU: the torch path's ``tile_kernel="ops"``. Where a call allows it, the
torch path computes each tile with PyTorch's fused CPU kernel instead
(`attention_lib.flash.fused_tiles`): a path built of separate operations can
at best draw level with that kernel (`attention_course.bench.floor`). This one
runs every other call: masks, non-finite inputs, broadcast batches, E != Ev,
other devices. What it does differently from the loop, each for speed
(`python -m attention_course.bench` measures it against SDPA):

- **Work items on threads of their own.** The batch (every batch and head
  entry, N of them) is cut into groups of entries, views of the inputs (no
  input is copied to the broadcast size). The forward pass's items are
  (group, block of query rows), the backward pass's one group each;
  `attention_lib.flash.workers` runs them on as many threads as torch has,
  each item's operations single-threaded, in place on one reused tile of
  scores per thread. One slow thread delays only its own item: many small
  operations each split over all threads wait for the slowest at every
  step, so one other busy process would slow all of them. A small problem
  runs in the calling thread instead, all
  entries in one batched product per tile.
- **Padded copies.** Each thread copies a group's keys and values, and
  each item its query block, into rows 64 bytes longer than E: rows of
  E = 64 or 128 floats put a (S, E) matrix's rows in a few cache sets, and
  the matrix products read them 20-30% slower.
- **Shifts and sums folded into the products.** The copies carry a column
  more: ones beside the keys and values, the row's shift (negated) beside
  the queries, so [q, -m] @ [k, 1]^T gives the scores minus the shift
  without a pass over the tile, and p @ [v, 1] the row sums of the weights
  beside their product with the values (the accumulator's last column is
  the total): each tile after a row block's first is three operations.
- **A lazy shift** (`LAZY_LIMIT`): after a row block's first tile its
  maximum stays the shift, so the tiles after it need no row maximum and
  no rescaling; a row whose later scores rise too far is done again.
- **exp2.** Scores are in units of ln 2 (log2(e) folded into the scale)
  and exponentiated with exp2, which takes the same time on every
  argument; torch's exp is 8 to 60 times slower on -inf and below -87.
- **Causal tiles.** Tiles wholly above the diagonal are skipped, and so
  are a tile's rows above its first key (`first_row`); the rows that cross
  the diagonal are masked in place with a cached triangle. The keys before
  a row block, which all its rows see, come in wider blocks than the ones
  that cross its diagonal (`below_diagonal_width`): no mask, fewer steps.

Gradients follow FlashAttention (Dao et al., arXiv:2205.14135, section 3.1;
FlashAttention-2, arXiv:2307.08691, algorithm 2). The forward pass keeps the
output O and, per row, the shift m and total (the sum of exp(s - m)), not
the (L, S) weights. The backward pass recomputes each tile of weights from
them, P = exp(S - m) / total, and with D = rowsum(dO * O):

    dV += P^T dO          dP = dO V^T          dS = P * (dP - D)
    dQ += dS K * scale    dK += dS^T (Q * scale)

so it, too, never holds more than a tile of scores. The papers save one
number per row, lse = m + log(total); we keep m and total apart because
their sum cancels: at scores near -1e9 (a padding row under a -1e9 mask)
float32's spacing is 64, so exp(s - lse) could not recover a weight of 1/4,
and at scores in the hundreds lse's rounding enters every weight of the row.
Dividing by total is folded into dO and D (dO / total, D / total), and D
into the product dO V^T as the shift is into Q K^T: no pass over the tile.

Masked keys are never read, NaN and infinities included (the rule and
where it parts from PyTorch: `attention_lib.flash.tiles`): each pass runs
the fast route, checks its result once, and only when it is not finite
runs again on the exact route. `TorchTiledFunction` is the
`torch.autograd.Function`; `torch_tiled_attention` is what
`attention_lib.flash_attention` calls for torch tensors.

Importing this module imports torch: `attention_lib.flash.dispatch` imports it
only when a tensor arrives.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ..backend import has_float64, namespace, prod
from ..inputs import AttentionProblem
from ..masks import mask_index
from ..nonfinite import add_compensated, sum_to, visible_matmul
from . import workers
from .route import Tiling
from .tiles import (
    all_finite,
    first_row,
    key_blocks,
    query_blocks,
    row_shift,
)

__all__ = [
    "LAZY_LIMIT",
    "PARALLEL_MIN_SCORES",
    "TORCH_BLOCK_K",
    "TORCH_BLOCK_Q",
    "TORCH_CAUSAL_BLOCK_K",
    "TORCH_CAUSAL_BLOCK_Q",
    "TorchTiledFunction",
    "below_diagonal_width",
    "default_blocks",
    "tiled_backward",
    "tiled_forward",
    "torch_tiled_attention",
]

# Tile sizes chosen by timing against SDPA (`python -m attention_course.bench`). Larger tiles mean
# fewer torch operations per score, and each operation's end is a moment where a worker
# may wait for Python's lock (`attention_course.bench.floor`); tall query blocks also reuse
# each block of keys and values for many rows. Causal key blocks are narrower, so the
# tiles crossing the diagonal compute few masked scores: 256 keys wide they compute 9/16
# of the scores at L = S = 2048 (`score_fraction`; the visible half is 1/2 + 1/(2L)).
# Their scratch (per worker: the padded keys and values, one or two tiles) stays inside the
# memory bound the benchmark checks at L = 16384 (`attention_course.bench.ratios`); wider
# tiles would pass it.
TORCH_BLOCK_Q = 2048
TORCH_BLOCK_K = 512
TORCH_CAUSAL_BLOCK_Q = 2048
TORCH_CAUSAL_BLOCK_K = 256

# Below this many scores (N·L·S) a call runs in the calling thread: starting
# threads' work costs more than it saves.
PARALLEL_MIN_SCORES = 1 << 20

# The lazy maximum (FlashAttention-4's conditional rescaling, taken further): after a
# row block's first tile, that tile's maximum stays the shift, and the tiles after it skip
# the row maximum and the rescaling (a tenth of the forward pass's time on a CPU). Softmax
# does not depend on the shift; it only must keep exp from overflowing. Every term is
# 2^(score - shift) <= total, so a total at most LAZY_LIMIT (2^40) bounds every score to
# 40 above the shift (in units of ln 2, below): no overflow in the output or in the
# backward pass, which reuses the shift. A row block whose total passes it is done again
# with the running maximum.
LAZY_LIMIT = 2.0**40

# Scores are kept in units of ln 2 (the scale times log2(e) folded into the query copy) and
# exponentiated with exp2, as FlashAttention's kernels do: torch's exp takes 8 to 60 times
# longer on -inf (a masked score) and on arguments below -87 (far from the row's maximum,
# common in trained models) than on others; exp2 takes the same time on all. Under a float
# mask, whose values may be as large as the dtype allows, scores stay in natural units.
_LOG2E = math.log2(math.e)

# Rows of E floats whose length is a multiple of 64 bytes (E = 64, 128) put the rows of a
# (S, E) key or value in the same few cache sets, and the matrix products read them slower;
# copies of the query block, keys and values with their rows padded by 64 bytes run at full
# speed.
_PAD_BYTES = 64

_XP = namespace(torch.empty(0))


def default_blocks(is_causal: bool) -> tuple[int, int]:
    """The torch path's (block_q, block_k) when the caller gives none."""
    if is_causal:
        return TORCH_CAUSAL_BLOCK_Q, TORCH_CAUSAL_BLOCK_K
    return TORCH_BLOCK_Q, TORCH_BLOCK_K


def below_diagonal_width(block_k: int) -> int:
    """Causal: the width of the key blocks wholly below a row block's diagonal.

    Those tiles need no mask and waste nothing, so they take at least the
    width that suits an unmasked tile (`TORCH_BLOCK_K`); ``block_k`` is the
    width of the blocks that cross the diagonal (`key_blocks`).
    """
    return max(block_k, TORCH_BLOCK_K)


class _Operand:
    """A tensor broadcast to (*batch, a, b), cut into (g, a, b) parts for groups of entries.

    The N = prod(batch) entries are numbered in C order. When the broadcast
    tensor has a (N, a, b) view (its batch dimensions merge: not broadcast,
    or broadcast along all of them), a group is any range of entries;
    otherwise each entry is a view of its own, and a group is one entry or
    all of them (*batch, a, b). Never a copy.
    """

    def __init__(self, x: torch.Tensor, batch: tuple[int, ...]) -> None:
        x = x[(None,) * (len(batch) + 2 - x.dim())]  # leading dimensions of size 1, a view
        self.whole = x.expand(*batch, *x.shape[-2:])  # (*batch, a, b), a view
        self.size = prod(batch)
        self.flat: torch.Tensor | None = None
        self.entries: list[torch.Tensor] = []
        try:
            self.flat = self.whole.view(self.size, *x.shape[-2:])  # (N, a, b)
        except RuntimeError:  # the batch dimensions do not merge: one view per entry
            self.entries = [self.whole[i] for i in itertools.product(*map(range, batch))]

    def __getitem__(self, group: tuple[int, int]) -> torch.Tensor:
        """The entries ``[n0, n1)``: (n1 - n0, a, b), or (*batch, a, b) for all of them."""
        if self.flat is not None:
            return self.flat[group[0] : group[1]]
        if group[1] - group[0] == self.size > 1:
            return self.whole
        return self.entries[group[0]][None]  # one entry


def _tile(buffer: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A contiguous view of ``shape`` at the front of a flat reusable buffer."""
    return buffer[: prod(shape)].view(shape)


def _scratch(scratch: dict[str, Any], name: str, size: int, like: torch.Tensor) -> torch.Tensor:
    """A flat buffer of ``size`` elements kept in one thread's ``scratch`` for its items."""
    buffer = scratch.get(name)
    if buffer is None or buffer.numel() < size:
        buffer = scratch[name] = like.new_empty(size)
    return buffer


def _accumulate(
    acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor, visible: torch.Tensor | None
) -> None:
    """``acc += a @ b`` in place, (g, m, n); on the exact route (``visible`` given)
    no masked row of ``b`` is read (`visible_matmul`)."""
    if visible is None:
        acc.baddbmm_(a, b)
    else:
        acc.add_(visible_matmul(_XP, a, b, visible))


class _Plan:
    """One call: its operands, the groups of batch entries its items take, how tiles are masked.

    query (*Bq, L, E), key (*Bk, S, E), value (*Bv, S, Ev), one floating
    dtype, batch dimensions broadcasting to ``batch``; ``mask`` None or, with
    at least two dimensions, broadcasting to (*batch, L, S). ``exact``: the
    exact route, for inputs that hold a non-finite value: masked scores are
    forced to -inf and the products read no masked key (the rule in
    `attention_lib.flash.tiles`).

    A large problem runs on `attention_lib.flash.workers`' threads, one
    entry per item, single-threaded operations; a small one (fewer than
    `PARALLEL_MIN_SCORES` scores) in the calling thread, all entries at
    once (one batched product per tile) when the operands allow.
    """

    def __init__(
        self,
        operands: dict[str, torch.Tensor | None],
        tiling: Tiling,
        batch: tuple[int, ...],
        exact: bool,
    ) -> None:
        query, key, value, mask = (operands[name] for name in ("query", "key", "value", "mask"))
        assert query is not None and key is not None and value is not None
        assert tiling.block_q is not None and tiling.block_k is not None  # sized by the caller
        is_causal, scale, block_q, block_k = (
            tiling.is_causal,
            tiling.scale,
            tiling.block_q,
            tiling.block_k,
        )
        self.size = prod(batch)
        self.length, self.length_k = query.shape[-2], key.shape[-2]
        self.is_causal, self.scale = is_causal, scale
        # scores in units of ln 2, exp(s) = exp2(s log2(e)); with a float mask in its own units
        # (log2(e) times a mask as large as the dtype's minimum would overflow to -inf)
        float_mask = mask is not None and mask.dtype != torch.bool
        self.unit = 1.0 if float_mask else _LOG2E
        self.scale2 = scale * self.unit
        self.exp_ = torch.Tensor.exp_ if float_mask else torch.Tensor.exp2_  # in place
        self.block_q, self.block_k = block_q, block_k
        self.block_k_below = below_diagonal_width(block_k) if is_causal else block_k
        self.exact = exact
        self.bool_mask = mask is not None and mask.dtype == torch.bool
        if self.bool_mask:  # where a boolean mask hides a key, filled in place per tile
            operands = {**operands, "hidden": ~mask}  # type: ignore[operator]
        self.inputs = operands  # as given
        self.parts = {
            name: _Operand(x, batch) for name, x in operands.items() if x is not None
        }  # each a (g, a, b) view per group
        self.has_mask = mask is not None
        # a row can have no visible key so far (running maximum -inf) only under a mask or
        # with non-finite scores: causal rows always see key 0 in their first tile
        self.may_be_empty = self.has_mask or self.exact
        small = self.size * self.length * self.length_k < PARALLEL_MIN_SCORES
        self.threads = 1 if small else workers.thread_count()
        # all entries at once take (N, a, b) products; a mask may broadcast as it is
        products = (part for name, part in self.parts.items() if name not in ("mask", "hidden"))
        merge = small and all(part.flat is not None for part in products)
        self.batch = batch
        step = max(self.size, 1) if merge else 1
        self.groups = [(n, min(n + step, self.size)) for n in range(0, self.size, step)]
        self._triangles: dict[tuple[int, int, int], torch.Tensor] = {}
        self.device = query.device
        self.lazy = not self.may_be_empty
        # the copies' rows get room for a column more, and on a large problem 64 bytes
        self.pad = 1 if small else _PAD_BYTES // query.element_size()

    def __getitem__(self, name_and_group: tuple[str, tuple[int, int]]) -> torch.Tensor:
        name, group = name_and_group
        return self.parts[name][group]

    def copy(
        self, scratch: dict[str, Any], name: str, x: torch.Tensor, scale: float | None = None
    ) -> torch.Tensor:
        """``x`` (g, a, b) (times ``scale``) in one thread's buffer ``name``, and a column more.

        Returns a (g, a, b + 1) view whose last column is the caller's to
        fill (ones, or a shift to fold into a product). On a large problem
        its rows are `_PAD_BYTES` longer than b, so the products read it at
        full speed.
        """
        g, a, b = x.shape
        buffer = _scratch(scratch, name, g * a * (b + self.pad), x)
        view = _tile(buffer, (g, a, b + self.pad))[..., : b + 1]  # (g, a, b + 1), a view
        if scale is None:
            view[..., :b].copy_(x)
        else:
            torch.mul(x, scale, out=view[..., :b])
        return view

    def keys_and_values(
        self, group: tuple[int, int], scratch: dict[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The group's keys (g, S, E + 1) and values (g, S, Ev + 1), a column of ones last.

        Copied once per thread and group (`copy`). The ones let a product
        subtract a row's shift: [q, -shift] @ [k, 1]^T = q k^T - shift.
        """
        if scratch.get("keys of") != group:
            scratch["keys of"] = group
            key = self.copy(scratch, "key", self["key", group])  # (g, S, E + 1)
            value = self.copy(scratch, "value", self["value", group])  # (g, S, Ev + 1)
            key[..., -1] = 1.0
            value[..., -1] = 1.0
            scratch["kv"] = key, value
        return scratch["kv"]

    def key_blocks(self, rows: tuple[int, int]) -> list[tuple[int, int]]:
        below = self.block_k_below if self.is_causal else None
        return key_blocks(rows, self.length_k, self.block_k, self.is_causal, below)

    def _above_diagonal(self, rows: tuple[int, int], cols: tuple[int, int]) -> torch.Tensor:
        """True where key c0 + j comes after query r0 + i: cached per tile shape and offset."""
        shape = (rows[1] - rows[0], cols[1] - cols[0], rows[0] - cols[0])
        triangle = self._triangles.get(shape)
        if triangle is None:  # two threads may both build it: the same tensor
            i = torch.arange(shape[0], device=self.device)[:, None]  # (bq, 1)
            j = torch.arange(shape[1], device=self.device)[None, :]  # (1, bk)
            triangle = self._triangles[shape] = j - i > shape[2]  # (bq, bk)
        return triangle

    def mask_scores(
        self, s: torch.Tensor, group: tuple[int, int], rows: tuple[int, int], cols: tuple[int, int]
    ) -> torch.Tensor | None:
        """Apply the masks of a group's tile of scores ``s`` (g, bq, bk), in place.

        Returns, on the exact route, where the tile's keys are visible
        (broadcastable to ``s``; None where every key is), else None.
        """
        if self.is_causal:
            if cols[1] - 1 <= rows[0]:  # wholly below the diagonal
                return None
            # only the rows before the block's last key miss some of it
            crossing = (rows[0], min(rows[1], cols[1] - 1))
            hidden = self._above_diagonal(crossing, cols)  # (rows, bk)
            s[:, : crossing[1] - crossing[0]].masked_fill_(hidden, -math.inf)
            if not self.exact:
                return None
            visible = s.new_ones(s.shape[1:], dtype=torch.bool)  # (bq, bk)
            visible[: crossing[1] - crossing[0]] = ~hidden
            return visible
        if not self.has_mask:
            return None
        mask = self["mask", group]  # (g or *batch, L or 1, S or 1)
        index = mask_index(mask, rows, cols)
        part = mask[index]  # (g or *batch, bq or 1, bk or 1), a view
        tile = s if part.dim() == 3 else s.view(*self.batch, *s.shape[-2:])  # as the mask
        if self.bool_mask:  # True takes part
            tile.masked_fill_(self["hidden", group][index], -math.inf)
            visible = part
        else:
            tile.add_(part)  # a float mask is added; -inf removes a key
            if not self.exact:
                return None
            hidden = part == -math.inf
            tile.masked_fill_(hidden, -math.inf)  # NaN + (-inf) is NaN: a masked score is -inf
            visible = ~hidden
        if not self.exact:
            return None
        return visible.expand(tile.shape).reshape(s.shape)  # (g, bq, bk)

    def shift(self, m: torch.Tensor) -> torch.Tensor:
        """The running maximum rows are shifted by, 0 where it is -inf (`row_shift`)."""
        return row_shift(_XP, m) if self.may_be_empty else m


def _row_block(
    plan: _Plan,
    q: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    group: tuple[int, int],
    rows: tuple[int, int],
    buffer: torch.Tensor,
    lazy: bool,
    shift: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The online softmax over one block of query rows: acc (g, bq, Ev), shift and total (g, bq, 1).

    ``q`` (g, bq, E + 1) holds the scaled queries and a free column,
    ``key`` (g, S, E + 1) and ``value`` (g, S, Ev + 1) the keys and values
    and ones (`_Plan.keys_and_values`): p @ [v, 1] accumulates the weights'
    row sums, the total, in the accumulator's last column. ``lazy``: the
    shift stays the first tile's maximum, folded into the products of the
    tiles after it as q's last column (no row maximum, no rescaling, no
    subtraction there); returns None when a later score rose so far above
    it that the total passed `LAZY_LIMIT`, and the block is to be done
    again. ``shift`` (g, bq, 1), with ``lazy``: the shift to keep from the
    first tile on instead of that tile's maximum (the block done again, with
    its rows' maxima: `_row_maxima`); the total then stays below the number
    of keys.

    The backward pass recomputes each tile's scores with the same
    operations (`_backward_group`): the first tile's (and, not lazy, every
    tile's) as a product and then a subtraction, a lazy block's later ones
    folded. So a weight is the same number in both passes, and the one
    key of a saturated row has a weight of exactly 1 in both (a folded
    recomputation of the first tile rounds the product's sum otherwise:
    at scores in the hundreds its weight was 1 ± 1e-4).
    """
    shape = q.shape[:2]  # (g, bq)
    key_t = key.transpose(-1, -2)  # (g, E + 1, S), a view
    m = q.new_full((*shape, 1), -math.inf)  # (g, bq, 1)
    acc = q.new_zeros((*shape, value.shape[-1]))  # (g, bq, Ev + 1): p v, then the total
    tiles: dict[tuple[int, int], torch.Tensor] = {}  # views of the buffer, by shape
    for step, cols in enumerate(plan.key_blocks(rows)):
        # causal: the block's rows before its first key see none of it, and are left out
        lo = first_row(rows, cols, plan.is_causal) - rows[0]
        c = slice(*cols)
        tile = tiles.get((lo, cols[1] - cols[0]))
        if tile is None:
            width = cols[1] - cols[0]
            tile = tiles[lo, width] = _tile(buffer, (shape[0], shape[1] - lo, width))
        q_rows, acc_rows = (q, acc) if lo == 0 else (q[:, lo:], acc[:, lo:])
        if lazy and step > 0:  # the shift stays: nothing to rescale
            s = torch.bmm(q_rows, key_t[..., c], out=tile)  # (g, rows, bk): scores - shift
            if plan.is_causal:
                plan.mask_scores(s, group, (rows[0] + lo, rows[1]), cols)  # the triangle: -inf
            p = plan.exp_(s)  # (g, rows, bk), 2^(s - shift) in place
            acc_rows.baddbmm_(p, value[:, c])  # (g, rows, Ev + 1): p v and the row sums
            continue
        seen, m_rows = (rows[0] + lo, rows[1]), m[:, lo:]
        s = torch.bmm(q_rows[..., :-1], key_t[:, :-1, c], out=tile)  # (g, rows, bk)
        visible = plan.mask_scores(s, group, seen, cols)
        if shift is not None:  # lazy, the first tile: the shift given
            p = plan.exp_(s.sub_(shift))  # (g, bq, bk): 2^(s - shift) <= 1 in place
            _accumulate(acc_rows, p, value[:, c], visible)  # (g, bq, Ev + 1)
            m.copy_(shift)
        else:
            m_new = torch.maximum(m_rows, s.amax(dim=-1, keepdim=True))  # (g, rows, 1)
            shift_now = plan.shift(m_new)  # (g, rows, 1)
            p = plan.exp_(s.sub_(shift_now))  # (g, rows, bk): 2^(s - shift) in place
            rescale = plan.exp_(m_rows - shift_now)  # (g, rows, 1), 2^(old max - new max) <= 1
            _accumulate(acc_rows.mul_(rescale), p, value[:, c], visible)  # (g, rows, Ev + 1)
            m_rows.copy_(m_new)
        if lazy:  # after the first tile, whose rows are all the block's
            torch.neg(m, out=q[..., -1:])  # [q, -shift] @ [k, 1]^T = q k^T - shift
    total = acc[..., -1:]  # (g, bq, 1), a view
    if lazy and shift is None and not float(total.amax()) <= LAZY_LIMIT:  # NaN fails too
        return None
    return acc[..., :-1], row_shift(_XP, m), total  # shift 0 where every key is masked


def _row_maxima(
    plan: _Plan,
    q: torch.Tensor,
    key: torch.Tensor,
    group: tuple[int, int],
    rows: tuple[int, int],
    buffer: torch.Tensor,
) -> torch.Tensor:
    """Each row's largest score (g, bq, 1), in units of ln 2: a lazy block done again
    shifts by it (`_row_block`). Arguments as `_row_block`'s; a lazy plan (no mask but
    the causal one)."""
    key_t = key.transpose(-1, -2)  # (g, E + 1, S), a view
    m = q.new_full((*q.shape[:2], 1), -math.inf)  # (g, bq, 1)
    for cols in plan.key_blocks(rows):
        lo = first_row(rows, cols, plan.is_causal) - rows[0]
        shape = (q.shape[0], q.shape[1] - lo, cols[1] - cols[0])
        s = torch.bmm(q[:, lo:, :-1], key_t[:, :-1, slice(*cols)], out=_tile(buffer, shape))
        plan.mask_scores(s, group, (rows[0] + lo, rows[1]), cols)  # (g, rows, bk)
        torch.maximum(m[:, lo:], s.amax(dim=-1, keepdim=True), out=m[:, lo:])
    return m


def _forward_rows(
    plan: _Plan,
    results: tuple[_Operand, _Operand, _Operand],
    item: tuple[tuple[int, int], tuple[int, int]],
    scratch: dict[str, Any],
) -> None:
    """One work item of the forward pass: a group's output rows [r0, r1), their m and total."""
    group, rows = item
    r = slice(*rows)
    key, value = plan.keys_and_values(group, scratch)  # (g, S, E + 1), (g, S, Ev + 1)
    q = plan.copy(scratch, "q", plan["query", group][:, r], plan.scale2)  # (g, bq, E + 1)
    buffer = _scratch(scratch, "s", q.shape[0] * q.shape[1] * plan.block_k_below, q)
    block = _row_block(plan, q, key, value, group, rows, buffer, lazy=plan.lazy)
    if block is None:  # the lazy shift fell too far below a row's maximum: shift by that
        maxima = _row_maxima(plan, q, key, group, rows, buffer)  # (g, bq, 1)
        block = _row_block(plan, q, key, value, group, rows, buffer, lazy=True, shift=maxima)
    acc, shift, total = block
    out, m, totals = (x[group] for x in results)  # (g, L, Ev), (g, L, 1), (g, L, 1)
    if plan.may_be_empty:
        torch.div(acc, torch.where(total == 0, 1.0, total), out=out[:, r])  # masked rows: 0
    else:  # every row sees a key, and its largest term is exp(0) = 1
        torch.div(acc, total, out=out[:, r])
    m[:, r] = shift
    totals[:, r] = total


@torch.no_grad()
def tiled_forward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    tiling: Tiling,
    batch: tuple[int, ...],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention output and per-row softmax statistics, one tile of scores at a time.

    query (*Bq, L, E), key (*Bk, S, E), value (*Bv, S, Ev), one floating
    dtype, their batch dimensions broadcasting to ``batch``; ``mask`` None
    or, with at least two dimensions, broadcasting to (*batch, L, S) (a
    size-1 dimension is not sliced); ``tiling`` with its tile sizes set
    (`Tiling.sized`). Returns out (*batch, L, Ev) and, each
    (*batch, L, 1), m, the shift of each row's scores in units of ln 2
    (score x log2(e): its largest, or one at most 40 below it, `LAZY_LIMIT`;
    0 for a row whose keys are all masked), and total, the sum of
    2^(score x log2(e) - m) over its keys (0 for such a row, whose output is
    0): the log-sum-exp is (m + log2(total)) ln 2. Under a float mask both
    are in natural units (m a score, total a sum of exp(score - m)).

    Runs the fast route, and the exact one only when the fast one's output
    is not finite (the rule for non-finite inputs: `attention_lib.flash.tiles`).
    """
    operands = {"query": query, "key": key, "value": value, "mask": mask}
    results = _forward(_Plan(operands, tiling, batch, exact=False))
    if not all_finite(_XP, results[0]):
        results = _forward(_Plan(operands, tiling, batch, exact=True))
    return results


def _forward(plan: _Plan) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The forward pass on ``plan``'s route: out (*batch, L, Ev), m and total (*batch, L, 1)."""
    batch, value = plan.batch, plan.inputs["value"]
    out = value.new_empty((*batch, plan.length, value.shape[-1]))  # (*batch, L, Ev)
    m = value.new_empty((*batch, plan.length, 1))  # (*batch, L, 1)
    total = value.new_empty((*batch, plan.length, 1))  # (*batch, L, 1)
    blocks = query_blocks(plan.length, plan.block_q)
    if plan.is_causal:  # a group's longest items first, so that the last to finish are short
        blocks.reverse()
    # group by group, so that each thread copies a group's keys and values once
    items = [(group, rows) for group in plan.groups for rows in blocks]
    parts = (_Operand(out, batch), _Operand(m, batch), _Operand(total, batch))

    def item(work: tuple[tuple[int, int], tuple[int, int]], scratch: dict[str, Any]) -> None:
        _forward_rows(plan, parts, work, scratch)

    workers.run(item, items, plan.threads)
    return out, m, total


class _Gradient:
    """The gradient of one input, cut like an `_Operand` into parts to accumulate into.

    An input that every entry reads at its own place gets its gradient
    directly. One broadcast over some batch dimension is read by several
    entries: each entry then accumulates into a buffer of its own
    (*batch, a, b), so no two threads write one place, and the entries are
    summed to the input's shape once, at the end, in float64, and rounded
    once (a float32 sum of N entries would round N times; the reference
    path sums the same way: `sum_to`, compensated float32 sums on a device
    without float64).
    """

    def __init__(self, x: torch.Tensor, batch: tuple[int, ...]) -> None:
        self.shape = tuple(x.shape)
        self.broadcast = prod(x.shape[:-2]) != prod(batch)
        self.buffer = x.new_zeros((*batch, *x.shape[-2:]) if self.broadcast else self.shape)
        self.parts = _Operand(self.buffer, batch)  # contiguous: a (N, a, b) view

    def result(self) -> torch.Tensor:
        return sum_to(self.buffer, self.shape)  # (*shape), rounded once


class _MaskGradient:
    """The gradient of a float mask, in the mask's own shape: dS, summed tile by tile.

    ``shared``: the mask is broadcast over some batch dimension, so entries
    add into the same places; their items then run in one thread, in order,
    into a float64 accumulator that `result` rounds once to the mask's dtype
    (on a device without float64, a float32 one and the rounding errors
    carried beside it: `add_compensated`).
    """

    def __init__(self, mask: torch.Tensor, batch: tuple[int, ...]) -> None:
        self.batch, self.size = batch, prod(batch)
        self.shared = prod(mask.shape[:-2]) != self.size
        self.dtype = mask.dtype
        wide = self.shared and mask.dtype == torch.float32  # summed as if in float64
        self.carry: torch.Tensor | None = None
        if wide and not has_float64(mask):
            self.carry = torch.zeros_like(mask)  # the float32 sum's rounding errors
        dtype = torch.float64 if wide and self.carry is None else mask.dtype
        self.tensor = torch.zeros_like(mask, dtype=dtype)
        self.parts = _Operand(self.tensor, batch)
        self.carries = None if self.carry is None else _Operand(self.carry, batch)

    def result(self) -> torch.Tensor:
        """The mask's gradient in its own shape and dtype."""
        total = self.tensor if self.carry is None else self.tensor + self.carry
        return total.to(self.dtype)

    def add(
        self, group: tuple[int, int], rows: tuple[int, int], cols: tuple[int, int], ds: torch.Tensor
    ) -> None:
        """Add a group's tile of dS (g, bq, bk) where the mask covers it."""
        ds = ds.to(self.tensor.dtype)  # float64 where entries share places (a no-op otherwise)
        if self.shared and group[1] - group[0] == self.size > 1:  # the whole batch at once
            tensor, carry = self.tensor, self.carry
            ds = ds.view(*self.batch, *ds.shape[-2:])  # (*batch, bq, bk)
        else:
            tensor = self.parts[group]  # (g, L or 1, S or 1); g = 1 where shared
            carry = None if self.carries is None else self.carries[group]
        index = mask_index(tensor, rows, cols)
        target = tensor[index]  # (..., bq or 1, bk or 1), a view
        if not self.shared:
            target += ds.sum_to_size(target.shape)
        elif carry is None:
            target += sum_to(ds, target.shape)  # in float64
        else:
            total, carried = add_compensated(target, carry[index], sum_to(ds, target.shape))
            target.copy_(total)
            carry[index] = carried


def _backward_group(
    plan: _Plan,
    grads: dict[str, _Operand],
    dmask: _MaskGradient | None,
    group: tuple[int, int],
    scratch: dict[str, Any],
) -> None:
    """One work item of the backward pass: every tile of a group of entries, query rows outer.

    Each tile's scores are recomputed by the operations the forward pass
    used on it (`_row_block`): a lazy block's tiles after its first with
    the shift folded in, [q, -m] @ [k, 1]^T = s - m, the others as q k^T
    (masked), then minus m. D folds into dP's product: [dO, -D] @ [v, 1]^T
    = dP - D.
    """
    out, m, total, grad_out = (plan[name, group] for name in ("out", "m", "total", "grad_out"))
    dquery, dkey, dvalue = (grads[name][group] for name in ("query", "key", "value"))
    key, value = plan.keys_and_values(group, scratch)  # (g, S, E + 1), (g, S, Ev + 1)
    key_t, value_t = key.transpose(-1, -2), value.transpose(-1, -2)  # (g, E + 1, S), ...
    g = group[1] - group[0]
    size = g * plan.block_q * plan.block_k_below  # the widest tile
    buffers = _scratch(scratch, "s", size, key), _scratch(scratch, "dp", size, key)
    for rows in query_blocks(plan.length, plan.block_q):
        r = slice(*rows)
        bq = rows[1] - rows[0]
        q = plan.copy(scratch, "q", plan["query", group][:, r], plan.scale2)  # (g, bq, E + 1)
        torch.neg(m[:, r], out=q[..., -1:])  # the shift, folded into the scores' product
        inverse = torch.where(total[:, r] == 0, 0.0, 1.0 / total[:, r])  # (g, bq, 1); masked: 0
        # dO / total, so that P need not be divided, and -D / total, folded into dP's product
        d_out = plan.copy(scratch, "d_out", grad_out[:, r])  # (g, bq, Ev + 1)
        delta = (d_out[..., :-1] * out[:, r]).sum(dim=-1, keepdim=True)  # (g, bq, 1), D
        d_out[..., :-1].mul_(inverse)
        torch.mul(delta, inverse, out=d_out[..., -1:]).neg_()
        dq = dquery[:, r]  # (g, bq, E), zeros: accumulated in place, no copy of its own
        for step, cols in enumerate(plan.key_blocks(rows)):
            lo = first_row(rows, cols, plan.is_causal) - rows[0]  # as in `_row_block`
            seen = (rows[0] + lo, rows[1])
            c = slice(*cols)
            shape = (g, bq - lo, cols[1] - cols[0])
            q_rows, d_rows = q[:, lo:], d_out[:, lo:]  # (g, rows, E + 1), (g, rows, Ev + 1)
            if plan.lazy and step > 0:
                s = torch.bmm(q_rows, key_t[..., c], out=_tile(buffers[0], shape))  # s - m
                visible = plan.mask_scores(s, group, seen, cols)
                p = plan.exp_(s)  # (g, rows, bk): total x the forward's weights, recomputed
            else:
                s = torch.bmm(q_rows[..., :-1], key_t[:, :-1, c], out=_tile(buffers[0], shape))
                visible = plan.mask_scores(s, group, seen, cols)  # (g, rows, bk): s + mask
                p = plan.exp_(s.sub_(m[:, seen[0] : seen[1]]))
            dp = torch.bmm(d_rows, value_t[..., c], out=_tile(buffers[1], shape))  # (dP - D)/total
            ds = dp.mul_(p)  # (g, rows, bk), gradient of the scaled scores
            if visible is not None:
                ds.masked_fill_(~visible, 0.0)  # a masked position passes nothing back
            if dmask is not None:
                dmask.add(group, seen, cols, ds)
            seen_t = None if visible is None else visible.broadcast_to(shape).transpose(-1, -2)
            _accumulate(dvalue[:, c], p.transpose(-1, -2), d_rows[..., :-1], seen_t)  # (g, bk, Ev)
            _accumulate(dq[:, lo:], ds, key[:, c, :-1], visible)  # (g, rows, E), times scale
            _accumulate(dkey[:, c], ds.transpose(-1, -2), q_rows[..., :-1], seen_t)  # (g, bk, E)
        dq.mul_(plan.scale)
    if plan.unit != 1.0:
        dkey.mul_(1.0 / plan.unit)  # its products took q scale log2(e)


@torch.no_grad()
def tiled_backward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    tiling: Tiling,
    batch: tuple[int, ...],
    out: torch.Tensor,
    m: torch.Tensor,
    total: torch.Tensor,
    grad_out: torch.Tensor,
    mask_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Gradients of the attention output, recomputing each tile of weights from m and total.

    Arguments as `tiled_forward`, plus its outputs out (*batch, L, Ev), m
    and total (*batch, L, 1) and the output's gradient grad_out (*batch, L,
    Ev). Returns dquery, dkey and dvalue, each in its input's own shape
    (summed over the batch dimensions it was broadcast along, in the
    inputs' dtype) and, when ``mask_grad`` (a float mask that requires
    grad), dmask in the mask's own shape and dtype, else None. A float mask
    is added to the scaled scores, so its gradient is dS, summed tile by
    tile into the mask's shape: pass the mask upcast (as
    `attention_lib.inputs.materialise` does) and a 16-bit mask's gradient is
    rounded once, by autograd.

    Runs the fast route, and the exact one only when a gradient it gives is
    not finite (the rule for non-finite inputs: `attention_lib.flash.tiles`).
    """
    operands = {"query": query, "key": key, "value": value, "mask": mask, "out": out}
    operands |= {"m": m, "total": total, "grad_out": grad_out}
    grads = _backward(_Plan(operands, tiling, batch, exact=False), mask_grad)
    if not all_finite(_XP, *grads):
        grads = _backward(_Plan(operands, tiling, batch, exact=True), mask_grad)
    return grads


def _backward(
    plan: _Plan, mask_grad: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The backward pass on ``plan``'s route: dquery, dkey, dvalue, dmask (or None)."""
    batch, mask = plan.batch, plan.parts.get("mask")
    inputs = {name: plan.inputs[name] for name in ("query", "key", "value")}
    grads = {name: _Gradient(x, batch) for name, x in inputs.items()}
    dmask = _MaskGradient(plan.inputs["mask"], batch) if mask is not None and mask_grad else None
    if dmask is not None and dmask.shared:
        plan.threads = 1  # entries add into the same parts of the mask's gradient: in order
    parts = {name: grad.parts for name, grad in grads.items()}

    def item(group: tuple[int, int], scratch: dict[str, Any]) -> None:
        _backward_group(plan, parts, dmask, group, scratch)

    workers.run(item, plan.groups, plan.threads)
    dquery, dkey, dvalue = (g.result() for g in grads.values())
    return dquery, dkey, dvalue, None if dmask is None else dmask.result()


class TorchTiledFunction(torch.autograd.Function):
    """Attention on (..., L, E) tensors with FlashAttention's memory-light backward.

    ``apply(query, key, value, mask, tiling, batch)`` with the arguments of
    `tiled_forward`; returns out (*batch, L, Ev). Saves the inputs, the
    output and two numbers per row (m, total), never the (L, S) weights.
    Not twice differentiable.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None,
        tiling: Tiling,
        batch: tuple[int, ...],
    ) -> torch.Tensor:
        out, m, total = tiled_forward(query, key, value, mask, tiling, batch)
        ctx.save_for_backward(query, key, value, mask, out, m, total)
        ctx.tiling, ctx.batch = tiling, batch
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        query, key, value, mask, out, m, total = ctx.saved_tensors
        mask_grad = mask is not None and ctx.needs_input_grad[3]
        grads = tiled_backward(
            query, key, value, mask, ctx.tiling, ctx.batch, out, m, total, grad_out, mask_grad
        )
        return (*grads, None, None)


def torch_tiled_attention(problem: AttentionProblem, tiling: Tiling) -> torch.Tensor:
    """The tiled path for a validated problem with torch tensors: output (..., L, Ev).

    ``tiling``'s tile sizes, `default_blocks` where None. Query, key and
    value keep their own batch shapes (no input is copied to the broadcast
    size). Runs `TorchTiledFunction`; differentiable with respect to query,
    key, value and a float mask, each gradient in its own shape. The result
    is in the accumulation dtype (the caller casts it back).
    """
    sized = tiling.sized(*default_blocks(tiling.is_causal))
    return TorchTiledFunction.apply(
        problem.query, problem.key, problem.value, problem.mask, sized, problem.batch
    )
