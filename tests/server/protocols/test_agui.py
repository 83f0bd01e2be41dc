"""The AG-UI route: every event checked with the `ag-ui-protocol` package's models and the protocol's order
rules, and the approval flow (interrupts, then a resumed run) driven by AG-UI's own `HttpAgent`."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
from ag_ui.core import Event
from pydantic import BaseModel, TypeAdapter

from tests.server.protocols.clients import NodeClients
from tests.server.support import TOKENS, GateServer, ServerProcess, calls, text
from toolwire.server.encode.agui import APPROVAL_REASON

_events: TypeAdapter[Any] = TypeAdapter(Event)
_ids = itertools.count(1)


def agui_events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if line.startswith("data: "):
            yield orjson.loads(line[6:])


def validated(data: dict[str, Any]) -> BaseModel:
    """The event as the package's model, with nothing the model does not declare (its models keep extras)."""
    model = _events.validate_python(data)
    assert isinstance(model, BaseModel)
    extras = [name for name, value in (model.model_extra or {}).items() if value is not None]
    assert not extras, f"{data['type']} carries fields AG-UI does not define: {extras}"
    nested = [getattr(model, name) for name in ("outcome",) if getattr(model, name, None) is not None]
    for inner in nested:
        assert not inner.model_extra, inner
    return model


def check_order(events: list[dict[str, Any]]) -> None:
    """AG-UI's ordering rules: the run opens first and closes last; content only inside what started it;
    everything started is ended before the run finishes; a call's result comes after its end."""
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    texts: set[str] = set()
    reasoning: set[str] = set()
    calls_open: set[str] = set()
    calls_ended: set[str] = set()
    steps: set[str] = set()
    for event in events[1:-1]:
        kind = event["type"]
        assert kind not in ("RUN_STARTED", "RUN_FINISHED", "RUN_ERROR"), kind
        if kind == "TEXT_MESSAGE_START":
            assert event["messageId"] not in texts
            texts.add(event["messageId"])
        elif kind == "TEXT_MESSAGE_CONTENT":
            assert event["messageId"] in texts and event["delta"]
        elif kind == "TEXT_MESSAGE_END":
            texts.remove(event["messageId"])
        elif kind == "REASONING_MESSAGE_START":
            reasoning.add(event["messageId"])
        elif kind == "REASONING_MESSAGE_CONTENT":
            assert event["messageId"] in reasoning
        elif kind == "REASONING_MESSAGE_END":
            reasoning.remove(event["messageId"])
        elif kind == "TOOL_CALL_START":
            assert event["toolCallId"] not in calls_open | calls_ended
            calls_open.add(event["toolCallId"])
        elif kind == "TOOL_CALL_ARGS":
            assert event["toolCallId"] in calls_open
        elif kind == "TOOL_CALL_END":
            calls_open.remove(event["toolCallId"])
            calls_ended.add(event["toolCallId"])
        elif kind == "TOOL_CALL_RESULT":
            assert event["toolCallId"] in calls_ended
        elif kind == "STEP_STARTED":
            assert not steps, "steps do not nest here"
            steps.add(event["stepName"])
        elif kind == "STEP_FINISHED":
            steps.remove(event["stepName"])
            assert not texts and not reasoning and not calls_open
    assert not texts and not reasoning and not calls_open and not steps


def run_input(thread: str, text_: str, **extra: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": f"client-run-{next(_ids)}",
            "messages": [{"id": f"msg-{next(_ids)}", "role": "user", "content": text_}], **extra}


