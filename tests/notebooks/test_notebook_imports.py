"""The course's notebooks import from attention_lib only the names its ``__all__`` lists
(the library's rule: lib/tests/test_all_lists.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from test_all_lists import PACKAGE, declared_all

ROOT = Path(__file__).resolve().parents[2]


def test_the_notebooks_import_only_listed_names() -> None:
    """Every ``from attention_lib... import name`` in a notebook names a listed definition."""
    import json

    notebooks = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    assert notebooks
    for notebook in notebooks:
        cells = json.loads(notebook.read_text())["cells"]
        for cell in cells:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            lines = [line for line in source.splitlines() if not line.lstrip().startswith("%")]
            for node in ast.walk(ast.parse("\n".join(lines))):
                if not (
                    isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("attention_lib")
                ):
                    continue
                parts = node.module.split(".")[1:]
                base = PACKAGE.joinpath(*parts)
                path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
                listed = set(declared_all(ast.parse(path.read_text())) or [])
                submodules = (
                    {p.stem for p in base.glob("*.py")}
                    | {p.name for p in base.iterdir() if p.is_dir()}
                    if base.is_dir()
                    else set()
                )
                for alias in node.names:
                    assert alias.name in listed | submodules, (
                        f"{notebook.name} imports {alias.name} from {node.module}, "
                        "which its __all__ does not list"
                    )
