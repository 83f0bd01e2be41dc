"""Gemini wire protocol: recorded streams through the real HTTP path, framings, re-chunking, truncation,
request mapping and the thought-signature round trip."""

from __future__ import annotations

import json
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.conftest import fixture_files, fixture_path
from tests.wire.helpers import chunked_transport, counter_ids, parse_in_pieces, recorded_body, stream_body, summarize
from toolwire import (
    FilePart,
    InvalidToolCallPart,
    Message,
    ProviderHTTPError,
    ProviderStreamError,
    StreamInterruptedError,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    Usage,
    get_model,
)
from toolwire.events import ToolCallDelta, ToolCallEnd, ToolCallStart
from toolwire.messages import dump_messages, load_messages
from toolwire.replay import payload_lines_to_sse, replay
from toolwire.wire.gemini import SIGNATURE_PLACEHOLDER, Protocol

SPEC = "gemini:gemini-2.5-flash"
ERROR_FIXTURE = "gemini/error-400-invalid-api-key-response.mirascope.json"
STREAMS = [f for f in fixture_files("gemini", ".sse", ".json", ".jsonl") if f != ERROR_FIXTURE]


def content_type(name: str) -> str:
    return "application/json" if name.endswith(".json") else "text/event-stream"


def gemini_signature(part: Any) -> str | None:
    if isinstance(part, ThinkingPart):
        return part.signature
    data = (part.provider_data or {}).get("gemini", {})
    return data.get("thoughtSignature")


def signature_view(message: Message) -> list[tuple[str, int] | None]:
    """Each part's signature as (first 12 characters, length)."""
    out: list[tuple[str, int] | None] = []
    for part in message.parts:
        sig = gemini_signature(part) if isinstance(part, (ThinkingPart, ToolCallPart)) else None
        out.append(None if sig is None else (sig[:12], len(sig)))
    return out


# What each recording holds, read from the stream by hand (text as prefix + length).
EXPECTED: dict[str, dict[str, Any]] = {
    "gemini/gemini-2.5-flash_call-no-params.ruby_llm.sse": {
        "parts": [("call", "gen_0", "best_language_to_learn", {}, "{}")],
        "signatures": [("CmIBEU0yD5YE", 472)],
        "finish": "tool_calls",
        "usage": Usage(input_tokens=48, output_tokens=75, reasoning_tokens=61),
    },
    "gemini/gemini-2.5-flash_text-only-max-tokens.mirascope.sse": {
        "parts": [("text", "Here are all 50 U.S. states, listed alphabetically:\n\n")],
        "signatures": [None],
        "finish": "length",
        "usage": Usage(input_tokens=9, output_tokens=47, reasoning_tokens=32),
    },
    "gemini/gemini-2.5-flash_thought-then-call-no-args.jsonarray.llm-gemini.json": {
        "parts": [("thinking", "**Generating Pelican Names**\n\n", 236),
                  ("call", "gen_0", "pelican_name_generator", {}, "{}")],
        "signatures": [None, ("ClgBEU0yD8z3", 336)],
        "finish": "tool_calls",
        "usage": Usage(input_tokens=32, output_tokens=54, reasoning_tokens=42),
    },
    "gemini/gemini-2.5-pro_thinking-text-only.pydantic-ai.sse": {
        # The signature arrived on the first answer text part: it rides on an empty marker before it.
        "parts": [("thinking", "**Clarifying User Goals**\n\nI'm", 1575), ("thinking", "", 0),
                  ("text_prefix", "This is a great question! Safely crossing the street", 1938)],
        "signatures": [None, ("CiIB0e2Kb6Sy", 6152), None],
        "finish": "stop",
        "usage": Usage(input_tokens=34, output_tokens=1256, reasoning_tokens=787),
    },
    "gemini/gemini-3-flash_streamed-partial-args-no-args-calls.vercel.chunks.jsonl": {
        "parts": [("thinking", "**Processing User Requests**\n\n", 320),
                  ("call", "gen_0", "read_theme", {}, "{}"),
                  ("call", "gen_1", "read_screen", {"id": "A"}, '{"id":"A"}'),
                  ("call", "gen_2", "read_screen", {"id": "B"}, '{"id":"B"}'),
                  ("call", "gen_3", "read_screen", {"id": "C"}, '{"id":"C"}')],
        "signatures": [None, ("AY89a18a8/Lo", 1060), None, None, None],
        "finish": "tool_calls",
        "usage": Usage(input_tokens=249, output_tokens=241, reasoning_tokens=183),
    },
    "gemini/gemini-3-pro_call-empty-args-thought-signature.pydantic-ai.sse": {
        "parts": [("call", "gen_0", "get_country", {}, "{}")],
        "signatures": [("EpwICpkIAXLI", 1408)],
        "finish": "tool_calls",
        "usage": Usage(input_tokens=29, output_tokens=212, reasoning_tokens=202),
    },
    "gemini/vertex_gemini-2.5-flash_single-call.ruby_llm.sse": {
        "parts": [("call", "gen_0", "weather", {"latitude": "52.5200", "longitude": "13.4050"},
                   '{"latitude":"52.5200","longitude":"13.4050"}')],
        "signatures": [("CiwBjz1rX7BK", 480)],
        "finish": "tool_calls",
        "usage": Usage(input_tokens=70, output_tokens=60, reasoning_tokens=43),
    },
    "gemini/vertex_gemini-3.1-pro_streamed-partial-args.vercel.chunks.jsonl": {
        "parts": [("call", "gen_0", "getWeather", {"location": "Boston"}, '{"location":"Boston"}'),
                  ("call", "gen_1", "getWeather", {"location": "San Francisco"}, '{"location":"San Francisco"}')],
        "signatures": [("CiMBjz1rX25K", 1032), None],
        "finish": "tool_calls",
        "usage": Usage(input_tokens=26, output_tokens=155, reasoning_tokens=132),
    },
}


