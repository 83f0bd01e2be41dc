"""End to end: branches in the page (Chromium, the real `toolwire serve`, the gate's scripted model).

Editing a sent message, the version switchers ("1 / 2"), regenerating the last answer, a reload on a branch that is
not the newest, retrying a failed run, a run on another branch followed in a second tab, and axe on a page with
switchers and the editor open.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.server.support import TOKENS, GateServer, ServerProcess, calls, text
from toolwire.testing.fake import FakeStreamError, FakeText, FakeTurn

from .axe import assert_accessible
from .e2e import Open, api, finish_response, open_chat, release_frame, wait
from .pages import WebPage

# The first axe run may install axe-core (npm ci of web-build/).
pytestmark = pytest.mark.timeout(600)


def answered(page: WebPage, count: int) -> None:
    """Wait until the page shows `count` answers and nothing runs (the Regenerate button is there then)."""
    expect(page.page.locator("#stop")).to_be_hidden()
    expect(page.page.get_by_role("button", name="Regenerate answer")).to_be_visible()
    expect(page.page.locator(".stored, .run")).to_have_count(count)


def branch(served: ServerProcess, chat_id: str) -> list[str]:
    """The texts of the chat's active branch, as the server stores it."""
    with api(served) as client:
        response = client.get(f"/api/chats/{chat_id}/messages")
        assert response.status_code == 200, response.text
        return [part["text"] for row in response.json()["messages"] for message in row["messages"]
                for part in message["parts"] if part["type"] == "text"]


def test_edit_makes_a_branch_and_the_switcher_goes_back_to_the_old_text(served: ServerProcess, gate: GateServer,
                                                                        web: Open) -> None:
    gate.script("first", text("Lisbon, for the light."))
    gate.script("second", text("Porto, in May."))
    chat_id, page = open_chat(served, web, "Edit")
    page.send("[[first]] Where to?")
    expect(page.page.locator("#conversation")).to_contain_text("Lisbon, for the light.")
    answered(page, 1)

    page.page.get_by_role("button", name="Edit message").click()
    editor = page.page.get_by_role("textbox", name="Edited message")
    expect(editor).to_have_value("[[first]] Where to?")
    editor.fill("[[second]] Where to in May?")
    page.page.get_by_role("button", name="Save").click()
    expect(page.page.locator("#conversation")).to_contain_text("Porto, in May.")
    answered(page, 1)
    conversation = page.page.locator("#conversation")
    expect(conversation).not_to_contain_text("Lisbon")
    expect(page.page.locator(".user-message .version-position")).to_have_attribute("aria-label", "Version 2 of 2")
    assert branch(served, chat_id) == ["[[second]] Where to in May?", "Porto, in May."]

    page.page.get_by_role("button", name="Previous version").click()
    expect(conversation).to_contain_text("Lisbon, for the light.")
    expect(conversation).not_to_contain_text("Porto")
    expect(page.page.locator(".user-message .version-position")).to_have_attribute("aria-label", "Version 1 of 2")
    expect(page.page.locator(".user-message .bubble")).to_have_text("[[first]] Where to?")
    assert branch(served, chat_id) == ["[[first]] Where to?", "Lisbon, for the light."]

    # The chosen branch is the server's active leaf: a reload shows it, not the newest one.
    page.reload()
    expect(conversation).to_contain_text("Lisbon, for the light.")
    expect(conversation).not_to_contain_text("Porto")
    expect(page.page.locator(".user-message .version-position")).to_have_attribute("aria-label", "Version 1 of 2")

    # Escape closes the editor and sends nothing.
    page.page.get_by_role("button", name="Edit message").click()
    page.page.get_by_role("textbox", name="Edited message").press("Escape")
    expect(page.page.locator(".message-editor")).to_have_count(0)
    assert branch(served, chat_id) == ["[[first]] Where to?", "Lisbon, for the light."]


