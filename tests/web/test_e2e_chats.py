"""End to end: reloading mid-run, a run started in another tab, and another user's chat, on the real server."""

from __future__ import annotations

import threading

from playwright.sync_api import expect

from tests.server.support import TOKENS, GateServer, ServerProcess, calls, text

from .e2e import Open, api, finish_response, new_chat, open_chat, release_frame

ANSWER = "Both are done: the first and the second."


def test_reload_mid_run_shows_everything_once_and_the_run_completes_on_screen(served: ServerProcess,
                                                                              gate: GateServer, web: Open) -> None:
    script = gate.script("reload", calls(("gated", {"label": "reload-1"}), ("gated", {"label": "reload-2"}),
                                         preamble="Checking both."),
                         text(ANSWER, chunks=6), gated=True)
    _, page = open_chat(served, web, "Reload")
    page.send("[[reload]] check both")
    finish_response(script, 1)  # the calls are made; both tools wait at their gates
    page.expect_status("call_1_gated", "executing")
    gate.release_tool("reload-1")
    page.expect_status("call_0_gated", "done")

    page.reload()  # mid-round: one result in, one tool still running
    page.expect_status("call_0_gated", "done")
    page.expect_status("call_1_gated", "executing")
    expect(page.page.locator(".tool-card")).to_have_count(2)
    expect(page.page.locator(".user-message")).to_have_count(1)
    expect(page.page.locator("#stop")).to_be_visible()

    gate.release_tool("reload-2")
    page.expect_status("call_1_gated", "done")
    for _ in range(3):  # the answer starts streaming: "Both are done: the"
        release_frame(script)
    expect(page.page.locator(".md", has_text="Both are")).to_have_text(ANSWER[:18])

    page.reload()  # mid-answer
    expect(page.page.locator(".md", has_text="Both are")).to_have_text(ANSWER[:18])
    script.open()
    page.expect_last_run_status("completed")
    expect(page.page.locator(".md", has_text="Both are")).to_have_text(ANSWER)
    expect(page.page.locator(".tool-card")).to_have_count(2)
    expect(page.page.locator(".tools-aggregate")).to_have_count(1)
    expect(page.page.locator(".user-message")).to_have_count(1)
    words = page.conversation_text()
    for once in ("[[reload]] check both", "Checking both.", ANSWER):
        assert words.count(once) == 1, (once, words)
    expect(page.page.locator(".run").last.locator(".run-usage")).to_contain_text(" out tokens · 2 steps · ")


def test_an_idle_page_follows_a_run_started_in_another_tab(served: ServerProcess, gate: GateServer,
                                                           web: Open) -> None:
    gate.script("elsewhere", calls(("gated", {"label": "elsewhere"}), preamble="On it."), text("Done elsewhere."))
    chat_id, page = open_chat(served, web, "Two tabs")
    expect(page.page.locator("#chat-title")).to_have_text("Two tabs")
    started = threading.Event()

    def other_tab() -> None:
        with api(served) as client, client.stream("POST", f"/api/chats/{chat_id}/messages", json={
                "client_message_id": "other-tab", "text": "[[elsewhere]] sent from another tab"}) as response:
            assert response.status_code == 200
            started.set()  # leaving follows no further; the run goes on (on_disconnect: continue)

    thread = threading.Thread(target=other_tab)
    thread.start()
    thread.join(timeout=30)
    assert started.is_set()
    page.expect_status("call_0_gated", "executing")  # noticed within a few seconds, without a reload
    expect(page.page.locator(".user-message")).to_have_text("[[elsewhere]] sent from another tab")
    expect(page.page.locator("#stop")).to_be_visible()
    gate.release_tool("elsewhere")
    page.expect_last_run_status("completed")
    expect(page.page.locator(".md", has_text="Done elsewhere.")).to_have_count(1)
    expect(page.page.locator(".user-message")).to_have_count(1)
    with api(served) as client:  # deleted in the other tab: this one says so
        assert client.delete(f"/api/chats/{chat_id}").status_code == 204
    expect(page.page.locator(".notice")).to_contain_text("This chat was deleted", timeout=10_000)


def test_another_users_chat_cannot_be_opened(served: ServerProcess, web: Open) -> None:
    theirs = new_chat(served, "Bob's secret plans", user="bob")
    mine = new_chat(served, "Alice's own chat")
    page = web(served.url + "/", token=TOKENS["alice"], chat=theirs)
    expect(page.page.locator(".notice")).to_contain_text("This chat does not exist, or it is not yours.")
    expect(page.page.locator(f'.chat-item[data-chat-id="{mine}"]')).to_have_count(1)
    expect(page.page.locator(f'.chat-item[data-chat-id="{theirs}"]')).to_have_count(0)
    assert "Bob's secret plans" not in page.page.content()
    # Nor can the page's own token reach it by any route the page uses.
    statuses = page.page.evaluate("""async (id) => {
        const auth = {Authorization: `Bearer ${localStorage.getItem("toolwire.token")}`};
        const paths = ["", "/messages", "/stream"];
        return Promise.all(paths.map((p) => fetch(`api/chats/${id}${p}`, {headers: auth}).then((r) => r.status)));
    }""", theirs)
    assert statuses == [404, 404, 404]
    expect(page.page.locator("#message")).to_be_editable()
