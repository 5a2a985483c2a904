"""The tiled path: FlashAttention's algorithm, one block of scores at a time.

For each block of ``block_q`` queries we walk the keys ``block_k`` at a time
and keep three running quantities per query row (the online softmax of
Milakov and Gimelshein, arXiv:1805.02867):

    m      the largest score seen so far             (..., bq, 1)
    total  the sum of exp(score - m) so far (the papers' l)  (..., bq, 1)
    acc    the sum of exp(score - m) * value so far  (..., bq, Ev)

When a new tile raises the maximum from m to m', everything accumulated so
far is rescaled by exp(m - m'), so all terms stay relative to one maximum.
``acc / total`` is divided out once, after the last tile (FlashAttention-2,
arXiv:2307.08691). Only one (..., bq, bk) tile of scores exists at a time, so
memory grows linearly with the sequence length instead of quadratically.
The result equals `scaled_dot_product_attention` up to rounding.

This module holds the readable loop, written once for numpy and torch, and
`flash_attention`, which picks the path that runs it (``backend=``): this
loop for numpy arrays; for torch tensors the same loop written with torch's
in-place operations plus FlashAttention's backward pass
(`attention_lib.flash_autograd`); for CUDA tensors the Triton kernel
(`attention_lib.triton_flash`). Those modules are imported only when asked
for, so importing this one imports neither torch nor triton.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from .backend import device_of, is_torch_array
from .inputs import AttentionProblem, prepare
from .masks import apply_mask, mask_tile

__all__ = ["BACKENDS", "flash_attention", "key_blocks", "query_blocks", "row_shift"]

#: the names ``flash_attention(..., backend=...)`` accepts
BACKENDS = ("auto", "tiled", "triton")

# Tiles of the readable loop (numpy): small enough to draw, large enough that
# the matrix products, not Python, take the time.
NUMPY_BLOCK_Q = 256
NUMPY_BLOCK_K = 512


def _check_block(name: str, size: int | None) -> None:
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ValueError(
            f"{name} must be a positive integer, got {size!r} (or None for the default)"
        )


def query_blocks(length: int, block_q: int) -> list[tuple[int, int]]:
    """The query row blocks ``[r0, r1)`` covering ``length`` rows, the last one possibly short."""
    return [(r0, min(r0 + block_q, length)) for r0 in range(0, length, block_q)]


def key_blocks(
    q_rows: tuple[int, int], length_k: int, block_k: int, is_causal: bool
) -> list[tuple[int, int]]:
    """The key blocks ``[k0, k1)`` visited for the query rows ``[r0, r1)``.

    With ``is_causal`` query row r sees the keys up to r (top-left aligned),
    so the rows ``[r0, r1)`` see no key at or after r1: a block starting
    there lies wholly above the diagonal and is skipped, not computed and
    masked. The blocks that cross the diagonal are masked by `mask_tile`.
    The notebooks draw this list.
    """
    stop = min(length_k, q_rows[1]) if is_causal else length_k
    return [(k0, min(k0 + block_k, length_k)) for k0 in range(0, stop, block_k)]


def row_shift(xp: Any, m: Any) -> Any:
    """What each row's scores are shifted by before exp: the running maximum ``m``.

    A row with every key so far masked has m = -inf; it is shifted by 0
    instead, so exp(-inf - 0) = 0 rather than exp(-inf + inf) = NaN.
    """
    return xp.where(m == -xp.inf, 0.0, m)  # (..., bq, 1)


def _query_block(problem: AttentionProblem, rows: tuple[int, int], block_k: int) -> Any:
    """Attention output for query rows ``[r0, r1)``, one key tile at a time."""
    xp, value = problem.xp, problem.value
    q = problem.query[..., rows[0] : rows[1], :] * problem.scale  # (..., bq, E)
    batch_rows = tuple(q.shape[:-1])
    device = device_of(q)
    m = xp.full((*batch_rows, 1), -xp.inf, dtype=q.dtype, device=device)  # (..., bq, 1)
    total = xp.zeros((*batch_rows, 1), dtype=q.dtype, device=device)  # (..., bq, 1)
    acc = xp.zeros((*batch_rows, value.shape[-1]), dtype=q.dtype, device=device)  # (..., bq, Ev)
    for cols in key_blocks(rows, problem.key.shape[-2], block_k, problem.is_causal):
        k = problem.key[..., cols[0] : cols[1], :]  # (..., bk, E)
        v = value[..., cols[0] : cols[1], :]  # (..., bk, Ev)
        s = xp.matmul(q, xp.matrix_transpose(k))  # (..., bq, bk)
        for mask in mask_tile(xp, problem.mask, problem.is_causal, rows, cols, q):
            s = apply_mask(xp, s, mask)  # (..., bq, bk)
        m_new = xp.maximum(m, xp.max(s, axis=-1, keepdims=True))  # (..., bq, 1)
        shift = row_shift(xp, m_new)  # (..., bq, 1)
        p = xp.exp(s - shift)  # (..., bq, bk)
        rescale = xp.exp(m - shift)  # (..., bq, 1), exp(old max - new max) <= 1
        total = rescale * total + xp.sum(p, axis=-1, keepdims=True)  # (..., bq, 1)
        acc = rescale * acc + xp.matmul(p, v)  # (..., bq, Ev)
        m = m_new
    return acc / xp.where(total == 0, 1.0, total)  # (..., bq, Ev); all-masked rows stay 0


def tiled_generic(problem: AttentionProblem, block_q: int, block_k: int) -> Any:
    """The readable loop on any array namespace: output (..., L, Ev) in the accumulation dtype."""
    xp, length = problem.xp, problem.query.shape[-2]
    blocks = [_query_block(problem, rows, block_k) for rows in query_blocks(length, block_q)]
    if not blocks:  # L = 0
        return xp.zeros(problem.shape, dtype=problem.query.dtype, device=device_of(problem.query))
    return xp.concat(blocks, axis=-2)  # (..., L, Ev)


def _triton_refusal(
    problem: AttentionProblem, block_q: int | None, block_k: int | None, forced: bool
) -> Exception | None:
    """Why the Triton kernel cannot run this call (an exception to raise), or None if it can.

    ``backend="auto"`` asks only for CUDA tensors, so that triton is never
    imported for numpy or CPU work; ``backend="triton"`` also accepts CPU
    tensors when the kernel runs in Triton's interpreter (TRITON_INTERPRET=1).
    """
    if not is_torch_array(problem.query):
        return ValueError("backend='triton' needs torch tensors, got numpy arrays")
    if not forced and problem.query.device.type != "cuda":
        return RuntimeError("the Triton kernel runs on CUDA tensors")
    if importlib.util.find_spec("triton") is None:
        return RuntimeError(
            "backend='triton' needs the triton package, which is not installed "
            "(pip install -e '.[triton]', Linux only); backend='tiled' runs everywhere"
        )
    try:
        from . import triton_flash
    except ImportError as err:  # installed but broken, e.g. no matching driver libraries
        return RuntimeError(f"backend='triton': triton is installed but failed to import: {err}")
    return triton_flash.refusal(problem, block_q, block_k)


def flash_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
    block_q: int | None = None,
    block_k: int | None = None,
    backend: str = "auto",
) -> Any:
    """Scaled dot-product attention computed tile by tile (online softmax).

    Same arguments, shapes, semantics and errors as
    `scaled_dot_product_attention` (no dropout): query (..., L, E), key
    (..., S, E), value (..., S, Ev) give (..., L, Ev) in the query's dtype, on
    its device, numpy or torch. At most one tile of scores per batch entry
    exists at a time; the mask is sliced per tile and causal tiles wholly
    above the diagonal are skipped.

    ``backend`` picks the path that runs it:

    - ``"tiled"``: the library's loop. numpy arrays run the readable loop in
      this module; torch tensors run its in-place torch version, which is
      differentiable (FlashAttention's backward pass, recomputing tiles from
      the saved log-sum-exp; see `attention_lib.flash_autograd`).
    - ``"triton"``: the Triton kernel (`attention_lib.triton_flash`): CUDA
      tensors, or CPU tensors when TRITON_INTERPRET=1 was set before triton
      was imported. It handles ``is_causal`` but no ``attn_mask``; float16,
      bfloat16 and float32; head widths up to 256. Its gradients come from
      the tiled backward pass.
    - ``"auto"`` (default): Triton for CUDA tensors when triton is installed
      and the call is one it handles, the tiled path otherwise (masks,
      float64, numpy, CPU tensors).

    ``block_q`` and ``block_k`` are the tile sizes: any positive integers,
    also ones that do not divide L or S, or None for the path's own choice
    (numpy 128 x 128, torch 512 x 1024, Triton by head width). The Triton
    kernel takes powers of two from 16 to 256.

    Raises ValueError for block sizes that are not positive integers, an
    unknown ``backend`` (the message lists the valid names) and requests
    the Triton kernel does not handle with ``backend="triton"``;
    RuntimeError when ``backend="triton"`` cannot run here (triton missing,
    tensors not on CUDA without the interpreter). The message says why.
    """
    if not isinstance(backend, str) or backend not in BACKENDS:
        valid = ", ".join(repr(name) for name in BACKENDS)
        raise ValueError(f"backend must be one of {valid}, got {backend!r}")
    _check_block("block_q", block_q)
    _check_block("block_k", block_k)
    problem = prepare(query, key, value, attn_mask, is_causal, scale, enable_gqa)
    if backend != "tiled":
        refusal = _triton_refusal(problem, block_q, block_k, forced=backend == "triton")
        if refusal is None:
            from .triton_flash import triton_attention

            return triton_attention(query, key, value, problem, enable_gqa, block_q, block_k)
        if backend == "triton":
            raise refusal
    if is_torch_array(problem.query):
        from .flash_autograd import TORCH_BLOCK_K, TORCH_BLOCK_Q, tiled_attention

        block_q = TORCH_BLOCK_Q if block_q is None else block_q
        block_k = TORCH_BLOCK_K if block_k is None else block_k
        out = tiled_attention(problem, block_q, block_k)  # (..., L, Ev)
    else:
        block_q = NUMPY_BLOCK_Q if block_q is None else block_q
        block_k = NUMPY_BLOCK_K if block_k is None else block_k
        out = tiled_generic(problem, block_q, block_k)  # (..., L, Ev)
    return problem.xp.astype(out, problem.out_dtype)
