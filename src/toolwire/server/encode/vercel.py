"""The Vercel AI SDK's UI message stream (v1), what `useChat` reads, written from the server's one event stream.

Each response follows one run and writes it as the chunks `ai`'s `DefaultChatTransport` parses with its
own schema (`uiMessageChunkSchema`), as `data: <chunk JSON>` frames, ending with `data: [DONE]`:

    run_started       → start {messageId, messageMetadata}
    step_started      → start-step
    text_delta        → text-start (first delta of a part), text-delta ... text-end (when the part ends)
    thinking_delta    → reasoning-start, reasoning-delta ... reasoning-end
    tool_call_start   → tool-input-start;  tool_call_delta → tool-input-delta (the raw argument text)
    tool_call_end     → tool-input-available, or tool-input-error for a call that must not run
    tool_started      → data-toolwire-tool {status: "running"} (transient: not kept in the message)
    tool_result       → tool-output-available / tool-output-error / tool-output-denied, in completion order
    approval_required → tool-approval-request {approvalId, toolCallId}
    step_finished     → finish-step
    run_finished      → finish {finishReason, messageMetadata} | abort (cancelled) | error + finish (failed)
    run_resumed       → data-toolwire-resumed {replica, reason, continuation, checkpoint, restartedStep}, kept in
                        the message, after ending open parts (and the step, when it is asked for again: the
                        protocol cannot take back streamed text, so the marker says which step was restarted)

A *turn* (one user message and everything answering it) is one UI message, even when approvals split
it into several runs: its id is the id of the run the user message started, and a resumed run goes on
with the same message, its first step finishing the step the paused run left open. Parts end where the
server's events say they end: a text or reasoning part when another kind of content starts or the step
ends, a call when its `tool_call_end` arrives (or, for a call cut off by a failure, from the round the
server stored: every started part is ended before `finish`).

Only chunk types that both `ai` 6.x and 7.x accept are written (so no `tool-approval-response`, and the
finish reason is never 7.x's `interrupted`); usage and toolwire's own data travel as message metadata
and `data-toolwire-*` parts. The per-chunk path makes plain dicts and one `orjson.dumps` per chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final

import orjson

from ..eventlog import LogEntry

__all__ = ["DONE", "HEADERS", "VercelEncoder", "step_chunks", "ui_step_parts"]

HEADERS: Final = {"x-vercel-ai-ui-message-stream": "v1"}
"""The header that tells `ai` clients the body is a UI message stream."""

DONE: Final = b"data: [DONE]\n\n"

_FINISH_REASONS: Final = {"stop": "stop", "tool_calls": "tool-calls", "length": "length",
                          "content_filter": "content-filter", "error": "error"}
"""toolwire's finish reasons → the protocol's; anything else is `other` (accepted by every client version)."""

# What the encoder knows of a call: its input is streaming, complete (waiting for a result), or it is answered.
_STREAMING, _WAITING, _ANSWERED = 1, 2, 3


def _frame(chunk: Mapping[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _error_text(result: Any) -> str:
    error = result.get("error") if isinstance(result, dict) else None
    if isinstance(error, str):
        return error
    return result if isinstance(result, str) else orjson.dumps(result).decode()


def usage_metadata(usage: Mapping[str, Any] | None) -> dict[str, int | None]:
    """toolwire's usage in the names `ai` uses for `LanguageModelUsage`."""
    usage = usage or {}
    given, taken = usage.get("input_tokens"), usage.get("output_tokens")
    return {"inputTokens": given, "outputTokens": taken,
            "totalTokens": given + taken if given is not None and taken is not None else None,
            "reasoningTokens": usage.get("reasoning_tokens"), "cachedInputTokens": usage.get("cache_read_tokens")}


