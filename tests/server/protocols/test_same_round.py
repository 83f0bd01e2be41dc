"""One source of events, one persistence path: the same tool round sent through the native route, the Vercel
route and the AG-UI route is stored as the same `tools_aggregate` row, on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.server.protocols.clients import NodeClients
from tests.server.protocols.conftest import EXTRA_TOOLS
from tests.server.protocols.test_vercel import clean, new_chat
from tests.server.support import TOKENS, GateServer, ServerProcess, calls, text


def round_script(gate: GateServer, tag: str) -> None:
    gate.script(tag, calls(("sleepy", {"seconds": 0.01, "label": "same"}), ("explode", {"why": "same"}),
                           ("big", {"size": 10, "text": "same"}), preamble="One round."),
                text("The round is over."))


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_the_same_round_is_the_same_stored_row_through_every_route(node: NodeClients,
                                                                   serve: Callable[..., ServerProcess],
                                                                   gate: GateServer) -> None:
    server = serve(*EXTRA_TOOLS)
    for tag in ("via-native", "via-vercel", "via-agui"):
        round_script(gate, tag)
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    with httpx.Client(base_url=server.url, trust_env=False, timeout=30, headers=headers) as client:
        native = client.post("/api/chats", json={}).json()["id"]
        with client.stream("POST", f"/api/chats/{native}/messages",
                           json={"client_message_id": "n1", "text": "[[via-native]] go"}) as response:
            assert response.status_code == 200
            response.read()

        vercel = new_chat(node, server)
        clean(node.call("send", name=vercel, text="[[via-vercel]] go"))

        body = {"threadId": "same-round-agui", "runId": "r1",
                "messages": [{"id": "a1", "role": "user", "content": "[[via-agui]] go"}]}
        with client.stream("POST", "/api/agui", json=body) as response:
            assert response.status_code == 200
            assert b"RUN_FINISHED" in response.read()

        def stored(chat_id: str) -> list[dict[str, Any]]:
            rows = client.get(f"/api/chats/{chat_id}/messages").json()["messages"]
            assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant"]
            kept = [rows[1]["messages"], rows[2]["messages"]]
            for messages in kept:
                # The provider's id of each response differs from request to request; the rest is the same.
                assert messages[0]["metadata"].pop("response_id").startswith("chatcmpl-")
            # So does how long each tool took; that each call has one is the same.
            durations = kept[0][1]["metadata"]["toolwire"].pop("durations")
            assert sorted(durations) == sorted(p["call_id"] for p in kept[0][1]["parts"])
            return kept

        through_native = stored(native)
        assert stored(f"ui-{vercel}") == through_native
        assert stored("same-round-agui") == through_native
    results = through_native[0][1]["parts"]
    assert [(r["name"], r["is_error"]) for r in results] == [("sleepy", False), ("explode", True), ("big", False)]
