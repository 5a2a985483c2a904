"""Accessibility in the page: axe-core's audit, JupyterLab's theme, what a screen reader gets.

- `audit` runs axe-core (the engine inside the browsers' own accessibility audits) in a
  Playwright page on the parts of it a test names, against WCAG 2.1 A and AA and axe's
  best practices (`AUDITED`), and returns an `Audit`: its violations by impact, `gating`
  (critical and serious, the ones a test fails on) and a `report` of the rest. axe-core is
  pinned in ``axe/package.json`` and installed there with npm (`AXE_INSTALL`);
  `axe_missing` says when it is not.
- `audit_scrolled`: the same on content inside a scrolling panel (JupyterLab's notebook),
  a view at a time: axe tests colour contrast only on what is on screen.
- `NOTEBOOK_CONTENT`: a notebook's own content in JupyterLab (rendered markdown and cell
  outputs), the scope of the course's audits: JupyterLab's chrome (menus, the file browser,
  cell editors and prompts) is JupyterLab's own, whose accessibility statement says it
  does not conform.
- `set_theme`: JupyterLab's light or dark theme, for the contrast checks in both.
- `accessible`: what a screen reader is given for each described picture (its ``alt``, its
  live region) and each widget slider (its name, its value text); `described`: a picture's,
  once it says what the kernel says after a move; and `focused`: where the keyboard's
  focus is.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from .sources import js

__all__ = [
    "AUDITED",
    "AXE",
    "AXE_INSTALL",
    "DARK",
    "GATING",
    "IMPACTS",
    "LIGHT",
    "NOTEBOOK_CONTENT",
    "WCAG_21_AA",
    "Audit",
    "accessible",
    "audit",
    "audit_scrolled",
    "axe_missing",
    "described",
    "focused",
    "set_theme",
]

AXE = Path(__file__).parent / "axe" / "node_modules" / "axe-core" / "axe.min.js"
#: installs axe-core at its pin (axe/package-lock.json) where `AXE` looks for it
AXE_INSTALL = "npm ci --prefix labdriver/axe"
#: axe's rule tags for WCAG 2.0 and 2.1, levels A and AA
WCAG_21_AA = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa")
#: what `audit` runs unless told: WCAG 2.1 AA and axe's best practices (landmarks, headings)
AUDITED = (*WCAG_21_AA, "best-practice")
#: axe's impacts, worst first; a test fails on the `GATING` ones and reports the others
IMPACTS = ("critical", "serious", "moderate", "minor")
GATING = IMPACTS[:2]
NOTEBOOK_CONTENT = (
    ".jp-NotebookPanel .jp-MarkdownCell .jp-MarkdownOutput",
    ".jp-NotebookPanel .jp-Cell .jp-OutputArea-output",
)
LIGHT = "JupyterLab Light"
DARK = "JupyterLab Dark"

_JS_RUN = js("axe_run")
_JS_SCAN = js("axe_scan")
_JS_ACCESSIBLE = js("accessible")
_JS_FOCUSED = js("focus")
_JS_THEME = """async (theme) => {
  await window.jupyterapp.commands.execute('apputils:change-theme', {theme});
}"""
_JS_THEME_SHOWN = """(theme) => document.body.dataset.jpThemeName === theme
  && getComputedStyle(document.body).getPropertyValue('--jp-layout-color0').trim() !== ''"""


def axe_missing() -> str | None:
    """Why axe-core cannot run here (None when it can)."""
    if AXE.exists():
        return None
    return f"{AXE} is missing: install axe-core at its pin with `{AXE_INSTALL}`"


@cache
def _axe_source() -> str:
    return AXE.read_text(encoding="utf-8")


@dataclass
class Audit:
    """axe-core's result on part of a page: its violations, each with its impact."""

    violations: list[dict] = field(default_factory=list)
    incomplete: list[dict] = field(default_factory=list)
    passes: int = 0

    def by_impact(self) -> dict[str, int]:
        """How many elements fail, by impact (critical, serious, moderate, minor)."""
        counts = Counter()
        for v in self.violations:
            counts[v["impact"]] += v["count"]
        return {impact: counts[impact] for impact in IMPACTS}

    def gating(self) -> list[dict]:
        """The violations a test fails on: critical and serious."""
        return [v for v in self.violations if v["impact"] in GATING]

    def report(self, impacts: tuple[str, ...] = IMPACTS) -> str:
        """One line per violation of those impacts (rule, impact, elements, help), each with
        its first elements and what fails there."""
        lines = []
        for v in self.violations:
            if v["impact"] not in impacts:
                continue
            lines.append(f"{v['id']} ({v['impact']}, {v['count']} elements): {v['help']}")
            for node in v["nodes"][:3]:
                lines.append(f"    {node['target']}: {node['html'][:160]}")
                summary = " ".join(node["summary"].split())
                if summary:
                    lines.append(f"      {summary[:300]}")
        return "\n".join(lines)


