"""axe-core finds no accessibility violation on any screen the browser tests show, light and dark.

The screens of the real `toolwire serve` with its offline demo (empty, then a finished answer with tool
cards), and, on the contract server (contract_server.py) with the recorded sequences: the sign-in card, the
empty page, a chat with Markdown text (a highlighted code block, a table, lists, a quote, links) and tool
cards, a tool call waiting for approval, a provider error and failed tools. axe runs with WCAG 2.x A/AA and
best-practice rules (tests/web/axe.py), so colour contrast, names of controls, landmarks and headings count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .axe import assert_accessible
from .contract_server import ContractServer
from .pages import WebPage
from .sequences import load
from .test_contract_streaming import started
from .test_e2e_serve import QUESTION, serve_no_args  # noqa: F401 (a fixture)

Open = Callable[..., WebPage]
# The first test may install axe-core (npm ci of web-build/) before it runs.
pytestmark = pytest.mark.timeout(600)

MARKDOWN = """## Forecast

The **three cities**, in the order they answered:

1. Tokyo
2. Paris
3. Lima

| City | °C |
|:-----|---:|
| Paris | 18 |

- [x] checked the sources
- [ ] booked a table

> Weather changes; check again before you go.

```python
def warmest(cities: dict[str, float]) -> str:
    # The city with the highest temperature.
    return max(cities, key=cities.get)  # "Paris"
```

```diff
- rain
+ sun
```

See [the forecast](https://weather.example/paris), `max()` and ![map](https://maps.example/p.png).
"""


@pytest.fixture
def server() -> Iterator[ContractServer]:
    with ContractServer() as running:
        yield running


def test_sign_in_card(server: ContractServer, web: Open) -> None:
    page = web(server.url)
    expect(page.page.locator("#login")).to_be_visible()
    assert_accessible(page.page, "sign-in")
    page = web(server.url, token="wrong")
    expect(page.page.locator("#login-message")).to_contain_text("The access token was not accepted.")
    assert_accessible(page.page, "sign-in, token refused")


def test_empty_page(server: ContractServer, web: Open) -> None:
    page = web(server.url, token=server.token)
    expect(page.page.locator("#empty")).to_be_visible()
    assert_accessible(page.page, "empty")


@pytest.mark.parametrize("width", [1280, 390], ids=["desktop", "phone"])
def test_chat_with_markdown_and_tool_cards(server: ContractServer, web: Open, width: int, screenshots: Path) -> None:
    seq = load("parallel_out_of_order")
    chat_id = seq["chat"]["id"]
    frames = [f for f in seq["frames"] if f["data"]["type"] != "text_delta" or f["data"]["step"] == 0]
    finished = frames[-1]
    text = {"id": "1-900", "data": {"type": "text_delta", "run_id": "run-w1", "step": 1, "text": f"\n\n{MARKDOWN}"}}
    server.add_chat(seq["chat"])
    server.script(chat_id, [*frames[:-1], text, {**finished, "id": "1-901"}])
    page = web(server.url, token=server.token, chat=chat_id, width=width, height=844)
    page.send("What's the weather in Paris, Tokyo and Lima?")
    server.wait_for_run(chat_id)
    server.release(chat_id)
    page.expect_run_status("run-w1", "completed")
    expect(page.page.locator(".md pre .hljs-keyword").first).to_have_text("def")
    expect(page.page.locator(".md ol li")).to_have_count(3)
    expect(page.page.locator(".tool-card")).to_have_count(3)
    assert_accessible(page.page, f"chat with text and tool cards ({width}px)")
    page.page.locator(".md h2").last.scroll_into_view_if_needed()
    for scheme in ("light", "dark"):
        page.page.emulate_media(color_scheme=scheme)
        page.screenshot(screenshots / f"markdown-{width}-{scheme}.png")


def test_tool_waiting_for_approval(server: ContractServer, web: Open) -> None:
    seq, page = started(server, web, "approval")
    server.script(seq["chat"]["id"], seq["denied"])
    server.release(seq["chat"]["id"])
    page.expect_status("call_pay", "awaiting_approval")
    assert_accessible(page.page, "approval")


def test_provider_error_and_failed_tools(server: ContractServer, web: Open) -> None:
    seq, page = started(server, web, "provider_error")
    server.release(seq["chat"]["id"])
    page.expect_run_status("run-e1", "failed")
    assert_accessible(page.page, "provider error")
    seq, page = started(server, web, "failing_and_invalid")
    server.release(seq["chat"]["id"])
    page.expect_run_status("run-f1", "completed")
    page.expect_status("call_convert", "error")
    page.page.locator(".tool-result summary").first.click()
    assert_accessible(page.page, "failed and invalid tool calls")


def test_a_code_theme_colour_meets_aa_in_both_schemes(server: ContractServer, web: Open) -> None:
    """The highlight theme is applied (not only present): a keyword is coloured, differently in each scheme."""
    seq = load("parallel_out_of_order")
    chat_id = seq["chat"]["id"]
    frames = [f for f in seq["frames"] if f["data"]["type"] != "text_delta" or f["data"]["step"] == 0]
    text = {"id": "1-900", "data": {"type": "text_delta", "run_id": "run-w1", "step": 1, "text": f"\n\n{MARKDOWN}"}}
    server.add_chat(seq["chat"])
    server.script(chat_id, [*frames[:-1], text, {**frames[-1], "id": "1-901"}])
    page = web(server.url, token=server.token, chat=chat_id)
    page.send("What's the weather in Paris, Tokyo and Lima?")
    server.wait_for_run(chat_id)
    server.release(chat_id)
    keyword = page.page.locator(".md pre .hljs-keyword").first
    expect(keyword).to_have_text("def")
    colours: dict[str, Any] = {}
    for scheme in ("light", "dark"):
        page.page.emulate_media(color_scheme=scheme)
        colours[scheme] = keyword.evaluate("(node) => [getComputedStyle(node).color, getComputedStyle(node.closest('pre')).backgroundColor]")
    assert colours["light"] == ["rgb(179, 38, 30)", "rgb(240, 241, 244)"], colours
    assert colours["dark"] == ["rgb(255, 138, 128)", "rgb(38, 42, 48)"], colours


def test_serve_offline_demo(serve_no_args: tuple[str, str], web: Open) -> None:  # noqa: F811
    url, token = serve_no_args
    page = web(url, token=token)
    expect(page.page.locator("#empty")).to_be_visible()
    assert_accessible(page.page, "serve: empty")
    page.send(QUESTION)
    page.expect_last_run_status("completed", timeout=30_000)
    expect(page.page.locator(".tool-card")).to_have_count(3)
    assert_accessible(page.page, "serve: an answer with tool cards")
    page.reload()
    expect(page.page.locator(".stored .tool-card")).to_have_count(3)
    assert_accessible(page.page, "serve: the stored chat")
