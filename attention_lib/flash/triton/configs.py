"""The Triton kernels' tile table: the one place a launch configuration is chosen.

Each kernel works on tiles of BLOCK_M query rows by BLOCK_N keys:

    forward  one program per BLOCK_M query rows, walking the keys BLOCK_N at a time
    dkdv     one program per BLOCK_N keys, walking the query rows BLOCK_M at a time
    dq       one program per BLOCK_M query rows, walking the keys BLOCK_N at a time

(the backward pass's δ = rowsum(dO ∘ O) has its own fixed tile, `DELTA_TILE`).
For each kernel, padded head width (a power of two from 16 to 256, the wider
of E and Ev), dtype and causal setting, `candidates` lists a few `Tile`s;
the launcher runs the first, ``python -m attention_lib.bench --tune`` times
them all on a GPU, and the ahead-of-time compile test compiles every one of
them for sm_80 and sm_90, so a tile added here is compiled in CI at once.

Where a tile's ``source`` names a measurement, that is where it came from;
the others follow Triton's fused-attention tutorial and FlashAttention-2's
tile shapes and are not yet measured. Causal and non-causal share their
candidates until a measurement separates them.

Imports neither torch nor triton.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = [
    "DELTA_TILE",
    "DTYPES",
    "HEAD_DIMS",
    "KERNELS",
    "MAX_HEAD_DIM",
    "Tile",
    "candidates",
    "choose",
    "every_choice",
    "padded",
]

KERNELS = ("forward", "dkdv", "dq")
DTYPES = ("float16", "bfloat16", "float32")
HEAD_DIMS = (16, 32, 64, 128, 256)  # the padded head widths a kernel is compiled for
MAX_HEAD_DIM = HEAD_DIMS[-1]


@dataclass(frozen=True)
class Tile:
    """One launch configuration: tile shape, warps per program, software-pipeline stages."""

    block_m: int  # query rows per tile
    block_n: int  # keys per tile
    num_warps: int
    num_stages: int
    source: str = field(default="unmeasured", compare=False)

    def as_dict(self) -> dict[str, int | str]:
        return {
            "block_m": self.block_m,
            "block_n": self.block_n,
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
            "source": self.source,
        }


#: chosen at compile time, not timed: the fewest register spills of the candidates
_FEWER_SPILLS = "unmeasured: fewest ptxas register spills for sm_80 and sm_90 (issue 21)"


def _h200(tflops: int, width: int) -> str:
    return f"measured: H200, E = {width}, float16, L = 4096, not causal, {tflops} TFLOP/s"


# The forward pass at E = 64 and 128 was timed on an H200 (kernel alone, float16,
# L = 4096, not causal); the winner leads, the others stay for --tune.
_FORWARD_16BIT = {
    64: (
        Tile(128, 64, 8, 3, _h200(432, 64)),
        Tile(64, 64, 4, 3, _h200(381, 64)),
        Tile(128, 64, 4, 3, _h200(366, 64)),
        Tile(128, 128, 8, 3, _h200(355, 64)),
    ),
    128: (
        Tile(64, 64, 4, 3, _h200(477, 128)),
        Tile(128, 128, 8, 3, _h200(466, 128)),
        Tile(128, 64, 8, 3, _h200(439, 128)),
    ),
    # a 64 x 256 query tile plus two stages of 64 x 256 keys and values: 160 KiB of
    # shared memory, under sm_80's 163 KiB
    256: (Tile(64, 64, 8, 2), Tile(64, 32, 4, 2), Tile(128, 32, 8, 2)),
}
# dK, dV for BLOCK_N keys stay in registers while BLOCK_M query rows stream past
# (Triton's tutorial: 128 keys by 32 rows, 4 warps). The backward kernels' 16-bit
# weights in two parts (common.split_dot) take registers: where the tutorial's tile
# spilled more than before, a tile that spills less (ptxas, sm_80 and sm_90) leads
_DKDV_16BIT = {
    64: (
        Tile(32, 128, 8, 3, _FEWER_SPILLS),
        Tile(32, 128, 4, 3),
        Tile(64, 128, 8, 3),
        Tile(32, 64, 4, 3),
    ),
    128: (Tile(32, 128, 8, 2), Tile(64, 128, 8, 2), Tile(32, 64, 4, 2)),
    256: (Tile(32, 32, 8, 1, _FEWER_SPILLS), Tile(32, 64, 8, 1), Tile(16, 64, 4, 1)),
}
# dQ for BLOCK_M query rows stays in registers while BLOCK_N keys stream past
# (Triton's tutorial: 128 rows by 32 keys, 4 warps)
_DQ_16BIT = {
    64: (Tile(128, 32, 4, 3), Tile(64, 64, 4, 3), Tile(128, 64, 8, 3)),
    128: (Tile(128, 32, 8, 2), Tile(64, 32, 4, 3), Tile(128, 64, 8, 2)),
    256: (Tile(32, 32, 8, 1, _FEWER_SPILLS), Tile(64, 32, 8, 1), Tile(64, 16, 4, 1)),
}
# float32 products run on the FMA units (no tensor-core float32 here, to stay
# within twice PyTorch's error), with twice the bytes per tile: small tiles
_FLOAT32 = {
    "forward": {64: (Tile(64, 32, 4, 2),), 128: (Tile(64, 32, 4, 2),), 256: (Tile(32, 32, 4, 1),)},
    "dkdv": {64: (Tile(32, 64, 4, 2),), 128: (Tile(32, 64, 4, 1),), 256: (Tile(16, 32, 4, 1),)},
    "dq": {64: (Tile(64, 32, 4, 2),), 128: (Tile(64, 32, 4, 1),), 256: (Tile(32, 16, 4, 1),)},
}
_16BIT = {"forward": _FORWARD_16BIT, "dkdv": _DKDV_16BIT, "dq": _DQ_16BIT}

#: (BLOCK_M, num_warps) of the kernel computing δ = rowsum(dO ∘ O)
DELTA_TILE = Tile(64, 1, 4, 1)


def padded(width: int) -> int:
    """The kernel's tile width for a head width: a power of two, at least 16.

    >>> [padded(w) for w in (1, 16, 17, 80, 256)]
    [16, 16, 32, 128, 256]
    """
    if width < 1:
        raise ValueError(f"a head width is at least 1, got {width}")
    return max(16, 1 << (width - 1).bit_length())


def candidates(kernel: str, head_dim: int, dtype: str, causal: bool) -> tuple[Tile, ...]:
    """The tiles tried for a kernel at a padded head width and dtype; the first is used.

    ``head_dim`` is one of `HEAD_DIMS` (the wider padded width of E and Ev);
    ``dtype`` one of `DTYPES`. Raises ValueError for anything else.
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    table = _FLOAT32[kernel] if dtype == "float32" else _16BIT[kernel]
    return table[max(64, head_dim)]  # widths 16 and 32 take the 64 row: same tiles, less work


def choose(kernel: str, head_dim: int, dtype: str, causal: bool) -> Tile:
    """The tile the launcher runs: the first of `candidates`."""
    return candidates(kernel, head_dim, dtype, causal)[0]


def every_choice() -> Iterator[tuple[str, int, str, bool, Tile]]:
    """Every (kernel, padded head width, dtype, causal, tile) a launch can use."""
    for kernel in KERNELS:
        for head_dim in HEAD_DIMS:
            for dtype in DTYPES:
                for causal in (False, True):
                    for tile in candidates(kernel, head_dim, dtype, causal):
                        yield kernel, head_dim, dtype, causal, tile
