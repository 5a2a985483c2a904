"""The memory benchmark's readings and report (the browser part runs in `make bench-memory`)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import psutil

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "learner_memory.py"
_spec = importlib.util.spec_from_file_location("learner_memory_benchmark", _PATH)
memory = importlib.util.module_from_spec(_spec)
sys.modules["learner_memory_benchmark"] = memory
_spec.loader.exec_module(memory)


def test_a_process_reads_as_pss_between_its_uss_and_rss():
    sizes = memory.memory_mib(psutil.Process())
    assert 0 < sizes["uss"] <= sizes["pss"] <= sizes["rss"]


_MAP_AND_WAIT = (
    "import mmap, sys, time; f = open(sys.argv[1], 'rb'); "
    "m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ); print('mapped', flush=True); "
    "time.sleep(60)"
)


def test_others_mapping_counts_processes_outside_our_tree_only(tmp_path):
    mapped = tmp_path / "unique-memory-benchmark-file.bin"
    mapped.write_bytes(b"x" * 4096)
    ours = subprocess.Popen(
        [sys.executable, "-c", _MAP_AND_WAIT, str(mapped)], stdout=subprocess.PIPE, text=True
    )
    # started by a shell that exits at once: its parent becomes init, outside our tree
    shell = subprocess.run(
        f'{sys.executable} -c "{_MAP_AND_WAIT}" {mapped} '
        f"> {tmp_path}/out 2>&1 < /dev/null & echo $!",
        shell=True,
        capture_output=True,
        text=True,
        check=True,
    )
    orphan = psutil.Process(int(shell.stdout.strip()))
    try:
        assert ours.stdout.readline().strip() == "mapped"
        for _ in range(100):  # until the orphan has mapped the file
            if (tmp_path / "out").read_text().strip() == "mapped":
                break
            time.sleep(0.1)
        assert memory.others_mapping(mapped.name) == 1
    finally:
        for process in (ours, orphan):
            process.kill()
        ours.wait()


def _row(notebook, kernel, server, learners=1):
    return {
        "notebook": notebook,
        "learners": learners,
        "kernel_mib": [kernel],
        "server_mib": [server],
        "per_learner_mib": kernel + server,
        "per_learner_uss_mib": kernel + server - 40.0,
        "goal_mib": memory.GOAL_MIB if notebook in memory.GOAL_NOTEBOOKS else None,
        "torch_loaded": kernel > 150,
        "live_figures": 2,
    }


def test_the_report_flags_only_goal_notebooks_over_300_mb():
    lines = memory.report(
        [
            _row("00_start_here.ipynb", 200.0, 95.0),  # 295 MiB = 309 MB: over
            _row("01_beginner_crowded_room.ipynb", 130.0, 95.0),
            _row("03_developer_pytorch_and_mistakes.ipynb", 400.0, 95.0),  # no goal there
        ]
    )
    assert "286 MiB = 300 MB" in lines[0]
    flagged = [line.split()[0] for line in lines[2:] if line.endswith("OVER")]
    assert flagged == ["00_start_here.ipynb"]
    assert "(255.0)" in lines[2] and " yes " in lines[2] and " no " in lines[3]
