"""`flash_attention`: one entry point, three execution paths (``backend=``).

- numpy arrays run the readable loop (`attention_lib.flash.loop`);
- torch tensors run the torch tiled path with FlashAttention's backward
  pass: on the CPU each tile one call of PyTorch's fused kernel, merged by
  the online softmax (`attention_lib.flash.fused_tiles`), where the call
  allows it, and each tile as torch operations otherwise
  (`attention_lib.flash.torch_tiled`): ``tile_kernel=``;
- CUDA tensors run the Triton kernels (`attention_lib.flash.triton.launch`).

Those modules are imported only when asked for, so importing this one
imports neither torch nor triton.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from ..backend import is_torch_array
from ..inputs import (
    AttentionProblem,
    AttentionSpec,
    check,
    materialise,
    may_widen,
    positive_integer,
    wide_scores,
)

__all__ = ["BACKENDS", "TILE_KERNELS", "flash_attention"]

#: the names ``flash_attention(..., backend=...)`` accepts
BACKENDS = ("auto", "tiled", "triton")
#: the names ``flash_attention(..., tile_kernel=...)`` accepts: how the torch tiled path
#: computes one tile
TILE_KERNELS = ("auto", "fused", "ops")


def _triton_plan(
    spec: AttentionSpec, block_q: int | None, block_k: int | None, forced: bool
) -> Any:
    """How the Triton kernels run this call (`triton_launch.plan`'s layout), or why they
    cannot (an exception to raise).

    ``backend="auto"`` asks only for CUDA tensors, so that triton is never
    imported for numpy or CPU work; ``backend="triton"`` also accepts CPU
    tensors when the kernel runs in Triton's interpreter (TRITON_INTERPRET=1).
    """
    if not is_torch_array(spec.query):
        return ValueError("backend='triton' needs torch tensors, got numpy arrays")
    if not forced and spec.query.device.type != "cuda":
        return RuntimeError("the Triton kernel runs on CUDA tensors")
    if importlib.util.find_spec("triton") is None:
        return RuntimeError(
            "backend='triton' needs the triton package, which is not installed "
            "(pip install -e '.[triton]', Linux only); backend='tiled' runs everywhere"
        )
    try:
        from .triton import launch as triton_launch
    except ImportError as err:  # installed but broken, e.g. no matching driver libraries
        return RuntimeError(f"backend='triton': triton is installed but failed to import: {err}")
    return triton_launch.plan(spec, block_q, block_k)


def _torch_tiles(
    problem: AttentionProblem, block_q: int | None, block_k: int | None, tile_kernel: str
) -> Any:
    """The torch tiled path's output (..., L, Ev), on the tile kernel asked for."""
    if tile_kernel != "ops":
        from . import fused_tiles

        why = fused_tiles.eligible(problem)
        if why is not None and tile_kernel == "fused":
            raise ValueError(f"tile_kernel='fused' cannot run this call: {why}")
        if why is None:
            out = fused_tiles.fused_tiles_attention(problem, block_q, block_k)
            if out is not None:  # None: a value is not finite, and the rule is kept below
                return out
    from .torch_tiled import torch_tiled_attention

    return torch_tiled_attention(problem, block_q, block_k)


def _fused_float32(
    spec: AttentionSpec, block_q: int | None, block_k: int | None, tile_kernel: str
) -> Any:
    """The fused tiles' float32 output (..., L, Ev) for a float32 call that may widen, with
    the float32 bound checked in their work items; None where that does not apply, or where
    an item finds its scores past the bound or a value not finite.

    `wide_scores` decides float32 or float64 before the tiles, from one pass
    over the query and key on one thread: about 3% of the forward at L = 2048,
    E = 64, causal (0.6 ms of 19-20 on a 2-core Xeon, timed with and without it
    in one process).
    The fused tiles' items read the same rows and keys for their finite check;
    there each checks the bound on its own part (each head's rows against
    that head's keys: a tighter bound, the same rule), on the workers'
    threads. Past it, the whole call is decided again by `wide_scores`, so
    every head of one call computes in one dtype.
    """
    if tile_kernel == "ops" or not is_torch_array(spec.query) or not may_widen(spec):
        return None
    from . import fused_tiles

    problem = materialise(spec)  # float32, no copy; grouped heads repeated
    if fused_tiles.eligible(problem) is not None:
        return None
    return fused_tiles.fused_tiles_attention(problem, block_q, block_k, bounded=True)


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
    tile_kernel: str = "auto",
) -> Any:
    """Scaled dot-product attention computed tile by tile (online softmax).

    Same arguments, shapes, semantics and errors as
    `scaled_dot_product_attention` (no dropout): query (..., L, E), key
    (..., S, E), value (..., S, Ev) give (..., L, Ev) in the query's dtype, on
    its device, numpy or torch; the batch dimensions of all three broadcast
    together, without copying an input to the broadcast size. At most one
    tile of scores per batch entry exists at a time; the mask is sliced per
    tile and causal tiles wholly above the diagonal are skipped.

    Where it parts from PyTorch (the tiled paths; `attention_lib.flash.tiles`
    has the rule): a masked key is never read. Where a row's key is masked
    (boolean False, a float mask of -inf, ``is_causal``), that key's score
    and value have no effect on the row's output or on any gradient through
    it, whatever they hold: a NaN value at a masked position leaves the row
    as it would be with any finite value there (PyTorch's weighted sum gives
    NaN, 0 x NaN), and so does a NaN key under a float mask (NaN + (-inf) in
    PyTorch). A row with no visible key (all masked, or S = 0) gives zeros
    and passes zero gradient, whatever its query holds (PyTorch: NaN for a
    NaN query). A non-finite entry at a visible position makes the outputs
    it reaches non-finite (NaN or an infinity). A finite mask value, -1e9 or
    the dtype's minimum, is an ordinary bias, as in PyTorch.

    ``backend`` picks the path that runs it:

    - ``"tiled"``: the library's loop. numpy arrays run the readable loop in
      `attention_lib.flash.loop`; torch tensors run its torch version,
      differentiable (FlashAttention's backward pass, recomputing each tile
      from per-row statistics), on one of two tile kernels (``tile_kernel``):

      - ``"fused"`` (`attention_lib.flash.fused_tiles`): each tile is one
        call of PyTorch's fused CPU kernel, which returns the tile's output
        and log-sum-exp; the tiles, the causal skipping and the online
        softmax that merges them are ours. CPU tensors, float32 or
        float64, E = Ev, no mask, no broadcast batch, finite inputs and
        scale. On a large problem its calls run on the same threads as
        ``"ops"`` below, one head and one block of query rows at a time.
      - ``"ops"`` (`attention_lib.flash.torch_tiled`): each tile as torch
        operations, in place; any call, on any device. On a large
        problem its work items run on as many threads as
        ``torch.get_num_threads()`` gives, each single-threaded, leaving
        the caller's thread count as it was.
      - ``"auto"`` (default): ``"fused"`` where the call allows it,
        ``"ops"`` otherwise. ``"fused"`` asked for a call it cannot run
        raises ValueError saying why; with non-finite inputs (or scale) it runs on
        ``"ops"``, which keeps the library's rule for them.
    - ``"triton"``: the Triton kernels (`attention_lib.flash.triton.launch`):
      CUDA tensors, or CPU tensors when TRITON_INTERPRET=1 was set before
      triton was imported. They handle ``is_causal`` but no ``attn_mask``;
      float16, bfloat16 and float32; head widths up to 256; the inputs as
      given (any strides, no upcast or head-expanded copies). Gradients come
      from FlashAttention-2's backward pass, in Triton too.
    - ``"auto"`` (default): Triton for CUDA tensors when triton is installed
      and the call is one it handles, the tiled path otherwise (masks,
      float64, numpy, CPU tensors).

    ``block_q`` and ``block_k`` are the tile sizes: any positive integers,
    also ones that do not divide L or S, or None for the path's own choice
    (numpy 256 x 512; torch fused tiles 2048 x 2048 and causal 2048 x 2048;
    torch operations 2048 x 512 and causal 2048 x 256; Triton from its
    tile table). Causal, the torch path takes the keys wholly below a row
    block's diagonal in blocks at least 2048 (fused tiles) or 512 (torch
    operations) wide; block_k is the width of those that cross it. The
    Triton kernels take powers of two from 16 to 256, for every kernel:
    block_q query rows by block_k keys.

    Raises ValueError for block sizes that are not positive integers, an
    unknown ``backend`` or ``tile_kernel`` (the message lists the valid
    names), ``tile_kernel="fused"`` for a call the fused tiles cannot run,
    and requests the Triton kernel does not handle with
    ``backend="triton"``;
    RuntimeError when ``backend="triton"`` cannot run here (triton missing,
    tensors not on CUDA without the interpreter). The message says why.
    """
    for name, choice, valid in (
        ("backend", backend, BACKENDS),
        ("tile_kernel", tile_kernel, TILE_KERNELS),
    ):
        if not isinstance(choice, str) or choice not in valid:
            names = ", ".join(repr(x) for x in valid)
            raise ValueError(f"{name} must be one of {names}, got {choice!r}")
    # None is the path's own choice
    block_q = None if block_q is None else positive_integer("block_q", block_q)
    block_k = None if block_k is None else positive_integer("block_k", block_k)
    spec = check(query, key, value, attn_mask, is_causal, scale, enable_gqa)
    if backend != "tiled":
        plan = _triton_plan(spec, block_q, block_k, forced=backend == "triton")
        if not isinstance(plan, Exception):
            from .triton.launch import triton_attention

            return triton_attention(spec, plan, block_q, block_k)  # the caller's tensors
        if backend == "triton":
            raise plan
    if (out := _fused_float32(spec, block_q, block_k, tile_kernel)) is not None:
        return out  # (..., L, Ev), float32 as the caller's
    problem = materialise(spec, exact=wide_scores(spec))  # upcast, grouped heads repeated
    if is_torch_array(problem.query):
        out = _torch_tiles(problem, block_q, block_k, tile_kernel)  # (..., L, Ev)
    else:
        if tile_kernel == "fused":
            raise ValueError("tile_kernel='fused' runs torch tensors, got numpy arrays")
        from .loop import NUMPY_BLOCK_K, NUMPY_BLOCK_Q, tiled_loop

        block_q = NUMPY_BLOCK_Q if block_q is None else block_q
        block_k = NUMPY_BLOCK_K if block_k is None else block_k
        out = tiled_loop(problem, block_q, block_k)  # (..., L, Ev)
    return problem.xp.astype(out, problem.out_dtype, copy=False)  # no copy in its own dtype
