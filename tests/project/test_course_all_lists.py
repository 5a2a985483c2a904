"""The course's modules hold to the library's rule: each ``__all__`` lists exactly the
module's public definitions (the rule and its own test: lib/tests/test_all_lists.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_all_lists import check_all_list

PACKAGE = Path(__file__).resolve().parents[2] / "attention_course"


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_all_lists_exactly_the_public_definitions(path: Path) -> None:
    check_all_list(path)
