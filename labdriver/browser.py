"""The browser: Debian's Chromium, launched by Playwright through ``executable_path``.

Nothing is downloaded: Playwright drives the system's ``/usr/bin/chromium``
with the flags this closed network needs. `chromium_missing` says why the
browser cannot run here (the tests skip with it, and fail under CI).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "INSTALL_HINT",
    "PlaywrightTimeout",
    "chromium_browser",
    "chromium_missing",
    "launch_chromium",
]

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium keeps trying (and failing) to
# reach Google's services on this closed network.
CHROMIUM_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
INSTALL_HINT = "install Debian's Chromium: `apt-get install chromium` (as root)"


def chromium_missing() -> str | None:
    """Why the browser cannot run here (None when it can)."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} not found; {INSTALL_HINT}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:  # pragma: no cover - playwright is a pinned dev dependency
        return "the playwright package is missing; run `make` to install the dev dependencies"
    return None


def launch_chromium(playwright: Any) -> Any:
    """Debian's Chromium through Playwright (nothing is downloaded)."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=list(CHROMIUM_ARGS)
    )


@contextlib.contextmanager
def chromium_browser() -> Iterator[Any]:
    """Playwright's Chromium (Debian's, see `launch_chromium`), closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            yield browser
        finally:
            browser.close()


# Playwright's TimeoutError, imported lazily: this module is imported without playwright
# installed (to say how to install it).
try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # pragma: no cover - playwright is a pinned dev dependency
    PlaywrightTimeout = TimeoutError  # type: ignore[misc,assignment]
