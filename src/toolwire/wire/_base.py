"""What every wire protocol provides, and the stream-parser bases they build on.

A wire protocol is two pure mappings: toolwire messages → one HTTP request body, and raw response
bytes → accumulator calls. It does no I/O; `toolwire.models.HTTPModel` sends the request and feeds
the parser. A host (OpenRouter, Groq...) is a `Provider` configured onto a protocol, never a new parser.

Parsers are tolerant of what protocols allow (unknown fields and event types are ignored) and strict
about what they do not: a chunk that is not JSON, a field of the wrong type (checked where it is read,
see `_values`), a body in which no frame of the protocol is recognised, or one event larger than
`max_event_bytes` stops the parse with a typed error (`malformed_chunk`, `invalid_field`,
`unrecognised_body`, `event_too_large`); the accumulator then keeps what was complete and marks open
calls invalid. Parsers never raise: whatever a payload does to an adapter becomes such an error.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from .._accumulate import Accumulator
from .._sse import MAX_EVENT_BYTES, EventTooLarge, SSEDecoder
from ..messages import Message
from ..settings import ModelSettings
from ..tools import ToolDefinition
from ._values import InvalidField, SurrogateJoiner, error_message_from_body, slow_loads

if TYPE_CHECKING:
    from ..providers import Provider

__all__ = ["JSONLinesParser", "SSEParser", "StreamParser", "WireProtocol", "sse_prefix"]

_loads = orjson.loads

_HEAD_BYTES = 512
"""How much of the body is kept for explaining a body in which nothing was recognised."""


class StreamParser(ABC):
    """Raw response bytes in, accumulator calls out."""

    protocol: ClassVar[str] = "wire"
    """The protocol's name, for error messages."""

    def __init__(self, acc: Accumulator) -> None:
        self.acc = acc
        self.stopped = False
        self.frames = 0
        """Payloads framed so far (events, lines, objects): progress for the idle timeout."""
        self.content_type: str | None = None
        """The response's content type, when known, for explaining a body that is not a stream."""
        self._head: list[bytes] = []
        self._first: bytes | None = None
        self._surrogates: SurrogateJoiner | None = None
        self._max_event_bytes = MAX_EVENT_BYTES

    @property
    def max_event_bytes(self) -> int:
        """The largest single event (line, object) the framing buffers before `event_too_large`."""
        return self._max_event_bytes

    @max_event_bytes.setter
    def max_event_bytes(self, value: int) -> None:
        self._max_event_bytes = value
        self.on_limit(value)

    def on_limit(self, value: int) -> None:  # noqa: B027 - optional hook
        """Pass a new `max_event_bytes` to the framing."""

    @abstractmethod
    def feed(self, chunk: bytes) -> None:
        """Consume the next bytes of the body, of any size."""

    def close(self) -> Message:
        """End of body: finish the response and return the assembled message."""
        if not self.stopped:
            try:
                self.flush()
            except EventTooLarge as exc:
                self.too_large(exc)
            except Exception as exc:  # a parser never raises: see the module docstring
                self.malformed(b"", exc)
        if not self.stopped:
            try:
                self.on_end()
            except Exception as exc:
                self.malformed(b"", exc)
        acc = self.acc
        if acc.finish_reason is None and acc.error is None:
            kind, message = self.unfinished()
            acc.fail(kind, message)
        return acc.close()

    def flush(self) -> None:  # noqa: B027 - optional hook
        """Handle whatever the framing still buffers at end of body."""

    def on_end(self) -> None:  # noqa: B027 - optional hook
        """Protocol-specific end-of-body handling, before the accumulator closes."""

    def owns(self, payload: dict[str, Any]) -> bool:
        """Whether `payload` looks like this protocol's (used only to explain a stream that never finished)."""
        return True

    # -- framing helpers ---------------------------------------------------------------------------

    def seen(self, chunk: bytes) -> None:
        """Keep the start of the body while nothing is framed (called per read until a frame arrives)."""
        if sum(len(h) for h in self._head) < _HEAD_BYTES:
            self._head.append(chunk[:_HEAD_BYTES])

    def framed(self, first: bytes) -> None:
        """The first payload was framed: remember it (only it) for `unfinished`."""
        if self._first is None:
            self._first = first[:_HEAD_BYTES]

    def dispatch(self, data: bytes, event: str | None = None) -> None:
        """Decode one framed JSON payload and hand it to `on_payload`; anything unreadable stops the parse."""
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            payload = self._slow(data, exc)
            if payload is None:
                return
        if type(payload) is not dict:
            self.malformed(data)
            return
        self.deliver(event, payload, data)

    def deliver(self, event: str | None, payload: dict[str, Any], data: bytes) -> None:
        """Hand one decoded payload to the adapter, turning whatever it raises into a stream error."""
        try:
            self.on_payload(event, payload)
        except InvalidField as exc:
            self.invalid(exc, data)
        except Exception as exc:
            self.malformed(data, exc)

    def _slow(self, data: bytes, exc: orjson.JSONDecodeError) -> Any:
        """A payload orjson refused: join split UTF-16 surrogate halves, or report it malformed (None)."""
        if b"\\ud" in data.lower():
            try:
                value = slow_loads(data)
            except (ValueError, RecursionError):
                pass
            else:
                if self._surrogates is None:
                    self._surrogates = SurrogateJoiner()
                try:
                    return self._surrogates.repair(value)
                except RecursionError:
                    pass
        self.malformed(data, exc)
        return None

    @abstractmethod
    def on_payload(self, event: str | None, payload: dict[str, Any]) -> None:
        """One decoded payload. `event` is the SSE `event:` name, or None where the framing has none."""

    # -- errors ----------------------------------------------------------------------------------

    def malformed(self, data: bytes | str, exc: BaseException | None = None) -> None:
        if self.frames <= 1 and not self.acc.calls and not _looks_like_json(data):
            # The very first frame is not JSON: say what the body is rather than quote a parse error.
            self.stop("unrecognised_body", self.describe_body())
            return
        snippet = data[:200] if isinstance(data, str) else data[:200].decode("utf-8", "replace")
        why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
        self.stop(
            "malformed_chunk",
            f"The provider sent a chunk that is not valid {self.protocol} data{why}: {snippet!r}. "
            "The response was stopped there; everything complete before it is kept.",
        )

    def invalid(self, exc: InvalidField, data: bytes) -> None:
        self.stop(
            "invalid_field",
            f"The {self.protocol} stream sent `{exc.path}` as {exc.kind} where {exc.expected} belongs, "
            "so the response was stopped there; everything complete before it is kept. The provider, or a "
            "proxy in between, is sending data this protocol does not allow.",
        )

    def too_large(self, exc: EventTooLarge) -> None:
        self.stop(
            "event_too_large",
            f"The provider sent a single {self.protocol} event of more than {exc.limit:,} bytes, so the response "
            "was stopped there; everything complete before it is kept. If such large events are expected, "
            "raise `max_event_bytes` (get_model(..., max_event_bytes=N)).",
        )

    def stop(self, kind: str, message: str) -> None:
        self.acc.fail(kind, message)
        self.stopped = True

    def unfinished(self) -> tuple[str, str]:
        """The error for a body that ended without a completion signal: what was received, and why."""
        complete = "The stream ended before the provider said the response was complete."
        if self.frames == 0:
            # The start of a stream that was cut early is incomplete; other bytes are not a stream at all.
            head = b"".join(self._head).lstrip()
            kind = "incomplete_stream" if self.stream_prefix(head) else "unrecognised_body"
            return kind, self.describe_body() if kind == "unrecognised_body" or not head else complete
        acc = self.acc
        if self._first is not None and not acc.calls and acc.usage is None and not acc.has_content:
            try:
                first = orjson.loads(self._first)
            except orjson.JSONDecodeError:
                first = None
            if isinstance(first, dict) and not self.owns(first):
                snippet = self._first[:200].decode("utf-8", "replace")
                return "unrecognised_body", (
                    f"{self.frames} payload(s) were read, but none is a {self.protocol} event (the first: "
                    f"{snippet!r}). Check that the body comes from a {self.protocol} endpoint (with "
                    "`toolwire replay`, that --protocol is right)."
                )
        return "incomplete_stream", complete

    def stream_prefix(self, head: bytes) -> bool:
        """Whether `head` (the body, nothing framed yet) can be the start of a stream cut short."""
        return not head

    def describe_body(self) -> str:
        """A sentence on a body in which no frame was recognised: its content type, start and likely cause."""
        head = b"".join(self._head)[:_HEAD_BYTES]
        kind = f" (content type {self.content_type})" if self.content_type else ""
        text = head.lstrip()
        start = text[:160].decode("utf-8", "replace")
        hint = (f"Check that the base URL points at a {self.protocol} endpoint (with `toolwire replay`, that "
                "--protocol is right).")
        instead = f"instead of a stream in the {self.protocol} protocol"
        if not text:
            return f"The provider answered with an empty body{kind} {instead}. {hint}"
        ctype = (self.content_type or "").lower()
        if "html" in ctype or text[:1] == b"<":
            return (f"The provider answered with an HTML page{kind} {instead}, usually the error page of a proxy "
                    f"or gateway in between; it began: {start!r}. {hint}")
        if text[:1] in (b"{", b"["):
            said = error_message_from_body(head)
            return (f"The provider answered with one JSON document{kind} {instead}: the request was not "
                    f"streamed, or this is an error; it said: {said[:300]!r}. {hint}")
        return (f"No {self.protocol} event was found in the body{kind}; it began: {start!r}. {hint}")


