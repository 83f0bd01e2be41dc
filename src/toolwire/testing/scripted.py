"""`ScriptedModel`: a `Model` that plays scripted responses, for testing code built on toolwire offline.

    from toolwire.testing import Delay, ScriptedModel, ToolCall

    model = ScriptedModel(
        ["Let me look.", ToolCall("get_weather", {"city": "Paris"}, chunks=3)],   # 1st request
        ["It is sunny in Paris."],                                                # 2nd request
    )
    agent = Agent(model, tools=[get_weather])
    ...
    model.requests[1].messages   # what the agent sent the second time

Each positional argument is one *turn*: the response to one request, in order. A turn is
- a list of items: `str` (one text chunk), `Text`, `Thinking`, `ToolCall`, `Delay`, `toolwire.Usage`,
  `Finish`, `Fail` (the provider reports an error mid-stream) or `Disconnect` (the connection drops);
- a list of ready-made events (`toolwire.events`), played verbatim; it must contain a `MessageEndEvent`;
- an exception, raised when the request is opened (an HTTP error before streaming, say);
- a function of the `ScriptedRequest`, returning any of the above (for responses that depend on input).

Item turns are assembled by the same accumulator the wire protocols drive, so events, call ids, invalid
(truncated) calls, finish reasons and errors behave exactly as they do over HTTP: a failed stream yields
its events up to `message_end`, then raises `ProviderStreamError` or `StreamInterruptedError` with the
partial message. Call ids are `call_1`, `call_2`... unless given.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeAlias

import anyio
import anyio.lowlevel
import orjson

from .._accumulate import Accumulator
from ..events import (
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
    ToolResultEvent,
    ToolStartedEvent,
    Usage,
    UsageEvent,
)
from ..exceptions import ProviderStreamError, StreamInterruptedError, UserError
from ..messages import Message
from ..models import _INTERRUPTIONS, Model, ModelResponse
from ..settings import ModelSettings
from ..tools import ToolDefinition

__all__ = [
    "Delay",
    "Disconnect",
    "Fail",
    "Finish",
    "ScriptedModel",
    "ScriptedRequest",
    "Text",
    "Thinking",
    "ToolCall",
    "Turn",
]

_EVENT_TYPES = (TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta, ToolCallEnd, ProviderToolEvent,
                UsageEvent, FinishEvent, ErrorEvent, MessageEndEvent, ToolStartedEvent, ToolResultEvent)


@dataclass(frozen=True, slots=True)
class Delay:
    """Pause the stream for `seconds` before the next item."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Text:
    """Text streamed in `chunks` pieces of about equal size, `delay` seconds apart."""

    text: str
    chunks: int = 1
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class Thinking:
    """A block of reasoning text, with an optional signature."""

    text: str
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call whose argument text streams in `chunks` fragments, `delay` seconds apart.

    Args:
        name: The tool's name.
        arguments: An object (sent as its JSON) or the exact argument text, which may be invalid JSON.
        id: The call id; `call_1`, `call_2`... by default.
        chunks: How many fragments the argument text is split into.
        delay: Seconds before each fragment after the first, and before the completion signal: a
            complete call takes `chunks * delay` seconds.
        complete: Send the call's completion signal (as Anthropic's `content_block_stop` does). With
            `False` the call stays open until the response ends: it is then parsed if the response
            finished normally, and invalid if it was cut off, failed or finished with "length".
    """

    name: str
    arguments: dict[str, Any] | str | None = None
    id: str | None = None
    chunks: int = 1
    delay: float = 0.0
    complete: bool = True


@dataclass(frozen=True, slots=True)
class Finish:
    """The provider's completion signal with this reason (by default `tool_calls` or `stop`)."""

    reason: FinishReason
    raw_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Fail:
    """The provider reports an error inside the stream; the response ends there."""

    message: str = "The scripted provider reported an error."
    error_type: str = "provider_error"


