"""Client tests: the page in Chromium fed recorded event sequences (tests/web/sequences/) by the contract server.

These are the renderer's tests against sequences a real server does not easily produce on demand: a
recorded Anthropic-style run with thinking and a Markdown table, an invalid call whose arguments are a
JSON array, a provider error mid-answer, a GET chat answered late, a paused run opened later. What the
issue asks of the whole product (growing arguments, results 2-3-1, approve, deny, stop...) is tested
against the real `toolwire serve` in test_e2e_*.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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


def started(server: ContractServer, web: Open, name: str, **options: Any) -> tuple[dict[str, Any], WebPage]:
    """A chat from a recorded sequence, opened in the page, its message sent (nothing released yet)."""
    seq = load(name)
    chat_id = seq["chat"]["id"]
    server.add_chat(seq["chat"], rows=seq["history"])
    server.script(chat_id, *split_runs(seq["frames"]), paused=seq.get("paused"))
    page = web(server.url, token=server.token, chat=chat_id, **options)
    first = seq["frames"][0]["data"]["user_message"]["messages"][0]["parts"][0]["text"]
    page.send(first)
    server.wait_for_run(chat_id)
    return seq, page


def split_runs(frames: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    runs: list[list[dict[str, Any]]] = []
    for frame in frames:
        if frame["data"]["type"] == "run_started":
            runs.append([])
        runs[-1].append(frame)
    return runs


def is_type(kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    def match(frame: dict[str, Any]) -> bool:
        data = frame["data"]
        return data["type"] == kind and all(data.get(k) == v for k, v in fields.items())

    return match


def test_results_in_order_2_3_1_update_their_cards_in_that_order(server: ContractServer, web: Open, screenshots: Path) -> None:
    seq, page = started(server, web, "parallel_out_of_order")
    chat = seq["chat"]["id"]
    server.release(chat, until=is_type("message_end"))
    for call in ("call_paris", "call_tokyo", "call_lima"):
        page.expect_status(call, "executing")
    server.release(chat, 1)  # Tokyo (call 2) answers first
    page.expect_status("call_tokyo", "done")
    page.expect_status("call_paris", "executing")
    page.expect_status("call_lima", "executing")
    expect(page.card("call_paris").locator(".tool-time")).not_to_have_text("")
    page.screenshot(screenshots / "contract-mixed-results.png")
    server.release(chat, 1)  # then Lima (call 3)
    page.expect_status("call_lima", "done")
    page.expect_status("call_paris", "executing")
    server.release(chat)  # Paris (call 1), then the answer
    page.expect_run_status("run-w1", "completed")
    finished = [cid for cid, status in page.card_log() if status == "done"]
    assert finished == seq["expect"]["result_order"] == ["call_tokyo", "call_lima", "call_paris"]
    assert page.card("call_tokyo").locator(".tool-time").text_content() == "0.41 s"
    assert json.loads(page.result_text("call_lima")) == {"city": "Lima", "temp": 16, "sky": "fog"}
    # One aggregate for the round, cards in call order; the answer's Markdown table is a table.
    cards = page.page.locator(".tools-aggregate .tool-card")
    expect(cards).to_have_count(3)
    assert [cards.nth(i).get_attribute("data-call-id") for i in range(3)] == ["call_paris", "call_tokyo", "call_lima"]
    expect(page.page.locator(".tools-aggregate")).to_have_count(1)
    expect(page.page.locator(".md table tbody tr")).to_have_count(3)
    expect(page.page.locator(".md strong")).to_have_text("Tokyo")
    usage = page.run("run-w1").locator(".run-usage")
    expect(usage).to_have_text("942 in · 157 out tokens · 2 steps · 3.4 s")
    thinking = page.page.locator("details.thinking")
    expect(thinking).not_to_have_attribute("open", "")
    expect(thinking.locator(".thinking-text")).to_be_hidden()
    thinking.locator("summary").click()
    expect(thinking.locator(".thinking-text")).to_have_text("Three cities: call get_weather three times in parallel.")
    expect(page.page.locator("#stop")).to_be_hidden()
    expect(page.page.locator("#send")).to_be_visible()


def test_a_failing_tool_shows_its_error_and_an_invalid_call_never_executes(server: ContractServer, web: Open) -> None:
    seq, page = started(server, web, "failing_and_invalid")
    chat = seq["chat"]["id"]
    for _ in seq["frames"][1:]:
        [frame] = server.release(chat, 1)
        page.expect_drawn(frame["id"])  # every state is drawn, so a status shown only briefly is seen
    page.expect_run_status("run-f1", "completed")
    page.expect_status("call_stations", "invalid")
    page.expect_status("call_convert", "error")
    assert "executing" not in page.statuses_of("call_stations")
    assert page.statuses_of("call_convert")[-2:] == ["executing", "error"]
    expect(page.card("call_stations").locator(".tool-reason")).to_have_text("The arguments are not a JSON object (got an array).")
    expect(page.card("call_stations").locator(".tool-status")).to_have_text("invalid call, not run")
    expect(page.card("call_convert").locator(".tool-result summary")).to_have_text("Error")
    assert page.result_text("call_convert") == "The tool 'convert_currency' failed with ValueError: unknown currency code 'XYZ'."
    assert page.arguments_text("call_stations") == '[\n  "north",\n  "south"\n]'


def test_provider_error_is_a_clear_line_and_the_run_says_it_failed(server: ContractServer, web: Open, screenshots: Path) -> None:
    seq, page = started(server, web, "provider_error")
    server.release(seq["chat"]["id"])
    page.expect_run_status("run-e1", "failed")
    step_error = page.page.locator(".step .error-line")
    expect(step_error).to_contain_text("Anthropic answered 529 Overloaded: the service is busy. Try again in a minute.")
    expect(step_error).to_have_attribute("role", "alert")
    run_error = page.run("run-e1").locator(".run-meta .error-line")
    expect(run_error).to_have_text("The run failed: The model provider failed mid-answer (529 Overloaded). Send the message again to retry.")
    expect(page.page.locator(".md").first).to_have_text("The report covers three areas")
    page.screenshot(screenshots / "contract-error.png")


def paused_chat(server: ContractServer, web: Open) -> tuple[dict[str, Any], WebPage]:
    seq, page = started(server, web, "approval")
    server.script(seq["chat"]["id"], seq["denied"])
    server.release(seq["chat"]["id"])
    page.expect_run_status("run-a1", "paused")
    page.expect_status("call_pay", "awaiting_approval")
    page.expect_status("call_oslo", "done")
    expect(page.page.locator("#send")).to_be_disabled()
    expect(page.page.locator("#composer-hint")).to_have_text("Approve or deny the waiting tool calls to go on.")
    return seq, page


def test_a_late_answer_about_the_pause_does_not_undo_a_decision(server: ContractServer, web: Open) -> None:
    # The page asks GET chat when the run pauses; that answer (still paused) arrives after the person denied.
    server.chat_delay = 0.6
    seq, page = paused_chat(server, web)
    page.deny("call_pay", "Not this month.")
    server.wait_for_run(seq["chat"]["id"])
    page.page.wait_for_timeout(800)
    expect(page.card("call_pay").locator(".approval")).to_have_text("Denied: the run goes on.")
    server.release(seq["chat"]["id"])
    page.expect_status("call_pay", "denied")
    assert page.statuses_of("call_pay")[-2:] == ["awaiting_approval", "denied"]


def reopened_paused(server: ContractServer, web: Open, decision: str) -> tuple[str, WebPage]:
    """A chat that paused before the page opened; `decision` ("approved" / "denied") is the run it resumes."""
    seq = load("approval")
    chat_id = seq["chat"]["id"]
    server.add_chat(seq["chat"], rows=seq["history_paused"], frames=seq["frames"], paused=seq["paused"])
    server.script(chat_id, seq[decision])
    page = web(server.url, token=server.token, chat=chat_id)
    page.expect_status("call_pay", "awaiting_approval")
    return chat_id, page


def test_a_paused_chat_opened_later_can_be_approved(server: ContractServer, web: Open) -> None:
    chat_id, page = reopened_paused(server, web, "approved")
    page.expect_status("call_oslo", "done")
    expect(page.page.locator(".user-message")).to_have_count(1)
    page.approve("call_pay")
    server.wait_for_run(chat_id)
    server.release(chat_id)
    page.expect_status("call_pay", "done")
    expect(page.page.locator(".tool-card")).to_have_count(2)
    expect(page.page.locator(".run").last.locator(".md")).to_have_text("Paid (reference PAY-991). Oslo: 7 °C and rain.")


def test_keyboard_only_denial(server: ContractServer, web: Open) -> None:
    chat_id, page = reopened_paused(server, web, "denied")
    page.card("call_pay").locator(".deny-reason").focus()
    page.page.keyboard.type("Not this month.")
    page.page.keyboard.press("Enter")  # Enter in the reason denies
    server.wait_for_run(chat_id)
    [request] = server.requests_to("POST", f"/api/chats/{chat_id}/approvals")
    assert request.body["decisions"] == [{"approval_id": "appr-1", "approved": False, "reason": "Not this month."}]
    server.release(chat_id)
    page.expect_status("call_pay", "denied")


def test_escape_in_the_message_box_stops_the_run(server: ContractServer, web: Open) -> None:
    seq, page = started(server, web, "parallel_out_of_order")
    server.release(seq["chat"]["id"], 3)
    expect(page.page.locator("#stop")).to_be_visible()
    page.page.locator("#message").press("Escape")
    page.expect_run_status("run-w1", "cancelled")
