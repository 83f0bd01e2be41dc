"""The fake provider servers through toolwire's real HTTP path: automatic mode, errors, scripts, requests."""

from __future__ import annotations

import random
import re
import time
from typing import Any

import httpx
import jsonschema
import orjson
import pytest

from tests.conftest import fixture_path
from tests.testing.conformance import comparable, counter_ids, parse, parser_exists, read_body
from toolwire import (
    InvalidToolCallPart,
    Message,
    ProviderHTTPError,
    ProviderStreamError,
    StreamInterruptedError,
    ToolDefinition,
    ToolResultPart,
    UserError,
)
from toolwire.testing import (
    AutoResponder,
    FakeHTTPError,
    FakeMatch,
    FakeProviderServer,
    FakeRecording,
    FakeScript,
    FakeStreamError,
    FakeText,
    FakeThinking,
    FakeToolCall,
    FakeTurn,
    load_script,
)
from toolwire.testing.fake import FAKE_PROTOCOLS, fake_protocol
from toolwire.testing.fake._base import FakeRequest

PROTOCOLS = [p for p in FAKE_PROTOCOLS if parser_exists(p)]

ENDPOINTS = {
    "openai-chat": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/fake-model:streamGenerateContent",
    "ollama": "/api/chat",
    "mistral": "/v1/chat/completions",
    "cohere": "/v2/chat",
}

TOOLS = [
    ToolDefinition(name="get_weather", description="Current weather for a city.", parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 2},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    }),
    ToolDefinition(name="search_events", description="Find events.", parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 3, "maxLength": 40},
            "filters": {
                "type": "object",
                "properties": {
                    "tags": {"type": "array", "items": {"type": "string", "enum": ["music", "art", "food"]},
                             "minItems": 1, "maxItems": 3, "uniqueItems": True},
                    "since": {"type": "string", "format": "date"},
                    "max_price": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
                },
                "required": ["tags", "since", "max_price"],
            },
            "limit": {"type": "integer", "default": 10},
        },
        "required": ["query", "filters", "limit"],
    }),
    ToolDefinition(name="book_table", description="Book a table.", parameters={
        "type": "object",
        "properties": {
            "guests": {"type": "array", "minItems": 1, "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
                "required": ["name", "email"],
            }},
            "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
            "vip": {"type": "boolean"},
        },
        "required": ["guests", "code", "vip"],
    }),
]


def validate(schema: dict[str, Any], value: Any) -> None:
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).validate(
        value)


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_auto_mode_calls_every_tool_with_valid_arguments_then_summarises(protocol: str) -> None:
    async with FakeProviderServer(protocol, AutoResponder(seed=3), api_key="sk-test-key-123456") as server:
        model = server.model("fake-model")
        history = [Message.user("Plan my evening in Lisbon.")]
        first = await model.request(history, tools=TOOLS)
        assert [c.name for c in first.tool_calls] == [t.name for t in TOOLS]
        for call, tool in zip(first.tool_calls, TOOLS, strict=True):
            validate(tool.parameters, call.arguments)
        results = Message.tool_results(
            ToolResultPart(call_id=c.id, name=c.name, result={"answer": f"result of {c.name}"})
            for c in first.tool_calls)
        history += [first, results]
        second = await model.request(history, tools=TOOLS)
        await model.aclose()

    assert second.tool_calls == []
    assert second.text.startswith("Here is what the tools returned:")
    for tool in TOOLS:
        assert f'- {tool.name} returned {{"answer":"result of {tool.name}"}}' in second.text

    # The server kept both requests, decoded: what toolwire sent maps back to the same history.
    assert [r.path for r in server.requests] == [ENDPOINTS[protocol]] * 2
    sent = server.requests[1]
    assert [m.role for m in sent.messages] == ["user", "assistant", "user"]
    assert [(c.name, c.arguments) for c in sent.messages[1].tool_calls] == [
        (c.name, c.arguments) for c in first.tool_calls]
    assert [(r.name, r.result) for r in sent.pending_results()] == [
        (c.name, {"answer": f"result of {c.name}"}) for c in first.tool_calls]
    assert [t.name for t in sent.tools] == [t.name for t in TOOLS]
    for request in server.requests:
        assert "sk-test-key-123456" not in orjson.dumps(request.headers).decode()
        assert "REDACTED" in orjson.dumps(request.headers).decode()