def comparable(message: Message) -> list[tuple[Any, ...]]:
    out = []
    for item, part in zip(summarize(message), message.parts, strict=True):
        if item[0] == "text" and len(part.text) > 80:  # type: ignore[union-attr]
            item = ("text_prefix", part.text[:52], len(part.text))  # type: ignore[union-attr]
        out.append(item)
    return out


def test_every_recording_has_expectations() -> None:
    if not STREAMS:
        fixture_path("gemini")  # skips, saying why, where the recordings are absent
    assert set(STREAMS) == set(EXPECTED)


@pytest.mark.anyio
@pytest.mark.parametrize("name", STREAMS)
async def test_recording_replays_through_http(name: str) -> None:
    outcome = await stream_body(SPEC, recorded_body(name), chunk_size=97, content_type=content_type(name))
    expected = EXPECTED[name]
    assert outcome.error is None
    assert comparable(outcome.message) == expected["parts"]
    assert signature_view(outcome.message) == expected["signatures"]
    assert outcome.response.finish_reason == expected["finish"]
    assert outcome.response.usage == expected["usage"]
    assert outcome.events[-1].type == "message_end"


@pytest.mark.anyio
async def test_error_400_recording_raises_http_error() -> None:
    body = fixture_path(ERROR_FIXTURE).read_bytes()
    with pytest.raises(ProviderHTTPError) as caught:
        await stream_body(SPEC, body, status=400, content_type="application/json")
    assert caught.value.status_code == 400
    assert "API key not valid. Please pass a valid API key." in str(caught.value)
    assert "API_KEY_INVALID" in caught.value.body


def test_error_object_in_a_200_body_is_an_error_finish() -> None:
    result = replay("gemini", fixture_path(ERROR_FIXTURE).read_bytes())
    assert result.error is not None
    assert result.error.error_type == "invalid_argument"
    assert result.error.message == "Gemini reported an error in the stream: API key not valid. Please pass a valid API key."
    assert result.finish_reason == "error"


def test_payload_lines_read_without_sse_framing() -> None:
    """A body of JSON objects one after another (as vercel stores them) reads like the SSE stream."""
    name = "gemini/vertex_gemini-3.1-pro_streamed-partial-args.vercel.chunks.jsonl"
    raw = replay("gemini", fixture_path(name).read_bytes(), id_factory=counter_ids())
    framed = replay("gemini", recorded_body(name), id_factory=counter_ids())
    assert raw.message == framed.message
    assert raw.events == framed.events