_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")


def sse_prefix(head: bytes) -> bool:
    """Whether `head` can begin an event stream: nothing yet, or the start of an SSE field line."""
    line = head[:16]
    return any(line.startswith(f) or f.startswith(line) for f in _SSE_FIELDS)


def _looks_like_json(data: bytes | str) -> bool:
    head = data.lstrip()[:1]
    return head in (b"{", b"[", "{", "[", b'"', '"') or not head


class SSEParser(StreamParser):
    """Base for `text/event-stream` protocols: subclasses implement `on_payload`."""

    def __init__(self, acc: Accumulator) -> None:
        super().__init__(acc)
        self._decoder = SSEDecoder()
        self._inline = type(self).handle is SSEParser.handle

    def on_limit(self, value: int) -> None:
        self._decoder.max_event_bytes = value

    def stream_prefix(self, head: bytes) -> bool:
        return sse_prefix(head)

    def feed(self, chunk: bytes) -> None:
        if self.stopped:
            return
        try:
            events = self._decoder.feed(chunk)
        except EventTooLarge as exc:
            self.too_large(exc)
            return
        frames = self.frames
        if not frames:
            self.seen(chunk)
            if not events:
                return
            self.framed(events[0][1])
        elif not events:
            return
        self.frames = frames + len(events)
        if not self._inline:
            for event, data in events:
                self.handle(event, data)
                if self.stopped:
                    return
            return
        # `handle` inlined for the common case (a JSON object that the adapter reads): this runs once
        # per event. `[DONE]`, non-objects and bad JSON take the general path.
        for event, data in events:
            try:
                payload = _loads(data)
            except orjson.JSONDecodeError:
                self.handle(event, data)
            else:
                if type(payload) is dict:
                    try:
                        self.on_payload(event, payload)
                    except InvalidField as exc:
                        self.invalid(exc, data)
                    except Exception as exc:
                        self.malformed(data, exc)
                else:
                    self.handle(event, data)
            if self.stopped:
                return

    def flush(self) -> None:
        # An unterminated last event is usually a body cut mid-line: if it does not parse it is
        # dropped, and the accumulator reports the stream as incomplete rather than malformed.
        for event, data in self._decoder.close():
            try:
                orjson.loads(data) if data != b"[DONE]" else None
            except orjson.JSONDecodeError:
                if b"\\ud" not in data.lower():
                    return
            if not self.frames:
                self.framed(data)
            self.frames += 1
            self.handle(event, data)
            if self.stopped:
                return

    def handle(self, event: str | None, data: bytes) -> None:
        if data == b"[DONE]":
            self.on_done()
            return
        self.dispatch(data, event)

    def on_done(self) -> None:
        """`data: [DONE]` arrived (OpenAI-style terminator)."""


