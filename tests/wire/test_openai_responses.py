"""OpenAI Responses: recorded streams over HTTP, re-chunking, truncation, item order, request mapping."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.conftest import fixture_files, fixture_path
from tests.wire.helpers import chunked_transport, counter_ids, stream_body
from toolwire import (
    FilePart,
    InvalidToolCallPart,
    Message,
    ProviderStreamError,
    ProviderToolPart,
    StreamInterruptedError,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    get_model,
)
from toolwire._accumulate import Accumulator
from toolwire.cli import main
from toolwire.events import Event, ProviderToolEvent, ToolCallEnd, ToolCallStart, event_to_dict
from toolwire.replay import payload_lines_to_sse, replay
from toolwire.settings import ModelSettings
from toolwire.wire.openai_responses import KEY, OpenAIResponsesParser

MODEL = "openai-responses:gpt-5"
FIXTURES = fixture_files("openai-responses", ".sse", ".chunks.jsonl")


def body_of(name: str) -> bytes:
    raw = fixture_path(name).read_bytes()
    return payload_lines_to_sse(raw) if name.endswith(".chunks.jsonl") else raw


def payloads(body: bytes) -> list[dict[str, Any]]:
    """A deliberately naive reader of the recorded events, independent of toolwire's SSE decoder.

    A body cut mid-line ends with a piece of JSON that does not parse; that last piece is not an event.
    """
    out = []
    lines = body.splitlines()
    for number, line in enumerate(lines):
        if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
            try:
                out.append(orjson.loads(line[5:]))
            except orjson.JSONDecodeError:
                if number != len(lines) - 1:
                    raise
    return out


def done_items(body: bytes) -> dict[str, dict[str, Any]]:
    """Every `output_item.done` item of a recording, by item id."""
    return {p["item"]["id"]: p["item"] for p in payloads(body) if p["type"] == "response.output_item.done"}


def view(message: Message) -> list[tuple[Any, ...]]:
    """Parts as comparable tuples, with the protocol's item ids (long thinking as prefix + length)."""
    out: list[tuple[Any, ...]] = []
    for part in message.parts:
        data = (getattr(part, "provider_data", None) or {}).get(KEY, {})
        if isinstance(part, TextPart):
            out.append(("text", part.text))
        elif isinstance(part, ThinkingPart):
            out.append(("thinking", part.text[:30], len(part.text), data.get("item_id")))
        elif isinstance(part, ToolCallPart):
            out.append(("call", part.id, part.name, part.arguments, part.arguments_raw, data.get("item_id")))
        elif isinstance(part, InvalidToolCallPart):
            out.append(("invalid", part.id, part.name, part.arguments_raw))
        elif isinstance(part, ProviderToolPart):
            out.append(("provider_tool", part.id, part.name, part.status))
        else:
            out.append((part.type,))
    return out


