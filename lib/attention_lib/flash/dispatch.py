"""`flash_attention`: one entry point, the route it takes decided once (`route`).

`attention_lib.flash.route` holds the table of paths (Triton's kernels,
the fused tiles, the torch operations, the numpy loop), which calls each
takes and in which dtype; this module checks the call, asks for its route
and runs it. The paths are imported only when a route takes them, so
importing this one imports neither torch nor triton.
"""

from __future__ import annotations

from typing import Any

from ..inputs import check, materialise
from .route import Route, choose_route

__all__ = ["flash_attention"]


def _fused(spec: Any, route: Route) -> tuple[Any, Any]:
    """The fused route's output and the problem it computed: in float32 first where the
    route says (each head's scores held to float32's bound), the whole call in float64
    past it, and the torch operations (the route's fallback) for values not finite."""
    from . import fused_tiles

    problem, bounded = route.problem, route.exact is None
    out = fused_tiles.fused_tiles_attention(problem, route.tiling, bounded)
    if out is None and bounded:  # scores past float32's bound, or a value not finite
        problem = materialise(spec, exact=True)
        out = fused_tiles.fused_tiles_attention(problem, route.tiling)
    if out is None:  # a value is not finite: the library's rule, kept by the operations
        from .torch_tiled import torch_tiled_attention

        fallback = route.fallback
        problem = materialise(spec, exact=fallback.exact)
        out = torch_tiled_attention(problem, fallback.tiling)
    return out, problem


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
    Which path takes which call, and in which dtype: `attention_lib.flash.route`.
    """
    spec = check(query, key, value, attn_mask, is_causal, scale, enable_gqa)
    route = choose_route(spec, block_q, block_k, backend, tile_kernel)
    if route.path == "triton":
        from .triton.launch import triton_attention

        return triton_attention(spec, route.plan, route.tiling)  # the caller's tensors
    if route.path == "fused":
        out, problem = _fused(spec, route)  # (..., L, Ev)
    elif route.path == "ops":
        from .torch_tiled import torch_tiled_attention

        problem = route.problem
        out = torch_tiled_attention(problem, route.tiling)  # (..., L, Ev)
    else:
        from .loop import tiled_loop

        problem = route.problem
        out = tiled_loop(problem, route.tiling)  # (..., L, Ev)
    return problem.xp.astype(out, problem.out_dtype, copy=False)  # no copy in its own dtype
