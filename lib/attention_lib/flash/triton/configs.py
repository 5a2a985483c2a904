"""The Triton kernels' tile table: the one place a launch configuration is chosen.

Each kernel works on tiles of BLOCK_M query rows by BLOCK_N keys:

    forward  one program per BLOCK_M query rows, walking the keys BLOCK_N at a time
    dkdv     one program per BLOCK_N keys, walking the query rows BLOCK_M at a time
    dq       one program per BLOCK_M query rows, walking the keys BLOCK_N at a time

(the backward pass's δ = rowsum(dO ∘ O) has its own fixed tile, `DELTA_TILE`).
For each kernel, padded head width (a power of two from 16 to 256, the wider
of E and Ev), dtype, causal setting and GPU (its compute capability),
`candidates` lists a few `Tile`s; the launcher runs the first,
``python -m attention_course.bench --tune`` times them all on a GPU, and the
ahead-of-time compile test compiles every one of them for sm_75, sm_80,
sm_86, sm_89 and sm_90, so a tile added here is compiled in CI at once.

A tile must fit the GPU's shared memory per program (`SHARED_MEMORY`):
the main table is for GPUs with 163 KiB or more (sm_80, sm_90). GPUs with
less take their own tiles where the main table's would not fit
(`tile_family`): 99 KiB on sm_86 and sm_89, and 64 KiB on sm_75, where
Triton's products also take more shared memory for the same tile (about
twice sm_86's, measured by compiling). Where no tile fits (float32
gradients at width 256 on sm_75) a row is empty, and the launcher refuses
the call with a message (`launch.refusal`). The compile test checks the
tile each launch runs against its target's limit.

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
    "MIN_CAPABILITY",
    "SHARED_MEMORY",
    "Tile",
    "candidates",
    "choose",
    "every_choice",
    "padded",
    "tile_family",
]

KERNELS = ("forward", "dkdv", "dq")
DTYPES = ("float16", "bfloat16", "float32")
HEAD_DIMS = (16, 32, 64, 128, 256)  # the padded head widths a kernel is compiled for
MAX_HEAD_DIM = HEAD_DIMS[-1]

#: the most shared memory one program (thread block) may use, in bytes, by compute
#: capability (major * 10 + minor): NVIDIA's CUDA C++ Programming Guide, "maximum amount
#: of shared memory per thread block" (the opt-in maximum; KiB of 1024 bytes)
SHARED_MEMORY = {
    75: 64 * 1024,  # Turing: T4 (Colab), RTX 20xx
    80: 163 * 1024,  # A100, A800
    86: 99 * 1024,  # RTX 30xx, A10, A40: 101376 bytes
    87: 163 * 1024,  # Jetson Orin
    89: 99 * 1024,  # RTX 40xx, L4, L40: 101376 bytes
    90: 227 * 1024,  # H100, H200
}
#: the oldest compute capability a dtype runs on, where one is needed: bfloat16 came with
#: Ampere, sm_80 (ptxas refuses Triton's bfloat16 conversions for sm_75); the launcher
#: refuses it before (`launch.refusal`)
MIN_CAPABILITY = {"bfloat16": 80}


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
_FEWER_SPILLS = "unmeasured: fewest ptxas register spills for sm_80 and sm_90"


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


#: the main table's GPUs have at least this much shared memory per program (sm_80)
_LARGE = SHARED_MEMORY[80]


def _fits(arch: str, shared: int, *more: int) -> str:
    """A tile's source: the shared memory a compile for ``arch`` gave it (bytes; ``more``:
    the same tile's other compiles, e.g. the forward kernel for a backward pass)."""
    figures = " and ".join(str(n) for n in (shared, *more))
    return f"unmeasured: fits {arch}, {figures} bytes of shared memory (triton 3.9, ptxas)"


