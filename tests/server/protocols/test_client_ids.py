"""Client-chosen chat ids (`useChat`'s `id`, AG-UI's `threadId`) are each user's own.

Two users using the same id each get their own chat and never see the other's; an id one user used first
is not taken from anyone else; approval responses for an id the user never used answer 404 and create
nothing. Raw HTTP (the protocols' request bodies, as their clients send them), on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import httpx
import orjson
import pytest

from tests.server.support import TOKENS, GateServer, ServerProcess, text
from toolwire.store import SQLStore


def _vercel(chat_id: str, message_id: str, words: str) -> dict[str, Any]:
    return {"id": chat_id, "messages": [{"id": message_id, "role": "user", "parts": [{"type": "text", "text": words}]}]}


def _agui(thread: str, message_id: str, words: str) -> dict[str, Any]:
    return {"threadId": thread, "runId": f"run-{message_id}",
            "messages": [{"id": message_id, "role": "user", "content": words}]}


def _client(server: ServerProcess, user: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, trust_env=False, timeout=30,
                        headers={"Authorization": f"Bearer {TOKENS[user]}"})


def _post(client: httpx.Client, route: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
    with client.stream("POST", route, json=body) as response:
        return response.status_code, response.headers.get("x-chat-id", ""), response.read()


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_two_users_share_a_client_id_without_seeing_each_other(serve: Callable[..., ServerProcess],
                                                               gate: GateServer) -> None:
    server = serve()
    for who in ("alice", "bob"):
        gate.script(f"v-{who}", text(f"Vercel answer for {who}."))
        gate.script(f"a-{who}", text(f"AG-UI answer for {who}."))
    with _client(server, "alice") as alice, _client(server, "bob") as bob, _client(server, "carol") as carol:
        # Bob uses the id first: it is not taken from Alice, and neither learns that the other uses it.
        chats: dict[str, dict[str, str]] = {"vercel": {}, "agui": {}}
        for who, client in (("bob", bob), ("alice", alice)):
            status, chat_id, body = _post(client, "/api/chat", _vercel("shared-id", f"{who}-m1", f"[[v-{who}]] hi"))
            assert status == 200, body
            assert b'"type":"finish"' in body
            chats["vercel"][who] = chat_id
            status, chat_id, body = _post(client, "/api/agui", _agui("shared-thread", f"{who}-m2", f"[[a-{who}]] hi"))
            assert status == 200, body
            assert b"RUN_FINISHED" in body
            started = orjson.loads(body.split(b"data: ", 1)[1].split(b"\n", 1)[0])
            assert started["type"] == "RUN_STARTED" and started["threadId"] == "shared-thread"  # the client's id
            chats["agui"][who] = chat_id
        for protocol in ("vercel", "agui"):
            assert chats[protocol]["alice"] != chats[protocol]["bob"]

        for who, client in (("alice", alice), ("bob", bob)):
            other = "bob" if who == "alice" else "alice"
            history = client.get("/api/chat/shared-id/messages").json()["messages"]
            assert [m["id"] for m in history if m["role"] == "user"] == [f"{who}-m1"]
            words = orjson.dumps(history).decode()
            assert f"answer for {who}" in words and f"answer for {other}" not in words
            # The native routes take the client's id for the user's own chat, and the server's id too...
            native = client.get("/api/chats/shared-thread/messages").json()["messages"]
            assert [r["kind"] for r in native] == ["user", "assistant"]
            assert f"AG-UI answer for {who}" in orjson.dumps(native).decode()
            assert client.get(f"/api/chats/{chats['agui'][who]}").status_code == 200
            # ...but never the other user's.
            for protocol in ("vercel", "agui"):
                assert client.get(f"/api/chats/{chats[protocol][other]}").status_code == 404
            listed = {c["id"] for c in client.get("/api/chats").json()["chats"]}
            assert listed == {chats["vercel"][who], chats["agui"][who]}

        # Approval responses for an id Carol never used: 404 on both protocols, and no chat is made.
        approval = {"id": "never-used", "messages": [{"id": "a1", "role": "assistant", "parts": [
            {"type": "tool-transfer", "toolCallId": "c1", "state": "approval-responded",
             "approval": {"id": "apv-1", "approved": True}}]}]}
        for route, body in (("/api/chat", approval),
                            ("/api/agui", {"threadId": "shared-thread", "runId": "r", "messages": [],
                                           "resume": [{"interruptId": "apv-1", "status": "resolved",
                                                       "payload": True}]})):
            refused = carol.post(route, json=body)
            assert refused.status_code == 404, refused.text
            assert refused.json()["error"]["code"] == "chat_not_found"
        assert carol.get("/api/chats").json()["chats"] == []
        # Reads of an id Carol never used look exactly like an unused id, whoever else uses it.
        for chat_id in ("shared-id", "nobody-uses-this"):
            assert carol.get(f"/api/chat/{chat_id}/messages").json() == {"messages": []}
            assert carol.get(f"/api/chat/{chat_id}/stream").status_code == 204
            assert carol.post(f"/api/chat/{chat_id}/stop").status_code == 404


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_a_chat_stored_under_a_client_id_before_ids_were_scoped_stays_its_owners(serve: Callable[..., ServerProcess],
                                                                              gate: GateServer) -> None:
    server = serve()
    gate.script("legacy", text("Still Alice's."))
    gate.script("bobs", text("Bob's own."))

    async def store_as_before() -> None:  # what earlier versions did: the client's id as the chat's id
        async with SQLStore(server.db_url, migrate=False) as store:
            alice = await store.user_for_token(TOKENS["alice"])
            assert alice is not None
            await store.create_chat(alice.id, "", chat_id="legacy-id")

    anyio.run(store_as_before)
    with _client(server, "alice") as alice, _client(server, "bob") as bob:
        status, chat_id, _ = _post(alice, "/api/chat", _vercel("legacy-id", "a1", "[[legacy]] hi"))
        assert status == 200 and chat_id == "legacy-id"  # the owner goes on with the same chat
        status, bobs, _ = _post(bob, "/api/chat", _vercel("legacy-id", "b1", "[[bobs]] hi"))
        assert status == 200 and bobs != "legacy-id"  # no longer squatted: Bob gets a chat of his own
        for client, first in ((alice, "a1"), (bob, "b1")):
            history = client.get("/api/chat/legacy-id/messages").json()["messages"]
            assert [m["role"] for m in history] == ["user", "assistant"] and history[0]["id"] == first
        assert bob.get("/api/chats/legacy-id").json()["id"] == bobs  # the client's id names Bob's own chat
        assert alice.get("/api/chats/legacy-id").json()["id"] == "legacy-id"
