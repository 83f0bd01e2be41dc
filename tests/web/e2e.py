"""What the end-to-end web tests share: a chat made through the API, the page opened on it, and frame gates.

The page runs in Chromium against the real `toolwire serve` (the `served` fixture); the test holds the
model's frames and the tools through the gate (tests/server/support.py), so every state it asserts on is
one it stopped the run at, never a race.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.server.support import TOKENS, Script, ServerProcess

from .pages import WebPage

Open = Callable[..., WebPage]


def api(served: ServerProcess, user: str = "alice") -> httpx.Client:
    return httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {TOKENS[user]}"},
                        trust_env=False, timeout=30)


def new_chat(served: ServerProcess, title: str, user: str = "alice") -> str:
    with api(served, user) as client:
        response = client.post("/api/chats", json={"title": title})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])


def chat_detail(served: ServerProcess, chat_id: str, user: str = "alice") -> dict[str, Any]:
    with api(served, user) as client:
        response = client.get(f"/api/chats/{chat_id}")
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()
        return data


def open_chat(served: ServerProcess, web: Open, title: str, **options: Any) -> tuple[str, WebPage]:
    """A new chat of alice's, opened in a fresh page."""
    chat_id = new_chat(served, title)
    return chat_id, web(served.url + "/", token=TOKENS["alice"], chat=chat_id, **options)


def wait(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def release_frame(script: Script) -> None:
    """Let the model send exactly one more frame, and wait until it has gone out."""
    sent = script.sent
    script.release(1)
    wait(lambda: script.sent > sent, "the model's next frame")


def finish_response(script: Script, responses: int) -> None:
    """Release frames one by one until the script has finished `responses` responses (no permit left over)."""
    while script.finished < responses:
        release_frame(script)
