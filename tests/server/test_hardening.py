"""Production hardening of `toolwire serve`: bad cursors, short secrets, quotas on writes, hostile bodies.

Each test runs the real command (`python -m toolwire serve`) and talks to it over loopback, on SQLite and
PostgreSQL where the database takes part.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.server.support import GateServer, ServerProcess, calls, text

pytestmark = pytest.mark.anyio


async def test_cursors_beyond_32_bits_are_invalid_not_server_errors(serve: Callable[..., ServerProcess],
                                                                    gate: GateServer) -> None:
    server = serve()
    gate.script("c", text("Stored."))
    async with server.api() as api:
        chat = await api.new_chat()
        assert (await api.run(chat, "[[c]] hi"))[-1].data["status"] == "completed"
        for cursor in ("2147483648-1", "1-2147483648", "999999999999999-0", "4294967296-0"):
            for how in ("header", "query"):
                if how == "header":
                    response = await api.client.get(f"/api/chats/{chat}/stream", headers={"Last-Event-ID": cursor})
                else:
                    response = await api.client.get(f"/api/chats/{chat}/stream", params={"after": cursor})
                assert response.status_code == 400, (cursor, how, response.text)
                assert response.json()["error"]["code"] == "invalid_cursor"
            # The Vercel stream resumes from the active run's start; a cursor it is sent changes nothing.
            resumed = await api.client.get(f"/api/chat/{chat}/stream", headers={"Last-Event-ID": cursor})
            assert resumed.status_code == 204, resumed.text
        # The largest cursor that fits is still an ordinary one: this chat has no such event.
        largest = await api.client.get(f"/api/chats/{chat}/stream", headers={"Last-Event-ID": "2147483647-0"})
        assert largest.status_code == 400 and largest.json()["error"]["code"] == "invalid_cursor"


async def test_a_short_api_key_is_not_redacted_from_results(serve: Callable[..., ServerProcess],
                                                           gate: GateServer) -> None:
    server = serve("--api-key", "x", "--redact", "ab", "--redact", "long-enough-secret")
    gate.script("r", calls(("big", {"size": 12, "text": "ab x long-enough-secret"})), text("Seen."))
    async with server.api() as api:
        chat = await api.new_chat()
        events = await api.run(chat, "[[r]] show")
        rows = await api.rows(chat)
    [streamed] = [e.data["result"]["result"] for e in events if e.type == "tool_result"]
    stored = rows[1]["messages"][1]["parts"][0]["result"]
    assert streamed == stored == {"text": "ab x [REDACTED]", "filler": "x" * 12}
