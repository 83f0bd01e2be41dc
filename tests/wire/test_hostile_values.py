"""Odd and hostile values, replayed without a network: one regression test per hostile-input item that
is about what a body says (the faults of the transport are in tests/faults). Each cites its item."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from toolwire._partial_json import PartialJSON
from toolwire.cli import main
from toolwire.messages import InvalidToolCallPart, TextPart, ThinkingPart, ToolCallPart
from toolwire.replay import replay


def sse(*payloads: Any, done: bool = False) -> bytes:
    return b"".join(b"data: " + orjson.dumps(p) + b"\n\n" for p in payloads) + (b"data: [DONE]\n\n" if done else b"")


def named(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(f"event: {n}\n".encode() + b"data: " + orjson.dumps(d) + b"\n\n" for n, d in events)


def chat(delta: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
    return {"id": "c", "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


# -- items 1 and 2: a field of the wrong type, in every protocol --------------------------------------

WRONG_TEXT = {
    "openai-chat": (sse(chat({"content": "ok "}), chat({"content": 5})), "choices[0].delta.content"),
    "mistral": (sse(chat({"content": "ok "}), chat({"content": 5})), "choices[0].delta.content"),
    "anthropic": (named(("content_block_start", {"type": "content_block_start", "index": 0,
                                                 "content_block": {"type": "text", "text": "ok "}}),
                        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                 "delta": {"type": "text_delta", "text": ["x"]}})), "delta.text"),
    "openai-responses": (sse({"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "delta": "ok "},
                             {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "delta": {}}),
                         "delta"),
    "gemini": (sse({"candidates": [{"content": {"parts": [{"text": "ok "}]}}]},
                   {"candidates": [{"content": {"parts": [{"text": 7}]}}]}), "candidates[0].content.parts[].text"),
    "ollama": (b'{"message": {"content": "ok "}}\n{"message": {"content": [1]}}\n', "message.content"),
    "cohere": (sse({"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "ok "}}}},
                   {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": 1.5}}}}),
               "delta.message.content.text"),
}


@pytest.mark.parametrize("protocol", sorted(WRONG_TEXT))
def test_text_of_the_wrong_type_is_an_invalid_field_error_that_keeps_the_text_before(protocol: str) -> None:
    """Hostile-input item 1: a text delta that is a number, list or object, in each protocol."""
    body, field = WRONG_TEXT[protocol]
    result = replay(protocol, body)
    assert result.error is not None and result.error.error_type == "invalid_field"
    assert f"`{field}` as " in result.error.message and protocol in result.error.message
    assert result.message.parts == [TextPart(text="ok ")]
    assert result.message.metadata["incomplete"] is True


def test_arguments_of_the_wrong_type_leave_no_call_to_run() -> None:
    """Hostile-input item 1: an argument fragment that is a number (the old code failed in `raw`)."""
    body = sse(chat({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a"'}}]}),
               chat({"tool_calls": [{"index": 0, "function": {"arguments": 5}}]}), chat({}, "tool_calls"))
    result = replay("openai-chat", body)
    assert result.error is not None and result.error.error_type == "invalid_field"
    assert result.message.parts == [InvalidToolCallPart(
        id="call_1", name="f", arguments_raw='{"a"',
        reason="The stream ended before this call's arguments were complete, so it was not run.")]


@pytest.mark.parametrize(("protocol", "body", "field"), [
    ("anthropic", named(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
        "type": "tool_use", "id": 42, "name": "f", "input": {}}})), "content_block.id"),
    ("openai-responses", sse({"type": "response.output_item.added", "output_index": 0, "item": {
        "type": "function_call", "id": "fc", "call_id": ["x"], "name": "f", "arguments": ""}}), "item.call_id"),
    ("gemini", sse({"candidates": [{"content": {"parts": [{"functionCall": {"name": {"a": 1}, "args": {}}}]}}]}),
     "functionCall.name"),
    ("ollama", b'{"message": {"tool_calls": [{"id": 7, "function": {"name": "f", "arguments": {}}}]}}\n',
     "message.tool_calls[].id"),
    ("cohere", sse({"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": {
        "id": "c1", "function": {"name": 3, "arguments": ""}}}}}), "tool_calls.function.name"),
    ("anthropic", named(("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                           "usage": {"output_tokens": "12"}})), "usage.output_tokens"),
    ("gemini", sse({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "STOP"}],
                    "usageMetadata": {"promptTokenCount": [3]}}), "usageMetadata.promptTokenCount"),
    ("ollama", b'{"message": {"content": "x"}, "done": true, "eval_count": "9"}\n', "eval_count"),
    ("openai-responses", sse({"type": "response.completed", "response": {"usage": {"input_tokens": 1.5}}}),
     "response.usage.input_tokens"),
])
def test_ids_names_and_counts_of_the_wrong_type_are_refused_where_they_enter(protocol: str, body: bytes,
                                                                            field: str) -> None:
    """Hostile-input item 2: a numeric or list id, an object name, a string token count."""
    result = replay(protocol, body)
    assert result.error is not None and result.error.error_type == "invalid_field", result.error
    assert field in result.error.message
    assert result.message.tool_calls == []
    assert result.usage is None or all(type(v) is int or v is None for v in (result.usage.input_tokens,
                                                                             result.usage.output_tokens))


def test_a_repeated_call_id_gets_a_fresh_one_so_every_call_can_be_answered() -> None:
    """Hostile-input item 2: ids stay unique within a response."""
    start = {"type": "content_block_start", "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f",
                                                              "input": {}}}
    body = named(("content_block_start", {**start, "index": 0}), ("content_block_stop", {"type": "content_block_stop",
                                                                                         "index": 0}),
                 ("content_block_start", {**start, "index": 1}), ("content_block_stop", {"type": "content_block_stop",
                                                                                         "index": 1}),
                 ("message_stop", {"type": "message_stop"}))
    ids = [c.id for c in replay("anthropic", body).message.tool_calls]
    assert len(ids) == 2 and ids[0] == "toolu_1" and ids[1] != "toolu_1"


# -- item 3: deep JSON ------------------------------------------------------------------------------


def test_arguments_nested_a_thousand_levels_make_an_invalid_call_not_a_recursion_error() -> None:
    """Hostile-input item 3: `_partial_json` previews stop at the depth limit; the call is refused."""
    arguments = '{"a": ' + "[" * 1000 + "]" * 1000 + "}"
    pieces = [arguments[i:i + 50] for i in range(0, len(arguments), 50)]
    body = sse(chat({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": ""}}]}),
               *[chat({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces],
               chat({}, "tool_calls"))
    result = replay("openai-chat", body, chunk_size=64)
    assert result.error is None
    (call,) = result.message.parts
    assert isinstance(call, InvalidToolCallPart) and "more than 128 levels" in call.reason
    assert call.arguments_raw == arguments
    parser = PartialJSON()
    parser.feed(arguments[:3000])
    assert parser.snapshot() is not None


@pytest.mark.parametrize("protocol", ["gemini", "ollama"])
def test_whole_call_arguments_nested_too_deeply_make_an_invalid_call(protocol: str) -> None:
    """Hostile-input item 3: a whole call (Gemini, Ollama) whose arguments nest 300 levels."""
    deep: Any = "x"
    for _ in range(300):
        deep = {"k": deep}
    # (orjson writes at most 255 levels: the standard library writes the body)
    if protocol == "gemini":
        body = b"data: " + json.dumps({"candidates": [{"content": {"parts": [{"functionCall": {
            "name": "f", "args": deep}}]}, "finishReason": "STOP"}]}).encode() + b"\n\n"
    else:
        body = json.dumps({"message": {"tool_calls": [{"function": {"name": "f", "arguments": deep}}]},
                           "done": True}).encode() + b"\n"
    result = replay(protocol, body)
    assert result.message.tool_calls == []
    assert "more than 128 levels" in result.message.invalid_tool_calls[0].reason


@pytest.mark.parametrize(("arguments", "expect"), [
    ('{"a": ' + "[" * 120 + "]" * 120 + "}", "a"),
    ('{"big": 123456789012345678901234567890}', "big"),
])
def test_replay_json_prints_deep_and_huge_values_without_a_traceback(
        tmp_path: Any, capsys: pytest.CaptureFixture[str], arguments: str, expect: str) -> None:
    """Hostile-input item 3: `toolwire replay --json` on valid JSON that orjson cannot write back."""
    body = sse(chat({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": arguments}}]}),
               chat({}, "tool_calls"))
    path = tmp_path / "body.sse"
    path.write_bytes(body)
    assert main(["replay", "-p", "openai-chat", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert expect in data["message"]["parts"][0]["arguments"]
    assert main(["replay", "-p", "openai-chat", str(path)]) == 0
    assert "assembled message" in capsys.readouterr().out


def test_gemini_integral_numbers_beyond_double_precision_stay_numbers_json_can_write() -> None:
    """Hostile-input item 3: a streamed `numberValue` of 1e30 is kept as a float, never a >64-bit int."""
    body = sse({"candidates": [{"content": {"parts": [{"functionCall": {
        "name": "f", "willContinue": True, "partialArgs": [{"jsonPath": "$.n", "numberValue": 1e30}]}}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {}}]}, "finishReason": "STOP"}]})
    result = replay("gemini", body)
    (call,) = result.message.tool_calls
    assert call.arguments == {"n": 1e30}
    orjson.dumps(result.to_json_data())


# -- item 9: the wrong protocol --------------------------------------------------------------------


def test_a_body_read_with_the_wrong_protocol_says_so() -> None:
    """Hostile-input item 9: an Anthropic body replayed as OpenAI chat."""
    body = named(("message_start", {"type": "message_start", "message": {"id": "m"}}),
                 ("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": "hi"}}))
    result = replay("openai-chat", body)
    assert result.error is not None and result.error.error_type == "unrecognised_body"
    assert "none is a openai-chat event" in result.error.message and "--protocol is right" in result.error.message


def test_a_stream_cut_after_its_first_event_is_still_incomplete_not_unrecognised() -> None:
    """Hostile-input item 9: the new diagnosis never replaces the plain truncation message."""
    result = replay("openai-chat", sse({"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}))
    assert result.error is not None and result.error.error_type == "incomplete_stream"
    assert result.error.message == "The stream ended before the provider said the response was complete."


# -- item 11: several choices ----------------------------------------------------------------------


def test_openai_n_2_assembles_choice_0_and_never_splices_the_other() -> None:
    """Hostile-input item 11: interleaved choices with text and calls."""
    def call(index: int, piece: dict[str, Any]) -> dict[str, Any]:
        return chat({"tool_calls": [{"index": 0, **piece}]}, index=index)

    body = sse(chat({"content": "I'm"}, index=0), chat({"content": "I'm"}, index=1),
               chat({"content": " unable"}, index=0), chat({"content": " sure"}, index=1),
               call(0, {"id": "call_a", "function": {"name": "f", "arguments": '{"x": '}}),
               call(1, {"id": "call_b", "function": {"name": "g", "arguments": '{"y": '}}),
               call(0, {"function": {"arguments": "1}"}}), call(1, {"function": {"arguments": "2}"}}),
               chat({}, "tool_calls", index=1), chat({}, "tool_calls", index=0), done=True)
    result = replay("openai-chat", body)
    assert result.error is None
    assert result.message.text == "I'm unable"
    assert [(c.id, c.name, c.arguments) for c in result.message.tool_calls] == [("call_a", "f", {"x": 1})]
    assert result.message.metadata["other_choices_ignored"] is True


# -- item 12: [DONE] without a finish reason ---------------------------------------------------------


def test_done_without_a_finish_reason_completes_the_calls() -> None:
    """Hostile-input item 12 (Snowflake Cortex, some OpenRouter upstreams)."""
    body = sse(chat({"content": "Sure."}),
               chat({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a": 1}'}}]}),
               done=True)
    result = replay("openai-chat", body)
    assert result.error is None and result.finish_reason == "tool_calls"
    assert [(c.id, c.arguments) for c in result.message.tool_calls] == [("call_1", {"a": 1})]


# -- item 13: Responses hosts that change item_id on every event --------------------------------------


def test_responses_items_are_keyed_by_output_index_when_item_ids_change() -> None:
    """Hostile-input item 13 (seen from GitHub Copilot's endpoint)."""
    body = sse(
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "r1"}},
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "item_id": "r2", "delta": "Think"},
        {"type": "response.reasoning_summary_text.done", "output_index": 0, "item_id": "r3", "text": "Think"},
        {"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "r4",
                                                                          "summary": [{"text": "Think"}]}},
        {"type": "response.output_item.added", "output_index": 1, "item": {"type": "message", "id": "m1"}},
        {"type": "response.output_text.delta", "output_index": 1, "item_id": "m2", "delta": "Hel"},
        {"type": "response.output_text.delta", "output_index": 1, "item_id": "m3", "delta": "lo"},
        {"type": "response.output_text.done", "output_index": 1, "item_id": "m4", "text": "Hello"},
        {"type": "response.output_item.done", "output_index": 1, "item": {
            "type": "message", "id": "m5", "content": [{"type": "output_text", "text": "Hello"}]}},
        {"type": "response.completed", "response": {"status": "completed"}},
    )
    parts = replay("openai-responses", body).message.parts
    assert [(type(p).__name__, getattr(p, "text", None)) for p in parts] == [
        ("ThinkingPart", "Think"), ("TextPart", "Hello")]


