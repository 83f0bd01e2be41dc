"""Mistral: recorded streams over HTTP, re-chunking, truncation, and request mapping with id rewriting."""

from __future__ import annotations

import re
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
    get_model,
)
from toolwire._accumulate import Accumulator
from toolwire.events import Event, ToolCallEnd
from toolwire.wire.mistral import MistralParser, Protocol, map_call_ids, mistral_call_id

MODEL = "mistral:mistral-large-latest"
MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")

# Read off each recording by hand: the parts it must assemble into (long texts as prefix + length),
# the finish reason and the (input, output) token counts of its finish chunk.
EXPECTED: dict[str, dict[str, Any]] = {
    "mistral/magistral-medium_thinking-text-only.pydantic-ai.sse": {
        "parts": [("thinking", "Okay, the user is asking how t", 421),
                  ("text_prefix", "To cross the street safely, follow these steps:\n\n1. Look both ways", 607)],
        "finish": "stop", "usage": (10, 232),
    },
    "mistral/mistral-large_parallel-2-tools-one-chunk.magentic.sse": {
        "parts": [("call", "nqjf8Hqe1", "plus", {"a": 1, "b": 2}, '{"a": 1, "b": 2}'),
                  ("call", "ATcpCKul3", "minus", {"a": 2, "b": 1}, '{"a": 2, "b": 1}')],
        "finish": "tool_calls", "usage": (187, 45),
    },
    "mistral/mistral-large_single-tool.magentic.sse": {
        "parts": [("call", "x2LypFllt", "plus", {"a": 1, "b": 2}, '{"a": 1, "b": 2}')],
        "finish": "tool_calls", "usage": (93, 24),
    },
    "mistral/mistral-small_hybrid-reasoning-text-only.ruby_llm.sse": {
        "parts": [("thinking", "The user is asking for the pro", 174), ("text", "144")],
        "finish": "stop", "usage": (31, 66),
    },
    "mistral/mistral-small_text-only.ruby_llm.sse": {
        "parts": [("text", "1, 2, 3")],
        "finish": "stop", "usage": (22, 8),
    },
}


def _view(message: Message) -> list[tuple[Any, ...]]:
    view = summarize(message)
    for i, part in enumerate(message.parts):
        if isinstance(part, TextPart) and len(part.text) > 100:
            view[i] = ("text_prefix", part.text[:66], len(part.text))
    return view


def test_every_mistral_recording_has_expectations() -> None:
    if not FIXTURES.is_dir():
        pytest.skip(f"the recorded provider fixtures ({FIXTURES}) are not present in this checkout")
    assert set(fixture_files("mistral", ".sse", ".chunks.jsonl")) == set(EXPECTED)


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_recorded_stream_over_http(name: str) -> None:
    expected = EXPECTED[name]
    outcome = await stream_body(MODEL, recorded_body(name), chunk_size=61)
    assert outcome.error is None
    assert _view(outcome.message) == expected["parts"]
    assert outcome.response.finish_reason == expected["finish"]
    usage = outcome.response.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == expected["usage"]
    assert outcome.message.metadata["provider"] == "mistral"
    assert outcome.message.metadata["response_id"]
    # Thinking read from Mistral is marked so it can be sent back to Mistral.
    for part in outcome.message.parts:
        if isinstance(part, ThinkingPart):
            assert part.provider_data == {"mistral": {"type": "thinking"}}
    assert outcome.events[-1].type == "message_end"


@pytest.mark.anyio
async def test_request_goes_to_chat_completions_with_bearer_auth() -> None:
    seen: list[httpx.Request] = []
    body = recorded_body("mistral/mistral-small_text-only.ruby_llm.sse")
    async with httpx.AsyncClient(transport=chunked_transport(body, seen=seen)) as client:
        model = get_model(MODEL, api_key="test", http_client=client)
        async with model.stream([Message.user("Count from 1 to 3")], settings={"max_tokens": 20}) as response:
            events = [e async for e in response]
    assert events[-1].type == "message_end"
    assert str(seen[0].url) == "https://api.mistral.ai/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer test"
    sent = orjson.loads(seen[0].content)
    assert sent == {"model": "mistral-large-latest", "messages": [{"role": "user", "content": "Count from 1 to 3"}],
                    "stream": True, "max_tokens": 20}