def test_two_tools_finishing_out_of_order_and_one_failing(server: ServerProcess, gate: GateServer) -> None:
    gate.script("three", calls(("gated", {"label": "ag-a"}), ("explode", {"why": "no fuse"}),
                               ("gated", {"label": "ag-b"}), preamble="Three at once."),
                text("Two worked, one failed."))
    gate.release_tool("ag-b")  # b may finish at once; a only after b's result went out
    body = run_input("agui-thread-1", "[[three]] go")
    events: list[dict[str, Any]] = []
    with httpx.Client(base_url=server.url, trust_env=False, timeout=30,
                      headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as client, \
            client.stream("POST", "/api/agui", json=body) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        for event in agui_events(response):
            validated(event)
            events.append(event)
            if event["type"] == "TOOL_CALL_RESULT" and event["toolCallId"] == "call_2_gated":
                gate.release_tool("ag-a")
    check_order(events)
    assert events[0]["threadId"] == "agui-thread-1" and events[0]["runId"] == body["runId"]
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["runId"] == body["runId"]
    assert "outcome" not in events[-1] or events[-1]["outcome"]["type"] == "success"
    assert events[-1]["usage"][0]["inputTokens"] > 0
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert [r["toolCallId"] for r in results].index("call_2_gated") < \
        [r["toolCallId"] for r in results].index("call_0_gated")  # completion order
    failed = next(r for r in results if r["toolCallId"] == "call_1_explode")
    assert failed["metadata"]["isError"] is True and "exploded: no fuse" in failed["content"]
    assert orjson.loads(next(r for r in results if r["toolCallId"] == "call_0_gated")["content"]) == {
        "label": "ag-a", "released": True}
    starts = [e for e in events if e["type"] == "TOOL_CALL_START"]
    text_start = next(e for e in events if e["type"] == "TEXT_MESSAGE_START")
    assert {s["parentMessageId"] for s in starts} == {text_start["messageId"]}  # one assistant message per step
    assert [e["stepName"] for e in events if e["type"] == "STEP_STARTED"] == ["step-0", "step-1"]
    args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS" and e["toolCallId"] == "call_0_gated")
    assert orjson.loads(args) == {"label": "ag-a"}


def test_approvals_are_interrupts_answered_by_a_resumed_run(node: NodeClients, server: ServerProcess,
                                                            gate: GateServer) -> None:
    gate.script("agpay", calls(("transfer", {"to": "alice", "amount": 5}), ("transfer", {"to": "mallory", "amount": 9}),
                               preamble="Paying."),
                text("Paid what you approved."))
    common = {"url": server.url, "token": TOKENS["alice"], "threadId": "agui-pay"}
    asked = node.call("agui", **common, text="[[agpay]] pay them", messageId="u1", runId="r1")
    assert asked["failure"] is None  # HttpAgent's verifier accepted every event
    assert asked["finished"]["outcome"] == "interrupt"
    interrupts = asked["finished"]["interrupts"]
    assert [(i["toolCallId"], i["reason"]) for i in interrupts] == [("call_0_transfer", APPROVAL_REASON),
                                                                    ("call_1_transfer", APPROVAL_REASON)]
    assert interrupts[0]["responseSchema"]["required"] == ["approved"]
    assert [i["id"] for i in asked["pendingInterrupts"]] == [i["id"] for i in interrupts]
    assistant = next(m for m in asked["messages"] if m["role"] == "assistant")
    assert assistant["content"] == "Paying." and [c["id"] for c in assistant["toolCalls"]] == [
        "call_0_transfer", "call_1_transfer"]
    assert not [e for e in gate.events if e.startswith("transfer")]

    resume = [{"interruptId": interrupts[0]["id"], "status": "resolved", "payload": {"approved": True}},
              {"interruptId": interrupts[1]["id"], "status": "cancelled"}]
    done = node.call("agui", **common, messages=asked["messages"], runId="r2", resume=resume)
    assert done["failure"] is None and done["finished"]["outcome"] == "success"
    tools = {m["toolCallId"]: orjson.loads(m["content"]) for m in done["messages"] if m["role"] == "tool"}
    assert tools == {"call_0_transfer": {"sent": 5, "to": "alice"},
                     "call_1_transfer": {"error": "The person dismissed this approval."}}
    assert done["messages"][-1]["role"] == "assistant" and done["messages"][-1]["content"] == "Paid what you approved."
    assert [e for e in gate.events if e.startswith("transfer")] == ["transfer:alice:5"]

    again = node.call("agui", **common, messages=done["messages"], runId="r3", resume=resume)
    assert again["failure"] is not None and "409" in again["failure"]  # a replayed answer runs nothing
    assert [e for e in gate.events if e.startswith("transfer")] == ["transfer:alice:5"]
