"""The registry of explorers is complete and true: every class, every notebook that shows one.

The caption, still-picture and blit tests parametrise over
`attention_course.explorers.registry.builds`; these checks make sure an explorer
cannot be added without an entry, or shown in a notebook the entry does not
name.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pytest

import attention_course.explorers as explorers
from attention_course.explorers.base import Explorer
from attention_course.explorers.registry import REGISTRY, builds, entry, shown_in

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9]*.ipynb"))


def explorer_classes() -> set[type]:
    """Every Explorer subclass defined in a module of attention_course.explorers."""
    found = set()
    for info in pkgutil.iter_modules(explorers.__path__):
        module = importlib.import_module(f"{explorers.__name__}.{info.name}")
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, Explorer) and value is not Explorer:
                if value.__module__ == module.__name__:
                    found.add(value)
    return found


def test_every_explorer_class_has_one_entry():
    registered = [e.cls for e in REGISTRY]
    assert len(registered) == len(set(registered)), "a class registered twice"
    assert set(registered) == explorer_classes()


def test_every_explorer_is_imported_from_the_package():
    for e in REGISTRY:
        assert e.name in explorers.__all__, e.name
        assert getattr(explorers, e.name) is e.cls


def test_the_registry_names_the_notebooks_that_show_each_explorer():
    """Counted from the notebooks' code: ``ClassName(`` in their code cells."""
    names = [e.name for e in REGISTRY]
    for path in NOTEBOOKS:
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        counted = {n: len(re.findall(rf"\b{n}\(", code)) for n in names}
        assert shown_in(path.stem) == {n: k for n, k in counted.items() if k}, path.name
    every = {notebook for e in REGISTRY for notebook in e.shown_in}
    assert every <= {p.stem for p in NOTEBOOKS}, "an entry names a notebook that does not exist"


def test_builds_are_unique_and_split_by_the_trained_model():
    ids = [test_id for e in REGISTRY for test_id in e.builds]
    assert len(ids) == len(set(ids)) and all(e.builds for e in REGISTRY)
    fast, slow, every = builds(), builds(loads_model=True), builds(loads_model=None)
    assert set(fast) | set(slow) == set(every) and not set(fast) & set(slow)
    assert all(not e.loads_model for e, _ in fast.values())
    assert {e.name for e, _ in slow.values()} == {
        "WhereItLooksExplorer",
        "OwnSentenceExplorer",
        "HeadMapsExplorer",
        "QKNormExplorer",
    }


def test_a_build_makes_its_class():
    e, build = builds()["Mistake wrong axis"]
    explorer = build()
    assert type(explorer) is e.cls and explorer.name == "wrong axis"


def test_an_unknown_explorer_is_named_with_the_known_ones():
    assert entry("TilingExplorer").shown_in == {
        "05_researcher_cost_and_tiling": 1,
        "07_researcher_build_flash_attention": 1,
    }
    with pytest.raises(KeyError, match=r"no explorer 'Nope'.*VolumeKnobExplorer"):
        entry("Nope")
