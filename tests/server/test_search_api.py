"""`GET /api/search` on the real server: what a run stored is found, per user, a page at a time."""

from __future__ import annotations

import pytest

from tests.server.support import Api, GateServer, ServerProcess, text

pytestmark = pytest.mark.anyio


async def test_a_runs_messages_are_found_by_their_owner_only(server: ServerProcess, gate: GateServer) -> None:
    gate.script("fjord", text("Geirangerfjord is a fjord in Norway."))
    async with server.api("alice") as alice, server.api("bob") as bob:
        chat = await alice.new_chat("Travel")
        await alice.run(chat, "[[fjord]] tell me about fjords")
        response = await alice.client.get("/api/search", params={"q": "geiranger"})
        assert response.status_code == 200, response.text
        [hit] = response.json()["results"]
        rows = await alice.rows(chat)
        assert hit["chat"]["id"] == chat and hit["chat"]["title"] == "Travel"
        assert hit["message_id"] == rows[-1]["id"] and hit["sequence_number"] == rows[-1]["sequence_number"]
        assert hit["snippet"] == "Geirangerfjord is a fjord in Norway."
        assert response.json()["next_cursor"] is None
        # The user's own words are found too, and the title.
        assert [h["chat"]["id"] for h in (await alice.client.get("/api/search?q=FJORDS")).json()["results"]] == [chat]
        assert [h["message_id"] for h in (await alice.client.get("/api/search?q=trav")).json()["results"]] == [None]
        # Another user finds nothing of it, however the words are put.
        for query in ("geiranger", "fjord", "travel", "norway"):
            response = await bob.client.get("/api/search", params={"q": query})
            assert response.status_code == 200 and response.json()["results"] == [], query


async def test_pages_follow_the_cursor_to_the_end(server: ServerProcess) -> None:
    async with server.api() as api:
        chats = [await api.new_chat(f"kayak trip {i}") for i in range(5)]
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            params = {"q": "kayak", "limit": "2", **({"cursor": cursor} if cursor else {})}
            body = (await api.client.get("/api/search", params=params)).json()
            seen += [hit["chat"]["id"] for hit in body["results"]]
            pages += 1
            cursor = body["next_cursor"]
            if cursor is None:
                break
        assert seen == list(reversed(chats)) and pages == 3


@pytest.mark.parametrize(("query", "message"), [
    ("", "Say what to search for"),
    ("q=" + "x" * 201, "longer than 200 characters"),
    ("q=a&limit=0", "`limit` must be a whole number from 1 to 50"),
    ("q=a&limit=51", "`limit` must be a whole number from 1 to 50"),
    ("q=a&limit=-1", "`limit` must be a whole number"),
    ("q=a&cursor=abc", "`cursor` must be a whole number from 0 to 1000"),
    ("q=a&cursor=99999999999999999999", "`cursor` must be a whole number"),
    ("q=a&order=new", "Unknown query parameter 'order'"),
])
async def test_bad_queries_get_a_sentence_not_a_500(shared_server: ServerProcess, query: str, message: str) -> None:
    async with shared_server.api() as api:
        response = await api.client.get("/api/search?" + query)
        assert response.status_code == 400, response.text
        assert message in response.json()["error"]["message"]


async def test_search_needs_a_token(shared_server: ServerProcess) -> None:
    async with Api(shared_server.url, None) as anonymous:
        response = await anonymous.client.get("/api/search", params={"q": "anything"})
        assert response.status_code == 401
