"""Notebook 05's still figure of the cost model: HBM traffic per head, standard against
FlashAttention-2, counted from the papers' algorithms (`attention_lib.lessons.cost`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..cost import attention_traffic

__all__ = ["plot_traffic"]


def plot_traffic(
    ax: Any,
    lengths: Sequence[int],
    width: int = 64,
    block: int = 128,
    dtype: str = "float16",
) -> None:
    """HBM traffic per head against T, log-log, in MiB of ``dtype``: the standard and
    FlashAttention-2 forward and backward passes (`attention_traffic`), four labelled lines.

    The title is computed from the counts: the backward ratio standard / FA-2 at
    the shortest and the longest T. Raises ValueError as `attention_traffic`.
    """
    lengths = sorted(int(t) for t in lengths)
    ratios = []
    for path, style in (("standard", "-"), ("flash2", "--")):
        for direction, marker in (("forward", "o"), ("backward", "s")):
            counts = [attention_traffic(t, width, path, direction, block, block) for t in lengths]
            mib = [c.bytes(dtype) / 2**20 for c in counts]
            name = "standard" if path == "standard" else "FlashAttention-2"
            ax.loglog(lengths, mib, marker + style, ms=4, label=f"{name}, {direction}")
    for t in (lengths[0], lengths[-1]):
        std = attention_traffic(t, width, "standard", "backward")
        fa2 = attention_traffic(t, width, "flash2", "backward", block, block)
        ratios.append(std.elements / fa2.elements)
    ax.set_xticks(lengths, [str(t) for t in lengths], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("sequence length T (queries = keys)")
    ax.set_ylabel(f"HBM reads + writes per head (MiB, {dtype})")
    ax.set_title(
        f"d = {width}, FA-2 tiles {block} × {block}: the standard backward pass moves\n"
        f"{ratios[0]:.1f}× (T = {lengths[0]}) to {ratios[1]:.1f}× (T = {lengths[-1]}) "
        "the bytes of FA-2's",
        fontsize=9,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
