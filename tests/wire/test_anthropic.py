"""Anthropic Messages: recorded streams through the real HTTP path, request mapping, round trips."""

from __future__ import annotations

import functools
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.conftest import fixture_files, fixture_path
from toolwire import get_model
from toolwire._accumulate import TRUNCATED_REASON, Accumulator
from toolwire.events import (
    ErrorEvent,
    Event,
    FinishEvent,
    MessageEndEvent,
    ProviderToolEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from toolwire.exceptions import ProviderStreamError, StreamError, StreamInterruptedError
from toolwire.messages import (
    InvalidToolCallPart,
    Message,
    Part,
    ProviderToolPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from toolwire.models import StreamedResponse
from toolwire.replay import replay
from toolwire.settings import ModelSettings
from toolwire.tools import ToolDefinition
from toolwire.wire.anthropic import Protocol

SSE_FILES = fixture_files("anthropic", ".sse")

OPUS_PARALLEL = "anthropic/claude-3-opus_parallel-2-tools.magentic.sse"
OPUS_TEXT_TOOL = "anthropic/claude-3-opus_text-then-tool.magentic.sse"
HAIKU_PARALLEL_EMPTY = "anthropic/haiku-4.5_parallel-2-tools-empty-args.llm-anthropic.sse"
HAIKU_PADDING = "anthropic/haiku-4.5_single-tool-whitespace-padding.ruby_llm.sse"
HAIKU_TEXT = "anthropic/haiku-4.5_text-only.ruby_llm.sse"
HAIKU_THINKING = "anthropic/haiku-4.5_thinking-signature-then-tool-empty-args.llm-anthropic.sse"
HAIKU_NO_PARAMS = "anthropic/haiku-4.5_tool-no-params.ruby_llm.sse"
SONNET_REDACTED = "anthropic/sonnet-4.5_redacted-thinking-then-text.pydantic-ai.sse"
SONNET_WEB_SEARCH = "anthropic/sonnet-4_server-web-search-tool.pydantic-ai.sse"

THINKING_TEXT = (
    "The user wants me to:\n1. Use the fixed_version tool\n2. Tell them the version\n3. Make a short joke about it"
    "\n\nLet me first call the fixed_version tool to see what version it returns."
)
THINKING_SIGNATURE = (
    "EoQDCm0IDhgCKkCDzGs2kL2PgnDCZU/nM2wG2P1VIXCRHVnhDDzBQxNF1fl4QBXEKLxRItNJ2MwFdW9eeZPhsxSQIxD54cv3zs29MhljbGF1ZGUt"
    "aGFpa3UtNC01LTIwMjUxMDAxOABCCHRoaW5raW5nEgy/OWlwTmmqUjC6L70aDJ4P0R5NfuIe9U5zAiIwCxPduXS2UxCNxJCee3i91qK3cAyAgxCj"
    "L2wkQ5UD56iX1hXGOyuNaiH5k+dF5OCQKsQBxiAo+NjC61hV8nRYtaiP+C4inOcuMKuTG9Z1rysxTXkKBTl3oMiOlnEPHHPpKpg4sYF2G5VoTg8J"
    "Ton20hdZw4GfTEVupnU1qAmnMqyAgke9SoV7HBW/PyA/FxL/q33xJ2gKFiD+BsgI9Z0koMmFKCvm2MoYE6u+ONEwKdFQXL1FKRW6t/bYbJGrLJLw"
    "xilsL82h9j4xjggjMn8Npvpn+zsrDPW/8PuLd4Pu+/EsjoneYwyxQQtUVgzhVGhhANWRjSBwUxgB"
)
REDACTED_1 = (
    "EqkECkYIBxgCKkA8AZ4noDfV5VcOJe/p3JTRB6Xz5297mrWhl3MbHSXDKTMfuB/Z52U2teiWWTN0gg4eQ4bGS9TPilFX/xWTIq9HEgyOmstSPriN"
    "wyn1G7AaDC51r0hQ062qEd55IiIwYQj3Z3MSBBv0bSVdXi60LEHDvC7tzzmpQfw5Hb6R9rtyOz/6vC/xPw9/E1mUqfBqKpADO2HS2QlE/CnuzR90"
    "1nZOn0TOw7kEXwH7kg30c85b9W7iKALgEejY9sELMBdPyIZNlTgKqNOKtY3R/aV5rGIRPTHh2Wh9Ijmqsf/TT7i//Z+InaYTo6f/fxF8R0vFXMRP"
    "OBME4XIscb05HcNhh4c9FDkpqQGYKaq31IR1NNwPWA0BsvdDz7SIo1nfx4H+X0qKKqqegKnQ3ynaXiD5ydT1C4U7fku4ftgF0LGwIk4PwXBE+4BP"
    "0DcKr1HV3cn7YSyNakBSDTvRJMKcXW6hl7X3w2a4//sxjC1Cjq0uzkIHkhzRWirN0OSXt+g3m6b1ex0wGmSyuO17Ak6kgVBpxwPugtrqsflG0ouj"
    "Fem44hecXJ9LQNssPf4RSlcydiG8EXp/XLGTe0YfHbe3kJagkowSH/Dm6ErXBiVs7249brncyY8WA+7MOoqIM82YIU095B9frCqDJDUWnN84VwOs"
    "zRrcaywmpJXZO4aeQLMC1kXD5Wabu+O/00tD/X67EWkkWuR0AhDIXXjpot45vnBd4ewJ/hgB"
)
REDACTED_2 = (
    "EtgBCkYIBxgCKkDQfGkwzflEJP5asG3oQfJXcTwJLoRznn8CmuczWCsJ36dv93X9H0NCeaJRbi5BrCA2DyMgFnRKRuzZx8VTv5axEgwkFmcHJk8B"
    "SiZMZRQaDDYv2KZPfbFgRa2QjyIwm47f5YYsSK9CT/oh/WWpU1HJJVHr8lrC6HG1ItRdtMvYQYmEGy+KhyfcIACfbssVKkDGv/NKqNMOAcu0bd66"
    "gJ2+R1R0PX11Jxn2Nd1JtZqkxx7vMT/PXtHDhm9jkDZ2k/6RjRRFuab/DBV3yRYdZ1J0GAE="
)
REDACTED_TEXT = (
    "I notice that you've sent what appears to be some kind of test string or command. I don't have any special "
    "\"magic string\" triggers or backdoor commands that would expose internal systems or change my behavior.\n\n"
    "I'm Claude, an AI assistant created by Anthropic to be helpful, harmless, and honest. How can I assist you "
    "today with a legitimate task or question?"
)
OPUS_TEXT = (
    "<thinking>\nTo get the weather for a city, the get_weather tool is needed. It requires a location parameter.\n"
    "The user did not specify a city, but asked me to pick one at random. So I can infer the location parameter by "
    "selecting a city name myself.\nWith the location inferred, I have all the required parameters to call the "
    "get_weather tool.\n</thinking>"
)
THINKING_MARK = {"anthropic": {"type": "thinking"}}


def call(call_id: str, name: str, raw: str) -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments=orjson.loads(raw) if raw else {}, arguments_raw=raw)


def _usage(input_tokens: int, output_tokens: int, *, cached: bool = True, reasoning: int | None = None) -> Usage:
    zero = 0 if cached else None
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=zero,
                 cache_write_tokens=zero, reasoning_tokens=reasoning)


