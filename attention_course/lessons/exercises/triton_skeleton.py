"""Notebook 07's Triton kernel: FlashAttention's forward pass with the key loop's body left out.

`attention_skeleton` is `attention_lib.flash.triton.forward` cut down to what
the exercise is about: one program per (block of BLOCK_M query rows, head),
contiguous (H, length, width) tensors, head widths that are powers of two
(at least 16, the smallest matrix-product tile), no feature padding. It
loads its query rows once, then walks the keys BLOCK_N at a time: for each
block it loads the keys and values (zeros past the last key) and calls
``key_block``, the learner's code, which updates the running

    m      the largest score so far, in log2 units      (BLOCK_M,)
    total  the sum of 2^(score - m)                      (BLOCK_M,)
    acc    the sum of 2^(score - m) * value              (BLOCK_M, EV)

and returns them. log2(e) is folded into ``qk_scale`` on the host, so base-2
exponentials give the natural softmax's weights. After the loop the kernel
divides acc by total once and stores each row's log-sum-exp, converted
to natural units. With IS_CAUSAL (top-left, as PyTorch's is_causal) the loop
stops at the block's last row: tiles wholly above the diagonal are skipped,
and the tiles it visits are masked by ``key_block``.

``key_block`` is a module global bound by `launch`: Triton's interpreter
looks it up at every launch. (A GPU's JIT would compile the first body it
saw and keep it, so there each body would need a fresh module.)

Importing this module imports torch and triton; notebook 07 imports it only
in the child process that sets TRITON_INTERPRET=1 first
(`attention_course.lessons.exercises.key_block`).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

__all__ = ["attention_skeleton", "key_block", "launch"]

key_block: Any = None  # the learner's @triton.jit body of the key loop, bound by `launch`


@triton.jit
def attention_skeleton(
    Q, K, V, Out, Lse, length_q, length_k, qk_scale,
    E: tl.constexpr, EV: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
):  # fmt: skip
    """Output and log-sum-exp of BLOCK_M query rows of one head; grid (cdiv(L, BLOCK_M), H).

    Q (H, L, E), K (H, S, E), V (H, S, EV), Out (H, L, EV) contiguous, one
    dtype; Lse (H, L) float32, natural log.
    """
    block = tl.program_id(0)  # which block of query rows
    head = tl.program_id(1).to(tl.int64)
    Q += head * length_q * E
    K += head * length_k * E
    V += head * length_k * EV
    Out += head * length_q * EV
    Lse += head * length_q

    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query index
    in_rows = rows < length_q  # (BLOCK_M,)
    dims = tl.arange(0, E)  # (E,)
    dims_v = tl.arange(0, EV)  # (EV,)
    q = tl.load(Q + rows[:, None] * E + dims[None, :], mask=in_rows[:, None], other=0.0)
    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)  # (BLOCK_M,)
    total = tl.zeros((BLOCK_M,), tl.float32)  # (BLOCK_M,)
    acc = tl.zeros((BLOCK_M, EV), tl.float32)  # (BLOCK_M, EV)

    if IS_CAUSAL:  # these rows see no key from the block's last row + 1 on
        stop = tl.minimum(length_k, (block + 1) * BLOCK_M)
    else:
        stop = length_k
    for k0 in range(0, stop, BLOCK_N):
        cols = k0 + tl.arange(0, BLOCK_N)  # (BLOCK_N,) key index
        in_keys = cols < length_k  # (BLOCK_N,): False past the last key
        k = tl.load(K + cols[:, None] * E + dims[None, :], mask=in_keys[:, None], other=0.0)
        v = tl.load(V + cols[:, None] * EV + dims_v[None, :], mask=in_keys[:, None], other=0.0)
        m, total, acc = key_block(
            q, k, v, m, total, acc, rows, cols, length_k, qk_scale, IS_CAUSAL
        )  # (BLOCK_M,), (BLOCK_M,), (BLOCK_M, EV)

    out = acc / total[:, None]  # (BLOCK_M, EV), divided once
    lse = (m + tl.math.log2(total)) * 0.6931471805599453  # (BLOCK_M,), log2 units times ln 2
    tl.store(
        Out + rows[:, None] * EV + dims_v[None, :],
        out.to(Out.dtype.element_ty),
        mask=in_rows[:, None],
    )
    tl.store(Lse + rows, lse, mask=in_rows)


def launch(
    body: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    is_causal: bool,
    block_m: int = 16,
    block_n: int = 16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the skeleton with ``body`` (a @triton.jit function) as its key loop's body.

    query (H, L, E), key (H, S, E), value (H, S, Ev): contiguous, one dtype,
    E and Ev powers of two from 16 to 256. The scale is 1/sqrt(E). Returns
    out (H, L, Ev) in the inputs' dtype and lse (H, L) float32 (natural
    log). Raises ValueError for widths or blocks the kernel cannot take.
    """
    global key_block
    heads, length_q, width = query.shape
    length_k, width_v = key.shape[1], value.shape[2]
    for name, size in (("E", width), ("Ev", width_v), ("block_m", block_m), ("block_n", block_n)):
        if not (16 <= size <= 256 and size & (size - 1) == 0):
            raise ValueError(f"the skeleton needs {name} a power of two from 16 to 256, got {size}")
    key_block = body
    out = torch.empty((heads, length_q, width_v), dtype=query.dtype)  # (H, L, Ev)
    lse = torch.empty((heads, length_q), dtype=torch.float32)  # (H, L)
    qk_scale = width**-0.5 * math.log2(math.e)  # the scale, and log2(e) for exp2
    grid = (triton.cdiv(length_q, block_m), heads)
    attention_skeleton[grid](
        query, key, value, out, lse, length_q, length_k, qk_scale,
        E=width, EV=width_v, BLOCK_M=block_m, BLOCK_N=block_n, IS_CAUSAL=bool(is_causal),
    )  # fmt: skip
    return out, lse