# What each recording must assemble into, read off the stream by hand. Usage is
# (input, output, cached input, reasoning) tokens.
EXPECTED: dict[str, dict[str, Any]] = {
    "openai-responses/deepseek-v4_reasoning-then-function-call.pydantic-ai.sse": {
        "parts": [
            ("thinking", "The user asks about temperatur", 61, "fa6f3a83-5d25-46e8-9d03-1a89ce5cf2ba"),
            ("call", "call_00_xjY8Z2BvSlzgEmmw0DtH0464", "get_temperature", {"city": "Tokyo"}, '{"city": "Tokyo"}',
             "62bf2bb7-56af-4e3a-883b-83d4aad54da1"),
        ],
        "finish": "tool_calls", "usage": (366, 59, 256, 14), "error": None,
        "response_id": "1235b7ba-fdc9-4a1c-bfe4-6137c207baf3",
    },
    "openai-responses/gpt-4o_parallel-2-function-calls.mirascope.sse": {
        "parts": [
            ("call", "call_4l0LYGshWqEvG3DEq9hY8PKo", "secret_retrieval_tool", {"password": "mellon"},
             '{"password":"mellon"}', "fc_03573e2d83248b7c0068f966be406c8194b614ddb98cfce9fe"),
            ("call", "call_hG4DmWUygGVSGrsCV3zwCiZU", "secret_retrieval_tool", {"password": "radiance"},
             '{"password":"radiance"}', "fc_03573e2d83248b7c0068f966be7e148194868e9cbe2160c4ec"),
        ],
        "finish": "tool_calls", "usage": (36, 54, 0, 0), "error": None,
        "response_id": "resp_03573e2d83248b7c0068f966bd516481949f9edc17d44d51ed",
    },
    "openai-responses/gpt-4o_text-only-incomplete-max-tokens.mirascope.sse": {
        "parts": [("text", "Here is a list of all U.S. states:\n\n1. Alabama\n2. Alaska\n3. Arizona\n4. Arkansas\n"
                           "5. California\n6. Colorado\n7. Connecticut\n8. Delaware\n9. Florida\n10. Georgia")],
        "finish": "length", "usage": (14, 50, 0, 0), "error": None,
        "response_id": "resp_08e1aa358b9a82e50068f966c692d081978dca84b3c9d6fdcf",
    },
    "openai-responses/gpt-4o_text-then-function-call.mirascope.sse": {
        "parts": [
            ("text", '{"title":"Mistborn: The Final Empire","author":"Brandon Sanderson","pages":544,'
                     '"publication_year":2006}'),
            ("call", "call_gLsRpyrJp2V40WOFb5Cbbey0", "get_book_info", {"isbn": "0-7653-1178-X"},
             '{"isbn":"0-7653-1178-X"}', "fc_04541b2f7e2fe47a0069689dd19d9881978e67830fb7c36324"),
        ],
        "finish": "tool_calls", "usage": (197, 56, 0, 0), "error": None,
        "response_id": "resp_04541b2f7e2fe47a0069689dd09ce081979fa443640dd593dc",
    },
    "openai-responses/gpt-5-nano_function-call-empty-args.ruby_llm.sse": {
        "parts": [
            ("thinking", "", 0, "rs_0216a3dd84164ded016a85bf96281c8191ab15df9d8d514902"),
            ("call", "call_gAlMKYUezxsrjOsVqKjhG5Me", "best_language_to_learn", {}, "{}",
             "fc_0216a3dd84164ded016a85bf97d628819197ae1c0f194b2ad9"),
        ],
        "finish": "tool_calls", "usage": (58, 248, 0, 192), "error": None,
        "response_id": "resp_0216a3dd84164ded016a85bf95d47c81919304566617b50a2b",
    },
    "openai-responses/gpt-5-nano_response-failed-error.vercel.chunks.jsonl": {
        "parts": [], "finish": "error", "usage": None, "error": "insufficient_quota",
        "response_id": "resp_05500b38c2cd9bfc00691c7c9d222481a3b595421266dab424",
    },
    "openai-responses/gpt-5_reasoning-then-function-call.pydantic-ai.sse": {
        "parts": [
            ("thinking", "", 0, "rs_0050471a34b36ae60068c97bac4dcc819595fd0f80d6b3c405"),
            ("call", "call_CWXgs68YprAjp6t0371hiPOI", "final_result", {"result": 6666}, '{"result":6666}',
             "fc_0050471a34b36ae60068c97bf19d9c819590eaf42c0edc1042"),
        ],
        "finish": "tool_calls", "usage": (53, 469, 0, 448), "error": None,
        "response_id": "resp_0050471a34b36ae60068c97b94a480819587a9d70cf2979b33",
    },
    "openai-responses/gpt-5_reasoning-then-hosted-web-search-call-then-text.pydantic-ai.sse": {
        "parts": [
            ("thinking", "", 0, "rs_00a60507bf41223d0068c9d2fc927081a088e0b920cdfe3866"),
            ("provider_tool", "ws_00a60507bf41223d0068c9d30021d081a0962d80d50c12e317", "web_search", "completed"),
            ("thinking", "", 0, "rs_00a60507bf41223d0068c9d300b23481a0b77a03d911213220"),
            ("text", "San Francisco weather today (Tuesday, September 16, 2025): Mostly sunny and pleasant. "
                     "Current conditions around 71°F; expected high near 73°F and low around 58°F. "
                     "A light jacket is useful for the cooler evening. "),
        ],
        "finish": "stop", "usage": (9463, 582, 8320, 512), "error": None,
        "response_id": "resp_00a60507bf41223d0068c9d2fbf93481a0ba2a7796ae2cab4c",
    },
    "openai-responses/openrouter_gpt-oss-20b_no-event-lines-text-only.pydantic-ai.sse": {
        "parts": [("thinking", 'The user asks: "What is 2+2?" ', 85, "rs_tmp_2kbe7x16sax"), ("text", "4")],
        "finish": "stop", "usage": (78, 37, 0, 22), "error": None,
        "response_id": "gen-1764265411-Fu1iEX7h5MRWiL79lb94",
    },
    "openai-responses/xai-grok_reasoning-then-function-call-empty-args.ruby_llm.sse": {
        "parts": [
            ("thinking", "The question is: \"What's the b", 54, "rs_edc2154d-3567-97eb-8e5a-48f4f7c715f6"),
            ("call", "call-e90191c4-4a4c-44c2-92f5-98caf16932b6-0", "best_language_to_learn", {}, "{}",
             "fc_edc2154d-3567-97eb-8e5a-48f4f7c715f6_0"),
        ],
        "finish": "tool_calls", "usage": (289, 171, 128, 163), "error": None,
        "response_id": "edc2154d-3567-97eb-8e5a-48f4f7c715f6",
    },
}