def _check_web_search(parts: list[Part]) -> None:
    """The server web-search stream, read by hand: search (with its result), text, search, long cited text."""
    assert [p.type for p in parts] == ["provider_tool", "text", "provider_tool", "text"]
    first, text_1, second, text_2 = parts
    assert isinstance(first, ProviderToolPart)
    assert isinstance(second, ProviderToolPart)
    assert (first.id, first.name, first.provider, first.status) == (
        "srvtoolu_01NcU4XNwyxWK6a9tcJZ8wGY", "web_search", "anthropic", "completed")
    assert first.arguments == {"query": "top world news today"}
    assert (second.id, second.name, second.status) == ("srvtoolu_01WiP3ZfXZXSykVQEL78XJ4T", "web_search",
                                                       "completed")
    assert second.arguments == {"query": "breaking news headlines August 14 2025"}
    assert len(first.result) == 10
    # Shown without the encrypted blobs, which stay in the raw blocks sent back.
    assert first.result[0] == {"type": "web_search_result", "url": "https://www.cnn.com/world",
                               "page_age": "4 hours ago",
                               "title": "World news - breaking news, video, headlines and opinion | CNN"}
    assert isinstance(text_1, TextPart)
    assert isinstance(text_2, TextPart)
    assert text_1.text == "Let me search for more specific breaking news stories to get clearer headlines."
    assert text_2.text.startswith("Based on the search results, I can identify the top 3 major news stories from "
                                  "around the world today (August 14, 2025):\n\n## Top 3 World News Stories Today")
    assert "Russia summit. The White House lowered its expectations" in text_2.text
    assert "\n\n**2. Trump's Federal Takeover of Washington D.C.**\n" in text_2.text
    assert text_2.text.endswith("and major transportation disruptions affecting North America.")


