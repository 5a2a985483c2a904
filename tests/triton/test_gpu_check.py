"""scripts/gpu_check.py on the CPU: its correctness part in Triton's interpreter, its wheels.

The GPU half (the benchmark) needs a CUDA device; what runs here is what
keeps the script from rotting between GPU runs: its checks at a tiny size,
and the import of a pure-Python requirement from a wheel file.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.py"


def _site_packages(module: str) -> Path:
    return Path(importlib.util.find_spec(module).origin).parents[1]


def _wheel_of_array_api_compat(directory: Path) -> Path:
    """A wheel (a zip) of the installed array_api_compat, as `pip download` would bring."""
    import array_api_compat

    package = Path(array_api_compat.__file__).parent
    wheel = directory / f"array_api_compat-{array_api_compat.__version__}-py3-none-any.whl"
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as z:
        for f in package.rglob("*.py"):
            z.write(f, f.relative_to(package.parent))
    return wheel


def _isolated(code: str, extra_path: Path) -> subprocess.CompletedProcess:
    """Python without site-packages (-S -I), so array_api_compat is not installed there."""
    prelude = f"import sys; sys.path[:0] = [{str(SCRIPT.parent)!r}, {str(extra_path)!r}]\n"
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", prelude + code], capture_output=True, text=True
    )


def test_a_missing_package_is_imported_from_its_wheel(tmp_path):
    wheels = tmp_path / ".whl"
    wheel = _wheel_of_array_api_compat(wheels)
    # numpy alone beside it (array_api_compat's namespaces need it), linked from this venv
    site = tmp_path / "site"
    site.mkdir()
    numpy_dir = _site_packages("numpy")
    for name in ("numpy", "numpy.libs"):
        if (numpy_dir / name).exists():
            (site / name).symlink_to(numpy_dir / name)
    code = (
        "from pathlib import Path\n"
        "import gpu_check, numpy\n"
        f"used = gpu_check.bring_wheels(Path({str(wheels)!r}))\n"
        "import array_api_compat\n"
        "xp = array_api_compat.array_namespace(numpy.zeros(3))\n"
        "print(used, array_api_compat.__file__, xp.__name__)\n"
    )
    result = _isolated(code, site)
    assert result.returncode == 0, result.stderr
    assert f"['{wheel.name}']" in result.stdout
    assert str(wheel) in result.stdout  # imported from inside the wheel file


def test_a_missing_package_without_a_wheel_says_how_to_bring_it(tmp_path):
    code = f"import gpu_check, pathlib; gpu_check.bring_wheels(pathlib.Path({str(tmp_path)!r}))"
    result = _isolated(code, tmp_path)
    assert result.returncode != 0
    assert "array_api_compat is not installed and no wheel of array-api-compat" in result.stderr
    assert "make gpu-wheels" in result.stderr


def test_the_wheel_to_fetch_is_the_pinned_one():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(SCRIPT.parent))
    assert gpu_check.pinned("array-api-compat") == "array-api-compat==1.16.0"


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_the_correctness_checks_run_in_the_interpreter(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--out", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("GPU check on the CPU (Triton's interpreter): torch ")
    # 2 cases x 3 dtypes, plus the transposed layout in 3 dtypes: output, dq, dk, dv each,
    # and in float16 and bfloat16 the output computed for a backward pass
    assert "correctness: 42 of 42 checks passed" in result.stdout
    assert sum(line.startswith("ok   ") for line in lines) == 42
    assert sum(" out for backward:" in line for line in lines) == 6
    assert any("(B, L, H, E) layout" in line for line in lines)
    assert list(tmp_path.iterdir()) == []  # no benchmark without a GPU


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_without_a_gpu_or_the_interpreter_it_stops_with_a_reason():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, str(SCRIPT), "--smoke"], env=env,
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 2
    assert "set TRITON_INTERPRET=1" in result.stdout
