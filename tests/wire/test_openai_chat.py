"""OpenAI Chat Completions (and compatible hosts): recorded streams, re-chunking, truncation, requests."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.conftest import fixture_path
from tests.wire.helpers import counter_ids, stream_body, summarize
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
    get_model,
)
from toolwire.events import ToolCallDelta
from toolwire.replay import replay

# What each recording must assemble into, read off the stream by hand (and by an independent naive
# parser when the expectations were written). Long reasoning texts are checked by prefix and length.
EXPECTED: dict[str, dict[str, Any]] = {
    "openai-chat/gpt-4o-mini_single-tool.pydantic-ai.sse": {
        "parts": [("call", "call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", {"country": "UK"}, '{"country":"UK"}')],
        "finish": "tool_calls", "usage": (53, 15), "error": None,
    },
    "openai-chat/gpt-4o_parallel-2-tools-empty-args.pydantic-ai.sse": {
        "parts": [
            ("call", "call_3rqTYrA6H21AYUaRGP4F66oq", "get_country", {}, "{}"),
            ("call", "call_Xw9XMKBJU48kAAd78WgIswDx", "get_product_name", {}, "{}"),
        ],
        "finish": "tool_calls", "usage": (364, 40), "error": None,
    },
    "openai-chat/gpt-4o_parallel-2-tools.magentic.sse": {
        "parts": [
            ("call", "call_8Sp49rZGndlZALo0uq1XvA7A", "plus", {"a": 2, "b": 3}, '{"a": 2, "b": 3}'),
            ("call", "call_u5dbdPz1mAis8zZVk4ZBqXgL", "minus", {"a": 3, "b": 2}, '{"a": 3, "b": 2}'),
        ],
        "finish": "tool_calls", "usage": (82, 50), "error": None,
    },
    "openai-chat/gpt-4o_text-only-max-tokens.mirascope.sse": {
        "parts": [("text", "Here is a list of all 50 U.S. states:\n\n1. Alabama\n2. Alaska\n3. Arizona\n4. Arkansas\n"
                           "5. California\n6. Colorado\n7. Connecticut\n8. Delaware\n9. Florida\n10")],
        "finish": "length", "usage": (14, 50), "error": None,
    },
    "openai-chat/gpt-4o_text-then-tool.magentic.sse": {
        "parts": [
            ("text", "One of my favorite cities is Paris. I'll get the current weather for Paris now."),
            ("call", "call_QgHUYg30lU8RAkIADo1bLA3P", "get_weather", {"location": "Paris"}, '{"location":"Paris"}'),
        ],
        "finish": "tool_calls", "usage": (58, 32), "error": None,
    },
    "openai-chat/gpt-5-mini_length-no-content.mirascope.sse": {
        "parts": [], "finish": "length", "usage": (13, 50), "error": None,
    },
    "openai-compatible/crusoe_llama-3.3_text-only.pydantic-ai.sse": {
        "parts": [("text", "1, 2, 3, 4, 5")], "finish": "stop", "usage": (46, 14), "error": None,
    },
    "openai-compatible/deepseek_single-tool.ruby_llm.sse": {
        "parts": [("call", "call_00_MRi7F2sfOet5LgvlZL3W5236", "weather",
                   {"latitude": "52.5200", "longitude": "13.4050"},
                   '{"latitude": "52.5200", "longitude": "13.4050"}')],
        "finish": "tool_calls", "usage": (348, 65), "error": None,
    },
    "openai-compatible/gemini-openai-compat_tool-finish-stop.magentic.sse": {
        # Empty id → generated; "stop" after a tool call is reported as tool_calls.
        "parts": [("call", "gen_0", "return_bool", {"value": True}, '{"value":true}')],
        "finish": "tool_calls", "usage": (8, 4), "error": None,
    },
    "openai-compatible/groq_gpt-oss-120b_reasoning-then-error-midstream.pydantic-ai.sse": {
        "parts": [("thinking", "We need to call the tool with ", 412)],
        "finish": "error", "usage": None, "error": "tool_use_failed",
    },
    "openai-compatible/groq_gpt-oss-120b_reasoning-then-tool.pydantic-ai.sse": {
        "parts": [
            ("thinking", "We need to call the function w", 92),
            ("call", "fc_bfb39741-3748-4def-9886-a93fc9c64a90", "get_something_by_name", {"name": "example"},
             '{"name":"example"}'),
        ],
        "finish": "tool_calls", "usage": (304, 49), "error": None,
    },
    "openai-compatible/groq_gpt-oss-120b_text-then-error-midstream.pydantic-ai.sse": {
        "parts": [("thinking", 'The user says: "dont make a to', 361), ("text", "maybe")],
        "finish": "error", "usage": None, "error": "tool_use_failed",
    },
    "openai-compatible/ollama-cloud-v1_gpt-oss-120b_reasoning-then-tool-empty-args.ruby_llm.sse": {
        "parts": [("thinking", "We need to answer the user's q", 241),
                  ("call", "call_253i1unw", "best_language_to_learn", {}, "{}")],
        "finish": "tool_calls", "usage": (134, 74), "error": None,
    },
    "openai-compatible/ollama-v1_llama3.1_single-tool.magentic.sse": {
        "parts": [("call", "call_j25hbnia", "return_bool", {"value": True}, '{"value":true}')],
        "finish": "tool_calls", "usage": None, "error": None,
    },
    "openai-compatible/ollama-v1_qwen3_reasoning-then-tool.ruby_llm.sse": {
        "parts": [("thinking", "Okay, the user is asking for t", 439),
                  ("call", "call_blqyt530", "weather", {"latitude": "52.5200", "longitude": "13.4050"},
                   '{"latitude":"52.5200","longitude":"13.4050"}')],
        "finish": "tool_calls", "usage": (195, 140), "error": None,
    },
    "openai-compatible/openrouter_claude-haiku_tool-empty-args.ruby_llm.sse": {
        "parts": [("call", "toolu_bdrk_01RZjXFQrWsHfYXHPYqX6mA7", "best_language_to_learn", {}, "{}")],
        "finish": "tool_calls", "usage": (579, 41), "error": None,
    },
    "openai-compatible/openrouter_deepseek-v3_text-then-tool.magentic.sse": {
        "parts": [("text", "My favorite city is Kyoto, Japan! Let me check the weather there for you."),
                  ("call", "chatcmpl-tool-8841ebdbc1974669a96e3801a0338190", "get_weather",
                   {"location": "Kyoto, Japan"}, '{"location":"Kyoto, Japan"}')],
        "finish": "tool_calls", "usage": (173, 40), "error": None,
    },
    "openai-compatible/openrouter_minimax_error-midstream.pydantic-ai.sse": {
        "parts": [("thinking", "We need to respond to a greeti", 42)],
        "finish": "error", "usage": (43, 10), "error": "400",
    },
    "openai-compatible/xai_grok-2_single-tool.magentic.sse": {
        "parts": [("call", "call_62664750", "return_list_of_int", {"value": [1, 2, 3, 4, 5]},
                   '{"value":[1,2,3,4,5]}')],
        "finish": "tool_calls", "usage": (153, 1), "error": None,
    },
    "openai-compatible/zai_glm-4.7_reasoning-text-only.pydantic-ai.sse": {
        "parts": [("thinking", "\n1.  **Analyze the User's Requ", 2173), ("text", "4")],
        "finish": "stop", "usage": (13, 564), "error": None,
    },
}


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_recorded_stream_over_http(name: str) -> None:
    body = fixture_path(name).read_bytes()
    expected = EXPECTED[name]
    outcome = await stream_body("openai:gpt-4o", body, chunk_size=97)
    assert summarize(outcome.message) == expected["parts"]
    assert outcome.response.finish_reason == expected["finish"]
    usage = outcome.response.usage
    assert (None if usage is None else (usage.input_tokens, usage.output_tokens)) == expected["usage"]
    if expected["error"] is None:
        assert outcome.error is None
    else:
        assert isinstance(outcome.error, ProviderStreamError)
        assert outcome.error.error_type == expected["error"]
        assert outcome.error.partial_message == outcome.message
    # message_end is always the last event and carries the same message.
    assert outcome.events[-1].type == "message_end"
    assert outcome.events[-1].message == outcome.message  # type: ignore[union-attr]


def test_recorded_tool_events_are_in_order_gpt_4o_parallel_2_tools_magentic() -> None:
    body = fixture_path("openai-chat/gpt-4o_parallel-2-tools.magentic.sse").read_bytes()
    result = replay("openai-chat", body)
    kinds = [(e.type, getattr(e, "index", None)) for e in result.events if e.type.startswith("tool_call")]
    starts = [k for k in kinds if k[0] == "tool_call_start"]
    assert starts == [("tool_call_start", 0), ("tool_call_start", 1)]
    assert kinds[-2:] == [("tool_call_end", 0), ("tool_call_end", 1)]
    deltas = [e for e in result.events if isinstance(e, ToolCallDelta)]
    assert "".join(d.arguments_delta for d in deltas if d.index == 0) == '{"a": 2, "b": 3}'
    # The live preview grows toward the final arguments.
    previews = [d.arguments for d in deltas if d.index == 0 and d.arguments is not None]
    assert previews[-1] == {"a": 2, "b": 3}
    assert {"a": 2} in previews


# -- the same stream cut at arbitrary byte boundaries gives the same result -------------------------

RECHUNK_FIXTURES = [
    "openai-chat/gpt-4o_parallel-2-tools.magentic.sse",
    "openai-chat/gpt-4o_text-then-tool.magentic.sse",
    "openai-compatible/zai_glm-4.7_reasoning-text-only.pydantic-ai.sse",
    "openai-compatible/openrouter_minimax_error-midstream.pydantic-ai.sse",
]


def _split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(body[last:p])
        last = p
    pieces.append(body[last:])
    return pieces


def _replay_pieces(pieces: list[bytes]) -> tuple[Any, ...]:
    from toolwire._accumulate import Accumulator
    from toolwire.wire.openai_chat import OpenAIChatParser

    acc = Accumulator(id_factory=counter_ids())
    parser = OpenAIChatParser(acc)
    for piece in pieces:
        parser.feed(piece)
    message = parser.close()
    error = acc.error.error_type if acc.error else None
    return message.to_json(), acc.finish_reason, acc.usage, error


@pytest.mark.parametrize("name", RECHUNK_FIXTURES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=40), crlf=st.booleans())
def test_rechunking_gives_identical_results(name: str, cuts: list[int], crlf: bool) -> None:
    body = fixture_path(name).read_bytes()
    if crlf:
        body = body.replace(b"\n", b"\r\n")
    whole = _replay_pieces([body])
    assert _replay_pieces(_split(body, cuts)) == whole


@settings(max_examples=80, deadline=None)
@given(
    text=st.text(min_size=1, max_size=40),
    args=st.dictionaries(st.text(max_size=8), st.text(max_size=12) | st.integers(-(2**63), 2**63 - 1), max_size=4),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=30),
)
def test_split_inside_utf8_and_escapes_is_lossless(text: str, args: dict[str, Any], cuts: list[int]) -> None:
    # Non-ASCII text and JSON escapes (\n, \", \uXXXX) land across chunk boundaries.
    raw_args = orjson.dumps(args).decode()
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": text}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}]}}]},
        *[{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": raw_args[i:i + 3]}}]}}]}
          for i in range(0, len(raw_args), 3)],
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    message, finish, _, error = _replay_pieces(_split(body, cuts))
    parsed = Message.from_json(message)
    assert error is None and finish == "tool_calls"
    assert parsed.text == text
    assert parsed.tool_calls[0].arguments == args
    assert parsed.tool_calls[0].arguments_raw == raw_args


@settings(max_examples=60, deadline=None)
@given(names=st.lists(st.sampled_from(["lookup", "search", "fetch"]), min_size=1, max_size=6),
       per_chunk=st.integers(min_value=1, max_value=6))
def test_parallel_calls_with_empty_ids_stay_apart(names: list[str], per_chunk: int) -> None:
    # Whole calls with empty ids, several per chunk and all at index 0 (as some compatible hosts send):
    # each is its own call with its own generated id.
    entries = [{"index": 0, "id": "", "type": "function", "function": {"name": n, "arguments": f'{{"n": {i}}}'}}
               for i, n in enumerate(names)]
    chunks = [entries[i:i + per_chunk] for i in range(0, len(entries), per_chunk)]
    body = b"".join(b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"tool_calls": c}}]}) + b"\n\n"
                    for c in chunks)
    body += b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
    message = Message.from_json(_replay_pieces([body])[0])
    calls = message.tool_calls
    assert [c.name for c in calls] == names
    assert [c.arguments for c in calls] == [{"n": i} for i in range(len(names))]
    assert len({c.id for c in calls}) == len(names)


def test_continuation_chunks_join_the_call_at_their_index() -> None:
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in [
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x"'}},
            {"index": 1, "id": "b", "function": {"name": "f", "arguments": '{"y"'}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": ": 2}"}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ])
    message = Message.from_json(_replay_pieces([body])[0])
    assert [(c.id, c.arguments) for c in message.tool_calls] == [("a", {"x": 1}), ("b", {"y": 2})]


def test_a_megabyte_argument_in_five_byte_fragments_is_assembled_exactly() -> None:
    content = "x" * (1 << 20)
    raw = orjson.dumps({"content": content}).decode()
    head = {"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_big", "function": {"name": "write", "arguments": ""}}]}}]}
    parts = [b"data: " + orjson.dumps(head) + b"\n\n"]
    for i in range(0, len(raw), 5):
        frag = orjson.dumps(raw[i:i + 5]).decode()
        parts.append(b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":'
                     + frag.encode() + b"}}]}}]}\n\n")
    parts.append(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n')
    result = replay("openai-chat", b"".join(parts))
    (call,) = result.message.tool_calls
    assert call.arguments == {"content": content}
    assert call.arguments_raw == raw


# -- truncation ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stream_cut_inside_arguments_gives_an_invalid_call_gpt_4o_parallel_2_tools_magentic() -> None:
    body = fixture_path("openai-chat/gpt-4o_parallel-2-tools.magentic.sse").read_bytes()
    cut = body.index(b'"arguments":": 2, "')  # inside the first call's arguments
    outcome = await stream_body("openai:gpt-4o", body[:cut + 30])
    assert isinstance(outcome.error, StreamInterruptedError)
    (part,) = outcome.message.parts
    assert isinstance(part, InvalidToolCallPart)
    assert part.id == "call_8Sp49rZGndlZALo0uq1XvA7A"
    assert part.arguments_raw == '{"a"'
    assert outcome.message.tool_calls == []
    assert outcome.error.partial_message == outcome.message


@pytest.mark.anyio
async def test_stream_cut_before_finish_never_guesses_empty_arguments() -> None:
    # The call started with arguments "" and the stream ended: `{}` would be a guess, so it is invalid.
    body = fixture_path("openai-chat/gpt-4o_parallel-2-tools-empty-args.pydantic-ai.sse").read_bytes()
    cut = body.index(b'"finish_reason":"tool_calls"')
    cut = body.rindex(b"\n\n", 0, cut) + 2
    outcome = await stream_body("openai:gpt-4o", body[:cut])
    assert isinstance(outcome.error, StreamInterruptedError)
    assert outcome.error.error_type == "incomplete_stream"
    assert [p.type for p in outcome.message.parts] == ["invalid_tool_call", "invalid_tool_call"]


def test_length_finish_leaves_the_open_call_invalid() -> None:
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in [
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "function": {"name": "write", "arguments": '{"text": "abc'}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
    ])
    result = replay("openai-chat", body)
    assert result.finish_reason == "length"
    (part,) = result.message.parts
    assert isinstance(part, InvalidToolCallPart)
    assert part.arguments_raw == '{"text": "abc'


def test_arguments_that_are_not_an_object_are_invalid() -> None:
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in [
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "[1, 2]"}},
            {"index": 1, "id": "c2", "function": {"name": "g", "arguments": "null"}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ])
    message = replay("openai-chat", body).message
    assert message.parts[0] == InvalidToolCallPart(
        id="c1", name="f", arguments_raw="[1, 2]", reason=message.parts[0].reason)  # type: ignore[union-attr]
    assert "not an object" in message.parts[0].reason  # type: ignore[union-attr]
    assert message.parts[1] == ToolCallPart(id="c2", name="g", arguments={}, arguments_raw="null")


@pytest.mark.anyio
async def test_dropped_connection_mid_stream_is_a_typed_error_that_keeps_the_text() -> None:
    async def broken() -> Any:
        yield b'data: {"choices":[{"index":0,"delta":{"content":"Hello"}}]}\n\n'
        raise httpx.ReadError("connection reset by peer")

    class Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            async for chunk in broken():
                yield chunk

    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=Body()))
    async with httpx.AsyncClient(transport=transport) as client:
        model = get_model("openai:gpt-4o", api_key="k", http_client=client)
        with pytest.raises(StreamInterruptedError, match="dropped") as info:
            async with model.stream([Message.user("hi")]) as response:
                async for _ in response:
                    pass
    assert info.value.partial_message is not None
    assert info.value.partial_message.text == "Hello"


# -- request mapping ----------------------------------------------------------------------------------

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)

HISTORY = [
    Message.system("Be brief."),
    Message.user("Weather in Boston and Paris?"),
    Message(role="assistant", parts=[
        TextPart(text="Checking both."),
        ToolCallPart(id="call_1", name="get_weather", arguments={"city": "Boston"}, arguments_raw='{"city":"Boston"}'),
        ToolCallPart(id="call_2", name="get_weather", arguments={"city": "Paris"}, arguments_raw='{"city":"Paris"}'),
    ]),
    Message.tool_results([
        ToolResultPart(call_id="call_1", name="get_weather", result={"temp_c": 3}),
        ToolResultPart(call_id="call_2", name="get_weather", result={"error": "service down"}, is_error=True),
    ]),
    Message(role="assistant", parts=[
        ThinkingPart(text="Paris failed; retry."),
        InvalidToolCallPart(id="call_3", name="get_weather", arguments_raw='{"city": "Par', reason="cut off"),
    ]),
    Message.tool_results([
        ToolResultPart(call_id="call_3", name="get_weather", result={"error": "arguments were cut off"},
                       is_error=True),
    ]),
    Message.assistant("Boston is 3 °C; Paris is unavailable."),
    Message.user("Thanks!"),
]


def test_multi_round_history_maps_to_the_documented_request() -> None:
    model = get_model("openai:gpt-4.1-mini", api_key="sk-test")
    url, body, headers = model.build_request(HISTORY, [WEATHER], {"tool_choice": "auto", "parallel_tool_calls": True,
                                                                 "max_tokens": 500})
    assert url == "https://api.openai.com/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test"
    assert body == {
        "model": "gpt-4.1-mini",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Boston and Paris?"},
            {"role": "assistant", "content": "Checking both.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Boston"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c":3}'},
            {"role": "tool", "tool_call_id": "call_2", "content": '{"error":"service down"}'},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_3", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_3", "content": '{"error":"arguments were cut off"}'},
            {"role": "assistant", "content": "Boston is 3 °C; Paris is unavailable."},
            {"role": "user", "content": "Thanks!"},
        ],
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "Current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "max_completion_tokens": 500,
    }


def test_compatible_hosts_are_configuration_with_their_own_conventions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "gsk-env")
    model = get_model("groq:llama-3.3-70b-versatile")
    url, body, headers = model.build_request([Message.user("hi")], [], {"max_tokens": 10, "tool_choice": "required"})
    assert url == "https://api.groq.com/openai/v1/chat/completions"
    assert headers["Authorization"] == "Bearer gsk-env"
    assert body["max_tokens"] == 10 and "max_completion_tokens" not in body
    assert "tool_choice" not in body  # no tools offered, so no tool_choice
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert get_model("openai:gpt-4o", api_key="k").base_url == "http://127.0.0.1:9/v1"
    custom = get_model("openai-compatible:qwen", base_url="http://localhost:8000/v1/")
    assert custom.base_url == "http://localhost:8000/v1" and custom.api_key is None
    forced = get_model("openai:gpt-4o", api_key="k").build_request([Message.user("x")], [WEATHER],
                                                                   {"tool_choice": {"name": "get_weather"}})[1]
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


def test_missing_api_key_is_a_clear_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolwire import UserError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        get_model("openai:gpt-4o")
    with pytest.raises(UserError, match="provider:model"):
        get_model("gpt-4o")
    with pytest.raises(UserError, match="Unknown provider"):
        get_model("nope:model")


def test_a_delta_with_reasoning_text_refusal_and_calls_keeps_their_order() -> None:
    """Deltas usually hold one key; one holding several still gives thinking, text, refusal, then calls."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        payload = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + orjson.dumps(payload) + b"\n\n"

    body = b"".join([
        chunk({"role": "assistant", "content": None, "reasoning_content": "think", "refusal": None}),
        chunk({"reasoning": "more", "content": "Hi", "refusal": " no", "tool_calls": [
            {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a"'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}),
        chunk({"content": "!"}),
        chunk({}, "tool_calls"),
    ])
    result = replay("openai-chat", body)
    kinds = [type(e).__name__ for e in result.events][:6]
    assert kinds == ["ThinkingDelta", "ThinkingDelta", "TextDelta", "TextDelta", "ToolCallStart", "ToolCallDelta"]
    assert result.message.text == "Hi no!"
    assert result.message.metadata["refusal"] is True
    assert [c.arguments for c in result.message.tool_calls] == [{"a": 1}]