def step_chunks(message: Mapping[str, Any], results: Sequence[Mapping[str, Any]], *, key: str,
                denied: Iterable[str] = (), approvals: Mapping[str, str] | None = None,
                finished: bool = True) -> list[dict[str, Any]]:
    """The chunks that rebuild one stored step: its assistant message (toolwire JSON) and the results known.

    `approvals` (call id → approval id) adds a `tool-approval-request` for calls without a result;
    `finished=False` leaves the step open (a paused round, finished by the run that resumes it).
    """
    chunks: list[dict[str, Any]] = [{"type": "start-step"}]
    for i, part in enumerate(message.get("parts", ())):
        kind = part.get("type")
        if kind == "text" and part.get("text"):
            part_id = f"text-{key}-{i}"
            chunks += [{"type": "text-start", "id": part_id}, {"type": "text-delta", "id": part_id,
                                                                 "delta": part["text"]},
                       {"type": "text-end", "id": part_id}]
        elif kind == "thinking" and part.get("text"):
            part_id = f"reasoning-{key}-{i}"
            chunks += [{"type": "reasoning-start", "id": part_id}, {"type": "reasoning-delta", "id": part_id,
                                                                      "delta": part["text"]},
                       {"type": "reasoning-end", "id": part_id}]
        elif kind == "tool_call":
            chunks.append({"type": "tool-input-available", "toolCallId": part["id"], "toolName": part["name"],
                           "input": part["arguments"]})
        elif kind == "invalid_tool_call":
            chunks.append({"type": "tool-input-error", "toolCallId": part["id"], "toolName": part["name"],
                           "input": part["arguments_raw"], "errorText": part["reason"]})
        elif kind == "provider_tool":
            chunks.append({"type": "tool-input-available", "toolCallId": part["id"], "toolName": part["name"],
                           "input": part.get("arguments"), "providerExecuted": True, "dynamic": True})
            if part.get("result") is not None:
                chunks.append({"type": "tool-output-available", "toolCallId": part["id"], "output": part["result"],
                               "providerExecuted": True, "dynamic": True})
        elif kind == "file" and (part.get("url") or part.get("data")):
            chunks.append({"type": "file", "mediaType": part["media_type"], "url": _file_url(part)})
    answered = set()
    refused = set(denied)
    for result in results:
        answered.add(result["call_id"])
        chunks.append(_output_chunk(result, denied=result["call_id"] in refused))
    for call_id, approval_id in (approvals or {}).items():
        if call_id not in answered:
            chunks.append({"type": "tool-approval-request", "approvalId": approval_id, "toolCallId": call_id})
    if finished:
        chunks.append({"type": "finish-step"})
    return chunks


def _file_url(part: Mapping[str, Any]) -> str:
    url = part.get("url")
    return url if isinstance(url, str) else f"data:{part['media_type']};base64,{part['data']}"


def _output_chunk(result: Mapping[str, Any], *, denied: bool = False) -> dict[str, Any]:
    call_id = result["call_id"]
    if denied:
        return {"type": "tool-output-denied", "toolCallId": call_id}
    if result.get("is_error"):
        return {"type": "tool-output-error", "toolCallId": call_id, "errorText": _error_text(result.get("result"))}
    return {"type": "tool-output-available", "toolCallId": call_id, "output": result.get("result")}