@dataclass(frozen=True, slots=True)
class Disconnect:
    """The connection drops; the response ends there and open calls become invalid."""

    message: str = "The scripted connection dropped before the response was complete."


Item: TypeAlias = str | Text | Thinking | ToolCall | Delay | Usage | Finish | Fail | Disconnect | Event


@dataclass(slots=True, kw_only=True)
class ScriptedRequest:
    """One request the model received, and what became of its response.

    Attributes:
        index: 0-based position among the model's requests.
        messages: The messages sent (system prompt included).
        tools: The tool definitions offered.
        settings: The settings passed.
        opened_at: `time.perf_counter()` when the response was opened.
        finished_at: When the response's last event was produced (`None` if it never was).
        closed_at: When the response was closed (`None` if it never was).
    """

    index: int
    messages: list[Message]
    tools: list[ToolDefinition]
    settings: ModelSettings
    opened_at: float | None = None
    finished_at: float | None = None
    closed_at: float | None = None

    @property
    def closed(self) -> bool:
        return self.closed_at is not None

    @property
    def finished(self) -> bool:
        """The whole turn was played."""
        return self.finished_at is not None

    @property
    def last_message(self) -> Message:
        return self.messages[-1]


Turn: TypeAlias = Sequence[Item] | BaseException | Callable[[ScriptedRequest], "Turn"]


class ScriptedModel(Model):
    """A `Model` that answers the n-th request with the n-th scripted turn (see the module docstring).

    Attributes:
        requests: Every request received, in order, with its messages, tools and settings.
    """

    def __init__(self, *turns: Turn, name: str = "scripted") -> None:
        self.turns = list(turns)
        self.name = f"scripted:{name}"
        self.provider_name = "scripted"
        self.protocol_name = None
        self.requests: list[ScriptedRequest] = []
        self._call_counter = 0

    def add_turn(self, turn: Turn) -> None:
        """Script one more response."""
        self.turns.append(turn)

    def _next_call_id(self) -> str:
        self._call_counter += 1
        return f"call_{self._call_counter}"

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ScriptedResponse:
        index = len(self.requests)
        request = ScriptedRequest(index=index, messages=list(messages), tools=list(tools),
                                  settings=ModelSettings(**(settings or {})))
        self.requests.append(request)
        if index >= len(self.turns):
            raise UserError(f"ScriptedModel was asked for response {index + 1} but was given only "
                            f"{len(self.turns)} turn(s); script one more.")
        turn = self.turns[index]
        while callable(turn) and not isinstance(turn, BaseException):
            turn = turn(request)
        return ScriptedResponse(self, request, turn)


