"""AG-UI (the Agent User Interaction protocol, 1.0), written from the server's one event stream.

Each response follows one run and writes it as AG-UI events, `data: <event JSON>` frames:

    run_started       → RUN_STARTED {threadId: the caller's thread id, runId: the caller's run id}
    step_started      → STEP_STARTED {stepName: "step-<n>"};  step_finished → STEP_FINISHED
    text_delta        → TEXT_MESSAGE_START (first delta of a part) / TEXT_MESSAGE_CONTENT ... / TEXT_MESSAGE_END
    thinking_delta    → REASONING_START, REASONING_MESSAGE_START / _CONTENT ... / REASONING_MESSAGE_END, REASONING_END
    tool_call_start   → TOOL_CALL_START {parentMessageId: the step's message};  tool_call_delta → TOOL_CALL_ARGS
    tool_call_end     → TOOL_CALL_END
    tool_result       → TOOL_CALL_RESULT, in completion order (metadata says `isError` and the duration)
    run_finished      → RUN_FINISHED {outcome: success | interrupt (one per approval) | cancelled, usage}
                        or RUN_ERROR {message, code} for a failed or interrupted run
    run_resumed       → CUSTOM {name: "toolwire.run_resumed", value: {replica, reason, continuation,
                        checkpoint, restartedStep}}, after ending what was open (and the step, when it is
                        asked for again: its new attempt is a new step with new message ids)

The protocol's ordering rules hold for every run however it ends: content starts before it streams,
and every text message, reasoning message, tool call and step that was started is ended before
`RUN_FINISHED` (a step paused for approval is finished here; AG-UI's resumed run is a new run that
starts its own step). The text of one step is one assistant message (its id is also the
`parentMessageId` of the step's calls); each reasoning block is its own reasoning message.

Events are built with the `ag-ui-protocol` package's models, except the three per-chunk deltas
(`TEXT_MESSAGE_CONTENT`, `REASONING_MESSAGE_CONTENT`, `TOOL_CALL_ARGS`), which are written as the same
JSON by hand: one pydantic model per streamed chunk would cost more than the rest of the path (a
test checks they equal what the models write).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

import orjson
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from ..eventlog import LogEntry

__all__ = ["APPROVAL_REASON", "APPROVAL_SCHEMA", "AguiEncoder"]

APPROVAL_REASON: Final = "tool_approval"
"""`Interrupt.reason` of an approval (a tool call waiting for a person's decision)."""

APPROVAL_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}
"""`Interrupt.responseSchema` of an approval: the payload a resume entry answers it with."""


def _frame(event: BaseEvent) -> bytes:
    return b"data: " + event.model_dump_json(by_alias=True).encode() + b"\n\n"


def _delta(kind: str, key: str, value: str, delta: str) -> bytes:
    return b"data: " + orjson.dumps({"type": kind, key: value, "delta": delta}) + b"\n\n"


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def token_usage(usage: Mapping[str, Any] | None) -> TokenUsage | None:
    """A run's usage as one `TokenUsage` entry (`None` when the provider reported nothing)."""
    usage = usage or {}
    given, taken = _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))
    if given is None and taken is None:
        return None
    return TokenUsage(input_tokens=given, output_tokens=taken,
                      total_tokens=given + taken if given is not None and taken is not None else None,
                      reasoning_tokens=_count(usage.get("reasoning_tokens")),
                      cached_input_tokens=_count(usage.get("cache_read_tokens")),
                      cache_write_input_tokens=_count(usage.get("cache_write_tokens")))


