"""Creating a chat over HTTP (the insert is a statement built once, with bound parameters): what the server
answers is what it stored, for its owner only, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.server.support import ServerProcess, read_events

pytestmark = pytest.mark.anyio


async def test_a_created_chat_is_stored_as_answered_and_only_for_its_owner(
        serve: Callable[..., ServerProcess]) -> None:
    server = serve()
    async with server.api("alice") as alice, server.api("bob") as bob:
        created = []
        for title in ("First", "  Second  ", ""):
            response = await alice.client.post("/api/chats", json={"title": title} if title else {})
            assert response.status_code == 201, response.text
            created.append(response.json())
        assert [chat["title"] for chat in created] == ["First", "Second", ""]
        assert len({chat["id"] for chat in created}) == 3
        for chat in created:
            stored = (await alice.client.get(f"/api/chats/{chat['id']}")).json()
            assert stored == {**chat, **{k: stored[k] for k in stored if k not in chat}}
            assert stored["created_at"] == stored["updated_at"] == chat["created_at"]
            assert (await bob.client.get(f"/api/chats/{chat['id']}")).status_code == 404
        listed = (await alice.client.get("/api/chats")).json()["chats"]
        # Listed from the database (a chat just created is answered from the store's cache by id).
        assert sorted(listed, key=lambda chat: chat["id"]) == sorted(created, key=lambda chat: chat["id"])
        assert (await bob.client.get("/api/chats")).json()["chats"] == []
        # The chat takes messages: it was stored whole, with its owner.
        chat = created[0]["id"]
        async with alice.client.stream("POST", f"/api/chats/{chat}/messages",
                                       json={"client_message_id": "1", "text": "hi"}) as response:
            assert response.status_code == 200
            await response.aread()
        messages = (await alice.client.get(f"/api/chats/{chat}/messages")).json()
        assert messages["messages"][0]["role"] == "user" and "hi" in str(messages["messages"][0])


async def test_a_chat_and_its_first_message_in_one_request(serve: Callable[..., ServerProcess]) -> None:
    server = serve()
    async with server.api("alice") as alice, server.api("bob") as bob:
        async with alice.client.stream("POST", "/api/chats", json={
                "message": {"client_message_id": "first", "text": "What is the weather in Paris?"}}) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            chat = response.headers["x-chat-id"]
            assert response.headers["location"] == f"/api/chats/{chat}/stream" and response.headers["x-run-id"]
            events = [event async for event in read_events(response)]
        assert events[0].type == "run_started" and events[-1].type == "run_finished", [e.type for e in events]
        assert events[-1].data["status"] == "completed"
        stored = (await alice.client.get(f"/api/chats/{chat}")).json()
        assert stored["title"] == "What is the weather in Paris?" and stored["active_run"] is None
        rows = (await alice.client.get(f"/api/chats/{chat}/messages")).json()["messages"]
        assert [row["role"] for row in rows][:2] == ["user", "assistant"]
        assert rows[0]["messages"][0]["parts"][0]["text"] == "What is the weather in Paris?"
        assert [c["id"] for c in (await alice.client.get("/api/chats")).json()["chats"]] == [chat]
        assert (await bob.client.get(f"/api/chats/{chat}")).status_code == 404
        # A client that lost the stream sends the message again to the chat `X-Chat-Id` named: it attaches to the
        # run the first request started.
        async with alice.client.stream("POST", f"/api/chats/{chat}/messages", json={
                "client_message_id": "first", "text": "What is the weather in Paris?"}) as again:
            assert again.headers["x-run-id"] == response.headers["x-run-id"]
            await again.aread()


@pytest.mark.parametrize(("message", "code"), [
    ({"client_message_id": "1", "text": "  "}, "invalid_request"),
    ({"client_message_id": "1", "text": "hi", "parent_id": "msg_elsewhere"}, "invalid_request"),
    ({"client_message_id": "1", "text": "hi", "files": ["file_1"]}, "invalid_request"),
    ({"client_message_id": "1", "text": "hi", "model": "no-such-model"}, None),
])
async def test_a_first_message_refused_leaves_no_chat(serve: Callable[..., ServerProcess], message: dict[str, object],
                                                       code: str | None) -> None:
    server = serve()
    async with server.api("alice") as alice:
        response = await alice.client.post("/api/chats", json={"message": message})
        assert response.status_code in (404, 422), response.text
        if code is not None:
            assert response.json()["error"]["code"] == code
        assert (await alice.client.get("/api/chats")).json()["chats"] == []


async def test_a_rate_limited_first_message_leaves_no_chat(serve: Callable[..., ServerProcess]) -> None:
    server = serve("--runs-per-minute", "1")
    async with server.api("alice") as alice:
        async with alice.client.stream("POST", "/api/chats", json={
                "message": {"client_message_id": "1", "text": "one"}}) as response:
            assert response.status_code == 200
            await response.aread()
        refused = await alice.client.post("/api/chats", json={"message": {"client_message_id": "2", "text": "two"}})
        assert refused.status_code == 429, refused.text
        assert [c["title"] for c in (await alice.client.get("/api/chats")).json()["chats"]] == ["one"]
