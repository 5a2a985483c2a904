"""Refusing work that would not fit, before the operating system kills the kernel.

The reference path materialises the (..., L, S) score matrix. At long lengths
that is gigabytes; asking for it would get the process killed (or a CUDA
out-of-memory error half way through). We estimate the need first and refuse
with a message that says how much, and where to go instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .backend import is_torch_array

__all__ = [
    "CGROUP_ROOT",
    "PROC_CGROUP",
    "AttentionMemoryError",
    "available_bytes",
    "cgroup_headroom",
    "check_fits",
    "format_bytes",
    "host_available_bytes",
]


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
    """Free memory on the device that holds ``like``: CUDA's free memory for a CUDA tensor;
    for numpy arrays and CPU tensors the host's available memory (`host_available_bytes`),
    or less where this process's cgroup allows less."""
    if is_torch_array(like) and like.device.type == "cuda":
        import torch

        free, _total = torch.cuda.mem_get_info(like.device)
        return int(free)
    return host_available_bytes()


def host_available_bytes() -> int:
    """The host memory this process may still take: the operating system's available memory
    (Linux's MemAvailable, Windows' available physical memory, macOS's free, inactive and
    speculative pages), capped
    by the headroom of every cgroup above the process with a memory limit (a class's hub
    limits each learner's server so: the kernel is killed past it, whatever the host has)."""
    free = _system_available()
    headroom = cgroup_headroom()
    return free if headroom is None else min(free, headroom)


def _system_available() -> int:
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():  # Linux: the kernel's own estimate, without a dependency
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    if sys.platform == "win32":
        return _windows_available()
    if sys.platform == "darwin":
        return _mac_available()
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")  # the BSDs and the rest


def _mac_available() -> int:
    """macOS's free, inactive and speculative pages (what Activity Monitor can hand out), from
    vm_stat, which prints the page size and the counts."""
    import re
    import subprocess

    text = subprocess.run(["vm_stat"], capture_output=True, text=True, check=True).stdout
    page = int(re.search(r"page size of (\d+) bytes", text).group(1))
    counts = dict(re.findall(r"^Pages (free|inactive|speculative):\s+(\d+)\.", text, re.M))
    return page * sum(int(n) for n in counts.values())


def _windows_available() -> int:
    import ctypes

    class MemoryStatus(ctypes.Structure):
        _fields_ = [
            ("dwLength", ctypes.c_ulong),
            ("dwMemoryLoad", ctypes.c_ulong),
            ("ullTotalPhys", ctypes.c_ulonglong),
            ("ullAvailPhys", ctypes.c_ulonglong),
            ("ullTotalPageFile", ctypes.c_ulonglong),
            ("ullAvailPageFile", ctypes.c_ulonglong),
            ("ullTotalVirtual", ctypes.c_ulonglong),
            ("ullAvailVirtual", ctypes.c_ulonglong),
            ("sullAvailExtendedVirtual", ctypes.c_ulonglong),
        ]

    status = MemoryStatus()
    status.dwLength = ctypes.sizeof(MemoryStatus)
    ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status))  # type: ignore[attr-defined]
    return int(status.ullAvailPhys)


#: where the cgroup hierarchies are mounted, and where this process's cgroups are listed (the
#: tests point them at folders of their own)
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def cgroup_headroom() -> int | None:
    """The least (limit - usage) over this process's cgroups and their ancestors that have a
    memory limit (cgroup v2's memory.max and memory.current, v1's memory controller's
    memory.limit_in_bytes and memory.usage_in_bytes); None where none is limited or none
    can be read (not Linux, or the hierarchy is not mounted where /proc says)."""
    try:
        lines = PROC_CGROUP.read_text().splitlines()
    except OSError:
        return None
    found = []
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if number == "0" and not controllers:  # v2's unified tree
            names, base = ("memory.max", "memory.current"), CGROUP_ROOT
        elif "memory" in controllers.split(","):  # v1's memory controller
            names, base = ("memory.limit_in_bytes", "memory.usage_in_bytes"), CGROUP_ROOT / "memory"
        else:
            continue
        folder = base / path.lstrip("/")
        while True:
            found.append(_headroom(folder, *names))
            if folder == base or base not in folder.parents:
                break
            folder = folder.parent
    limited = [h for h in found if h is not None]
    return min(limited) if limited else None


def _headroom(folder: Path, limit_name: str, usage_name: str) -> int | None:
    try:
        limit = (folder / limit_name).read_text().strip()
        usage = int((folder / usage_name).read_text().strip())
    except (OSError, ValueError):
        return None
    # "max" (v2) or a page-rounded 2**63 (v1): no limit
    if limit == "max" or int(limit) >= 1 << 62:
        return None
    return max(int(limit) - usage, 0)


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