def ui_step_parts(message: Mapping[str, Any], results: Sequence[Mapping[str, Any]], *, key: str,
                  approvals: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One stored step as the parts `ai` builds from `step_chunks` (for a chat's history as UI messages)."""
    by_call = {r["call_id"]: r for r in results}
    parts: list[dict[str, Any]] = [{"type": "step-start"}]
    for i, part in enumerate(message.get("parts", ())):
        kind = part.get("type")
        if kind == "text" and part.get("text"):
            parts.append({"type": "text", "text": part["text"], "state": "done"})
        elif kind == "thinking" and part.get("text"):
            parts.append({"type": "reasoning", "id": f"reasoning-{key}-{i}", "text": part["text"], "state": "done"})
        elif kind == "tool_call":
            tool: dict[str, Any] = {"type": f"tool-{part['name']}", "toolCallId": part["id"],
                                    "state": "input-available", "input": part["arguments"]}
            result = by_call.get(part["id"])
            if result is not None and result.get("is_error"):
                tool.update(state="output-error", errorText=_error_text(result.get("result")))
            elif result is not None:
                tool.update(state="output-available", output=result.get("result"))
            elif approvals and part["id"] in approvals:
                tool.update(state="approval-requested", approval={"id": approvals[part["id"]]})
            parts.append(tool)
        elif kind == "invalid_tool_call":
            result = by_call.get(part["id"])
            parts.append({"type": f"tool-{part['name']}", "toolCallId": part["id"], "state": "output-error",
                          "input": part["arguments_raw"],
                          "errorText": _error_text(result.get("result")) if result is not None else part["reason"]})
        elif kind == "provider_tool":
            done = part.get("result") is not None
            parts.append({"type": "dynamic-tool", "toolName": part["name"], "toolCallId": part["id"],
                          "state": "output-available" if done else "input-available", "input": part.get("arguments"),
                          **({"output": part["result"]} if done else {}), "providerExecuted": True})
        elif kind == "file" and (part.get("url") or part.get("data")):
            parts.append({"type": "file", "mediaType": part["media_type"], "url": _file_url(part)})
    return parts


class VercelEncoder:
    """Frames of one run for a UI message stream response (see the module docstring).

    Args:
        message_id: The turn's UI message id (the id of the run its user message started).
        rebuild: Whether the client rebuilds the turn from this response (a resume, `GET .../stream`):
            a resumed run then first replays the turn's earlier steps (`history`) and the paused round.
            `False` when the client already holds them (the request that answered an approval).
        history: For `rebuild`, the steps of the turn stored by its earlier runs: (assistant message,
            results) as toolwire JSON.
    """

    media_type: ClassVar[str] = "text/event-stream"

    def __init__(self, *, message_id: str, rebuild: bool = False,
                 history: Sequence[tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]] = ()) -> None:
        self.message_id = message_id
        self.rebuild = rebuild
        self.history = history
        self._text: str | None = None
        self._reasoning: str | None = None
        self._step_open = False
        self._continues_step = False
        self._calls: dict[str, int] = {}
        self._names: dict[str, str] = {}
        self._denied: set[str] = set()
        self._finish_reason = "stop"

    def heartbeat(self) -> bytes:
        return b": ping\n\n"

    def encode(self, entry: LogEntry) -> bytes:
        chunks = self.chunks(entry)
        frames = b"".join(_frame(chunk) for chunk in chunks)
        return frames + DONE if entry.type == "run_finished" else frames

    def chunks(self, entry: LogEntry) -> list[dict[str, Any]]:
        """The UI chunks one event becomes (often one, sometimes none or several)."""
        event = entry.event
        kind = entry.type
        if kind == "text_delta":
            out = self._close_reasoning()
            if self._text is None:
                self._text = f"text-{entry.cursor}"
                out.append({"type": "text-start", "id": self._text})
            out.append({"type": "text-delta", "id": self._text, "delta": event["text"]})
            return out
        if kind == "tool_call_delta":
            if self._calls.get(event["id"]) != _STREAMING:
                return []
            return [{"type": "tool-input-delta", "toolCallId": event["id"], "inputTextDelta": event["arguments_delta"]}]
        if kind == "thinking_delta":
            out = self._close_text()
            if self._reasoning is None:
                self._reasoning = f"reasoning-{entry.cursor}"
                out.append({"type": "reasoning-start", "id": self._reasoning})
            out.append({"type": "reasoning-delta", "id": self._reasoning, "delta": event["text"]})
            return out
        handler = self._handlers.get(kind)
        return handler(self, entry) if handler is not None else []

    # -- parts -------------------------------------------------------------------------------

    def _close_text(self) -> list[dict[str, Any]]:
        if self._text is None:
            return []
        part_id, self._text = self._text, None
        return [{"type": "text-end", "id": part_id}]

    def _close_reasoning(self) -> list[dict[str, Any]]:
        if self._reasoning is None:
            return []
        part_id, self._reasoning = self._reasoning, None
        return [{"type": "reasoning-end", "id": part_id}]

    def _close_parts(self) -> list[dict[str, Any]]:
        return self._close_text() + self._close_reasoning()

    def _call_ended(self, call: Mapping[str, Any]) -> list[dict[str, Any]]:
        call_id = call["id"]
        if self._calls.get(call_id, 0) >= _WAITING:
            return []
        if call.get("type") == "invalid_tool_call":
            self._calls[call_id] = _ANSWERED
            return [{"type": "tool-input-error", "toolCallId": call_id, "toolName": call["name"],
                     "input": call["arguments_raw"], "errorText": call["reason"]}]
        self._calls[call_id] = _WAITING
        return [{"type": "tool-input-available", "toolCallId": call_id, "toolName": call["name"],
                 "input": call["arguments"]}]

    def _answer(self, result: Mapping[str, Any]) -> list[dict[str, Any]]:
        call_id = result["call_id"]
        if self._calls.get(call_id) == _STREAMING:  # answered before its input was complete: it never ran
            self._calls[call_id] = _ANSWERED
            return [{"type": "tool-input-error", "toolCallId": call_id, "toolName": result["name"], "input": None,
                     "errorText": _error_text(result.get("result"))}]
        self._calls[call_id] = _ANSWERED
        return [_output_chunk(result, denied=call_id in self._denied)]

    # -- events ------------------------------------------------------------------------------

    def _run_started(self, entry: LogEntry) -> list[dict[str, Any]]:
        event = entry.event
        metadata = {"chatId": event.get("chat_id"), "runId": event.get("run_id"), "runNumber": event.get("run_number")}
        out: list[dict[str, Any]] = [{"type": "start", "messageId": self.message_id, "messageMetadata": metadata}]
        resumed = event.get("resumed_from")
        if not isinstance(resumed, Mapping):
            return out
        # A resumed run finishes the round its paused run left open: its first step is that step.
        self._continues_step = True
        decisions = resumed.get("decisions") or []
        self._denied = {d["call_id"] for d in decisions if not d.get("approved")}
        results = resumed.get("results") or []
        if self.rebuild:
            for number, (message, step_results) in enumerate(self.history):
                out += step_chunks(message, step_results, key=f"{self.message_id}-{number}")
            out += step_chunks(resumed.get("message") or {}, results, key=str(resumed.get("run_id")),
                               approvals={d["call_id"]: d["approval_id"] for d in decisions}, finished=False)
        for result in results:
            self._calls[result["call_id"]] = _ANSWERED
        for decision in decisions:
            self._calls.setdefault(decision["call_id"], _WAITING)
        return out

    def _step_started(self, entry: LogEntry) -> list[dict[str, Any]]:
        self._step_open = True
        if self._continues_step:
            self._continues_step = False
            return []
        return [{"type": "start-step"}]

    def _tool_call_start(self, entry: LogEntry) -> list[dict[str, Any]]:
        event = entry.event
        out = self._close_parts()
        if event["id"] not in self._calls:
            self._calls[event["id"]] = _STREAMING
            self._names[event["id"]] = event["name"]
            out.append({"type": "tool-input-start", "toolCallId": event["id"], "toolName": event["name"]})
        return out

    def _tool_call_end(self, entry: LogEntry) -> list[dict[str, Any]]:
        return self._close_parts() + self._call_ended(entry.event["call"])

    def _provider_tool(self, entry: LogEntry) -> list[dict[str, Any]]:
        part = entry.event["part"]
        out = self._close_parts()
        if part["id"] not in self._calls:
            self._calls[part["id"]] = _WAITING
            out.append({"type": "tool-input-available", "toolCallId": part["id"], "toolName": part["name"],
                        "input": part.get("arguments"), "providerExecuted": True, "dynamic": True})
        if part.get("result") is not None and self._calls[part["id"]] != _ANSWERED:
            self._calls[part["id"]] = _ANSWERED
            out.append({"type": "tool-output-available", "toolCallId": part["id"], "output": part["result"],
                        "providerExecuted": True, "dynamic": True})
        return out

    def _tool_started(self, entry: LogEntry) -> list[dict[str, Any]]:
        call_id = entry.event["call"]["id"]
        return [{"type": "data-toolwire-tool", "id": call_id, "data": {"toolCallId": call_id, "status": "running"},
                 "transient": True}]

    def _tool_result(self, entry: LogEntry) -> list[dict[str, Any]]:
        return self._close_parts() + self._answer(entry.event["result"])

    def _finish(self, entry: LogEntry) -> list[dict[str, Any]]:
        self._finish_reason = _FINISH_REASONS.get(str(entry.event.get("reason")), "other")
        return []

    def _message_end(self, entry: LogEntry) -> list[dict[str, Any]]:
        out = self._close_parts()
        for part in entry.event["message"].get("parts", ()):
            if part.get("type") in ("tool_call", "invalid_tool_call") and self._calls.get(part["id"]) == _STREAMING:
                out += self._call_ended(part)
        return out

    def _approval_required(self, entry: LogEntry) -> list[dict[str, Any]]:
        call = entry.event["call"]
        out = self._close_parts() + self._call_ended(call)
        out.append({"type": "tool-approval-request", "approvalId": entry.event["approval_id"],
                    "toolCallId": call["id"]})
        return out

    def _message_saved(self, entry: LogEntry) -> list[dict[str, Any]]:
        # A stored round answers every call: calls the events left open (a cancelled or cut-off round) end here.
        row = entry.event["row"]
        messages = row.get("messages") or []
        if row.get("kind") != "tools_aggregate" or len(messages) != 2:
            return []
        out = self._close_parts()
        for part in messages[0].get("parts", ()):
            if part.get("type") in ("tool_call", "invalid_tool_call") and self._calls.get(part["id"]) == _STREAMING:
                out += self._call_ended(part)
        for result in messages[1].get("parts", ()):
            if result.get("type") == "tool_result" and self._calls.get(result["call_id"]) != _ANSWERED:
                out += self._answer(result)
        return out

    def _run_resumed(self, entry: LogEntry) -> list[dict[str, Any]]:
        event = entry.event
        out = self._close_parts()
        restarted = event.get("restarted_step")
        if restarted is not None and self._step_open:
            self._step_open = False
            out.append({"type": "finish-step"})
        out.append({"type": "data-toolwire-resumed", "data": {
            "replica": event.get("replica"), "reason": event.get("reason"), "continuation": event.get("continuation"),
            "checkpoint": event.get("checkpoint"), "restartedStep": restarted}})
        return out

    def _step_finished(self, entry: LogEntry) -> list[dict[str, Any]]:
        out = self._close_parts()
        if self._step_open:
            self._step_open = False
            out.append({"type": "finish-step"})
        return out

    def _run_finished(self, entry: LogEntry) -> list[dict[str, Any]]:
        event = entry.event
        status = event.get("status")
        error = event.get("error") or {}
        out = self._close_parts()
        if status != "paused":
            # Nothing stored them (the run failed before its round was kept): every started call is ended.
            why = error.get("message") or "The run ended before this call finished."
            for call_id, state in self._calls.items():
                if state == _STREAMING:
                    out.append({"type": "tool-input-error", "toolCallId": call_id,
                                "toolName": self._names.get(call_id, "unknown"),
                                "input": None, "errorText": why})
                elif state == _WAITING:
                    out.append({"type": "tool-output-error", "toolCallId": call_id, "errorText": why})
            self._calls = {call_id: _ANSWERED for call_id in self._calls}
            if self._step_open:
                self._step_open = False
                out.append({"type": "finish-step"})
        metadata = {"runId": event.get("run_id"), "status": status, "usage": usage_metadata(event.get("usage")),
                    "steps": event.get("steps"), "durationSeconds": event.get("duration")}
        if status == "completed":
            out.append({"type": "finish", "finishReason": self._finish_reason, "messageMetadata": metadata})
        elif status == "paused":
            out.append({"type": "finish", "finishReason": "tool-calls", "messageMetadata": metadata})
        elif status == "cancelled":
            out.append({"type": "message-metadata", "messageMetadata": metadata})
            out.append({"type": "abort", "reason": error.get("message") or "The run was cancelled."})
        else:  # failed, interrupted
            out.append({"type": "error", "errorText": error.get("message") or "The run failed."})
            out.append({"type": "finish", "finishReason": "error", "messageMetadata": {**metadata,
                                                                                       "error": error or None}})
        return out

    _handlers: ClassVar[dict[str, Any]] = {
        "run_started": _run_started,
        "step_started": _step_started,
        "tool_call_start": _tool_call_start,
        "tool_call_end": _tool_call_end,
        "provider_tool": _provider_tool,
        "tool_started": _tool_started,
        "tool_result": _tool_result,
        "finish": _finish,
        "message_end": _message_end,
        "approval_required": _approval_required,
        "message_saved": _message_saved,
        "step_finished": _step_finished,
        "run_resumed": _run_resumed,
        "run_finished": _run_finished,
    }
