"""A hostile provider on loopback: each fault of the hostile-input list, over real HTTP, per protocol where
it differs. Every test cites its item ("hostile-input item N")."""

from __future__ import annotations

import asyncio
import gzip
import re
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from tests.faults.server import FaultServer, Request, Writer
from tests.wire.test_hostile_values import WRONG_TEXT
from toolwire import Agent, Message, Timeout, get_model
from toolwire.cli import main
from toolwire.exceptions import (
    MalformedStreamError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeoutError,
    StreamError,
    StreamInterruptedError,
)
from toolwire.messages import InvalidToolCallPart, ToolCallPart

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdef"


def sse(*payloads: Any, done: bool = True) -> bytes:
    out = b"".join(b"data: " + orjson.dumps(p) + b"\n\n" for p in payloads)
    return out + (b"data: [DONE]\n\n" if done else b"")


def chat(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def anthropic_events(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(f"event: {name}\n".encode() + b"data: " + orjson.dumps(data) + b"\n\n" for name, data in events)


def anthropic_tool_use(call_id: str, arguments: str) -> list[tuple[str, dict[str, Any]]]:
    """One complete `tool_use` block (index 0) calling `echo`."""
    return [
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "tool_use", "id": call_id, "name": "echo", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "input_json_delta", "partial_json": arguments}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ]


ANTHROPIC_START = ("message_start", {"type": "message_start", "message": {"id": "msg_1", "model": "claude",
                                                                         "usage": {"input_tokens": 3}}})


def echo_tool() -> tuple[list[str], Callable[..., str]]:
    """A tool named `echo` and the list of the texts it was run with."""
    ran: list[str] = []

    def echo(text: str = "") -> str:
        """Echo the text."""
        ran.append(text)
        return text

    return ran, echo


def serve(body: bytes, *, status: int = 200, headers: dict[str, str] | None = None, pieces: int = 1,
          delay: float = 0.0) -> Any:
    async def handler(request: Request, writer: Writer) -> None:
        await writer.head(status, {"content-type": "text/event-stream", **(headers or {})}, chunked=True)
        step = max(1, len(body) // pieces)
        for start in range(0, len(body), step):
            await writer.send(body[start:start + step])
            if delay:
                await asyncio.sleep(delay)
        await writer.end()

    return handler


async def stream(server: FaultServer, spec: str = "openai:gpt-4o", **kwargs: Any) -> tuple[Message | None, StreamError | None]:
    model = get_model(spec, base_url=server.base_url, api_key=KEY, **kwargs)
    model.retry.base_delay = 0.01
    try:
        async with model.stream([Message.user("hi")]) as response:
            try:
                async for _ in response:
                    pass
            except StreamError as exc:
                return response.message, exc
            return response.message, None
    finally:
        await model.aclose()


# -- item 1 and 2: wrong-typed values ---------------------------------------------------------------


async def test_text_that_is_a_number_ends_the_stream_with_a_typed_error_keeping_the_text() -> None:
    """Hostile-input item 1 (openai-chat): `content: 5` after some text."""
    body = sse(chat({"content": "Hello "}), chat({"content": 5}), chat({}, "stop"))
    async with FaultServer(serve(body)) as server:
        message, error = await stream(server)
    assert isinstance(error, MalformedStreamError)
    assert error.error_type == "invalid_field"
    assert "`choices[0].delta.content` as a number where a string belongs" in str(error)
    assert "openai-chat" in str(error)
    assert error.partial_message == message
    assert message is not None and message.text == "Hello " and message.metadata["incomplete"] is True


async def test_anthropic_text_that_is_a_list_keeps_the_finished_call_and_the_agent_history() -> None:
    """Hostile-input item 1 (anthropic): `"text": ["x"]` after a complete tool call; the agent keeps the
    call (it ran), answers it, and raises with a valid history."""
    body = anthropic_events(
        ANTHROPIC_START,
        *anthropic_tool_use("toolu_1", '{"text": "hi"}'),
        ("content_block_start", {"type": "content_block_start", "index": 1,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                 "delta": {"type": "text_delta", "text": ["x"]}}),
    )
    ran, echo = echo_tool()

    async with FaultServer(serve(body)) as server:
        agent = Agent("anthropic:claude", base_url=server.base_url, api_key=KEY, tools=[echo])
        with pytest.raises(MalformedStreamError, match=r"`delta.text` as a list") as info:
            await agent.run("go")
    assert ran == ["hi"]
    messages = info.value.messages
    assert messages is not None
    assistant = messages[1]
    assert assistant.metadata["incomplete"] is True
    assert isinstance(assistant.parts[0], ToolCallPart)
    assert [p.call_id for p in messages[2].tool_results_parts] == ["toolu_1"]


@pytest.mark.parametrize(("entry", "field"), [
    ({"index": 0, "id": 123, "function": {"name": "echo", "arguments": "{}"}}, "tool_calls[].id` as a number"),
    ({"index": 0, "id": ["a"], "function": {"name": "echo", "arguments": "{}"}}, "tool_calls[].id` as a list"),
    ({"index": 0, "id": "call_1", "function": {"name": {"n": 1}, "arguments": "{}"}}, "function.name` as an object"),
])
async def test_wrong_typed_ids_and_names_stop_the_stream_and_the_call_never_runs(entry: dict[str, Any],
                                                                                field: str) -> None:
    """Hostile-input item 2: a numeric or list id, an object name — refused where they enter."""
    body = sse(chat({"tool_calls": [entry]}), chat({}, "tool_calls"))
    ran, echo = echo_tool()

    async with FaultServer(serve(body)) as server:
        agent = Agent("openai:gpt-4o", base_url=server.base_url, api_key=KEY, tools=[echo])
        with pytest.raises(MalformedStreamError, match=re.escape(field)) as info:
            await agent.run("go")
    assert ran == []
    assert info.value.messages is not None


async def test_a_token_count_that_is_a_string_is_refused_with_its_field_named() -> None:
    """Hostile-input item 2: `usage.prompt_tokens: "12"`."""
    body = sse(chat({"content": "ok"}), chat({}, "stop"), {"id": "c1", "choices": [], "usage": {"prompt_tokens": "12"}})
    async with FaultServer(serve(body)) as server:
        message, error = await stream(server)
    assert isinstance(error, MalformedStreamError)
    assert "`usage.prompt_tokens` as a string where a token count" in str(error)
    assert message is not None and message.text == "ok"


SPECS = {"openai-chat": "openai:gpt-4o", "mistral": "mistral:mistral-large", "anthropic": "anthropic:claude",
         "openai-responses": "openai-responses:gpt-5", "gemini": "gemini:gemini-2.5-flash", "ollama": "ollama:llama3",
         "cohere": "cohere:command-a"}


@pytest.mark.parametrize("protocol", sorted(WRONG_TEXT))
async def test_every_protocol_over_http_turns_wrong_typed_text_into_a_malformed_stream_error(protocol: str) -> None:
    """Hostile-input item 1, per protocol, through `model.stream` over real HTTP."""
    body, field = WRONG_TEXT[protocol]
    async with FaultServer(serve(body, pieces=3)) as server:
        message, error = await stream(server, SPECS[protocol])
    assert isinstance(error, MalformedStreamError) and error.error_type == "invalid_field"
    assert f"`{field}`" in str(error)
    assert message is not None and message.text == "ok " and message.metadata["incomplete"] is True


# -- item 4: compressed bodies --------------------------------------------------------------------


def _gzip_handler(raw: bytes, fault: str) -> Any:
    packed = gzip.compress(raw)

    async def handler(request: Request, writer: Writer) -> None:
        headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}
        await writer.head(200, headers, chunked=True)
        if fault == "invalid":
            await writer.send(b"this is not gzip at all")
        elif fault == "wrong-encoding":
            await writer.send(raw)
        else:  # corrupt the gzip trailer (its CRC): every byte of content was already delivered
            await writer.send(packed[:-8])
            await writer.send(bytes(b ^ 0xFF for b in packed[-8:]))
        await writer.end()

    return handler


@pytest.mark.parametrize("fault", ["invalid", "wrong-encoding", "corrupt-at-end"])
async def test_undecodable_gzip_is_a_typed_interruption_with_the_partial(fault: str) -> None:
    """Hostile-input item 4 (openai-chat): invalid gzip, a wrong content-encoding, gzip corrupted at the end."""
    body = sse(chat({"content": "all the text"}), chat({}, "stop"))
    async with FaultServer(_gzip_handler(body, fault)) as server:
        message, error = await stream(server)
    if fault == "corrupt-at-end" and error is None:
        pytest.fail("a corrupt gzip trailer must not pass silently")
    assert isinstance(error, StreamInterruptedError)
    assert error.error_type == "decoding_error"
    assert "could not be decoded (content-encoding gzip" in str(error)
    assert message is not None and message.metadata["incomplete"] is True
    if fault == "corrupt-at-end":
        assert message.text == "all the text"


async def test_anthropic_gzip_corrupt_after_a_tool_ran_keeps_the_tool_and_its_result() -> None:
    """Hostile-input item 4 (anthropic): the body breaks after a call completed and the agent ran it."""
    body = anthropic_events(
        ANTHROPIC_START,
        *anthropic_tool_use("toolu_9", '{"text": "a"}'),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    )
    ran, echo = echo_tool()

    async with FaultServer(_gzip_handler(body, "corrupt-at-end")) as server:
        agent = Agent("anthropic:claude", base_url=server.base_url, api_key=KEY, tools=[echo])
        with pytest.raises(StreamInterruptedError, match="could not be decoded") as info:
            await agent.run("go")
    assert ran == ["a"]
    messages = info.value.messages
    assert messages is not None and isinstance(messages[1].parts[0], ToolCallPart)
    assert messages[2].tool_results_parts[0].result == "a"


async def test_ollama_invalid_gzip_is_a_typed_interruption() -> None:
    """Hostile-input item 4 (ollama, NDJSON)."""
    async with FaultServer(_gzip_handler(b'{"message":{"content":"x"},"done":true}\n', "invalid")) as server:
        _, error = await stream(server, "ollama:llama3")
    assert isinstance(error, StreamInterruptedError) and error.error_type == "decoding_error"


# -- item 5: one long event ------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "body_of"), [
    ("openai:gpt-4o", lambda text: sse(chat({"content": text}), chat({}, "stop"))),
    ("ollama:llama3", lambda text: orjson.dumps({"message": {"content": text}, "done": True, "done_reason": "stop"})
     + b"\n"),
    ("gemini:gemini-2.5-flash", lambda text: b"[" + orjson.dumps(
        {"candidates": [{"content": {"parts": [{"text": text}]}, "finishReason": "STOP"}]}) + b"]"),
])
async def test_one_long_event_in_small_reads_arrives_whole(spec: str, body_of: Any) -> None:
    """Hostile-input item 5: a 2 MB event delivered in 1 KiB writes is read correctly (SSE, NDJSON, JSON
    array); that it takes linear time is measured in bench/framing.py."""
    text = "x" * 2_000_000
    body = body_of(text)
    async with FaultServer(serve(body, pieces=len(body) // 1024)) as server:
        message, error = await stream(server, spec)
    assert error is None and message is not None and message.text == text


@pytest.mark.parametrize(("spec", "body"), [
    ("openai:gpt-4o", b"data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"" + b"y" * 3_000_000),
    ("ollama:llama3", b'{"message": {"content": "' + b"y" * 3_000_000),
    ("gemini:gemini-2.5-flash", b'[{"candidates": [{"content": {"parts": [{"text": "' + b"y" * 3_000_000),
])
async def test_an_event_over_max_event_bytes_stops_the_stream_with_a_typed_error(spec: str, body: bytes) -> None:
    """Hostile-input item 5: a line that never ends is not buffered without limit."""
    async with FaultServer(serve(body, pieces=300)) as server:
        message, error = await stream(server, spec, max_event_bytes=1_000_000)
    assert isinstance(error, MalformedStreamError)
    assert error.error_type == "event_too_large"
    assert "more than 1,000,000 bytes" in str(error) and "max_event_bytes" in str(error)
    assert message is not None and message.metadata["incomplete"] is True


# -- item 6: deadlines -----------------------------------------------------------------------------


def _trickle(body: bytes, every: float, *, at_once: bytes = b"") -> Any:
    """`at_once` is sent at once, then `body` one byte at a time."""
    async def handler(request: Request, writer: Writer) -> None:
        await writer.head(200, {"content-type": "text/event-stream"}, chunked=True)
        await writer.send(at_once)
        for byte in body:
            await writer.send(bytes([byte]))
            await asyncio.sleep(every)
        await writer.end()

    return handler


async def test_a_server_trickling_one_byte_every_50ms_is_stopped_at_the_deadline() -> None:
    """Hostile-input item 6: `timeout=1` is a deadline for the whole request, not a per-read limit."""
    body = sse(*[chat({"content": " more"})] * 200, chat({}, "stop"))
    async with FaultServer(_trickle(body, 0.05, at_once=sse(chat({"content": "Hi"}), done=False))) as server:
        started = time.monotonic()
        message, error = await stream(server, timeout=1)
        elapsed = time.monotonic() - started
    assert isinstance(error, StreamInterruptedError)
    assert error.error_type == "deadline"
    assert "deadline of 1 s" in str(error)
    assert elapsed < 2.5
    assert message is not None and message.text.startswith("Hi")


async def test_bytes_that_never_complete_an_event_hit_the_idle_timeout() -> None:
    """Hostile-input item 6: a trickle inside one event does not reset the idle timeout."""
    body = b'data: {"choices": [{"index": 0, "delta": {"content": "' + b"z" * 400
    async with FaultServer(_trickle(body, 0.01, at_once=sse(chat({"content": "Hi"}), done=False))) as server:
        started = time.monotonic()
        message, error = await stream(server, timeout=Timeout(total=60, idle=0.6))
        elapsed = time.monotonic() - started
    assert isinstance(error, StreamInterruptedError) and error.error_type == "timeout"
    assert "no complete event for 0.6 s" in str(error)
    assert elapsed < 2.5
    assert message is not None and message.text == "Hi"


async def test_a_server_that_never_answers_is_given_up_within_the_deadline_not_per_attempt() -> None:
    """Hostile-input item 6: a hung server is waited for once (one idle timeout), never once per retry."""
    async def hang(request: Request, writer: Writer) -> None:
        await asyncio.sleep(30)

    async with FaultServer(hang) as server:
        started = time.monotonic()
        with pytest.raises(ProviderTimeoutError):
            await stream(server, timeout=Timeout(total=60, idle=0.5))
        assert time.monotonic() - started < 1.5
        assert len(server.requests) == 1
        started = time.monotonic()
        with pytest.raises(ProviderTimeoutError):
            await stream(server, timeout=1)
        assert time.monotonic() - started < 2.0


async def test_agent_and_cli_take_a_timeout() -> None:
    """Hostile-input item 6: `Agent(..., timeout=)` and `toolwire run --timeout` reach the request."""
    body = sse(chat({"content": "Hi"}), *[chat({"content": "."})] * 100, chat({}, "stop"))
    async with FaultServer(_trickle(body, 0.05)) as server:
        agent = Agent("openai:gpt-4o", base_url=server.base_url, api_key=KEY, timeout=0.8)
        with pytest.raises(StreamInterruptedError, match=r"deadline of 0\.8 s") as info:
            await agent.run("go")
        assert info.value.messages is not None
        assert info.value.messages[-1].metadata["incomplete"] is True
        started = time.monotonic()
        code = await asyncio.to_thread(main, ["run", "openai:gpt-4o", "go", "--base-url", server.base_url,
                                              "--api-key", KEY, "--timeout", "0.8", "--json"])
        assert code == 1
        assert time.monotonic() - started < 5


def test_timeout_numbers_and_objects() -> None:
    """Hostile-input item 6: the defaults and what a number means."""
    default = get_model("openai:gpt-4o", api_key=KEY).timeouts
    assert (default.total, default.connect, default.idle) == (1800.0, 10.0, 300.0)
    short = get_model("openai:gpt-4o", api_key=KEY, timeout=2).timeouts
    assert (short.total, short.connect, short.idle) == (2.0, 2.0, 2.0)


# -- item 7: unbounded error bodies ---------------------------------------------------------------


async def test_a_huge_error_body_is_read_only_up_to_its_first_64_kib() -> None:
    """Hostile-input item 7: a 503 with a 200 MB body; the rest is never read."""
    total = 200 * 1024 * 1024
    block = b'{"error": {"message": "overloaded"}}' + b" " * (65536 - 37)

    async def huge(request: Request, writer: Writer) -> None:
        await writer.head(503, {"content-type": "application/json", "content-length": str(total)})
        try:
            for _ in range(total // len(block)):
                await writer.send(block)
        except ConnectionError:
            pass

    async with FaultServer(huge) as server:
        with pytest.raises(ProviderHTTPError) as info:
            await stream(server, max_retries=0)
    assert info.value.status_code == 503
    assert len(info.value.body) <= 64 * 1024
    assert "overloaded" in str(info.value)


# -- item 8: secrets -------------------------------------------------------------------------------


async def test_a_key_echoed_in_an_error_body_is_redacted_from_the_exception() -> None:
    """Hostile-input item 8."""
    async def echo_key(request: Request, writer: Writer) -> None:
        body = orjson.dumps({"error": {"message": f"Incorrect API key provided: {request.headers['authorization']}"}})
        await writer.head(401, {"content-type": "application/json", "content-length": str(len(body))})
        await writer.send(body)

    async with FaultServer(echo_key) as server:
        with pytest.raises(ProviderHTTPError) as info:
            await stream(server)
    assert KEY not in str(info.value) and KEY not in info.value.body
    assert "Incorrect API key provided: REDACTED" in str(info.value)


async def test_a_password_in_the_base_url_never_reaches_a_connection_error() -> None:
    """Hostile-input item 8: nothing listens on the port; the error names the URL without the password."""
    async with FaultServer(serve(b"")) as server:
        port = server.base_url.rsplit(":", 1)[1]
    model = get_model("openai:gpt-4o", base_url=f"http://user:hunter2-secret-pw@127.0.0.1:{port}", api_key=KEY,
                      max_retries=0)
    with pytest.raises(ProviderConnectionError) as info:
        await model.request([Message.user("x")])
    assert "hunter2-secret-pw" not in str(info.value)
    assert "user:REDACTED@127.0.0.1" in str(info.value)


async def test_toolwire_record_never_prints_an_echoed_key(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Hostile-input item 8: `toolwire record`'s stderr and the cassette."""
    async def echo_key(request: Request, writer: Writer) -> None:
        body = orjson.dumps({"error": {"message": f"bad key {request.headers['authorization']}"}})
        await writer.head(401, {"content-type": "application/json", "content-length": str(len(body))})
        await writer.send(body)

    async with FaultServer(echo_key) as server:
        cassette = tmp_path / "c.json"
        code = await asyncio.to_thread(main, ["record", "openai:gpt-4o", "hi", "--out", str(cassette),
                                              "--base-url", server.base_url, "--api-key", KEY])
    err = capsys.readouterr().err
    assert code == 1 and "bad key REDACTED" in err and KEY not in err
    assert KEY not in cassette.read_text()


# -- item 9: what was received ---------------------------------------------------------------------


@pytest.mark.parametrize(("content_type", "body", "said"), [
    ("text/html", b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>", "an HTML page"),
    ("application/json", b'{"id": "c1", "object": "chat.completion", "choices": [{"message": {"content": "hi"}}]}',
     "one JSON document"),
    ("application/json", b'{"error": {"message": "model not found"}}', "it said: 'model not found'"),
])
@pytest.mark.parametrize("protocol", ["openai-chat", "anthropic", "openai-responses", "cohere"])
async def test_a_body_that_is_not_a_stream_says_what_it_is(content_type: str, body: bytes, said: str,
                                                          protocol: str) -> None:
    """Hostile-input item 9: an HTML error page with status 200, a non-streamed JSON answer (SSE protocols)."""
    async with FaultServer(serve(body, headers={"content-type": content_type})) as server:
        _, error = await stream(server, SPECS[protocol])
    assert isinstance(error, MalformedStreamError)
    assert error.error_type == "unrecognised_body"
    assert said in str(error) and content_type in str(error) and "base URL" in str(error)
    assert "ended before the provider said" not in str(error)


@pytest.mark.parametrize("protocol", ["ollama", "gemini"])
async def test_an_html_page_is_named_as_such_by_the_json_framings_too(protocol: str) -> None:
    """Hostile-input item 9 (NDJSON and Gemini's framing detection)."""
    page = b"<html><head><title>504 Gateway Time-out</title></head><body>nginx</body></html>\n"
    async with FaultServer(serve(page, headers={"content-type": "text/html"})) as server:
        _, error = await stream(server, SPECS[protocol])
    assert isinstance(error, MalformedStreamError) and error.error_type == "unrecognised_body"
    assert "an HTML page (content type text/html)" in str(error) and "504 Gateway" in str(error)


# -- item 10: Retry-After --------------------------------------------------------------------------


async def test_a_long_retry_after_is_not_shortened_the_error_carries_it_and_the_headers() -> None:
    """Hostile-input item 10: `Retry-After: 100` is reported at once, never retried 80 s early."""
    async def limited(request: Request, writer: Writer) -> None:
        body = b'{"error": {"message": "rate limited"}}'
        await writer.head(429, {"content-type": "application/json", "retry-after": "100",
                                "x-ratelimit-remaining-requests": "0", "content-length": str(len(body))})
        await writer.send(body)

    async with FaultServer(limited) as server:
        started = time.monotonic()
        with pytest.raises(ProviderHTTPError) as info:
            await stream(server)
    assert time.monotonic() - started < 1.0
    assert len(server.requests) == 1
    assert info.value.retry_after == 100.0
    assert info.value.headers["x-ratelimit-remaining-requests"] == "0"
    assert "retry after 100 s" in str(info.value)


async def test_a_short_retry_after_is_waited_for_in_full() -> None:
    """Hostile-input item 10: a wait the provider asks for is honoured exactly, then the request succeeds."""
    attempts: list[float] = []

    async def once_limited(request: Request, writer: Writer) -> None:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            await writer.head(429, {"retry-after-ms": "300", "content-length": "2"})
            await writer.send(b"{}")
            return
        await serve(sse(chat({"content": "ok"}), chat({}, "stop")))(request, writer)

    async with FaultServer(once_limited) as server:
        message, error = await stream(server)
    assert error is None and message is not None and message.text == "ok"
    assert attempts[1] - attempts[0] >= 0.29


async def test_invalid_calls_are_never_run_after_any_fault() -> None:
    """Hostile-input items 1-10 share this: a call cut by any fault is an InvalidToolCallPart."""
    body = sse(chat({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "echo", "arguments": '{"te'}}]}),
               done=False)
    async with FaultServer(serve(body)) as server:
        message, error = await stream(server)
    assert isinstance(error, StreamInterruptedError)
    assert message is not None and isinstance(message.parts[0], InvalidToolCallPart)


async def test_without_a_socket_the_deadline_and_idle_timeout_still_hold() -> None:
    """Hostile-input item 6, on a transport without a socket (no alarm): reads get cancel scopes."""
    import httpx

    class Trickle(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield sse(chat({"content": "Hi"}), done=False)
            for byte in b'data: {"choices": [{"index": 0, "delta": {"content": "' + b"q" * 1000:
                await asyncio.sleep(0.01)
                yield bytes([byte])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Trickle())

    for timeout, kind in ((1.0, "deadline"), (Timeout(total=60, idle=0.7), "timeout")):
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            model = get_model("openai:gpt-4o", api_key=KEY, http_client=client, timeout=timeout)
            started = time.monotonic()
            with pytest.raises(StreamInterruptedError) as info:
                await model.request([Message.user("hi")])
            assert time.monotonic() - started < 2.0
        assert info.value.error_type == kind
        assert info.value.partial_message is not None and info.value.partial_message.text == "Hi"
