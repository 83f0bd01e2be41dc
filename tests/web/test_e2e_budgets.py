"""End to end: a user whose token budget is used up reads why, and until when, on the page (Chromium, the real
`toolwire serve` with `--daily-output-tokens`)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.databases import sqlite_url
from tests.server.support import TOKENS, GateServer, ServerProcess
from toolwire.testing.fake import FakeText, FakeTurn, FakeUsage

from .e2e import Open, api, new_chat


@pytest.fixture
def budgeted(gate: GateServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("toolwire-budgets")
    process = ServerProcess(db_url=sqlite_url(folder), gate_url=gate.url, folder=folder,
                            args=["--daily-output-tokens", "100"])
    process.start()
    yield process
    process.stop()


def test_a_used_up_budget_is_a_sentence_on_the_page(budgeted: ServerProcess, gate: GateServer, web: Open) -> None:
    gate.script("spend", FakeTurn(parts=[FakeText(text="A long answer.")],
                                  usage=FakeUsage(input_tokens=10, output_tokens=120)))
    refused = gate.script("refused", FakeTurn(parts=[FakeText(text="Never sent.")]))
    chat_id = new_chat(budgeted, "Budget")
    page = web(budgeted.url + "/", token=TOKENS["alice"], chat=chat_id)
    page.send("[[spend]] tell me everything")
    page.expect_last_run_status("completed")

    page.send("[[refused]] and more")
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d")
    notice = page.page.locator(".notice")
    expect(notice).to_contain_text("You have used today's output token budget (120 of 100 tokens); it resets at "
                                   f"{tomorrow} 00:00 UTC, in ", timeout=10_000)
    expect(notice).to_contain_text("Send your message again then.")
    # The page does not sit waiting hours to send it again; nothing reached the model or the store.
    expect(page.page.locator(".user-message")).to_have_count(1)
    assert refused.requests == 0
    with api(budgeted) as client:
        assert len(client.get(f"/api/chats/{chat_id}/messages").json()["messages"]) == 2
