"""Pieces the Triton kernels share: masked loads, dtype handling, the causal key range.

A kernel may read a module-level constant only if it is a
``tl.constexpr(...)``: the GPU compiler refuses a plain Python global
("Cannot access global variable ... from within @jit'ed function"), while
Triton's interpreter accepts one (a plain ``LN2 = 0.69...`` once broke every
GPU launch and no interpreter test). The kernels here need none: log2(e) is
folded into the scale on the host, and the log-sum-exp stays in log2 units.
The ahead-of-time compile test (lib/tests/kernels/test_triton_compile.py) catches such
a slip without a GPU.

Importing this module imports triton.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = [
    "INTERPRETED",
    "key_range",
    "load_tile",
    "operand",
    "rounded",
    "seen_dot",
    "split_dot",
    "store_tile",
]


@triton.jit
def key_range(
    block, length_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr
):
    """(inner, stop): the keys query rows [block·BLOCK_M, (block + 1)·BLOCK_M) read.

    Key tiles starting before ``inner`` need no mask; those from ``inner`` to
    ``stop`` may cross the causal diagonal or the end of the keys. Causal
    (top-left, as PyTorch's ``is_causal``): a row sees keys up to its own
    index, so the block sees none from (block + 1)·BLOCK_M on and every key
    before block·BLOCK_M. The forward and dQ kernels walk the same range.
    """
    if IS_CAUSAL:
        stop = tl.minimum(length_k, (block + 1) * BLOCK_M)
        below = tl.minimum(stop, block * BLOCK_M)
    else:
        stop = length_k
        below = length_k
    inner = below // BLOCK_N * BLOCK_N  # key tiles before this need no mask
    return inner, stop


@triton.jit
def load_tile(ptrs, ok_0, ok_1, CHECK_0: tl.constexpr, CHECK_1: tl.constexpr):
    """A 2-d tile at ``ptrs``, zero where a checked index is out of range.

    ``ok_0`` and ``ok_1`` say which indices of the tile's first and second
    dimension are in range; each is used only when its CHECK flag is set, so
    a tile known to lie wholly inside the tensor loads with no mask at all.
    """
    if CHECK_0:
        if CHECK_1:
            x = tl.load(ptrs, mask=ok_0[:, None] & ok_1[None, :], other=0.0)
        else:
            x = tl.load(ptrs, mask=ok_0[:, None], other=0.0)
    else:
        if CHECK_1:
            x = tl.load(ptrs, mask=ok_1[None, :], other=0.0)
        else:
            x = tl.load(ptrs)
    return x


@triton.jit
def store_tile(ptrs, x, ok_0, ok_1, CHECK_0: tl.constexpr, CHECK_1: tl.constexpr):
    """Store a 2-d tile, skipping the out-of-range indices `load_tile` would zero."""
    if CHECK_0:
        if CHECK_1:
            tl.store(ptrs, x, mask=ok_0[:, None] & ok_1[None, :])
        else:
            tl.store(ptrs, x, mask=ok_0[:, None])
    else:
        if CHECK_1:
            tl.store(ptrs, x, mask=ok_1[None, :])
        else:
            tl.store(ptrs, x)


@triton.jit
def operand(x, WIDEN: tl.constexpr):
    """A matrix-product operand as loaded, or widened to float32 (see `widen_bfloat16`)."""
    if WIDEN:
        x = x.to(tl.float32)
    return x


@triton.jit
def rounded(x, DTYPE: tl.constexpr, WIDEN: tl.constexpr):
    """float32 ``x`` rounded to DTYPE, to nearest with ties to even.

    With WIDEN (bfloat16 in Triton's interpreter, whose float32 -> bfloat16
    cast truncates) the rounding to bfloat16 is done on the bits and the
    result, exactly a bfloat16 number, stays in float32. A float32 DTYPE
    (a gradient kept in float32 for a broadcast sum) leaves x as it is,
    WIDEN or not.
    """
    if WIDEN and DTYPE == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        y = bits.to(tl.float32, bitcast=True)
    else:
        y = x.to(DTYPE)
    return y


@triton.jit
def _parts(x, DTYPE: tl.constexpr, WIDEN: tl.constexpr, PARTS: tl.constexpr):
    """(hi, lo): float32 ``x`` as `split_dot` multiplies it (lo unused unless two parts)."""
    hi = rounded(x, DTYPE, WIDEN)  # (M, N)
    lo = hi
    if PARTS == 2 and DTYPE != tl.float32:  # float32's x - hi is 0: nothing to add
        wide = hi.to(tl.float32)  # (M, N)
        rest = tl.where(tl.abs(wide) < float("inf"), x - wide, 0.0)  # (M, N), exact
        lo = rounded(rest, DTYPE, WIDEN)  # (M, N), what hi left out
    return hi, lo


@triton.jit
def _dot_parts(hi, lo, b, acc, DTYPE: tl.constexpr, PRECISION: tl.constexpr,
               PARTS: tl.constexpr):  # fmt: skip
    """``acc + (hi + lo) @ b`` as one or two products (`_parts`)."""
    acc = tl.dot(hi, b, acc, input_precision=PRECISION)  # (M, K)
    if PARTS == 2 and DTYPE != tl.float32:
        acc = tl.dot(lo, b, acc, input_precision=PRECISION)  # (M, K)
    return acc


@triton.jit
def split_dot(x, b, acc, DTYPE: tl.constexpr, WIDEN: tl.constexpr, PRECISION: tl.constexpr,
              PARTS: tl.constexpr):  # fmt: skip
    """``acc + x @ b`` for float32 ``x`` (M, N) rounded to DTYPE, as PARTS 16-bit products.

    PARTS = 1: x rounded once, as FlashAttention rounds its weights.
    PARTS = 2: x split into two numbers of DTYPE, ``hi = round(x)`` and
    ``lo = round(x - hi)`` (x - hi is exact in float32), each multiplied on
    the tensor cores with float32 accumulation, for one more 16-bit
    product: x keeps about 22 significant bits in float16 (11 rounded once;
    to an absolute 3e-8 where lo is subnormal) and 16 in bfloat16 (8). The
    backward pass splits P and dS so: rounded once they alone cost more
    than twice PyTorch's error, which keeps them in float32
    (lib/tests/kernels/test_triton_flash.py). Where hi overflows to ±inf, lo is
    0 (not x - hi = ∓inf, which would make the sum NaN). float32 DTYPE:
    one product, x as it is. b (N, K) is in DTYPE (float32 holding DTYPE's
    numbers with WIDEN); acc (M, K) float32.
    """
    hi, lo = _parts(x, DTYPE, WIDEN, PARTS)  # (M, N) each
    return _dot_parts(hi, lo, b, acc, DTYPE, PRECISION, PARTS)  # (M, K)


@triton.jit
def seen_dot(a, b, acc, seen, DTYPE: tl.constexpr, WIDEN: tl.constexpr, PRECISION: tl.constexpr,
             PARTS: tl.constexpr):  # fmt: skip
    """`split_dot`'s ``acc + a @ b`` taking a[i, j] · b[j, :] only where ``seen[i, j]``.

    a (M, N), float32, is 0 wherever ``seen`` (M, N) is False; b (N, K) may
    hold NaN or ±inf there, which a plain product turns into NaN (0 × NaN)
    in every row. When b holds a non-finite entry, the product takes it as
    0 and a second product counts, per output entry, the non-finite entries
    of b it sees: those entries become NaN (rule (c) of
    `attention_lib.nonfinite`). Finite b costs one check and `split_dot`'s
    products. a is split once, before the check: split in each branch, the
    one-part forward kernel took 8 KiB more shared memory on sm_80 (this
    way its PTX is what it was when it rounded its weights itself).
    """
    hi, lo = _parts(a, DTYPE, WIDEN, PARTS)  # (M, N) each
    bad = (b != b) | (tl.abs(b) == float("inf"))  # (N, K)
    if tl.max(tl.max(bad.to(tl.int32), 1), 0) > 0:
        finite = tl.where(bad, 0.0, b).to(b.dtype)  # (N, K)
        acc = _dot_parts(hi, lo, finite, acc, DTYPE, PRECISION, PARTS)  # (M, K)
        hits = tl.dot(seen.to(b.dtype), bad.to(b.dtype), input_precision=PRECISION)  # (M, K)
        acc = tl.where(hits > 0, float("nan"), acc)  # (M, K)
    else:
        acc = _dot_parts(hi, lo, b, acc, DTYPE, PRECISION, PARTS)  # (M, K)
    return acc


try:  # a kernel object tells whether this process runs Triton's interpreter
    from triton.runtime.interpreter import InterpretedFunction

    INTERPRETED = isinstance(operand, InterpretedFunction)
except ImportError:  # pragma: no cover - layout of other triton versions
    INTERPRETED = False