class AguiEncoder:
    """Frames of one run as AG-UI events (see the module docstring).

    Args:
        thread_id: The AG-UI thread (the id the caller chose, `RunAgentInput.threadId`).
        run_id: The run id the caller chose (`RunAgentInput.runId`), echoed in `RUN_STARTED` and the end.
    """

    media_type: ClassVar[str] = "text/event-stream"

    def __init__(self, *, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._run = ""
        self._step: str | None = None
        self._step_message = ""
        self._attempt = ""
        """Added to the ids of the steps after a `run_resumed`: a step asked for again gets new message ids."""
        self._text: str | None = None
        self._reasoning: str | None = None
        self._calls: dict[str, bool] = {}
        """Tool calls started in this response: `True` while their arguments stream."""
        self._interrupts: list[Interrupt] = []

    def heartbeat(self) -> bytes:
        return b": ping\n\n"

    def encode(self, entry: LogEntry) -> bytes:
        event = entry.event
        kind = entry.type
        if kind == "text_delta":
            out = self._close_reasoning()
            if self._text is None:
                self._text = self._step_message or f"{self._run}-{entry.cursor}"
                out += _frame(TextMessageStartEvent(message_id=self._text, role="assistant"))
            return out + _delta("TEXT_MESSAGE_CONTENT", "messageId", self._text, event["text"])
        if kind == "tool_call_delta":
            if not self._calls.get(event["id"]):
                return b""
            return _delta("TOOL_CALL_ARGS", "toolCallId", event["id"], event["arguments_delta"])
        if kind == "thinking_delta":
            out = self._close_text()
            if self._reasoning is None:
                self._reasoning = f"{self._step_message or self._run}-reasoning-{entry.cursor}"
                out += _frame(ReasoningStartEvent(message_id=self._reasoning))
                out += _frame(ReasoningMessageStartEvent(message_id=self._reasoning, role="reasoning"))
            return out + _delta("REASONING_MESSAGE_CONTENT", "messageId", self._reasoning, event["text"])
        handler = self._handlers.get(kind)
        return handler(self, entry) if handler is not None else b""

    # -- open things -------------------------------------------------------------------------

    def _close_text(self) -> bytes:
        if self._text is None:
            return b""
        message_id, self._text = self._text, None
        return _frame(TextMessageEndEvent(message_id=message_id))

    def _close_reasoning(self) -> bytes:
        if self._reasoning is None:
            return b""
        message_id, self._reasoning = self._reasoning, None
        return (_frame(ReasoningMessageEndEvent(message_id=message_id))
                + _frame(ReasoningEndEvent(message_id=message_id)))

    def _end_call(self, call_id: str) -> bytes:
        if not self._calls.get(call_id):
            return b""
        self._calls[call_id] = False
        return _frame(ToolCallEndEvent(tool_call_id=call_id))

    def _close_all(self) -> bytes:
        out = self._close_text() + self._close_reasoning()
        for call_id in list(self._calls):
            out += self._end_call(call_id)
        return out

    def _finish_step(self) -> bytes:
        out = self._close_all()
        if self._step is not None:
            out += _frame(StepFinishedEvent(step_name=self._step))
            self._step = None
        return out

    # -- events ------------------------------------------------------------------------------

    def _run_started(self, entry: LogEntry) -> bytes:
        self._run = str(entry.event.get("run_id"))
        metadata = {"toolwireRunId": self._run, "resumed": bool(entry.event.get("resumed"))}
        return _frame(RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, metadata=metadata))

    def _step_started(self, entry: LogEntry) -> bytes:
        out = self._finish_step()
        self._step = f"step-{entry.event.get('step')}"
        self._step_message = f"{self._run}-{entry.event.get('step')}{self._attempt}"
        return out + _frame(StepStartedEvent(step_name=self._step))

    def _tool_call_start(self, entry: LogEntry) -> bytes:
        event = entry.event
        out = self._close_text() + self._close_reasoning()
        if event["id"] in self._calls:
            return out
        self._calls[event["id"]] = True
        return out + _frame(ToolCallStartEvent(tool_call_id=event["id"], tool_call_name=event["name"],
                                               parent_message_id=self._step_message or None))

    def _tool_call_end(self, entry: LogEntry) -> bytes:
        call = entry.event["call"]
        out = self._close_text() + self._close_reasoning()
        if call["id"] not in self._calls:  # a call delivered whole, without a start
            self._calls[call["id"]] = True
            out += _frame(ToolCallStartEvent(tool_call_id=call["id"], tool_call_name=call["name"],
                                             parent_message_id=self._step_message or None))
        return out + self._end_call(call["id"])

    def _tool_result(self, entry: LogEntry) -> bytes:
        event = entry.event
        result = event["result"]
        out = self._close_text() + self._close_reasoning() + self._end_call(result["call_id"])
        metadata: dict[str, Any] = {"isError": bool(result.get("is_error")), "toolName": result.get("name")}
        if event.get("duration") is not None:
            metadata["durationSeconds"] = event["duration"]
        return out + _frame(ToolCallResultEvent(message_id=f"{result['call_id']}-result",
                                                tool_call_id=result["call_id"], role="tool",
                                                content=orjson.dumps(result.get("result")).decode(),
                                                metadata=metadata))

    def _message_end(self, entry: LogEntry) -> bytes:
        return self._close_all()

    def _approval_required(self, entry: LogEntry) -> bytes:
        call = entry.event["call"]
        arguments = orjson.dumps(call.get("arguments")).decode()
        self._interrupts.append(Interrupt(
            id=entry.event["approval_id"], reason=APPROVAL_REASON, tool_call_id=call["id"],
            message=f"Allow the call {call['name']}({arguments})?", response_schema=APPROVAL_SCHEMA,
            metadata={"toolName": call["name"], "arguments": call.get("arguments")}))
        return self._close_all()

    def _step_finished(self, entry: LogEntry) -> bytes:
        return self._finish_step()

    def _run_resumed(self, entry: LogEntry) -> bytes:
        event = entry.event
        self._run = self._run or str(event.get("run_id"))
        restarted = event.get("restarted_step")
        out = self._close_all() if restarted is None else self._finish_step()
        self._attempt = f"-c{event.get('continuation')}"
        return out + _frame(CustomEvent(name="toolwire.run_resumed", value={
            "replica": event.get("replica"), "reason": event.get("reason"), "continuation": event.get("continuation"),
            "checkpoint": event.get("checkpoint"), "restartedStep": restarted}))

    def _run_finished(self, entry: LogEntry) -> bytes:
        event = entry.event
        status = event.get("status")
        out = self._finish_step()
        usage = token_usage(event.get("usage"))
        metadata = {"toolwireRunId": self._run, "status": status, "steps": event.get("steps"),
                    "durationSeconds": event.get("duration")}
        if status in ("failed", "interrupted"):
            error = event.get("error") or {}
            return out + _frame(RunErrorEvent(message=error.get("message") or "The run failed.",
                                              code=error.get("code"), usage=[usage] if usage else None,
                                              metadata=metadata))
        outcome: RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome
        if status == "paused" and self._interrupts:
            outcome = RunFinishedInterruptOutcome(interrupts=self._interrupts)
        elif status == "cancelled":
            outcome = RunFinishedCancelledOutcome()
        else:
            outcome = RunFinishedSuccessOutcome()
        return out + _frame(RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome,
                                             usage=[usage] if usage else None, metadata=metadata))

    _handlers: ClassVar[dict[str, Any]] = {
        "run_started": _run_started,
        "step_started": _step_started,
        "tool_call_start": _tool_call_start,
        "tool_call_end": _tool_call_end,
        "tool_result": _tool_result,
        "message_end": _message_end,
        "approval_required": _approval_required,
        "step_finished": _step_finished,
        "run_resumed": _run_resumed,
        "run_finished": _run_finished,
    }