def test_parallel_calls_in_one_delta_end_at_the_finish_chunk_mistral_large_parallel() -> None:
    events = _parse([recorded_body("mistral/mistral-large_parallel-2-tools-one-chunk.magentic.sse")])[1]
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [(e.index, e.call.id) for e in ends] == [(0, "nqjf8Hqe1"), (1, "ATcpCKul3")]
    kinds = [e.type for e in events]
    assert kinds.index("tool_call_end") < kinds.index("finish")


# -- parser cases not covered by a recording ---------------------------------------------------------

def _sse(*chunks: dict[str, Any], done: bool = True) -> bytes:
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    return body + (b"data: [DONE]\n\n" if done else b"")


def _delta(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": "r1", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def _parse(pieces: list[bytes]) -> tuple[Message, list[Event], Accumulator]:
    acc = Accumulator(id_factory=counter_ids())
    parser = MistralParser(acc)
    events: list[Event] = []
    for piece in pieces:
        parser.feed(piece)
        events.extend(acc.events)
        acc.events.clear()
    message = parser.close()
    events.extend(acc.events)
    return message, events, acc


def test_whole_calls_without_index_in_separate_deltas_stay_apart() -> None:
    body = _sse(
        _delta({"tool_calls": [{"id": "aaaaaaaa1", "function": {"name": "f", "arguments": '{"x": 1}'}}]}),
        _delta({"tool_calls": [{"id": "aaaaaaaa2", "function": {"name": "f", "arguments": '{"x": 2}'}}]}),
        _delta({}, "tool_calls", usage={"prompt_tokens": 3, "completion_tokens": 4}, p="abc"),
    )
    message = _parse([body])[0]
    assert [(c.id, c.arguments) for c in message.tool_calls] == [("aaaaaaaa1", {"x": 1}), ("aaaaaaaa2", {"x": 2})]


def test_content_list_mixing_thinking_and_text_in_one_delta() -> None:
    body = _sse(
        _delta({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "hmm "}]},
                            {"type": "thinking", "thinking": [{"type": "text", "text": "ok"}], "closed": True},
                            {"type": "text", "text": "Answer"}]}),
        _delta({"content": " done"}, "stop"),
    )
    message = _parse([body])[0]
    assert message.parts == [ThinkingPart(text="hmm ok", provider_data={"mistral": {"type": "thinking"}}),
                             TextPart(text="Answer done")]


def test_error_finish_is_a_provider_error() -> None:
    message, _, acc = _parse([_sse(_delta({"content": "partial"}), _delta({}, "error"))])
    assert acc.finish_reason == "error"
    assert acc.error is not None and acc.error.error_type == "provider_error"
    assert message.text == "partial"


@pytest.mark.anyio
async def test_error_finish_raises_provider_stream_error_over_http() -> None:
    outcome = await stream_body(MODEL, _sse(_delta({"content": "partial"}), _delta({}, "error")))
    assert isinstance(outcome.error, ProviderStreamError)
    assert outcome.error.partial_message is not None
    assert outcome.error.partial_message.text == "partial"


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
    # Deltas may not be merged or split differently: the event sequence is the same.
    assert [e.type for e in piece_events] == [e.type for e in whole_events]


# -- truncation ----------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_calls_cut_before_the_finish_reason_are_invalid() -> None:
    # Mistral has no per-call completion signal: calls are complete only at the finish chunk.
    body = _sse(
        _delta({"content": "Let me add."}),
        _delta({"tool_calls": [{"id": "abcdefgh1", "function": {"name": "plus", "arguments": '{"a": 1, "b": 2}'}}]}),
        done=False,
    )
    outcome = await stream_body(MODEL, body)
    assert isinstance(outcome.error, StreamInterruptedError)
    assert outcome.error.error_type == "incomplete_stream"
    partial = outcome.error.partial_message
    assert partial is not None
    assert partial.text == "Let me add."
    assert partial.tool_calls == []
    assert [(p.id, p.name, p.arguments_raw) for p in partial.invalid_tool_calls] == [
        ("abcdefgh1", "plus", '{"a": 1, "b": 2}')]