@pytest.mark.anyio
async def test_auto_mode_honours_a_subset_tool_choice_and_answers_plain_text_without_tools() -> None:
    async with FakeProviderServer("openai-chat", AutoResponder(tools=["book_table", "get_weather"])) as server:
        model = server.model()
        subset = await model.request([Message.user("hi")], tools=TOOLS)
        forced = await model.request([Message.user("hi")], tools=TOOLS, settings={"tool_choice": {"name": "search_events"}})
        plain = await model.request([Message.user("What is toolwire?")])
        await model.aclose()
    assert [c.name for c in subset.tool_calls] == ["get_weather", "book_table"]  # in the order offered
    assert [c.name for c in forced.tool_calls] == ["search_events"]
    assert plain.tool_calls == []
    assert plain.text.startswith('You said: "What is toolwire?".')


@pytest.mark.anyio
async def test_auto_mode_is_deterministic_for_a_seed() -> None:
    async def arguments(seed: int) -> list[dict[str, Any]]:
        async with FakeProviderServer("anthropic", AutoResponder(seed=seed), seed=seed) as server:
            model = server.model()
            message = await model.request([Message.user("go")], tools=TOOLS)
            await model.aclose()
        return [c.arguments for c in message.tool_calls]

    assert await arguments(5) == await arguments(5)
    assert await arguments(5) != await arguments(6)


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_wrong_api_key_is_a_provider_shaped_401(protocol: str) -> None:
    async with FakeProviderServer(protocol, api_key="the-right-key") as server:
        model = server.model(api_key="a-wrong-key", max_retries=0)
        with pytest.raises(ProviderHTTPError) as caught:
            await model.request([Message.user("hi")])
        await model.aclose()
    assert caught.value.status_code == 401
    assert "Incorrect API key provided" in str(caught.value)


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_rate_limit_with_retry_after_is_retried_then_succeeds(protocol: str) -> None:
    script = [FakeHTTPError(status=429, message="Rate limit reached for requests.", retry_after=1),
              FakeTurn(parts=[FakeText(text="Made it.")])]
    async with FakeProviderServer(protocol, script) as server:
        model = server.model()
        started = time.monotonic()
        message = await model.request([Message.user("hi")])
        elapsed = time.monotonic() - started
        await model.aclose()
    assert message.text == "Made it."
    assert len(server.requests) == 2
    # The default first backoff is at most 0.625 s: waiting a second means Retry-After was obeyed.
    assert elapsed >= 0.95


@pytest.mark.anyio
async def test_http_error_message_is_the_providers() -> None:
    async with FakeProviderServer("anthropic", [FakeHTTPError(status=529, message="Overloaded")]) as server:
        model = server.model(max_retries=0)
        with pytest.raises(ProviderHTTPError) as caught:
            await model.request([Message.user("hi")])
        await model.aclose()
    assert caught.value.status_code == 529
    assert orjson.loads(caught.value.body)["error"] == {"type": "overloaded_error", "message": "Overloaded"}


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_error_inside_the_stream_keeps_what_was_complete(protocol: str) -> None:
    turn = FakeTurn(parts=[FakeText(text="Partial answer")],
                    error=FakeStreamError(message="The model is overloaded right now."))
    async with FakeProviderServer(protocol, [turn]) as server:
        model = server.model()
        with pytest.raises(ProviderStreamError) as caught:
            await model.request([Message.user("hi")])
        await model.aclose()
    if protocol == "mistral":
        assert "finish_reason 'error'" in str(caught.value)  # Mistral's chunks carry no error message
    else:
        assert "The model is overloaded right now." in str(caught.value)
    assert caught.value.partial_message is not None
    assert caught.value.partial_message.text == "Partial answer"


