"""Each learner's server in cgroups of its own, with memory and CPU limits the kernel enforces.

JupyterHub's LocalProcessSpawner runs a learner's server as their system user and nothing
more: its ``mem_limit`` and ``cpu_limit`` are only passed on as environment variables. This
module (standard library only) gives each learner ``<hub's own cgroup>/attention-course/<name>``
in each hierarchy it can write: cgroup v1's ``memory`` and ``cpu`` controllers
(``memory.limit_in_bytes`` and ``memory.memsw.limit_in_bytes``, ``cpu.cfs_quota_us``,
``cpu.shares``), or cgroup v2's unified tree (``memory.max``, ``memory.swap.max``,
``cpu.max``, ``cpu.weight``) where its memory controller is delegated to the hub's cgroup.
The server joins it between fork and exec (`LearnerCgroups.join_self`, while still root),
so its kernels, started by it, are inside too; the OOM killer then ends the biggest process
of the learner who filled their limit (their kernel), no one else's.

`course_spawner.CourseSpawner` (the hub's spawner) uses it; so do the hub's tests
(``labdriver.hub`` removes what a killed hub left).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "FOLDER",
    "LearnerCgroups",
    "Limits",
    "Unavailable",
    "create",
    "find",
    "hierarchies",
    "remove",
]

#: the folder under the hub's own cgroup that holds one cgroup per learner
FOLDER = "attention-course"
CFS_PERIOD_US = 100_000  # the kernel's default CFS period (100 ms)
UNLIMITED_V1 = "-1"


class Unavailable(RuntimeError):
    """No cgroup hierarchy this process can write: limits cannot be enforced (says why)."""


@dataclass(frozen=True)
class Limits:
    """A learner's limits; None: none."""

    memory_bytes: int | None = None
    cpus: float | None = None  # a CFS quota, in CPUs (1.5: one and a half CPUs' time)
    cpu_guarantee: float | None = None  # a relative weight: 1.0 is the default's (1024 shares)

    def __post_init__(self) -> None:
        if self.memory_bytes is not None and self.memory_bytes <= 0:
            raise ValueError(f"memory limit {self.memory_bytes!r}: must be a positive byte count")
        if self.cpus is not None and self.cpus < 0.01:
            raise ValueError(f"CPU limit {self.cpus!r}: must be at least 0.01 CPU")
        if self.cpu_guarantee is not None and self.cpu_guarantee <= 0:
            raise ValueError(f"CPU guarantee {self.cpu_guarantee!r}: must be positive")


@dataclass(frozen=True)
class Hierarchy:
    """One mounted cgroup hierarchy that this process's cgroup sits in."""

    version: int  # 1 or 2
    controllers: frozenset[str]  # v1: its controllers; v2: those enabled for children
    own: Path  # this process's cgroup in it (a folder under the mount)


@dataclass
class LearnerCgroups:
    """One learner's cgroups: ``dirs``, one per hierarchy (v1: memory, cpu; v2: one)."""

    name: str
    dirs: dict[str, Path] = field(default_factory=dict)  # "memory", "cpu" or "unified"

    def pids(self) -> set[int]:
        """The processes in them now."""
        found: set[int] = set()
        for folder in self.dirs.values():
            with contextlib.suppress(OSError):
                found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
        return found

    def join_self(self) -> list[str]:
        """Move the calling process into them; the failures, as text (none: []). Called in a
        forked child before exec, so it only opens and writes files."""
        pid = str(os.getpid()).encode()
        failed = []
        for folder in self.dirs.values():
            try:
                fd = os.open(folder / "cgroup.procs", os.O_WRONLY)
                try:
                    os.write(fd, pid)
                finally:
                    os.close(fd)
            except OSError as error:
                failed.append(f"{folder}: {error}")
        return failed

    def oom_kills(self) -> int:
        """How many processes the OOM killer has ended in the learner's memory cgroup."""
        if "memory" in self.dirs:
            text, key = (self.dirs["memory"] / "memory.oom_control").read_text(), "oom_kill"
        elif "unified" in self.dirs:
            text, key = (self.dirs["unified"] / "memory.events").read_text(), "oom_kill"
        else:
            raise LookupError(f"{self.name}: no memory cgroup")
        for line in text.splitlines():
            words = line.split()
            if len(words) == 2 and words[0] == key:
                return int(words[1])
        raise LookupError(f"{self.name}: no {key} count in the memory cgroup")


