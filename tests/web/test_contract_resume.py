"""Client tests: reload and network loss mid-run, on the contract server, which can cut streams at will.

Dropped connections, expired cursors (410), a run that ends while the browser is offline: the contract
server produces these exactly, at a chosen event, which the real server does only by accident. Reloading
mid-run on the real `toolwire serve` is tested in test_e2e_chats.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from .contract_server import ContractServer
from .pages import WebPage
from .sequences import load

Open = Callable[..., WebPage]
ANSWER = "Rome is 22 °C; Cairo is 33 °C."


@pytest.fixture
def server() -> Iterator[ContractServer]:
    with ContractServer() as running:
        yield running


def assert_whole_conversation(page: WebPage, *, followed: bool = True) -> None:
    """The finished chat: every message once, both cards once, the answer once.

    `followed`: the page saw the run's end live (it then shows the run's usage); otherwise the run
    finished while the page was reloading its history and shows as stored rows.
    """
    if followed:
        page.expect_run_status("run-r2", "completed")
    else:
        expect(page.page.locator(".stored")).to_have_count(3)
        expect(page.page.locator(".run")).to_have_count(0)
    expect(page.page.locator(".user-message")).to_have_count(2)
    expect(page.page.locator(".tool-card")).to_have_count(2)
    expect(page.page.locator(".tools-aggregate")).to_have_count(1)
    page.expect_status("call_rome", "done")
    page.expect_status("call_cairo", "done")
    expect(page.page.locator(".md", has_text="Rome is 22")).to_have_text(ANSWER)
    text = page.conversation_text()
    for once in ("Hello", "Hi! How can I help?", "Weather in Rome and Cairo?", "Checking both.", ANSWER):
        assert text.count(once) == 1, (once, text)


def wait_for(get: Callable[[], list[Any]], count: int, timeout: float = 5.0) -> list[Any]:
    """Poll until `get()` holds `count` items (requests the page makes on its own)."""
    deadline = time.monotonic() + timeout
    while len(found := get()) < count:
        assert time.monotonic() < deadline, f"only {len(found)} of {count}: {found}"
        time.sleep(0.02)
    return found


def resume_chat(server: ContractServer) -> dict[str, Any]:
    seq = load("resume_mid_run")
    chat_id = seq["chat"]["id"]
    server.add_chat(seq["chat"], rows=seq["history"])
    server.script(chat_id, seq["frames"])
    return seq


def held_mid_run(server: ContractServer, web: Open, at: str) -> tuple[dict[str, Any], WebPage, list[dict[str, Any]]]:
    """The page sent the message and drew the run up to the sequence's `at` point (reload_after / drop_after)."""
    seq = resume_chat(server)
    chat_id = seq["chat"]["id"]
    page = web(server.url, token=server.token, chat=chat_id)
    page.send("Weather in Rome and Cairo?")
    server.wait_for_run(chat_id)
    frames = server.release(chat_id, seq[at] - 1)
    page.expect_drawn(frames[-1]["id"])
    return seq, page, frames


def test_reload_mid_run_replays_the_run_once_and_follows_it_to_the_end(server: ContractServer, web: Open) -> None:
    seq, page, frames = held_mid_run(server, web, "reload_after")
    chat_id = seq["chat"]["id"]
    page.reload()
    # After the reload: the stored rows, then the run replayed from its first event (no cursor).
    page.expect_drawn(frames[-1]["id"])
    streams = server.requests_to("GET", f"/api/chats/{chat_id}/stream")
    assert streams and "Last-Event-ID" not in streams[-1].headers
    expect(page.page.locator(".tool-card")).to_have_count(2)
    expect(page.page.locator(".user-message")).to_have_count(2)
    expect(page.page.locator("#stop")).to_be_visible()
    server.release(chat_id, 2)  # step 1 starts streaming its text
    expect(page.page.locator(".md", has_text="Rome is 22")).to_have_text("Rome is 22 °C;")
    server.release(chat_id)
    assert_whole_conversation(page)