# GPUs with less shared memory: their own tiles for the rows where the main table's first
# tile does not fit (over the target's limit as compiled: sm_86 forward at 256 needs
# 106496 bytes, sm_75's products about twice sm_86's), chosen by compiling and not yet
# timed; the other rows run the main table's first tile, which fits there. An empty row:
# no tile fits (float32 gradients at width 256 on sm_75: 67584 bytes at 16 x 16), and the
# launcher refuses the call (`launch.refusal`).
_LESS_SHARED: dict[str, dict[tuple[str, str], dict[int, tuple[Tile, ...]]]] = {
    "99k": {  # sm_86, sm_89: 101376 bytes
        ("forward", "16-bit"): {
            256: (
                Tile(64, 32, 4, 2, _fits("sm_86", 69632, 73728)),
                Tile(64, 64, 8, 1, _fits("sm_86", 73728)),
            )
        },
        ("forward", "float32"): {256: (Tile(32, 16, 4, 1, _fits("sm_86", 69632)),)},
        ("dkdv", "float32"): {
            # the main table's 32 x 64 and 64 x 32 at 128: 114688 bytes for sm_75, which
            # agrees with sm_86 in float32 at 256 (not compiled for sm_86)
            128: (Tile(16, 32, 4, 1),),
            256: (Tile(16, 16, 4, 1, _fits("sm_86", 67584)),),
        },
        ("dq", "float32"): {
            128: (Tile(32, 16, 4, 1),),
            256: (Tile(16, 16, 4, 1, _fits("sm_86", 67584)),),
        },
    },
    "turing": {  # sm_75: 65536 bytes
        ("forward", "16-bit"): {
            64: (Tile(64, 32, 4, 2, _fits("sm_75", 24576, 32768)),),
            128: (Tile(64, 32, 4, 2, _fits("sm_75", 49152, 57344)),),
            256: (Tile(32, 16, 4, 1, _fits("sm_75", 49152, 51200)),),
        },
        ("dkdv", "16-bit"): {
            64: (Tile(32, 64, 4, 2, _fits("sm_75", 49152)),),
            128: (Tile(16, 32, 4, 1, _fits("sm_75", 43008)),),
            256: (Tile(16, 16, 4, 1, _fits("sm_75", 50176)),),
        },
        ("dq", "16-bit"): {
            64: (Tile(64, 32, 4, 2, _fits("sm_75", 49152)),),
            128: (Tile(32, 16, 4, 1, _fits("sm_75", 43008)),),
            256: (Tile(16, 16, 4, 1, _fits("sm_75", 50176)),),
        },
        ("forward", "float32"): {
            128: (Tile(32, 32, 4, 1, _fits("sm_75", 57344)),),
            256: (Tile(16, 16, 4, 1, _fits("sm_75", 51200)),),
        },
        ("dkdv", "float32"): {128: (Tile(16, 32, 4, 1, _fits("sm_75", 53248)),), 256: ()},
        ("dq", "float32"): {128: (Tile(32, 16, 4, 1, _fits("sm_75", 53248)),), 256: ()},
    },
}


def tile_family(capability: int | None) -> str:
    """Which tiles a GPU runs: ``"large"``, ``"99k"`` or ``"turing"``.

    ``capability`` is the compute capability as major * 10 + minor (75 for
    a T4, 86 for an RTX 3090), or None for Triton's interpreter, which takes
    the main table. ``"large"``: 163 KiB or more of shared memory per program
    (sm_80, sm_87, sm_90), the main table. ``"99k"``: any other GPU from sm_80
    on (sm_86, sm_89, and one `SHARED_MEMORY` does not list: Ampere and later
    all give a program at least 99 KiB). ``"turing"``: before sm_80 (sm_75's
    64 KiB, where the products take more shared memory for the same tile).
    """
    if capability is None or SHARED_MEMORY.get(capability, 0) >= _LARGE:
        return "large"
    return "99k" if capability >= 80 else "turing"


def candidates(
    kernel: str, head_dim: int, dtype: str, causal: bool, capability: int | None = None
) -> tuple[Tile, ...]:
    """The tiles tried for a kernel at a padded head width and dtype; the first is used.

    ``head_dim`` is one of `HEAD_DIMS` (the wider padded width of E and Ev);
    ``dtype`` one of `DTYPES`; ``capability`` the GPU's compute capability
    (major * 10 + minor) or None for the main table (`tile_family`): a GPU
    with less shared memory gets its own tiles where the main table's first
    would not fit, that first tile elsewhere, and none (an empty tuple)
    where no tile fits. Raises ValueError for anything else.
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    table = _FLOAT32[kernel] if dtype == "float32" else _16BIT[kernel]
    row = max(64, head_dim)  # widths 16 and 32 take the 64 row: same tiles, less work
    family = tile_family(capability)
    if family == "large":
        return table[row]
    kind = "float32" if dtype == "float32" else "16-bit"
    return _LESS_SHARED[family].get((kernel, kind), {}).get(row, table[row][:1])


def choose(
    kernel: str, head_dim: int, dtype: str, causal: bool, capability: int | None = None
) -> Tile:
    """The tile the launcher runs: the first of `candidates`; ValueError where none fits."""
    tiles = candidates(kernel, head_dim, dtype, causal, capability)
    if not tiles:
        raise ValueError(
            f"no {kernel} tile for {dtype} at head width {head_dim} fits sm_{capability}'s "
            "shared memory"
        )
    return tiles[0]


def every_choice(
    capability: int | None = None,
) -> Iterator[tuple[str, int, str, bool, Tile]]:
    """Every (kernel, padded head width, dtype, causal, tile) a launch can use on a GPU of
    this compute capability (None: the main table), leaving out the dtypes it cannot run
    (`MIN_CAPABILITY`)."""
    for kernel in KERNELS:
        for head_dim in HEAD_DIMS:
            for dtype in DTYPES:
                if capability is not None and capability < MIN_CAPABILITY.get(dtype, 0):
                    continue
                for causal in (False, True):
                    for tile in candidates(kernel, head_dim, dtype, causal, capability):
                        yield kernel, head_dim, dtype, causal, tile
