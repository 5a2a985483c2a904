"""What a benchmark run records of itself and its machine, and how it reads a peak memory.

Every results file carries the command that wrote it (`command_line`) and
an ``info`` record of the machine it was measured on: `machine_info` for the
CPU sweep and the ratios (processor, cores, torch threads, versions, free
memory, and the load average when the run started: these machines are
shared), `gpu_info` for the GPU sweep (the device, its
compute capability, CUDA, cuDNN and Triton). `machine_name` is the folder
under ``benchmarks/results/`` a run writes to.

`MachineLoad` measures how busy the machine was while a benchmark ran (the
load average before, during and after, and the CPU time processes outside
the benchmark used meanwhile); `busy_warnings` says, line by line, why a
run's figures are not an idle machine's. The load average alone lags by a
minute: a run straight after other work looks busy, and one next to a
process that started a moment ago looks idle.

`HostPeak` reads one call's peak resident memory on the CPU (Linux's
high-water mark, with glibc's allocator made to show every block);
`CudaPeak` one call's peak allocation on a CUDA device.

Importing this module imports numpy and psutil only; torch and triton load
when a record of them is taken.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from attention_lib.memory import available_bytes, format_bytes

__all__ = [
    "BUSY_LOAD_PER_CPU",
    "BUSY_OTHERS_SHARE",
    "LOAD_SAMPLE_S",
    "CudaPeak",
    "HostPeak",
    "MachineLoad",
    "MiB",
    "busy_warning",
    "busy_warnings",
    "command_line",
    "cpu_model",
    "cpu_slug",
    "gpu_info",
    "gpu_machine_name",
    "host_record",
    "machine_info",
    "machine_name",
]

MiB = 1024 * 1024


def command_line() -> str:
    """The command this process runs, as a results file records it."""
    return "python -m attention_course.bench " + " ".join(sys.argv[1:])


def cpu_model() -> str:
    """The processor's model name (``model name`` in Linux's /proc/cpuinfo; elsewhere what
    `platform` knows)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def cpu_slug(model: str | None = None, cpus: int | None = None) -> str:
    """The processor as a file name: its model (`cpu_model` unless given) without trade
    marks, clock or the words "processor" and "CPU", and the CPU count (default this
    machine's), e.g. ``amd-epyc-2cpu``, ``intel-xeon-2cpu``.

    Slider latency depends on the processor, so its results are kept one file per model.
    """
    name = (cpu_model() if model is None else model).lower()
    name = re.sub(r"\((r|tm)\)|@.*$|\b(processor|cpu)\b", " ", name)
    slug = re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "unknown"
    return f"{slug}-{os.cpu_count() if cpus is None else cpus}cpu"


