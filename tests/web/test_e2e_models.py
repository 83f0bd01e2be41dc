"""End to end, the model picker: a `toolwire serve` with two models (both at the gate, which records the `model`
each request names), the page's <select> choosing the second, and the provider receiving it.

One server for the module (two models), beside the package's one-model server, where the picker stays hidden.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.databases import sqlite_url
from tests.server.support import TOKENS, GateServer, ServerProcess, text

from .axe import assert_accessible
from .e2e import Open, chat_detail, open_chat

pytestmark = pytest.mark.timeout(600)  # the first axe check may install axe-core

OTHER = "openai:gate-other"


@pytest.fixture(scope="module")
def two_models(gate: GateServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("toolwire-two-models")
    process = ServerProcess(db_url=sqlite_url(folder), gate_url=gate.url, folder=folder,
                            args=["--model", OTHER, "--writes-per-minute", "100000"])
    process.start()
    yield process
    process.stop()


def models_sent(gate: GateServer, tag: str) -> list[str]:
    """The `model` of each provider request of the messages tagged `[[tag]]`."""
    return [str(body["model"]) for body in gate.bodies
            if any(f"[[{tag}]]" in str(m.get("content")) for m in body.get("messages", []))]


@pytest.mark.parametrize(("width", "dark"), [(1280, False), (390, True)])
def test_choose_the_second_model_for_a_chat(two_models: ServerProcess, gate: GateServer, web: Open, width: int,
                                            dark: bool) -> None:
    tag = f"pick-{width}"
    gate.script(tag, text("From the default."), text("From the other model."))
    chat_id, page = open_chat(two_models, web, f"Models {width}", width=width, dark=dark)
    picker = page.page.get_by_role("combobox", name="Model")
    expect(picker).to_be_visible()
    expect(picker).to_have_value("openai:gate-model")  # a chat without a choice shows the default
    expect(picker.locator("option")).to_have_text(["openai:gate-model", OTHER])

    page.send(f"[[{tag}]] first")
    page.expect_last_run_status("completed")
    picker.select_option(OTHER)
    page.page.wait_for_function(f"() => document.querySelector('#model').value === {OTHER!r}")
    # Stored with the chat at once, for its next run.
    for _ in range(100):
        if chat_detail(two_models, chat_id)["model"] == OTHER:
            break
        page.page.wait_for_timeout(20)
    assert chat_detail(two_models, chat_id)["model"] == OTHER
    page.send(f"[[{tag}]] second")
    expect(page.page.locator(".run")).to_have_count(2)
    page.expect_last_run_status("completed")
    assert models_sent(gate, tag) == ["gate-model", "gate-other"]
    expect(page.page.get_by_text("From the other model.")).to_be_visible()
    if width == 390:
        box = picker.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390
        assert page.page.evaluate("document.documentElement.scrollWidth") <= 390
    assert_accessible(page.page, f"the model picker at {width} px")

    page.reload()  # the choice is the chat's: a reload shows it
    expect(picker).to_have_value(OTHER)


def test_a_new_chat_is_made_on_the_model_picked_before_its_first_message(two_models: ServerProcess,
                                                                          gate: GateServer, web: Open) -> None:
    gate.script("fresh", text("Made on the other model."))
    page = web(two_models.url + "/", token=TOKENS["alice"])
    picker = page.page.get_by_role("combobox", name="Model")
    expect(picker).to_have_value("openai:gate-model")
    picker.select_option(OTHER)
    page.send("[[fresh]] a new chat")
    page.expect_last_run_status("completed")
    assert models_sent(gate, "fresh") == ["gate-other"]
    expect(picker).to_have_value(OTHER)
    page.page.get_by_role("button", name="New chat", exact=True).click()
    expect(picker).to_have_value("openai:gate-model")  # each chat its own: a new one starts on the default


def test_one_model_shows_no_picker(served: ServerProcess, web: Open) -> None:
    _, page = open_chat(served, web, "One model")
    expect(page.page.locator("#message")).to_be_visible()
    page.page.wait_for_load_state("networkidle")
    expect(page.page.locator("#model-picker")).to_be_hidden()