def frames_until(protocol: str, turn: FakeTurn, marker: bytes) -> int:
    """How many frames the fake sends up to and including the first one containing `marker`."""
    request = FakeRequest(protocol=protocol, method="POST", path="/", body={}, model="m",
                          options={"include_usage": True, "sse": True})
    encoder = fake_protocol(protocol).encoder(request, random.Random(0))
    for count, frame in enumerate(encoder.content(turn), start=1):
        if marker in frame:
            return count
    raise AssertionError(f"{marker!r} is never sent")


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mid_frame", [False, True], ids=["between-frames", "mid-frame"])
async def test_dropped_connection_is_a_stream_interruption(protocol: str, mid_frame: bool) -> None:
    parts: list[Any] = [FakeText(text="Checking the weather"),
                        FakeToolCall(name="get_weather", arguments={"city": "Paris", "unit": "celsius"}, chunks=6)]
    after = frames_until(protocol, FakeTurn(parts=parts), b"Checking")
    turn = FakeTurn(parts=parts, drop_after=after, drop_mid_frame=mid_frame)
    async with FakeProviderServer(protocol, [turn]) as server:
        model = server.model()
        with pytest.raises(StreamInterruptedError) as caught:
            await model.request([Message.user("hi")], tools=TOOLS)
        await model.aclose()
    partial = caught.value.partial_message
    assert partial is not None
    # Cohere streams the text before calls as its tool plan, which toolwire shows as thinking.
    shown = "".join(p.text for p in partial.parts if p.type == "thinking") if protocol == "cohere" else partial.text
    assert shown == "Checking"
    assert partial.tool_calls == []
    assert caught.value.error_type in ("connection_lost", "incomplete_stream")


@pytest.mark.anyio
async def test_error_after_a_chosen_frame_cuts_a_call_which_is_then_not_run() -> None:
    call = FakeToolCall(name="get_weather", arguments={"city": "Paris", "unit": "celsius"}, chunks=5)
    after = frames_until("openai-chat", FakeTurn(parts=[call]), b"aris")
    turn = FakeTurn(parts=[call], error=FakeStreamError(message="Upstream failure.", after=after))
    async with FakeProviderServer("openai-chat", [turn]) as server:
        model = server.model()
        with pytest.raises(ProviderStreamError) as caught:
            await model.request([Message.user("hi")], tools=TOOLS)
        await model.aclose()
    partial = caught.value.partial_message
    assert partial is not None
    assert partial.tool_calls == []
    [invalid] = partial.invalid_tool_calls
    assert isinstance(invalid, InvalidToolCallPart)
    assert invalid.arguments_raw == '{"city":"Paris"'


@pytest.mark.anyio
async def test_delays_stream_fragments_over_time() -> None:
    turn = FakeTurn(parts=[FakeThinking(text="Let me see."), FakeText(text="one two three four", chunks=4)], delay=0.05)
    async with FakeProviderServer("anthropic", [turn]) as server:
        model = server.model()
        arrivals: list[float] = []
        async with model.stream([Message.user("hi")]) as response:
            async for event in response:
                if event.type == "text_delta":
                    arrivals.append(time.monotonic())
        await model.aclose()
    assert len(arrivals) == 5
    assert arrivals[-1] - arrivals[0] >= 4 * 0.05 * 0.9


