"""Headless Chromium for the report tests: Debian's /usr/bin/chromium driven by playwright.

Playwright's own browser download cannot work on an offline machine, so the system
browser is launched by path, with the flags that keep it from opening connections of its
own (component updates, background networking). `make test` installs both.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync",
         "--disable-default-apps", "--metrics-recording-only"]


def require_browser() -> None:
    """Skip without chromium or playwright, except in CI (CI=true), where it fails."""
    missing = [what for what, ok in (("chromium (apt-get install chromium)", CHROMIUM.exists()),
                                     ("playwright (pip install playwright)", _has_playwright()))
               if not ok]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"missing {', '.join(missing)}: `make test` installs them")
        pytest.skip(f"missing {', '.join(missing)}")


def _has_playwright() -> bool:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class PageLog:
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@contextmanager
def open_page(html: Path, width: int = 1100) -> Iterator[tuple[Any, PageLog]]:
    """The report open in headless Chromium, with every console error and request logged."""
    from playwright.sync_api import sync_playwright

    log = PageLog()
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                profile, executable_path=str(CHROMIUM), args=FLAGS, headless=True,
                viewport={"width": width, "height": 900}, offline=True)
            page = context.new_page()
            page.on("console", lambda m: log.console_errors.append(m.text)
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: log.console_errors.append(str(e)))
            page.on("request", lambda r: log.requests.append(r.url))
            page.goto(html.resolve().as_uri(), wait_until="load")
            try:
                yield page, log
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