class ScriptedResponse(ModelResponse):
    """One scripted response being played."""

    def __init__(self, model: ScriptedModel, request: ScriptedRequest, turn: Turn) -> None:
        self._model = model
        self.request = request
        self._turn = turn
        self._iterator: AsyncIterator[Event] | None = None
        self._opened = False
        self.message: Message | None = None
        self.usage: Usage | None = None
        self.finish_reason: FinishReason | None = None

    async def __aenter__(self) -> ScriptedResponse:
        await anyio.lowlevel.checkpoint()
        if isinstance(self._turn, BaseException):
            raise self._turn
        self._opened = True
        self.request.opened_at = time.perf_counter()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        iterator, self._iterator = self._iterator, None
        if iterator is not None:
            await iterator.aclose()  # type: ignore[attr-defined]
        self.request.closed_at = time.perf_counter()

    def __aiter__(self) -> AsyncIterator[Event]:
        if not self._opened:
            raise UserError("Use the response inside `async with model.stream(...) as response:` before iterating.")
        if self._iterator is not None:
            raise UserError("A response can be iterated only once.")
        items = list(self._turn)  # type: ignore[arg-type]
        if any(isinstance(item, _EVENT_TYPES) for item in items):
            self._iterator = self._play_events(items)
        else:
            self._iterator = self._play_items(items)
        return self._iterator

    async def _play_events(self, items: list[Any]) -> AsyncIterator[Event]:
        ends = [i for i in items if isinstance(i, MessageEndEvent)]
        if not ends:
            raise UserError("A turn of ready-made events needs a MessageEndEvent carrying the message.")
        for item in items:
            if isinstance(item, Delay):
                await anyio.sleep(item.seconds)
                continue
            if not isinstance(item, _EVENT_TYPES):
                raise UserError(f"A turn of ready-made events cannot also hold {item!r}; use events only.")
            if isinstance(item, UsageEvent):
                self.usage = item.usage
            elif isinstance(item, FinishEvent):
                self.finish_reason = item.reason
            elif isinstance(item, MessageEndEvent):
                self.message = item.message
                self.request.finished_at = time.perf_counter()
            await anyio.lowlevel.checkpoint()
            yield item

    async def _play_items(self, items: list[Any]) -> AsyncIterator[Event]:
        acc = Accumulator(id_factory=self._model._next_call_id, provider="scripted")
        finished = False
        for item in items:
            if isinstance(item, Delay):
                await anyio.sleep(item.seconds)
                continue
            if isinstance(item, str):
                acc.text(item)
            elif isinstance(item, Text):
                for i, piece in enumerate(_split(item.text, item.chunks)):
                    if i and item.delay:
                        await anyio.sleep(item.delay)
                    acc.text(piece)
                    for event in _drain(acc):
                        await anyio.lowlevel.checkpoint()
                        yield event
            elif isinstance(item, Thinking):
                acc.thinking(item.text, new_block=True)
                if item.signature:
                    acc.thinking_signature(item.signature)
            elif isinstance(item, ToolCall):
                async for event in self._play_call(acc, item):
                    yield event
            elif isinstance(item, Usage):
                acc.set_usage(item)
            elif isinstance(item, Finish):
                acc.finish(item.reason, item.raw_reason)
                finished = True
            elif isinstance(item, Fail):
                acc.fail(item.error_type, item.message)
                break
            elif isinstance(item, Disconnect):
                acc.fail("connection_lost", item.message)
                break
            else:
                raise UserError(f"ScriptedModel cannot play {item!r}; see toolwire.testing for the items.")
            for event in _drain(acc):
                await anyio.lowlevel.checkpoint()
                yield event
        else:
            if not finished:
                for call in acc.open_calls():
                    acc.end_call(call)
                acc.finish("tool_calls" if acc.calls else "stop")
        self.message = acc.close()
        self.usage = acc.usage
        self.finish_reason = acc.finish_reason
        self.request.finished_at = time.perf_counter()
        for event in _drain(acc):
            await anyio.lowlevel.checkpoint()
            yield event
        error = acc.error
        if error is not None:
            cls = StreamInterruptedError if error.error_type in _INTERRUPTIONS else ProviderStreamError
            raise cls(error.message, provider="scripted", error_type=error.error_type,
                      partial_message=self.message)

    async def _play_call(self, acc: Accumulator, item: ToolCall) -> AsyncIterator[Event]:
        call = acc.start_call(item.id, item.name)
        arguments = item.arguments
        raw = arguments if isinstance(arguments, str) else orjson.dumps(arguments or {}).decode()
        for i, fragment in enumerate(_split(raw, item.chunks)):
            if i and item.delay:
                await anyio.sleep(item.delay)
            acc.call_arguments(call, fragment)
            for event in _drain(acc):
                await anyio.lowlevel.checkpoint()
                yield event
        if item.complete:
            if item.delay:
                await anyio.sleep(item.delay)
            acc.end_call(call)


def _drain(acc: Accumulator) -> list[Event]:
    events, acc.events = acc.events, []
    return events


def _split(text: str, pieces: int) -> list[str]:
    """`text` in `pieces` parts of about equal size (fewer only if the text is shorter than that)."""
    if not text:
        return []
    pieces = max(1, min(pieces, len(text)))
    bounds = [len(text) * i // pieces for i in range(pieces + 1)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]