@pytest.mark.anyio
async def test_client_leaving_early_does_not_hold_the_server() -> None:
    turn = FakeTurn(parts=[FakeText(text="word " * 200)], delay=0.05)
    started = time.monotonic()
    async with FakeProviderServer("openai-chat", [turn]) as server:
        model = server.model()
        async with model.stream([Message.user("hi")]) as response:
            async for event in response:
                if event.type == "text_delta":
                    break
        await model.aclose()
    # The whole stream would take 10 s; the server noticed the client leave and stopped at once.
    assert time.monotonic() - started < 3
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_script_matchers_repeat_and_a_clear_error_when_used_up() -> None:
    script = FakeScript([
        FakeTurn(parts=[FakeText(text="Sunny.")], match=FakeMatch(text_contains="weather"), repeat=True),
        FakeTurn(parts=[FakeText(text="Anything else.")]),
    ])
    async with FakeProviderServer("mistral", script) as server:
        model = server.model(max_retries=0)
        assert (await model.request([Message.user("Other question")])).text == "Anything else."
        assert (await model.request([Message.user("What's the WEATHER?")])).text == "Sunny."
        assert (await model.request([Message.user("weather again")])).text == "Sunny."
        with pytest.raises(ProviderHTTPError) as caught:
            await model.request([Message.user("something new")])
        await model.aclose()
    assert caught.value.status_code == 500
    assert "script has no reply left" in str(caught.value)
    assert len(script.answered) == 4


@pytest.mark.anyio
async def test_script_hands_over_to_the_automatic_responder() -> None:
    script = FakeScript([FakeTurn(parts=[FakeText(text="Scripted first.")])], then=AutoResponder())
    async with FakeProviderServer("cohere", script) as server:
        model = server.model()
        assert (await model.request([Message.user("one")])).text == "Scripted first."
        assert (await model.request([Message.user("two")])).text.startswith('You said: "two".')
        await model.aclose()


def test_scripts_load_from_json_files(tmp_path: Any) -> None:
    (tmp_path / "body.sse").write_text('data: {"x": 1}\n\n')
    path = tmp_path / "script.json"
    path.write_text(orjson.dumps({"turns": [
        {"parts": [{"type": "text", "text": "Hi", "chunks": 1},
                   {"type": "tool_call", "name": "f", "arguments": {"a": 1}, "chunks": ['{"a"', ": 1}"]}],
         "delay": 0.01, "match": {"text_contains": "hello"}, "error": {"message": "boom", "after": 2}},
        {"type": "http_error", "status": 429, "retry_after": 2},
        {"type": "recording", "file": "body.sse"},
    ]}).decode())
    turn, error, recording = load_script(path)
    assert isinstance(turn, FakeTurn) and isinstance(error, FakeHTTPError) and isinstance(recording, FakeRecording)
    assert [p.pieces() for p in turn.parts] == [["H", "i"], ['{"a"', ": 1}"]]
    assert isinstance(turn.match, FakeMatch) and turn.match.text_contains == "hello"
    assert turn.error == FakeStreamError(message="boom", after=2)
    assert error.retry_after == 2
    assert recording.load()[0] == [b'data: {"x": 1}\n\n']

    path.write_text('[{"parts": [{"type": "sound", "text": "x"}]}]')  # an unknown part type
    with pytest.raises(UserError, match="is not a valid script"):
        load_script(path)
    with pytest.raises(UserError, match="do not join to its text"):
        FakeText(text="abc", chunks=["a", "x"]).pieces()


@pytest.mark.anyio
@pytest.mark.parametrize("recording", [
    "openai-chat/gpt-4o_parallel-2-tools.magentic.sse",
    "gemini/gemini-2.5-pro_thinking-text-only.pydantic-ai.sse",
    "ollama/gemma3-1b_text-only-api-chat.langchaingo.ndjson",
    "cohere/tool-plan-then-2-tool-calls.vercel.chunks.jsonl",
], ids=lambda name: name.split("/")[1])
async def test_recorded_bodies_are_served_as_recorded(recording: str) -> None:
    protocol = recording.split("/")[0]
    async with FakeProviderServer(protocol, FakeRecording(file=str(fixture_path(recording)))) as server:
        model = server.model(id_factory=counter_ids())
        url, body, headers = model.build_request([Message.user("hi")])
        async with httpx.AsyncClient() as client:
            served = (await client.post(url, content=orjson.dumps(body), headers=headers)).content
        message = await model.request([Message.user("hi")])
        await model.aclose()
    assert served == read_body(recording)
    assert comparable(message) == comparable(parse(protocol, read_body(recording)).message)