def test_every_recording_has_an_expectation() -> None:
    if not FIXTURES:
        pytest.skip("the recorded provider fixtures are not present in this checkout")
    assert sorted(EXPECTED) == FIXTURES


@pytest.mark.anyio
@pytest.mark.parametrize("name", FIXTURES)
async def test_recorded_stream_over_http(name: str) -> None:
    expected = EXPECTED[name]
    outcome = await stream_body(MODEL, body_of(name), chunk_size=113)
    message = outcome.message
    assert view(message) == expected["parts"]
    assert outcome.response.finish_reason == expected["finish"]
    usage = outcome.response.usage
    got_usage = None if usage is None else (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
                                            usage.reasoning_tokens)
    assert got_usage == expected["usage"]
    assert message.metadata["response_id"] == expected["response_id"]
    assert message.metadata[KEY]["response_id"] == expected["response_id"]
    assert message.metadata["provider"] == "openai-responses"
    if expected["error"] is None:
        assert outcome.error is None
    else:
        assert isinstance(outcome.error, ProviderStreamError)
        assert outcome.error.error_type == expected["error"]
        assert outcome.error.partial_message == message
    assert outcome.events[-1].type == "message_end"
    assert outcome.events[-1].message == message
    # The history survives JSON storage unchanged, opaque reasoning data included.
    assert Message.from_json(message.to_json()) == message


@pytest.mark.parametrize("name", FIXTURES)
def test_streamed_result_matches_the_final_response_snapshot(name: str) -> None:
    # The terminal event repeats every output item whole: the deltas must add up to the same thing.
    body = body_of(name)
    events = payloads(body)
    final = next(p["response"] for p in events
                 if p["type"] in ("response.completed", "response.incomplete", "response.failed"))
    expected: list[tuple[Any, ...]] = []
    for item in final["output"]:
        if item["type"] == "message":
            expected.append(("text", "".join(c["text"] for c in item["content"])))
        elif item["type"] == "reasoning":
            texts = [s["text"] for s in item.get("summary") or []] or [c["text"] for c in item.get("content") or []]
            expected.append(("thinking", "\n\n".join(texts)))
        elif item["type"] == "function_call":
            expected.append(("call", item["call_id"], item["name"], item["arguments"]))
        else:
            expected.append(("provider_tool", item["id"], item["status"]))
    got: list[tuple[Any, ...]] = []
    message = replay("openai-responses", body).message
    for part in message.parts:
        if isinstance(part, TextPart):
            got.append(("text", part.text))
        elif isinstance(part, ThinkingPart):
            got.append(("thinking", part.text))
        elif isinstance(part, ToolCallPart):
            got.append(("call", part.id, part.name, part.arguments_raw))
        elif isinstance(part, ProviderToolPart):
            got.append(("provider_tool", part.id, part.status))
    assert got == expected
    # Each thinking part keeps its reasoning item exactly as its `output_item.done` delivered it.
    finished = done_items(body)
    for part in message.parts:
        if isinstance(part, ThinkingPart):
            record = part.provider_data[KEY]  # type: ignore[index]
            assert record["item"] == finished[record["item_id"]]


def test_hosted_web_search_is_provider_activity_never_a_local_call() -> None:
    name = "openai-responses/gpt-5_reasoning-then-hosted-web-search-call-then-text.pydantic-ai.sse"
    body = body_of(name)
    result = replay("openai-responses", body)
    assert result.message.tool_calls == [] and result.message.invalid_tool_calls == []
    assert not any(e.type.startswith("tool_call") for e in result.events)
    (search,) = [p for p in result.message.parts if isinstance(p, ProviderToolPart)]
    assert search.arguments == {"type": "search", "query": "weather: San Francisco, CA",
                                "sources": [{"type": "api", "name": "oai-weather"}]}
    assert search.provider_data == {KEY: {"item": done_items(body)[search.id]}}
    # Progress is shown as it happens: one event per status change, then the finished item.
    statuses = [e.part.status for e in result.events if isinstance(e, ProviderToolEvent)]
    assert statuses == ["in_progress", "searching", "completed", "completed"]


def test_reasoning_finished_after_the_next_item_keeps_its_data_openrouter_no_event_lines() -> None:
    # OpenRouter closes the reasoning item after the message item: the data lands on the thinking part.
    name = "openai-responses/openrouter_gpt-oss-20b_no-event-lines-text-only.pydantic-ai.sse"
    body = body_of(name)
    assert b"\nevent:" not in body and body.rstrip().endswith(b"data: [DONE]")
    thinking = replay("openai-responses", body).message.parts[0]
    assert isinstance(thinking, ThinkingPart)
    item = thinking.provider_data[KEY]["item"]  # type: ignore[index]
    assert item["content"] == [{"type": "reasoning_text", "text": thinking.text}]