def audit(
    page: Any,
    include: tuple[str, ...] | None = None,
    exclude: tuple[str, ...] = (),
    rules: tuple[str, ...] | None = None,
    tags: tuple[str, ...] = AUDITED,
) -> Audit:
    """axe-core on ``page`` (a Playwright page, or a `NotebookPage`): the elements matching
    ``include`` (selectors; None: the whole document) less those in ``exclude``, with only
    ``rules`` (rule ids) if given, else every rule tagged with one of ``tags``."""
    page = getattr(page, "page", page)
    _load_axe(page)
    context: dict[str, Any] = {"exclude": [[s] for s in exclude]}
    if include is not None:
        present = [s for s in include if page.locator(s).count()]
        context["include"] = [[s] for s in present]
        if not present:
            return Audit()
    found = page.evaluate(_JS_RUN, [context, _options(rules, tags)])
    return Audit(found["violations"], found["incomplete"], found["passes"])


def audit_scrolled(
    page: Any,
    include: tuple[str, ...],
    rules: tuple[str, ...] | None = None,
    tags: tuple[str, ...] = AUDITED,
) -> Audit:
    """`audit` of the elements matching ``include`` inside a scrolling panel (JupyterLab's
    notebook), a view at a time (``axe_scan.js``): axe tests colour contrast only on what
    is on screen, and the panel clips the rest, which axe then leaves out unsaid."""
    page = getattr(page, "page", page)
    _load_axe(page)
    found = page.evaluate(_JS_SCAN, [list(include), _options(rules, tags)])
    return Audit(found["violations"], found["incomplete"], found["passes"])


def _load_axe(page: Any) -> None:
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=_axe_source())


def _options(rules: tuple[str, ...] | None, tags: tuple[str, ...]) -> dict[str, Any]:
    """axe's run options: only ``rules`` if given, else every rule tagged with ``tags``."""
    if rules:
        chosen = {"type": "rule", "values": list(rules)}
    else:
        chosen = {"type": "tag", "values": list(tags)}
    return {"resultTypes": ["violations", "incomplete"], "runOnly": chosen}


def set_theme(page: Any, theme: str, timeout_ms: float = 60_000) -> None:
    """Switch JupyterLab (exposed to the page: ``--LabApp.expose_app_in_browser``) to
    ``theme`` (`LIGHT`, `DARK`) and wait until its style sheet applies."""
    page = getattr(page, "page", page)
    page.evaluate(_JS_THEME, theme)
    page.wait_for_function(_JS_THEME_SHOWN, arg=theme, timeout=timeout_ms, polling=100)
    page.evaluate(  # the new colours painted
        "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
    )


def accessible(page: Any) -> dict:
    """What a screen reader is given for the course's described pictures and for every widget
    slider (``accessible.js``)."""
    return getattr(page, "page", page).evaluate(_JS_ACCESSIBLE)


def described(page: Any, box: int, says: set[str], timeout_ms: float = 5_000) -> dict:
    """Box ``box``'s picture as `accessible` gives it, once its ``alt`` and its live region
    both say one of ``says``, or as it is after ``timeout_ms``: the kernel sends a move's
    text alternative once the control has rested (``ALT_AFTER_MS``), after the frame."""
    page = getattr(page, "page", page)
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        picture = next(p for p in accessible(page)["pictures"] if p["box"] == box)
        if (picture["alt"] in says and picture["text"] == picture["alt"]) or (
            time.monotonic() > deadline
        ):
            return picture
        page.wait_for_timeout(50)


def focused(page: Any) -> dict:
    """The element with the keyboard's focus, and the explorer control it belongs to
    (``focus.js``)."""
    return getattr(page, "page", page).evaluate(_JS_FOCUSED)