@pytest.mark.anyio
async def test_recording_cut_mid_chunk_keeps_what_was_streamed_magistral_medium_thinking() -> None:
    body = recorded_body("mistral/magistral-medium_thinking-text-only.pydantic-ai.sse")
    cut = body.index(b'"content":"To"') + 5  # inside the first text chunk's JSON
    outcome = await stream_body(MODEL, body[:cut], chunk_size=500)
    assert isinstance(outcome.error, StreamInterruptedError)
    partial = outcome.error.partial_message
    assert partial is not None
    assert [p.type for p in partial.parts] == ["thinking"]
    assert len(partial.parts[0].text) == 421  # type: ignore[union-attr]


# -- requests -----------------------------------------------------------------------------------------

OPENAI_ID = "call_8Sp49rZGndlZALo0uq1XvA7A"
ANTHROPIC_ID = "toolu_01RZjXFQrWsHfYXHPYqX6mA7"
MISTRAL_NATIVE_ID = "x2LypFllt"
# The hash-derived replacements, pinned: a change here would break conversations already stored.
OPENAI_ID_MAPPED = "BoBTPwNoZ"
ANTHROPIC_ID_MAPPED = "GkL1ZMZ3z"
BROKEN_ID_MAPPED = "yh1bLwdOd"

TOOLS = [ToolDefinition(name="plus", description="Sum two numbers.",
                        parameters={"type": "object", "properties": {"a": {"type": "integer"}}})]


def _history() -> list[Message]:
    return [
        Message.system("Be brief."),
        Message.user("Add 1 and 2, and look up the weather."),
        # Round 1 came from OpenAI (long call_ ids) and Anthropic (toolu_ ids, signed thinking).
        Message(role="assistant", parts=[
            ThinkingPart(text="I should call both.", signature="sig-from-anthropic",
                         provider_data={"anthropic": {}}),
            TextPart(text="Calling tools."),
            ToolCallPart(id=OPENAI_ID, name="plus", arguments={"a": 1}, arguments_raw='{"a": 1}'),
            ToolCallPart(id=ANTHROPIC_ID, name="weather", arguments={}, arguments_raw=""),
        ]),
        Message.tool_results([
            ToolResultPart(call_id=OPENAI_ID, name="plus", result=3),
            ToolResultPart(call_id=ANTHROPIC_ID, name="weather", result="sunny"),
        ]),
        # Round 2 came from Mistral itself: its thinking goes back, its id stays.
        Message(role="assistant", parts=[
            ThinkingPart(text="Now add again.", provider_data={"mistral": {"type": "thinking"}}),
            ToolCallPart(id=MISTRAL_NATIVE_ID, name="plus", arguments={"a": 3}, arguments_raw='{"a": 3}'),
            InvalidToolCallPart(id="call_broken", name="plus", arguments_raw='{"a": ', reason="cut"),
        ]),
        Message.tool_results([
            ToolResultPart(call_id=MISTRAL_NATIVE_ID, name="plus", result={"sum": 6}),
            ToolResultPart(call_id="call_broken", name="plus", result="invalid arguments", is_error=True),
        ]),
        Message.assistant("Done: 6, sunny."),
        Message.user("Thanks!"),
    ]


