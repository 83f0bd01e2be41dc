"""What every wire protocol provides, and the stream-parser bases they build on.

A wire protocol is two pure mappings: toolwire messages → one HTTP request body, and raw response
bytes → accumulator calls. It does no I/O; `toolwire.models.HTTPModel` sends the request and feeds
the parser. A host (OpenRouter, Groq...) is a `Provider` configured onto a protocol, never a new parser.

Parsers are tolerant: unknown fields and event types are ignored; a chunk that is not JSON, or a payload
whose shape makes the adapter fail, stops the parse with a `malformed_chunk` error (the accumulator
then keeps what was complete and marks open calls invalid). They never raise.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from .._accumulate import Accumulator
from .._sse import SSEDecoder
from ..messages import Message
from ..settings import ModelSettings
from ..tools import ToolDefinition

if TYPE_CHECKING:
    from ..providers import Provider

__all__ = ["JSONLinesParser", "SSEParser", "StreamParser", "WireProtocol"]


class StreamParser(ABC):
    """Raw response bytes in, accumulator calls out."""

    def __init__(self, acc: Accumulator) -> None:
        self.acc = acc
        self.stopped = False

    @abstractmethod
    def feed(self, chunk: bytes) -> None:
        """Consume the next bytes of the body, of any size."""

    def close(self) -> Message:
        """End of body: finish the response and return the assembled message."""
        if not self.stopped:
            self.flush()
        self.on_end()
        return self.acc.close()

    def flush(self) -> None:  # noqa: B027 - optional hook
        """Handle whatever the framing still buffers at end of body."""

    def on_end(self) -> None:  # noqa: B027 - optional hook
        """Protocol-specific end-of-body handling, before the accumulator closes."""

    def dispatch(self, data: bytes, event: str | None = None) -> None:
        """Decode one framed JSON payload and hand it to `on_payload`; anything unreadable stops the parse."""
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            self.malformed(data, exc)
            return
        if type(payload) is not dict:
            self.malformed(data)
            return
        try:
            self.on_payload(event, payload)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            self.malformed(data, exc)

    @abstractmethod
    def on_payload(self, event: str | None, payload: dict[str, Any]) -> None:
        """One decoded payload. `event` is the SSE `event:` name, or None where the framing has none."""

    def malformed(self, data: bytes | str, exc: BaseException | None = None) -> None:
        snippet = data[:200] if isinstance(data, str) else data[:200].decode("utf-8", "replace")
        why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
        self.acc.fail(
            "malformed_chunk",
            f"The provider sent a chunk toolwire could not read{why}: {snippet!r}. "
            "The response was stopped there; everything complete before it is kept.",
        )
        self.stopped = True


class SSEParser(StreamParser):
    """Base for `text/event-stream` protocols: subclasses implement `on_payload`."""

    def __init__(self, acc: Accumulator) -> None:
        super().__init__(acc)
        self._decoder = SSEDecoder()
        self._inline = type(self).handle is SSEParser.handle

    def feed(self, chunk: bytes) -> None:
        if self.stopped:
            return
        if not self._inline:
            for event, data in self._decoder.feed(chunk):
                self.handle(event, data)
                if self.stopped:
                    return
            return
        # `handle` inlined for the common case (a JSON object that the adapter reads): this runs once
        # per event. `[DONE]`, non-objects and bad JSON take the general path.
        loads = orjson.loads
        on_payload = self.on_payload
        for event, data in self._decoder.feed(chunk):
            try:
                payload = loads(data)
            except orjson.JSONDecodeError:
                self.handle(event, data)
            else:
                if type(payload) is dict:
                    try:
                        on_payload(event, payload)
                    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
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
                return
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
    """Base for newline-delimited JSON bodies (Ollama): subclasses implement `on_payload`."""

    def __init__(self, acc: Accumulator) -> None:
        super().__init__(acc)
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        if self.stopped:
            return
        if self._tail:
            chunk = self._tail + chunk
        lines = chunk.split(b"\n")
        self._tail = lines.pop()
        for line in lines:
            self._line(line)
            if self.stopped:
                return

    def flush(self) -> None:
        if self._tail:
            tail, self._tail = self._tail, b""
            try:
                orjson.loads(tail)
            except orjson.JSONDecodeError:
                return  # a body cut mid-line: reported as an incomplete stream, not a malformed one
            self._line(tail)

    def _line(self, line: bytes) -> None:
        if line.strip():
            self.dispatch(line)


class WireProtocol(ABC):
    """One wire protocol, configured for one provider (host)."""

    name: ClassVar[str]
    """The protocol's name as `toolwire replay --protocol` and the provider table use it."""

    def __init__(self, provider: Provider | None = None) -> None:
        self.provider = provider

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

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def default_headers(self) -> dict[str, str]:
        return {"Accept": "text/event-stream"}
