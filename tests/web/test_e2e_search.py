"""End to end: searching chats in the page, on the real server (SQLite's FTS5 index behind it)."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.server.support import TOKENS, GateServer, ServerProcess, text

from .e2e import Open, api, new_chat, open_chat


def test_search_finds_a_message_marks_the_words_and_opens_the_chat(served: ServerProcess, gate: GateServer,
                                                                    web: Open) -> None:
    gate.script("owl", text("The snowy owl hunts by day in the Arctic summer."))
    new_chat(served, "Groceries")
    chat_id, page = open_chat(served, web, "Birds")
    page.send("[[owl]] tell me about owls")
    page.expect_last_run_status("completed")
    new_chat(served, "Bob's owls", user="bob")  # another user's chat is never found

    box = page.page.locator("#search")
    box.fill("arctic OWL")
    hits = page.page.locator("#search-results .search-hit")
    expect(hits).to_have_count(1)
    expect(page.page.locator("#chat-list")).to_be_hidden()
    expect(hits.first.locator(".search-title")).to_have_text("Birds")
    expect(hits.first.locator(".search-snippet")).to_have_text("The snowy owl hunts by day in the Arctic summer.")
    expect(hits.first.locator("mark")).to_have_text(["owl", "Arctic"])
    expect(page.page.locator("#search-status")).to_have_text("1 chat found.")

    box.fill("arctic groceries")
    expect(page.page.locator("#search-status")).to_have_text("No chat has all of these words.")
    expect(hits).to_have_count(0)

    box.fill("groc")  # a title, by a prefix of its word
    expect(hits).to_have_count(1)
    expect(hits.first.locator(".search-title")).to_have_text("Groceries")

    box.fill("snowy")
    expect(hits.locator(".search-title")).to_have_text(["Birds"])
    hits.first.locator(".chat-link").click()
    expect(page.page.locator("#chat-title")).to_have_text("Birds")
    assert f"chat={chat_id}" in page.page.url

    box.press("Escape")  # the list is back
    expect(box).to_have_value("")
    expect(page.page.locator("#chat-list")).to_be_visible()
    expect(page.page.locator("#search-results")).to_be_hidden()


def test_more_results_follow_the_servers_cursor(served: ServerProcess, web: Open) -> None:
    ids = [new_chat(served, f"Heron sighting {i}") for i in range(23)]
    page = web(served.url + "/", token=TOKENS["alice"])
    page.page.locator("#search").fill("heron")
    hits = page.page.locator("#search-results .search-hit")
    expect(hits).to_have_count(20)
    page.page.get_by_role("button", name="More results").click()
    expect(hits).to_have_count(23)
    expect(page.page.get_by_role("button", name="More results")).to_have_count(0)
    hrefs = hits.locator(".chat-link").evaluate_all("(links) => links.map((a) => decodeURIComponent(a.hash))")
    assert hrefs == [f"#chat={i}" for i in reversed(ids)]
    with api(served) as client:
        assert client.get("/api/search", params={"q": "heron"}).json()["next_cursor"] == "20"