@pytest.mark.parametrize("content", [b"", b"\x00\xff garbage", b"data: {not json\n\n", b"data: [1, 2]\n\n",
                                     b'data: {"type": "response.output_item.added", "item": 3}\n\n',
                                     b'data: {"type": "response.output_text.delta"}\n\n'])
def test_any_bytes_give_a_typed_error_never_an_exception(content: bytes) -> None:
    result = replay("openai-responses", content)
    assert result.error is not None
    assert result.error.error_type in {"incomplete_stream", "malformed_chunk", "unrecognised_body", "invalid_field"}
    assert result.message.parts == []


def test_cli_replays_the_payload_per_line_recording(capsys: pytest.CaptureFixture[str]) -> None:
    path = fixture_path("openai-responses/gpt-5-nano_response-failed-error.vercel.chunks.jsonl")
    assert main(["replay", "-p", "openai-responses", str(path), "--json"]) == 1
    data = orjson.loads(capsys.readouterr().out)
    assert data["error"]["type"] == "insufficient_quota"
    assert data["finish_reason"] == "error"


# -- the same stream cut at arbitrary byte boundaries gives the same result -------------------------


def _split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    pieces, last = [], 0
    for point in points:
        pieces.append(body[last:point])
        last = point
    pieces.append(body[last:])
    return pieces


def _parse(pieces: list[bytes]) -> tuple[Any, ...]:
    acc = Accumulator(id_factory=counter_ids())
    parser = OpenAIResponsesParser(acc)
    events: list[Event] = []
    for piece in pieces:
        parser.feed(piece)
        events.extend(acc.events)
        acc.events.clear()
    message = parser.close()
    events.extend(acc.events)
    error = acc.error.error_type if acc.error else None
    return [event_to_dict(e) for e in events], message.to_json(), acc.finish_reason, acc.usage, error


@pytest.mark.parametrize("name", FIXTURES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=60), crlf=st.booleans())
def test_rechunking_gives_identical_results(name: str, cuts: list[int], crlf: bool) -> None:
    body = body_of(name)
    if crlf:
        body = body.replace(b"\n", b"\r\n")
    assert _parse(_split(body, cuts)) == _parse([body])


@pytest.mark.parametrize("name", FIXTURES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=1 << 20))
def test_a_stream_cut_anywhere_runs_only_calls_whose_item_was_done(name: str, cut: int) -> None:
    body = body_of(name)
    prefix = body[:cut % (len(body) + 1)]
    result = replay("openai-responses", prefix)
    done_calls = {p["item"]["call_id"] for p in payloads(prefix)
                  if p["type"] == "response.output_item.done" and p["item"]["type"] == "function_call"}
    assert {c.id for c in result.message.tool_calls} <= done_calls
    terminal = any(p["type"] in ("response.completed", "response.incomplete", "response.failed", "error")
                   for p in payloads(prefix))
    if not terminal:
        assert result.error is not None and result.error.error_type == "incomplete_stream"
        assert result.finish_reason == "error"
        started = {p["item"]["call_id"] for p in payloads(prefix)
                   if p["type"] == "response.output_item.added" and p["item"]["type"] == "function_call"}
        assert {c.id for c in result.message.invalid_tool_calls} == started - done_calls


# -- truncation and completion signals ----------------------------------------------------------------

PARALLEL = "openai-responses/gpt-4o_parallel-2-function-calls.mirascope.sse"


@pytest.mark.anyio
async def test_stream_cut_inside_arguments_gives_an_invalid_call_gpt_4o_parallel_2_function_calls() -> None:
    body = body_of(PARALLEL)
    cut = body.index(b'"delta":"\\"radi"')  # inside the second call's arguments
    outcome = await stream_body(MODEL, body[:cut + 20], chunk_size=64)
    assert isinstance(outcome.error, StreamInterruptedError)
    assert outcome.error.error_type == "incomplete_stream"
    first, second = outcome.message.parts
    # The first call's item was done before the cut: it stays complete and runnable.
    assert first == ToolCallPart(id="call_4l0LYGshWqEvG3DEq9hY8PKo", name="secret_retrieval_tool",
                                 arguments={"password": "mellon"}, arguments_raw='{"password":"mellon"}',
                                 provider_data={KEY: {"item_id": "fc_03573e2d83248b7c0068f966be406c8194b614ddb98cfce9fe"}})
    assert isinstance(second, InvalidToolCallPart)
    assert second.id == "call_hG4DmWUygGVSGrsCV3zwCiZU"
    assert second.arguments_raw == '{"password":'
    assert outcome.error.partial_message == outcome.message
    ends = [e for e in outcome.events if isinstance(e, ToolCallEnd)]
    assert [type(e.call) for e in ends] == [ToolCallPart, InvalidToolCallPart]