def test_partial_args_call_ends_at_its_terminator_with_previews() -> None:
    name = "gemini/vertex_gemini-3.1-pro_streamed-partial-args.vercel.chunks.jsonl"
    events = replay("gemini", recorded_body(name), id_factory=counter_ids()).events
    kinds = [(type(e).__name__, getattr(e, "id", None) or getattr(getattr(e, "call", None), "id", None))
             for e in events if isinstance(e, (ToolCallStart, ToolCallEnd))]
    # The first call is complete (its terminator) before the second one starts.
    assert kinds == [("ToolCallStart", "gen_0"), ("ToolCallEnd", "gen_0"),
                     ("ToolCallStart", "gen_1"), ("ToolCallEnd", "gen_1")]
    previews = [e.arguments for e in events if isinstance(e, ToolCallDelta) and e.id == "gen_1"]
    assert previews[0] == {"location": "San Francisco"}
    assert "".join(e.arguments_delta for e in events
                   if isinstance(e, ToolCallDelta) and e.id == "gen_1") == '{"location":"San Francisco"}'


# -- framing, chunk boundaries ------------------------------------------------------------------


def chunk(parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    finish = extra.pop("finishReason", None)
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "responseId": "r1", "modelVersion": "gemini-3-flash", **extra}


TRICKY_CHUNKS = [
    chunk([{"text": "Pensée naïve: {\"a\": [1]} \\ ", "thought": True}],
          usageMetadata={"promptTokenCount": 5}),
    chunk([{"text": "Grüße 🌍 — \"quoted\" ] } [ {", "thoughtSignature": "c2lnLXRleHQ="}]),
    chunk([{"functionCall": {"name": "lookup", "args": {"city": "Zürich", "note": "}]\"\\{["}}},
           {"functionCall": {"name": "lookup", "args": {"city": "Zürich", "note": "\\"}}}]),
    chunk([{"functionCall": {"name": "stream", "willContinue": True}, "thoughtSignature": "c2lnLWNhbGw="}]),
    chunk([{"functionCall": {"partialArgs": [{"jsonPath": "$.title", "stringValue": "Ünï", "willContinue": True}],
                             "willContinue": True}}]),
    chunk([{"functionCall": {"partialArgs": [{"jsonPath": "$.title", "stringValue": "cødé 🎉"}],
                             "willContinue": True}}]),
    chunk([{"functionCall": {"partialArgs": [{"jsonPath": "$.tags[0]", "stringValue": "x"},
                                             {"jsonPath": "$.tags[1]", "stringValue": "y"},
                                             {"jsonPath": "$.opts.depth", "numberValue": 2.0},
                                             {"jsonPath": "$.opts.exact", "boolValue": False},
                                             {"jsonPath": "$.opts['odd key']", "nullValue": "NULL_VALUE"}],
                             "willContinue": True}}]),
    chunk([{"functionCall": {}}]),
    chunk([{"text": ""}], finishReason="STOP",
          usageMetadata={"promptTokenCount": 5, "candidatesTokenCount": 7, "thoughtsTokenCount": 3,
                         "cachedContentTokenCount": 2}),
]


def as_sse(chunks: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks)


def as_json_array(chunks: list[dict[str, Any]]) -> bytes:
    return ("[" + "\r\n,\r\n".join(json.dumps(c, indent=2, ensure_ascii=False) for c in chunks) + "]").encode()


def as_payload_lines(chunks: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(c) + b"\n" for c in chunks)


def test_tricky_stream_assembles_the_same_in_every_framing() -> None:
    expected_parts = [
        ThinkingPart(text='Pensée naïve: {"a": [1]} \\ ', provider_data={"gemini": {"part": "thought"}}),
        ThinkingPart(text="", signature="c2lnLXRleHQ=", provider_data={"gemini": {"part": "text"}}),
        TextPart(text='Grüße 🌍 — "quoted" ] } [ {'),
        ToolCallPart(id="gen_0", name="lookup", arguments={"city": "Zürich", "note": '}]"\\{['},
                     arguments_raw=orjson.dumps({"city": "Zürich", "note": '}]"\\{['}).decode()),
        ToolCallPart(id="gen_1", name="lookup", arguments={"city": "Zürich", "note": "\\"},
                     arguments_raw=orjson.dumps({"city": "Zürich", "note": "\\"}).decode()),
        ToolCallPart(id="gen_2", name="stream",
                     arguments={"title": "Ünïcødé 🎉", "tags": ["x", "y"],
                                "opts": {"depth": 2, "exact": False, "odd key": None}},
                     arguments_raw='{"title":"Ünïcødé 🎉","tags":["x","y"],'
                                   '"opts":{"depth":2,"exact":false,"odd key":null}}',
                     provider_data={"gemini": {"thoughtSignature": "c2lnLWNhbGw="}}),
    ]
    for body in (as_sse(TRICKY_CHUNKS), as_json_array(TRICKY_CHUNKS), as_payload_lines(TRICKY_CHUNKS)):
        message, _, finish, usage, error = parse_in_pieces("gemini", body, [])
        assert error is None
        assert message.parts == expected_parts
        assert finish == "tool_calls"
        assert usage == Usage(input_tokens=5, output_tokens=10, cache_read_tokens=2, reasoning_tokens=3)
        assert message.metadata == {"response_id": "r1", "model": "gemini-3-flash"}


