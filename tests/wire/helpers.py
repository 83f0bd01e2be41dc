"""Shared helpers for wire-protocol tests: serve a body through httpx.MockTransport and stream it."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from tests.conftest import fixture_path
from toolwire import Message, get_model
from toolwire._accumulate import Accumulator
from toolwire.events import Event
from toolwire.exceptions import StreamError
from toolwire.models import StreamedResponse
from toolwire.replay import payload_lines_to_sse
from toolwire.wire import protocol_class


def counter_ids(prefix: str = "gen_") -> Callable[[], str]:
    """Deterministic ids for calls the provider did not name."""
    numbers = itertools.count()
    return lambda: f"{prefix}{next(numbers)}"


def chunked_transport(body: bytes, *, chunk_size: int | None = None, status: int = 200,
                      content_type: str = "text/event-stream",
                      seen: list[httpx.Request] | None = None) -> httpx.MockTransport:
    """A transport answering every request with `body`, streamed in `chunk_size` pieces."""

    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        step = chunk_size or max(len(body), 1)
        chunks = [body[i:i + step] for i in range(0, len(body), step)]
        return httpx.Response(status, headers={"content-type": content_type}, stream=_Chunks(chunks))

    return httpx.MockTransport(handler)


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> Any:
        for chunk in self._chunks:
            yield chunk


class StreamOutcome:
    def __init__(self, events: list[Event], response: StreamedResponse, error: StreamError | None) -> None:
        self.events = events
        self.response = response
        self.error = error

    @property
    def message(self) -> Message:
        assert self.response.message is not None
        return self.response.message


async def stream_body(model_spec: str, body: bytes, *, chunk_size: int | None = None,
                      messages: Sequence[Message] = (), status: int = 200,
                      content_type: str = "text/event-stream", **model_kwargs: Any) -> StreamOutcome:
    """Stream `body` through the real HTTPModel path; collect the events and any StreamError."""
    async with httpx.AsyncClient(transport=chunked_transport(body, chunk_size=chunk_size, status=status,
                                                             content_type=content_type)) as client:
        model = get_model(model_spec, api_key="test-key", http_client=client, id_factory=counter_ids(),
                          **model_kwargs)
        events: list[Event] = []
        error: StreamError | None = None
        async with model.stream(list(messages) or [Message.user("hi")]) as response:
            try:
                async for event in response:
                    events.append(event)
            except StreamError as exc:
                error = exc
        return StreamOutcome(events, response, error)


def summarize(message: Message) -> list[tuple[Any, ...]]:
    """A compact, comparable view of a message's parts (long texts as prefix + length)."""
    out: list[tuple[Any, ...]] = []
    for part in message.parts:
        if part.type == "text":
            out.append(("text", part.text))
        elif part.type == "thinking":
            out.append(("thinking", part.text[:30], len(part.text)))
        elif part.type == "tool_call":
            out.append(("call", part.id, part.name, part.arguments, part.arguments_raw))
        elif part.type == "invalid_tool_call":
            out.append(("invalid", part.id, part.name, part.arguments_raw))
        else:
            out.append((part.type,))
    return out


def recorded_body(name: str) -> bytes:
    """A recording as the server sent it (payload-per-line `.chunks.jsonl` files get their SSE framing back)."""
    body = fixture_path(name).read_bytes()
    return payload_lines_to_sse(body) if name.endswith(".chunks.jsonl") else body


def parse_in_pieces(protocol: str, body: bytes, cuts: list[int]) -> tuple[Message, list[Event], Any, Any, Any]:
    """Feed `body` to a protocol's parser cut at `cuts`: (message, events, finish_reason, usage, error)."""
    acc = Accumulator(id_factory=counter_ids())
    parser = protocol_class(protocol)().new_parser(acc)
    previous = 0
    for cut in [*sorted(set(cuts)), len(body)]:
        parser.feed(body[previous:cut])
        previous = cut
    message = parser.close()
    return message, acc.events, acc.finish_reason, acc.usage, acc.error
