"""Ollama native `/api/chat`: recorded NDJSON through the real HTTP path, re-chunking, truncation,
whole calls, errors and request mapping."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.conftest import fixture_files, fixture_path
from tests.wire.helpers import chunked_transport, parse_in_pieces, stream_body, summarize
from toolwire import (
    FilePart,
    InvalidToolCallPart,
    Message,
    ProviderStreamError,
    StreamInterruptedError,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    Usage,
    UserError,
    get_model,
)
from toolwire._accumulate import Accumulator
from toolwire.wire.ollama import Protocol

SPEC = "ollama:llama3.1"
NDJSON = "application/x-ndjson"
RECORDINGS = fixture_files("ollama", ".ndjson", ".json")

EXPECTED: dict[str, dict[str, Any]] = {
    "ollama/gemma3-1b_text-only-api-chat.langchaingo.ndjson": {
        "parts": [("text", "Okay, here we go!\n\n1, 2, 3, 4, 5\n")],
        "finish": "stop",
        "usage": Usage(input_tokens=16, output_tokens=22),
        "model": "gemma3:1b",
    },
    "ollama/llama3.1_text-only-api-chat.magentic.ndjson": {
        "parts": [("text", "Hello! How can I assist you today?")],
        "finish": "stop",
        "usage": Usage(input_tokens=13, output_tokens=10),
        "model": "llama3.1",
    },
    # Not streamed (stream: false): the whole answer is one done:true line.
    "ollama/gpt-oss-120b_cloud_thinking-and-tool-call_NON-STREAMED.langchaingo.json": {
        "parts": [("thinking", "User asks about weather in San", 66),
                  ("call", "call_mo1wm122", "getWeather", {"location": "San Francisco, CA"},
                   '{"location":"San Francisco, CA"}')],
        "finish": "tool_calls",
        "usage": Usage(input_tokens=145, output_tokens=44),
        "model": "gpt-oss:120b",
    },
}


def test_every_recording_has_expectations() -> None:
    if not RECORDINGS:
        fixture_path("ollama")  # skips, saying why, where the recordings are absent
    assert set(RECORDINGS) == set(EXPECTED)


@pytest.mark.anyio
@pytest.mark.parametrize("name", RECORDINGS)
async def test_recording_replays_through_http(name: str) -> None:
    body = fixture_path(name).read_bytes()
    outcome = await stream_body(SPEC, body, chunk_size=50, content_type=NDJSON)
    expected = EXPECTED[name]
    assert outcome.error is None
    assert summarize(outcome.message) == expected["parts"]
    assert outcome.response.finish_reason == expected["finish"]
    assert outcome.response.usage == expected["usage"]
    assert outcome.message.metadata["model"] == expected["model"]
    text_deltas = [e.text for e in outcome.events if e.type == "text_delta"]
    assert "".join(text_deltas) == outcome.message.text


def line(content: str = "", *, done: bool = False, **message: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"model": "qwen3", "created_at": "2025-01-01T00:00:00Z",
                               "message": {"role": "assistant", "content": content, **message}, "done": done}
    if done:
        payload.update(done_reason="stop", prompt_eval_count=20, eval_count=9)
    return payload


def ndjson(*lines: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


WEATHER = {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
TRICKY = ndjson(
    line(thinking="Deux villes: Zürich et Saint-Étienne 🌍"),
    line(thinking=" — d'accord."),
    line("Je vérifie…"),
    line(tool_calls=[WEATHER, WEATHER, {"id": "call_x", "function": {"index": 2, "name": "get_weather",
                                                                      "arguments": {"city": "Zürich"}}},
                     {"id": "call_x", "function": {"index": 3, "name": "get_weather", "arguments": {}}}]),
    line(done=True),
)


def test_several_calls_in_one_line_stay_distinct_with_unique_ids() -> None:
    message, _, finish, usage, error = parse_in_pieces("ollama", TRICKY, [])
    assert error is None
    assert summarize(message) == [
        ("thinking", "Deux villes: Zürich et Saint-É", 50),
        ("text", "Je vérifie…"),
        ("call", "gen_0", "get_weather", {"city": "Paris"}, '{"city":"Paris"}'),
        ("call", "gen_1", "get_weather", {"city": "Paris"}, '{"city":"Paris"}'),
        ("call", "call_x", "get_weather", {"city": "Zürich"}, '{"city":"Zürich"}'),
        # The same id twice would make the results ambiguous: the second gets its own.
        ("call", "gen_2", "get_weather", {}, "{}"),
    ]
    assert finish == "tool_calls"
    assert usage == Usage(input_tokens=20, output_tokens=9)


BODIES = [(name, fixture_path(name).read_bytes()) for name in RECORDINGS] + [("tricky.ndjson", TRICKY)]


@pytest.mark.parametrize(("name", "body"), BODIES, ids=[name for name, _ in BODIES])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_rechunking_never_changes_the_result(name: str, body: bytes, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=40), label="cuts")
    assert parse_in_pieces("ollama", body, cuts) == parse_in_pieces("ollama", body, [])


@pytest.mark.parametrize(("name", "body"), BODIES, ids=[name for name, _ in BODIES])
def test_byte_at_a_time_gives_the_same_result(name: str, body: bytes) -> None:
    assert parse_in_pieces("ollama", body, list(range(len(body)))) == parse_in_pieces("ollama", body, [])


@pytest.mark.anyio
async def test_stream_cut_before_done_keeps_the_text() -> None:
    body = fixture_path("ollama/llama3.1_text-only-api-chat.magentic.ndjson").read_bytes()
    lines = body.splitlines(keepends=True)
    outcome = await stream_body(SPEC, b"".join(lines[:-1]) + lines[-1][:30], content_type=NDJSON)
    assert isinstance(outcome.error, StreamInterruptedError)
    assert outcome.error.error_type == "incomplete_stream"
    assert outcome.message.text == "Hello! How can I assist you today?"
    assert outcome.response.usage is None


def test_calls_before_a_cut_stay_runnable() -> None:
    """Ollama sends each call whole, so a call that arrived is complete even if the stream then breaks."""
    message, _, _, _, error = parse_in_pieces("ollama", TRICKY[: TRICKY.rindex(b'{"model"')], [])
    assert error is not None and error.error_type == "incomplete_stream"
    assert [p.type for p in message.parts] == ["thinking", "text", "tool_call", "tool_call", "tool_call", "tool_call"]


@pytest.mark.anyio
async def test_error_line_is_an_error_finish() -> None:
    body = ndjson(line("Partial"), {"error": "an error was encountered while running the model: unexpected EOF"})
    outcome = await stream_body(SPEC, body, content_type=NDJSON)
    assert isinstance(outcome.error, ProviderStreamError)
    assert str(outcome.error) == ("Ollama reported an error in the stream: an error was encountered while running "
                                  "the model: unexpected EOF")
    assert outcome.message.text == "Partial"


@pytest.mark.parametrize(("raw", "reason"), [("stop", "stop"), ("length", "length"), ("load", "stop"),
                                             ("unload", "stop"), (None, "stop")])
def test_done_reasons(raw: str | None, reason: str) -> None:
    last = line(done=True)
    last["done_reason"] = raw
    _, _, finish, _, error = parse_in_pieces("ollama", ndjson(line("Hi"), last), [])
    assert (finish, error) == (reason, None)


def test_a_line_that_is_not_json_is_a_malformed_chunk() -> None:
    _, _, _, _, error = parse_in_pieces("ollama", ndjson(line("Hi")) + b"<html>502 Bad Gateway</html>\n", [])
    assert error is not None and error.error_type == "malformed_chunk"


# -- requests ------------------------------------------------------------------------------------


TOOLS = [ToolDefinition(name="get_weather", description="Weather for a city.",
                        parameters={"type": "object", "properties": {"city": {"type": "string"}},
                                    "required": ["city"]})]


def build(messages: list[Message], **settings_: Any) -> dict[str, Any]:
    return Protocol().build_request("qwen3", messages, TOOLS, settings_)  # type: ignore[arg-type]


def test_multi_round_history_maps_exactly() -> None:
    history = [
        Message.system("Be brief."),
        Message(role="user", parts=[TextPart(text="Weather in Paris and Rome? "),
                                    FilePart(media_type="image/png", data="iVBORw0KGgo="),
                                    TextPart(text="(map attached)"),
                                    FilePart(media_type="image/jpeg", url="data:image/jpeg;base64,/9j/4AAQ")]),
        Message(role="assistant", parts=[
            ThinkingPart(text="Two cities.", signature="anthropic-sig", provider_data={"anthropic": {}}),
            ThinkingPart(text="", redacted=True, provider_data={"anthropic": {"data": "opaque"}}),
            TextPart(text="Checking."),
            ToolCallPart(id="c1", name="get_weather", arguments={"city": "Paris"}, arguments_raw='{"city":"Paris"}'),
            ToolCallPart(id="c2", name="get_weather", arguments={"city": "Rome"}, arguments_raw='{"city":"Rome"}'),
            InvalidToolCallPart(id="c3", name="get_weather", arguments_raw='{"city": "Na', reason="cut"),
        ]),
        Message.tool_results([
            ToolResultPart(call_id="c3", name="get_weather", result="The arguments were cut off.", is_error=True),
            ToolResultPart(call_id="c2", name="get_weather", result={"sky": "sunny"}),
            ToolResultPart(call_id="c1", name="", result="18°C"),
        ]),
        Message.assistant("Paris 18°C, Rome sunny."),
        Message.user("Thanks!"),
    ]
    body = build(history, max_tokens=128, temperature=0.0, top_p=0.5, stop=["END"], thinking="high",
                 output_schema={"name": "answer", "schema": {"type": "object"}}, extra_body={"keep_alive": "5m"})
    assert body == {
        "model": "qwen3",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris and Rome? (map attached)",
             "images": ["iVBORw0KGgo=", "/9j/4AAQ"]},
            {"role": "assistant", "content": "Checking.", "thinking": "Two cities.", "tool_calls": [
                {"id": "c1", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"id": "c2", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}},
                {"id": "c3", "function": {"name": "get_weather", "arguments": {}}},
            ]},
            # One tool message per result, in the order of the calls.
            {"role": "tool", "content": "18°C", "tool_name": "get_weather", "tool_call_id": "c1"},
            {"role": "tool", "content": '{"sky":"sunny"}', "tool_name": "get_weather", "tool_call_id": "c2"},
            {"role": "tool", "content": "Error: The arguments were cut off.", "tool_name": "get_weather",
             "tool_call_id": "c3"},
            {"role": "assistant", "content": "Paris 18°C, Rome sunny."},
            {"role": "user", "content": "Thanks!"},
        ],
        "stream": True,
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "options": {"num_predict": 128, "temperature": 0.0, "top_p": 0.5, "stop": ["END"]},
        "think": "high",
        "format": {"type": "object"},
        "keep_alive": "5m",
    }


def test_parsed_answer_goes_back_as_the_same_assistant_message() -> None:
    name = "ollama/gpt-oss-120b_cloud_thinking-and-tool-call_NON-STREAMED.langchaingo.json"
    recorded = orjson.loads(fixture_path(name).read_bytes())["message"]
    acc = Accumulator()
    parser = Protocol().new_parser(acc)
    parser.feed(fixture_path(name).read_bytes())
    answer = parser.close()
    sent = build([Message.user("What's the weather like in San Francisco?"), answer])["messages"][1]
    assert sent == {
        "role": "assistant", "content": recorded["content"], "thinking": recorded["thinking"],
        "tool_calls": [{"id": "call_mo1wm122", "function": {"name": "getWeather",
                                                            "arguments": {"location": "San Francisco, CA"}}}],
    }


@pytest.mark.parametrize(("thinking", "think"), [(True, True), (False, False), (2048, True), (0, False),
                                                 ("low", "low")])
def test_thinking_setting(thinking: Any, think: Any) -> None:
    assert build([Message.user("hi")], thinking=thinking)["think"] == think


def test_tool_choice_none_leaves_the_tools_out() -> None:
    assert "tools" not in build([Message.user("hi")], tool_choice="none")
    assert "tools" in build([Message.user("hi")], tool_choice="auto")


def test_images_by_url_and_other_files_are_refused_with_a_clear_error() -> None:
    with pytest.raises(UserError, match="Ollama takes image files only inline, not by URL"):
        build([Message(role="user", parts=[FilePart(media_type="image/png", url="https://example.com/a.png")])])
    with pytest.raises(UserError, match="Ollama cannot take an application/pdf file in a message: it accepts images"):
        build([Message(role="user", parts=[FilePart(media_type="application/pdf", data="JVBERi0=")])])


@pytest.mark.anyio
async def test_request_goes_to_api_chat_without_auth_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:11500")
    seen: list[httpx.Request] = []
    body = fixture_path("ollama/llama3.1_text-only-api-chat.magentic.ndjson").read_bytes()
    async with httpx.AsyncClient(transport=chunked_transport(body, seen=seen, content_type=NDJSON)) as client:
        message = await get_model(SPEC, http_client=client).request([Message.user("Say hello!")])
    assert message.text == "Hello! How can I assist you today?"
    request = seen[0]
    assert str(request.url) == "http://127.0.0.1:11500/api/chat"
    assert request.headers["accept"] == NDJSON
    assert "authorization" not in request.headers
    assert orjson.loads(request.content) == {"model": "llama3.1", "messages": [{"role": "user", "content": "Say hello!"}],
                                             "stream": True}


def test_ollama_cloud_key_is_sent_as_bearer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", "secret")
    _, _, headers = get_model("ollama:gpt-oss:120b", base_url="https://ollama.com").build_request([Message.user("hi")])
    assert headers["Authorization"] == "Bearer secret"
