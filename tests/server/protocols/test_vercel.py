"""The Vercel route driven by the real `ai` client: `AbstractChat` (what `useChat` wraps) + `DefaultChatTransport`.

Every test asserts the `UIMessage` the client built, and that no chunk was rejected by the client's
schema (ai 7, and ai 6's for older clients) and `onError` was never called, unless the test is about
an error.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.server.protocols.clients import NodeClients
from tests.server.protocols.conftest import EXTRA_TOOLS
from tests.server.support import TOKENS, GateServer, ServerProcess, calls, text
from toolwire.testing.fake import FakeText, FakeThinking, FakeToolCall, FakeTurn

_names = itertools.count(1)


def new_chat(node: NodeClients, server: ServerProcess, user: str = "alice", **options: Any) -> str:
    name = f"chat{next(_names)}"
    node.call("chat", name=name, url=server.url, token=TOKENS[user], chatId=options.pop("chatId", f"ui-{name}"),
              **options)
    return name


def clean(state: dict[str, Any]) -> None:
    """Nothing rejected by either schema, no error reported, every response a v1 UI message stream."""
    assert state["rejected7"] == [] and state["rejected6"] == []
    assert state["errors"] == [] and state["error"] is None and state["status"] == "ready"
    assert all(r["status"] in (200, 204) for r in state["responses"])
    assert all(r["stream"] == "v1" for r in state["responses"] if r["status"] == 200)


def kinds(parts: list[dict[str, Any]]) -> list[str]:
    return [p["type"] for p in parts]


def chunk_types(state: dict[str, Any], skip: tuple[str, ...] = ("text-delta", "reasoning-delta",
                                                                 "tool-input-delta")) -> list[str]:
    return [c["type"] for c in state["chunks"] if c["type"] not in skip]


def test_text_only(node: NodeClients, server: ServerProcess, gate: GateServer) -> None:
    gate.script("plain", text("Hello there, how can I help?"))
    chat = new_chat(node, server)
    state = node.call("send", name=chat, text="[[plain]] hi")
    clean(state)
    user, answer = state["messages"]
    assert user["role"] == "user" and user["parts"] == [{"type": "text", "text": "[[plain]] hi"}]
    assert answer["role"] == "assistant"
    assert answer["parts"] == [{"type": "step-start"},
                               {"type": "text", "text": "Hello there, how can I help?", "state": "done"}]
    assert chunk_types(state) == ["start", "start-step", "text-start", "text-end", "finish-step", "finish"]
    assert state["done"] == 1  # data: [DONE]
    finish = state["chunks"][-1]
    assert finish["finishReason"] == "stop" and state["finishes"][-1]["finishReason"] == "stop"
    metadata = answer["metadata"]
    assert metadata["runId"] == answer["id"] and metadata["status"] == "completed"  # the turn's id is its run's
    assert metadata["usage"]["inputTokens"] > 0 and metadata["usage"]["outputTokens"] > 0


def test_reasoning_then_text(node: NodeClients, server: ServerProcess, gate: GateServer) -> None:
    gate.script("think", FakeTurn(parts=[FakeThinking(text="The user greets me; greet back."),
                                         FakeText(text="Hi!")]))
    chat = new_chat(node, server)
    state = node.call("send", name=chat, text="[[think]] hello")
    clean(state)
    parts = state["messages"][-1]["parts"]
    assert kinds(parts) == ["step-start", "reasoning", "text"]
    assert parts[1]["text"] == "The user greets me; greet back." and parts[1]["state"] == "done"
    assert parts[2] == {"type": "text", "text": "Hi!", "state": "done"}
    assert chunk_types(state) == ["start", "start-step", "reasoning-start", "reasoning-end", "text-start",
                                  "text-end", "finish-step", "finish"]


def test_two_parallel_tools_finishing_out_of_order(node: NodeClients, server: ServerProcess,
                                                   gate: GateServer) -> None:
    gate.script("pair", calls(("gated", {"label": "first"}), ("gated", {"label": "second"}), preamble="Both."),
                text("Both came back."))
    chat = new_chat(node, server)
    pending = node.start("send", name=chat, text="[[pair]] go")
    node.wait(lambda: gate.waiting.get("first") == 1 and gate.waiting.get("second") == 1, 15, "both tools")
    gate.release_tool("second")
    node.wait_chunk(chat, lambda c: c["type"] == "tool-output-available" and c["toolCallId"] == "call_1_gated")
    gate.release_tool("first")
    state = pending.result()
    clean(state)
    outputs = [c["toolCallId"] for c in state["chunks"] if c["type"] == "tool-output-available"]
    assert outputs == ["call_1_gated", "call_0_gated"]  # completion order
    types = chunk_types(state)
    assert types.index("finish-step") > max(i for i, t in enumerate(types) if t == "tool-output-available")
    parts = state["messages"][-1]["parts"]
    assert kinds(parts) == ["step-start", "text", "tool-gated", "tool-gated", "step-start", "text"]
    first, second = parts[2], parts[3]
    assert first == {"type": "tool-gated", "toolCallId": "call_0_gated", "state": "output-available",
                     "input": {"label": "first"}, "output": {"label": "first", "released": True}}
    assert second["toolCallId"] == "call_1_gated" and second["state"] == "output-available"
    # The raw argument text streamed as tool-input-delta, joining to the call's JSON.
    streamed = "".join(c["inputTextDelta"] for c in state["chunks"]
                       if c["type"] == "tool-input-delta" and c["toolCallId"] == "call_0_gated")
    assert streamed == '{"label":"first"}'


def test_a_tool_that_raises(node: NodeClients, server: ServerProcess, gate: GateServer) -> None:
    gate.script("boom", calls(("explode", {"why": "the fuse was short"})), text("That tool failed."))
    chat = new_chat(node, server)
    state = node.call("send", name=chat, text="[[boom]] try it")
    clean(state)
    tool = state["messages"][-1]["parts"][1]
    assert tool["type"] == "tool-explode" and tool["state"] == "output-error"
    assert "exploded: the fuse was short" in tool["errorText"]
    assert "tool-output-error" in chunk_types(state)


def test_a_cut_off_call_is_a_tool_input_error_and_never_runs(node: NodeClients, server: ServerProcess,
                                                             gate: GateServer) -> None:
    gate.script("cut", FakeTurn(parts=[FakeText(text="Let me look."),
                                       FakeToolCall(name="gated", arguments='{"label": "nev', id="call_cut")],
                                finish="length"),
                text("My call was cut off."))
    chat = new_chat(node, server)
    state = node.call("send", name=chat, text="[[cut]] go")
    clean(state)
    errors = [c for c in state["chunks"] if c["type"] == "tool-input-error"]
    assert len(errors) == 1 and errors[0]["toolCallId"] == "call_cut" and errors[0]["input"] == '{"label": "nev'
    parts = state["messages"][-1]["parts"]
    assert kinds(parts) == ["step-start", "text", "tool-gated", "step-start", "text"]
    assert parts[2]["state"] == "output-error" and parts[2]["input"] == '{"label": "nev'
    assert "nev" not in gate.waiting and "nev" not in str(gate.events)  # nothing ran


def test_a_two_step_run(node: NodeClients, server: ServerProcess, gate: GateServer) -> None:
    gate.script("steps", calls(("sleepy", {"seconds": 0.01, "label": "nap"})), text("Rested."))
    chat = new_chat(node, server)
    state = node.call("send", name=chat, text="[[steps]] rest")
    clean(state)
    assert chunk_types(state) == ["start", "start-step", "tool-input-start", "tool-input-available",
                                  "data-toolwire-tool", "tool-output-available", "finish-step", "start-step",
                                  "text-start", "text-end", "finish-step", "finish"]
    parts = state["messages"][-1]["parts"]
    assert kinds(parts) == ["step-start", "tool-sleepy", "step-start", "text"]
    assert parts[1]["output"] == {"label": "nap", "slept": 0.01}
    assert state["messages"][-1]["metadata"]["steps"] == 2


def test_only_the_last_message_may_be_sent_and_history_is_the_servers(node: NodeClients, server: ServerProcess,
                                                                     gate: GateServer) -> None:
    gate.script("one", text("First answer."))
    gate.script("two", text("Second answer."))
    chat = new_chat(node, server, lastOnly=True)
    node.call("send", name=chat, text="[[one]] first")
    state = node.call("send", name=chat, text="[[two]] second")
    clean(state)
    assert [m["role"] for m in state["messages"]] == ["user", "assistant", "user", "assistant"]
    history = node.call("history", url=server.url, token=TOKENS["alice"], chatId=f"ui-{chat}")
    assert history["invalid"] is None  # ai's own validateUIMessages accepts it
    assert history["messages"] == [{k: v for k, v in m.items() if k != "metadata"} for m in state["messages"]]


def test_chat_ids_belong_to_their_user(node: NodeClients, server: ServerProcess, gate: GateServer) -> None:
    gate.script("mine", text("Alice's answer."))
    chat = new_chat(node, server, chatId="shared-id-1")
    clean(node.call("send", name=chat, text="[[mine]] hi"))
    body = {"id": "shared-id-1", "messages": [{"id": "b1", "role": "user", "parts": [{"type": "text", "text": "x"}]}]}
    with httpx.Client(base_url=server.url, trust_env=False) as client:
        bob = {"Authorization": f"Bearer {TOKENS['bob']}"}
        assert client.get("/api/chat/shared-id-1/messages", headers=bob).json() == {"messages": []}
        assert client.get("/api/chat/shared-id-1/stream", headers=bob).status_code == 204
        assert client.post("/api/chat/shared-id-1/stop", headers=bob).status_code == 404
        # Bob's message under the same id starts Bob's own chat (tests/server/protocols/test_client_ids.py).
        with client.stream("POST", "/api/chat", json=body, headers=bob) as own:
            assert own.status_code == 200
            own.read()
        assert len(client.get("/api/chat/shared-id-1/messages", headers=bob).json()["messages"]) == 2
        bad = client.post("/api/chat", json={**body, "id": "a/b"}, headers=bob)
        assert bad.status_code == 422
        unauthenticated = client.post("/api/chat", json=body)
        assert unauthenticated.status_code == 401
        alice = {"Authorization": f"Bearer {TOKENS['alice']}"}
        rows = client.get("/api/chats/shared-id-1/messages", headers=alice).json()["messages"]
        assert [r["kind"] for r in rows] == ["user", "assistant"]  # the same chat on the native API


@pytest.mark.parametrize("automatic", [False, True], ids=["sendMessage", "sendAutomaticallyWhen"])
def test_an_approval_round_trip_approves_one_call_and_denies_the_other(node: NodeClients, server: ServerProcess,
                                                                       gate: GateServer, automatic: bool) -> None:
    gate.script("pay", calls(("transfer", {"to": "alice", "amount": 50}), ("transfer", {"to": "mallory", "amount": 70}),
                             preamble="Paying."),
                text("Paid what was approved."))
    chat = new_chat(node, server, automatic=automatic)
    asked = node.call("send", name=chat, text="[[pay]] pay them")
    clean(asked)
    assert asked["chunks"][-1] == {"type": "finish", "finishReason": "tool-calls",
                                   "messageMetadata": asked["chunks"][-1]["messageMetadata"]}
    waiting = asked["messages"][-1]
    assert [p.get("state") for p in waiting["parts"]] == [None, "done", "approval-requested", "approval-requested"]
    assert not [e for e in gate.events if e.startswith("transfer")]  # nothing ran yet
    if not automatic:  # a reload while the approvals wait: the stored chat shows them, as the client has them
        stored = node.call("history", url=server.url, token=TOKENS["alice"], chatId=f"ui-{chat}")
        assert stored["invalid"] is None
        assert stored["messages"] == [{k: v for k, v in m.items() if k != "metadata"} for m in asked["messages"]]

    done = node.call("approve", name=chat, decisions=[{"approved": True},
                                                      {"approved": False, "reason": "Not to mallory."}])
    clean(done)
    assert len(done["messages"]) == 2  # the same assistant message went on
    message = done["messages"][-1]
    assert message["id"] == waiting["id"]
    assert kinds(message["parts"]) == ["step-start", "text", "tool-transfer", "tool-transfer", "step-start", "text"]
    paid, refused = message["parts"][2], message["parts"][3]
    assert paid["state"] == "output-available" and paid["output"] == {"sent": 50, "to": "alice"}
    assert paid["approval"]["approved"] is True
    assert refused["state"] == "output-denied" and refused["approval"] == {
        "id": waiting["parts"][3]["approval"]["id"], "approved": False, "reason": "Not to mallory."}
    assert message["parts"][-1]["text"] == "Paid what was approved."
    assert [e for e in gate.events if e.startswith("transfer")] == ["transfer:alice:50"]

    # The same answers again (a replay), a made-up id, another user's: nothing runs.
    with httpx.Client(base_url=server.url, trust_env=False,
                      headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as client:
        replay = client.post("/api/chat", json={"id": f"ui-{chat}", "messages": [waiting | {"parts": [
            p | {"state": "approval-responded", "approval": {**p["approval"], "approved": True}}
            if p.get("state") == "approval-requested" else p for p in waiting["parts"]]}]})
        assert replay.status_code in (404, 409), replay.text
        forged = client.post("/api/chat", json={"id": f"ui-{chat}", "messages": [{
            "id": waiting["id"], "role": "assistant", "parts": [{"type": "tool-transfer", "toolCallId": "x",
                                                                  "state": "approval-responded",
                                                                  "approval": {"id": "apv_forged", "approved": True}}]}]})
        assert forged.status_code in (404, 409), forged.text
    assert [e for e in gate.events if e.startswith("transfer")] == ["transfer:alice:50"]


def test_a_failed_run_is_an_error_chunk_after_its_parts_ended(node: NodeClients, serve: Callable[..., ServerProcess],
                                                              gate: GateServer) -> None:
    server = serve("--max-steps", "1", *EXTRA_TOOLS)  # a second model request fails the run
    gate.script("fail", calls(("sleepy", {"seconds": 0.01, "label": "z"}), preamble="Checking."), text("Never."))
    chat = new_chat(node, server)
    state = node.call("send", name=chat, text="[[fail]] go")
    assert state["rejected7"] == [] and state["rejected6"] == []
    assert state["status"] == "error" and len(state["errors"]) == 1  # onError, once, with the server's sentence
    assert "step" in state["errors"][0]
    types = chunk_types(state)
    assert types[-2:] == ["error", "finish"] and state["chunks"][-1]["finishReason"] == "error"
    assert state["chunks"][-1]["messageMetadata"]["error"]["code"] == "max_steps"
    assert types.count("text-start") == types.count("text-end") and types.count("start-step") == types.count(
        "finish-step")
    tool = state["messages"][-1]["parts"][2]  # the round that finished before the failure is kept
    assert tool["toolCallId"] == "call_0_sleepy" and tool["state"] == "output-available"
