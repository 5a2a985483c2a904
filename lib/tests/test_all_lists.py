"""Every module's ``__all__`` lists exactly its public definitions.

Read from the source, not imported (no module is run): a module's public
definitions are its top-level functions, classes and assigned names that do
not start with an underscore, and the names it re-exports on purpose,
``from x import name as name`` (the explicit re-export idiom) or, in a
package's ``__init__.py``, anything imported from its own submodules. A
name in ``__all__`` that the module does not define fails here; a name a
notebook imports that ``__all__`` omits fails the course's
tests/notebooks/test_notebook_imports.py.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

# the installed package's source (a checkout's lib/attention_lib, or a wheel's), not run
PACKAGE = Path(importlib.util.find_spec("attention_lib").origin).parent
MODULES = sorted(PACKAGE.rglob("*.py"))


def _module_param(path: Path) -> object:
    return pytest.param(path, id=str(path.relative_to(PACKAGE)))


def _names(target: ast.expr) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_names(t) for t in target.elts))
    return set()


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """A module's statements, with those inside a top-level ``try`` or ``if`` (they run on
    import), but not a script's ``if __name__ == "__main__":`` block (it runs as a program)."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.Try):
            found += _top_level(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                found += _top_level(handler.body)
        elif isinstance(node, ast.If) and "__main__" not in ast.unparse(node.test):
            found += _top_level(node.body + node.orelse)
        else:
            found.append(node)
    return found


def public_definitions(tree: ast.Module, is_package: bool) -> set[str]:
    """The names a module defines or re-exports on purpose, without the private ones."""
    names: set[str] = set()
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names |= _names(target)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            names |= _names(node.target)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            own = is_package and isinstance(node, ast.ImportFrom) and node.level == 1
            for alias in node.names:
                if own or (alias.asname is not None and alias.asname == alias.name):
                    names.add(alias.asname or alias.name)
    return {n for n in names if not n.startswith("_")}


def declared_all(tree: ast.Module) -> list[str] | None:
    """The strings of ``__all__ = [...]`` and every ``__all__ += [...]``; None without one."""
    found: list[str] | None = None
    for node in tree.body:
        value = None
        if isinstance(node, ast.Assign) and _names(node.targets[0]) == {"__all__"}:
            value, found = node.value, []
        elif isinstance(node, ast.AnnAssign) and _names(node.target) == {"__all__"}:
            value, found = node.value, []
        elif isinstance(node, ast.AugAssign) and _names(node.target) == {"__all__"}:
            value = node.value
        if value is not None:
            assert isinstance(value, (ast.List, ast.Tuple)), "__all__ must be a literal list"
            assert found is not None, "__all__ += before __all__ ="
            found += [ast.literal_eval(e) for e in value.elts]
    return found


def check_all_list(path: Path) -> None:
    """The rule, for the module at ``path`` (the course's tests hold its modules to it too)."""
    tree = ast.parse(path.read_text())
    listed = declared_all(tree)
    defined = public_definitions(tree, path.name == "__init__.py")
    if listed is None:
        assert not defined, f"{path.name} has no __all__ but defines {sorted(defined)}"
        return
    assert len(listed) == len(set(listed)), f"names listed twice: {sorted(listed)}"
    assert set(listed) - defined == set(), "listed in __all__, not defined here"
    assert defined - set(listed) == set(), "defined here, missing from __all__"


@pytest.mark.parametrize("path", [_module_param(p) for p in MODULES])
def test_all_lists_exactly_the_public_definitions(path: Path) -> None:
    check_all_list(path)


def test_the_rule_catches_an_omission_and_a_stray_name() -> None:
    """The check can fail: an unlisted function and a listed name nobody defines."""
    tree = ast.parse('__all__ = ["a", "ghost"]\ndef a(): ...\ndef b(): ...\n_c = 1\n')
    assert public_definitions(tree, False) == {"a", "b"}
    assert set(declared_all(tree)) == {"a", "ghost"}
    guarded = ast.parse("try:\n    import q\n    W = 1\nexcept ImportError:\n    W = 0\n")
    assert public_definitions(guarded, False) == {"W"}  # assigned in a top-level try
    script = ast.parse('def main(): ...\nif __name__ == "__main__":\n    size = main()\n')
    assert public_definitions(script, False) == {"main"}  # a script's locals are not exports
    package = ast.parse("from .sub import x\nfrom numpy import y\nfrom numpy import z as z\n")
    assert public_definitions(package, True) == {"x", "z"}
    assert public_definitions(package, False) == {"z"}
