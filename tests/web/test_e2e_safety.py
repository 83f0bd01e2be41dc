"""End to end: script-injection payloads through the real server, in every field that reaches the page.

The model's text, a tool's arguments and its result, a tool's error, an unknown tool's name, a provider
error, the user's message and the chat's title all carry payloads that would set `window.__xss` (the
canary) or open a dialog if they ever became markup. The page is checked live and again after a reload
(stored rows and run summaries take another path through the renderer), with the page's
Content-Security-Policy and with it stripped, so the renderer alone is shown to be safe. The `web`
fixture also fails the test on any dialog, script error, new script element, on* attribute or script URL.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.server.support import TOKENS, GateServer, ServerProcess
from toolwire.testing.fake import FakeStreamError, FakeText, FakeToolCall, FakeTurn

from .e2e import Open, new_chat
from .pages import WebPage

PAYLOADS = [
    "<img src=x onerror=\"window.__xss='img';alert(1)\">",
    "<script>window.__xss='script';alert(2)</script>",
    "[click me](javascript:window.__xss='link')",
    "</pre><img src=x onerror=\"window.__xss='pre'\"><pre>",
    "![pic](javascript:window.__xss='image')",
    "[data](data:text/html,<script>window.__xss='data'</script>)",
    "<a href=\"javascript:window.__xss='a'\">a</a>",
    "<svg onload=\"window.__xss='svg'\"></svg>",
    "<iframe srcdoc=\"<script>parent.__xss='frame'</script>\"></iframe>",
]
ALL = " ".join(PAYLOADS)
NAME = "fetch_page<img src=x onerror=\"window.__xss='name'\">"


def check(page: WebPage) -> None:
    page.page.wait_for_timeout(300)  # let anything that was going to run, run
    shown = page.page.locator("#conversation").text_content() or ""
    for payload in (PAYLOADS[0], PAYLOADS[1], PAYLOADS[3], PAYLOADS[7]):
        assert payload in shown, payload  # shown as the characters it is
    expect(page.card("call_name").locator(".tool-name")).to_have_text(NAME)
    assert "</pre><img src=x onerror=" in page.arguments_text("call_big")
    assert "</pre><img src=x onerror=" in page.result_text("call_big")
    assert ALL in page.result_text("call_boom")
    links = page.page.locator("#conversation a")
    assert [links.nth(i).get_attribute("href") for i in range(links.count())] == []  # every URL was a script
    expect(page.page.locator("#conversation strong", has_text="bold")).to_have_count(1)  # Markdown still works
    expect(page.page.locator("#conversation code", has_text="<b>code</b>")).to_have_count(1)
    expect(page.page.locator("#conversation img, #conversation iframe, #conversation svg")).to_have_count(0)
    expect(page.page.locator("#chat-title")).to_have_text(PAYLOADS[0] + PAYLOADS[1])
    assert page.problems() == []


@pytest.mark.parametrize("strip_csp", [False, True], ids=["with-csp", "renderer-alone"])
def test_payloads_in_every_field_stay_text(served: ServerProcess, gate: GateServer, web: Open,
                                           strip_csp: bool) -> None:
    tag = f"xss-{strip_csp}"
    calls = FakeTurn(parts=[
        FakeText(text=f"Here: {ALL} **bold** `<b>code</b>`"),
        FakeToolCall(name="big", arguments={"size": 1, "text": ALL}, id="call_big"),
        FakeToolCall(name="explode", arguments={"message": ALL}, id="call_boom"),
        FakeToolCall(name=NAME, arguments={"url": "javascript:window.__xss='arg'"}, id="call_name"),
    ])
    answer = FakeTurn(parts=[FakeText(text=f"Summing up: {ALL}")], error=FakeStreamError(message=ALL, after=3))
    gate.script(tag, calls, answer)
    chat_id = new_chat(served, PAYLOADS[0] + PAYLOADS[1])
    page = web(served.url + "/", token=TOKENS["alice"], chat=chat_id, strip_csp=strip_csp)
    expect(page.page.locator('.chat-link[aria-current="page"]')).to_have_text(PAYLOADS[0] + PAYLOADS[1])
    page.send(f"[[{tag}]] {PAYLOADS[1]}")
    page.expect_last_run_status("failed")
    page.expect_status("call_big", "done")
    page.expect_status("call_boom", "error")
    page.expect_status("call_name", "error")  # an unknown tool: answered with an error naming it
    expect(page.page.locator(".step .error-line")).to_contain_text("<img src=x onerror=")
    expect(page.page.locator(".run-meta .run-usage")).to_contain_text("failed")  # the error itself is said once, above
    page.page.locator("details.tool-result").evaluate_all("nodes => nodes.forEach((n) => { n.open = true; })")
    check(page)

    page.reload()  # the stored rows and the run's summary, drawn from GET messages
    expect(page.page.locator(".stored-run .error-line")).to_contain_text("<img src=x onerror=")
    check(page)
