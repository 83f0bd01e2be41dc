"""`toolwire serve` with no arguments (only `--port 0`), opened in Chromium as its printed URL says.

The product as a person first meets it: the offline fake model and the demo tools. Asking for the weather
in three cities makes three cards whose arguments stream in, that run in parallel and answer out of order
(each city's weather takes its own time), and the whole conversation survives a reload. The screenshot
in the web client guide (docs/web-client.png) is the one this test saves as `serve-weather.png`.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.server.test_serve_cli import clean_env, stop

from .e2e import Open

QUESTION = "What's the weather in Paris, Tokyo and Lima?"


@pytest.fixture
def serve_no_args(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """`toolwire serve --port 0` in an empty folder, without provider keys; yields the URL and token it printed."""
    process = subprocess.Popen([sys.executable, "-m", "toolwire", "serve", "--port", "0"], cwd=tmp_path,
                               env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(line.startswith("Open ") for line in lines):
        lines.append(process.stdout.readline().decode())
    try:
        opened = next((line for line in lines if line.startswith("Open ")), "")
        found = re.fullmatch(r"Open (http://127\.0\.0\.1:\d+/)#token=(\S+)\n", opened)
        assert found, lines
        yield found.group(1), found.group(2)
    finally:
        stop(process)


def cards_of(page: object) -> list[tuple[str, str, str]]:
    """Every card on the page: (tool name, arguments text, status)."""
    return [tuple(card) for card in page.page.evaluate(  # type: ignore[attr-defined]
        """() => [...document.querySelectorAll(".tool-card")].map((card) => [
            card.querySelector(".tool-name").textContent, card.querySelector(".tool-args pre").textContent,
            card.dataset.status])""")]


def test_the_weather_in_three_cities_streams_runs_in_parallel_and_survives_a_reload(
        serve_no_args: tuple[str, str], web: Open, screenshots: Path) -> None:
    url, token = serve_no_args
    page = web(url, token=token)
    expect(page.page.locator("#empty")).to_be_visible()
    page.send(QUESTION)  # into the empty page: a chat named after the question
    chat_link = page.page.locator('.chat-link[aria-current="page"]')
    expect(chat_link).to_have_text(QUESTION)
    expect(page.page.locator("#list-message")).to_have_text("")
    # A long title ends in an ellipsis inside the list, the delete button beside it.
    sidebar = page.page.locator("#sidebar").bounding_box()
    delete = page.page.locator('.chat-item .delete').bounding_box()
    assert sidebar is not None and delete is not None and delete["x"] + delete["width"] <= sidebar["width"]
    cards = page.page.locator(".tool-card")
    expect(cards).to_have_count(3)
    ids = [cards.nth(i).get_attribute("data-call-id") or "" for i in range(3)]
    expect(cards.first).to_have_attribute("data-status", "done", timeout=10_000)  # Paris answers first
    page.screenshot(screenshots / "serve-weather.png")
    page.expect_last_run_status("completed", timeout=15_000)

    # The cards streamed: each showed partial arguments, growing, while they arrived (deltas 20 ms apart;
    # two that reach a busy page in one task are drawn once, so only a partial text before the whole is
    # asserted here; test_e2e_runs.py holds every delta and sees each one).
    for call_id in ids:
        shown_while_streaming = [text for text, status in page.arguments_log(call_id) if status == "streaming" and text]
        growing = [text for text, _ in itertools.groupby(shown_while_streaming)]
        assert len(growing) >= 2 and all(len(a) < len(b) for a, b in itertools.pairwise(growing)), growing
        assert not growing[0].startswith("{\n"), "raw, unparsable text first"
    # They ran in parallel: all three were running before the first result came.
    log = page.card_log()
    first_done = next(i for i, (_, status) in enumerate(log) if status == "done")
    assert {cid for cid, status in log[:first_done] if status == "executing"} == set(ids)
    # And answered out of order: Paris, then Lima, then Tokyo (each city's weather takes its own time).
    assert [cid for cid, status in log if status == "done"] == [ids[0], ids[2], ids[1]]
    shown = cards_of(page)
    assert [(name, re.sub(r"\s", "", args)) for name, args, _ in shown] == [
        ("get_weather", '{"city":"Paris"}'), ("get_weather", '{"city":"Tokyo"}'), ("get_weather", '{"city":"Lima"}')]
    answer = page.page.locator(".md", has_text="Here is the weather")
    expect(answer.locator("li")).to_have_count(3)
    assert "{" not in (answer.text_content() or ""), "a summary in sentences, not JSON"
    said = answer.text_content() or ""

    page.reload()  # the whole conversation, from the server's rows
    expect(page.page.locator(".stored .tool-card")).to_have_count(3)
    assert cards_of(page) == shown
    expect(page.page.locator(".user-message")).to_have_text(QUESTION)
    expect(page.page.locator(".md", has_text="Here is the weather")).to_have_text(said)
    expect(page.page.locator(".stored-run .run-usage")).to_contain_text(" out tokens · 2 steps · ")
    assert page.conversation_text().count("Here is the weather") == 1

    page.page.set_viewport_size({"width": 390, "height": 844})  # a phone
    page.wait_until("document.getElementById('sidebar').getBoundingClientRect().right <= 0")
    assert page.page.evaluate("document.documentElement.scrollWidth") <= 390, "nothing scrolls sideways"
    boxes = [cards.nth(i).bounding_box() for i in range(3)]
    assert all(b is not None and b["x"] >= 0 and b["x"] + b["width"] <= 390 for b in boxes), boxes
    page.screenshot(screenshots / "e2e-narrow.png")
