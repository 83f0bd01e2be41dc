"""The sans-I/O accumulator: decoded wire deltas in, stream events and the assembled message out.

Every wire adapter drives one `Accumulator` per response. The adapter decides *identity* (which call a
fragment belongs to: OpenAI's `index`, Anthropic's block index, a Responses item id...) and calls the
methods below with a handle; the accumulator owns everything that must be the same for every protocol:

- fragments of text and arguments go into lists and are joined once, so cost is linear in stream size;
- `arguments_raw` is kept exactly as streamed and parsed once, when the call ends;
  `""`, `"null"` and missing arguments mean `{}`;
- a call ends as a runnable `ToolCallPart` only if the protocol signalled its completion and its
  arguments parse as a JSON object nested at most `MAX_VALUE_DEPTH` levels; otherwise it becomes an
  `InvalidToolCallPart` that keeps the raw text (a truncated call is never run with guessed arguments);
- a response that ends with an error is marked `metadata["incomplete"] = True`;
- ids are the provider's; an id is generated only where the provider gave none or an empty one, or
  one that an earlier call of the same response already has (ids stay unique, so every call can be
  answered);
- events are appended to `events`, which the streaming layer drains after each network chunk;
- argument previews are deferred: a `tool_call_delta` event records its call and how many fragments it
  covers, and the call's `PartialJSON` parses them only when some event's `arguments` is read (see
  `ToolCallBuilder.preview_at`), so a stream whose previews nobody reads never parses them.

No network, no asyncio: everything here is plain synchronous code, unit-testable with literals.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import orjson

from ._depth import MAX_VALUE_DEPTH, depth_exceeds
from ._partial_json import PartialJSON
from .events import (
    ErrorEvent,
    Event,
    FinishEvent,
    FinishReason,
    MessageEndEvent,
    ProviderToolEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UsageEvent,
)
from .messages import (
    InvalidToolCallPart,
    Message,
    Part,
    ProviderToolPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

__all__ = ["Accumulator", "ThinkingBlock", "ToolCallBuilder", "new_call_id", "parse_arguments"]

# Consumers that take snapshots themselves on every fragment (the agent's typed-output partials) do so
# below this many bytes of text; above it, each time the text has grown by a quarter, so that taking
# them stays linear in the stream size.
_PREVIEW_EVERY_FRAGMENT_BELOW = 8192

TRUNCATED_REASON = "The stream ended before this call's arguments were complete, so it was not run."

# One event is built per streamed fragment. Calling a slotted dataclass with keywords costs ~3x what
# filling a fresh instance does, so the two per-fragment events are filled directly, for as long as
# their fields are the ones listed here (otherwise the ordinary constructors are used). A deferred
# `tool_call_delta` leaves `arguments` unset and fills `_deferred` instead (see `events`).
_new = object.__new__
_FAST_EVENTS = (
    [(f.name, f.default) for f in fields(TextDelta)][1:] == [("type", "text_delta")]
    and [f.name for f in fields(TextDelta)] == ["text", "type"]
    and [(f.name, f.default) for f in fields(ToolCallDelta)][3:] == [("arguments", None), ("type", "tool_call_delta")]
    and [f.name for f in fields(ToolCallDelta)] == ["id", "index", "arguments_delta", "arguments", "type"]
    and "_deferred" in getattr(ToolCallDelta, "__slots__", ()) + getattr(ToolCallDelta.__base__, "__slots__", ())
)


def _fast_text_delta(text: str) -> TextDelta:
    event: TextDelta = _new(TextDelta)
    event.text = text
    event.type = "text_delta"
    return event


def _fast_tool_call_delta(call_id: str, index: int, fragment: str, arguments: Any) -> ToolCallDelta:
    event: ToolCallDelta = _new(ToolCallDelta)
    event.id = call_id
    event.index = index
    event.arguments_delta = fragment
    event.arguments = arguments
    event.type = "tool_call_delta"
    return event


def _plain_text_delta(text: str) -> TextDelta:
    return TextDelta(text=text)


def _plain_tool_call_delta(call_id: str, index: int, fragment: str, arguments: Any) -> ToolCallDelta:
    return ToolCallDelta(id=call_id, index=index, arguments_delta=fragment, arguments=arguments)


def _plain_deferred_delta(call: ToolCallBuilder, fragment: str, count: int) -> ToolCallDelta:
    return ToolCallDelta(id=call.id, index=call.index, arguments_delta=fragment, arguments=call.preview_at(count))


_text_delta = _fast_text_delta if _FAST_EVENTS else _plain_text_delta
_tool_call_delta = _fast_tool_call_delta if _FAST_EVENTS else _plain_tool_call_delta


def new_call_id() -> str:
    """A fresh id for a call the provider did not name."""
    return "call_" + secrets.token_hex(12)


def parse_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """Parse argument text once: `(arguments, None)` or `(None, reason it is invalid)`."""
    stripped = raw.strip()
    if not stripped or stripped == "null":
        return {}, None
    try:
        value = orjson.loads(stripped)
    except orjson.JSONDecodeError as exc:
        return None, f"The arguments are not valid JSON ({exc})."
    if value is None:
        return {}, None
    if not isinstance(value, dict):
        return None, f"The arguments are JSON but not an object (got {type(value).__name__})."
    # Deep nesting needs as many brackets: counting them (fast) spares the walk for ordinary arguments.
    if stripped.count("{") + stripped.count("[") > MAX_VALUE_DEPTH and depth_exceeds(value):
        return None, _TOO_DEEP
    return value, None


_TOO_DEEP = (f"The arguments nest objects and arrays more than {MAX_VALUE_DEPTH} levels deep, more than "
             "toolwire keeps, so the call was not run.")


class _TextRun:
    __slots__ = ("chunks",)

    def __init__(self) -> None:
        self.chunks: list[str] = []


class _ThinkingRun:
    __slots__ = ("chunks", "provider_data", "redacted", "signature")

    def __init__(self, provider_data: dict[str, Any] | None = None) -> None:
        self.chunks: list[str] = []
        self.signature: str | None = None
        self.redacted = False
        self.provider_data = provider_data


ThinkingBlock = _ThinkingRun
"""Handle of one thinking part being streamed, as `Accumulator.thinking` returns it."""


class ToolCallBuilder:
    """A call being streamed. Adapters hold these as handles; only the accumulator changes them.

    With previews on, the call's deferred `tool_call_delta` events refer back to it (see
    `preview_at`), so it lives as long as any of them whose preview was not read yet.
    """

    __slots__ = ("_fed", "_parser", "ended", "fragments", "id", "index", "name", "previews", "provider_data",
                 "result")

    def __init__(self, index: int, call_id: str, name: str, provider_data: dict[str, Any] | None) -> None:
        self.index = index
        self.id = call_id
        self.name = name
        self.fragments: list[str] = []
        self.provider_data = provider_data
        self.ended = False
        self.previews = False
        self._parser: PartialJSON | None = None  # made on the first preview read
        self._fed = 0  # fragments the parser has read
        self.result: ToolCallPart | InvalidToolCallPart | None = None

    @property
    def raw(self) -> str:
        return "".join(self.fragments)

    def preview_at(self, count: int) -> Any:
        """The preview of the arguments made of the first `count` fragments (see `PartialJSON.snapshot`).

        Reads usually come in stream order, each a little further on, so the parser only reads the
        fragments added since the last read. A read behind the parser (an old event read late) starts a
        new parser from the first fragment; reads in order from there are linear again.
        """
        parser = self._parser
        if parser is None or self._fed > count:
            parser = self._parser = PartialJSON()
            self._fed = 0
        fed = self._fed
        if fed < count:
            fragments = self.fragments
            parser.feed(fragments[fed] if count == fed + 1 else "".join(fragments[fed:count]))
            self._fed = count
        return parser.snapshot()


_Slot = _TextRun | _ThinkingRun | ToolCallBuilder | Part


class Accumulator:
    """Assembles one assistant message from a protocol's decoded deltas."""

    def __init__(
        self,
        *,
        previews: bool = True,
        id_factory: Callable[[], str] = new_call_id,
        provider: str | None = None,
    ) -> None:
        self.events: list[Event] = []
        self.previews = previews
        self.provider = provider
        self.metadata: dict[str, Any] = {}
        self.usage: Usage | None = None
        self.finish_reason: FinishReason | None = None
        self.raw_finish_reason: str | None = None
        self.error: ErrorEvent | None = None
        self.message: Message | None = None
        self.calls: list[ToolCallBuilder] = []
        self._call_ids: set[str] = set()
        self._id_factory = id_factory
        self._slots: list[_Slot] = []
        self._last: _Slot | None = None

    @property
    def has_content(self) -> bool:
        """Whether any part (text, thinking, call, whole part) has been started."""
        return bool(self._slots)

    # -- text and thinking -------------------------------------------------------------------

    def text(self, delta: str) -> None:
        if not delta:
            return
        last = self._last
        if type(last) is not _TextRun:
            last = _TextRun()
            self._slots.append(last)
            self._last = last
        last.chunks.append(delta)
        self.events.append(_text_delta(delta))

    def thinking(self, delta: str, *, new_block: bool = False, provider_data: dict[str, Any] | None = None,
                 block: ThinkingBlock | None = None) -> ThinkingBlock:
        """Thinking text. `new_block=True` starts a separate part (Anthropic: one per signed block).

        Returns the part's handle: passing it back as `block` adds to that part even after later parts
        began (a Responses stream may finish one reasoning item after the next item started).
        """
        last = self._last
        if block is not None:
            run = block
        elif new_block or type(last) is not _ThinkingRun:
            run = _ThinkingRun(provider_data)
            self._slots.append(run)
            self._last = run
            provider_data = None
        else:
            run = last
        if provider_data:
            run.provider_data = {**(run.provider_data or {}), **provider_data}
        if delta:
            run.chunks.append(delta)
            self.events.append(ThinkingDelta(text=delta))
        return run

    def thinking_signature(self, signature: str) -> None:
        """Attach a signature to the current thinking part (creating an empty one if needed)."""
        last = self._last
        if type(last) is not _ThinkingRun:
            self.thinking("", new_block=True)
            last = self._last
        assert isinstance(last, _ThinkingRun)
        last.signature = (last.signature or "") + signature

    def thinking_provider_data(self, data: dict[str, Any], *, block: ThinkingBlock | None = None) -> None:
        """Merge `data` into the provider data of `block`, or of the current thinking part."""
        last = self._last if block is None else block
        if type(last) is not _ThinkingRun:
            self.thinking("", new_block=True)
            last = self._last
        assert isinstance(last, _ThinkingRun)
        last.provider_data = {**(last.provider_data or {}), **data}

    def part(self, part: Part) -> None:
        """A part that arrives whole (redacted thinking, a file, provider tool activity)."""
        self._slots.append(part)
        self._last = part
        if isinstance(part, ProviderToolPart):
            self.events.append(ProviderToolEvent(part=part))

    def replace_part(self, old: Part, new: Part) -> None:
        """Swap a whole part for an updated one (provider tool activity that gained its result)."""
        for i, slot in enumerate(self._slots):
            if slot is old:
                self._slots[i] = new
                if self._last is old:
                    self._last = new
                if isinstance(new, ProviderToolPart):
                    self.events.append(ProviderToolEvent(part=new))
                return
        self.part(new)

    # -- tool calls --------------------------------------------------------------------------

    def start_call(self, call_id: str | None, name: str | None, *,
                   provider_data: dict[str, Any] | None = None) -> ToolCallBuilder:
        """A new call begins; an empty, missing or already used id gets a generated one."""
        if not call_id or call_id in self._call_ids:
            call_id = self._id_factory()
        self._call_ids.add(call_id)
        call = ToolCallBuilder(len(self.calls), call_id, name or "", provider_data)
        self.calls.append(call)
        self._slots.append(call)
        self._last = call
        call.previews = self.previews
        self.events.append(ToolCallStart(id=call.id, name=call.name, index=call.index))
        return call

    def call_arguments(self, call: ToolCallBuilder, fragment: str) -> None:
        """Append a fragment of argument text to `call`."""
        if not fragment or call.ended:
            return
        fragments = call.fragments
        fragments.append(fragment)
        if not call.previews:
            self.events.append(_tool_call_delta(call.id, call.index, fragment, None))
        elif _FAST_EVENTS:  # filled directly, as `_fast_tool_call_delta` does: this runs once per fragment
            event: ToolCallDelta = _new(ToolCallDelta)
            event.id = call.id
            event.index = call.index
            event.arguments_delta = fragment
            event._deferred = (call, len(fragments))  # type: ignore[misc]  # (the slot is inherited)
            event.type = "tool_call_delta"
            self.events.append(event)
        else:
            self.events.append(_plain_deferred_delta(call, fragment, len(fragments)))

    def end_call(self, call: ToolCallBuilder, *, complete: bool = True, reason: str | None = None,
                 arguments: dict[str, Any] | None = None) -> ToolCallPart | InvalidToolCallPart:
        """The protocol says `call` is complete (or, with `complete=False`, that it never will be).

        `arguments` passes an already-parsed object (protocols that send whole calls as JSON objects);
        the raw text is still what was streamed, or that object's JSON encoding.
        """
        if call.result is not None:
            return call.result
        call.ended = True
        raw = call.raw
        if arguments is not None and complete and depth_exceeds(arguments):
            complete, reason = False, _TOO_DEEP
        if arguments is not None and complete:
            if not raw:
                raw = orjson.dumps(arguments).decode()
            parsed: dict[str, Any] | None = arguments
        elif complete:
            parsed, reason = parse_arguments(raw)
        else:
            parsed = None
            reason = reason or TRUNCATED_REASON
        result: ToolCallPart | InvalidToolCallPart
        if parsed is not None:
            result = ToolCallPart(id=call.id, name=call.name, arguments=parsed, arguments_raw=raw,
                                  provider_data=call.provider_data)
        else:
            result = InvalidToolCallPart(id=call.id, name=call.name, arguments_raw=raw,
                                         reason=reason or TRUNCATED_REASON, provider_data=call.provider_data)
        call.result = result
        self.events.append(ToolCallEnd(index=call.index, call=result))
        return result

    def whole_call(self, call_id: str | None, name: str, arguments: Any, *,
                   provider_data: dict[str, Any] | None = None) -> ToolCallPart | InvalidToolCallPart:
        """A call that arrives complete in one piece (Gemini, Ollama, some compatible hosts).

        `arguments` may be an object, a JSON string, `None` or `"null"`.
        """
        call = self.start_call(call_id, name, provider_data=provider_data)
        if depth_exceeds(arguments):
            return self.end_call(call, complete=False, reason=_TOO_DEEP)
        if isinstance(arguments, dict):
            raw = orjson.dumps(arguments).decode()
            call.fragments.append(raw)
            self.events.append(ToolCallDelta(id=call.id, index=call.index, arguments_delta=raw,
                                             arguments=arguments if self.previews else None))
            return self.end_call(call, arguments=arguments)
        if isinstance(arguments, str):
            self.call_arguments(call, arguments)
        elif arguments is not None:
            call.fragments.append(orjson.dumps(arguments).decode())
        return self.end_call(call)

    def open_calls(self) -> list[ToolCallBuilder]:
        return [c for c in self.calls if not c.ended]

    # -- end of response ---------------------------------------------------------------------

    def set_usage(self, usage: Usage) -> None:
        self.usage = usage
        self.events.append(UsageEvent(usage=usage))

    def finish(self, reason: FinishReason, raw_reason: str | None = None) -> None:
        """The provider's completion signal (finish/stop reason). Later calls refine the raw reason."""
        self.finish_reason = reason
        self.raw_finish_reason = raw_reason

    def fail(self, error_type: str, message: str) -> None:
        """The provider reported an error or the stream broke; open calls will be invalid."""
        if self.error is None:
            self.error = ErrorEvent(error_type=error_type, message=message)

    def close(self) -> Message:
        """End of the response: close open calls, emit finish, error and `message_end` events."""
        if self.message is not None:
            return self.message
        if self.finish_reason is None and self.error is None:
            self.fail("incomplete_stream",
                      "The stream ended before the provider said the response was complete.")
        if self.error is not None:
            self.metadata["incomplete"] = True
        cut = self.error is not None or self.finish_reason == "length"
        for call in self.calls:
            if not call.ended:
                if cut:
                    self.end_call(call, complete=False)
                else:
                    self.end_call(call)
        reason = self.finish_reason
        if self.error is not None:
            reason = "error"
        elif reason == "stop" and any(isinstance(c.result, ToolCallPart) for c in self.calls):
            # Some hosts (Gemini's and Ollama's compatible endpoints) say "stop" after calling tools.
            reason = "tool_calls"
        self.finish_reason = reason = reason or "error"
        self.events.append(FinishEvent(reason=reason, raw_reason=self.raw_finish_reason))
        if self.error is not None:
            self.events.append(self.error)
        self.message = Message(role="assistant", parts=self._build_parts(), metadata=self.metadata)
        self.events.append(MessageEndEvent(message=self.message))
        return self.message

    def _build_parts(self) -> list[Part]:
        parts: list[Part] = []
        for slot in self._slots:
            if type(slot) is _TextRun:
                parts.append(TextPart(text="".join(slot.chunks)))
            elif type(slot) is _ThinkingRun:
                parts.append(ThinkingPart(text="".join(slot.chunks), signature=slot.signature,
                                          redacted=slot.redacted, provider_data=slot.provider_data))
            elif type(slot) is ToolCallBuilder:
                parts.append(slot.result if slot.result is not None else InvalidToolCallPart(
                    id=slot.id, name=slot.name, arguments_raw=slot.raw, reason=TRUNCATED_REASON,
                    provider_data=slot.provider_data))
            else:
                parts.append(slot)  # type: ignore[arg-type]
        return parts
