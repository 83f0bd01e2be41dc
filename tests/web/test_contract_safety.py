"""Client tests: script injection from a recorded sequence with payloads in every field, on the contract server.

The recorded sequence reaches fields the real server's fake model does not write (thinking, an invalid
call's reason). The same payloads through the real `toolwire serve` are tested in
test_e2e_safety.py.

Each payload would set `window.__xss` (the canary) or open a dialog if it ever became markup. The page
ships a Content-Security-Policy that would block most of them anyway, so the same test also runs with
that policy stripped: the renderer alone must be safe. The `web` fixture checks every page for dialogs,
script errors, new script elements, on* attributes and script URLs when the test ends.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import expect

from .contract_server import ContractServer
from .pages import WebPage
from .sequences import load

Open = Callable[..., WebPage]


@pytest.mark.parametrize("csp", [True, False], ids=["with-csp", "renderer-alone"])
def test_payloads_in_every_field_stay_text(web: Open, csp: bool) -> None:
    seq = load("xss")
    payloads: list[str] = seq["payloads"]
    chat_id = seq["chat"]["id"]
    with ContractServer(csp=csp) as server:
        server.add_chat(seq["chat"])
        server.script(chat_id, seq["frames"])
        page = web(server.url, token=server.token, chat=chat_id)
        title = seq["chat"]["title"]
        expect(page.page.locator(".chat-link")).to_have_text(title)
        expect(page.page.locator("#chat-title")).to_have_text(title)
        page.send(seq["frames"][0]["data"]["user_message"]["messages"][0]["parts"][0]["text"])
        server.wait_for_run(chat_id)
        for _ in seq["frames"][1:]:
            [frame] = server.release(chat_id, 1)
            page.expect_drawn(frame["id"])
        page.expect_run_status("run-x1", "failed")
        page.page.locator("details.thinking summary").click()
        page.page.wait_for_timeout(300)  # let anything that was going to run, run

        # Everything arrived and is shown as the characters it is.
        text = page.conversation_text()
        for payload in (payloads[0], payloads[1], payloads[5]):
            assert payload in text or payload in page.page.locator("#conversation").text_content()
        card = page.card("call_x1")
        expect(card.locator(".tool-name")).to_have_text("fetch_page<img src=x onerror=\"window.__xss='name'\">")
        assert "javascript:window.__xss='arg'" in page.arguments_text("call_x1")
        assert "</pre><img src=x onerror=" in page.result_text("call_x1")
        page.expect_status("call_x2", "invalid")
        expect(page.card("call_x2").locator(".tool-reason")).to_contain_text("<script>window.__xss='script';alert(2)</script>")
        expect(page.page.locator(".run-meta .error-line")).to_contain_text("Run failed: <img src=x onerror=")
        # The error's type is a code, not a sentence: the page shows the sentence only.
        expect(page.page.locator(".step .error-line")).not_to_contain_text("provider_error")

        # Markdown did its job where it was asked to, and only there.
        links = page.page.locator("#conversation a")
        hrefs = [links.nth(i).get_attribute("href") or "" for i in range(links.count())]
        assert hrefs == [], hrefs  # every link in the payloads has a script or data URL
        expect(page.page.locator("#conversation strong", has_text="bold")).to_have_count(1)
        expect(page.page.locator("#conversation code", has_text="<b>code</b>")).to_have_count(1)
        expect(page.page.locator("#conversation img, #conversation iframe, #conversation svg, #conversation style")).to_have_count(0)
        assert page.page.evaluate("getComputedStyle(document.body).display") == "block"
        assert page.problems() == []


def test_safe_links_open_in_a_new_tab_without_the_page(web: Open) -> None:
    seq = load("parallel_out_of_order")
    chat_id = seq["chat"]["id"]
    frames = [f for f in seq["frames"] if f["data"]["type"] != "text_delta" or f["data"]["step"] == 0]
    finished = frames[-1]
    link_frame = {"id": "1-900", "data": {"type": "text_delta", "run_id": "run-w1", "step": 1,
                                           "text": "See [the forecast](https://weather.example/paris) or ![map](https://maps.example/p.png)."}}
    with ContractServer() as server:
        server.add_chat(seq["chat"])
        server.script(chat_id, [*frames[:-1], link_frame, {**finished, "id": "1-901"}])
        page = web(server.url, token=server.token, chat=chat_id)
        page.send("What's the weather in Paris, Tokyo and Lima?")
        server.wait_for_run(chat_id)
        server.release(chat_id)
        page.expect_run_status("run-w1", "completed")
        link = page.page.get_by_role("link", name="the forecast")
        expect(link).to_have_attribute("href", "https://weather.example/paris")
        expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
        expect(link).to_have_attribute("target", "_blank")
        image = page.page.get_by_role("link", name="[image: map]")
        expect(image).to_have_attribute("href", "https://maps.example/p.png")
        expect(page.page.locator("#conversation img")).to_have_count(0)