def bodies() -> list[tuple[str, bytes]]:
    out = [(name, recorded_body(name)) for name in STREAMS]
    out += [(name + ":raw-lines", fixture_path(name).read_bytes()) for name in STREAMS if name.endswith(".jsonl")]
    out += [("tricky.sse", as_sse(TRICKY_CHUNKS)), ("tricky.json", as_json_array(TRICKY_CHUNKS)),
            ("tricky.jsonl", as_payload_lines(TRICKY_CHUNKS))]
    return out


BODIES = bodies()


@pytest.mark.parametrize(("name", "body"), BODIES, ids=[name for name, _ in BODIES])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_rechunking_never_changes_the_result(name: str, body: bytes, data: st.DataObject) -> None:
    whole = parse_in_pieces("gemini", body, [])
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=40), label="cuts")
    assert parse_in_pieces("gemini", body, cuts) == whole


@pytest.mark.parametrize(("name", "body"), BODIES, ids=[name for name, _ in BODIES])
def test_byte_at_a_time_gives_the_same_result(name: str, body: bytes) -> None:
    assert parse_in_pieces("gemini", body, list(range(len(body)))) == parse_in_pieces("gemini", body, [])


def test_garbage_between_array_elements_is_a_malformed_chunk() -> None:
    body = b'[{"candidates": []}\r\n, oops {"candidates": []}]'
    _, _, _, _, error = parse_in_pieces("gemini", body, [])
    assert error is not None and error.error_type == "malformed_chunk"


# -- truncation ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_sse_cut_before_finish_reason_keeps_what_was_complete() -> None:
    body = recorded_body("gemini/gemini-2.5-pro_thinking-text-only.pydantic-ai.sse")
    events = body.split(b"\r\n\r\n")
    cut = b"\r\n\r\n".join(events[:6]) + b"\r\n\r\n" + events[6][:40]  # 4 thoughts, 2 answers, half an event
    outcome = await stream_body(SPEC, cut, chunk_size=64)
    assert isinstance(outcome.error, StreamInterruptedError)
    assert outcome.error.error_type == "incomplete_stream"
    partial = outcome.error.partial_message
    assert partial is not None
    assert [p.type for p in partial.parts] == ["thinking", "thinking", "text"]
    assert partial.text.startswith("This is a great question!")
    assert partial.text.endswith("### 1. Find a Safe Place to Cross\nThe best place is")
    assert outcome.response.finish_reason == "error"


@pytest.mark.anyio
async def test_json_array_cut_inside_the_last_object() -> None:
    name = "gemini/gemini-2.5-flash_thought-then-call-no-args.jsonarray.llm-gemini.json"
    body = fixture_path(name).read_bytes()
    cut = body[: body.index(b'"pelican_name_generator"') + 10]
    outcome = await stream_body(SPEC, cut, content_type="application/json")
    assert isinstance(outcome.error, StreamInterruptedError)
    assert comparable(outcome.message) == [("thinking", "**Generating Pelican Names**\n\n", 236)]


@pytest.mark.anyio
async def test_partial_args_call_cut_before_its_terminator_is_invalid() -> None:
    name = "gemini/vertex_gemini-3.1-pro_streamed-partial-args.vercel.chunks.jsonl"
    lines = fixture_path(name).read_bytes().splitlines()
    # Lines 0-3 are the first call with its terminator; line 5 streams "San Francisco", more to come.
    outcome = await stream_body(SPEC, payload_lines_to_sse(b"\n".join(lines[:6])))
    assert isinstance(outcome.error, StreamInterruptedError)
    parts = outcome.message.parts
    assert isinstance(parts[0], ToolCallPart) and parts[0].arguments == {"location": "Boston"}
    assert isinstance(parts[1], InvalidToolCallPart)
    assert parts[1].name == "getWeather"
    assert parts[1].arguments_raw == '{"location":"San Francisco'
    # Cut after the string closed but before `functionCall: {}`: still not run.
    outcome = await stream_body(SPEC, payload_lines_to_sse(b"\n".join(lines[:7])))
    invalid = outcome.message.parts[1]
    assert isinstance(invalid, InvalidToolCallPart)
    assert invalid.arguments_raw == '{"location":"San Francisco"'


