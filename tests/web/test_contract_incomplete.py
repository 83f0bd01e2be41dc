"""Text a provider cut off mid-answer stays on the page, said to be incomplete, live and from stored rows."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from .contract_server import ContractServer
from .e2e import Open
from .test_contract_streaming import started

NOTE = "Incomplete: the answer stopped here."


@pytest.fixture
def server() -> Iterator[ContractServer]:
    with ContractServer() as running:
        yield running


def test_text_cut_off_by_the_provider_stays_marked_incomplete(server: ContractServer, web: Open) -> None:
    seq, page = started(server, web, "provider_error")
    server.release(seq["chat"]["id"])
    page.expect_run_status("run-e1", "failed")
    block = page.page.locator(".text-block").first
    expect(block.locator(".md")).to_have_text("The report covers three areas")
    expect(block).to_have_class("text-block incomplete")
    expect(block.locator(".incomplete-note")).to_have_text(NOTE)
    expect(block.locator(".incomplete-note")).to_be_visible()


def test_a_whole_answer_is_not_marked(server: ContractServer, web: Open) -> None:
    seq, page = started(server, web, "parallel_out_of_order")
    server.release(seq["chat"]["id"])
    page.expect_run_status("run-w1", "completed")
    expect(page.page.locator(".text-block").last.locator(".md")).not_to_be_empty()
    expect(page.page.locator(".incomplete-note:visible")).to_have_count(0)


def test_a_stored_incomplete_message_is_marked_after_a_reload(server: ContractServer, web: Open) -> None:
    chat = {"id": "chat-cut", "title": "Cut", "created_at": "2025-06-01T10:00:00Z",
            "updated_at": "2025-06-01T10:00:00Z", "active_run": None, "paused": None}
    cut = {"role": "assistant", "metadata": {"incomplete": True},
           "parts": [{"type": "text", "text": "Checking the weather in"}]}
    whole = {"role": "assistant", "parts": [{"type": "text", "text": "Here it is."}]}
    rows = [
        {"id": "row-1", "chat_id": "chat-cut", "kind": "user", "run_id": "run-1", "sequence_number": 1,
         "created_at": "2025-06-01T10:00:00Z", "messages": [{"role": "user", "parts": [{"type": "text", "text": "Weather?"}]}]},
        {"id": "row-2", "chat_id": "chat-cut", "kind": "assistant", "run_id": "run-1", "sequence_number": 2,
         "created_at": "2025-06-01T10:00:01Z", "messages": [cut]},
        {"id": "row-3", "chat_id": "chat-cut", "kind": "assistant", "run_id": "run-1", "sequence_number": 3,
         "created_at": "2025-06-01T10:00:02Z", "messages": [whole]},
    ]
    server.add_chat(chat, rows=rows)
    page = web(server.url, token=server.token, chat="chat-cut")
    blocks = page.page.locator(".text-block")
    expect(blocks).to_have_count(2)
    expect(blocks.nth(0)).to_have_class("text-block incomplete")
    expect(blocks.nth(0).locator(".incomplete-note")).to_be_visible()
    expect(blocks.nth(1)).to_have_class("text-block")
    expect(blocks.nth(1).locator(".incomplete-note")).to_be_hidden()
