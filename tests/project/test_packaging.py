"""The project around the library: pins in one place, import hygiene, typing, README."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

import attention_lib

ROOT = Path(__file__).resolve().parents[2]
# conda-forge names that differ from PyPI's
CONDA_NAMES = {"torch": "pytorch", "isal": "python-isal"}


def pinned(requirement: str) -> tuple[str, str]:
    name, version = re.match(r"^([A-Za-z0-9_.-]+)==([^;\s]+)", requirement).groups()
    return CONDA_NAMES.get(name.lower(), name.lower()), version


def test_environment_yml_lists_the_same_pins_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # all but the hub's teaching tools, which only `python -m course hub install` installs,
    # in the hub's own environment, never in a learner's (conda's included)
    requirements = project["dependencies"] + [
        r
        for name, extra in project["optional-dependencies"].items()
        if name != "teach"
        for r in extra
    ]
    expected = dict(pinned(r) for r in requirements)
    listed = dict(
        pinned(line.strip()[2:])
        for line in (ROOT / "environment.yml").read_text().splitlines()
        if re.match(r"^\s+- [A-Za-z0-9_.-]+==", line)
    )
    assert listed == expected


def test_environment_yml_installs_the_course_itself():
    """conda installs the pins; pip then installs the course from the file's folder (conda
    runs pip there), finding every requirement already installed."""
    import yaml  # jupyter-events' requirement, so JupyterLab's

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert pip_sections == [["-e ."]]
    assert "pip" in env["dependencies"]


def test_every_requirement_is_pinned_exactly():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        assert "==" in requirement, requirement
    assert "torch==2.13.0" in project["dependencies"]


def test_import_does_not_load_torch_or_triton():
    code = (
        "import sys, attention_lib, attention_course.lessons.exercises, attention_course.explorers, "
        "attention_course.explorers.registry, attention_lib.variants, attention_lib.scales, "
        "attention_course.lessons.saturation, attention_course.lessons.scaling, "
        "attention_course.lessons.figures, attention_course.lessons.alternatives, "
        "attention_course.model.catalogue, attention_course.model.report; "
        "loaded = [m for m in ('torch', 'triton') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_package_is_typed_and_exports_the_contract():
    assert (Path(attention_lib.__file__).parent / "py.typed").is_file()
    for name in [
        "softmax",
        "attention_weights",
        "scaled_dot_product_attention",
        "flash_attention",
        "sparsemax",
        "entmax15",
        "softmax1",
        "best_device",
    ]:
        assert callable(getattr(attention_lib, name)), name
        assert getattr(attention_lib, name).__doc__, name


def test_best_device_names_a_torch_device():
    import torch

    device = attention_lib.best_device()
    assert isinstance(device, torch.device)
    expected = "cuda" if torch.cuda.is_available() else device.type
    assert device.type == expected and device.type in ("cuda", "mps", "cpu")
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert device.type == "cpu"


def test_readme_quick_start_is_two_commands():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^    (make \w+)", quick, flags=re.M)
    assert commands == ["make lab", "make test"]


def test_readme_example_runs():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_browser_driver_imports_from_the_install_not_from_a_path_edit(tmp_path):
    # -I: no PYTHONPATH, no current folder, no user site: only what pip installed
    code = "import labdriver, sys; print(labdriver.__file__); print(labdriver.REPO)"
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=tmp_path, check=True, capture_output=True, text=True
    ).stdout.split("\n")
    assert Path(out[0]) == ROOT / "labdriver" / "__init__.py"
    assert Path(out[1]) == ROOT


def test_wheel_ships_the_browser_driver_beside_the_library_with_its_scripts(tmp_path):
    """labdriver is a package of its own (never inside attention_lib), with its JavaScript."""
    src = tmp_path / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    # the packages, and the JupyterLab extension the wheel installs beside them
    for folder in ("attention_lib", "labdriver", "jupyter/labextensions"):
        shutil.copytree(ROOT / folder, src / folder, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*build, "--no-index", "-q", "-w", str(tmp_path / "out"), str(src)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "out").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    driver = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "labdriver").rglob("*")
        if path.suffix in (".py", ".js") and "node_modules" not in path.parts  # npm's, not ours
    }
    assert {"labdriver/js/state.js", "labdriver/kernel_probe.py"} <= driver
    assert driver <= names, sorted(driver - names)
    assert "lib/attention_lib/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "lib/attention_lib/labdriver"))]