def test_a_call_ends_at_its_item_done_before_later_items_gpt_4o_parallel_2_function_calls() -> None:
    body = body_of(PARALLEL)
    first_done = body.index(b"event: response.output_item.done")
    end_of_event = body.index(b"\n\n", first_done) + 2
    acc = Accumulator()
    parser = OpenAIResponsesParser(acc)
    parser.feed(body[:end_of_event])
    # Right after the first item's done event, before anything else arrives, its call is complete.
    assert isinstance(acc.events[-1], ToolCallEnd)
    assert acc.events[-1].call.id == "call_4l0LYGshWqEvG3DEq9hY8PKo"
    assert isinstance(acc.events[-1].call, ToolCallPart)
    assert acc.finish_reason is None
    acc.events.clear()
    parser.feed(body[end_of_event:])
    parser.close()
    kinds = [(type(e).__name__, e.index) for e in acc.events if isinstance(e, ToolCallStart | ToolCallEnd)]
    assert kinds == [("ToolCallStart", 1), ("ToolCallEnd", 1)]


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events)


CREATED = {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5", "status": "in_progress"}}


def _completed(status: str = "completed", **response: Any) -> dict[str, Any]:
    return {"type": f"response.{status}", "response": {"id": "resp_1", "status": status, **response}}


def test_hosts_that_send_only_whole_items_are_read_from_the_done_events() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Plan A."},
                                                                {"type": "summary_text", "text": "Plan B."}]}
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": "Calling.", "annotations": []}]}
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": '{"a": 1}',
            "status": "completed"}
    body = _sse(CREATED, *({"type": "response.output_item.done", "output_index": i, "item": item}
                           for i, item in enumerate([reasoning, message, call, call])), _completed())
    result = replay("openai-responses", body)
    # (The call's done event is repeated: still one call.)
    assert view(result.message) == [("thinking", "Plan A.\n\nPlan B.", 16, "rs_1"), ("text", "Calling."),
                                    ("call", "call_1", "f", {"a": 1}, '{"a": 1}', "fc_1")]
    assert result.finish_reason == "tool_calls"
    assert result.message.metadata[KEY] == {"response_id": "resp_1", "message_ids": ["msg_1"]}


def test_done_events_without_deltas_are_read_even_when_the_stream_is_then_cut() -> None:
    body = _sse(
        CREATED,
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}},
        {"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "content_index": 0,
         "text": "Whole text."},
    )
    result = replay("openai-responses", body)
    assert result.message.parts == [TextPart(text="Whole text.")]
    assert result.error is not None and result.error.error_type == "incomplete_stream"


def test_reasoning_text_arriving_after_the_next_item_began_stays_with_its_item() -> None:
    body = _sse(
        CREATED,
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "reasoning", "id": "rs_1", "summary": []}},
        {"type": "response.reasoning_text.delta", "item_id": "rs_1", "output_index": 0, "delta": "Think"},
        {"type": "response.output_item.added", "output_index": 1,
         "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "delta": "An"},
        {"type": "response.reasoning_text.delta", "item_id": "rs_1", "output_index": 0, "delta": "ing."},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "delta": "swer."},
        _completed(),
    )
    assert view(replay("openai-responses", body).message) == [("thinking", "Thinking.", 9, "rs_1"),
                                                              ("text", "Answer.")]


def test_each_text_part_is_sent_back_under_the_message_item_it_started_in() -> None:
    def message(item_id: str, text: str, index: int) -> list[dict[str, Any]]:
        return [
            {"type": "response.output_item.added", "output_index": index,
             "item": {"type": "message", "id": item_id, "role": "assistant", "content": []}},
            {"type": "response.output_text.delta", "item_id": item_id, "output_index": index, "delta": text},
        ]

    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"}
    body = _sse(
        CREATED, *message("msg_1", "One. ", 0), *message("msg_2", "Two.", 1),
        {"type": "response.output_item.done", "output_index": 2, "item": reasoning},
        *message("msg_3", "Three.", 3), _completed(),
    )
    answer = replay("openai-responses", body).message
    # Adjacent messages share a text part, so the part is named by the item it started in.
    assert view(answer) == [("text", "One. Two."), ("thinking", "", 0, "rs_1"), ("text", "Three.")]
    assert answer.metadata[KEY]["message_ids"] == ["msg_1", "msg_3"]
    items = get_model(MODEL, api_key="k").build_request([answer])[1]["input"]
    assert [(i["type"], i.get("id")) for i in items] == [("message", "msg_1"), ("reasoning", "rs_1"),
                                                         ("message", "msg_3")]


