"""End to end: a run the server was killed in the middle of, continued by the restarted server, in Chromium.

One `toolwire serve` on SQLite is SIGKILLed while the model streams a step's text, and started again on the
same database and port: it continues the run (docs/guides/durable-runs.md). The page, left open, reconnects
on its own; it must say that the run was resumed, drop the text of the cut-off attempt (not show it next to
the new one) and show the answer the restarted server finishes.
"""

from __future__ import annotations

import socket
from pathlib import Path

from playwright.sync_api import expect

from tests.databases import sqlite_url
from tests.server.support import GateServer, ServerProcess, text

from .e2e import Open, open_chat, release_frame, wait

CUT = ["The first attempt, ", "cut off ", "by the crash ", "and never finished."]
AGAIN = ["The second attempt, ", "whole."]


def free_port() -> int:
    """A loopback port free now: the restarted server listens where the page knows the first one did."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_page_follows_a_run_the_restarted_server_continues(gate: GateServer, web: Open, tmp_path: Path,
                                                               screenshots: Path) -> None:
    server = ServerProcess(db_url=sqlite_url(tmp_path), gate_url=gate.url, folder=tmp_path,
                           args=["--port", str(free_port())], lease_seconds=1.0)
    script = gate.script("resumed", text("".join(CUT), chunks=CUT), text("".join(AGAIN), chunks=AGAIN), gated=True)
    server.start()
    try:
        _, page = open_chat(server, web, "Resumed")
        conversation = page.page.locator("#conversation")
        page.send("[[resumed]] tell me a story")
        release_frame(script)
        release_frame(script)
        expect(conversation).to_contain_text("The first attempt, cut off")

        server.kill()  # SIGKILL mid-answer: no shutdown, no handover
        expect(page.page.locator("#connection")).to_have_text("Reconnecting…")
        expect(conversation).to_contain_text("The first attempt, cut off")  # nothing is taken back unsaid
        server.start()  # the same database and port, a new process: it continues the run
        wait(lambda: script.requests == 2, "the step asked for again", timeout=30)

        # The page found the run again: it says so, and the cut-off text is gone before the new attempt streams.
        resumed = page.page.locator(".run").last.locator(".run-resumed")
        expect(resumed).to_have_text("Resumed after the server restarted.", timeout=30_000)
        expect(conversation).not_to_contain_text("The first attempt")
        expect(conversation).to_contain_text("tell me a story")  # the question stays above its answer
        page.screenshot(screenshots / "e2e-resumed.png")
        script.open()
        page.expect_last_run_status("completed", timeout=30_000)
        expect(page.page.locator(".md", has_text="The second attempt, whole.")).to_have_count(1)
        assert "The first attempt" not in page.conversation_text()
        assert page.conversation_text().count("The second attempt") == 1
        expect(page.page.locator(".run-resumed")).to_have_count(1)
        expect(conversation).to_contain_text("tell me a story")
        expect(page.page.locator("#connection")).to_have_text("")
    finally:
        script.open()  # the killed process's request at the gate may go
        server.stop()