def host_record(name: str) -> dict[str, Any]:
    """What the browser benchmarks (benchmarks/*.py) record of the machine, under ``name``
    (the file's, `cpu_slug` by default): processor, CPUs, memory, platform, Python."""
    return {
        "name": name,
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def busy_warning() -> str | None:
    """A warning when the machine already runs other work (1-minute load average > cores / 2)."""
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load <= cores / 2:
        return None
    return (
        f"warning: the machine is busy (load average {load:.2f} on {cores} cores): "
        "timings are slower and noisier; compare the ratios measured side by side"
    )


# Busy: others used more than this share of the machine's CPU time during the run, or
# the 1-minute load average before it exceeded this many runnable tasks per CPU.
BUSY_OTHERS_SHARE = 0.10
BUSY_LOAD_PER_CPU = 0.5
LOAD_SAMPLE_S = 5.0


def _cpu_seconds(process: psutil.Process) -> float | None:
    with contextlib.suppress(psutil.Error):
        times = process.cpu_times()
        return times.user + times.system
    return None


@dataclass
class MachineLoad:
    """How busy the machine was around a measurement: load averages and others' CPU time.

    `start` before the measurement, `stop` after; between them a thread samples
    the 1-minute load average every `LOAD_SAMPLE_S` seconds. ``others_share`` is
    the CPU time used by processes outside this one's tree (this process and
    its descendants: the benchmark's server, kernels and browser), over the
    machine's CPU time in the same wall time; a process that both starts and
    ends between two snapshots is missed, so it is a lower bound.

    ``load_before_counts`` False: this process itself was busy in the minute
    before `start` (``make bench``'s sweep before its ratios, the idle ratios
    before the loaded ones), so the 1-minute load average then counts its own
    work and is no sign of others (`busy_warnings` leaves it out; it is still
    recorded).

    ``others_load`` is the median load average during the run less this
    tree's own CPU use over it (``own_cpus``, in CPUs): the runnable work of
    others, short-lived processes included, which ``others_share`` misses (a
    test suite's many brief processes read as 2% of the CPU beside a load
    average of 4.5 on 2 CPUs).
    """

    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    load_before_counts: bool = True
    before: tuple[float, float, float] | None = None
    during: list[float] = field(default_factory=list)
    after: tuple[float, float, float] | None = None
    others_share: float | None = None
    others_cpu_seconds: float | None = None
    own_cpus: float | None = None
    _cpu_at_start: dict[int, float] = field(default_factory=dict, repr=False)
    _own_at_start: float = field(default=0.0, repr=False)
    _started: float = 0.0
    _done: threading.Event = field(default_factory=threading.Event, repr=False)
    _sampler: threading.Thread | None = field(default=None, repr=False)

    def _ours(self) -> set[int]:
        me = psutil.Process()
        with contextlib.suppress(psutil.Error):
            return {me.pid, *(c.pid for c in me.children(recursive=True))}
        return {me.pid}

    def start(self) -> MachineLoad:
        self.before = os.getloadavg()
        self._started = time.monotonic()
        self._cpu_at_start = {
            p.pid: t for p in psutil.process_iter() if (t := _cpu_seconds(p)) is not None
        }
        self._own_at_start = _tree_cpu_seconds()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(LOAD_SAMPLE_S):
            self.during.append(os.getloadavg()[0])

    def stop(self) -> MachineLoad:
        ours = self._ours()
        wall = time.monotonic() - self._started
        used = 0.0
        for process in psutil.process_iter():
            if process.pid in ours or (now := _cpu_seconds(process)) is None:
                continue
            used += max(0.0, now - self._cpu_at_start.get(process.pid, 0.0))
        self._done.set()
        if self._sampler is not None:
            self._sampler.join()
        self.after = os.getloadavg()
        self.others_cpu_seconds = used
        self.others_share = used / (wall * self.cpus) if wall > 0 else None
        self.own_cpus = (_tree_cpu_seconds() - self._own_at_start) / wall if wall > 0 else None
        return self

    @property
    def others_load(self) -> float | None:
        """The median 1-minute load average during the run less this tree's own CPUs."""
        if not self.during or self.own_cpus is None:
            return None
        return float(np.median(self.during)) - self.own_cpus

    def record(self) -> dict:
        during = np.asarray(self.during or [np.nan])
        return {
            "cpus": self.cpus,
            "load_average_before": self.before,
            "load_average_during": {
                "samples": len(self.during),
                "median": float(np.nanmedian(during)) if self.during else None,
                "max": float(np.nanmax(during)) if self.during else None,
            },
            "load_average_after": self.after,
            "load_average_before_counts": self.load_before_counts,
            "others_cpu_share": self.others_share,
            "others_cpu_seconds": self.others_cpu_seconds,
            "own_cpus": self.own_cpus,
            "others_load_during": self.others_load,
            "busy": bool(busy_warnings(self)),
            "warnings": busy_warnings(self),
        }


def _tree_cpu_seconds() -> float:
    """CPU seconds used so far by this process, its living descendants and the children it
    has waited for."""
    me = psutil.Process()
    with contextlib.suppress(psutil.Error):
        times = me.cpu_times()
        total = times.user + times.system + times.children_user + times.children_system
        for child in me.children(recursive=True):
            with contextlib.suppress(psutil.Error):  # its own waited-for children too
                t = child.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
        return total
    return 0.0


def busy_warnings(load: MachineLoad) -> list[str]:
    """One line per sign that the machine was busy (none: it was idle enough to measure)."""
    warnings = []
    if load.others_share is not None and load.others_share > BUSY_OTHERS_SHARE:
        warnings.append(
            f"other processes used {load.others_share:.0%} of the machine's CPU time during the "
            f"run (more than {BUSY_OTHERS_SHARE:.0%})"
        )
    before = load.before if load.load_before_counts else None  # else it counts our own work
    if before is not None and before[0] > BUSY_LOAD_PER_CPU * load.cpus:
        warnings.append(
            f"the 1-minute load average was {before[0]:.1f} before the run, on "
            f"{load.cpus} CPUs (more than {BUSY_LOAD_PER_CPU} per CPU)"
        )
    others = load.others_load
    if others is not None and others > BUSY_LOAD_PER_CPU * load.cpus:
        warnings.append(
            f"the 1-minute load average during the run was {np.median(load.during):.1f} "
            f"(median), {others:.1f} of it others' beside this run's {load.own_cpus:.1f} CPUs, "
            f"on {load.cpus} CPUs (more than {BUSY_LOAD_PER_CPU} per CPU)"
        )
    if warnings:
        warnings.append("these timings are not an idle machine's: re-run on an idle one")
    return [f"WARNING: the machine was busy: {w}" for w in warnings]


def gpu_machine_name(device_name: str) -> str:
    """``gpu-`` and the device's name in lower case, runs of other characters as one dash."""
    words = "".join(c if c.isalnum() else " " for c in device_name.lower()).split()
    return "gpu-" + "-".join(words)


def machine_name(device: Any) -> str:
    """The results folder of a run on ``device`` (a torch device or its name).

    ``cpu-<cores>core-<architecture>`` on the CPU; on a CUDA device
    `gpu_machine_name` of the device's name (torch is imported then).
    """
    if str(device).startswith("cuda"):
        import torch

        return gpu_machine_name(torch.cuda.get_device_name(device))
    return f"cpu-{os.cpu_count()}core-{platform.machine()}"


def machine_info(device: Any = "cpu", dtype: str = "float32") -> dict[str, Any]:
    """The machine a CPU run measures on, taken when called (so: call it as the run starts).

    ``device`` and ``dtype`` are the run's; the record holds the processor,
    core count, torch's thread count, the library versions, the free memory
    and the 1-, 5- and 15-minute load averages (a shared machine's timings
    are read against them). Imports torch.
    """
    import torch

    info = {
        "machine": machine_name(device),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "torch": torch.__version__,
        "device": str(device),
        "dtype": dtype,
        "free_memory": format_bytes(available_bytes(np.zeros(1))),
        "cpu_model": cpu_model(),
        "load_average": list(os.getloadavg()),  # 1, 5 and 15 minutes, when the run started
    }
    if str(device).startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(device)
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    return info


def gpu_info(device: Any) -> dict[str, Any]:
    """The CUDA device a GPU run measures on: its name, size and the software stack."""
    import torch
    import triton

    props = torch.cuda.get_device_properties(device)
    return {
        "machine": gpu_machine_name(props.name),
        "gpu": props.name,
        "multiprocessors": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "compute_capability": f"{props.major}.{props.minor}",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "triton": triton.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


class HostPeak:
    """Peak resident memory of this process during one run, via Linux's VmHWM.

    glibc keeps freed blocks below its mmap threshold (up to 32 MiB) for reuse,
    so a run's temporaries could land in memory that is already resident and
    never show in the high-water mark. For the measured run we lower the
    threshold to 64 KiB, so every sizeable block is fresh memory, and restore
    a large one for the timed runs, so they keep their fast reuse. Elsewhere
    than Linux with glibc it cannot read a peak (`peak_beyond_base_mib` is None).
    """

    M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, from glibc's malloc.h
    M_MMAP_THRESHOLD = -3

    def __init__(self) -> None:
        import ctypes
        import ctypes.util

        self.libc = None
        if Path("/proc/self/clear_refs").exists() and platform.libc_ver()[0] == "glibc":
            self.libc = ctypes.CDLL(ctypes.util.find_library("c"))

    @staticmethod
    def _status_kib(key: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        raise KeyError(key)

    def reset(self) -> None:
        if self.libc is None:
            return
        self.libc.mallopt(self.M_MMAP_THRESHOLD, 64 * 1024)
        self.libc.malloc_trim(0)  # hand freed heap memory back first
        Path("/proc/self/clear_refs").write_text("5")  # resets the high-water mark
        self.base = self._status_kib("VmRSS")

    def peak_beyond_base_mib(self) -> float | None:
        if self.libc is None:
            return None  # no way to read a per-run peak here
        peak = (self._status_kib("VmHWM") - self.base) / 1024
        # back to the steady state glibc's dynamic threshold reaches on its own:
        # blocks up to 32 MiB reused from the heap, trimmed only beyond 64 MiB
        self.libc.mallopt(self.M_MMAP_THRESHOLD, 32 * MiB)
        self.libc.mallopt(self.M_TRIM_THRESHOLD, 64 * MiB)
        return peak


class CudaPeak:
    """Peak memory allocated on the CUDA device during one run, beyond what it held before."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def reset(self) -> None:
        self.torch.cuda.synchronize()
        self.torch.cuda.reset_peak_memory_stats()
        self.base = self.torch.cuda.memory_allocated()

    def peak_beyond_base_bytes(self) -> int:
        self.torch.cuda.synchronize()  # the run's kernels have finished allocating
        return self.torch.cuda.max_memory_allocated() - self.base

    def peak_beyond_base_mib(self) -> float:
        return self.peak_beyond_base_bytes() / MiB