def test_multi_round_history_maps_to_exact_json_with_valid_ids() -> None:
    model = get_model(MODEL, api_key="test")
    url, body, headers = model.build_request(_history(), TOOLS, {
        "max_tokens": 100, "temperature": 0.2, "top_p": 0.9, "stop": ["END"], "tool_choice": "required",
        "parallel_tool_calls": False, "thinking": True,
    })
    broken = BROKEN_ID_MAPPED
    assert url == "https://api.mistral.ai/v1/chat/completions"
    assert headers["Authorization"] == "Bearer test"
    assert body == {
        "model": "mistral-large-latest",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Add 1 and 2, and look up the weather."},
            {"role": "assistant", "content": "Calling tools.", "tool_calls": [
                {"id": OPENAI_ID_MAPPED, "type": "function", "function": {"name": "plus", "arguments": '{"a": 1}'}},
                {"id": ANTHROPIC_ID_MAPPED, "type": "function", "function": {"name": "weather", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": OPENAI_ID_MAPPED, "name": "plus", "content": "3"},
            {"role": "tool", "tool_call_id": ANTHROPIC_ID_MAPPED, "name": "weather", "content": "sunny"},
            {"role": "assistant",
             "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Now add again."}]}],
             "tool_calls": [
                 {"id": "x2LypFllt", "type": "function", "function": {"name": "plus", "arguments": '{"a": 3}'}},
                 {"id": broken, "type": "function", "function": {"name": "plus", "arguments": "{}"}},
             ]},
            {"role": "tool", "tool_call_id": "x2LypFllt", "name": "plus", "content": '{"sum":6}'},
            {"role": "tool", "tool_call_id": broken, "name": "plus", "content": "invalid arguments"},
            {"role": "assistant", "content": "Done: 6, sunny."},
            {"role": "user", "content": "Thanks!"},
        ],
        "stream": True,
        "tools": [{"type": "function", "function": {
            "name": "plus", "description": "Sum two numbers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "max_tokens": 100,
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": ["END"],
        "reasoning_effort": "high",
    }
    ids = [c["id"] for m in body["messages"] for c in m.get("tool_calls", ())]
    ids += [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    assert all(MISTRAL_ID.fullmatch(i) for i in ids)
    assert len(set(ids)) == 4  # four calls, each answered under the same id


def test_id_mapping_is_deterministic_and_pinned() -> None:
    # Pinned literals: the hash scheme must not change between versions, or stored histories sent to
    # Mistral again would no longer match their earlier requests.
    assert mistral_call_id(OPENAI_ID) == OPENAI_ID_MAPPED == mistral_call_id(OPENAI_ID)
    assert MISTRAL_ID.fullmatch(OPENAI_ID_MAPPED)
    assert MISTRAL_ID.fullmatch(ANTHROPIC_ID_MAPPED)
    assert OPENAI_ID_MAPPED != ANTHROPIC_ID_MAPPED
    assert mistral_call_id("") != mistral_call_id("call_")
    first = Protocol().build_request("m", _history(), (), {})
    second = Protocol().build_request("m", _history(), (), {})
    assert first == second


def test_hash_collisions_within_a_request_are_resolved() -> None:
    # A valid id that happens to equal another id's replacement keeps its place; the other moves on.
    clash = mistral_call_id("call_x")
    table = map_call_ids(["call_x", clash, "call_y"])
    assert table[clash] == clash
    assert table["call_x"] == mistral_call_id("call_x", 1) != clash
    assert len(set(table.values())) == 3
    assert all(MISTRAL_ID.fullmatch(v) for v in table.values())


def test_a_request_never_gives_two_calls_the_same_id() -> None:
    clash = mistral_call_id("call_x")  # a valid id that a foreign id would hash to
    history = [
        Message(role="assistant", parts=[
            ToolCallPart(id="call_x", name="f", arguments={}, arguments_raw="{}"),
            ToolCallPart(id=clash, name="f", arguments={}, arguments_raw="{}"),
        ]),
        Message.tool_results([ToolResultPart(call_id="call_x", name="f", result=1),
                              ToolResultPart(call_id=clash, name="f", result=2)]),
    ]
    messages = Protocol().build_request("m", history, (), {})["messages"]
    call_ids = [c["id"] for c in messages[0]["tool_calls"]]
    assert call_ids == [mistral_call_id("call_x", 1), clash]
    assert [(m["tool_call_id"], m["content"]) for m in messages[1:]] == [(call_ids[0], "1"), (clash, "2")]


@pytest.mark.parametrize("valid", ["x2LypFllt", "ABCDEFGHI", "123456789"])
def test_valid_ids_are_kept(valid: str) -> None:
    assert map_call_ids([valid]) == {valid: valid}


@pytest.mark.parametrize("invalid", ["call_abc", "toolu_0123456789", "abcdefgh", "abcdefghij", "abc-efghi", ""])
def test_invalid_ids_are_replaced(invalid: str) -> None:
    new = map_call_ids([invalid])[invalid]
    assert MISTRAL_ID.fullmatch(new)
    assert new != invalid


def test_thinking_from_other_providers_and_redacted_thinking_are_dropped() -> None:
    history = [Message(role="assistant", parts=[
        ThinkingPart(text="secret", redacted=True, provider_data={"mistral": {"type": "thinking"}}),
        ThinkingPart(text="gemini thought", signature="abc", provider_data={"gemini": {}}),
        ThinkingPart(text="plain thought"),
        TextPart(text="Hi"),
    ])]
    body = Protocol().build_request("m", history, (), {})
    assert body["messages"] == [{"role": "assistant", "content": "Hi"}]


def test_settings_mapping_for_schema_named_tool_choice_and_extra_body() -> None:
    body = Protocol().build_request("m", [Message.user("hi")], TOOLS, {
        "tool_choice": {"name": "plus"},
        "output_schema": {"name": "answer", "schema": {"type": "object"}},
        "thinking": False,
        "extra_body": {"random_seed": 7, "max_tokens": 5},
        "max_tokens": 100,
    })
    assert body["tool_choice"] == {"type": "function", "function": {"name": "plus"}}
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True}}
    assert body["reasoning_effort"] == "none"
    assert body["random_seed"] == 7
    assert body["max_tokens"] == 5  # extra_body is applied last
    assert "stream_options" not in body
    assert "max_completion_tokens" not in body


def test_images_and_documents_use_mistral_chunk_types() -> None:
    from toolwire.messages import FilePart

    message = Message(role="user", parts=[
        TextPart(text="Look:"),
        FilePart(media_type="image/png", data="iVBOR"),
        FilePart(media_type="application/pdf", url="https://example.com/a.pdf"),
    ])
    body = Protocol().build_request("m", [message], (), {})
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Look:"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
        {"type": "document_url", "document_url": "https://example.com/a.pdf"},
    ]}]


