"""What the page does so that opening a chat with a long answer stays fast (figures: bench/page_markdown.py).

The Markdown parser runs about twice as slow the first time the page uses it (its code is compiled
lazily and runs slowly until the engine has seen it run), so the page runs it on a small sample while its
first requests are out. These tests count the parser's calls through a copy of markdown.js that records
them (served by the browser's routing), so they assert what the page does, not how fast a loaded machine is.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from bench.page_markdown import CASES, answer
from playwright.sync_api import expect

from .conftest import ROOT, chromium_path, require
from .contract_server import ContractServer

IMPORT = 'import { lowlight, normalizeUri, parseMarkdownTree } from "./vendor/markdown-libs.js";'
COUNTING = (
    'import { lowlight, normalizeUri, parseMarkdownTree as parseTree } from "./vendor/markdown-libs.js";\n'
    "const parseMarkdownTree = (text) => {\n"
    "  (window.__parsed ??= []).push([text.length, document.querySelectorAll('.md').length]);\n"
    "  return parseTree(text);\n"
    "};\n"
)

CHAT = {"id": "chat-long", "title": "A long answer", "created_at": "2025-06-01T10:00:00Z",
        "updated_at": "2025-06-01T10:00:00Z", "active_run": None, "paused": None}


def rows(text: str) -> list[dict[str, Any]]:
    def row(n: int, kind: str, role: str, body: str) -> dict[str, Any]:
        return {"id": f"row-{n}", "chat_id": CHAT["id"], "kind": kind, "run_id": "run-1", "sequence_number": n,
                "created_at": "2025-06-01T10:00:00Z", "messages": [{"role": role, "parts": [{"type": "text", "text": body}]}]}
    return [row(1, "user", "user", "Explain the change."), row(2, "assistant", "assistant", text)]


@pytest.fixture
def server() -> Iterator[ContractServer]:
    with ContractServer() as running:
        yield running


def counting_markdown(route: Any) -> None:
    response = route.fetch()
    source = response.text()
    assert IMPORT in source, "markdown.js imports the parser as this test expects"
    route.fulfill(response=response, body=source.replace(IMPORT, COUNTING))


def test_the_parser_is_warmed_up_before_the_first_chat_arrives(server: ContractServer, browser: Any) -> None:
    text = answer(9000)
    server.add_chat(CHAT, rows=rows(text))
    server.chat_delay = 1.0  # the chat arrives a second after the page asked: the warm-up has had its chance
    context = browser.new_context(viewport={"width": 1280, "height": 860}, service_workers="block")
    try:
        context.route("**/static/markdown.js", counting_markdown)
        page = context.new_page()
        page.goto(f"{server.url}#token={server.token}&chat={CHAT['id']}")
        deadline = time.monotonic() + 10
        while not any(r.path == f"/api/chats/{CHAT['id']}" for r in server.requests):
            assert time.monotonic() < deadline, "the page never asked for the chat"
            time.sleep(0.02)
        expect(page.locator(".md h2").first).to_be_visible()
        parsed: list[list[int]] = page.evaluate("window.__parsed")
        # Before the answer was drawn (no .md on the page yet), the parser had already run, on a sample.
        before = [length for length, drawn in parsed if drawn == 0 and length < len(text)]
        assert before, f"the parser first ran on the answer itself: {parsed}"
        # The answer itself is parsed once, whole.
        assert [length for length, _ in parsed].count(len(text)) == 1, parsed
    finally:
        context.close()


def test_the_benchmark_runs() -> None:
    """The command docs/guides/web-page.md shows: one fresh page per case, a table of every case."""
    require("Chromium", chromium_path() is not None, "run scripts/test-browser (as root) to install Debian's chromium.")
    done = subprocess.run([sys.executable, "-m", "bench.page_markdown", "--pages", "1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "ms" not in line]
    cases = [row.split("|")[1].strip() for row in rows[1:]]
    assert cases == [name for name, *_ in CASES], done.stdout
    for row in rows[1:]:
        assert float(row.split("|")[2]) > 0, row