def test_finish_while_a_string_argument_is_still_streaming_does_not_run_the_call() -> None:
    body = as_sse([
        chunk([{"functionCall": {"name": "f", "willContinue": True}}]),
        chunk([{"functionCall": {"partialArgs": [{"jsonPath": "$.q", "stringValue": "ab", "willContinue": True}],
                                 "willContinue": True}}], finishReason="STOP"),
    ])
    message, _, finish, _, _ = parse_in_pieces("gemini", body, [])
    assert finish == "stop"
    assert message.parts == [InvalidToolCallPart(
        id="gen_0", name="f", arguments_raw='{"q":"ab',
        reason="The call ended while one of its argument values was still streaming, so it was not run.")]


# -- several calls, finish reasons, errors -------------------------------------------------------


@pytest.mark.anyio
async def test_identical_calls_in_one_chunk_stay_distinct() -> None:
    call = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
    body = as_sse([chunk([call, call, {"functionCall": {"name": "get_weather"}}], finishReason="STOP")])
    outcome = await stream_body(SPEC, body)
    assert summarize(outcome.message) == [
        ("call", "gen_0", "get_weather", {"city": "Paris"}, '{"city":"Paris"}'),
        ("call", "gen_1", "get_weather", {"city": "Paris"}, '{"city":"Paris"}'),
        ("call", "gen_2", "get_weather", {}, "{}"),
    ]
    assert outcome.response.finish_reason == "tool_calls"


@pytest.mark.parametrize(("raw", "reason"), [("SAFETY", "content_filter"), ("RECITATION", "content_filter"),
                                             ("BLOCKLIST", "content_filter"), ("SPII", "content_filter"),
                                             ("PROHIBITED_CONTENT", "content_filter"), ("OTHER", "stop"),
                                             ("MAX_TOKENS", "length"), ("LANGUAGE", "stop")])
def test_finish_reasons(raw: str, reason: str) -> None:
    result = replay("gemini", as_sse([chunk([{"text": "Hi"}], finishReason=raw)]))
    assert (result.finish_reason, result.error) == (reason, None)


@pytest.mark.anyio
async def test_malformed_function_call_is_an_error_finish() -> None:
    body = as_sse([chunk([{"text": "Let me"}]),
                   {"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL", "index": 0,
                                    "finishMessage": "Malformed function call: print(x"}]}])
    outcome = await stream_body(SPEC, body)
    assert isinstance(outcome.error, ProviderStreamError)
    assert outcome.error.error_type == "malformed_function_call"
    assert "Malformed function call: print(x" in str(outcome.error)
    assert outcome.message.text == "Let me"
    assert outcome.response.finish_reason == "error"


def test_blocked_prompt_is_a_content_filter_finish() -> None:
    result = replay("gemini", as_sse([{"promptFeedback": {"blockReason": "SAFETY"},
                                       "usageMetadata": {"promptTokenCount": 4}}]))
    assert result.finish_reason == "content_filter"
    assert result.message.metadata["block_reason"] == "SAFETY"


@pytest.mark.anyio
async def test_error_inside_the_stream_keeps_the_text_before_it() -> None:
    body = as_sse([chunk([{"text": "Partial answer"}]),
                   {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}])
    outcome = await stream_body(SPEC, body)
    assert isinstance(outcome.error, ProviderStreamError)
    assert outcome.error.error_type == "unavailable"
    assert str(outcome.error) == "Gemini reported an error in the stream: The model is overloaded."
    assert outcome.message.text == "Partial answer"


def test_usage_is_reported_when_it_changes_and_the_last_wins() -> None:
    body = recorded_body("gemini/gemini-2.5-pro_thinking-text-only.pydantic-ai.sse")
    result = replay("gemini", body)
    usages = [e.usage for e in result.events if e.type == "usage"]
    assert len(usages) == len(set(map(repr, usages)))  # no repeats of an unchanged count
    assert usages[-1] == result.usage == Usage(input_tokens=34, output_tokens=1256, reasoning_tokens=787)