def test_summary_parts_stream_as_paragraphs_of_one_thinking_part() -> None:
    base = {"item_id": "rs_1", "output_index": 0}
    body = _sse(
        CREATED,
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1",
                                                                           "summary": []}},
        {"type": "response.reasoning_summary_part.added", "summary_index": 0, **base},
        {"type": "response.reasoning_summary_text.delta", "summary_index": 0, "delta": "First.", **base},
        {"type": "response.reasoning_summary_part.added", "summary_index": 1, **base},
        {"type": "response.reasoning_summary_text.delta", "summary_index": 1, "delta": "Second.", **base},
        {"type": "response.reasoning_summary_text.done", "summary_index": 1, "text": "Second.", **base},
        {"type": "response.output_item.added", "output_index": 1, "item": {"type": "reasoning", "id": "rs_2",
                                                                           "summary": []}},
        {"type": "response.reasoning_summary_text.delta", "summary_index": 0, "delta": "Other item.",
         "item_id": "rs_2", "output_index": 1},
        _completed(),
    )
    parts = replay("openai-responses", body).message.parts
    assert [(p.text, p.provider_data[KEY]["item_id"]) for p in parts] == [  # type: ignore[union-attr,index]
        ("First.\n\nSecond.", "rs_1"), ("Other item.", "rs_2")]


def test_incomplete_response_leaves_the_unfinished_call_invalid() -> None:
    added = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "write", "arguments": ""}
    body = _sse(
        CREATED,
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0,
         "delta": '{"text": "ab'},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {**added, "arguments": '{"text": "ab', "status": "incomplete"}},
        _completed("incomplete", incomplete_details={"reason": "max_output_tokens"},
                   usage={"input_tokens": 5, "output_tokens": 16}),
    )
    result = replay("openai-responses", body)
    assert result.finish_reason == "length"
    (part,) = result.message.parts
    assert isinstance(part, InvalidToolCallPart)
    assert part.arguments_raw == '{"text": "ab'
    assert result.error is None


def test_content_filter_and_documented_error_events() -> None:
    filtered = replay("openai-responses", _sse(
        CREATED, _completed("incomplete", incomplete_details={"reason": "content_filter"})))
    assert filtered.finish_reason == "content_filter"
    # The documented `error` event carries code and message at the top level.
    failed = replay("openai-responses", _sse(
        CREATED, {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down.", "param": None}))
    assert failed.finish_reason == "error"
    assert failed.error is not None and failed.error.error_type == "rate_limit_exceeded"
    assert failed.error.message == "The provider reported an error in the stream: Slow down."


@pytest.mark.anyio
async def test_provider_error_in_stream_is_a_typed_error_gpt_5_nano_response_failed() -> None:
    outcome = await stream_body(MODEL, body_of("openai-responses/gpt-5-nano_response-failed-error.vercel.chunks.jsonl"))
    assert isinstance(outcome.error, ProviderStreamError)
    assert "You exceeded your current quota" in str(outcome.error)
    assert outcome.error.provider == "openai-responses"


# -- request mapping ----------------------------------------------------------------------------------

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


async def send(messages: list[Message], settings: ModelSettings | None = None, *, answer: bytes | None = None,
               tools: tuple[ToolDefinition, ...] = (WEATHER,)) -> tuple[dict[str, Any], Message]:
    """Send `messages` through the real HTTP path; return the JSON body sent and the message received."""
    seen: list[httpx.Request] = []
    body = answer or _sse(CREATED, _completed())
    async with httpx.AsyncClient(transport=chunked_transport(body, seen=seen)) as client:
        model = get_model(MODEL, api_key="test", http_client=client)
        message = await model.request(messages, tools=tools, settings=settings)
    (request,) = seen
    assert request.url == "https://api.openai.com/v1/responses"
    assert request.headers["authorization"] == "Bearer test"
    sent: dict[str, Any] = orjson.loads(request.content)
    return sent, message


def _foreign_history() -> list[Message]:
    return [
        Message.system("Be brief."),
        Message(role="user", parts=[TextPart(text="Weather here?"),
                                    FilePart(media_type="image/png", data="iVBORw0KGgo="),
                                    FilePart(media_type="application/pdf", data="JVBERi0=", name="notes.pdf")]),
        Message(role="assistant", parts=[
            ThinkingPart(text="Need the city.", signature="sig-from-anthropic",
                         provider_data={"anthropic": {"x": 1}}),
            TextPart(text="Checking both."),
            ToolCallPart(id="toolu_1", name="get_weather", arguments={"city": "Boston"},
                         arguments_raw='{"city": "Boston"}'),
            InvalidToolCallPart(id="toolu_2", name="get_weather", arguments_raw='{"city": "Par', reason="cut off"),
        ], metadata={"provider": "anthropic"}),
        Message.tool_results([
            ToolResultPart(call_id="toolu_1", name="get_weather", result={"temp_c": 3}),
            ToolResultPart(call_id="toolu_2", name="get_weather", result="arguments were cut off", is_error=True),
        ]),
        Message.assistant("Boston is 3 °C."),
        Message.user("Thanks!"),
    ]


@pytest.mark.anyio
async def test_multi_round_history_maps_to_the_documented_request() -> None:
    sent, _ = await send(_foreign_history(), {"tool_choice": {"name": "get_weather"}, "parallel_tool_calls": False,
                                              "max_tokens": 500, "temperature": 0.2})
    assert sent == {
        "model": "gpt-5",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [
                {"type": "input_text", "text": "Weather here?"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"},
                {"type": "input_file", "filename": "notes.pdf", "file_data": "data:application/pdf;base64,JVBERi0="},
            ]},
            # Another provider's signed thinking means nothing here and is not sent.
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Checking both.", "annotations": []}]},
            {"type": "function_call", "call_id": "toolu_1", "name": "get_weather",
             "arguments": '{"city": "Boston"}'},
            {"type": "function_call", "call_id": "toolu_2", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "toolu_1", "output": '{"temp_c":3}'},
            {"type": "function_call_output", "call_id": "toolu_2", "output": "arguments were cut off"},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Boston is 3 °C.", "annotations": []}]},
            {"role": "user", "content": [{"type": "input_text", "text": "Thanks!"}]},
        ],
        "stream": True,
        "tools": [{"type": "function", "name": "get_weather", "description": "Current weather for a city.",
                   "parameters": WEATHER.parameters, "strict": False}],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": False,
        "max_output_tokens": 500,
        "temperature": 0.2,
    }


@pytest.mark.anyio
async def test_settings_map_to_reasoning_structured_output_and_extra_body() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    sent, _ = await send([Message.user("n?")], {"thinking": True, "output_schema": {"name": "count", "schema": schema},
                                                 "extra_body": {"service_tier": "flex"}}, tools=())
    assert sent == {
        "model": "gpt-5",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "n?"}]}],
        "stream": True,
        "reasoning": {"summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "text": {"format": {"type": "json_schema", "name": "count", "schema": schema, "strict": True}},
        "service_tier": "flex",
    }
    strict_tool = ToolDefinition(name="f", parameters=schema, strict=True)
    sent, _ = await send([Message.user("n?")], {"thinking": "low", "stateful": True, "tool_choice": "required"},
                         tools=(strict_tool,))
    assert sent["reasoning"] == {"effort": "low", "summary": "auto"}
    assert "store" not in sent and "include" not in sent  # stored server-side: nothing to carry
    assert sent["tools"] == [{"type": "function", "name": "f", "parameters": schema, "strict": True}]
    assert sent["tool_choice"] == "required"


