"""The two encoders on their own: server events in, protocol frames out (no server, no client).

The end-to-end tests drive real clients through runs the gate can script; these cover the endings a
gate cannot produce on demand (a provider failure mid-call, a server shutdown) and the hand-written
per-chunk JSON of the AG-UI encoder.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from ag_ui.core import ReasoningMessageContentEvent, TextMessageContentEvent, ToolCallArgsEvent

from tests.server.protocols.test_agui import check_order, validated
from toolwire.server.encode.agui import AguiEncoder
from toolwire.server.encode.vercel import DONE, VercelEncoder
from toolwire.server.eventlog import Cursor, LogEntry

CALL = {"id": "c2", "name": "gated", "arguments": {"label": "x"}, "arguments_raw": '{"label":"x"}',
        "provider_data": None, "type": "tool_call"}


def log(*events: dict[str, Any]) -> list[LogEntry]:
    entries = []
    for index, event in enumerate(events, 1):
        data = {**event, "run_id": "run_1", "step": event.get("step")}
        entries.append(LogEntry(Cursor(1, index), event["type"], data, orjson.dumps(data)))
    return entries


def cut_off_run(status: str, error: dict[str, str] | None) -> list[LogEntry]:
    """A step that streams text, reasoning and two calls, and ends (with `status`) before its round is stored."""
    return log(
        {"type": "run_started", "chat_id": "chat_1", "run_number": 1, "resumed": False, "resumed_from": None},
        {"type": "step_started", "step": 0},
        {"type": "text_delta", "text": "Hello", "step": 0},
        {"type": "thinking_delta", "text": "hmm", "step": 0},
        {"type": "text_delta", "text": "again", "step": 0},
        {"type": "tool_call_start", "id": "c1", "name": "gated", "index": 0, "step": 0},
        {"type": "tool_call_delta", "id": "c1", "index": 0, "arguments_delta": '{"lab', "arguments": None, "step": 0},
        {"type": "tool_call_start", "id": "c2", "name": "gated", "index": 1, "step": 0},
        {"type": "tool_call_end", "index": 1, "call": CALL, "step": 0},
        {"type": "tool_started", "call": CALL, "step": 0},
        {"type": "run_finished", "status": status, "usage": {"input_tokens": 3, "output_tokens": 4},
         "error": error, "steps": 1, "duration": 0.5},
    )


def vercel_chunks(entries: list[LogEntry]) -> tuple[list[dict[str, Any]], bytes]:
    encoder = VercelEncoder(message_id="run_1")
    body = b"".join(encoder.encode(entry) for entry in entries)
    frames = [f for f in body.split(b"\n\n") if f]
    assert frames[-1] + b"\n\n" == DONE
    return [orjson.loads(f.removeprefix(b"data: ")) for f in frames[:-1]], body


def test_vercel_a_run_failing_mid_call_ends_every_part_before_its_error() -> None:
    failure = {"code": "provider_error", "message": "The provider broke off."}
    chunks, _ = vercel_chunks(cut_off_run("failed", failure))
    assert [c["type"] for c in chunks] == [
        "start", "start-step", "text-start", "text-delta", "text-end", "reasoning-start", "reasoning-delta",
        "reasoning-end", "text-start", "text-delta", "text-end", "tool-input-start", "tool-input-delta",
        "tool-input-start", "tool-input-available", "data-toolwire-tool",
        "tool-input-error", "tool-output-error", "finish-step", "error", "finish"]
    assert chunks[-4]["toolCallId"] == "c2" and chunks[-5] == {
        "type": "tool-input-error", "toolCallId": "c1", "toolName": "gated", "input": None,
        "errorText": "The provider broke off."}
    assert chunks[-2] == {"type": "error", "errorText": "The provider broke off."}
    assert chunks[-1]["finishReason"] == "error" and chunks[-1]["messageMetadata"]["usage"]["totalTokens"] == 7


@pytest.mark.parametrize(("status", "ending"), [("interrupted", ["error", "finish"]),
                                                ("cancelled", ["message-metadata", "abort"])])
def test_vercel_endings_use_only_what_every_client_version_accepts(status: str, ending: list[str]) -> None:
    chunks, body = vercel_chunks(cut_off_run(status, {"code": status, "message": f"The run was {status}."}))
    assert [c["type"] for c in chunks[-2:]] == ending
    older_clients_accept = (None, "stop", "length", "content-filter", "tool-calls", "error", "other")
    assert all(c.get("finishReason") in older_clients_accept for c in chunks)  # never ai 7's `interrupted`
    assert body.endswith(DONE)


@pytest.mark.parametrize(("reason", "expected"), [("stop", "stop"), ("length", "length"),
                                                  ("content_filter", "content-filter"), ("tool_calls", "tool-calls"),
                                                  ("something_new", "other")])
def test_vercel_finish_reasons_map_to_the_protocols_enum(reason: str, expected: str) -> None:
    chunks, _ = vercel_chunks(log(
        {"type": "run_started", "chat_id": "chat_1", "run_number": 1, "resumed": False, "resumed_from": None},
        {"type": "step_started", "step": 0},
        {"type": "text_delta", "text": "Hi", "step": 0},
        {"type": "finish", "reason": reason, "raw_reason": reason, "step": 0},
        {"type": "step_finished", "step": 0},
        {"type": "run_finished", "status": "completed", "usage": None, "error": None, "steps": 1, "duration": 0.1}))
    assert chunks[-1]["type"] == "finish" and chunks[-1]["finishReason"] == expected


@pytest.mark.parametrize("status", ["failed", "interrupted", "cancelled"])
def test_agui_every_run_ending_is_valid_and_closes_what_it_opened(status: str) -> None:
    encoder = AguiEncoder(thread_id="chat_1", run_id="client-run")
    body = b"".join(encoder.encode(e) for e in cut_off_run(status, {"code": status, "message": "It ended."}))
    events = [orjson.loads(f.removeprefix(b"data: ")) for f in body.split(b"\n\n") if f]
    for event in events:
        validated(event)
    check_order(events)
    last = events[-1]
    if status == "cancelled":
        assert last["type"] == "RUN_FINISHED" and last["outcome"] == {"type": "cancelled"}
    else:
        assert last["type"] == "RUN_ERROR" and last["code"] == status and last["message"] == "It ended."
    assert [e["type"] for e in events if e["type"].startswith("TOOL_CALL")] == [
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_START", "TOOL_CALL_END", "TOOL_CALL_END"]


def test_agui_hand_written_deltas_are_what_the_models_write() -> None:
    encoder = AguiEncoder(thread_id="chat_1", run_id="client-run")
    body = b"".join(encoder.encode(e) for e in cut_off_run("failed", None))
    frames = {orjson.loads(f.removeprefix(b"data: "))["type"]: f.removeprefix(b"data: ").decode()
              for f in body.split(b"\n\n") if f}
    text = orjson.loads(frames["TEXT_MESSAGE_CONTENT"])
    reasoning = orjson.loads(frames["REASONING_MESSAGE_CONTENT"])
    arguments = orjson.loads(frames["TOOL_CALL_ARGS"])
    assert frames["TEXT_MESSAGE_CONTENT"] == TextMessageContentEvent(
        message_id=text["messageId"], delta=text["delta"]).model_dump_json(by_alias=True)
    assert frames["REASONING_MESSAGE_CONTENT"] == ReasoningMessageContentEvent(
        message_id=reasoning["messageId"], delta=reasoning["delta"]).model_dump_json(by_alias=True)
    assert frames["TOOL_CALL_ARGS"] == ToolCallArgsEvent(
        tool_call_id=arguments["toolCallId"], delta=arguments["delta"]).model_dump_json(by_alias=True)


def resumed_run(restarted: bool) -> list[LogEntry]:
    """A step streaming text when its process stopped; another process continues the run (`run_resumed`):
    the step asked for again (`restarted`), or its round going on (its calls answered)."""
    before = [
        {"type": "run_started", "chat_id": "chat_1", "run_number": 1, "resumed": False, "resumed_from": None},
        {"type": "step_started", "step": 0},
        {"type": "text_delta", "text": "Half an ans", "step": 0},
    ]
    resumed = {"type": "run_resumed", "replica": "proc_b", "reason": "lease_expired", "continuation": 1,
               "checkpoint": {"step": 0, "message_id": "msg_1"}, "restarted_step": 0 if restarted else None}
    if restarted:
        rest = [{"type": "step_started", "step": 0}, {"type": "text_delta", "text": "Whole answer.", "step": 0},
                {"type": "step_finished", "step": 0}]
    else:
        before += [{"type": "tool_call_end", "index": 0, "call": CALL, "step": 0}]
        rest = [{"type": "tool_result", "step": 0, "duration": None, "metadata": {}, "result": {
            "call_id": "c2", "name": "gated", "result": {"error": "interrupted"}, "is_error": True,
            "type": "tool_result"}}, {"type": "step_finished", "step": 0}]
    return log(*before, resumed, *rest, {"type": "run_finished", "status": "completed", "usage": None,
                                         "error": None, "steps": 1, "duration": 1.0})


@pytest.mark.parametrize("restarted", [True, False])
def test_vercel_a_resumed_run_is_marked_and_a_restarted_step_is_a_new_step(restarted: bool) -> None:
    chunks, _ = vercel_chunks(resumed_run(restarted))
    kinds = [c["type"] for c in chunks]
    marker = next(c for c in chunks if c["type"] == "data-toolwire-resumed")
    assert marker["data"] == {"replica": "proc_b", "reason": "lease_expired", "continuation": 1,
                              "checkpoint": {"step": 0, "message_id": "msg_1"}, "restartedStep": 0 if restarted else None}
    at = kinds.index("data-toolwire-resumed")
    if restarted:  # the cut text ends, its step ends, the new attempt is a step of its own
        assert kinds[at - 2:at] == ["text-end", "finish-step"] and kinds[at + 1] == "start-step"
        assert kinds.count("start-step") == 2 and kinds.count("finish-step") == 2
    else:  # the step stays open: its call is answered in it
        assert kinds[at + 1:] == ["tool-output-error", "finish-step", "finish"] and kinds.count("start-step") == 1


@pytest.mark.parametrize("restarted", [True, False])
def test_agui_a_resumed_run_is_a_custom_event_and_keeps_the_ordering_rules(restarted: bool) -> None:
    encoder = AguiEncoder(thread_id="t", run_id="r")
    body = b"".join(encoder.encode(entry) for entry in resumed_run(restarted))
    events = [orjson.loads(f.removeprefix(b"data: ")) for f in body.split(b"\n\n") if f]
    for event in events:
        validated(event)
    check_order(events)
    custom = next(e for e in events if e["type"] == "CUSTOM")
    assert custom["name"] == "toolwire.run_resumed" and custom["value"]["restartedStep"] == (0 if restarted else None)
    texts = [e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START"]
    assert len(texts) == (2 if restarted else 1) and len(set(texts)) == len(texts)  # a new attempt, a new id