@dataclass
class Expected:
    parts: list[Part] | Any
    finish: str
    raw_finish: str
    usage: Usage
    response_id: str
    model: str
    events: list[str] = field(default_factory=list)
    """The order of block-level events (`text`, `thinking`, `start`, `end`, `provider`), run-length merged."""


EXPECTED: dict[str, Expected] = {
    OPUS_PARALLEL: Expected(
        parts=[call("toolu_01Q54GZYYAzL3HVr4LQDbfXC", "plus", '{"a": 1, "b": 2}'),
               call("toolu_017NYD2BGVvRppZKAX98qedy", "minus", '{"a": 2, "b": 1}')],
        finish="tool_calls", raw_finish="tool_use", usage=_usage(469, 104, cached=False),
        response_id="msg_01VmimdL9rtzYarNBzEM3hTj", model="claude-3-opus-20240229",
        events=["start", "delta", "end", "start", "delta", "end"]),
    OPUS_TEXT_TOOL: Expected(
        parts=[TextPart(text=OPUS_TEXT), call("toolu_01NeeKpbWNsqw53dKdgnCsYY", "get_weather",
                                               '{"location": "Tokyo"}')],
        finish="tool_calls", raw_finish="tool_use", usage=_usage(610, 135, cached=False),
        response_id="msg_01SBqSC6Ceb3t3h6pXFNw3Rn", model="claude-3-opus-20240229",
        events=["text", "start", "delta", "end"]),
    HAIKU_PARALLEL_EMPTY: Expected(
        parts=[call("toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", ""),
               call("toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", "")],
        finish="tool_calls", raw_finish="tool_use", usage=_usage(542, 62),
        response_id="msg_01V2noLbAb2NgKnjaNw6Cn3w", model="claude-haiku-4-5-20251001",
        events=["start", "end", "start", "end"]),
    HAIKU_PADDING: Expected(
        parts=[call("toolu_01MKSN7NHsBVKr7Jvw5pqCQq", "weather",
                     '{"latitude": "52.5200", "longitude": "13.4050"}')],
        finish="tool_calls", raw_finish="tool_use", usage=_usage(633, 75),
        response_id="msg_011CeCGpBQa4v1oPovDvN4gx", model="claude-haiku-4-5-20251001",
        events=["start", "delta", "end"]),
    HAIKU_TEXT: Expected(
        parts=[TextPart(text="1\n2\n3")], finish="stop", raw_finish="end_turn", usage=_usage(15, 9),
        response_id="msg_011CeCGmCzjcUtmtEmMdEiM2", model="claude-haiku-4-5-20251001", events=["text"]),
    HAIKU_THINKING: Expected(
        parts=[ThinkingPart(text=THINKING_TEXT, signature=THINKING_SIGNATURE, provider_data=THINKING_MARK),
               call("toolu_01825dXWLSoJwCst1qTsiWdb", "fixed_version", "")],
        finish="tool_calls", raw_finish="tool_use", usage=_usage(598, 92, reasoning=53),
        response_id="msg_01JdU4xqNHXL9QCFWkwCDKGr", model="claude-haiku-4-5-20251001",
        events=["thinking", "start", "end"]),
    HAIKU_NO_PARAMS: Expected(
        parts=[call("toolu_01EcJNDtgucTvxugUxuGcJmF", "best_language_to_learn", "")],
        finish="tool_calls", raw_finish="tool_use", usage=_usage(579, 41),
        response_id="msg_011CeCGohvqUXY416tg1SEid", model="claude-haiku-4-5-20251001", events=["start", "end"]),
    SONNET_REDACTED: Expected(
        parts=[ThinkingPart(text="", redacted=True,
                            provider_data={"anthropic": {"type": "redacted_thinking", "data": REDACTED_1}}),
               ThinkingPart(text="", redacted=True,
                            provider_data={"anthropic": {"type": "redacted_thinking", "data": REDACTED_2}}),
               TextPart(text=REDACTED_TEXT)],
        finish="stop", raw_finish="end_turn", usage=_usage(92, 189),
        response_id="msg_018XZkwvj9asBiffg3fXt88s", model="claude-sonnet-4-5-20250929", events=["text"]),
    SONNET_WEB_SEARCH: Expected(
        parts=_check_web_search, finish="stop", raw_finish="end_turn", usage=_usage(31772, 644),
        response_id="msg_019ifek4sTha46JcCb2z2yPp", model="claude-sonnet-4-20250514",
        events=["provider", "text", "provider", "text"]),
}


