"""The model picker over real HTTP: a `toolwire serve` with two models (both at the gate, an OpenAI-compatible fake
that records the `model` each request names), chats that choose one, and runs that record the one they used.

The provider's side is the proof: a run on the second model is a request the gate received with that model's
name, whatever the server says about it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.server.conftest import SQLITE_ONLY
from tests.server.support import TOKENS, Api, Event, GateServer, ServerProcess, read_events, text

pytestmark = pytest.mark.anyio

DEFAULT = "openai:gate-model"
OTHER = "openai:gate-other"


async def answered_by(api: Api, gate: GateServer, chat_id: str, **extra: Any) -> tuple[str, list[Event]]:
    """Send a message to the chat; the model name the provider received, and the run's events."""
    tag = uuid.uuid4().hex[:8]
    gate.script(tag, text("Answered."))
    before = len(gate.bodies)
    events = await api.run(chat_id, f"[[{tag}]] hello", **extra)
    assert events[-1].type == "run_finished" and events[-1].data["status"] == "completed", events[-1].data
    [body] = gate.bodies[before:]
    return str(body["model"]), events


async def last_run(api: Api, chat_id: str) -> dict[str, Any]:
    response = await api.client.get(f"/api/chats/{chat_id}/messages")
    runs: list[dict[str, Any]] = response.json()["runs"]
    return runs[-1]


@pytest.fixture
def two_models(serve: Callable[..., ServerProcess]) -> ServerProcess:
    return serve("--model", OTHER)  # after the fixture's --model openai:gate-model: the default comes first


async def test_each_chat_runs_on_its_model_and_each_run_records_it(two_models: ServerProcess,
                                                                   gate: GateServer) -> None:
    async with two_models.api() as api, two_models.api("bob") as bob:
        listed = (await api.client.get("/api/models")).json()
        assert listed == {"models": [{"id": DEFAULT, "label": DEFAULT, "default": True},
                                     {"id": OTHER, "label": OTHER, "default": False}]}
        async with httpx.AsyncClient(base_url=two_models.url, trust_env=False) as anonymous:
            assert (await anonymous.get("/api/models")).status_code == 401

        # A chat made without a choice: the default (null), and its run says so, to the provider too.
        plain = await api.new_chat()
        assert (await api.chat(plain))["model"] is None
        sent, events = await answered_by(api, gate, plain)
        assert sent == "gate-model"
        assert events[0].type == "run_started" and events[0].data["model"] == DEFAULT
        assert (await last_run(api, plain))["model"] == DEFAULT

        # Chosen as the chat is made; then changed with the rename route; then back to the default with null.
        response = await api.client.post("/api/chats", json={"title": "other", "model": OTHER})
        assert response.status_code == 201 and response.json()["model"] == OTHER
        chosen = response.json()["id"]
        sent, events = await answered_by(api, gate, chosen)
        assert (sent, events[0].data["model"]) == ("gate-other", OTHER)
        assert (await last_run(api, chosen))["model"] == OTHER

        patched = await api.client.patch(f"/api/chats/{plain}", json={"model": OTHER})
        assert patched.status_code == 200 and patched.json()["model"] == OTHER
        assert patched.json()["title"] == (await api.chat(plain))["title"]  # a model alone renames nothing
        assert (await answered_by(api, gate, plain))[0] == "gate-other"
        back = await api.client.patch(f"/api/chats/{plain}", json={"model": None, "title": "renamed"})
        assert back.json()["model"] is None and back.json()["title"] == "renamed"
        assert (await answered_by(api, gate, plain))[0] == "gate-model"
        # Each run keeps the model it used, whatever the chat uses now.
        runs = (await api.client.get(f"/api/chats/{plain}/messages")).json()["runs"]
        assert [run["model"] for run in runs] == [DEFAULT, OTHER, DEFAULT]

        # Choosing with the message itself (the first message of a chat the page makes, say).
        assert (await answered_by(api, gate, plain, model=OTHER))[0] == "gate-other"
        assert (await api.chat(plain))["model"] == OTHER

        # An unknown model is a 422 with a sentence, and changes nothing.
        chats_before = (await api.client.get("/api/chats")).json()["chats"]
        for refused in (await api.client.post("/api/chats", json={"model": "openai:nope"}),
                        await api.client.patch(f"/api/chats/{plain}", json={"model": "openai:nope", "title": "x"}),
                        await api.client.post(f"/api/chats/{plain}/messages",
                                              json={"client_message_id": "bad-model", "text": "hi",
                                                    "model": "openai:nope"})):
            assert refused.status_code == 422, refused.text
            error = refused.json()["error"]
            assert error["code"] == "unknown_model" and "openai:nope" in error["message"], error
            assert error["message"].endswith(".")
        assert (await api.client.patch(f"/api/chats/{plain}", json={"model": 3})).status_code == 422
        assert (await api.client.patch(f"/api/chats/{plain}", json={})).status_code == 422
        assert (await api.client.get("/api/chats")).json()["chats"] == chats_before
        assert (await api.chat(plain))["title"] == "renamed"
        assert len(await api.rows(plain)) == 8  # the refused message was not stored

        # Another user cannot see or change the chat's model.
        assert (await bob.client.patch(f"/api/chats/{plain}", json={"model": DEFAULT})).status_code == 404
        assert (await api.chat(plain))["model"] == OTHER


