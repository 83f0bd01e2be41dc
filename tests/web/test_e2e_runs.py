"""End to end: the page in Chromium, the real `toolwire serve`, a gated fake model. Cards, results, errors, stop.

Every state is held by the test: the model sends a frame only when released, a gated tool returns only
when released (tests/server/support.py), so "three results in order 2, 3, 1" is an order the test chose.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.server.support import GateServer, ServerProcess, calls, text
from toolwire.testing.fake import FakeStreamError, FakeText, FakeToolCall, FakeTurn

from .e2e import Open, chat_detail, open_chat, release_frame, wait

PIECES = ['{"seconds": ', "0.01, ", '"label": ', '"growing', '-args"}']


def shown_arguments(raw: str) -> str:
    """What a card shows for argument text: pretty JSON once it parses, the raw text before."""
    try:
        return json.dumps(json.loads(raw), indent=2)
    except ValueError:
        return raw


def test_arguments_grow_live_across_deltas_before_the_call_ends(served: ServerProcess, gate: GateServer, web: Open,
                                                                screenshots: Path) -> None:
    call = FakeToolCall(name="sleepy", arguments={"seconds": 0.01, "label": "growing-args"}, id="call_grow",
                        chunks=PIECES)
    script = gate.script("grow", FakeTurn(parts=[call]), text("Slept well."), gated=True)
    _, page = open_chat(served, web, "Growing arguments")
    page.send("[[grow]] take a short nap")
    release_frame(script)  # the call starts: its card shows the name at once
    page.expect_status("call_grow", "streaming")
    expect(page.card("call_grow").locator(".tool-name")).to_have_text("sleepy")
    raw = ""
    for number, piece in enumerate(PIECES):
        release_frame(script)
        raw += piece
        expect(page.card("call_grow").locator(".tool-args pre")).to_have_text(shown_arguments(raw))
        page.expect_status("call_grow", "streaming")  # still arriving: the call has not ended
        if number == 2:
            page.screenshot(screenshots / "e2e-streaming-arguments.png")
    script.open()
    page.expect_last_run_status("completed")
    page.expect_status("call_grow", "done")
    logged = [shown for shown, status in page.arguments_log("call_grow") if status == "streaming" and shown]
    growing = [shown for shown, _ in itertools.groupby(logged)]
    assert len(growing) >= 3, growing
    assert all(len(a) < len(b) for a, b in itertools.pairwise(growing)), growing
    assert not growing[0].startswith("{\n"), "raw text while the arguments do not parse yet"
    assert json.loads(page.arguments_text("call_grow")) == {"seconds": 0.01, "label": "growing-args"}
    assert page.statuses_of("call_grow")[:2] == ["streaming", "pending"]
    expect(page.page.locator(".md", has_text="Slept well.")).to_have_count(1)


def test_three_tools_finishing_2_3_1_update_their_cards_in_that_order(served: ServerProcess, gate: GateServer,
                                                                      web: Open, screenshots: Path) -> None:
    gate.script("order", calls(("gated", {"label": "order-1"}), ("gated", {"label": "order-2"}),
                               ("gated", {"label": "order-3"}), preamble="Three at once."),
                text("All three are **back**."))
    _, page = open_chat(served, web, "Three tools")
    page.send("[[order]] run three tools")
    ids = ["call_0_gated", "call_1_gated", "call_2_gated"]
    for call_id in ids:
        page.expect_status(call_id, "executing")
    wait(lambda: gate.waiting.get("order-1", 0) == gate.waiting.get("order-3", 0) == 1, "all three tools running")
    gate.release_tool("order-2")
    page.expect_status("call_1_gated", "done")
    page.expect_status("call_0_gated", "executing")
    page.expect_status("call_2_gated", "executing")
    expect(page.card("call_0_gated").locator(".tool-time")).not_to_have_text("")  # elapsed time while running
    page.screenshot(screenshots / "e2e-mixed-results.png")
    gate.release_tool("order-3")
    page.expect_status("call_2_gated", "done")
    page.expect_status("call_0_gated", "executing")
    gate.release_tool("order-1")
    page.expect_last_run_status("completed")
    assert [cid for cid, status in page.card_log() if status == "done"] == ["call_1_gated", "call_2_gated",
                                                                            "call_0_gated"]
    assert json.loads(page.result_text("call_1_gated")) == {"label": "order-2", "released": True}
    cards = page.page.locator(".tools-aggregate .tool-card")  # one aggregate, cards in call order
    assert [cards.nth(i).get_attribute("data-call-id") for i in range(cards.count())] == ids
    expect(page.page.locator(".md strong")).to_have_text("back")
    expect(page.page.locator(".run").last.locator(".run-usage")).to_contain_text(" out tokens · 2 steps · ")
    expect(page.page.locator("#stop")).to_be_hidden()


def test_a_failing_tool_shows_its_error_and_a_cut_off_call_never_executes(served: ServerProcess, gate: GateServer,
                                                                          web: Open, screenshots: Path) -> None:
    turn = FakeTurn(parts=[FakeText(text="Trying three things."),
                           FakeToolCall(name="explode", arguments={"message": "the disk is full"}, id="call_boom"),
                           FakeToolCall(name="gated", arguments='{"label": "cut-off', id="call_cut"),
                           FakeToolCall(name="gated", arguments={"label": "fail-ok"}, id="call_ok")])
    gate.script("fail", turn, text("One failed, one was cut off, one worked."))
    _, page = open_chat(served, web, "Failures")
    page.send("[[fail]] try it")
    page.expect_status("call_ok", "executing")
    page.expect_status("call_boom", "error")
    page.expect_status("call_cut", "invalid")
    expect(page.card("call_boom").locator(".tool-result summary")).to_have_text("Error")
    assert page.result_text("call_boom") == "The tool 'explode' failed with RuntimeError: the disk is full."
    expect(page.card("call_cut").locator(".tool-status")).to_have_text("invalid call, not run")
    expect(page.card("call_cut").locator(".tool-reason")).not_to_have_text("")
    assert page.arguments_text("call_cut") == '{"label": "cut-off'
    page.screenshot(screenshots / "e2e-error.png")
    gate.release_tool("fail-ok")
    page.expect_last_run_status("completed")
    page.expect_status("call_ok", "done")
    assert "executing" not in page.statuses_of("call_cut")
    assert page.statuses_of("call_cut")[-1] == "invalid"
    assert gate.passed.get("cut-off", 0) == 0 and gate.waiting.get("cut-off", 0) == 0, "the cut-off call never ran"


def test_a_provider_error_is_a_clear_line_and_the_run_says_it_failed(served: ServerProcess, gate: GateServer,
                                                                     web: Open) -> None:
    broken = FakeTurn(parts=[FakeText(text="The report covers three areas, and")],
                      error=FakeStreamError(message="The service is overloaded; try again later.", code="overloaded",
                                            after=4))
    gate.script("broken", broken)
    _, page = open_chat(served, web, "Provider error")
    page.send("[[broken]] write the report")
    page.expect_last_run_status("failed")
    step_error = page.page.locator(".step .error-line")
    expect(step_error).to_contain_text("The service is overloaded; try again later.")
    expect(step_error).to_have_attribute("role", "alert")
    # Said once, as a sentence: the run's small print says it failed without repeating the error or its code.
    expect(page.page.locator(".run").last.locator(".run-usage")).to_contain_text("failed")
    expect(page.page.locator(".error-line")).to_have_count(1)
    assert page.conversation_text().count("The service is overloaded") == 1
    assert "(overloaded)" not in page.conversation_text() and "run_" not in page.conversation_text()
    expect(page.page.locator("#send")).to_be_enabled()
    # The text it had streamed was stored, marked incomplete: a reload shows it with the page's note.
    page.reload()
    block = page.page.locator(".text-block").first
    expect(block).to_have_class("text-block incomplete")
    expect(block.locator(".md")).to_contain_text("The report covers")
    expect(block.locator(".incomplete-note")).to_have_text("Incomplete: the answer stopped here.")


def test_stop_cancels_the_run_and_its_running_tool(served: ServerProcess, gate: GateServer, web: Open) -> None:
    gate.script("stop", calls(("gated", {"label": "stop-1"}), ("gated", {"label": "stop-2"})),
                text("This is never said."))
    chat_id, page = open_chat(served, web, "Stop")
    page.send("[[stop]] start something long")
    page.expect_status("call_0_gated", "executing")
    gate.release_tool("stop-2")
    page.expect_status("call_1_gated", "done")
    stop = page.page.locator("#stop")
    expect(stop).to_be_visible()
    expect(page.page.locator("#send")).to_be_hidden()
    stop.click()
    page.expect_last_run_status("cancelled")
    # Stopping is what the person asked for: a neutral "Stopped", no red error line, no alert.
    usage = page.page.locator(".run").last.locator(".run-usage")
    expect(usage).to_contain_text("Stopped")
    expect(page.page.locator(".run").last.locator(".error-line")).to_have_count(0)
    expect(page.page.locator('.run [role="alert"]')).to_have_count(0)
    expect(stop).to_be_hidden()
    page.expect_status("call_0_gated", "error")  # answered "cancelled" by the server, never left running
    stopped = page.card("call_0_gated")
    expect(stopped.locator(".tool-status")).to_have_text("stopped")
    expect(stopped.locator(".tool-result pre")).to_have_text("Stopped before it finished.")
    colours = page.page.evaluate("""() => {
      const style = (selector) => getComputedStyle(document.querySelector(selector));
      const muted = getComputedStyle(document.documentElement).getPropertyValue("--fg-muted").trim();
      const probe = document.createElement("span");
      probe.style.color = muted;
      document.body.append(probe);
      const mutedRgb = getComputedStyle(probe).color;
      probe.remove();
      const card = document.querySelector('.tool-card[data-call-id="call_0_gated"]');
      return {muted: mutedRgb, usage: style(".run:last-of-type .run-usage").color,
              status: getComputedStyle(card.querySelector(".tool-status")).color,
              border: getComputedStyle(card).borderLeftColor};
    }""")
    assert colours["usage"] == colours["muted"] and colours["status"] == colours["muted"], colours
    assert colours["border"] == colours["muted"], colours
    page.expect_status("call_1_gated", "done")
    wait(lambda: gate.waiting.get("stop-1", 0) == 0, "the running tool to be stopped")
    assert gate.passed.get("stop-1", 0) == 0
    assert chat_detail(served, chat_id)["active_run"] is None
    assert "This is never said." not in page.conversation_text()


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_approve_and_deny_both_resume_the_run_in_place(served: ServerProcess, gate: GateServer, web: Open,
                                                       screenshots: Path, decision: str) -> None:
    tag = f"pay-{decision}"
    gate.script(tag, calls(("transfer", {"to": f"{decision}-bob", "amount": 50}),
                           ("sleepy", {"seconds": 0.01, "label": tag}), preamble="Paying."),
                text("Done with the payment."))
    _, page = open_chat(served, web, f"Payment ({decision})")
    page.send(f"[[{tag}]] pay bob")
    page.expect_last_run_status("paused")
    page.expect_status("call_0_transfer", "awaiting_approval")
    page.expect_status("call_1_sleepy", "done")
    expect(page.page.locator("#send")).to_be_disabled()
    expect(page.page.locator("#composer-hint")).to_have_text("Approve or deny the waiting tool calls to go on.")
    card = page.card("call_0_transfer")
    card.evaluate("node => { window.__payCard = node; }")
    if decision == "approve":
        page.screenshot(screenshots / "e2e-approval.png")
        page.approve("call_0_transfer")
        page.expect_status("call_0_transfer", "done")
        assert json.loads(page.result_text("call_0_transfer")) == {"sent": 50, "to": "approve-bob"}
        assert "transfer:approve-bob:50" in gate.events
    else:
        page.deny("call_0_transfer", "Not this month.")
        page.expect_status("call_0_transfer", "denied")
        expect(card.locator(".tool-result summary")).to_have_text("Denied")
        assert page.result_text("call_0_transfer") == "Not this month."
        assert not [e for e in gate.events if e.startswith("transfer:deny-bob")]
    page.expect_last_run_status("completed")
    assert card.evaluate("node => node === window.__payCard"), "the same card was updated"
    expect(page.page.locator(".tool-card")).to_have_count(2)
    expect(page.page.locator(".md", has_text="Done with the payment.")).to_have_count(1)
    expect(page.page.locator("#send")).to_be_enabled()

    # After a reload the stored rows say the same: the decision, and what each run cost.
    page.reload()
    page.expect_status("call_0_transfer", "done" if decision == "approve" else "denied")
    page.expect_status("call_1_sleepy", "done")
    expect(page.page.locator(".run")).to_have_count(0)
    summaries = page.page.locator(".stored-run .run-usage")
    expect(summaries).to_have_count(2)
    expect(summaries.first).to_contain_text("paused for approval · ")
    expect(summaries.last).to_contain_text(" out tokens · 2 steps · ")
