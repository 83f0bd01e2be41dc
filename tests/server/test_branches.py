"""Branching chats through the native API, on the real server: edit (a message under an earlier parent),
regenerate, reading a branch with its siblings, switching the active branch; what the model is shown."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.support import Api, Event, GateServer, ServerProcess, calls, read_events, text
from toolwire.testing import FakeStreamError, FakeText, FakeTurn

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(shared_server: ServerProcess) -> ServerProcess:
    """The tests taking `server` use chats and gate tags of their own: they share one server per database."""
    return shared_server


def shown(gate: GateServer, index: int = -1) -> list[str]:
    """The texts of the messages the fake model was shown in its `index`-th request (system prompt left out)."""
    out = []
    for message in gate.bodies[index]["messages"]:
        if message["role"] == "system":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        out.append(str(content or ""))
    return out


async def post(api: Api, path: str, body: dict[str, Any] | None = None, method: str = "POST") -> list[Event]:
    async with api.client.stream(method, path, json=body) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        return [event async for event in read_events(response)]


async def branch(api: Api, chat: str, leaf: str | None = None) -> dict[str, Any]:
    response = await api.client.get(f"/api/chats/{chat}/messages", params={"leaf": leaf} if leaf else {})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def texts(body: dict[str, Any]) -> list[str]:
    return [p["text"] for row in body["messages"] for m in row["messages"] for p in m["parts"] if p["type"] == "text"]


async def test_edit_regenerate_and_switch(server: ServerProcess, gate: GateServer) -> None:
    gate.script("one", text("First answer."))
    gate.script("two", text("Second answer."))
    gate.script("edit", text("Edited answer."), text("Edited answer, again."))
    async with server.api() as api:
        chat = await api.new_chat()
        await api.run(chat, "[[one]] one")
        await api.run(chat, "[[two]] two")
        before = await branch(api, chat)
        u1, a1, u2, a2 = (row["id"] for row in before["messages"])
        assert before["leaf_id"] == a2
        assert [row["parent_id"] for row in before["messages"]] == [None, u1, a1, u2]

        # Edit "two": a new user message under the first answer. The model sees that branch only.
        events = await api.run(chat, "[[edit]] two, edited", parent_id=a1)
        started = events[0].data
        assert started["type"] == "run_started"
        assert started["user_message"]["parent_id"] == a1
        u2b = started["user_message"]["id"]
        assert started["leaf_id"] == u2b
        assert shown(gate) == ["[[one]] one", "First answer.", "[[edit]] two, edited"]
        edited = await branch(api, chat)
        assert texts(edited) == ["[[one]] one", "First answer.", "[[edit]] two, edited", "Edited answer."]
        assert edited["messages"][2]["sibling_ids"] == [u2, u2b]
        assert edited["messages"][0]["sibling_ids"] == [u1]

        # The old branch is whole, and switching to it is one request that answers it.
        assert texts(await branch(api, chat, u2)) == ["[[one]] one", "First answer.", "[[two]] two", "Second answer."]
        response = await api.client.put(f"/api/chats/{chat}/leaf", json={"message_id": u2})
        assert response.status_code == 200, response.text
        assert response.json()["leaf_id"] == a2
        assert (await branch(api, chat))["leaf_id"] == a2

        # Regenerate the edited answer: a sibling of it, the user message not stored again.
        a2b = edited["leaf_id"]
        events = await post(api, f"/api/chats/{chat}/messages/{a2b}/regenerate", {"client_message_id": "regen-1"})
        started = events[0].data
        assert started["leaf_id"] == u2b and started["user_message"] is None
        assert events[-1].data["status"] == "completed"
        assert shown(gate) == ["[[one]] one", "First answer.", "[[edit]] two, edited"]
        regenerated = await branch(api, chat)
        assert texts(regenerated) == ["[[one]] one", "First answer.", "[[edit]] two, edited",
                                      "Edited answer, again."]
        assert regenerated["messages"][3]["sibling_ids"] == [a2b, regenerated["leaf_id"]]
        rows = (await api.client.get(f"/api/chats/{chat}/messages", params={"leaf": u2})).json()["messages"]
        assert [r["sequence_number"] for r in rows] == [1, 2, 3, 4]
        # The same regenerate request again attaches to its run instead of starting another.
        async with api.client.stream("POST", f"/api/chats/{chat}/messages/{a2b}/regenerate",
                                     json={"client_message_id": "regen-1"}) as again:
            assert again.status_code == 200
            assert again.headers["x-run-id"] == started["run_id"]


async def test_a_new_first_message_and_the_model_keeps_a_tool_round_on_its_branch(server: ServerProcess,
                                                                                   gate: GateServer) -> None:
    gate.script("tools", calls(("sleepy", {"seconds": 0.01, "label": "t"})), text("Used a tool."))
    gate.script("fresh", text("A fresh start."))
    async with server.api() as api:
        chat = await api.new_chat()
        await api.run(chat, "[[tools]] use a tool")
        first = await branch(api, chat)
        assert [row["kind"] for row in first["messages"]] == ["user", "tools_aggregate", "assistant"]
        await api.run(chat, "[[fresh]] start again", parent_id="root")
        assert shown(gate) == ["[[fresh]] start again"]
        fresh = await branch(api, chat)
        assert fresh["messages"][0]["sibling_ids"] == [first["messages"][0]["id"], fresh["messages"][0]["id"]]
        assert [row["kind"] for row in fresh["messages"]] == ["user", "assistant"]


async def test_refusals(server: ServerProcess, gate: GateServer) -> None:
    gate.script("busy", calls(("gated", {"label": "hold"})), text("Done."))
    async with server.api() as api, server.api("bob") as bob:
        chat = await api.new_chat()
        await api.run(chat, "hello")
        user_row, answer = (row["id"] for row in (await branch(api, chat))["messages"])
        bob_chat = await bob.new_chat()
        await bob.run(bob_chat, "bob's")
        bob_row = (await branch(bob, bob_chat))["messages"][0]["id"]

        # Another user's chat is absent on every route; another chat's row is absent in this one.
        for method, path, body in (("POST", f"/api/chats/{chat}/messages/{answer}/regenerate", {}),
                                   ("PUT", f"/api/chats/{chat}/leaf", {"message_id": answer}),
                                   ("GET", f"/api/chats/{chat}/messages?leaf={answer}", None)):
            response = await bob.client.request(method, path, json=body)
            assert response.status_code == 404 and response.json()["error"]["code"] == "chat_not_found"
        for method, path, body in (("POST", f"/api/chats/{chat}/messages/{bob_row}/regenerate", {}),
                                   ("PUT", f"/api/chats/{chat}/leaf", {"message_id": bob_row}),
                                   ("GET", f"/api/chats/{chat}/messages?leaf={bob_row}", None),
                                   ("POST", f"/api/chats/{chat}/messages",
                                    {"client_message_id": "x1", "text": "hi", "parent_id": bob_row})):
            response = await api.client.request(method, path, json=body)
            assert response.status_code == 404, response.text
            assert response.json()["error"]["code"] == "message_not_found"
        response = await api.client.post(f"/api/chats/{chat}/messages",
                                         json={"client_message_id": "x2", "text": "hi", "parent_id": user_row})
        assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_parent"
        response = await api.client.put(f"/api/chats/{chat}/leaf", json={"message_id": ""})
        assert response.status_code == 422
        response = await api.client.post(f"/api/chats/{chat}/messages/{answer}/regenerate", content=b"[1]")
        assert response.status_code == 422

        # While a run is going, regenerating and editing are refused as a second message is (409).
        async with api.send(chat, "[[busy]] hold on") as response:
            async for event in read_events(response):
                if event.type != "tool_started":
                    continue
                for path, body in ((f"/api/chats/{chat}/messages/{answer}/regenerate", {}),
                                   (f"/api/chats/{chat}/messages", {"client_message_id": "x3", "text": "edit",
                                                                   "parent_id": answer})):
                    refused = await api.client.post(path, json=body)
                    assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_active"
                gate.release_tool("hold")
        assert len((await branch(api, chat))["messages"]) == 5  # nothing of the refusals was stored


async def test_retry_after_a_failed_run_stores_nothing_twice(server: ServerProcess, gate: GateServer) -> None:
    gate.script("flaky", FakeTurn(parts=[FakeText(text="partial")], error=FakeStreamError(after=0)),
                text("Worked this time."))
    async with server.api() as api:
        chat = await api.new_chat()
        events = await api.run(chat, "[[flaky]] try")
        assert events[-1].data["status"] == "failed"
        [user_row] = [row for row in (await branch(api, chat))["messages"] if row["kind"] == "user"]
        events = await post(api, f"/api/chats/{chat}/messages/{user_row['id']}/regenerate")
        assert events[-1].data["status"] == "completed"
        after = await branch(api, chat)
        assert texts(after) == ["[[flaky]] try", "Worked this time."]
        every = (await api.client.get(f"/api/chats/{chat}/messages")).json()["messages"]
        assert sum(1 for row in every if row["kind"] == "user") == 1


async def test_a_follower_sees_the_runs_of_every_branch_in_order(server: ServerProcess, gate: GateServer) -> None:
    gate.script("a", text("A."))
    gate.script("b", text("B."))
    async with server.api() as api, server.api() as watcher:
        chat = await api.new_chat()
        first = await api.run(chat, "[[a]] one")
        root = (await branch(api, chat))["messages"][0]["id"]
        await api.run(chat, "[[b]] other", parent_id="root")
        async with watcher.follow(chat, after=first[-1].id) as response:
            later = [e async for e in read_events(response)]
    assert later[0].type == "run_started" and later[0].data["user_message"]["parent_id"] is None
    assert later[0].data["leaf_id"] == later[0].data["user_message"]["id"] != root
    assert later[-1].type == "run_finished"
