"""How much host memory the refusal counts on: the system's available memory, capped by the
headroom of this process's cgroups (a hub learner's kernel is killed at its cgroup's limit,
whatever the host has free)."""

from __future__ import annotations

import numpy as np
import pytest

from attention_lib import AttentionMemoryError, memory, scaled_dot_product_attention


def cgroups(tmp_path, proc: str, files: dict[str, str]):
    """A /proc/self/cgroup and a cgroup mount of our own."""
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (tmp_path / "proc").write_text(proc)
    return root, tmp_path / "proc"


def test_v2_headroom_is_the_least_over_the_cgroup_and_its_ancestors(tmp_path, monkeypatch):
    root, proc = cgroups(
        tmp_path,
        "0::/hub/attention-course/alice\n",
        {
            "hub/memory.max": "max\n",
            "hub/memory.current": "900000000\n",
            "hub/attention-course/memory.max": "3000000000\n",
            "hub/attention-course/memory.current": "2500000000\n",  # 500 MB left for the class
            "hub/attention-course/alice/memory.max": "2000000000\n",
            "hub/attention-course/alice/memory.current": "1200000000\n",  # 800 MB for alice
        },
    )
    monkeypatch.setattr(memory, "CGROUP_ROOT", root)
    monkeypatch.setattr(memory, "PROC_CGROUP", proc)
    assert memory.cgroup_headroom() == 500_000_000


def test_v1_memory_controller_and_no_limit(tmp_path, monkeypatch):
    root, proc = cgroups(
        tmp_path,
        "4:memory:/learners/bob\n3:cpu,cpuacct:/learners/bob\n",
        {
            "memory/learners/bob/memory.limit_in_bytes": "1073741824\n",
            "memory/learners/bob/memory.usage_in_bytes": "73741824\n",
            "memory/learners/memory.limit_in_bytes": str(2**63 - 4096) + "\n",  # v1's "none"
            "memory/learners/memory.usage_in_bytes": "73741824\n",
        },
    )
    monkeypatch.setattr(memory, "CGROUP_ROOT", root)
    monkeypatch.setattr(memory, "PROC_CGROUP", proc)
    assert memory.cgroup_headroom() == 1_000_000_000
    (root / "memory/learners/bob/memory.limit_in_bytes").write_text(str(2**63 - 4096))
    assert memory.cgroup_headroom() is None  # nothing limited
    monkeypatch.setattr(memory, "PROC_CGROUP", tmp_path / "no-such-file")
    assert memory.cgroup_headroom() is None  # not Linux


def test_the_refusal_counts_the_cgroups_headroom(tmp_path, monkeypatch):
    """A request that fits the host but not the learner's cgroup is refused, naming the
    headroom and the tiled path."""
    root, proc = cgroups(
        tmp_path,
        "0::/alice\n",
        {"alice/memory.max": "300000000\n", "alice/memory.current": "290000000\n"},
    )
    monkeypatch.setattr(memory, "CGROUP_ROOT", root)
    monkeypatch.setattr(memory, "PROC_CGROUP", proc)
    assert memory.host_available_bytes() == 10_000_000
    q = np.zeros((1, 2048, 8))
    with pytest.raises(
        AttentionMemoryError,
        match=r"only 9\.5 MiB is available; use attention_lib\.flash_attention",
    ):
        scaled_dot_product_attention(q, q, q)


def test_the_system_figure_agrees_with_psutil():
    psutil = pytest.importorskip("psutil")
    ours, theirs = memory._system_available(), psutil.virtual_memory().available
    assert abs(ours - theirs) <= 0.05 * theirs  # two reads a moment apart


def test_macs_figure_is_read_from_vm_stat(monkeypatch):
    printed = (
        "Mach Virtual Memory Statistics: (page size of 16384 bytes)\n"
        "Pages free:                               12345.\n"
        "Pages active:                            500000.\n"
        "Pages inactive:                          200000.\n"
        "Pages speculative:                         1000.\n"
        "Pages wired down:                        100000.\n"
    )

    class Done:
        stdout = printed

    monkeypatch.setattr("subprocess.run", lambda *a, **k: Done())
    assert memory._mac_available() == 16384 * (12345 + 200000 + 1000)
