"""The first minutes with `toolwire serve` and no arguments, in Chromium: the suggested prompts, and a tab
that stays signed in when the server restarts.

Each test starts the real command in a subprocess in a folder of its own (SQLite in `toolwire.db`, the
offline model, the demo tools), as a person does; a restart is the same command on the same port.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.server.test_serve_cli import clean_env, stop
from toolwire.demo_tools import SUGGESTIONS

from .e2e import Open

WEATHER, HOTEL, TABLE, NOTE = SUGGESTIONS


class Serve:
    """`toolwire serve` in `folder`, started and stopped by the test (on the same port after the first start)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.token = ""

    def start(self, *args: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "toolwire", "serve", "--port", str(self.port), *args],
                                        cwd=self.folder, env=clean_env(), stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        assert self.process.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(line.startswith("Open ") for line in lines):
            line = self.process.stdout.readline().decode()
            if not line and self.process.poll() is not None:
                break
            lines.append(line)
        found = next((m for line in lines if (m := re.fullmatch(r"Open (http://127\.0\.0\.1:(\d+)/)#token=(\S+)\n",
                                                                line))), None)
        assert found, lines
        self.url, port, self.token = found.group(1), int(found.group(2)), found.group(3)
        self.port = port

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            stop(self.process)
        self.process = None


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path)
    try:
        yield server
    finally:
        server.stop()


def test_the_suggested_prompts_show_approval_a_failing_tool_and_a_long_streamed_argument(
        serve: Serve, web: Open, screenshots: Path) -> None:
    serve.start()
    page = web(serve.url, token=serve.token)
    suggestions = page.page.locator("#suggestions button")
    expect(suggestions).to_have_text(list(SUGGESTIONS))
    page.screenshot(screenshots / "demo-suggestions.png")

    # A greeting: prose, no tools.
    page.send("Hello!")
    page.expect_last_run_status("completed")
    expect(page.page.locator(".md").last).to_contain_text("Hello! I am the offline demo model of toolwire")
    expect(page.page.locator(".tool-card")).to_have_count(0)

    # The hotel waits for approval; the decision stays said on the card, after a reload too.
    page.page.get_by_role("button", name="New chat").click()
    page.page.get_by_role("button", name=HOTEL).click()
    card = page.page.locator(".tool-card", has_text="book_hotel")
    expect(card).to_have_attribute("data-status", "awaiting_approval", timeout=15_000)
    expect(page.page.locator('.chat-link[aria-current="page"]')).to_have_text(HOTEL)
    card.get_by_role("button", name="Approve").click()
    expect(card).to_have_attribute("data-status", "done", timeout=15_000)
    page.expect_last_run_status("completed")
    expect(card.locator(".decided")).to_have_text("You approved this call.")
    expect(page.page.locator(".md").last).to_contain_text("Your room at")
    page.reload()
    stored = page.page.locator(".tool-card", has_text="book_hotel")
    expect(stored.locator(".decided")).to_have_text("You approved this call.")
    expect(stored).to_have_attribute("data-status", "done")

    # A tool that fails is explained in a sentence.
    page.page.get_by_role("button", name="New chat").click()
    page.page.get_by_role("button", name=TABLE).click()
    table = page.page.locator(".tool-card", has_text="book_table")
    expect(table).to_have_attribute("data-status", "error", timeout=15_000)
    page.expect_last_run_status("completed", timeout=15_000)
    expect(page.page.locator(".md").last).to_contain_text("I could not book the table at Cervejaria do Cais")

    # The note's long argument streams in, piece by piece, slowly enough to see.
    page.page.get_by_role("button", name="New chat").click()
    page.page.set_viewport_size({"width": 390, "height": 844})  # a phone
    expect(suggestions.first).to_be_visible()
    assert page.page.evaluate("document.documentElement.scrollWidth") <= 390
    page.page.get_by_role("button", name=NOTE).click()
    note = page.page.locator(".tool-card", has_text="save_note")
    expect(note).to_have_attribute("data-status", "done", timeout=30_000)
    page.expect_last_run_status("completed", timeout=15_000)
    call_id = note.get_attribute("data-call-id") or ""
    streamed = [text for text, status in page.arguments_log(call_id) if status == "streaming" and text]
    assert len(set(streamed)) >= 20, f"only {len(set(streamed))} partial argument texts were drawn"
    expect(page.page.locator(".md").last).to_contain_text("I saved the note Packing list for Lisbon (18 lines).")


def test_a_tab_stays_signed_in_across_a_restart_and_asks_for_a_token_once_it_is_refused(
        serve: Serve, web: Open) -> None:
    serve.start()
    token = serve.token
    page = web(serve.url, token=token)
    page.send("Hello!")
    page.expect_last_run_status("completed")
    expect(page.page.locator("#signed-in")).to_have_text("Signed in as local")

    serve.stop()
    serve.start()  # the same command again: the kept token
    assert serve.token == token
    page.send("Hello again!")  # the open tab, never reloaded
    # The second turn is drawn before its run's status is read: until then the last status is the first run's.
    expect(page.page.locator(".user-message")).to_have_count(2, timeout=15_000)
    expect(page.page.locator(".run")).to_have_count(2, timeout=15_000)
    page.expect_last_run_status("completed", timeout=15_000)
    expect(page.page.locator("#login")).to_be_hidden()
    page.reload()
    expect(page.page.locator("#signed-in")).to_have_text("Signed in as local")
    expect(page.page.locator(".user-message")).to_have_count(2)

    serve.stop()
    serve.start("--token", "another-token-0123456789abcdef")  # the old token is refused now
    login = page.page.locator("#login")
    expect(login).to_be_visible(timeout=15_000)  # the open chat's next look at the server
    expect(page.page.locator("#login-message")).to_contain_text("not valid")
    assert "could not be reached" not in (page.page.locator("body").inner_text())
    page.page.locator("#login-token").fill("another-token-0123456789abcdef")
    page.page.locator("#login-token").press("Enter")
    expect(page.page.locator("#signed-in")).to_have_text("Signed in as local")
