"""Creating a chat over HTTP (the insert is a statement built once, with bound parameters): what the server
answers is what it stored, for its owner only, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.server.support import ServerProcess

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
