"""The server's event stream: toolwire's own events plus the run's, in one envelope, published in order.

Every event is a JSON object with `type`, `run_id` and `step` (the 0-based model request of the run,
`null` for run-level events). Model and agent events are exactly `toolwire.events.event_to_dict`; the
run adds `run_started`, `run_resumed` (another process continues the run after the one running it
stopped: docs/guides/durable-runs.md), `step_started`, `approval_required`, `message_saved`,
`step_finished` and `run_finished` (always last). This one stream feeds every consumer: the event log, and through it
each browser protocol's encoder (`encode/`).

`RunPublisher` numbers a run's events (the cursor's index) and encodes each once to JSON bytes.
The per-chunk events (text, thinking, argument fragments) are turned into dicts by hand: one is made
per streamed chunk, and going through pydantic for each would cost more than all the rest.

A `tool_call_delta` carries the call's argument preview (`arguments`) only while the call's argument
text is short and then each time it has grown by a quarter; in between it is `null` (a client keeps
the last preview it got, or parses the deltas itself). Every delta would otherwise carry the whole
preview so far, which makes a call's events quadratic in its size: a 450 KB argument streamed in
100,000 fragments would be tens of gigabytes of JSON to encode, store and send. This way the previews
of a call add up to a few times its final size. `tool_call_end` carries the complete arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from ..events import (
    Event,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolResultEvent,
    Usage,
    event_to_dict,
)
from ..messages import to_jsonable
from .eventlog import Cursor, EventLog, LogEntry

__all__ = ["RUN_EVENT_TYPES", "RunPublisher", "model_event", "usage_dict"]

_PREVIEW_EVERY_DELTA_BELOW = 1024
"""Characters of argument text below which every `tool_call_delta` carries the preview."""

RUN_EVENT_TYPES: Final = ("run_started", "run_resumed", "step_started", "approval_required", "message_saved",
                          "step_finished", "run_finished")


def model_event(event: Event) -> dict[str, Any]:
    """A model or agent event as the JSON object `event_to_dict` makes (without `run_id` and `step`)."""
    kind = type(event)
    if kind is TextDelta or kind is ThinkingDelta:
        return {"type": event.type, "text": event.text}  # type: ignore[union-attr]
    if kind is ToolCallDelta:
        assert isinstance(event, ToolCallDelta)
        return {"type": "tool_call_delta", "id": event.id, "index": event.index,
                "arguments_delta": event.arguments_delta, "arguments": event.arguments}
    if kind is ToolResultEvent:
        # A tool's metadata may hold anything: made plain JSON here rather than failing the run.
        assert isinstance(event, ToolResultEvent)
        result = event.result
        shown: dict[str, Any] = {"call_id": result.call_id, "name": result.name, "result": result.result,
                                 "is_error": result.is_error, "type": "tool_result"}
        if result.files:  # names and types only: the bytes are in the round's stored row, by reference
            shown["files"] = [{"type": "file", "media_type": f.media_type, "name": f.name, "data": None}
                              for f in result.files]
        return {"type": "tool_result", "result": shown, "duration": event.duration,
                "metadata": to_jsonable(event.metadata)}
    return event_to_dict(event)


def usage_dict(usage: Usage | Mapping[str, Any] | None) -> dict[str, int | None]:
    """Usage as the API shows it: all five counts, each an int or null."""
    keys = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
    if usage is None:
        return dict.fromkeys(keys)
    if isinstance(usage, Usage):
        return {key: getattr(usage, key) for key in keys}
    return {key: usage.get(key) for key in keys}


class RunPublisher:
    """Publishes one run's events into its chat's log, numbering them `<run_number>-1`, `-2`, ..."""

    __slots__ = ("_index", "_previews", "chat_id", "log", "run_id", "run_number")

    def __init__(self, log: EventLog, *, chat_id: str, run_id: str, run_number: int, last_index: int = 0) -> None:
        self.log = log
        self.chat_id = chat_id
        self.run_id = run_id
        self.run_number = run_number
        self._index = last_index
        self._previews: dict[str, list[int]] = {}
        """Per call id: the argument characters streamed so far, and the size at which a preview is next sent."""

    @property
    def published(self) -> int:
        """How many events of the run were published (the index of the last one)."""
        return self._index

    def _entry(self, data: dict[str, Any], step: int | None) -> LogEntry:
        self._index += 1
        data["run_id"] = self.run_id
        data["step"] = step
        return LogEntry(Cursor(self.run_number, self._index), data["type"], data=orjson.dumps(data))

    def event_entry(self, event: Event, step: int | None) -> LogEntry:
        """A model or agent event's entry, numbered now; the caller appends it (in numbering order, always)."""
        return self._entry(self._event_dict(event), step)

    def run_entry(self, type_: str, step: int | None, **fields: Any) -> LogEntry:
        """One of the run's own events as an entry, numbered now; the caller appends it (in order, always)."""
        return self._entry({"type": type_, **fields}, step)

    async def event(self, event: Event, step: int | None) -> LogEntry:
        """Publish a model or agent event."""
        entry = self._entry(self._event_dict(event), step)
        await self.log.append(self.chat_id, [entry])
        return entry

    async def events(self, events: Sequence[Event], step: int | None) -> None:
        """Publish model or agent events that arrived together, in one append (each its own cursor)."""
        entries = [self._entry(self._event_dict(event), step) for event in events]
        await self.log.append(self.chat_id, entries)

    def _event_dict(self, event: Event) -> dict[str, Any]:
        if type(event) is ToolCallDelta:
            return self._tool_call_delta(event)
        if type(event) is ToolCallEnd:
            self._previews.pop(event.call.id, None)
        return model_event(event)

    def _tool_call_delta(self, event: ToolCallDelta) -> dict[str, Any]:
        """The delta's dict, its preview kept only on the geometric schedule of the module docstring."""
        sizes = self._previews.get(event.id)
        if sizes is None:
            sizes = self._previews[event.id] = [0, 0]
        size = sizes[0] = sizes[0] + len(event.arguments_delta)
        if size < _PREVIEW_EVERY_DELTA_BELOW or size >= sizes[1]:
            sizes[1] = size + (size >> 2)
            preview = event.arguments
        else:
            preview = None
        return {"type": "tool_call_delta", "id": event.id, "index": event.index,
                "arguments_delta": event.arguments_delta, "arguments": preview}

    async def run_event(self, type_: str, step: int | None, **fields: Any) -> LogEntry:
        """Publish one of the run's own events."""
        entry = self._entry({"type": type_, **fields}, step)
        await self.log.append(self.chat_id, [entry])
        return entry

    async def run_events(self, events: Sequence[tuple[str, int | None, dict[str, Any]]]) -> None:
        """Publish several run events at once (nothing else of the chat can come between them)."""
        entries = [self._entry({"type": type_, **fields}, step) for type_, step, fields in events]
        await self.log.append(self.chat_id, entries)