REASONING_CALL = "openai-responses/gpt-5_reasoning-then-function-call.pydantic-ai.sse"


@pytest.mark.anyio
async def test_reasoning_item_goes_back_before_its_call_gpt_5_reasoning_then_function_call() -> None:
    body = body_of(REASONING_CALL)
    question = Message.user("Calculate 100 * 200 / 3")
    _, answer = await send([question], {"thinking": "low"}, answer=body)
    (call,) = answer.tool_calls
    result = Message.tool_results([ToolResultPart(call_id=call.id, name=call.name, result="ok")])
    sent, _ = await send([question, answer, result], {"thinking": "low"})
    reasoning = done_items(body)["rs_0050471a34b36ae60068c97bac4dcc819595fd0f80d6b3c405"]
    assert reasoning["encrypted_content"].startswith("gAAAAABoyXvxI6jw")  # the done item's, not the added one's
    assert sent["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "Calculate 100 * 200 / 3"}]},
        reasoning,
        {"type": "function_call", "call_id": "call_CWXgs68YprAjp6t0371hiPOI", "name": "final_result",
         "arguments": '{"result":6666}', "id": "fc_0050471a34b36ae60068c97bf19d9c819590eaf42c0edc1042"},
        {"type": "function_call_output", "call_id": "call_CWXgs68YprAjp6t0371hiPOI", "output": "ok"},
    ]
    assert sent["store"] is False and sent["include"] == ["reasoning.encrypted_content"]


@pytest.mark.anyio
async def test_reasoning_summary_round_trips_unchanged_xai_grok_reasoning_then_function_call() -> None:
    name = "openai-responses/xai-grok_reasoning-then-function-call-empty-args.ruby_llm.sse"
    body = body_of(name)
    _, answer = await send([Message.user("What's the best language to learn?")], answer=body)
    sent, _ = await send([Message.user("What's the best language to learn?"), answer])
    assert sent["input"][1] == done_items(body)["rs_edc2154d-3567-97eb-8e5a-48f4f7c715f6"]
    assert sent["input"][1]["summary"] == [
        {"text": "The question is: \"What's the best language to learn?\"\n", "type": "summary_text"}]
    assert sent["input"][2]["type"] == "function_call"