# -- requests ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_request_goes_to_stream_generate_content_with_the_api_key_header() -> None:
    seen: list[httpx.Request] = []
    body = recorded_body("gemini/gemini-2.5-flash_text-only-max-tokens.mirascope.sse")
    async with httpx.AsyncClient(transport=chunked_transport(body, seen=seen)) as client:
        model = get_model(SPEC, api_key="test", http_client=client)
        message = await model.request([Message.user("List all U.S. states.")], settings={"max_tokens": 50})
    assert message.text.startswith("Here are all 50 U.S. states")
    request = seen[0]
    assert str(request.url) == ("https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"
                                ":streamGenerateContent?alt=sse")
    assert request.headers["x-goog-api-key"] == "test"
    assert "authorization" not in request.headers
    # The same body the recording's client sent.
    assert orjson.loads(request.content) == orjson.loads(
        fixture_path("gemini/gemini-2.5-flash_text-only-max-tokens.mirascope.request.json").read_bytes())


TOOLS = [ToolDefinition(name="get_weather", description="Weather for a city.",
                        parameters={"type": "object", "properties": {"city": {"type": "string"}},
                                    "required": ["city"], "additionalProperties": False}),
         ToolDefinition(name="lookup", parameters={"type": "object", "properties": {}})]


def build(messages: list[Message], **settings_: Any) -> dict[str, Any]:
    return Protocol().build_request("gemini-2.5-flash", messages, TOOLS, settings_)  # type: ignore[arg-type]


