"""Browser test setup: Debian's chromium driven by Playwright, one browser for the web tests.

Playwright cannot download its own browser here, so it launches the system `chromium`
(`scripts/test-browser` installs it). Without it, or without `node` for the unit tests, the tests
skip saying why; under `CI=true` they fail instead, because CI must run them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .pages import WebPage

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "web-screenshots"
"""Where the tests save screenshots of the main states (not committed; /build is ignored)."""

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def require(what: str, found: bool, install: str) -> None:
    """Skip (locally) or fail (in CI) a test whose tool is missing."""
    if found:
        return
    message = f"{what} is not installed; {install}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def chromium_path() -> str | None:
    configured = os.environ.get("TOOLWIRE_CHROMIUM")
    if configured:
        return configured
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    path = chromium_path()
    require("Chromium", path is not None, "run scripts/test-browser (as root) to install Debian's chromium.")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require("Playwright for Python", False, "install the dev extra: pip install -e '.[dev]'.")
        raise
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


@pytest.fixture
def web(browser: Any) -> Iterator[Callable[..., WebPage]]:
    """Open the page in a fresh browser context: `web(base_url, token=..., width=..., height=..., dark=...)`.

    Every page opened is checked when the test ends: no uncaught script error, no dialog, nothing injected.
    """
    opened: list[WebPage] = []

    def open_page(base_url: str, *, token: str | None = None, chat: str | None = None, width: int = 1280,
                  height: int = 860, dark: bool = False) -> WebPage:
        context = browser.new_context(viewport={"width": width, "height": height},
                                      color_scheme="dark" if dark else "light", service_workers="block")
        page = WebPage(context, base_url)
        opened.append(page)
        page.goto(token=token, chat=chat)
        return page

    yield open_page
    problems = []
    for page in opened:
        problems.extend(page.problems())
        page.context.close()
    assert not problems, "\n".join(problems)
