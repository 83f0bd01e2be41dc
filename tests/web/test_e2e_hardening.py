"""The page against other sites, in Chromium and over the real `toolwire serve`: it cannot be framed, its
responses say how to read them, only its own files are served, and a link cannot silently sign it in as
someone else.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.databases import sqlite_url
from tests.server.support import TOKENS, GateServer, ServerProcess
from toolwire.web import INDEX_HTML, PAGE_POLICY

from .e2e import Open, new_chat
from .pages import WebPage


@pytest.fixture
def other_site() -> Iterator[Callable[[str], str]]:
    """A site on another origin (another port): `other_site(html)` serves `html` at its root, returns its URL."""
    pages: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get("page", b"")
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def serve(html: str) -> str:
        pages["page"] = html.encode()
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield serve
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def framed(browser: Any, outer: str, inner: str) -> tuple[bool, list[str]]:
    """Open `outer`, whose page frames `inner` (with a token): did the framed page start? And the console."""
    context = browser.new_context()
    try:
        page = context.new_page()
        console: list[str] = []
        page.on("console", lambda message: console.append(message.text))
        page.goto(outer)
        page.wait_for_load_state("load")
        page.wait_for_timeout(500)
        child = next(frame for frame in page.frames if frame is not page.main_frame)
        started = False
        if child.url.startswith(inner):
            started = child.locator("#new-chat").count() == 1
        return started, console
    finally:
        context.close()


def test_another_site_cannot_frame_the_page(browser: Any, served: ServerProcess, gate: GateServer,
                                            other_site: Callable[[str], str], tmp_path: Path) -> None:
    inner = served.url + "/"
    outer = other_site(f'<iframe src="{inner}#token={TOKENS["alice"]}" width="800" height="600"></iframe>')
    started, console = framed(browser, outer, inner)
    assert not started
    assert any("frame-ancestors" in line for line in console), console
    # The control: the same page, allowed to be framed by that site, does start in the frame.
    origin = outer.rstrip("/")
    allowing = ServerProcess(db_url=sqlite_url(tmp_path), gate_url=gate.url, folder=tmp_path,
                             args=["--frame-ancestors", origin])
    allowing.start()
    try:
        outer = other_site(f'<iframe src="{allowing.url}/#token={TOKENS["alice"]}" width="800" height="600"></iframe>')
        started, console = framed(browser, outer, allowing.url)
        assert started, console
    finally:
        allowing.stop()


def test_every_response_says_how_to_read_it(served: ServerProcess) -> None:
    with httpx.Client(base_url=served.url, trust_env=False, timeout=30,
                      headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as client:
        page = client.get("/")
        assert page.headers["content-security-policy"] == f"{PAGE_POLICY}; frame-ancestors 'none'"
        assert page.headers["x-frame-options"] == "DENY"
        responses = [page, client.get("/static/app.js"), client.get("/api/chats"), client.get("/nowhere"),
                     client.get("/api/chats", headers={"Authorization": ""})]
        for response in responses:
            assert response.headers["x-content-type-options"] == "nosniff", response.url
            assert response.headers["referrer-policy"] == "no-referrer", response.url
            assert "frame-ancestors 'none'" in response.headers["content-security-policy"], response.url
        assert responses[1].headers["content-type"].startswith("text/javascript")
        chat = new_chat(served, "stream headers")
        with client.stream("GET", f"/api/chats/{chat}/stream") as stream:  # no run: 204, headers all the same
            assert stream.headers["x-content-type-options"] == "nosniff"


def test_the_page_meta_policy_is_the_one_the_server_sends() -> None:
    found = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', INDEX_HTML.read_text())
    assert found and found.group(1) == PAGE_POLICY


@pytest.mark.parametrize("name", ["__init__.py", "package.json", "../server/app.py", "%2e%2e/server/app.py",
                                  "__pycache__/__init__.cpython-311.pyc", "missing.js"])
def test_only_the_page_assets_are_served(served: ServerProcess, name: str) -> None:
    response = httpx.get(f"{served.url}/static/{name}", trust_env=False, timeout=30)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_page_assets_are_served(served: ServerProcess) -> None:
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css"), ("render.js", "text/javascript")):
        response = httpx.get(f"{served.url}/static/{name}", trust_env=False, timeout=30)
        assert response.status_code == 200 and response.headers["content-type"].startswith(kind), name


def test_me_names_the_tokens_user(served: ServerProcess) -> None:
    for user, token in TOKENS.items():
        response = httpx.get(f"{served.url}/api/me", headers={"Authorization": f"Bearer {token}"}, trust_env=False)
        assert response.status_code == 200 and response.json() == {"name": user, "suggestions": []}
    refused = httpx.get(f"{served.url}/api/me", trust_env=False)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"


def stored_token(page: WebPage) -> str:
    return str(page.page.evaluate("localStorage.getItem('toolwire.token')"))


def test_a_link_with_another_users_token_asks_before_switching(served: ServerProcess, web: Open) -> None:
    mine = new_chat(served, "alice's own chat")
    theirs = new_chat(served, "bob's chat", user="bob")
    page = web(served.url + "/", token=TOKENS["alice"])
    expect(page.page.locator("#signed-in")).to_have_text("Signed in as alice")
    expect(page.page.locator(f'.chat-item[data-chat-id="{mine}"]')).to_be_visible()
    assert "token=" not in page.page.url

    # A link made by bob (say, on his site), opened in a new tab of the same browser.
    attacked = WebPage(page.context, served.url + "/")
    try:
        attacked.goto(token=TOKENS["bob"])
        box = attacked.page.locator("#switch")
        expect(box).to_be_visible()
        expect(box).to_contain_text("signs in as bob")
        expect(box).to_contain_text("You are signed in as alice")
        # Until the person says so, nothing is bob's: the token, the name shown, the chats listed.
        assert stored_token(attacked) == TOKENS["alice"]
        expect(attacked.page.locator("#signed-in")).to_have_text("Signed in as alice")
        expect(attacked.page.locator(f'.chat-item[data-chat-id="{mine}"]')).to_be_visible()
        expect(attacked.page.locator(f'.chat-item[data-chat-id="{theirs}"]')).to_have_count(0)
        attacked.page.locator("#switch-no").click()
        expect(box).to_be_hidden()
        assert stored_token(attacked) == TOKENS["alice"]
        assert "token=" not in attacked.page.url

        # The link opened again, in the same tab (the address changes only its fragment): asked again, the
        # person does switch, and the page is bob's and says so.
        attacked.goto(token=TOKENS["bob"])
        expect(box).to_be_visible()
        attacked.page.locator("#switch-yes").click()
        expect(box).to_be_hidden()
        expect(attacked.page.locator("#signed-in")).to_have_text("Signed in as bob")
        expect(attacked.page.locator(f'.chat-item[data-chat-id="{theirs}"]')).to_be_visible()
        expect(attacked.page.locator(f'.chat-item[data-chat-id="{mine}"]')).to_have_count(0)
        assert stored_token(attacked) == TOKENS["bob"]

        # A token the server refuses changes nothing, and says so.
        attacked.goto(token="not-a-valid-token-0123456789")
        expect(box).to_be_visible()
        expect(box).to_contain_text("did not work")
        expect(attacked.page.locator("#switch-yes")).to_be_hidden()
        assert stored_token(attacked) == TOKENS["bob"]
        expect(attacked.page.locator("#signed-in")).to_have_text("Signed in as bob")
        assert attacked.problems() == []
    finally:
        attacked.page.close()


def test_a_link_with_the_same_users_token_or_on_a_fresh_browser_signs_in_at_once(served: ServerProcess,
                                                                                 web: Open) -> None:
    page = web(served.url + "/", token=TOKENS["carol"])
    expect(page.page.locator("#signed-in")).to_have_text("Signed in as carol")
    expect(page.page.locator("#switch")).to_be_hidden()
    again = WebPage(page.context, served.url + "/")
    try:
        again.goto(token=TOKENS["carol"])
        expect(again.page.locator("#signed-in")).to_have_text("Signed in as carol")
        expect(again.page.locator("#switch")).to_be_hidden()
        assert again.problems() == []
    finally:
        again.page.close()
