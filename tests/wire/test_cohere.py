"""Cohere v2: recorded streams over HTTP, re-chunking, truncation, and request mapping (tool plans)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.conftest import FIXTURES, fixture_files
from tests.wire.helpers import chunked_transport, counter_ids, recorded_body, stream_body, summarize
from toolwire import (
    InvalidToolCallPart,
    Message,
    ProviderStreamError,
    StreamInterruptedError,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    UserError,
    get_model,
)
from toolwire._accumulate import Accumulator
from toolwire.events import Event, ToolCallEnd, ToolCallStart
from toolwire.messages import FilePart
from toolwire.wire.cohere import CohereParser, Protocol

MODEL = "cohere:command-a-03-2025"
PLAN = {"cohere": {"tool_plan": True}}
THOUGHT = {"cohere": {"tool_plan": False}}

# Read off each recording by hand: parts (long texts as prefix + length), the finish reason, the
# (input, output) counts of `usage.tokens`, and the error type when the stream ends in an error.
EXPECTED: dict[str, dict[str, Any]] = {
    "cohere/command-a_tool-no-params.ruby_llm.sse": {
        "parts": [("thinking", "I will use the best_language_t", 78),
                  ("call", "best_language_to_learn_wf0rc70sqj7v", "best_language_to_learn", {}, "")],
        "finish": "tool_calls", "usage": (1476, 58), "error": None,
    },
    "cohere/command-r_tool-plan-then-tool.langchain-cohere.sse": {
        "parts": [("thinking", "I will use the Person tool to ", 122),
                  ("call", "Person_2fnrphbsnr66", "Person", {"name": "Erick", "age": 27},
                   '{\n    "name": "Erick",\n    "age": 27\n}')],
        "finish": "tool_calls", "usage": (906, 77), "error": None,
    },
    "cohere/empty-tool-call.vercel.chunks.jsonl": {
        "parts": [("thinking", "I will use the currentTime too", 57),
                  ("call", "currentTime_y46ar19t5gvw", "currentTime", {}, "")],
        "finish": "tool_calls", "usage": (1445, 43), "error": None,
    },
    "cohere/text-only.langchain-cohere.sse": {
        "parts": [("text_prefix", "Hi there! You're Pickle Rick? That's a fun nickname!", 287)],
        "finish": "stop", "usage": (70, 69), "error": None,
    },
    "cohere/thinking-text-only.vercel.chunks.jsonl": {
        "parts": [("thinking", "The user is asking for the sum", 162), ("text", "The answer to 2 + 2 is 4.")],
        "finish": "stop", "usage": (1394, 54), "error": None,
    },
    "cohere/tool-plan-then-2-tool-calls.vercel.chunks.jsonl": {
        "parts": [("thinking", "I will use the weather tool to", 131),
                  ("call", "weather_e8p4pn45zt0t", "weather", {"location": "San Francisco"},
                   '{"location": "San Francisco"}'),
                  ("call", "cityAttractions_pyxssbwnq9fq", "cityAttractions", {"city": "San Francisco"},
                   '{"city": "San Francisco"}')],
        "finish": "tool_calls", "usage": (1549, 95), "error": None,
    },
    "cohere/tool-plan-then-error-invalid-tool-generation.langchain-cohere.sse": {
        "parts": [("thinking", "I will first inspect the table", 119)],
        "finish": "error", "usage": None, "error": "invalid_tool_generation",
    },
}


def _view(message: Message) -> list[tuple[Any, ...]]:
    view = summarize(message)
    for i, part in enumerate(message.parts):
        if isinstance(part, TextPart) and len(part.text) > 100:
            view[i] = ("text_prefix", part.text[:52], len(part.text))
    return view


def test_every_cohere_recording_has_expectations() -> None:
    if not FIXTURES.is_dir():
        pytest.skip(f"the recorded provider fixtures ({FIXTURES}) are not present in this checkout")
    assert set(fixture_files("cohere", ".sse", ".chunks.jsonl")) == set(EXPECTED)


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_recorded_stream_over_http(name: str) -> None:
    expected = EXPECTED[name]
    outcome = await stream_body(MODEL, recorded_body(name), chunk_size=53)
    assert _view(outcome.message) == expected["parts"]
    assert outcome.response.finish_reason == expected["finish"]
    usage = outcome.response.usage
    assert (None if usage is None else (usage.input_tokens, usage.output_tokens)) == expected["usage"]
    if expected["error"] is None:
        assert outcome.error is None
    else:
        assert isinstance(outcome.error, ProviderStreamError)
        assert outcome.error.error_type == expected["error"]
        assert outcome.error.partial_message == outcome.message
    assert outcome.message.metadata["response_id"]
    # A plan is a thinking part marked as a plan; a thinking block is marked as not one.
    for part in outcome.message.parts:
        if isinstance(part, ThinkingPart):
            assert part.provider_data == (THOUGHT if "thinking-text-only" in name else PLAN)
    assert outcome.events[-1].type == "message_end"


@pytest.mark.anyio
async def test_request_goes_to_v2_chat_with_bearer_auth() -> None:
    seen: list[httpx.Request] = []
    body = recorded_body("cohere/text-only.langchain-cohere.sse")
    async with httpx.AsyncClient(transport=chunked_transport(body, seen=seen)) as client:
        model = get_model(MODEL, api_key="test", http_client=client)
        async with model.stream([Message.user("I'm Pickle Rick")]) as response:
            events = [e async for e in response]
    assert events[-1].type == "message_end"
    assert str(seen[0].url) == "https://api.cohere.com/v2/chat"
    assert seen[0].headers["authorization"] == "Bearer test"
    assert orjson.loads(seen[0].content) == {
        "model": "command-a-03-2025", "messages": [{"role": "user", "content": "I'm Pickle Rick"}], "stream": True}


def test_error_message_quotes_the_provider_tool_plan_then_error_invalid_tool_generation() -> None:
    _, _, acc = _parse([recorded_body("cohere/tool-plan-then-error-invalid-tool-generation.langchain-cohere.sse")])
    assert acc.error is not None
    assert acc.error.message == (
        "Cohere ended the response with an error (INVALID_TOOL_GENERATION): your request resulted in an invalid "
        "tool generation. Try updating the messages or tool definitions. Everything streamed before it is kept.")
    assert acc.raw_finish_reason == "ERROR"


def test_each_call_ends_at_its_tool_call_end_tool_plan_then_2_tool_calls() -> None:
    _, events, _ = _parse([recorded_body("cohere/tool-plan-then-2-tool-calls.vercel.chunks.jsonl")])
    calls = [(e.type, e.index) for e in events if isinstance(e, (ToolCallStart, ToolCallEnd))]
    # The first call is complete (and could start running) before the second one begins.
    assert calls == [("tool_call_start", 0), ("tool_call_end", 0), ("tool_call_start", 1), ("tool_call_end", 1)]
    kinds = [e.type for e in events]
    assert kinds.index("tool_call_end") < kinds.index("usage") < kinds.index("finish")


def test_usage_keeps_cached_tokens_and_billed_units_command_a_tool_no_params() -> None:
    message, _, acc = _parse([recorded_body("cohere/command-a_tool-no-params.ruby_llm.sse")])
    assert acc.usage is not None
    assert acc.usage.cache_read_tokens == 1376
    assert message.metadata["billed_units"] == {"input_tokens": 44, "output_tokens": 28}


# -- parser cases not covered by a recording ---------------------------------------------------------

def _events(*payloads: dict[str, Any], named: bool = True) -> bytes:
    out = []
    for payload in payloads:
        head = f"event: {payload['type']}\n".encode() if named else b""
        out.append(head + b"data: " + orjson.dumps(payload) + b"\n\n")
    return b"".join(out) + b"data: [DONE]\n\n"


def _parse(pieces: list[bytes]) -> tuple[Message, list[Event], Accumulator]:
    acc = Accumulator(id_factory=counter_ids())
    parser = CohereParser(acc)
    events: list[Event] = []
    for piece in pieces:
        parser.feed(piece)
        events.extend(acc.events)
        acc.events.clear()
    message = parser.close()
    events.extend(acc.events)
    return message, events, acc


def _start(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "tool-call-start", "index": index, "delta": {"message": {"tool_calls": {
        "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}}}}


def _args(index: int, fragment: str) -> dict[str, Any]:
    return {"type": "tool-call-delta", "index": index,
            "delta": {"message": {"tool_calls": {"function": {"arguments": fragment}}}}}


def _end(reason: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message-end", "delta": {"finish_reason": reason, **extra}}


def _plan(text: str) -> dict[str, Any]:
    return {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": text}}}


def test_a_plan_and_a_thinking_block_stay_separate_parts() -> None:
    body = _events(
        {"type": "content-start", "index": 0, "delta": {"message": {"content": {"type": "thinking", "thinking": ""}}}},
        {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"thinking": "think"}}}},
        {"type": "content-end", "index": 0},
        _plan("plan"),
        _start(0, "c1", "f", '{"a":'),
        _args(0, " 1}"),
        {"type": "tool-call-end", "index": 0},
        _end("TOOL_CALL"),
    )
    message = _parse([body])[0]
    assert message.parts == [
        ThinkingPart(text="think", provider_data=THOUGHT),
        ThinkingPart(text="plan", provider_data=PLAN),
        ToolCallPart(id="c1", name="f", arguments={"a": 1}, arguments_raw='{"a": 1}'),
    ]


@pytest.mark.parametrize(("raw", "finish"), [("COMPLETE", "stop"), ("STOP_SEQUENCE", "stop"),
                                             ("MAX_TOKENS", "length"), ("SOMETHING_NEW", "stop")])
def test_finish_reasons(raw: str, finish: str) -> None:
    body = _events({"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "x"}}}},
                   _end(raw), named=False)
    _, _, acc = _parse([body])
    assert (acc.finish_reason, acc.raw_finish_reason, acc.error) == (finish, raw, None)


def test_null_arguments_mean_an_empty_object() -> None:
    body = _events(_start(0, "c1", "f", ""), _args(0, "null"), {"type": "tool-call-end", "index": 0},
                   _end("TOOL_CALL"))
    assert _parse([body])[0].tool_calls[0].arguments == {}


def test_max_tokens_inside_a_call_leaves_it_invalid() -> None:
    body = _events(_start(0, "c1", "f", '{"a": "lo'), _end("MAX_TOKENS"))
    message, _, acc = _parse([body])
    assert acc.finish_reason == "length"
    assert message.invalid_tool_calls[0].arguments_raw == '{"a": "lo'


def test_citations_and_unknown_events_are_ignored() -> None:
    body = _events(
        {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "A"}}}},
        {"type": "citation-start", "index": 0, "delta": {"message": {"citations": {"start": 0, "end": 1}}}},
        {"type": "citation-end", "index": 0},
        {"type": "debug", "whatever": [1, 2]},
        _end("COMPLETE"),
    )
    message, _, acc = _parse([body])
    assert message.parts == [TextPart(text="A")] and acc.error is None


def test_a_delta_for_a_call_that_never_started_is_malformed() -> None:
    message, _, acc = _parse([_events(_args(3, "{}"), _end("TOOL_CALL"))])
    assert acc.error is not None and acc.error.error_type == "malformed_chunk"
    assert message.parts == []


# -- the same stream cut at arbitrary byte boundaries gives the same result -------------------------

def _split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]


@pytest.mark.parametrize("name", sorted(EXPECTED))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=60))
def test_rechunking_a_recording_changes_nothing(name: str, cuts: list[int]) -> None:
    body = recorded_body(name)
    whole, whole_events, whole_acc = _parse([body])
    pieces, piece_events, piece_acc = _parse(_split(body, cuts))
    assert pieces == whole
    assert (piece_acc.finish_reason, piece_acc.usage, piece_acc.error) == (
        whole_acc.finish_reason, whole_acc.usage, whole_acc.error)
    assert [e.type for e in piece_events] == [e.type for e in whole_events]


# -- truncation ----------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_cut_inside_a_tool_call_delta_gives_an_invalid_call_command_r_tool_plan_then_tool() -> None:
    body = recorded_body("cohere/command-r_tool-plan-then-tool.langchain-cohere.sse")
    cut = body.index(b'{"arguments":"rick"}') + 10  # inside that tool-call-delta's JSON
    outcome = await stream_body(MODEL, body[:cut], chunk_size=200)
    assert isinstance(outcome.error, StreamInterruptedError)
    assert outcome.error.error_type == "incomplete_stream"
    partial = outcome.error.partial_message
    assert partial is not None
    assert partial.tool_calls == []
    assert partial.parts[0] == ThinkingPart(
        text="I will use the Person tool to create a person with the name Erick and age 27, and then relay "
             "this information to the user.", provider_data=PLAN)
    assert partial.parts[1] == InvalidToolCallPart(
        id="Person_2fnrphbsnr66", name="Person", arguments_raw='{\n    "name": "E',
        reason="The stream ended before this call's arguments were complete, so it was not run.")


@pytest.mark.anyio
async def test_a_call_ended_before_the_cut_is_kept_tool_plan_then_2_tool_calls() -> None:
    body = recorded_body("cohere/tool-plan-then-2-tool-calls.vercel.chunks.jsonl")
    cut = body.index(b'"index":1,"delta":{"message":{"tool_calls":{"function":{"arguments":"city"')
    outcome = await stream_body(MODEL, body[:cut], chunk_size=300)
    assert isinstance(outcome.error, StreamInterruptedError)
    partial = outcome.error.partial_message
    assert partial is not None
    # The first call saw its tool-call-end: it is complete and runnable. The second was cut.
    assert [(c.id, c.arguments) for c in partial.tool_calls] == [("weather_e8p4pn45zt0t",
                                                                  {"location": "San Francisco"})]
    assert [(c.id, c.arguments_raw) for c in partial.invalid_tool_calls] == [("cityAttractions_pyxssbwnq9fq", '{"')]


# -- requests -----------------------------------------------------------------------------------------

TOOLS = [
    ToolDefinition(name="weather", description="Weather for a place.",
                   parameters={"type": "object", "properties": {"location": {"type": "string"}}}),
    ToolDefinition(name="cityAttractions", parameters={"type": "object", "properties": {}}, strict=True),
]


@pytest.mark.anyio
async def test_multi_round_history_maps_to_exact_json() -> None:
    # Round 1 is the recorded Cohere turn (plan + two calls); its plan must travel back as tool_plan.
    recorded = await stream_body(MODEL, recorded_body("cohere/tool-plan-then-2-tool-calls.vercel.chunks.jsonl"))
    thought = await stream_body(MODEL, recorded_body("cohere/thinking-text-only.vercel.chunks.jsonl"))
    history = [
        Message.system("Be brief."),
        Message.user("Weather and attractions in San Francisco?"),
        recorded.message,
        Message.tool_results([
            ToolResultPart(call_id="weather_e8p4pn45zt0t", name="weather", result={"temp_c": 18}),
            ToolResultPart(call_id="cityAttractions_pyxssbwnq9fq", name="cityAttractions", result="Golden Gate"),
        ]),
        Message.assistant("18°C; see the Golden Gate."),
        Message.user("2 + 2?"),
        thought.message,
        Message.user("Thanks."),
    ]
    model = get_model(MODEL, api_key="test")
    url, body, headers = model.build_request(history, TOOLS, {
        "max_tokens": 300, "temperature": 0.3, "top_p": 0.8, "stop": ["\n\n"], "tool_choice": "required",
        "thinking": 2048, "output_schema": {"name": "out", "schema": {"type": "object"}},
    })
    assert url == "https://api.cohere.com/v2/chat"
    assert headers["Authorization"] == "Bearer test"
    assert body == {
        "model": "command-a-03-2025",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather and attractions in San Francisco?"},
            {"role": "assistant",
             "tool_plan": "I will use the weather tool to find the weather in San Francisco and the cityAttractions "
                          "tool to find attractions in San Francisco.",
             "tool_calls": [
                 {"id": "weather_e8p4pn45zt0t", "type": "function",
                  "function": {"name": "weather", "arguments": '{"location": "San Francisco"}'}},
                 {"id": "cityAttractions_pyxssbwnq9fq", "type": "function",
                  "function": {"name": "cityAttractions", "arguments": '{"city": "San Francisco"}'}},
             ]},
            {"role": "tool", "tool_call_id": "weather_e8p4pn45zt0t",
             "content": [{"type": "document", "document": {"data": '{"temp_c":18}'}}]},
            {"role": "tool", "tool_call_id": "cityAttractions_pyxssbwnq9fq",
             "content": [{"type": "text", "text": "Golden Gate"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "18°C; see the Golden Gate."}]},
            {"role": "user", "content": "2 + 2?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "The user is asking for the sum of 2 and 2. Since this is a "
                                                 "straightforward arithmetic problem, I don't need to use any tools. "
                                                 "I can calculate the answer directly."},
                {"type": "text", "text": "The answer to 2 + 2 is 4."},
            ]},
            {"role": "user", "content": "Thanks."},
        ],
        "stream": True,
        "tool_choice": "REQUIRED",
        "tools": [
            {"type": "function", "function": {"name": "weather", "description": "Weather for a place.",
                                              "parameters": {"type": "object",
                                                             "properties": {"location": {"type": "string"}}}}},
            {"type": "function", "function": {"name": "cityAttractions",
                                              "parameters": {"type": "object", "properties": {}}}},
        ],
        "strict_tools": True,
        "max_tokens": 300,
        "temperature": 0.3,
        "p": 0.8,
        "stop_sequences": ["\n\n"],
        "thinking": {"type": "enabled", "token_budget": 2048},
        "response_format": {"type": "json_object", "json_schema": {"type": "object"}},
    }


def test_history_from_another_provider() -> None:
    # Anthropic-style signed thinking before calls becomes the plan (text only); redacted thinking and
    # a message with nothing Cohere can hold are dropped; an invalid call goes with `{}`.
    history = [
        Message(role="assistant", parts=[
            ThinkingPart(text="secret", redacted=True, provider_data={"anthropic": {"data": "xyz"}}),
        ]),
        Message(role="assistant", parts=[
            ThinkingPart(text="Need the weather.", signature="sig", provider_data={"anthropic": {}}),
            ToolCallPart(id="toolu_01A", name="weather", arguments={}, arguments_raw=""),
            InvalidToolCallPart(id="call_9", name="weather", arguments_raw='{"loc', reason="cut"),
        ]),
        Message.tool_results([
            ToolResultPart(call_id="toolu_01A", name="weather", result=None),
            ToolResultPart(call_id="call_9", name="weather", result="invalid arguments", is_error=True),
        ]),
        Message(role="assistant", parts=[ThinkingPart(text="no calls, so no plan"), TextPart(text="Done.")]),
    ]
    body = Protocol().build_request("command-a-03-2025", history, (), {})
    assert body["messages"] == [
        {"role": "assistant", "tool_plan": "Need the weather.", "tool_calls": [
            {"id": "toolu_01A", "type": "function", "function": {"name": "weather", "arguments": "{}"}},
            {"id": "call_9", "type": "function", "function": {"name": "weather", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "toolu_01A", "content": [{"type": "document", "document": {"data": "null"}}]},
        {"role": "tool", "tool_call_id": "call_9", "content": [{"type": "text", "text": "invalid arguments"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    ]


@pytest.mark.parametrize(("choice", "expected", "offered"), [
    ("auto", None, ["weather", "cityAttractions"]),
    ("none", "NONE", ["weather", "cityAttractions"]),
    ("required", "REQUIRED", ["weather", "cityAttractions"]),
    ({"name": "weather"}, "REQUIRED", ["weather"]),
])
def test_tool_choice(choice: Any, expected: str | None, offered: list[str]) -> None:
    body = Protocol().build_request("m", [Message.user("hi")], TOOLS, {"tool_choice": choice})
    assert body.get("tool_choice") == expected
    assert [t["function"]["name"] for t in body["tools"]] == offered


@pytest.mark.parametrize(("thinking", "expected"), [
    (True, {"type": "enabled"}), (False, {"type": "disabled"}), (1024, {"type": "enabled", "token_budget": 1024}),
    (0, {"type": "disabled"}), ("high", {"type": "enabled"}), ("none", {"type": "disabled"}),
])
def test_thinking_setting(thinking: Any, expected: dict[str, Any]) -> None:
    assert Protocol().build_request("m", [], (), {"thinking": thinking})["thinking"] == expected


def test_user_images_and_unsupported_files() -> None:
    image = Message(role="user", parts=[TextPart(text="What is this?"), FilePart(media_type="image/png", data="AAA")])
    body = Protocol().build_request("m", [image], (), {"extra_body": {"k": 5}})
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
    ]}]
    assert body["k"] == 5
    pdf = Message(role="user", parts=[FilePart(media_type="application/pdf", url="https://example.com/a.pdf")])
    with pytest.raises(UserError, match="Cohere Chat v2 cannot take an application/pdf file"):
        Protocol().build_request("m", [pdf], (), {})
