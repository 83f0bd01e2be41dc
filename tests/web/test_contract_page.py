"""Client tests: the page around the conversation (token, chat list, message box, screens) on the contract server.

The contract server (contract_server.py) records every request, so these tests assert what the page
sends: the token's header, the message body, the title it gives a new chat. The same behaviours on the
real `toolwire serve` are in test_e2e_*.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .contract_server import ContractServer
from .pages import WebPage
from .sequences import load

Open = Callable[..., WebPage]


@pytest.fixture
def server() -> Iterator[ContractServer]:
    with ContractServer() as running:
        yield running


def test_the_token_moves_from_the_address_into_storage(server: ContractServer, web: Open) -> None:
    page = web(server.url, token=server.token)
    expect(page.page.locator("#app")).to_be_visible()
    assert "token" not in page.page.url
    assert page.page.evaluate("localStorage.getItem('toolwire.token')") == server.token
    [listing] = server.requests_to("GET", "/api/chats")
    assert listing.headers["Authorization"] == f"Bearer {server.token}"
    page.reload()  # the stored token is used from now on
    expect(page.page.locator("#app")).to_be_visible()
    assert len(server.requests_to("GET", "/api/chats")) == 2


def test_a_refused_token_asks_for_another(server: ContractServer, web: Open) -> None:
    page = web(server.url, token="wrong")
    expect(page.page.locator("#login")).to_be_visible()
    expect(page.page.locator("#login-message")).to_contain_text("The access token was not accepted.")
    assert page.page.evaluate("localStorage.getItem('toolwire.token')") is None
    page.page.locator("#login-token").fill(server.token)
    page.page.locator("#login-token").press("Enter")
    expect(page.page.locator("#app")).to_be_visible()
    expect(page.page.locator("#list-message")).to_have_text("No chats yet.")


def test_without_a_token_the_page_says_where_to_get_one(server: ContractServer, web: Open) -> None:
    page = web(server.url)
    expect(page.page.locator("#login-message")).to_contain_text("toolwire serve")
    assert server.requests_to("GET", "/api/chats") == []


def test_new_open_and_delete_chats(server: ContractServer, web: Open) -> None:
    seq = load("parallel_out_of_order")
    server.add_chat(seq["chat"], rows=[f["data"]["row"] for f in seq["frames"] if f["data"]["type"] == "message_saved"])
    page = web(server.url, token=server.token)
    expect(page.page.locator(".chat-link")).to_have_text(["Weather in three cities"])
    page.open_chat("chat-weather")
    expect(page.page.locator("#chat-title")).to_have_text("Weather in three cities")
    expect(page.page.locator(".stored .tool-card")).to_have_count(3)  # the stored aggregate
    expect(page.page.locator(".stored .md table")).to_have_count(1)
    # "New chat" makes no chat: the empty page, ready for a first message (which makes it).
    page.page.get_by_role("button", name="New chat").click()
    expect(page.page.locator("#empty")).to_be_visible()
    expect(page.page.locator("#message")).to_be_focused()
    expect(page.page.locator(".chat-link")).to_have_count(1)
    expect(page.page.locator('.chat-link[aria-current="page"]')).to_have_count(0)
    assert server.requests_to("POST", "/api/chats") == []
    assert "#chat=" not in page.page.url
    # Keep: nothing is deleted.
    page.page.locator('.chat-item[data-chat-id="chat-weather"] .delete').click()
    page.page.get_by_role("button", name="Keep").click()
    expect(page.page.locator(".chat-link")).to_have_count(1)
    page.open_chat("chat-weather")
    page.page.locator('.chat-item[data-chat-id="chat-weather"] .delete').click()
    page.page.get_by_role("button", name="Delete Weather in three cities for good").click()
    expect(page.page.locator(".chat-link")).to_have_count(0)
    assert len(server.requests_to("DELETE", "/api/chats/chat-weather")) == 1
    expect(page.page.locator("#empty")).to_be_visible()


def test_enter_sends_and_shift_enter_breaks_the_line(server: ContractServer, web: Open) -> None:
    seq = load("provider_error")
    server.add_chat(seq["chat"])
    server.script(seq["chat"]["id"], seq["frames"])
    page = web(server.url, token=server.token, chat=seq["chat"]["id"])
    box = page.page.locator("#message")
    box.press_sequentially("first line")
    box.press("Shift+Enter")
    box.press_sequentially("second line")
    assert server.requests_to("POST", "/api/chats/chat-error/messages") == []
    box.press("Enter")
    server.wait_for_run(seq["chat"]["id"])
    [post] = server.requests_to("POST", "/api/chats/chat-error/messages")
    assert post.body["text"] == "first line\nsecond line"
    assert post.body["on_disconnect"] == "continue"
    assert len(post.body["client_message_id"]) >= 16
    expect(box).to_have_value("")


def test_typing_into_an_empty_page_starts_a_chat_and_a_refused_message_is_given_back(server: ContractServer, web: Open) -> None:
    page = web(server.url, token=server.token)
    expect(page.page.locator("#empty")).to_be_visible()
    page.send("Plan a trip to Lisbon\nwith details")
    expect(page.page.locator('.chat-link[aria-current="page"]')).to_have_text("Plan a trip to Lisbon")
    [created] = server.requests_to("POST", "/api/chats")
    assert created.body == {"title": "Plan a trip to Lisbon"}
    # No run was scripted for the new chat, so the server refuses the message: the text comes back.
    expect(page.page.locator(".notice")).to_contain_text("The test scripted no run for chat 'new-1'.")
    expect(page.page.locator("#message")).to_have_value("Plan a trip to Lisbon\nwith details")
    expect(page.page.locator(".user-message")).to_have_count(0)


def test_narrow_screen_and_dark_mode(server: ContractServer, web: Open, screenshots: Path) -> None:
    seq = load("parallel_out_of_order")
    chat_id = seq["chat"]["id"]
    server.add_chat(seq["chat"])
    server.script(chat_id, seq["frames"])
    page = web(server.url, token=server.token, chat=chat_id, width=390, height=844, dark=True)
    sidebar_hidden = "document.getElementById('sidebar').getBoundingClientRect().right <= 0"
    sidebar_shown = "document.getElementById('sidebar').getBoundingClientRect().left >= 0"
    page.wait_until(sidebar_hidden)
    page.send("What's the weather in Paris, Tokyo and Lima?")
    server.wait_for_run(chat_id)
    server.release(chat_id, until=lambda f: f["data"]["type"] == "tool_result")
    page.expect_status("call_tokyo", "done")
    background = page.page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(21, 23, 27)", background
    cards = page.page.locator(".tool-card")
    boxes = [cards.nth(i).bounding_box() for i in range(3)]
    assert all(b is not None and b["x"] >= 0 and b["x"] + b["width"] <= 390 for b in boxes), boxes
    assert page.page.evaluate("document.documentElement.scrollWidth") <= 390, "nothing scrolls sideways"
    page.screenshot(screenshots / "contract-narrow.png")
    page.page.get_by_role("button", name="Show chats").click()
    page.wait_until(sidebar_shown)
    page.open_chat(chat_id)
    page.wait_until(sidebar_hidden)
    server.release(chat_id)
    page.expect_run_status("run-w1", "completed")
