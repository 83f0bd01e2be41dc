"""End to end: a run whose server was killed in the middle of it, continued by the next server, in Chromium.

A `toolwire serve` is SIGKILLed while the model streams a step's text, and another starts on the same database and
port: it continues the run (docs/guides/durable-runs.md). The page, left open, reconnects on its own; it must say
that the run was resumed, drop the text of the cut-off attempt (never show it next to the new one), keep the
question above the answer, and show the answer the new server finishes. Two ways the page gets there:

- one server on SQLite, restarted: its events were in the memory of the killed process, so the page's cursor is
  refused (410), and the page loads the chat again and follows the run from `run_resumed`;
- replicas on PostgreSQL + Redis: the page's cursor holds (the log is shared), and the page replaces the cut-off
  text live when `run_resumed` arrives.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.databases import sqlite_url
from tests.scaleout.conftest import redis_url as redis_url, shared_db as shared_db
from tests.server.support import GateServer, Script, ServerProcess, text

from .e2e import Open, open_chat, release_frame, wait
from .pages import WebPage

CUT = ["The first attempt, ", "cut off ", "by the crash ", "and never finished."]
AGAIN = ["The second attempt, ", "whole."]
QUESTION = "[[resumed]] tell me a story"


def free_port() -> int:
    """A loopback port free now: the next server listens where the page knows the killed one did."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def script(gate: GateServer) -> Iterator[Script]:
    script = gate.script("resumed", text("".join(CUT), chunks=CUT), text("".join(AGAIN), chunks=AGAIN), gated=True)
    yield script
    script.open()  # the killed process's request at the gate may go


def killed_mid_answer(killed: ServerProcess, web: Open, script: Script) -> tuple[WebPage, list[str]]:
    """Open a chat on `killed`, send the question, and SIGKILL the server while the answer streams: the page, and
    the paths of the chat's stored rows the page asks for from then on."""
    chat_id, page = open_chat(killed, web, "Resumed")
    conversation = page.page.locator("#conversation")
    page.send(QUESTION)
    release_frame(script)
    release_frame(script)
    expect(conversation).to_contain_text("The first attempt, cut off")
    reloads: list[str] = []
    page.page.on("request", lambda request: reloads.append(request.url) if f"/api/chats/{chat_id}/messages" in
                 request.url and request.method == "GET" else None)
    killed.kill()  # SIGKILL mid-answer: no shutdown, no handover
    expect(page.page.locator("#connection")).to_have_text("Reconnecting…")
    expect(conversation).to_contain_text("The first attempt, cut off")  # nothing is taken back unsaid
    return page, reloads


def resumed_and_finished(page: WebPage, script: Script, screenshot: Path, reloads: list[str]) -> list[str]:
    """The page shows the continued run (held before its new attempt's text), then its answer; returns the rows'
    reloads the page had made by the time it showed the run resumed."""
    conversation = page.page.locator("#conversation")
    wait(lambda: script.requests == 2, "the step asked for again", timeout=30)
    resumed = page.page.locator(".run").last.locator(".run-resumed")
    expect(resumed).to_have_text("Resumed after the server restarted.", timeout=30_000)
    reloaded = list(reloads)
    expect(conversation).not_to_contain_text("The first attempt")  # gone before the new attempt streams
    expect(conversation).to_contain_text(QUESTION.removeprefix("[[resumed]] "))  # the question stays
    page.screenshot(screenshot)
    script.open()
    page.expect_last_run_status("completed", timeout=30_000)
    expect(page.page.locator(".md", has_text="The second attempt, whole.")).to_have_count(1)
    shown = page.conversation_text()
    assert "The first attempt" not in shown and shown.count("The second attempt") == 1, shown
    assert shown.count("tell me a story") == 1, shown
    expect(page.page.locator(".run-resumed")).to_have_count(1)
    expect(page.page.locator("#connection")).to_have_text("")
    return reloaded


def test_one_server_restarted_on_sqlite_the_page_follows_the_run_it_continues(
        gate: GateServer, script: Script, web: Open, tmp_path: Path, screenshots: Path) -> None:
    server = ServerProcess(db_url=sqlite_url(tmp_path), gate_url=gate.url, folder=tmp_path,
                           args=["--port", str(free_port())], lease_seconds=1.0)
    server.start()
    try:
        page, reloads = killed_mid_answer(server, web, script)
        server.start()  # the same database and port, a new process: it continues the run
        reloaded = resumed_and_finished(page, script, screenshots / "e2e-resumed.png", reloads)
        assert reloaded, "the cursor from before the restart was refused: the page loaded the chat again"
    finally:
        server.stop()


def test_a_replica_continuing_the_run_the_page_replaces_the_cut_off_text_live(
        gate: GateServer, script: Script, web: Open, tmp_path: Path, shared_db: str, redis_url: str,
        screenshots: Path) -> None:
    port = ["--port", str(free_port()), "--redis", redis_url]
    replicas = [ServerProcess(db_url=shared_db, gate_url=gate.url, folder=tmp_path / name, args=port, lease_seconds=1.0)
                for name in ("a", "b")]
    for replica in replicas:
        replica.folder.mkdir()
    a, b = replicas
    a.start()
    try:
        page, reloads = killed_mid_answer(a, web, script)
        b.start()  # another replica where A was: the page's cursor holds, the shared log has the run
        reloaded = resumed_and_finished(page, script, screenshots / "e2e-resumed-replica.png", reloads)
        # The page followed on with its cursor: the cut-off text was replaced by the live stream, not by a reload.
        assert reloaded == []
    finally:
        for replica in replicas:
            replica.stop()
