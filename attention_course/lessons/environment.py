"""Notebook 00's environment check, run in a second Python of the same environment.

`check` starts ``python -m attention_course.lessons.environment`` with the kernel's own
interpreter: the child prints the versions in use and the device torch found, runs one
tiny attention step in numpy and in torch on that device, and checks that both give the
same shares. torch is imported there, not in the learner's kernel, which then stays
about 150 MiB smaller for the rest of the session: on a class's server that is half of
what one learner may hold (``benchmarks/learner_memory.py`` measures it).

Importing this module imports neither numpy nor torch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["ALL_GOOD", "check", "report_lines"]

#: The child's last line when every check passed.
ALL_GOOD = "environment OK"


def report_lines() -> list[str]:
    """The versions, the device and the numpy-against-torch check, one line each.

    Imports torch: `check` runs this in a child process. Raises AssertionError
    when numpy and torch disagree or a row of shares does not add up to one.
    """
    import platform

    import numpy as np
    import torch

    import attention_lib

    device = attention_lib.best_device()
    found = "a GPU" if device.type != "cpu" else "no GPU found, the CPU will do"
    lines = [
        f"python        {platform.python_version()}",
        f"numpy         {np.__version__}",
        f"torch         {torch.__version__}",
        f"attention_lib {attention_lib.__version__}",
        f"torch device  {device} ({found})",
    ]
    rng = np.random.default_rng(0)
    query = rng.normal(size=(3, 8))  # (3 words, 8 slots)
    key = rng.normal(size=(5, 8))  # (5 words, 8 slots)
    shares_numpy = attention_lib.attention_weights(query, key)  # (3, 5)
    # float32: the type every device supports (Apple's MPS has no float64)
    query_t = torch.from_numpy(query).to(device, torch.float32)  # (3, 8)
    key_t = torch.from_numpy(key).to(device, torch.float32)  # (5, 8)
    shares_torch = attention_lib.attention_weights(query_t, key_t).cpu().numpy()  # (3, 5)
    assert np.allclose(shares_numpy.sum(axis=-1), 1.0), "each row of shares must add up to one"
    assert np.allclose(shares_torch, shares_numpy, atol=1e-6), (
        f"numpy and torch on {device} give different shares: largest difference "
        f"{np.abs(shares_torch - shares_numpy).max():.3g}"
    )
    lines.append(
        f"a tiny attention step in numpy and in torch on {device.type}: the same shares, "
        "and every row adds up to one"
    )
    lines.append(ALL_GOOD)
    return lines


def check(timeout: float = 300.0) -> None:
    """Run `report_lines` in a second Python of this environment and print its lines.

    Raises RuntimeError with the child's own error when it fails (torch missing, the
    check failing) or runs past ``timeout`` seconds; the kernel itself never imports
    torch here.
    """
    # the child finds these copies of the course and the library even where the kernel found
    # them by path
    import attention_lib

    here = [Path(__file__).resolve().parents[2], Path(attention_lib.__file__).resolve().parents[1]]
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*map(str, here), *([path] if path else [])]))
    command = [sys.executable, "-m", "attention_course.lessons.environment"]
    try:
        child = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"the environment check ({' '.join(command)}) did not finish in {timeout:g} s"
        ) from None
    print(child.stdout, end="")
    if child.returncode != 0 or not child.stdout.rstrip().endswith(ALL_GOOD):
        error = child.stderr.strip().splitlines()[-12:] or ["(it printed no error)"]
        raise RuntimeError(
            f"the environment check failed in {sys.executable} "
            f"(exit status {child.returncode}):\n" + "\n".join(error)
        )


if __name__ == "__main__":
    print("\n".join(report_lines()))
