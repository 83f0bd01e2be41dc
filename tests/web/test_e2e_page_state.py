"""What a stored chat shows after a reload that only the live stream used to show, on `toolwire serve` with
its offline model and demo tools, in Chromium: each tool card's timing."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from toolwire.demo_tools import SUGGESTIONS

from .e2e import Open
from .test_e2e_demo import (
    Serve,
    serve as serve,  # the fixture
)

WEATHER = SUGGESTIONS[0]
SECONDS = re.compile(r"\d+(\.\d+)? s")


def test_each_cards_timing_survives_a_reload(serve: Serve, web: Open) -> None:
    serve.start("--fake-delay", "0")
    page = web(serve.url, token=serve.token)
    page.send(WEATHER)
    page.expect_last_run_status("completed", timeout=30_000)
    cards = page.page.locator(".tool-card", has_text="get_weather")
    expect(cards).to_have_count(3)
    live = cards.locator(".tool-time").all_text_contents()
    assert all(SECONDS.fullmatch(t) for t in live), live
    page.reload()
    stored = page.page.locator(".tool-card", has_text="get_weather")
    expect(stored).to_have_count(3)
    expect(stored.locator(".tool-time")).to_have_text(live)  # the same figures the live cards showed