@pytest.mark.anyio
async def test_a_recorded_mistral_turn_round_trips_into_the_next_request() -> None:
    outcome = await stream_body(MODEL, recorded_body("mistral/mistral-small_hybrid-reasoning-text-only.ruby_llm.sse"))
    body = Protocol().build_request("m", [Message.user("12*12?"), outcome.message, Message.user("and 13*13?")],
                                    (), {})
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": [{"type": "text", "text": outcome.message.parts[0].text}]},  # type: ignore[union-attr]
        {"type": "text", "text": "144"},
    ]}


def test_user_text_after_tool_results_is_bridged_by_an_assistant_turn() -> None:
    # An interrupted tool round followed by a new user message: tool → user would be a 400 at Mistral.
    from toolwire import Message, ToolCallPart, ToolResultPart
    from toolwire.wire.mistral import TOOL_RESULTS_BRIDGE

    history = [
        Message.user("Weather?"),
        Message(role="assistant", parts=[ToolCallPart(id="abcDEF123", name="w", arguments={}, arguments_raw="{}")]),
        Message.tool_results([ToolResultPart(call_id="abcDEF123", name="w", result={"error": "cancelled"},
                                             is_error=True)]),
        Message.user("Never mind, tell me a joke."),
    ]
    body = get_model("mistral:mistral-large-latest", api_key="k").build_request(history)[1]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "assistant", "user"]
    assert body["messages"][3] == {"role": "assistant", "content": TOOL_RESULTS_BRIDGE}
    # A normal round (results then the model's own answer) gets no bridge.
    normal = get_model("mistral:mistral-large-latest", api_key="k").build_request(history[:3])[1]
    assert [m["role"] for m in normal["messages"]] == ["user", "assistant", "tool"]
