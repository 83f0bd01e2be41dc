"""Browser test setup: Debian's chromium driven by Playwright, one browser for the web tests.

Playwright cannot download its own browser here, so it launches the system `chromium`
(`scripts/test-browser` installs it). Without it, or without `node` for the unit tests, the tests
skip saying why; under `CI=true` they fail instead, because CI must run them.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.databases import sqlite_url
from tests.server.support import TOKENS, GateServer, ServerProcess

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


CSP_META = re.compile(r'<meta http-equiv="Content-Security-Policy"[^>]*>\s*')


def _without_csp(route: Any) -> None:
    response = route.fetch()
    page = response.text()
    assert CSP_META.search(page), "the page ships a Content-Security-Policy"
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-security-policy"}
    route.fulfill(response=response, body=CSP_META.sub("", page), headers=headers)


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
                  height: int = 860, dark: bool = False, strip_csp: bool = False) -> WebPage:
        context = browser.new_context(viewport={"width": width, "height": height},
                                      color_scheme="dark" if dark else "light", service_workers="block")
        if strip_csp:  # the page without its Content-Security-Policy: the renderer alone must be safe
            context.route(lambda url: urlsplit(url).path in ("/", "/index.html"), _without_csp)
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


# ---- the real server: `toolwire serve` in a subprocess, its model and tools held by the test's gate


@pytest.fixture(scope="package")
def gate() -> Iterator[GateServer]:
    """The model provider and tool gates of tests/server (see tests/server/support.py), one for the package."""
    server = GateServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="package")
def served(gate: GateServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One `python -m toolwire serve` on SQLite for the end-to-end tests (each test has chats of its own).

    Its model is the gate (`[[tag]]` in a message picks the test's script); its tools are the gated tools
    of tests/server and `tests.web.e2e_tools`. PostgreSQL is left to the server's own tests: the page
    cannot tell the databases apart.
    """
    folder = tmp_path_factory.mktemp("toolwire-serve")
    process = ServerProcess(db_url=sqlite_url(folder), gate_url=gate.url, folder=folder,
                            # One server for the whole session's chats: its write quota is not what is tested.
                            args=["--tools", "tests.web.e2e_tools:TOOLS", "--writes-per-minute", "100000"])
    process.start()
    yield process
    process.stop()


@pytest.fixture
def alice_token() -> str:
    return TOKENS["alice"]
