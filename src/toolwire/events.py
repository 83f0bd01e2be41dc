"""Stream events: one tagged union for everything a response stream (and the agent) reports.

The `type` tags are public API and the JSON format the server sends to web clients; they never change.
Events are plain slotted dataclasses built without validation, because one is made per streamed chunk.

Order within one model response:
    text_delta / thinking_delta / tool_call_start → tool_call_delta* → tool_call_end / provider_tool
    ... usage? → finish → error? → message_end (always last, even after an error)
The agent adds `tool_started` and `tool_result` around tool execution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Discriminator, Field, PlainValidator, TypeAdapter

from .messages import InvalidToolCallPart, Message, ProviderToolPart, ToolCallPart, ToolResultPart

__all__ = [
    "ErrorEvent",
    "Event",
    "FinishEvent",
    "FinishReason",
    "MessageEndEvent",
    "ProviderToolEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolResultEvent",
    "ToolStartedEvent",
    "Usage",
    "UsageEvent",
    "event_to_dict",
    "event_to_json",
]

def _exception_or_none(value: Any) -> BaseException | None:
    return value if isinstance(value, BaseException) else None


FinishReason: TypeAlias = Literal["stop", "tool_calls", "length", "content_filter", "error"]


@dataclass(slots=True, kw_only=True)
class Usage:
    """Token counts; `None` where the provider did not say."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        def add(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        return Usage(
            input_tokens=add(self.input_tokens, other.input_tokens),
            output_tokens=add(self.output_tokens, other.output_tokens),
            cache_read_tokens=add(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens=add(self.cache_write_tokens, other.cache_write_tokens),
            reasoning_tokens=add(self.reasoning_tokens, other.reasoning_tokens),
        )


@dataclass(slots=True, kw_only=True)
class TextDelta:
    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(slots=True, kw_only=True)
class ThinkingDelta:
    text: str
    type: Literal["thinking_delta"] = "thinking_delta"


@dataclass(slots=True, kw_only=True)
class ToolCallStart:
    """A tool call began. `index` is its position among this response's calls (0, 1, ...)."""

    id: str
    name: str
    index: int
    type: Literal["tool_call_start"] = "tool_call_start"


class _DeferredArguments:
    """Lets the accumulator leave `ToolCallDelta.arguments` unset and compute it when it is first read.

    An event built that way holds `_deferred = (source, count)`: the call being streamed and how many
    of its fragments the event covers. Reading `arguments` finds the slot unset, so Python asks
    `__getattr__`, which takes the preview from the source, stores it in the slot (later reads are plain
    slot reads of that same value) and lets the source go. An event built with `arguments=` never
    comes here.
    """

    __slots__ = ("_deferred",)
    _deferred: tuple[Any, int]

    def __getattr__(self, name: str) -> Any:
        if name != "arguments":
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        try:
            source, count = self._deferred
        except AttributeError:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute 'arguments'") from None
        value = source.preview_at(count)
        object.__setattr__(self, "arguments", value)  # the subclass's slot
        del self._deferred
        return value


@dataclass(slots=True, kw_only=True)
class ToolCallDelta(_DeferredArguments):
    """A fragment of a call's argument text.

    `arguments` is a best-effort preview of the arguments parsed from every fragment up to and
    including this one (an incomplete JSON object with its unfinished tail dropped), or `None` when
    previews are off or nothing parses yet. Each event's preview is its own: it never changes when more
    fragments arrive.

    Previews cost nothing until read. A streamed event keeps a reference to its call and computes the
    preview the first time `arguments` is read (then keeps it), so a consumer that never looks pays
    nothing, and one that reads every event in order pays for what each fragment added: the fragment
    is parsed once, and a snapshot copies only the objects and arrays still open (the path to the value
    being streamed). Finished values are shared between successive previews, so treat previews as
    read-only. The string still arriving is the exception: a Python string cannot share its characters,
    so each preview holds its own copy, and reading every preview of a very long string costs a copy of
    it per read (read the previews you show, not all of them). Reading events out of order, or long
    after they arrived, still gives each one its own exact preview; it re-parses the call's text up to
    that event.

    Why deferred rather than refreshed as fragments arrive: a live stream delivers one event per network
    read, and a snapshot per read cost several times the parsing of the event itself, whether or not
    anyone looked at it.
    """

    id: str
    index: int
    arguments_delta: str
    arguments: Any = None
    type: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(slots=True, kw_only=True)
class ToolCallEnd:
    """A call is complete: a runnable `ToolCallPart`, or an `InvalidToolCallPart` that must not run."""

    index: int
    call: ToolCallPart | InvalidToolCallPart
    type: Literal["tool_call_end"] = "tool_call_end"


@dataclass(slots=True, kw_only=True)
class ProviderToolEvent:
    """The provider ran (or is running) one of its own tools; shown, never executed locally."""

    part: ProviderToolPart
    type: Literal["provider_tool"] = "provider_tool"


@dataclass(slots=True, kw_only=True)
class UsageEvent:
    usage: Usage
    type: Literal["usage"] = "usage"


@dataclass(slots=True, kw_only=True)
class FinishEvent:
    """Why the response ended, normalised; `raw_reason` is the provider's own word."""

    reason: FinishReason
    raw_reason: str | None = None
    type: Literal["finish"] = "finish"


@dataclass(slots=True, kw_only=True)
class ErrorEvent:
    """The provider reported an error, or the stream broke. `error_type` is a short machine-readable kind."""

    error_type: str
    message: str
    type: Literal["error"] = "error"


@dataclass(slots=True, kw_only=True)
class MessageEndEvent:
    """The assembled assistant message; the last event of every response, complete or not."""

    message: Message
    type: Literal["message_end"] = "message_end"


@dataclass(slots=True, kw_only=True)
class ToolStartedEvent:
    """The agent started running a tool call."""

    call: ToolCallPart
    type: Literal["tool_started"] = "tool_started"


@dataclass(slots=True, kw_only=True)
class ToolResultEvent:
    """A tool call's result became available (results arrive in completion order).

    `exception` is the exception the tool raised (with its traceback), for logs and error reporting; it
    stays in the process: events sent as JSON never carry it.
    """

    result: ToolResultPart
    duration: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    exception: Annotated[BaseException | None, PlainValidator(_exception_or_none), Field(exclude=True)] = field(
        default=None, repr=False, compare=False)
    type: Literal["tool_result"] = "tool_result"


Event: TypeAlias = Annotated[
    TextDelta
    | ThinkingDelta
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | ProviderToolEvent
    | UsageEvent
    | FinishEvent
    | ErrorEvent
    | MessageEndEvent
    | ToolStartedEvent
    | ToolResultEvent,
    Discriminator("type"),
]

_event_adapter: TypeAdapter[Event] = TypeAdapter(Event)


def event_to_dict(event: Event) -> dict[str, Any]:
    """The event as plain JSON data (the server's wire format)."""
    data: dict[str, Any] = _event_adapter.dump_python(event, mode="json")
    return data


def event_to_json(event: Event) -> bytes:
    return _event_adapter.dump_json(event)


def event_from_json(data: str | bytes) -> Event:
    return _event_adapter.validate_json(data)
