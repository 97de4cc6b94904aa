"""Headless Chromium for page tests: Debian's (``/usr/bin/chromium``, or ``LAB_CHROMIUM``), driven by
Playwright, never a downloaded browser. Missing, it is a failure under ``CI=true`` and a skip elsewhere."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .servers import require

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM = os.environ.get("LAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    require(CHROMIUM if Path(CHROMIUM).exists() else None, f"chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(None, "the playwright package")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