def test_regenerate_gives_a_second_answer_beside_the_first(served: ServerProcess, gate: GateServer,
                                                           web: Open) -> None:
    gate.script("again", text("The first answer."), text("The second answer."))
    chat_id, page = open_chat(served, web, "Regenerate")
    page.send("[[again]] Say something")
    conversation = page.page.locator("#conversation")
    expect(conversation).to_contain_text("The first answer.")
    answered(page, 1)

    page.page.get_by_role("button", name="Regenerate answer").click()
    expect(conversation).to_contain_text("The second answer.")
    answered(page, 1)
    expect(conversation).not_to_contain_text("The first answer.")
    expect(page.page.locator(".stored .version-position")).to_have_attribute("aria-label", "Version 2 of 2")
    # The question is stored once: both answers hang under it.
    expect(page.page.locator(".user-message")).to_have_count(1)
    with api(served) as client:
        rows = client.get(f"/api/chats/{chat_id}/messages").json()["messages"]
    assert [row["kind"] for row in rows] == ["user", "assistant"]
    assert len(rows[1]["sibling_ids"]) == 2

    page.page.get_by_role("button", name="Previous version").click()
    expect(conversation).to_contain_text("The first answer.")
    expect(conversation).not_to_contain_text("The second answer.")


def test_retry_after_a_provider_error_answers_the_same_message(served: ServerProcess, gate: GateServer,
                                                               web: Open) -> None:
    broken = FakeTurn(parts=[FakeText(text="Half an")],
                      error=FakeStreamError(message="The service is overloaded; try again later.", code="overloaded",
                                            after=2))
    gate.script("flaky", broken, text("A whole answer."))
    chat_id, page = open_chat(served, web, "Retry")
    page.send("[[flaky]] Answer me")
    page.expect_last_run_status("failed")
    expect(page.page.get_by_role("button", name="Regenerate answer")).to_have_count(0)
    page.page.get_by_role("button", name="Retry", exact=True).click()
    conversation = page.page.locator("#conversation")
    expect(conversation).to_contain_text("A whole answer.")
    expect(page.page.get_by_role("button", name="Regenerate answer")).to_be_visible()
    expect(conversation).not_to_contain_text("overloaded")
    # Stored once: the question, then the answer of the retry.
    assert branch(served, chat_id) == ["[[flaky]] Answer me", "A whole answer."]
    expect(page.page.locator(".user-message")).to_have_count(1)


def test_switchers_and_the_editor_pass_axe(served: ServerProcess, gate: GateServer, web: Open) -> None:
    gate.script("axe", text("One."), text("Two."))
    _, page = open_chat(served, web, "Axe")
    page.send("[[axe]] Count")
    expect(page.page.locator("#conversation")).to_contain_text("One.")
    answered(page, 1)
    page.page.get_by_role("button", name="Regenerate answer").click()
    expect(page.page.locator("#conversation")).to_contain_text("Two.")
    answered(page, 1)
    expect(page.page.get_by_role("button", name="Next version")).to_be_disabled()
    page.page.get_by_role("button", name="Edit message").click()
    expect(page.page.get_by_role("textbox", name="Edited message")).to_be_focused()
    assert_accessible(page.page, "branches: switchers and the editor open")


def test_a_branch_made_elsewhere_is_drawn_whole_without_rows_of_the_old_one(served: ServerProcess, gate: GateServer,
                                                                           web: Open) -> None:
    gate.script("here", text("An answer here."))
    gate.script("there", text("An answer from elsewhere."))
    chat_id, page = open_chat(served, web, "Elsewhere")
    page.send("[[here]] First question")
    conversation = page.page.locator("#conversation")
    expect(conversation).to_contain_text("An answer here.")
    answered(page, 1)
    # Another client edits the first message: a new branch, now the chat's active one.
    with api(served) as client:
        response = client.post(f"/api/chats/{chat_id}/messages",
                               json={"client_message_id": "elsewhere-1", "text": "[[there]] Another question",
                                     "parent_id": "root"})
        assert response.status_code == 200, response.text
    # The page notices (its idle look, or following the run) and draws that branch alone.
    expect(conversation).to_contain_text("An answer from elsewhere.", timeout=15_000)
    expect(conversation).not_to_contain_text("An answer here.")
    expect(conversation).not_to_contain_text("First question")
    expect(page.page.locator(".user-message .version-position")).to_have_attribute("aria-label", "Version 2 of 2")


