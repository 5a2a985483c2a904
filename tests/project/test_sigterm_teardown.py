"""A test run ended with SIGTERM (a CI timeout, ``kill``) still tears its fixtures down
(`support.stop_on_sigterm`, installed by tests/conftest.py): what they started stops too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import subprocess, sys
import pytest
sys.path[:0] = [{str(TESTS)!r}, {str(TESTS.parent / "lib" / "tests")!r}]
from support import stop_on_sigterm

def pytest_configure(config):
    stop_on_sigterm()

@pytest.fixture(scope="session")
def server(tmp_path_factory):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open("child.pid", "w") as f:
        f.write(str(child.pid))
    yield child
    child.kill()
    child.wait()
    with open("torn-down", "w") as f:
        f.write("yes")
"""

TEST = """
import time

def test_a_long_one(server):
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_terminated_run_stops_what_its_fixtures_started(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_long.py").write_text(TEST)
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-o", "addopts=", "test_long.py"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    pid_file = tmp_path / "child.pid"
    try:
        for _ in range(600):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert _alive(child)
        time.sleep(0.5)  # into the test's body
        run.send_signal(signal.SIGTERM)
        output, _ = run.communicate(timeout=60)
    finally:
        run.kill()
    left = _alive(child)
    if left:  # the failure's own mess
        os.kill(child, signal.SIGKILL)
    assert (tmp_path / "torn-down").exists(), output
    assert not left
    assert "KeyboardInterrupt" in output and "stopped by signal 15" in output, output