@pytest.mark.anyio
async def test_a_recorded_error_body_is_served_with_its_status() -> None:
    recording = fixture_path("gemini/error-400-invalid-api-key-response.mirascope.json")
    async with FakeProviderServer("gemini", FakeRecording(file=str(recording), status=400)) as server:
        model = server.model(max_retries=0)
        with pytest.raises(ProviderHTTPError, match=r"API key not valid\. Please pass a valid API key\."):
            await model.request([Message.user("hi")])
        await model.aclose()


@pytest.mark.anyio
async def test_requests_the_real_api_would_reject_get_its_error_shape() -> None:
    async with FakeProviderServer("openai-chat") as server, httpx.AsyncClient() as client:
        missing = await client.post(server.url + "/v1/embeddings", json={})
        not_json = await client.post(server.base_url + "/chat/completions", content=b"{nope")
        not_streamed = await client.post(server.base_url + "/chat/completions",
                                          json={"model": "m", "messages": [{"role": "user", "content": "x"}]})
    assert missing.status_code == 404
    assert "serves POST /v1/chat/completions" in missing.json()["error"]["message"]
    assert not_json.status_code == 400 and "could not parse the JSON body" in not_json.json()["error"]["message"]
    assert not_streamed.status_code == 400 and "only streams" in not_streamed.json()["error"]["message"]
    assert len(server.requests) == 3


@pytest.mark.anyio
async def test_responses_server_keeps_conversations_for_previous_response_id() -> None:
    async with FakeProviderServer("openai-responses") as server:
        model = server.model(settings={"stateful": True})
        history = [Message.user("Weather?")]
        first = await model.request(history, tools=TOOLS[:1])
        results = Message.tool_results([ToolResultPart(call_id=c.id, name=c.name, result="21 C")
                                        for c in first.tool_calls])
        second = await model.request([*history, first, results], tools=TOOLS[:1])
        await model.aclose()
    sent = server.requests[1]
    assert sent.body.get("previous_response_id") == first.metadata.get("response_id")
    assert [m.role for m in sent.messages] == ["user", "assistant", "user"]
    assert second.text == "Here is what the tools returned:\n- get_weather returned 21 C"


def test_sync_context_manager_serves_plain_clients() -> None:
    with FakeProviderServer("ollama", [FakeTurn(parts=[FakeText(text="Hello")])]) as server:
        response = httpx.post(server.base_url + "/api/chat",
                              json={"model": "llama3", "messages": [{"role": "user", "content": "hi"}]})
    lines = [orjson.loads(line) for line in response.content.splitlines()]
    assert response.headers["content-type"] == "application/x-ndjson"
    assert "".join(line["message"]["content"] for line in lines) == "Hello"
    assert lines[-1]["done"] is True and lines[-1]["done_reason"] == "stop"


