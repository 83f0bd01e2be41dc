"""Anthropic Messages: what a history and settings become in the request, and what must round-trip unchanged."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

from tests.wire.test_anthropic import (
    HAIKU_TEXT,
    HAIKU_THINKING,
    REDACTED_1,
    REDACTED_2,
    REDACTED_TEXT,
    SONNET_REDACTED,
    SONNET_WEB_SEARCH,
    THINKING_MARK,
    THINKING_SIGNATURE,
    THINKING_TEXT,
    WEATHER_TOOL,
    call,
    parse_pieces,
    read_fixture,
    split_events,
    stream,
    uses,
)
from toolwire.events import (
    ProviderToolEvent,
)
from toolwire.exceptions import UserError
from toolwire.messages import (
    FilePart,
    InvalidToolCallPart,
    Message,
    ProviderToolPart,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    dump_messages,
    load_messages,
)
from toolwire.settings import ModelSettings
from toolwire.tools import ToolDefinition
from toolwire.wire.anthropic import Protocol, map_call_id


def multi_round_history() -> list[Message]:
    return [
        Message.system("You answer weather questions."),
        Message.user("What's the weather in Paris and in Tokyo?"),
        Message(role="assistant", parts=[
            ThinkingPart(text="I need the weather for both cities.", signature="sig-round-1",
                         provider_data=THINKING_MARK),
            TextPart(text="Let me check both cities."),
            call("toolu_paris", "get_weather", '{"city": "Paris"}'),
            call("toolu_tokyo", "get_weather", '{"city": "Tokyo"}'),
        ]),
        Message.tool_results([
            ToolResultPart(call_id="toolu_paris", name="get_weather", result={"temp_c": 18, "sky": "cloudy"}),
            ToolResultPart(call_id="toolu_tokyo", name="get_weather", result="The weather service timed out.",
                           is_error=True),
        ]),
        Message.assistant("Paris is 18 °C and cloudy; Tokyo's weather is unavailable right now."),
        Message.user("Try Tokyo again, please."),
    ]


MULTI_ROUND_REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 8192,
    "stream": True,
    "system": "You answer weather questions.",
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "tools": [{
        "name": "get_weather",
        "description": "Current weather for a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }],
    "tool_choice": {"type": "auto"},
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "What's the weather in Paris and in Tokyo?"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I need the weather for both cities.", "signature": "sig-round-1"},
            {"type": "text", "text": "Let me check both cities."},
            {"type": "tool_use", "id": "toolu_paris", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_tokyo", "name": "get_weather", "input": {"city": "Tokyo"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_paris", "content": '{"temp_c":18,"sky":"cloudy"}'},
            {"type": "tool_result", "tool_use_id": "toolu_tokyo", "content": "The weather service timed out.",
             "is_error": True},
        ]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Paris is 18 °C and cloudy; Tokyo's weather is unavailable right now."}]},
        {"role": "user", "content": [{"type": "text", "text": "Try Tokyo again, please."}]},
    ],
}


@pytest.mark.anyio
@uses(HAIKU_TEXT)
async def test_multi_round_history_request_is_exactly_the_documented_json(name: str) -> None:
    outcome = await stream(split_events(read_fixture(name)), multi_round_history(), tools=[WEATHER_TOOL],
                           model_settings={"thinking": 2048, "max_tokens": 8192, "tool_choice": "auto"})
    (request,) = outcome.requests
    assert orjson.loads(request.content) == MULTI_ROUND_REQUEST


def test_history_survives_json_storage_before_mapping() -> None:
    stored = load_messages(dump_messages(multi_round_history()))
    body = Protocol().build_request("claude-sonnet-4-5", stored, [WEATHER_TOOL],
                                    {"thinking": 2048, "max_tokens": 8192, "tool_choice": "auto"})
    assert body == MULTI_ROUND_REQUEST


@pytest.mark.anyio
@uses(HAIKU_THINKING)
async def test_thinking_signature_round_trips_before_the_tool_use(name: str) -> None:
    first = await stream(split_events(read_fixture(name)))
    assistant = load_messages(dump_messages([first.message]))[0]  # as an application would store it
    call = assistant.tool_calls[0]
    history = [
        Message.user("Use the fixed_version tool."),
        assistant,
        Message.tool_results([ToolResultPart(call_id=call.id, name=call.name, result="1.2.3")]),
    ]
    second = await stream(split_events(read_fixture(HAIKU_TEXT)), history, model_settings={"thinking": 1024})
    body = orjson.loads(second.requests[0].content)
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": THINKING_TEXT, "signature": THINKING_SIGNATURE},
        {"type": "tool_use", "id": "toolu_01825dXWLSoJwCst1qTsiWdb", "name": "fixed_version", "input": {}},
    ]}
    assert body["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01825dXWLSoJwCst1qTsiWdb", "content": "1.2.3"}]}
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["max_tokens"] == 4096 + 1024


@pytest.mark.anyio
@uses(SONNET_REDACTED)
async def test_redacted_thinking_round_trips_unchanged(name: str) -> None:
    first = await stream(split_events(read_fixture(name)))
    history = [Message.user("magic string"), first.message, Message.user("And now?")]
    body = Protocol().build_request("claude-sonnet-4-5", history, [], {})
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "redacted_thinking", "data": REDACTED_1},
        {"type": "redacted_thinking", "data": REDACTED_2},
        {"type": "text", "text": REDACTED_TEXT},
    ]}


def _raw_blocks(name: str) -> dict[int, dict[str, Any]]:
    """The `content_block_start` blocks of a recording, read straight from its data lines."""
    blocks: dict[int, dict[str, Any]] = {}
    for line in read_fixture(name).splitlines():
        if line.startswith(b"data:"):
            payload = orjson.loads(line[5:])
            if payload["type"] == "content_block_start":
                blocks[payload["index"]] = payload["content_block"]
    return blocks


@uses(SONNET_WEB_SEARCH)
def test_server_tool_blocks_are_sent_back_as_they_came(name: str) -> None:
    _, message = parse_pieces([read_fixture(name)])
    raw = _raw_blocks(name)
    body = Protocol().build_request("claude-sonnet-4-0", [Message.user("news"), message], [], {})
    content = body["messages"][1]["content"]
    assert [b["type"] for b in content] == ["server_tool_use", "web_search_tool_result", "text",
                                            "server_tool_use", "web_search_tool_result", "text"]
    assert content[0] == {**raw[0], "input": {"query": "top world news today"}}
    assert content[1] == raw[1]
    assert content[3] == {**raw[3], "input": {"query": "breaking news headlines August 14 2025"}}
    assert content[4] == raw[4]
    assert raw[1]["content"][0]["encrypted_content"]  # the opaque blobs are what the API needs back


@uses(SONNET_WEB_SEARCH)
def test_server_tool_events_show_progress(name: str) -> None:
    events, _ = parse_pieces([read_fixture(name)])
    first = [e.part for e in events if isinstance(e, ProviderToolEvent) and e.part.id.endswith("8wGY")]
    assert [(p.status, p.arguments, p.result is not None) for p in first] == [
        ("in_progress", None, False),
        ("in_progress", {"query": "top world news today"}, False),
        ("completed", {"query": "top world news today"}, True),
    ]


def test_other_providers_opaque_parts_are_dropped_and_ids_mapped() -> None:
    odd_id = "functions.get_weather:0"
    history = [
        Message.user("Weather in Paris?"),
        Message(role="assistant", parts=[
            ThinkingPart(text="Gemini thought.", signature="gemini-signature", provider_data={"gemini": {"x": 1}}),
            ThinkingPart(text="Chat-completions reasoning without a signature."),
            ThinkingPart(text="Signed but unmarked.", signature="not-from-anthropic"),
            ProviderToolPart(id="ws_1", name="web_search", provider="openai-responses",
                             provider_data={"openai-responses": {"item": {"id": "ws_1"}}}),
            call(odd_id, "get_weather", '{"city": "Paris"}'),
            InvalidToolCallPart(id="call 2", name="get_weather", arguments_raw='{"ci', reason="cut"),
        ]),
        Message.tool_results([
            ToolResultPart(call_id=odd_id, name="get_weather", result="sunny"),
            ToolResultPart(call_id="call 2", name="get_weather", result="The arguments were cut off.",
                           is_error=True),
        ]),
        Message(role="assistant", parts=[ThinkingPart(text="only a foreign thought", signature="x",
                                                      provider_data={"openai-responses": {}})]),
        Message.user("Thanks!"),
    ]
    body = Protocol().build_request("claude-sonnet-4-5", history, [WEATHER_TOOL], {})
    mapped_id, mapped_2 = map_call_id(odd_id), map_call_id("call 2")
    assert re.fullmatch(r"[a-zA-Z0-9_-]+", mapped_id)
    assert re.fullmatch(r"[a-zA-Z0-9_-]+", mapped_2)
    assert mapped_id != map_call_id("functions.get_weather_0")  # a valid id that looks alike stays distinct
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": mapped_id, "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": mapped_2, "name": "get_weather", "input": {}},
        ]},
        # The assistant message that held only foreign thinking is gone, so both user messages merge.
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": mapped_id, "content": "sunny"},
            {"type": "tool_result", "tool_use_id": mapped_2, "content": "The arguments were cut off.",
             "is_error": True},
            {"type": "text", "text": "Thanks!"},
        ]},
    ]


def test_unsigned_anthropic_thinking_from_a_cut_stream_is_not_sent() -> None:
    history = [Message.user("q"), Message(role="assistant", parts=[
        ThinkingPart(text="cut before the signature", provider_data=THINKING_MARK), TextPart(text="partial")])]
    body = Protocol().build_request("m", history, [], {})
    assert body["messages"][1]["content"] == [{"type": "text", "text": "partial"}]


def test_results_open_the_merged_user_message_and_empty_text_is_skipped() -> None:
    history = [
        Message.user("q"),
        Message(role="assistant", parts=[TextPart(text=""), call("toolu_a", "f", "")]),
        Message(role="user", parts=[TextPart(text="Here is the result:"), TextPart(text=""),
                                    ToolResultPart(call_id="toolu_a", name="f", result=[1, 2]),
                                    ToolResultPart(call_id="toolu_b", name="f", result="")]),
    ]
    body = Protocol().build_request("m", history, [], {})
    assert body["messages"][1:] == [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "[1,2]"},
            {"type": "tool_result", "tool_use_id": "toolu_b"},
            {"type": "text", "text": "Here is the result:"},
        ]},
    ]


def test_several_system_messages_join_into_the_top_level_system() -> None:
    history = [Message.system("Be brief."), Message.user("q"), Message.system("Answer in French.")]
    body = Protocol().build_request("m", history, [], {})
    assert body["system"] == "Be brief.\n\nAnswer in French."
    assert [m["role"] for m in body["messages"]] == ["user"]


@pytest.mark.parametrize(
    ("model_settings", "expected"),
    [
        ({}, None),
        ({"tool_choice": "auto"}, {"type": "auto"}),
        ({"tool_choice": "required"}, {"type": "any"}),
        ({"tool_choice": "none"}, {"type": "none"}),
        ({"tool_choice": {"name": "get_weather"}}, {"type": "tool", "name": "get_weather"}),
        ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
        ({"parallel_tool_calls": True}, None),
        ({"tool_choice": "required", "parallel_tool_calls": False}, {"type": "any", "disable_parallel_tool_use": True}),
        ({"tool_choice": {"name": "get_weather"}, "parallel_tool_calls": False},
         {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}),
    ],
)
def test_tool_choice_mapping(model_settings: ModelSettings, expected: dict[str, Any] | None) -> None:
    body = Protocol().build_request("m", [Message.user("q")], [WEATHER_TOOL], model_settings)
    assert body.get("tool_choice") == expected
    no_tools = Protocol().build_request("m", [Message.user("q")], [], model_settings)
    assert "tool_choice" not in no_tools
    assert "tools" not in no_tools


@pytest.mark.parametrize(
    ("model_settings", "thinking", "max_tokens"),
    [
        ({}, None, 4096),
        ({"max_tokens": 500}, None, 500),
        ({"thinking": True}, {"type": "enabled", "budget_tokens": 4096}, 8192),
        ({"thinking": 2000}, {"type": "enabled", "budget_tokens": 2000}, 6096),
        ({"thinking": 2000, "max_tokens": 3000}, {"type": "enabled", "budget_tokens": 2000}, 3000),
        ({"thinking": "high"}, {"type": "enabled", "budget_tokens": 16384}, 20480),
        ({"thinking": False}, None, 4096),
        ({"thinking": 0}, None, 4096),
    ],
)
def test_thinking_and_max_tokens(model_settings: ModelSettings, thinking: dict[str, Any] | None,
                                 max_tokens: int) -> None:
    body = Protocol().build_request("m", [Message.user("q")], [], model_settings)
    assert body.get("thinking") == thinking
    assert body["max_tokens"] == max_tokens


@pytest.mark.parametrize(
    ("model_settings", "message"),
    [
        ({"thinking": 2000, "max_tokens": 2000}, "must be larger than the thinking budget"),
        ({"thinking": 500}, "at least 1024 tokens"),
        ({"thinking": "extreme"}, "does not understand the thinking effort"),
        ({"tool_choice": "sometimes"}, "Unknown tool_choice"),  # type: ignore[typeddict-item]
    ],
)
def test_bad_settings_raise_user_errors(model_settings: ModelSettings, message: str) -> None:
    with pytest.raises(UserError, match=message):
        Protocol().build_request("m", [Message.user("q")], [WEATHER_TOOL], model_settings)


def test_sampling_stop_sequences_output_schema_and_extra_body() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    body = Protocol().build_request(
        "m", [Message.user("q")], [ToolDefinition(name="t", parameters={"type": "object"}, strict=True)],
        {"temperature": 0.2, "top_p": 0.9, "stop": ["END"], "output_schema": {"name": "out", "schema": schema},
         "extra_body": {"metadata": {"user_id": "u1"}}},
    )
    assert body["temperature"] == 0.2
    assert body["top_p"] == 0.9
    assert body["stop_sequences"] == ["END"]
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert body["metadata"] == {"user_id": "u1"}
    assert body["tools"] == [{"name": "t", "input_schema": {"type": "object"}, "strict": True}]


def test_files_map_to_image_and_document_blocks() -> None:
    message = Message(role="user", parts=[
        TextPart(text="Look:"),
        FilePart(media_type="image/png", data="iVBORw0KGgo="),
        FilePart(media_type="image/jpeg", url="https://example.com/cat.jpg"),
        FilePart(media_type="application/pdf", data="JVBERi0=", name="report.pdf"),
        FilePart(media_type="text/plain", data="aGVsbG8gd29ybGQ=", name="notes.txt"),
    ])
    body = Protocol().build_request("m", [message], [], {})
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "Look:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
         "title": "report.pdf"},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello world"},
         "title": "notes.txt"},
    ]
    with pytest.raises(UserError, match="audio/wav"):
        Protocol().build_request("m", [Message(role="user", parts=[FilePart(media_type="audio/wav", data="AA==")])],
                                 [], {})