@pytest.mark.anyio
async def test_hosted_tool_items_and_message_ids_go_back_in_order_gpt_5_web_search() -> None:
    name = "openai-responses/gpt-5_reasoning-then-hosted-web-search-call-then-text.pydantic-ai.sse"
    body = body_of(name)
    _, answer = await send([Message.user("Weather in SF?")], answer=body)
    sent, _ = await send([Message.user("Weather in SF?"), answer, Message.user("And tomorrow?")])
    items = done_items(body)
    (text,) = [p for p in answer.parts if isinstance(p, TextPart)]
    assert sent["input"][1:] == [
        items["rs_00a60507bf41223d0068c9d2fc927081a088e0b920cdfe3866"],
        items["ws_00a60507bf41223d0068c9d30021d081a0962d80d50c12e317"],
        items["rs_00a60507bf41223d0068c9d300b23481a0b77a03d911213220"],
        {"type": "message", "role": "assistant", "id": "msg_00a60507bf41223d0068c9d30b055481a0b0ee28a021919c94",
         "status": "completed", "content": [{"type": "output_text", "text": text.text, "annotations": []}]},
        {"role": "user", "content": [{"type": "input_text", "text": "And tomorrow?"}]},
    ]


def _stored_only_reasoning() -> Message:
    return Message(role="assistant", parts=[
        ThinkingPart(text="", provider_data={KEY: {"item_id": "rs_1", "item": {"type": "reasoning", "id": "rs_1",
                                                                               "summary": []}}}),
        ToolCallPart(id="call_1", name="get_weather", arguments={"city": "Oslo"}, arguments_raw='{"city":"Oslo"}',
                     provider_data={KEY: {"item_id": "fc_1"}}),
    ], metadata={KEY: {"response_id": "resp_0"}})


@pytest.mark.anyio
async def test_reasoning_known_only_by_id_is_dropped_with_its_ids_when_nothing_is_stored() -> None:
    history = [Message.user("Oslo?"), _stored_only_reasoning(),
               Message.tool_results([ToolResultPart(call_id="call_1", name="get_weather", result=1)])]
    stored, _ = await send(history)
    assert stored["input"][1:3] == [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Oslo"}',
         "id": "fc_1"},
    ]
    # With store=false the host cannot look rs_1 up, and an item id without its reasoning is refused.
    stateless, _ = await send(history, {"thinking": "low"})
    assert stateless["input"][1:] == [
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "1"},
    ]


@pytest.mark.anyio
async def test_item_data_from_another_host_of_the_protocol_is_not_sent() -> None:
    foreign = Message(role="assistant", parts=_stored_only_reasoning().parts,
                      metadata={"provider": "some-other-host", KEY: {"response_id": "resp_0"}})
    history = [Message.user("Oslo?"), foreign,
               Message.tool_results([ToolResultPart(call_id="call_1", name="get_weather", result=1)])]
    sent, _ = await send(history, {"stateful": True})
    assert "previous_response_id" not in sent
    assert sent["input"][1] == {"type": "function_call", "call_id": "call_1", "name": "get_weather",
                                "arguments": '{"city":"Oslo"}'}
    assert len(sent["input"]) == 3


@pytest.mark.anyio
async def test_stateful_mode_sends_only_the_new_items_gpt_4o_parallel_2_function_calls() -> None:
    system, question = Message.system("Use the tools."), Message.user("Get both secrets.")
    first, answer = await send([system, question], {"stateful": True}, answer=body_of(PARALLEL))
    assert "previous_response_id" not in first and "store" not in first
    results = Message.tool_results([ToolResultPart(call_id=c.id, name=c.name, result=f"secret {i}")
                                    for i, c in enumerate(answer.tool_calls)])
    history = [system, question, answer, results]
    sent, _ = await send(history, {"stateful": True})
    assert sent == {
        "model": "gpt-5",
        "instructions": "Use the tools.",  # instructions are not carried over by previous_response_id
        "input": [
            {"type": "function_call_output", "call_id": "call_4l0LYGshWqEvG3DEq9hY8PKo", "output": "secret 0"},
            {"type": "function_call_output", "call_id": "call_hG4DmWUygGVSGrsCV3zwCiZU", "output": "secret 1"},
        ],
        "previous_response_id": "resp_03573e2d83248b7c0068f966bd516481949f9edc17d44d51ed",
        "stream": True,
        "tools": sent["tools"],
    }
    # Without the opt-in the whole history is sent, calls with their item ids.
    stateless, _ = await send(history)
    assert "previous_response_id" not in stateless
    assert [i.get("type", i.get("role")) for i in stateless["input"]] == [
        "user", "function_call", "function_call", "function_call_output", "function_call_output"]
    assert stateless["input"][1]["id"] == "fc_03573e2d83248b7c0068f966be406c8194b614ddb98cfce9fe"


@pytest.mark.anyio
async def test_stateful_mode_without_a_response_to_chain_on_sends_everything() -> None:
    history = _foreign_history()
    sent, _ = await send(history, {"stateful": True})
    assert "previous_response_id" not in sent
    assert len(sent["input"]) == 8