def test_multi_round_history_maps_exactly() -> None:
    history = [
        Message.system("Be brief."),
        Message(role="user", parts=[TextPart(text="Weather in Paris and Rome? See:"),
                                    FilePart(media_type="image/png", data="iVBORw0KGgo="),
                                    FilePart(media_type="application/pdf", url="gs://bucket/doc.pdf")]),
        Message(role="assistant", parts=[
            ThinkingPart(text="Two cities.", signature="c2lnLXRob3VnaHQ=", provider_data={"gemini": {"part": "thought"}}),
            ThinkingPart(text="", signature="c2lnLXRleHQ=", provider_data={"gemini": {"part": "text"}}),
            TextPart(text="Checking both."),
            ThinkingPart(text="An unsigned summary.", provider_data={"gemini": {"part": "thought"}}),
            ToolCallPart(id="c1", name="get_weather", arguments={"city": "Paris"}, arguments_raw='{"city":"Paris"}',
                         provider_data={"gemini": {"thoughtSignature": "c2lnLWNhbGw="}}),
            ToolCallPart(id="c2", name="get_weather", arguments={"city": "Rome"}, arguments_raw='{"city":"Rome"}'),
        ]),
        # Results in the other order than the calls: Gemini gets them in call order.
        Message.tool_results([ToolResultPart(call_id="c2", name="get_weather", result="sunny"),
                              ToolResultPart(call_id="c1", name="get_weather", result={"temp": 18})]),
        Message(role="assistant", parts=[
            ThinkingPart(text="From another provider.", signature="anthropic-signature"),
            ToolCallPart(id="toolu_1", name="lookup", arguments={}, arguments_raw="",
                         provider_data={"anthropic": {"caller": "x"}}),
            InvalidToolCallPart(id="toolu_2", name="lookup", arguments_raw='{"q": ', reason="cut"),
        ]),
        Message.tool_results([ToolResultPart(call_id="toolu_1", name="lookup", result=[1, 2]),
                              ToolResultPart(call_id="toolu_2", name="lookup", result="Arguments were cut off.",
                                             is_error=True)]),
        Message(role="assistant", parts=[TextPart(text="Paris 18°, Rome sunny."),
                                         ThinkingPart(text="", signature="c2lnLWVuZA==",
                                                      provider_data={"gemini": {"part": "text", "empty": True}})]),
        Message.user("Thanks!"),
    ]
    body = build(history, max_tokens=256, temperature=0.2, top_p=0.9, stop=["END"], thinking=1024,
                 tool_choice="required", output_schema={"name": "answer", "schema": {"type": "object"}},
                 extra_body={"safetySettings": []})
    assert body == {
        "contents": [
            {"role": "user", "parts": [
                {"text": "Weather in Paris and Rome? See:"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://bucket/doc.pdf"}},
            ]},
            {"role": "model", "parts": [
                {"text": "Two cities.", "thought": True, "thoughtSignature": "c2lnLXRob3VnaHQ="},
                {"text": "Checking both.", "thoughtSignature": "c2lnLXRleHQ="},
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnLWNhbGw="},
                {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"temp": 18}}},
                {"functionResponse": {"name": "get_weather", "response": {"result": "sunny"}}},
            ]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "lookup", "args": {}}, "thoughtSignature": SIGNATURE_PLACEHOLDER},
                {"functionCall": {"name": "lookup", "args": {}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "lookup", "response": {"result": [1, 2]}}},
                {"functionResponse": {"name": "lookup", "response": {"error": "Arguments were cut off."}}},
            ]},
            {"role": "model", "parts": [
                {"text": "Paris 18°, Rome sunny."},
                {"text": "", "thoughtSignature": "c2lnLWVuZA=="},
            ]},
            {"role": "user", "parts": [{"text": "Thanks!"}]},
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [{"functionDeclarations": [
            {"name": "get_weather", "description": "Weather for a city.",
             "parametersJsonSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                                      "required": ["city"], "additionalProperties": False}},
            {"name": "lookup", "parametersJsonSchema": {"type": "object", "properties": {}}},
        ]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        "generationConfig": {
            "maxOutputTokens": 256, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"],
            "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024},
            "responseMimeType": "application/json", "responseJsonSchema": {"type": "object"},
        },
        "safetySettings": [],
    }


@pytest.mark.parametrize(("thinking", "config"), [
    (True, {"includeThoughts": True}),
    (0, {"includeThoughts": False, "thinkingBudget": 0}),
    (-1, {"includeThoughts": True, "thinkingBudget": -1}),
    ("low", {"includeThoughts": True, "thinkingLevel": "LOW"}),
])
def test_thinking_setting(thinking: Any, config: dict[str, Any]) -> None:
    assert build([Message.user("hi")], thinking=thinking)["generationConfig"] == {"thinkingConfig": config}


@pytest.mark.parametrize(("choice", "config"), [
    ("auto", {"mode": "AUTO"}), ("none", {"mode": "NONE"}), ("required", {"mode": "ANY"}),
    ({"name": "lookup"}, {"mode": "ANY", "allowedFunctionNames": ["lookup"]}),
])
def test_tool_choice(choice: Any, config: dict[str, Any]) -> None:
    assert build([Message.user("hi")], tool_choice=choice)["toolConfig"] == {"functionCallingConfig": config}


async def parsed(name: str) -> Message:
    outcome = await stream_body(SPEC, recorded_body(name), content_type=content_type(name))
    assert outcome.error is None
    return outcome.message


def raw_parts(name: str) -> list[dict[str, Any]]:
    """Every non-empty part of a recording, straight from the file."""
    body = recorded_body(name)
    if name.endswith(".json"):
        chunks = json.loads(body)
    else:
        chunks = [json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")]
    return [p for c in chunks for p in c["candidates"][0]["content"]["parts"] if p != {"text": ""}]


@pytest.mark.anyio
async def test_gemini3_call_signature_goes_back_on_the_same_call() -> None:
    name = "gemini/gemini-3-pro_call-empty-args-thought-signature.pydantic-ai.sse"
    answer = await parsed(name)
    call = answer.tool_calls[0]
    # Stored histories keep it: a JSON round trip changes nothing.
    history = load_messages(dump_messages([
        Message.user("What is the capital of the user country? Call the tool"),
        answer,
        Message.tool_results([ToolResultPart(call_id=call.id, name=call.name, result="France")]),
    ]))
    body = Protocol().build_request("gemini-3-pro-preview", history, [], {})
    assert body["contents"][1] == {"role": "model", "parts": raw_parts(name)}
    assert body["contents"][1]["parts"][0]["thoughtSignature"].startswith("EpwICpkIAXLI")
    assert body["contents"][2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "get_country", "response": {"result": "France"}}}]}


@pytest.mark.anyio
@pytest.mark.parametrize("name", [
    "gemini/gemini-2.5-flash_thought-then-call-no-args.jsonarray.llm-gemini.json",
    "gemini/vertex_gemini-2.5-flash_single-call.ruby_llm.sse",
    "gemini/gemini-2.5-flash_call-no-params.ruby_llm.sse",
])
async def test_model_turn_is_sent_back_part_for_part(name: str) -> None:
    answer = await parsed(name)
    body = Protocol().build_request("gemini-2.5-flash", [Message.user("hi"), answer], [], {})
    # Unsigned thought summaries stay home; everything else goes back as it came.
    expected = [p for p in raw_parts(name) if not (p.get("thought") and "thoughtSignature" not in p)]
    assert body["contents"][1] == {"role": "model", "parts": expected}


