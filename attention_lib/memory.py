"""Refusing work that would not fit, before the operating system kills the kernel.

The reference path materialises the (..., L, S) score matrix. At long lengths
that is gigabytes; asking for it would get the process killed (or a CUDA
out-of-memory error half way through). We estimate the need first and refuse
with a message that says how much, and where to go instead.
"""

from __future__ import annotations

from typing import Any

from .backend import is_torch_array

__all__ = ["AttentionMemoryError", "available_bytes", "check_fits", "format_bytes"]


class AttentionMemoryError(MemoryError):
    """The requested computation needs more memory than the device has free."""


def format_bytes(n: float) -> str:
    """Bytes in binary units, e.g. ``8.0 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    raise AssertionError("unreachable")


def available_bytes(like: Any) -> int:
    """Free memory on the device that holds ``like`` (host RAM for numpy and CPU tensors)."""
    if is_torch_array(like) and like.device.type == "cuda":
        import torch

        free, _total = torch.cuda.mem_get_info(like.device)
        return int(free)
    import psutil

    return int(psutil.virtual_memory().available)


def check_fits(needed: int, like: Any, what: str, limit: int | None = None) -> None:
    """Raise AttentionMemoryError if ``needed`` bytes exceed what is free.

    ``limit`` overrides the free memory measured on ``like``'s device (tests and
    notebooks use it to show the refusal at small sizes). ``what`` names the
    allocation in the message.
    """
    free = available_bytes(like) if limit is None else int(limit)
    if needed > free:
        raise AttentionMemoryError(
            f"{what} would need {format_bytes(needed)} but only {format_bytes(free)} is "
            "available; use attention_lib.flash_attention, which computes the same result "
            "tile by tile in memory linear in the sequence length"
        )