def test_a_refused_edit_gives_the_text_back_in_the_editor(served: ServerProcess, gate: GateServer, web: Open) -> None:
    gate.script("kept", text("Stored."))
    chat_id, page = open_chat(served, web, "Refused edit")
    page.send("[[kept]] The question")
    answered(page, 1)
    with api(served) as client:  # the chat goes away (another tab deletes it): the edit is refused with 404
        assert client.delete(f"/api/chats/{chat_id}").status_code == 204
    page.page.get_by_role("button", name="Edit message").click()
    page.page.get_by_role("textbox", name="Edited message").fill("An edit that cannot be stored")
    page.page.get_by_role("button", name="Save").click()
    expect(page.page.locator(".notices")).to_contain_text("This chat does not exist, or it is not yours.")
    expect(page.page.get_by_role("textbox", name="Edited message")).to_have_value("An edit that cannot be stored")
    expect(page.page.locator(".user-message .bubble")).to_have_text("[[kept]] The question")


def test_a_run_on_another_branch_counts_there_and_is_drawn_live_once_switched_to(served: ServerProcess,
                                                                                  gate: GateServer, web: Open) -> None:
    script = gate.script("tabs", text("The first answer."),
                         calls(("gated", {"label": "tabs-round"}), preamble="Looking again."),
                         text("The second answer, drawn live.", chunks=4), gated=True)
    chat_id, first = open_chat(served, web, "Two tabs")
    first.send("[[tabs]] A question")
    finish_response(script, 1)
    conversation = first.page.locator("#conversation")
    answered(first, 1)

    # A second tab of the same person regenerates the answer: a run on a branch the first tab does not show.
    second = web(served.url + "/", token=TOKENS["alice"], chat=chat_id)
    expect(second.page.locator("#conversation")).to_contain_text("The first answer.")
    second.page.get_by_role("button", name="Regenerate answer").click()
    finish_response(script, 2)
    wait(lambda: "wait:tabs-round" in gate.events, "the tool to start")
    expect(second.page.locator("#conversation")).to_contain_text("Looking again.")
    # The first tab follows the chat's run (its Stop button) but draws none of it into the branch it shows.
    expect(first.page.locator("#stop")).to_be_visible(timeout=15_000)
    expect(conversation).to_contain_text("The first answer.")
    expect(conversation).not_to_contain_text("Looking again.")

    gate.release_tool("tabs-round")  # the round is stored: a second version of the answer
    position = first.page.locator(".stored .version-position")
    expect(position).to_have_attribute("aria-label", "Version 1 of 2", timeout=15_000)
    expect(conversation).not_to_contain_text("Looking again.")
    expect(first.page.locator(".user-message")).to_have_count(1)

    # Switching to it while it runs draws it, and its answer arrives live.
    first.page.get_by_role("button", name="Next version").click()
    expect(conversation).to_contain_text("Looking again.")
    expect(conversation).not_to_contain_text("The first answer.")
    release_frame(script)
    release_frame(script)
    expect(conversation).to_contain_text("The s")  # the first words
    expect(conversation).not_to_contain_text("drawn live.")
    finish_response(script, 3)
    expect(conversation).to_contain_text("The second answer, drawn live.")
    expect(first.page.locator("#stop")).to_be_hidden()
    expect(position).to_have_attribute("aria-label", "Version 2 of 2")
    expect(conversation).not_to_contain_text("The first answer.")
    assert branch(served, chat_id) == ["[[tabs]] A question", "Looking again.", "The second answer, drawn live."]