@pytest.mark.anyio
async def test_text_signature_goes_back_on_the_text_it_came_with() -> None:
    name = "gemini/gemini-2.5-pro_thinking-text-only.pydantic-ai.sse"
    answer = await parsed(name)
    parts = Protocol().build_request("gemini-2.5-pro", [Message.user("hi"), answer], [], {})["contents"][1]["parts"]
    raw = raw_parts(name)
    signature = next(p["thoughtSignature"] for p in raw if "thoughtSignature" in p)
    assert parts == [
        {"text": "".join(p["text"] for p in raw if not p.get("thought")), "thoughtSignature": signature},
    ]


@pytest.mark.anyio
async def test_streamed_calls_go_back_with_their_signature_and_results_in_call_order() -> None:
    name = "gemini/vertex_gemini-3.1-pro_streamed-partial-args.vercel.chunks.jsonl"
    answer = await parsed(name)
    first, second = answer.tool_calls
    results = Message.tool_results([ToolResultPart(call_id=second.id, name=second.name, result={"temp_f": 61}),
                                    ToolResultPart(call_id=first.id, name=first.name, result={"temp_f": 40})])
    contents = Protocol().build_request("gemini-3.1-pro-preview", [Message.user("hi"), answer, results],
                                        [], {})["contents"]
    signature = orjson.loads(fixture_path(name).read_bytes().splitlines()[0])["candidates"][0]["content"][
        "parts"][0]["thoughtSignature"]
    assert contents[1] == {"role": "model", "parts": [
        {"functionCall": {"name": "getWeather", "args": {"location": "Boston"}}, "thoughtSignature": signature},
        {"functionCall": {"name": "getWeather", "args": {"location": "San Francisco"}}},
    ]}
    assert contents[2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "getWeather", "response": {"temp_f": 40}}},
        {"functionResponse": {"name": "getWeather", "response": {"temp_f": 61}}},
    ]}


def test_provider_call_ids_are_sent_back_when_gemini_gave_them() -> None:
    body = as_sse([chunk([{"functionCall": {"id": "fc-7", "name": "lookup", "args": {"q": 1}}}], finishReason="STOP")])
    answer = replay("gemini", body).message
    assert answer.tool_calls[0].id == "fc-7"
    contents = build([Message.user("hi"), answer,
                      Message.tool_results([ToolResultPart(call_id="fc-7", name="lookup", result="ok")])])["contents"]
    assert contents[1]["parts"][0]["functionCall"] == {"name": "lookup", "args": {"q": 1}, "id": "fc-7"}
    assert contents[2]["parts"][0]["functionResponse"] == {"name": "lookup", "response": {"result": "ok"}, "id": "fc-7"}


def test_nested_partial_args_and_a_revisited_object_merge_into_the_arguments() -> None:
    entries = [{"jsonPath": "$.items[0].name", "stringValue": "ap", "willContinue": True},
               {"jsonPath": "$.items[0].name", "stringValue": "ple"},
               {"jsonPath": "$.items[0].qty", "numberValue": 3},
               {"jsonPath": "$.items[1].name", "stringValue": "pear"},
               {"jsonPath": "$.total", "numberValue": 4.5},
               {"jsonPath": "$.items[1].late", "boolValue": True}]  # back into an array already closed
    body = as_sse([chunk([{"functionCall": {"name": "order", "willContinue": True}}]),
                   *(chunk([{"functionCall": {"partialArgs": [e], "willContinue": True}}]) for e in entries),
                   chunk([{"functionCall": {}}], finishReason="STOP")])
    call = replay("gemini", body).message.parts[0]
    assert isinstance(call, ToolCallPart)
    assert call.arguments == {"items": [{"name": "apple", "qty": 3}, {"name": "pear", "late": True}], "total": 4.5}
    # The text is what was streamed, in order: the revisit shows as a repeated key.
    assert call.arguments_raw == ('{"items":[{"name":"apple","qty":3},{"name":"pear"}],"total":4.5,'
                                  '"items":[{"late":true}]}')


def test_generated_images_are_kept_and_sent_back() -> None:
    body = as_sse([chunk([{"text": "Here it is."}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}],
                         finishReason="STOP")])
    answer = replay("gemini", body).message
    assert answer.parts == [TextPart(text="Here it is."), FilePart(media_type="image/png", data="iVBORw0KGgo=")]
    assert build([Message.user("Draw"), answer])["contents"][1]["parts"] == [
        {"text": "Here it is."}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]
