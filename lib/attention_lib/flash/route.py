"""Where one `flash_attention` call runs: its path, its dtype and its tiles, decided once.

`choose_route` reads the validated call and the caller's choices and returns
a `Route`; `flash_attention` then runs it and nothing decides again. The
routes, in the order they are tried:

==========  ==================================================  ==========================
path        takes                                               computes in
==========  ==================================================  ==========================
triton      CUDA tensors (CPU ones under TRITON_INTERPRET=1     the inputs' dtype
            with ``backend="triton"``): no mask, float16,
            bfloat16 or float32, head widths up to 256, tiles
            powers of two from 16 to 256 (`triton.launch.plan`)
fused       CPU tensors, float32 or float64 (16-bit computed    float32: per head, float64
            in float32), E = Ev, no mask, batch dimensions      where its scores may pass
            that merge into one (`fused_tiles.eligible`);       float32's bound (the items
            ``tile_kernel`` "auto" or "fused"                   check it as they run: then
                                                                the call again in float64)
ops         any other torch call: each tile as torch            float64 where
            operations (`torch_tiled`)                          `wide_scores` says, else
                                                                the accumulation dtype
numpy       numpy arrays: the readable loop (`loop`)            the same rule as ops
==========  ==================================================  ==========================

``backend="triton"`` asks for the first row and raises where it cannot run;
``backend="tiled"`` skips it; ``backend="auto"`` takes it for CUDA tensors
where it can and the tiled rows otherwise. ``tile_kernel="ops"`` skips the
fused row; ``tile_kernel="fused"`` raises where it cannot run. A fused call
whose values are not all finite runs as ops: the library's rule for non-finite
inputs is kept there (`attention_lib.flash.tiles`).

The tiles travel as one `Tiling`: the call's causality and scale, and the
tile sizes, the path's own where the caller gave none.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..backend import is_torch_array
from ..inputs import (
    AttentionProblem,
    AttentionSpec,
    materialise,
    may_widen,
    positive_integer,
    wide_scores,
)

__all__ = ["BACKENDS", "TILE_KERNELS", "Route", "Tiling", "choose_route"]

#: the names ``flash_attention(..., backend=...)`` accepts
BACKENDS = ("auto", "tiled", "triton")
#: the names ``flash_attention(..., tile_kernel=...)`` accepts: how the torch tiled path
#: computes one tile
TILE_KERNELS = ("auto", "fused", "ops")


@dataclass(frozen=True)
class Tiling:
    """How one call is cut into tiles: its causality and scale, and the tile sizes
    (block_q query rows by block_k keys; None until a route fills in its path's own)."""

    is_causal: bool
    scale: float
    block_q: int | None = None
    block_k: int | None = None

    def sized(self, block_q: int, block_k: int) -> Tiling:
        """These settings with the given tile sizes where the caller gave none."""
        return replace(
            self,
            block_q=block_q if self.block_q is None else self.block_q,
            block_k=block_k if self.block_k is None else self.block_k,
        )


@dataclass(frozen=True)
class Route:
    """One call's path, dtype and tiles (the table in the module's docstring).

    ``exact``: True computes in float64 (the reference path's dtype), False
    in the accumulation dtype, None (the fused path on float32) in float32
    with each head's scores held to float32's bound, the call again in
    float64 past it. ``problem``: the inputs in that dtype, grouped heads
    repeated (`attention_lib.inputs.materialise`), for the library's own
    paths; ``plan``: the Triton kernels' launch layout, which read the
    caller's tensors as they are. ``fallback``: the fused route's way out for
    values that are not finite, the torch operations in float64 where the
    device has it (`wide_scores` says so of them); its inputs are made when
    it is taken.
    """

    path: Literal["triton", "fused", "ops", "numpy"]
    tiling: Tiling
    exact: bool | None = False
    problem: AttentionProblem | None = None
    plan: Any = None
    fallback: Route | None = None


def _checked(name: str, choice: Any, valid: tuple[str, ...]) -> str:
    if not isinstance(choice, str) or choice not in valid:
        names = ", ".join(repr(x) for x in valid)
        raise ValueError(f"{name} must be one of {names}, got {choice!r}")
    return choice


def choose_route(
    spec: AttentionSpec,
    block_q: int | None = None,
    block_k: int | None = None,
    backend: str = "auto",
    tile_kernel: str = "auto",
) -> Route:
    """The `Route` of a validated call (`attention_lib.inputs.check`'s spec).

    Raises ValueError for an unknown ``backend`` or ``tile_kernel`` (naming the
    valid ones), block sizes that are not positive integers, a call the path
    asked for cannot run (``tile_kernel="fused"``; ``backend="triton"``: also
    RuntimeError where triton or a CUDA device is missing), each saying why.
    """
    _checked("backend", backend, BACKENDS)
    _checked("tile_kernel", tile_kernel, TILE_KERNELS)
    tiling = Tiling(
        spec.is_causal,
        spec.scale,
        None if block_q is None else positive_integer("block_q", block_q),
        None if block_k is None else positive_integer("block_k", block_k),
    )
    if backend != "tiled":
        plan = _triton_plan(spec, tiling, forced=backend == "triton")
        if plan is not None:
            return Route("triton", tiling, plan=plan)
    if not is_torch_array(spec.query):
        if tile_kernel == "fused":
            raise ValueError("tile_kernel='fused' runs torch tensors, got numpy arrays")
        exact = wide_scores(spec)
        from .loop import NUMPY_BLOCK_K, NUMPY_BLOCK_Q

        tiles = tiling.sized(NUMPY_BLOCK_Q, NUMPY_BLOCK_K)
        return Route("numpy", tiles, exact, materialise(spec, exact))
    problem = materialise(spec)  # the accumulation dtype: float32 stays as it is, no copy
    if tile_kernel != "ops":
        from . import fused_tiles

        why = fused_tiles.eligible(problem)
        if why is None:  # float32 is held to its score bound by the tiles, head by head
            tiles = tiling.sized(*fused_tiles.default_blocks(spec.is_causal))
            float32 = may_widen(spec)
            fallback = _ops(spec, tiling, float32)
            return Route("fused", tiles, None if float32 else False, problem, fallback=fallback)
        if tile_kernel == "fused":
            raise ValueError(f"tile_kernel='fused' cannot run this call: {why}")
    exact = wide_scores(spec)
    return _ops(spec, tiling, exact, materialise(spec, exact) if exact else problem)


def _ops(
    spec: AttentionSpec, tiling: Tiling, exact: bool, problem: AttentionProblem | None = None
) -> Route:
    """The torch operations' route, in float64 when ``exact``, on its own tiles where the
    caller gave none."""
    from .torch_tiled import default_blocks

    return Route("ops", tiling.sized(*default_blocks(spec.is_causal)), exact, problem)


def _triton_plan(spec: AttentionSpec, tiling: Tiling, forced: bool) -> Any:
    """The Triton kernels' launch layout for this call, or None where ``backend="auto"``
    leaves it to the tiled path. ``forced`` (``backend="triton"``): raises instead, saying
    why. Triton is imported only for CUDA tensors or when asked for."""
    if not forced and not (is_torch_array(spec.query) and spec.query.device.type == "cuda"):
        return None
    if not is_torch_array(spec.query):
        raise ValueError("backend='triton' needs torch tensors, got numpy arrays")
    if importlib.util.find_spec("triton") is None:
        if not forced:
            return None
        raise RuntimeError(
            "backend='triton' needs the triton package, which is not installed "
            "(pip install -e '.[triton]', Linux only); backend='tiled' runs everywhere"
        )
    try:
        from .triton import launch
    except ImportError as err:  # installed but broken, e.g. no matching driver libraries
        if not forced:
            return None
        message = f"backend='triton': triton is installed but failed to import: {err}"
        raise RuntimeError(message) from err
    try:
        return launch.plan(spec, tiling)
    except (ValueError, RuntimeError):
        if forced:
            raise
        return None  # a call the kernels do not handle (a mask, float64): the tiled path