# -- item 14: refusals -----------------------------------------------------------------------------


def test_a_chat_refusal_is_the_answer_text_marked_as_a_refusal() -> None:
    """Hostile-input item 14 (openai-chat `delta.refusal`)."""
    body = sse(chat({"refusal": "I'm sorry, "}), chat({"refusal": "I can't help with that."}), chat({}, "stop"))
    result = replay("openai-chat", body)
    assert result.message.parts == [TextPart(text="I'm sorry, I can't help with that.")]
    assert result.message.metadata["refusal"] is True
    assert [e.type for e in result.events][:2] == ["text_delta", "text_delta"]


def test_a_responses_refusal_is_represented_the_same_way() -> None:
    """Hostile-input item 14 (Responses `response.refusal.delta` and the refusal content part)."""
    body = sse(
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "m"}},
        {"type": "response.refusal.delta", "output_index": 0, "item_id": "m", "delta": "I can't help with that."},
        {"type": "response.refusal.done", "output_index": 0, "item_id": "m", "refusal": "I can't help with that."},
        {"type": "response.output_item.done", "output_index": 0, "item": {
            "type": "message", "id": "m", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}},
        {"type": "response.completed", "response": {"status": "completed"}},
    )
    result = replay("openai-responses", body)
    assert result.message.parts == [TextPart(text="I can't help with that.")]
    assert result.message.metadata["refusal"] is True
    # A host that sends only the finished item:
    whole = replay("openai-responses", sse(
        {"type": "response.output_item.done", "output_index": 0, "item": {
            "type": "message", "id": "m", "content": [{"type": "refusal", "refusal": "No."}]}},
        {"type": "response.completed", "response": {"status": "completed"}}))
    assert whole.message.parts == [TextPart(text="No.")] and whole.message.metadata["refusal"] is True