def test_a_dropped_connection_resumes_after_the_last_event(server: ContractServer, web: Open) -> None:
    seq, page, frames = held_mid_run(server, web, "drop_after")
    chat_id = seq["chat"]["id"]
    last = frames[-1]["id"]
    server.drop_streams(chat_id)
    # The page asks again from where it was; while it waits, the run goes on server-side.
    server.release(chat_id, 1)
    server.release(chat_id)
    assert_whole_conversation(page)
    resumed = server.requests_to("GET", f"/api/chats/{chat_id}/stream")
    assert [r.headers.get("Last-Event-ID") for r in resumed] == [last]
    posts = server.requests_to("POST", f"/api/chats/{chat_id}/messages")
    assert len(posts) == 1, "the message is not sent twice"


def test_an_expired_cursor_reloads_the_history(server: ContractServer, web: Open) -> None:
    seq, page, frames = held_mid_run(server, web, "drop_after")
    chat_id = seq["chat"]["id"]
    server.expire_before(chat_id, "9-1")
    server.drop_streams(chat_id)
    server.release(chat_id)
    assert_whole_conversation(page, followed=False)
    streams = server.requests_to("GET", f"/api/chats/{chat_id}/stream")
    assert streams[0].headers.get("Last-Event-ID") == frames[-1]["id"]
    assert len(server.requests_to("GET", f"/api/chats/{chat_id}/messages")) == 2, "the history is loaded again"


def test_a_reload_the_server_cannot_answer_yet_is_asked_again(server: ContractServer, web: Open) -> None:
    """The page emptied itself to load the chat again (410), and the server answers 503 for a moment (restarting):
    it asks again after a pause, as it does for a stream, instead of leaving the conversation blank."""
    seq, page, frames = held_mid_run(server, web, "drop_after")
    chat_id = seq["chat"]["id"]
    server.expire_before(chat_id, "9-1")
    server.refuse_next("GET", f"/api/chats/{chat_id}/messages", 2)
    server.drop_streams(chat_id)
    wait_for(lambda: server.requests_to("GET", f"/api/chats/{chat_id}/messages"), 4, timeout=15)
    page.expect_drawn(frames[-1]["id"])  # back where it was, from the run's first event
    server.release(chat_id)
    assert_whole_conversation(page)
    expect(page.page.locator(".notice")).to_have_count(0)


def test_an_expired_cursor_mid_run_replays_the_run(server: ContractServer, web: Open) -> None:
    seq, page, frames = held_mid_run(server, web, "drop_after")
    chat_id = seq["chat"]["id"]
    server.expire_before(chat_id, "9-1")
    server.drop_streams(chat_id)
    streams = wait_for(lambda: server.requests_to("GET", f"/api/chats/{chat_id}/stream"), 2)
    page.expect_drawn(frames[-1]["id"])  # back where it was, from the run's first event
    assert [s.headers.get("Last-Event-ID") for s in streams] == [frames[-1]["id"], None]
    server.release(chat_id)
    assert_whole_conversation(page)


def test_a_run_that_ended_while_the_page_was_away_shows_its_stored_rows(server: ContractServer, web: Open) -> None:
    seq, page, _ = held_mid_run(server, web, "drop_after")
    chat_id = seq["chat"]["id"]
    page.page.context.set_offline(True)
    server.drop_streams(chat_id)
    server.release(chat_id)  # the run finishes while the page cannot reach the server
    expect(page.page.locator("#connection")).to_have_text("Reconnecting…")
    page.page.context.set_offline(False)
    assert_whole_conversation(page)
    expect(page.page.locator("#connection")).to_have_text("")


def test_opening_a_chat_whose_run_is_active_follows_it(server: ContractServer, web: Open) -> None:
    seq = resume_chat(server)
    chat_id = seq["chat"]["id"]
    server.start_run(chat_id)  # started elsewhere (another tab)
    server.release(chat_id, 6)
    page = web(server.url, token=server.token, chat=chat_id)
    page.expect_drawn(seq["frames"][6]["id"])
    expect(page.page.locator(".tool-card")).to_have_count(1)
    server.release(chat_id)
    assert_whole_conversation(page)