# -- helpers -------------------------------------------------------------------------------------


class _Body(httpx.AsyncByteStream):
    """Yields the given chunks one at a time and records how many the client has pulled."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self.chunks = list(chunks)
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.sent += 1
            yield chunk


@dataclass
class Outcome:
    events: list[Event]
    response: StreamedResponse
    error: StreamError | None
    requests: list[httpx.Request]
    sent_at_event: list[int]

    @property
    def message(self) -> Message:
        assert self.response.message is not None
        return self.response.message


async def stream(chunks: Sequence[bytes], messages: Sequence[Message] = (), *,
                 tools: Sequence[ToolDefinition] = (), model_settings: ModelSettings | None = None) -> Outcome:
    """Serve `chunks` as an Anthropic response and stream it through `get_model(...)` and httpx."""
    body = _Body(chunks)
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = get_model("anthropic:claude-sonnet-4-5", api_key="test", http_client=client)
        events: list[Event] = []
        sent_at_event: list[int] = []
        error: StreamError | None = None
        history = list(messages) or [Message.user("hi")]
        async with model.stream(history, tools=tools, settings=model_settings) as response:
            try:
                async for event in response:
                    events.append(event)
                    sent_at_event.append(body.sent)
            except StreamError as exc:
                error = exc
    return Outcome(events, response, error, requests, sent_at_event)


def split_events(body: bytes) -> list[bytes]:
    """A body cut after every SSE event (each chunk ends with its blank line)."""
    pieces = body.split(b"\n\n")
    return [p + b"\n\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


def parse_pieces(pieces: Sequence[bytes]) -> tuple[list[Event], Message]:
    """The parser alone, fed `pieces` in order (the sans-I/O path every transport drives)."""
    acc = Accumulator()
    parser = Protocol().new_parser(acc)
    events: list[Event] = []
    for piece in pieces:
        parser.feed(piece)
        events.extend(acc.events)
        acc.events.clear()
    message = parser.close()
    events.extend(acc.events)
    return events, message


def short(name: str) -> str:
    return name.split("/")[-1]


def uses(*names: str) -> pytest.MarkDecorator:
    """Parametrize over the named recordings, so each test id cites its fixture file."""
    return pytest.mark.parametrize("name", names, ids=[short(n) for n in names])


@functools.cache
def read_fixture(name: str) -> bytes:
    return fixture_path(name).read_bytes()


def block_event_order(events: Sequence[Event]) -> list[str]:
    names: list[str] = []
    for event in events:
        if isinstance(event, TextDelta):
            name = "text"
        elif isinstance(event, ThinkingDelta):
            name = "thinking"
        elif isinstance(event, ToolCallStart):
            name = "start"
        elif isinstance(event, ToolCallDelta):
            name = "delta"
        elif isinstance(event, ToolCallEnd):
            name = "end"
        elif isinstance(event, ProviderToolEvent):
            name = "provider"
        else:
            continue
        if not names or names[-1] != name:
            names.append(name)
    return names


def sse(*payloads: dict[str, Any]) -> bytes:
    """Anthropic-style SSE: each payload under an `event:` line named by its `type`."""
    return b"".join(b"event: " + p["type"].encode() + b"\ndata: " + orjson.dumps(p) + b"\n\n" for p in payloads)


def message_start(input_tokens: int = 10) -> dict[str, Any]:
    return {"type": "message_start", "message": {"id": "msg_test", "type": "message", "role": "assistant",
                                                 "model": "claude-test", "content": [],
                                                 "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": body}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_end(stop_reason: str, output_tokens: int = 5) -> list[dict[str, Any]]:
    return [{"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
             "usage": {"output_tokens": output_tokens}}, {"type": "message_stop"}]


# -- recorded streams through the HTTP path ------------------------------------------------------


def test_every_recording_has_an_expectation() -> None:
    assert SSE_FILES, "no Anthropic recordings found"
    assert sorted(EXPECTED) == SSE_FILES


@pytest.mark.anyio
@pytest.mark.parametrize("name", SSE_FILES, ids=short)
async def test_recorded_stream_through_http(name: str) -> None:
    expected = EXPECTED[name]
    outcome = await stream(split_events(read_fixture(name)))
    assert outcome.error is None
    message = outcome.message
    if callable(expected.parts):
        expected.parts(message.parts)
    else:
        assert message.parts == expected.parts
    assert message.role == "assistant"
    assert message.metadata == {"provider": "anthropic", "response_id": expected.response_id,
                                "model": expected.model}
    assert outcome.response.finish_reason == expected.finish
    assert outcome.response.usage == expected.usage
    finish = [e for e in outcome.events if isinstance(e, FinishEvent)]
    assert [(f.reason, f.raw_reason) for f in finish] == [(expected.finish, expected.raw_finish)]
    assert isinstance(outcome.events[-1], MessageEndEvent)
    assert outcome.events[-1].message == message
    assert not any(isinstance(e, ErrorEvent) for e in outcome.events)
    assert block_event_order(outcome.events) == expected.events
    # Every call that started also ended, with the part the message holds.
    ends = [e.call for e in outcome.events if isinstance(e, ToolCallEnd)]
    assert ends == [p for p in message.parts if isinstance(p, ToolCallPart | InvalidToolCallPart)]


@pytest.mark.anyio
@uses(HAIKU_TEXT)
async def test_request_carries_anthropic_url_and_headers(name: str) -> None:
    outcome = await stream(split_events(read_fixture(name)))
    (request,) = outcome.requests
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == "test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    body = orjson.loads(request.content)
    assert body == {"model": "claude-sonnet-4-5", "max_tokens": 4096, "stream": True,
                    "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}


@pytest.mark.anyio
@uses(OPUS_PARALLEL)
async def test_tool_call_end_arrives_at_its_content_block_stop(name: str) -> None:
    """The first call is runnable before the bytes of the second call have even been sent."""
    chunks = split_events(read_fixture(name))
    outcome = await stream(chunks)
    first_end = next(i for i, e in enumerate(outcome.events) if isinstance(e, ToolCallEnd))
    end = outcome.events[first_end]
    assert isinstance(end, ToolCallEnd)
    assert end.call == call("toolu_01Q54GZYYAzL3HVr4LQDbfXC", "plus", '{"a": 1, "b": 2}')
    stop_chunk = next(i for i, c in enumerate(chunks) if b'"content_block_stop","index":0' in c)
    assert b'"content_block_start","index":1' in chunks[stop_chunk + 1]
    # When the event reached us, the client had pulled exactly up to the block's stop event.
    assert outcome.sent_at_event[first_end] == stop_chunk + 1
    later = outcome.events[first_end + 1:]
    assert isinstance(later[0], ToolCallStart)
    assert later[0].name == "minus"


@pytest.mark.parametrize("name", SSE_FILES, ids=short)
def test_recorded_stream_through_replay(name: str) -> None:
    """`toolwire replay --protocol anthropic` reads every recording the same way as the HTTP path."""
    result = replay("anthropic", read_fixture(name))
    expected = EXPECTED[name]
    assert result.error is None
    assert result.finish_reason == expected.finish
    assert result.usage == expected.usage
    if callable(expected.parts):
        expected.parts(result.message.parts)
    else:
        assert result.message.parts == expected.parts


@pytest.mark.parametrize("name", SSE_FILES, ids=short)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_rechunking_at_random_byte_boundaries_changes_nothing(name: str, data: st.DataObject) -> None:
    body = read_fixture(name)
    whole_events, whole_message = parse_pieces([body])
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=60), label="cuts"))
    bounds = [0, *cuts, len(body)]
    pieces = [body[a:b] for a, b in itertools.pairwise(bounds)]
    events, message = parse_pieces(pieces)
    assert message == whole_message
    assert events == whole_events


# -- truncation and errors -----------------------------------------------------------------------


def _cut_inside_second_call(body: bytes, where: str) -> bytes:
    marker = body.index(b'"partial_json":" 2"')
    if where == "after_event":
        return body[:body.index(b"\n\n", marker) + 2]
    # Inside the data line of the following delta: the partial line is not JSON and is dropped.
    following = body.index(b"data: ", marker)
    return body[:following + 30]


@pytest.mark.anyio
@uses(OPUS_PARALLEL)
@pytest.mark.parametrize("where", ["after_event", "mid_line"])
async def test_stream_cut_inside_tool_input_gives_invalid_call(name: str, where: str) -> None:
    body = _cut_inside_second_call(read_fixture(name), where)
    outcome = await stream([body[:700], body[700:]])
    assert isinstance(outcome.error, StreamInterruptedError)
    assert outcome.error.error_type == "incomplete_stream"
    partial = outcome.error.partial_message
    assert partial is not None
    assert partial == outcome.message
    assert partial.parts == [
        call("toolu_01Q54GZYYAzL3HVr4LQDbfXC", "plus", '{"a": 1, "b": 2}'),
        InvalidToolCallPart(id="toolu_017NYD2BGVvRppZKAX98qedy", name="minus", arguments_raw='{"a": 2',
                            reason=TRUNCATED_REASON),
    ]
    assert outcome.response.finish_reason == "error"
    ends = [e.call for e in outcome.events if isinstance(e, ToolCallEnd)]
    assert [type(c) for c in ends] == [ToolCallPart, InvalidToolCallPart]
    assert isinstance(outcome.events[-1], MessageEndEvent)


@pytest.mark.anyio
async def test_midstream_error_event_raises_provider_stream_error_with_partial_message() -> None:
    body = sse(
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, {"type": "text_delta", "text": "Checking the "}),
        delta(0, {"type": "text_delta", "text": "weather."}),
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_cut", "name": "get_weather", "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"city": "Par'}),
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    outcome = await stream(split_events(body))
    assert isinstance(outcome.error, ProviderStreamError)
    assert outcome.error.error_type == "overloaded_error"
    assert "Overloaded" in str(outcome.error)
    assert outcome.error.partial_message == outcome.message
    assert outcome.message.parts == [
        TextPart(text="Checking the weather."),
        InvalidToolCallPart(id="toolu_cut", name="get_weather", arguments_raw='{"city": "Par',
                            reason=TRUNCATED_REASON),
    ]
    errors = [e for e in outcome.events if isinstance(e, ErrorEvent)]
    assert [(e.error_type, e.message) for e in errors] == [
        ("overloaded_error", "Anthropic reported an error in the stream (overloaded_error): Overloaded")]
    assert [e.reason for e in outcome.events if isinstance(e, FinishEvent)] == ["error"]
    assert isinstance(outcome.events[-1], MessageEndEvent)


def test_error_payload_is_recognised_without_an_event_line() -> None:
    body = sse(message_start()).replace(b"event: message_start\n", b"") + (
        b'data: {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}\n\n')
    events, message = parse_pieces([body])
    assert message.parts == []
    assert [(e.error_type, e.message) for e in events if isinstance(e, ErrorEvent)] == [
        ("api_error", "Anthropic reported an error in the stream (api_error): Internal server error")]


@pytest.mark.parametrize(
    ("stop_reason", "block_stopped", "finish"),
    [
        ("end_turn", True, "tool_calls"),  # a completed call makes it a tool round whatever the word
        ("stop_sequence", True, "tool_calls"),
        ("refusal", True, "content_filter"),
        ("max_tokens", False, "length"),
        ("model_context_window_exceeded", False, "length"),
    ],
)
def test_stop_reasons(stop_reason: str, block_stopped: bool, finish: str) -> None:
    body = sse(
        message_start(),
        block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": '{"x": 1}'}),
        *([block_stop(0)] if block_stopped else []),
        *message_end(stop_reason),
    )
    events, message = parse_pieces([body])
    (part,) = message.parts
    # A call whose block never stopped before the token limit is not run.
    assert isinstance(part, ToolCallPart if block_stopped else InvalidToolCallPart)
    assert [(e.reason, e.raw_reason) for e in events if isinstance(e, FinishEvent)] == [(finish, stop_reason)]


def test_pause_turn_is_a_stop_and_keeps_the_server_tool_for_the_next_request() -> None:
    body = sse(
        message_start(),
        block_start(0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": '{"query": "news"}'}),
        block_stop(0),
        *message_end("pause_turn"),
    )
    events, message = parse_pieces([body])
    assert [(e.reason, e.raw_reason) for e in events if isinstance(e, FinishEvent)] == [("stop", "pause_turn")]
    (part,) = message.parts
    assert isinstance(part, ProviderToolPart)
    assert (part.status, part.arguments, part.result) == ("in_progress", {"query": "news"}, None)
    request = Protocol().build_request("m", [Message.user("news?"), message], [], {})
    assert request["messages"][1]["content"] == [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "news"}}]


def test_unknown_events_blocks_deltas_and_fields_are_ignored() -> None:
    body = sse(
        message_start(),
        {"type": "ping"},
        {"type": "content_block_rewind", "index": 0, "surprise": True},
        block_start(0, {"type": "container_upload", "file_id": "file_1"}),
        delta(0, {"type": "new_kind_of_delta", "stuff": 1}),
        block_stop(0),
        block_start(1, {"type": "text", "text": "Hel", "citations": []}),
        delta(1, {"type": "citations_delta", "citation": {"type": "char_location", "cited_text": "x"}}),
        delta(1, {"type": "text_delta", "text": "lo", "extra": [1, 2]}),
        block_stop(1),
        *message_end("end_turn"),
    ).replace(b"}\n\n", b"}      \n\n")
    events, message = parse_pieces([body])
    assert message.parts == [TextPart(text="Hello")]
    assert not any(isinstance(e, ErrorEvent) for e in events)


def test_whole_tool_input_in_the_start_block_is_used() -> None:
    body = sse(
        message_start(),
        block_start(0, {"type": "tool_use", "id": "toolu_whole", "name": "f", "input": {"a": [1, 2]}}),
        block_stop(0),
        *message_end("tool_use"),
    )
    _, message = parse_pieces([body])
    assert message.parts == [ToolCallPart(id="toolu_whole", name="f", arguments={"a": [1, 2]},
                                          arguments_raw='{"a":[1,2]}')]


def test_usage_counts_cache_reads_and_writes_as_input() -> None:
    start = message_start(input_tokens=12)
    start["message"]["usage"].update(cache_read_input_tokens=1000, cache_creation_input_tokens=200)
    body = sse(start, *message_end("end_turn", output_tokens=30))
    events, _ = parse_pieces([body])
    usage = [e for e in events if e.type == "usage"][-1]
    assert usage.usage == Usage(input_tokens=1212, output_tokens=30, cache_read_tokens=1000, cache_write_tokens=200)


# -- request mapping -----------------------------------------------------------------------------

WEATHER_TOOL = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