# -- item 15: Gemini numeric enums -----------------------------------------------------------------


@pytest.mark.parametrize(("number", "reason", "raw"), [(1, "stop", "STOP"), (2, "length", "MAX_TOKENS"),
                                                      (3, "content_filter", "SAFETY"), (99, "stop", "finishReason_99")])
def test_gemini_numeric_finish_reasons_are_mapped(number: int, reason: str, raw: str) -> None:
    """Hostile-input item 15: requests that ask for integer enums get `"finishReason": 2`."""
    body = sse({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": number}]})
    result = replay("gemini", body)
    assert result.finish_reason == reason
    finish = next(e for e in result.events if e.type == "finish")
    assert finish.raw_reason == raw  # type: ignore[union-attr]


def test_gemini_numeric_block_reason_is_mapped() -> None:
    """Hostile-input item 15: `promptFeedback.blockReason` as a number."""
    result = replay("gemini", sse({"promptFeedback": {"blockReason": 1}}))
    assert result.finish_reason == "content_filter"
    assert result.message.metadata["block_reason"] == "SAFETY"


# -- item 16: UTF-16 surrogate halves split across deltas --------------------------------------------


def test_surrogate_halves_split_across_text_deltas_are_joined() -> None:
    """Hostile-input item 16: `"\\ud83d"` then `"\\ude00"`, as a proxy slicing UTF-16 sends them."""
    body = (b'data: {"choices": [{"index": 0, "delta": {"content": "smile \\ud83d"}}]}\n\n'
            b'data: {"choices": [{"index": 0, "delta": {"content": "\\ude00!"}}]}\n\n'
            b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n')
    result = replay("openai-chat", body, chunk_size=7)
    assert result.error is None
    assert result.message.text == "smile \U0001f600!"


def test_surrogate_halves_split_across_argument_fragments_are_joined() -> None:
    """Hostile-input item 16: the same inside a call's argument text; the call stays runnable."""
    body = (b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": '
            b'{"name": "f", "arguments": "{\\"t\\": \\"\\ud83d"}}]}}]}\n\n'
            b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": '
            b'{"arguments": "\\ude00\\"}"}}]}}]}\n\n'
            b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}\n\n')
    result = replay("openai-chat", body)
    assert [c.arguments for c in result.message.tool_calls] == [{"t": "\U0001f600"}]


def test_a_lone_surrogate_half_becomes_a_replacement_character() -> None:
    """Hostile-input item 16: half a character that never gets its other half is not kept as a lone
    surrogate (no UTF-8 encoder accepts one)."""
    body = (b'data: {"choices": [{"index": 0, "delta": {"content": "a\\ude00b"}}]}\n\n'
            b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n')
    result = replay("openai-chat", body)
    assert result.message.text == "a\ufffdb"
    assert isinstance(result.message.parts[0], TextPart)
    assert not any(isinstance(p, (ThinkingPart, ToolCallPart)) for p in result.message.parts)


def test_gemini_partial_args_cannot_ask_for_a_billion_array_elements() -> None:
    """Hostile-input item 5 (memory): an array index far past the end is refused, not filled with nulls."""
    body = sse({"candidates": [{"content": {"parts": [{"functionCall": {
        "name": "f", "willContinue": True,
        "partialArgs": [{"jsonPath": "$.items[999999999]", "numberValue": 1}]}}]}}]})
    result = replay("gemini", body)
    assert result.error is not None and result.error.error_type == "malformed_chunk"
    assert "skips to element 999999999" in result.error.message
    assert result.message.tool_calls == []
