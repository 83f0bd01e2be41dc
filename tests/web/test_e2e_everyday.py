"""End to end, the everyday features: copy, rename, the tab's title, the theme, a refused send, the favicon.

The page in Chromium against the real `toolwire serve` with the gated fake model (tests/server/support.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import Route, expect

from tests.server.support import TOKENS, GateServer, ServerProcess, text

from .e2e import Open, api, open_chat

ANSWER = "Here is the snippet:\n\n```python\nprint('hello')\nx = 1\n```\n\nRun it with **python**."


def grant_clipboard(page: object, origin: str) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [1280, 390])
def test_copy_a_message_and_a_code_block(served: ServerProcess, gate: GateServer, web: Open, width: int) -> None:
    gate.script(f"copy-{width}", text(ANSWER))
    _, page = open_chat(served, web, "Copying", width=width)
    grant_clipboard(page, served.url)
    page.send(f"[[copy-{width}]] show me a snippet")
    page.expect_last_run_status("completed")
    clipboard = "navigator.clipboard.readText()"

    code = page.page.locator(".md .code-block")
    expect(code).to_have_count(1)
    code.get_by_role("button", name="Copy code").click()
    assert page.page.evaluate(clipboard) == "print('hello')\nx = 1"
    expect(code.locator("button.copy")).to_have_attribute("data-label", "Copied")

    page.page.locator(".text-block").last.get_by_role("button", name="Copy text").click()
    assert page.page.evaluate(clipboard) == ANSWER  # the Markdown as the model wrote it

    page.page.locator(".user-message").last.get_by_role("button", name="Copy text").click()
    assert page.page.evaluate(clipboard) == f"[[copy-{width}]] show me a snippet"
    # The buttons' labels are not part of the conversation's text.
    assert "Copy" not in page.conversation_text()

    page.reload()  # stored rows have the same buttons
    grant_clipboard(page, served.url)
    page.page.locator(".stored .md .code-block").get_by_role("button", name="Copy code").click()
    assert page.page.evaluate(clipboard) == "print('hello')\nx = 1"
    if width == 390:
        button = page.page.locator(".code-block button.copy").bounding_box()
        assert button is not None and button["x"] + button["width"] <= 390
        assert page.page.evaluate("document.documentElement.scrollWidth") <= 390


def test_rename_a_chat_and_the_tab_follows(served: ServerProcess, web: Open) -> None:
    chat_id, page = open_chat(served, web, "Before")
    expect(page.page).to_have_title("Before · toolwire")
    page.page.get_by_role("button", name="Rename").click()
    box = page.page.get_by_role("textbox", name="Chat title")
    expect(box).to_be_focused()
    expect(box).to_have_value("Before")
    box.fill("Escape keeps it")
    box.press("Escape")
    expect(page.page.locator("#chat-title")).to_have_text("Before")

    page.page.get_by_role("button", name="Rename").click()
    box.fill("  Trip to Porto  ")
    box.press("Enter")
    expect(page.page.locator("#chat-title")).to_have_text("Trip to Porto")
    expect(page.page.locator(f'.chat-item[data-chat-id="{chat_id}"] .chat-link')).to_have_text("Trip to Porto")
    expect(page.page).to_have_title("Trip to Porto · toolwire")
    with api(served) as client:
        assert client.get(f"/api/chats/{chat_id}").json()["title"] == "Trip to Porto"
    page.reload()
    expect(page.page.locator("#chat-title")).to_have_text("Trip to Porto")
    expect(page.page).to_have_title("Trip to Porto · toolwire")

    # An empty title is not sent; the chat keeps its name.
    page.page.get_by_role("button", name="Rename").click()
    box.fill("   ")
    box.press("Enter")
    expect(box).to_be_visible()
    box.press("Escape")
    with api(served) as client:
        assert client.get(f"/api/chats/{chat_id}").json()["title"] == "Trip to Porto"
    # "New chat": the tab says toolwire again.
    page.page.get_by_role("button", name="New chat").click()
    expect(page.page).to_have_title("toolwire")
    expect(page.page.get_by_role("button", name="Rename")).to_be_hidden()


def test_a_chat_is_made_by_its_first_message_not_by_new_chat(served: ServerProcess, gate: GateServer,
                                                             web: Open) -> None:
    gate.script("first", text("Hello back."))
    page = web(served.url + "/", token=TOKENS["carol"])
    with api(served, "carol") as client:
        before = len(client.get("/api/chats").json()["chats"])
    for _ in range(3):
        page.page.get_by_role("button", name="New chat").click()
    with api(served, "carol") as client:
        assert len(client.get("/api/chats").json()["chats"]) == before
    page.send("[[first]] Where shall we go?")
    page.expect_last_run_status("completed")
    expect(page.page.locator('.chat-link[aria-current="page"]')).to_have_text("[[first]] Where shall we go?")
    expect(page.page).to_have_title("[[first]] Where shall we go? · toolwire")
    with api(served, "carol") as client:
        assert len(client.get("/api/chats").json()["chats"]) == before + 1


@pytest.mark.parametrize(("status", "code", "message", "shown"), [
    (429, "rate_limited", "Too many writes for this user right now; try again in 7 s.",
     "Too many writes for this user right now; try again in 7 s."),
    (409, "run_active", "This chat already has a running run (POST /api/chats/{id}/runs/run_x/cancel stops it).",
     "This chat is still answering the last message."),
])
def test_a_refused_send_gives_the_text_back_and_says_why_once(served: ServerProcess, web: Open, status: int,
                                                             code: str, message: str, shown: str) -> None:
    _, page = open_chat(served, web, f"Refused {status}")

    def refuse(route: Route) -> None:
        if route.request.method != "POST":
            route.continue_()
            return
        route.fulfill(status=status, content_type="application/json", headers={"Retry-After": "7"},
                      body=json.dumps({"error": {"code": code, "message": message}}))

    page.page.route("**/api/chats/*/messages", refuse)
    page.send("A long message\nthat must not be lost")
    notice = page.page.locator(".notice")
    expect(notice).to_have_count(1)
    expect(notice).to_contain_text(shown)
    expect(page.page.locator("#message")).to_have_value("A long message\nthat must not be lost")
    expect(page.page.locator("#connection")).to_have_text("")  # refused, not "Reconnecting…"
    said = page.conversation_text()
    assert "run_x" not in said and "/api/" not in said
    page.page.wait_for_timeout(500)
    expect(notice).to_have_count(1)  # once, not again on a retry


def test_theme_toggle_is_remembered(served: ServerProcess, web: Open) -> None:
    page = web(served.url + "/", token=TOKENS["alice"], dark=True)
    background = "getComputedStyle(document.body).backgroundColor"
    button = page.page.locator("#theme")
    expect(button).to_have_text("Theme: system")
    assert page.page.evaluate(background) == "rgb(21, 23, 27)"  # the system's dark
    button.click()
    expect(button).to_have_text("Theme: light")
    assert page.page.evaluate(background) == "rgb(255, 255, 255)"
    page.reload()
    expect(page.page.locator("#theme")).to_have_text("Theme: light")
    assert page.page.evaluate(background) == "rgb(255, 255, 255)"
    page.page.locator("#theme").click()
    expect(page.page.locator("#theme")).to_have_text("Theme: dark")
    assert page.page.evaluate(background) == "rgb(21, 23, 27)"
    page.page.locator("#theme").click()
    expect(page.page.locator("#theme")).to_have_text("Theme: system")
    assert page.page.evaluate("localStorage.getItem('toolwire.theme')") is None
    assert page.page.evaluate("document.documentElement.dataset.theme ?? null") is None

    light_system = web(served.url + "/", token=TOKENS["alice"], width=390)
    light_system.page.evaluate("localStorage.setItem('toolwire.theme', 'dark')")
    light_system.reload()
    assert light_system.page.evaluate(background) == "rgb(21, 23, 27)"  # chosen dark over a light system


def test_the_favicon_is_served_under_the_page_policy(served: ServerProcess, web: Open, screenshots: Path) -> None:
    blocked: list[str] = []
    page = web(served.url + "/", token=TOKENS["alice"])
    page.page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    page.reload()
    icon = page.page.evaluate("document.querySelector('link[rel=icon]').href")
    response = page.page.request.get(icon)
    assert response.status == 200 and response.headers["content-type"] == "image/svg+xml"
    assert response.body().startswith(b"<svg")
    page.page.wait_for_timeout(300)
    assert blocked == []
    page.screenshot(screenshots / "everyday-light.png")


def test_the_empty_page_has_no_suggestions_without_the_demo_tools(served: ServerProcess, web: Open,
                                                                  tmp_path: Path) -> None:
    page = web(served.url + "/", token=TOKENS["alice"])
    expect(page.page.locator("#signed-in")).to_have_text("Signed in as alice")
    expect(page.page.locator("#suggestions")).to_be_hidden()


def test_rename_keeps_to_the_title_limit_and_to_the_chats_owner(served: ServerProcess) -> None:
    with api(served) as alice, api(served, "bob") as bob:
        chat_id = alice.post("/api/chats", json={"title": "Mine"}).json()["id"]
        too_long = alice.patch(f"/api/chats/{chat_id}", json={"title": "x" * 501})
        assert too_long.status_code == 422 and "longer than 500 characters" in too_long.json()["error"]["message"]
        assert bob.patch(f"/api/chats/{chat_id}", json={"title": "Bob's now"}).status_code == 404
        assert alice.patch(f"/api/chats/{chat_id}", json={"title": "x" * 500}).status_code == 200
        assert alice.get(f"/api/chats/{chat_id}").json()["title"] == "x" * 500


def test_who_is_signed_in_shows_on_a_phone_too(served: ServerProcess, web: Open) -> None:
    _, page = open_chat(served, web, "A chat with a rather long title for a phone screen", width=390,
                              height=844)
    who = page.page.locator("#signed-in")
    expect(who).to_be_visible()
    expect(who).to_have_attribute("title", "Signed in as alice")
    box = who.bounding_box()
    rename = page.page.get_by_role("button", name="Rename").bounding_box()
    assert box is not None and rename is not None and box["x"] + box["width"] <= 390
    assert rename["x"] + rename["width"] <= box["x"], "side by side, not overlapping"
    assert page.page.evaluate("document.documentElement.scrollWidth") <= 390