# The protocols' bodies carry the choice to the same path as the native route's, whose storing of it runs on
# PostgreSQL in test_each_chat_runs_on_its_model_and_each_run_records_it[postgres].
@SQLITE_ONLY
async def test_the_protocol_routes_take_a_model_choice(two_models: ServerProcess, gate: GateServer) -> None:
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    async with httpx.AsyncClient(base_url=two_models.url, headers=headers, trust_env=False, timeout=30) as client:

        async def provider_saw(path: str, body: dict[str, Any], tag: str) -> str:
            gate.script(tag, text("Answered."))
            before = len(gate.bodies)
            async with client.stream("POST", path, json=body) as response:
                assert response.status_code == 200, (await response.aread()).decode()
                await response.aread()
            [sent] = gate.bodies[before:]
            return str(sent["model"])

        def vercel(chat: str, tag: str, **extra: Any) -> dict[str, Any]:
            return {"id": chat, "messages": [{"id": f"u-{tag}", "role": "user",
                                              "parts": [{"type": "text", "text": f"[[{tag}]] hi"}]}], **extra}

        # The Vercel AI SDK: an extra `body` field of `sendMessage`, kept for the chat's next messages.
        assert await provider_saw("/api/chat", vercel("v-chat", "v1", model=OTHER), "v1") == "gate-other"
        assert await provider_saw("/api/chat", vercel("v-chat", "v2"), "v2") == "gate-other"
        assert await provider_saw("/api/chat", vercel("v-plain", "v3"), "v3") == "gate-model"
        # `regenerate()` with a model: the same message answered again on it.
        gate.script("v3", text("Again."))
        again = {**vercel("v-plain", "v3", model=OTHER), "trigger": "regenerate-message"}
        assert await provider_saw("/api/chat", again, "v3") == "gate-other"
        # AG-UI: `forwardedProps.model`.
        agui = {"threadId": "a-chat", "runId": "r1", "forwardedProps": {"model": OTHER},
                "messages": [{"id": "a1", "role": "user", "content": "[[a1]] hi"}]}
        assert await provider_saw("/api/agui", agui, "a1") == "gate-other"

        # An unknown model: 422 before anything is made (no chat under the client's id).
        for path, body in (("/api/chat", vercel("v-bad", "v4", model="nope")),
                           ("/api/agui", {**agui, "threadId": "a-bad", "forwardedProps": {"model": "nope"}})):
            refused = await client.post(path, json=body)
            assert refused.status_code == 422 and refused.json()["error"]["code"] == "unknown_model", refused.text
        for chat_id in ("v-bad", "a-bad"):
            assert (await client.get(f"/api/chats/{chat_id}")).status_code == 404


# The list and the refusal come from the server's options, above the store (a run's model is stored on PostgreSQL
# in test_each_chat_runs_on_its_model_and_each_run_records_it[postgres]).
@SQLITE_ONLY
async def test_a_server_with_one_model_lists_it_and_refuses_others(server: ServerProcess, gate: GateServer) -> None:
    async with server.api() as api:
        assert (await api.client.get("/api/models")).json() == {
            "models": [{"id": DEFAULT, "label": DEFAULT, "default": True}]}
        refused = await api.client.post("/api/chats", json={"model": OTHER})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "unknown_model"
        events = [e async for e in _run(api, await api.new_chat(), gate)]
        assert events[0].data["model"] == DEFAULT


async def _run(api: Api, chat_id: str, gate: GateServer) -> Any:
    gate.script("one", text("Answered."))
    async with api.send(chat_id, "[[one]] hi") as response:
        async for event in read_events(response):
            yield event


async def test_a_chat_whose_model_is_gone_runs_on_the_default_and_keeps_its_choice(
        serve: Callable[..., ServerProcess], gate: GateServer) -> None:
    first = serve("--model", OTHER)
    async with first.api() as api:
        response = await api.client.post("/api/chats", json={"model": OTHER})
        chat_id = response.json()["id"]
    first.stop()
    alone = serve()  # restarted on the same database with the default model only
    async with alone.api() as api:
        sent, events = await answered_by(api, gate, chat_id)
        assert (sent, events[0].data["model"]) == ("gate-model", DEFAULT)
        assert (await api.chat(chat_id))["model"] == OTHER  # the choice stays, for when the model comes back


def test_server_models_resolve_and_check() -> None:
    from toolwire.exceptions import UserError
    from toolwire.server import ModelChoice
    from toolwire.server.errors import ApiError
    from toolwire.server.model_choice import ServerModels

    models = ServerModels([ModelChoice(id="a", label="A"), ModelChoice(id="b")])
    assert models.listing() == [{"id": "a", "label": "A", "default": True}, {"id": "b", "label": "b", "default": False}]
    assert (models.resolve(None), models.resolve("b"), models.resolve("gone")) == ("a", "b", "a")
    assert models.check("b") == "b"
    with pytest.raises(ApiError) as refused:
        models.check("c")
    assert refused.value.status == 422 and "'a', 'b'" in refused.value.message
    with pytest.raises(UserError, match="Two models have the id 'a'"):
        ServerModels([ModelChoice(id="a"), ModelChoice(id="a")])
    none = ServerModels()
    assert (none.default, none.resolve("a"), none.listing()) == (None, None, [])
    with pytest.raises(ApiError, match="offers no choice of model"):
        none.check("a")