class JSONLinesParser(StreamParser):
    """Base for newline-delimited JSON bodies (Ollama): subclasses implement `on_payload`.

    A line still arriving is kept as pieces and joined once, when its newline comes, so a long line
    costs time linear in its size whatever the read size.
    """

    def __init__(self, acc: Accumulator) -> None:
        super().__init__(acc)
        self._tail: list[bytes] = []
        self._tail_size = 0

    def stream_prefix(self, head: bytes) -> bool:
        return not head or head[:1] == b"{"

    def feed(self, chunk: bytes) -> None:
        if self.stopped:
            return
        if not self.frames:
            self.seen(chunk)
        if b"\n" not in chunk:
            self._tail.append(chunk)
            self._tail_size += len(chunk)
            if self._tail_size > self._max_event_bytes:
                self.too_large(EventTooLarge(self._tail_size, self._max_event_bytes))
            return
        if self._tail:
            self._tail.append(chunk)
            chunk = b"".join(self._tail)
            self._tail = []
            self._tail_size = 0
        lines = chunk.split(b"\n")
        last = lines.pop()
        if last:
            self._tail.append(last)
            self._tail_size = len(last)
        for line in lines:
            self._line(line)
            if self.stopped:
                return
        if self._tail_size > self._max_event_bytes:
            self.too_large(EventTooLarge(self._tail_size, self._max_event_bytes))

    def flush(self) -> None:
        if self._tail:
            tail = b"".join(self._tail)
            self._tail = []
            self._tail_size = 0
            try:
                orjson.loads(tail)
            except orjson.JSONDecodeError:
                if self.frames or tail.lstrip()[:1] == b"{":
                    return  # a body cut mid-line: reported as an incomplete stream, not a malformed one
            self._line(tail)

    def _line(self, line: bytes) -> None:
        if line.strip():
            if not self.frames:
                self.framed(line)
            self.frames += 1
            self.dispatch(line)