SCRIPTED = FakeTurn(parts=[
    FakeThinking(text="The user wants weather and time."),
    FakeText(text="Checking both."),
    FakeToolCall(name="get_weather", arguments='{"city": "Paris", "unit": "celsius"}',
                 chunks=['{"ci', 'ty": "Pa', 'ris", "unit', '": "celsius"}']),
    FakeToolCall(name="get_time", arguments={"tz": "Europe/Paris"}, chunks=3),
])
# Protocols whose calls stream argument text (the others send whole JSON objects or whole calls).
STREAMED_ARGUMENTS = {"openai-chat", "openai-responses", "anthropic", "cohere"}


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_scripted_turn_assembles_to_the_scripted_message(protocol: str) -> None:
    async with FakeProviderServer(protocol, [SCRIPTED]) as server:
        model = server.model()
        async with model.stream([Message.user("hi")], tools=TOOLS) as response:
            events = [event async for event in response]
        await model.aclose()
    message = response.message
    assert message is not None
    thinking = "".join(p.text for p in message.parts if p.type == "thinking")
    if protocol == "cohere":
        # Cohere sends the text before calls as its tool plan, which toolwire shows as thinking.
        assert thinking == "The user wants weather and time.Checking both." and message.text == ""
    else:
        assert thinking == "The user wants weather and time." and message.text == "Checking both."
    assert [(c.name, c.arguments) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}), ("get_time", {"tz": "Europe/Paris"})]
    if protocol in STREAMED_ARGUMENTS:
        assert [c.arguments_raw for c in message.tool_calls] == ['{"city": "Paris", "unit": "celsius"}',
                                                                 '{"tz":"Europe/Paris"}']
        deltas = [e.arguments_delta for e in events if e.type == "tool_call_delta"]
        assert deltas[:4] == ['{"ci', 'ty": "Pa', 'ris", "unit', '": "celsius"}']
    assert response.finish_reason == "tool_calls"
    assert response.usage is not None and (response.usage.output_tokens or 0) > 0


ID_PATTERNS: dict[str, list[str]] = {
    "openai-chat": [r'"id":"chatcmpl-[A-Za-z0-9]{29}"', r'"id":"call_[A-Za-z0-9]{24}"', r'"system_fingerprint":"fp_'],
    "openai-responses": [r'"id":"resp_[0-9a-f]{50}"', r'"id":"fc_[0-9a-f]{50}"', r'"call_id":"call_[A-Za-z0-9]{24}"',
                         r'"id":"rs_[0-9a-f]{50}"', r'"id":"msg_[0-9a-f]{50}"'],
    "anthropic": [r'"id":"msg_01[A-Za-z0-9]{22}"', r'"id":"toolu_01[A-Za-z0-9]{22}"'],
    "gemini": [r'"responseId": "[A-Za-z0-9_-]{23}"'],
    "ollama": [r'"id":"call_[a-z0-9]{8}"'],
    "mistral": [r'"id":"[0-9a-f]{32}"', r'"id":"[A-Za-z0-9]{9}"'],
    "cohere": [r'"id":"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"',
               r'"id":"get_weather_[a-z0-9]{12}"'],
}


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_ids_have_the_providers_formats(protocol: str) -> None:
    async with FakeProviderServer(protocol, [SCRIPTED]) as server, httpx.AsyncClient() as client:
        url, body, headers = server.model().build_request([Message.user("hi")], TOOLS)
        raw = (await client.post(url, content=orjson.dumps(body), headers=headers)).text
    for pattern in ID_PATTERNS[protocol]:
        assert re.search(pattern, raw), f"no {pattern} in the {protocol} stream"
    if protocol == "gemini":
        # No call ids, whole arguments, and Google's JSON spacing (after colons only).
        assert '{"functionCall": {"name": "get_weather","args": {"city": "Paris","unit": "celsius"}}}' in raw


@pytest.mark.anyio
async def test_a_broken_script_is_reported_to_the_client_not_swallowed() -> None:
    bad = FakeTurn(parts=[FakeText(text="abc", chunks=["a", "b"])])
    async with FakeProviderServer("openai-chat", [bad, FakeRecording(file="/nonexistent/body.sse")]) as server:
        model = server.model(max_retries=0)
        with pytest.raises(ProviderHTTPError, match="chunks given for text do not join to its text"):
            await model.request([Message.user("hi")])
        with pytest.raises(ProviderHTTPError, match=r"Could not read the recorded body /nonexistent/body\.sse"):
            await model.request([Message.user("hi")])
        await model.aclose()


def test_schemas_without_a_finite_instance_do_not_hang() -> None:
    from toolwire.testing.fake._schema_values import schema_example

    endless = {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}},
                                  "required": ["next"]}}, "$ref": "#/$defs/node"}
    value = schema_example(endless, random.Random(0))
    depth = 0
    while isinstance(value, dict):
        value, depth = value["next"], depth + 1
    assert value is None and depth > 30