def _mountinfo(proc: Path) -> list[tuple[str, Path, str, set[str]]]:
    """The cgroup mounts: (the hierarchy's folder mounted there, the mount point, the file
    system type, its options)."""
    mounts = []
    for line in (proc / "self" / "mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fields, rest = before.split(), after.split()
        if len(fields) < 5 or len(rest) < 3 or rest[0] not in ("cgroup", "cgroup2"):
            continue
        options = set(rest[2].split(",")) | set(fields[5].split(","))
        mounts.append((fields[3], Path(fields[4]), rest[0], options))
    return mounts


def hierarchies(pid: int | str = "self", proc: Path = Path("/proc")) -> dict[str, Hierarchy]:
    """The writable hierarchies process ``pid``'s cgroups sit in, by use: "memory" and
    "cpu" (v1), "unified" (v2); a read-only mount is left out."""
    own: dict[str, str] = {}  # controller ("" for v2) -> the process's cgroup path
    for line in (proc / str(pid) / "cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(",") if names else [""]:
            own[name] = path
    found: dict[str, Hierarchy] = {}
    for root, mount, fstype, options in _mountinfo(proc):
        if "ro" in options:
            continue
        uses = [""] if fstype == "cgroup2" else [u for u in ("memory", "cpu") if u in options]
        key = uses[0] if uses else None
        if key is None or key not in own:
            continue
        path = own[key]
        if not (path == root or path.startswith(root.rstrip("/") + "/")):
            continue  # the process's cgroup is outside what this mount shows
        folder = mount / path[len(root.rstrip("/")) :].lstrip("/")
        if fstype == "cgroup2":
            with contextlib.suppress(OSError):
                enabled = frozenset((folder / "cgroup.subtree_control").read_text().split())
                found["unified"] = Hierarchy(2, enabled, folder)
        else:
            found[key] = Hierarchy(1, frozenset(options & {"memory", "cpu"}), folder)
    return found


def _write(folder: Path, name: str, value: str) -> None:
    try:
        (folder / name).write_text(value)
    except OSError as error:
        raise OSError(f"cannot write {value!r} to {folder / name}: {error}") from error


def _limit_v1(folder: Path, use: str, limits: Limits) -> None:
    if use == "memory":
        memory = str(limits.memory_bytes) if limits.memory_bytes else UNLIMITED_V1
        # memory + swap: present where the kernel accounts swap
        memsw = folder / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            _write(folder, memsw.name, UNLIMITED_V1)  # memsw >= memory at every step
        _write(folder, "memory.limit_in_bytes", memory)
        if memsw.exists():
            _write(folder, memsw.name, memory)  # no swapping past the limit either
    else:
        quota = round(limits.cpus * CFS_PERIOD_US) if limits.cpus else -1
        _write(folder, "cpu.cfs_period_us", str(CFS_PERIOD_US))
        _write(folder, "cpu.cfs_quota_us", str(quota))
        shares = round(1024 * limits.cpu_guarantee) if limits.cpu_guarantee else 1024
        _write(folder, "cpu.shares", str(max(2, shares)))


def _limit_v2(folder: Path, limits: Limits) -> None:
    _write(folder, "memory.max", str(limits.memory_bytes) if limits.memory_bytes else "max")
    if (folder / "memory.swap.max").exists():
        _write(folder, "memory.swap.max", "0" if limits.memory_bytes else "max")
    if (folder / "cpu.max").exists():
        quota = str(round(limits.cpus * CFS_PERIOD_US)) if limits.cpus else "max"
        _write(folder, "cpu.max", f"{quota} {CFS_PERIOD_US}")
        weight = round(100 * limits.cpu_guarantee) if limits.cpu_guarantee else 100
        _write(folder, "cpu.weight", str(min(10_000, max(1, weight))))


def _usable(pid: int | str, proc: Path) -> dict[str, Hierarchy]:
    """The hierarchies to use: v1's memory (and cpu) where mounted writable, else v2 where
    its memory controller reaches the hub's cgroup."""
    try:
        found = hierarchies(pid, proc)
    except OSError as error:
        raise Unavailable(f"cannot read this process's cgroups: {error}") from error
    if "memory" in found:
        return {k: v for k, v in found.items() if k in ("memory", "cpu")}
    unified = found.get("unified")
    if unified and "memory" in unified.controllers:
        return {"unified": unified}
    if unified:
        raise Unavailable(
            f"cgroup v2 at {unified.own} does not delegate the memory controller to this "
            f"process's cgroup (cgroup.subtree_control: {' '.join(sorted(unified.controllers))})"
        )
    raise Unavailable("no writable cgroup hierarchy with a memory controller is mounted")


def find(name: str, pid: int | str = "self", proc: Path = Path("/proc")) -> LearnerCgroups:
    """Learner ``name``'s cgroups (the folders; they may not exist)."""
    return LearnerCgroups(
        name, {use: h.own / FOLDER / name for use, h in _usable(pid, proc).items()}
    )


def create(
    name: str, limits: Limits, pid: int | str = "self", proc: Path = Path("/proc")
) -> LearnerCgroups:
    """Make (or reuse) learner ``name``'s cgroups under process ``pid``'s own and write
    ``limits`` into them. Raises `Unavailable` saying why when there is nowhere to."""
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"learner name {name!r}: not a cgroup folder name")
    made = find(name, pid, proc)
    for use, folder in made.dirs.items():
        try:
            if use == "unified":
                folder.parent.mkdir(exist_ok=True)
                # the learners' cgroups get the controllers the hub's has (v2 sets no limit
                # file in a child until its parent enables the controller for children)
                wanted = {"memory", "cpu"} & _usable(pid, proc)["unified"].controllers
                _write(folder.parent, "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
            folder.mkdir(parents=True, exist_ok=True)
            if use == "unified":
                _limit_v2(folder, limits)
            else:
                _limit_v1(folder, use, limits)
        except OSError as error:
            remove(made)
            raise Unavailable(f"{use} cgroup {folder}: {error}") from error
    return made


def remove(cgroups: LearnerCgroups, timeout: float = 10.0) -> list[str]:
    """End every process left in ``cgroups`` (a stopped server's orphaned kernels), remove
    the folders, and the ``attention-course`` folder too once no learner's is left; what
    could not be removed (none: [])."""
    deadline = time.monotonic() + timeout
    while (pids := cgroups.pids()) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    left = []
    for folder in cgroups.dirs.values():
        for attempt in range(50):  # a killed process leaves its cgroup a moment after it dies
            try:
                folder.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as error:
                if attempt == 49:
                    left.append(f"{folder}: {error}")
                time.sleep(0.1)
        with contextlib.suppress(OSError):  # other learners' folders are still in it
            folder.parent.rmdir()
    return left