class WireProtocol(ABC):
    """One wire protocol, configured for one provider (host)."""

    name: ClassVar[str]
    """The protocol's name as `toolwire replay --protocol` and the provider table use it."""

    display_name: ClassVar[str] = ""
    """The API's name in error messages ("OpenAI Chat Completions")."""

    def __init__(self, provider: Provider | None = None) -> None:
        self.provider = provider

    def who(self) -> str:
        """The API and host a request goes to, as error messages name them."""
        api = self.display_name or self.name
        return f"{api} (provider {self.provider.name!r})" if self.provider is not None else api

    def option(self, key: str, default: Any = None) -> Any:
        """A host quirk from the provider configuration."""
        if self.provider is None:
            return default
        return self.provider.options.get(key, default)

    @abstractmethod
    def endpoint(self, model: str, settings: ModelSettings) -> str:
        """The request path relative to the provider's base URL (may carry a query string)."""

    @abstractmethod
    def build_request(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> dict[str, Any]:
        """The JSON request body for a streamed response."""

    @abstractmethod
    def new_parser(self, acc: Accumulator) -> StreamParser:
        """A parser for one streamed response body."""

    def count_request(self, model: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """The path and JSON body that count the input tokens of `body` (a `build_request` body), or
        None when the protocol has no counting endpoint."""
        return None

    def count_from(self, payload: Any) -> int | None:
        """The input token count out of the counting endpoint's JSON answer (None: not in it)."""
        return None

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def default_headers(self) -> dict[str, str]:
        return {"Accept": "text/event-stream"}
